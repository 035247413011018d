"""Guards on eviction: which pods no victim policy may take, and which it should spare.

Pure functions over specs and tasks, so each rule is tested on its own and an action's
victim rule (`eviction._eligible`) only asks them:

- **minimum runtime** (seed 000: a pod that just started has not yet earned anything,
  evicting it wastes its start-up): the `minRuntime` argument of reclaim and preempt,
  overridden by the `volcano.sh/min-runtime` annotation of the victim's queue, itself
  overridden by that of its PodGroup (the most specific wins). A pod younger than its
  minimum runtime, counted from `status.startTime` (from its creation without one), is
  never a victim.
- **PodDisruptionBudgets**, as kube-scheduler and Volcano's `pdb` plugin read them: each
  budget allows `status.disruptionsAllowed` disruptions (computed from its spec and the
  pods it selects when the status does not say); victims are counted against every
  budget of their namespace that selects them, in the order given, and a victim that
  takes a budget below zero violates it. Evicting such victims is not forbidden, only
  less preferred: kube-scheduler picks victims that violate no budget first.

- **a cap per job** (seed 002's incident: 48 GPUs asked, 376 evicted): what is evicted
  for one job in a session is at most `maxEvictionRatio` times what the job asks, in
  GPUs when it asks GPUs, else in its share of the cluster. Its first plan always may
  go, since a gang cannot be evicted in part: a one-GPU pod may still take an 8-GPU
  gang's node. A pod without a PodGroup counts with the other pods of its controller
  (a ReplicaSet of 48 pods is one job here, as it is to its owner).

Protection by annotation (`volcano.sh/preemptable`, seed 000's
`elastic.gpu/preemptible`) is read where objects are read (`objects.read_preemptable`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vscheduler.matching import expression_matches
from vscheduler.model import TaskStatus, is_bare_job
from vscheduler.plugin import Argument, ArgumentError
from vscheduler.resources import Resource, gpus_of, share_of

if TYPE_CHECKING:
    from vscheduler.model import Job, Task
    from vscheduler.specs import DisruptionBudget, Pod

__all__ = [
    "MIN_RUNTIME_ANNOTATION",
    "DurationArgument",
    "EvictionCap",
    "allowances",
    "allowed_disruptions",
    "budget_selects",
    "min_runtime_of",
    "parse_duration",
    "split_by_budgets",
    "started_at",
    "too_young",
]

# On a Queue or a PodGroup: the least a pod of it runs before it may be a victim.
MIN_RUNTIME_ANNOTATION = "volcano.sh/min-runtime"

# Go's time.ParseDuration units, in seconds.
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
          "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """A Go duration (`90s`, `10m`, `1h30m`, `1.5h`, `0`) in seconds, as
    `time.ParseDuration` reads it; ValueError for anything else. Negative durations mean
    nothing for a minimum runtime and are refused too."""
    if not isinstance(text, str) or not text or len(text) > 64:
        raise ValueError(f"not a duration (like 90s, 10m or 1h30m): {text!r}")
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(text):
        match = _PART.match(text, position)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"not a duration (like 90s, 10m or 1h30m): {text!r}")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not math.isfinite(total):
        raise ValueError(f"not a duration (like 90s, 10m or 1h30m): {text!r}")
    return total


class DurationArgument(Argument):
    """An argument written as a Go duration, handed to the plugin or action in seconds:
    a bad one is refused with the conf, before any scheduling. With `positive`, zero is
    refused too (a waiting time of 0 would not mean "off")."""

    __slots__ = ("positive",)

    def __init__(self, key: str, type: type, default: Any = None, help: str = "", *,
                 positive: bool = False, required: bool = False) -> None:
        super().__init__(key, type, default, help, required=required)
        self.positive = positive

    def convert(self, raw: Any) -> Any:
        if isinstance(raw, int | float) and not isinstance(raw, bool) and raw == 0:
            seconds = 0.0  # a bare 0, as YAML reads `minRuntime: 0`
        else:
            try:
                seconds = parse_duration(raw)
            except ValueError:
                raise ArgumentError(f"must be a duration like 90s, 10m or 1h30m, got "
                                    f"{raw!r}") from None
        if self.positive and seconds <= 0:
            raise ArgumentError(f"must be a duration above zero, like 90s, 10m or 1h30m, "
                                f"got {raw!r}")
        return seconds


def min_runtime_of(argument: float, queue: float | None, podgroup: float | None) -> float:
    """A victim's minimum runtime in seconds: its PodGroup's annotation, else its queue's,
    else the action's argument (the most specific says it)."""
    if podgroup is not None:
        return podgroup
    if queue is not None:
        return queue
    return argument


def started_at(pod: Pod) -> float | None:
    """When `pod` started running: `status.startTime`, else its creation (it cannot have
    run longer than it has existed), else None (not known)."""
    return pod.start_time if pod.start_time is not None else (pod.creation or None)


def too_young(start_time: float | None, now: float, min_runtime: float) -> bool:
    """Whether a pod started at `start_time` has run less than `min_runtime` at `now`.
    A pod with no known start has not run long enough: it is guarded."""
    return min_runtime > 0 and (start_time is None or now - start_time < min_runtime)


# --------------------------------------------------------------------------- budgets


def budget_selects(budget: DisruptionBudget, pod: Pod) -> bool:
    """Whether `budget` covers `pod`: the same namespace and a selector that matches its
    labels. A budget with no or an empty selector covers nothing, as kube-scheduler's
    preemption and Volcano's pdb plugin read it."""
    if budget.namespace != pod.namespace or budget.selector_empty:
        return False
    labels = pod.labels
    if not budget.match_labels.items() <= labels.items():
        return False
    return all(expression_matches(expression, labels, "")
               for expression in budget.match_expressions)


