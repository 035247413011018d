"""One scheduling session: a snapshot, the plugins' verdicts combined by tier, the
actions run in conf order, and at close what was decided and why the rest waits.

The session owns the rules that combine plugins' answers (see `hookspecs` for each). At
open it turns the conf's tiers into plain lists of bound methods per extension point, so
the per-task-per-node path (`predicate`, `node_order`) calls plugin code directly, with
no dispatch through pluggy or a dict per call.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

from vscheduler.cache import Snapshot
from vscheduler.conf import SchedulerConf
from vscheduler.fit import Unfit
from vscheduler.framework.placement import NodeSampling
from vscheduler.framework.results import Event, Eviction, SessionResult
from vscheduler.framework.statement import Statement
from vscheduler.hookspecs import ABSTAIN, Reject
from vscheduler.model import (
    COMPLETED_STATUSES,
    SCHEDULED_STATUSES,
    Job,
    Node,
    Queue,
    Task,
    TaskStatus,
    is_bare_job,
)
from vscheduler.resources import Resource

__all__ = ["Session"]

S = TaskStatus
_SESSION_HOOKS = ("on_session_open", "on_session_close")
_SESSION_COUNTER = itertools.count(1)
# Why every pod waits in a session with no nodes at all (none yet, or none readable).
NO_NODES = "0/0 nodes are available: the cluster has no nodes."


def _no_predicate(task: Task, node: Node) -> Unfit | None:
    return None


def _no_score(task: Task, node: Node) -> float:
    return 0.0


def _first_nonzero(fns: list[Callable[..., int]]) -> Callable[..., int]:
    if not fns:
        return lambda left, right: 0
    if len(fns) == 1:
        return fns[0]

    def combined(left: Any, right: Any) -> int:
        for fn in fns:
            result = fn(left, right)
            if result:
                return result
        return 0
    return combined


class Session:
    """One session. Plugins read the cluster from its attributes; actions drive it."""

    def __init__(self, snapshot: Snapshot, conf: SchedulerConf, *,
                 default_queue: str = "default", uid: str = "",
                 node_sampling: NodeSampling | None = None, now: float = 0.0) -> None:
        self.uid = uid or f"session-{next(_SESSION_COUNTER)}"
        # The time the session decides at (seconds since the epoch), for timeouts; the
        # daemon's wall clock, or simulate's clock.
        self.now = now
        self.conf = conf
        self.default_queue = default_queue
        self.jobs: dict[str, Job] = snapshot.jobs
        self.nodes: dict[str, Node] = snapshot.nodes
        self.node_list: list[Node] = list(snapshot.nodes.values())
        # Names of nodes whose tasks changed, in order (see framework.search).
        self.node_changes: list[str] = []
        for node in self.node_list:
            node.changes = self.node_changes
        self.queues: dict[str, Queue] = snapshot.queues
        self.priority_classes = snapshot.priority_classes
        self.snapshot = snapshot
        self.node_specs = snapshot.node_specs
        self.total_resource = Resource()
        for node in self.node_list:
            self.total_resource.add(node.allocatable)
        self.action_names = conf.action_names()
        # Node sampling for the actions' node searches, and where the next one starts.
        self.node_sampling = node_sampling or NodeSampling()
        self.node_offset = 0
        self.plugins: dict[str, Any] = {}
        self.result = SessionResult()
        self._task_notes: dict[str, list[str]] = {}
        self._job_notes: dict[str, list[str]] = {}
        # Seconds spent per phase ("open", each action's name, "close"), for metrics and
        # `vscheduler bench`.
        self.timings: dict[str, float] = {}
        started = time.perf_counter()
        self._open_plugins()
        self.timings["open"] = time.perf_counter() - started

    # ================================================================ plugins

    def _open_plugins(self) -> None:
        tiers: dict[str, list[list[Callable]]] = {}
        for tier_index, tier in enumerate(self.conf.tiers):
            for option in tier:
                plugin = option.cls(option.args)
                self.plugins[option.name] = plugin
                if hasattr(plugin, "on_session_open"):
                    plugin.on_session_open(session=self)
                for hook in option.hooks():
                    if hook in _SESSION_HOOKS or not option.enabled(hook):
                        continue
                    per_tier = tiers.setdefault(hook, [[] for _ in self.conf.tiers])
                    per_tier[tier_index].append(getattr(plugin, hook))
        self._bind_hooks(tiers)

    def _bind_hooks(self, tiers: dict[str, list[list[Callable]]]) -> None:
        """Turn the plugins' hooks, per extension point and tier, into what the session
        calls: plain lists of bound methods, and one function where a single answer is
        combined from several."""
        self._tiers = tiers

        def flat(hook: str) -> list[Callable]:
            return [fn for tier in tiers.get(hook, []) for fn in tier]

        self._job_order = _first_nonzero(flat("job_order"))
        self._queue_order = _first_nonzero(flat("queue_order"))
        self._task_order = _first_nonzero(flat("task_order"))
        self._victim_queue_order = flat("victim_queue_order")
        self._pre_predicates = flat("pre_predicate")
        self._job_valid = flat("job_valid")
        self._job_ready = flat("job_ready")
        self._job_enqueued = flat("job_enqueued")
        self._allocatable = flat("allocatable")
        self._overused = flat("overused")
        self._preemptive = flat("preemptive")
        self._allocate_events = flat("allocate_event")
        self._deallocate_events = flat("deallocate_event")
        self._batch_node_order = flat("batch_node_order")
        # Node searches may be shared by tasks of one signature only if every plugin
        # that judges nodes says what its answers depend on (hookspecs.task_signature).
        judges = {fn.__self__ for fn in (*flat("predicate"), *flat("node_order"))}
        signers = {fn.__self__ for fn in flat("task_signature")}
        self._signatures = [fn for fn in flat("task_signature") if fn.__self__ in judges]
        self.shares_searches = judges <= signers
        self._base_signatures: dict[str, tuple] = {}
        self.has_batch_node_order = bool(self._batch_node_order)
        predicates = flat("predicate")
        scorers = flat("node_order")
        # The hot path: bind the plugin's own method when there is exactly one.
        if not predicates:
            self.predicate: Callable[[Task, Node], Unfit | None] = _no_predicate
        elif len(predicates) == 1:
            self.predicate = predicates[0]
        else:
            def predicate(task: Task, node: Node) -> Unfit | None:
                for fn in predicates:
                    unfit = fn(task, node)
                    if unfit is not None:
                        return unfit
                return None
            self.predicate = predicate
        if not scorers:
            self.node_order: Callable[[Task, Node], float] = _no_score
        elif len(scorers) == 1:
            self.node_order = scorers[0]
        else:
            def node_order(task: Task, node: Node) -> float:
                return sum(fn(task, node) for fn in scorers)
            self.node_order = node_order
        self.has_node_order = bool(scorers or self._batch_node_order)

    # ================================================================ order

    def job_compare(self, left: Job, right: Job) -> int:
        """Negative if `left` is scheduled before `right`. Ties: older first, then uid."""
        result = self._job_order(left, right)
        if result:
            return result
        if left.creation != right.creation:
            return -1 if left.creation < right.creation else 1
        return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)

    def job_less(self, left: Job, right: Job) -> bool:
        return self.job_compare(left, right) < 0

    def queue_compare(self, left: Queue, right: Queue) -> int:
        result = self._queue_order(left, right)
        if result:
            return result
        if left.creation != right.creation:
            return -1 if left.creation < right.creation else 1
        return -1 if left.name < right.name else (1 if left.name > right.name else 0)

    def queue_less(self, left: Queue, right: Queue) -> bool:
        return self.queue_compare(left, right) < 0

    def task_compare(self, left: Task, right: Task) -> int:
        """Negative if `left` is placed before `right`. Ties: the index at the end of the
        pod name (`worker-2` before `worker-10`), then older first, then uid."""
        result = self._task_order(left, right)
        if result:
            return result
        li, ri = left.pod.index, right.pod.index
        if li is not None and ri is not None and li != ri:
            return -1 if li < ri else 1
        if left.pod.creation != right.pod.creation:
            return -1 if left.pod.creation < right.pod.creation else 1
        return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)

    def task_less(self, left: Task, right: Task) -> bool:
        return self.task_compare(left, right) < 0

    def victim_queue_less(self, left: Queue, right: Queue, preemptor: Queue) -> bool:
        for fn in self._victim_queue_order:
            result = fn(left, right, preemptor)
            if result:
                return result < 0
        return self.queue_compare(left, right) > 0

    # ================================================================ placement

    def pre_predicate(self, task: Task) -> Unfit | None:
        for fn in self._pre_predicates:
            unfit = fn(task)
            if unfit is not None:
                return unfit
        return None

    def task_signature(self, task: Task) -> tuple | None:
        """What the answers of `predicate` and `node_order` for `task` depend on, or None
        if that is not known (then its node searches are not shared)."""
        if not self.shares_searches:
            return None
        base = self._base_signatures.get(task.uid)
        if base is None:
            pod, req = task.pod, task.resreq
            base = self._base_signatures[task.uid] = (
                req.cpu, req.memory, tuple(sorted(req.scalars.items())),
                tuple(sorted(pod.node_selector.items())),
                None if pod.required_affinity is None else tuple(
                    tuple(term) for term in pod.required_affinity),
                tuple((weight, tuple(term)) for weight, term in pod.preferred_affinity),
                tuple(pod.tolerations), tuple(pod.host_ports))
        if not self._signatures:
            return base
        return (base, *(fn(task) for fn in self._signatures))

    def batch_node_order(self, task: Task, nodes: list[Node]) -> dict[str, float]:
        scores: dict[str, float] = {}
        for fn in self._batch_node_order:
            for name, score in fn(task, nodes).items():
                scores[name] = scores.get(name, 0.0) + score
        return scores

    # ================================================================ jobs

    def job_valid(self, job: Job) -> tuple[str, str] | None:
        for fn in self._job_valid:
            result = fn(job)
            if result is not None:
                return result
        return None

    def job_ready(self, job: Job) -> bool:
        return all(fn(job) for fn in self._job_ready)

    def _vote(self, hook: str, job: Job) -> int | Reject:
        for tier in self._tiers.get(hook, []):
            permitted = False
            for fn in tier:
                vote = fn(job)
                if isinstance(vote, Reject):
                    return vote
                if vote != ABSTAIN:
                    permitted = True
            if permitted:
                return 1
        return 1

    def job_enqueueable(self, job: Job) -> int | Reject:
        return self._vote("job_enqueueable", job)

    def job_pipelined(self, job: Job) -> bool:
        return not isinstance(self._vote("job_pipelined", job), Reject)

    def job_enqueued(self, job: Job) -> None:
        for fn in self._job_enqueued:
            fn(job)

    def job_starving(self, job: Job) -> bool:
        for tier in self._tiers.get("job_starving", []):
            if tier:
                return all(fn(job) for fn in tier)
        return False

    # ================================================================ queues

    def allocatable(self, queue: Queue, task: Task) -> str | None:
        for fn in self._allocatable:
            reason = fn(queue, task)
            if reason:
                return reason
        return None

    def overused(self, queue: Queue) -> str | None:
        for fn in self._overused:
            reason = fn(queue)
            if reason:
                return reason
        return None

    def preemptive(self, queue: Queue, task: Task) -> str | None:
        for fn in self._preemptive:
            reason = fn(queue, task)
            if reason:
                return reason
        return None

    # ================================================================ victims

    def _victims(self, hook: str, actor: Task, candidates: list[Task]) -> list[Task]:
        """Intersect victims across a tier's plugins; the first tier with an answer
        decides. An empty answer does not veto: that tier abstains (Volcano's rule)."""
        for tier in self._tiers.get(hook, []):
            victims: list[Task] | None = None
            for fn in tier:
                answer = fn(actor, candidates)
                if answer is None:
                    continue
                if not answer:
                    victims = None
                    break
                if victims is None:
                    victims = list(answer)
                else:
                    keep = {t.uid for t in answer}
                    victims = [t for t in victims if t.uid in keep] or None
            if victims:
                return victims
        return []

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task]:
        return self._victims("preemptable", preemptor, candidates)

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task]:
        return self._victims("reclaimable", reclaimer, candidates)

    # ================================================================ events

    def allocate_event(self, task: Task) -> str | None:
        error = None
        for fn in self._allocate_events:
            error = fn(task) or error
        return error

    def deallocate_event(self, task: Task) -> None:
        for fn in self._deallocate_events:
            fn(task)

    # ================================================================ operations

    def statement(self) -> Statement:
        return Statement(self)

    def dispatch(self, task: Task) -> None:
        """The task is decided: it will be bound to its node."""
        self.jobs[task.job_id].update_task_status(task, S.BINDING)
        self.nodes[task.node_name].update_task(task)
        self.result.binds[task.key] = task.node_name

    def record_eviction(self, task: Task, action: str, preemptor: Task | None) -> None:
        by = preemptor.key if preemptor else ""
        self.result.evictions.append(Eviction(task.key, task.node_name, action, by))
        message = f"Pod is evicted, because of {action}" + (f" for {by}" if by else "")
        self.event(f"Pod/{task.key}", "Warning", "Evict", message)

    def timed_out(self, job: Job, message: str) -> None:
        """`job` passed its scheduleTimeoutSeconds in this session (once per PodGroup)."""
        self.result.timeouts.append(job.uid)
        self.event(f"PodGroup/{job.uid}", "Warning", "ScheduleTimeout", message)

    # ================================================================ reasons

    def event(self, object: str, type: str, reason: str, message: str) -> None:
        self.result.events.append(Event(object, type, reason, message))

    def explain_task(self, task: Task, message: str) -> None:
        """Why `task` could not be placed (shown while it stays pending)."""
        notes = self._task_notes.setdefault(task.uid, [])
        if message not in notes:
            notes.append(message)

    def explain_job(self, job: Job, message: str) -> None:
        """Why `job` could not be (fully) scheduled (shown on its pending tasks)."""
        notes = self._job_notes.setdefault(job.uid, [])
        if message not in notes:
            notes.append(message)

    def reasons_for(self, task: Task) -> list[str]:
        """Every reason known for a task still pending, most specific first. In a
        cluster without nodes that is the only reason: every other verdict (a queue
        deserving nothing of an empty cluster is "overused") follows from it."""
        if not self.node_list:
            return [NO_NODES]
        job = self.jobs[task.job_id]
        reasons = list(self._task_notes.get(task.uid, ()))
        errors = job.fit_errors.get(task.uid)
        if errors is not None:
            reasons.append(errors.message(len(self.node_list)))
        if task.last_transaction and task.last_transaction[0] == S.ALLOCATED:
            node = self.nodes.get(task.last_transaction[1])
            if node is not None and self._still_fits(task, node):
                reasons.append(f"Pod {task.key} can possibly be assigned to {node.name}, "
                               "once minAvailable is satisfied")
        reasons.extend(self._job_notes.get(job.uid, ()))
        for condition in job.conditions:
            if (condition.type == "Unschedulable" and condition.status == "True"
                    and condition.transition_id == self.uid
                    and condition.message not in reasons):
                reasons.append(condition.message)
        if not reasons:
            reasons.append(job.fit_error())
        return reasons

    @staticmethod
    def _still_fits(task: Task, node: Node) -> bool:
        """Whether `node`, as the session leaves it, still has room for `task`: a node
        the task was tried on may since have been filled by pods placed after it."""
        return task.key in node.tasks or node.insufficient_now(task.resreq) is None

    # ================================================================ close

    def run(self) -> SessionResult:
        """Run the conf's actions in order, then close."""
        for name, cls, args in self.conf.actions:
            started = time.perf_counter()
            cls(args).execute(self)
            self.timings[name] = time.perf_counter() - started
        started = time.perf_counter()
        result = self.close()
        self.timings["close"] = time.perf_counter() - started
        return result

    def close(self) -> SessionResult:
        for tier in self.conf.tiers:
            for option in tier:
                plugin = self.plugins[option.name]
                if hasattr(plugin, "on_session_close"):
                    plugin.on_session_close(session=self)
        result = self.result
        for obj, reason, message in self.snapshot.warnings:
            self.event(obj, "Warning", reason, message)
        for uid, job in self.jobs.items():
            job.phase = self._podgroup_phase(job)
            if not (job.bare or job.held_only):
                # (a copy: the job may be handed on to the next session)
                result.podgroups[uid] = (job.phase, list(job.conditions))
            # Allocated but never committed (the job only got pipelined): nothing was
            # decided for these, so they are pending too, with where they could go.
            for task in job.tasks_in(S.ALLOCATED):
                task.last_transaction = (S.ALLOCATED, task.node_name)
            pending = list(job.tasks_in(S.PENDING | S.ALLOCATED))
            for task in sorted(pending, key=lambda t: t.key):
                reasons = self.reasons_for(task)
                result.pending[task.key] = reasons
                name = task.key if job.bare else uid
                result.pending_jobs.setdefault(name, (job.queue, []))[1].append(task.key)
                self.event(f"Pod/{task.key}", "Warning", "FailedScheduling", reasons[0])
            if pending and not job.bare:
                self.event(f"PodGroup/{uid}", "Warning", "Unschedulable",
                           self._unschedulable_message(job, len(pending)))
            for task in job.tasks_in(S.PIPELINED):
                result.pipelined[task.key] = task.node_name
                if task.eviction_occurred:
                    result.nominated[task.key] = task.node_name
        for key, (task, reason) in self.snapshot.skipped.items():
            result.pending[key] = [reason]
            job = key if is_bare_job(task.job_id) else task.job_id
            result.pending_jobs.setdefault(job, ("", []))[1].append(key)
        for name in self.queues:
            result.queues[name] = Resource()
        for job in self.jobs.values():
            allocated = result.queues.get(job.queue)
            if allocated is not None:
                allocated.add(job.allocated)  # its tasks in ALLOCATED_STATUSES
        return result

    def _unschedulable_message(self, job: Job, pending: int) -> str:
        """The PodGroup's Unschedulable event says what its condition says, when a
        plugin set one in this session (kubectl describe shows both, side by side)."""
        for condition in job.conditions:
            if (condition.type == "Unschedulable" and condition.status == "True"
                    and condition.transition_id == self.uid):
                return condition.message
        return f"{pending}/{len(job.tasks)} tasks in gang unschedulable: {job.fit_error()}"

    def release(self) -> None:
        """Drop the plugins and every hook bound to them, once the decisions are applied.
        Plugins keep the session (`self.session`), so without this each session, its
        node copies and the plugins' state would live until the cyclic garbage
        collector happens to run."""
        self.plugins = {}
        self._bind_hooks({})

    def _podgroup_phase(self, job: Job) -> str:
        """A PodGroup's phase after the session, as Volcano computes it: only tasks seen
        bound or running count as scheduled, so a job stays Inqueue in the session that
        binds it."""
        unschedulable = any(
            c.type == "Unschedulable" and c.status == "True" and c.transition_id == self.uid
            for c in job.conditions)
        if job.count(S.RUNNING) > 0 and unschedulable:
            return "Unknown"
        if not job.tasks:
            # Its pods are gone (evicted, deleted): it runs no more, and waits again.
            return "Pending" if job.phase in ("Running", "Unknown") else job.phase
        scheduled = job.count(SCHEDULED_STATUSES) + sum(
            1 for t in job.tasks_in(S.RELEASING) if t.node_name)
        if scheduled >= job.min_available and scheduled > 0:
            return "Completed" if scheduled == job.count(COMPLETED_STATUSES) else "Running"
        if job.phase != "Inqueue":
            return "Pending"
        return "Inqueue"