def _scaled(value: int | str, total: int) -> int:
    """An int-or-percent of `total`, a percent rounded up (the disruption controller's
    `GetScaledValueFromIntOrPercent(..., roundUp=true)`)."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value[:-1]) * total / 100)


def allowed_disruptions(budget: DisruptionBudget, healthy: int, expected: int) -> int:
    """How many of its pods `budget` lets go now: `status.disruptionsAllowed` when the
    object says it (the disruption controller's figure), else computed as the controller
    does from `healthy` (its running pods) and `expected` (all its pods): with
    minAvailable, healthy minus what must stay; with maxUnavailable, what may be down
    minus what already is; with neither, every healthy pod (nothing must stay)."""
    if budget.disruptions_allowed is not None:
        return budget.disruptions_allowed
    if budget.min_available is not None:
        desired = _scaled(budget.min_available, expected)
    elif budget.max_unavailable is not None:
        desired = expected - _scaled(budget.max_unavailable, expected)
    else:
        return healthy
    return max(0, healthy - desired)


def split_by_budgets(victims: Sequence[Task], budgets: Sequence[DisruptionBudget],
                     pods: Iterable[Task] = (),
                     allowed: Mapping[str, int] | None = None) -> tuple[list[Task], list[Task]]:
    """(victims that violate a budget, victims that violate none), each in the given
    order: kube-scheduler's rule, which prefers the second. Each budget starts from its
    allowed disruptions (`allowed`, from `allowances`; else counted here from `pods`);
    each victim it covers and has not already disrupted (status.disruptedPods) takes
    one, and the victim that takes it below zero violates it."""
    budgets = [b for b in budgets if not b.selector_empty]
    if not budgets:
        return [], list(victims)
    left = dict(allowances(budgets, pods) if allowed is None else allowed)
    violating: list[Task] = []
    sparing: list[Task] = []
    for victim in victims:
        violates = charge(left, budgets, victim)
        (violating if violates else sparing).append(victim)
    return violating, sparing


def charge(allowed: dict[str, int], budgets: Sequence[DisruptionBudget],
           victim: Task) -> bool:
    """Take `victim`'s disruption off every budget that covers it (and has not counted
    it disrupted already); whether that takes one below zero, a violation."""
    pod = victim.pod
    violates = False
    for budget in budgets:
        if (budget.selector_empty or pod.name in budget.disrupted_pods
                or not budget_selects(budget, pod)):
            continue
        allowed[budget.key] -= 1
        violates = violates or allowed[budget.key] < 0
    return violates


def allowances(budgets: Sequence[DisruptionBudget], pods: Iterable[Task]) -> dict[str, int]:
    """Each budget's allowed disruptions, by its key: its status's figure, or counted as
    the disruption controller does from `pods` (the placed tasks of the cluster, their
    healthy and expected pods) when the status does not give it. Count once per
    session: the pods are all of the cluster's."""
    budgets = [b for b in budgets if not b.selector_empty]
    needs_count = [b.disruptions_allowed is None for b in budgets]
    healthy = [0] * len(budgets)
    expected = [0] * len(budgets)
    if any(needs_count):
        for task in pods:
            for i, budget in enumerate(budgets):
                if needs_count[i] and budget_selects(budget, task.pod):
                    expected[i] += 1
                    if task.status & TaskStatus.RUNNING:
                        healthy[i] += 1
    return {b.key: allowed_disruptions(b, healthy[i], expected[i])
            for i, b in enumerate(budgets)}



# A task a session has placed but not bound is still asked for by its job.
_NOT_YET_PLACED = TaskStatus.PENDING | TaskStatus.PIPELINED | TaskStatus.ALLOCATED


class EvictionCap:
    """The most a session may evict for one job: a ratio times what the job asks (the
    requests of its tasks not yet placed for good: pending, or placed in this session
    and waiting, whenever the cap is first asked), in GPUs when it asks any, else in
    its share of the cluster (`total`). A pod without a PodGroup is counted with the
    other such pods of its controller. A ratio of 0 turns the cap off."""

    __slots__ = ("asked", "members", "total")

    def __init__(self, jobs: Iterable[Job], total: Resource) -> None:
        self.total = total
        self.asked: dict[str, Resource] = {}
        self.members: dict[str, list[str]] = {}  # key -> uids of the jobs it counts
        for job in jobs:
            key = self.key(job)
            self.members.setdefault(key, []).append(job.uid)
            asked = self.asked.setdefault(key, Resource())
            for task in job.tasks_in(_NOT_YET_PLACED):
                asked.add(task.resreq)

    @staticmethod
    def key(job: Job) -> str:
        """Whose evictions count together: the PodGroup's, or a bare pod's controller's."""
        if is_bare_job(job.uid):
            pod = next(iter(job.tasks.values())).pod
            if pod.owner_uid:
                return f"owner/{pod.owner_uid}"
        return job.uid


    def allows(self, job: Job, evicted: Resource, plan: Resource, ratio: float) -> bool:
        """Whether `plan` may be evicted for `job`, when `evicted` already has been for
        it (and the jobs counted with it) in this session, under `ratio`."""
        if ratio <= 0 or evicted.is_empty():
            return True
        asked = self.asked.get(self.key(job), Resource())
        total = self.total
        measure = gpus_of if gpus_of(asked) > 0 else (lambda r: share_of(r, total))
        return measure(evicted.clone().add(plan)) <= ratio * measure(asked) + 1e-9
