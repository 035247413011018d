"""Victim strategies: which of the victims a node offers go, and which node's plan wins.

An evicting action (reclaim, preempt) names its strategy in the `strategy` argument.
Plugins first say who *may* go (`reclaimable`, `preemptable`), in Volcano's victim order;
a strategy then says, on each node, in what order those victims are taken, and, across
the candidate nodes, which plan is carried out. Gang safety, guards and the reprieve
apply whatever the strategy (`eviction.py`): a strategy never makes a gang go in part.

- `LowestPriority` (the default): Volcano's victim order (across queues, the victim
  queue order; within a queue, the job the job order would schedule last: the lowest
  priority first; within a job, the task it would place last, so the newest); the plan
  freeing the fewest GPUs (then the least of the rest) wins, then the one whose highest
  victim priority is lowest.
- `NewestFirst`: the pod that started last first (what has run least is lost least);
  plans as above, but between plans alike in waste, the one whose oldest victim started
  last, then the one whose highest victim priority is lowest.
- `MinimumVictims`: the largest first (GPUs, then the rest), so the fewest pods go; the
  plan with the fewest victims wins, then the one wasting least.
- `MinimumGPUWaste`: on each node, the set of victims whose freed GPUs just cover the
  need (searched exactly among up to `EXACT_SEARCH_LIMIT` victims, else taken in
  Volcano's order and pruned by the reprieve); the plan freeing the fewest GPUs wins.

Whatever the strategy, across nodes a plan that breaks fewer PodDisruptionBudgets goes
first (kube-scheduler's first rule); on one node, victims that break none are taken
first (`eviction._plan_on_node`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vscheduler.guards import started_at
from vscheduler.model import Task
from vscheduler.resources import Resource, gpus_of, share_of

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["DEFAULT", "EXACT_SEARCH_LIMIT", "STRATEGIES", "Strategy", "cheapest_cover",
           "waste_of"]

# Subsets of more victims than this on one node are not searched (2^10 sums at most).
EXACT_SEARCH_LIMIT = 10


def waste_of(amount: Resource, total: Resource) -> tuple[float, float]:
    """What freeing `amount` costs, to compare plans for the same preemptor (whose need
    is the same whatever is chosen, so what is freed is the waste plus a constant): the
    GPUs first (eviction is mostly about them: seeds 000 and 002), then the share of
    the cluster of every resource."""
    return gpus_of(amount), share_of(amount, total)


def _freed(victims: Sequence[Task]) -> Resource:
    freed = Resource()
    for victim in victims:
        freed.add(victim.resreq)
    return freed


def _start(task: Task) -> float:
    """When `task` started (`guards.started_at`; 0, the oldest, if not known)."""
    return started_at(task.pod) or 0.0


def _lowest_priority(victims: Sequence[Task]) -> tuple[float, ...]:
    """The plan whose highest victim priority is lowest ranks first (lower goes first)."""
    return (max((v.priority for v in victims), default=0),)


def _started_last(victims: Sequence[Task]) -> tuple[float, ...]:
    """The plan whose oldest victim started last ranks first, then as `_lowest_priority`."""
    return (-min((_start(v) for v in victims), default=0.0), *_lowest_priority(victims))


@dataclass(frozen=True, slots=True)
class Strategy:
    """One victim strategy: `name` (the conf's word); `reorder`, the victims of a node
    (given in Volcano's order) in the order they are taken (None keeps Volcano's);
    `fewest_victims_first`: plans compare by their count of victims before their waste;
    `exact_cover`: the node's victims are chosen as the cheapest set that suffices;
    `tie`: between plans alike in waste, the one this puts lower goes first (by
    default the one whose highest victim priority is lowest, as kube-scheduler picks a
    node)."""

    name: str
    reorder: Callable[[list[Task], Resource], list[Task]] | None = None
    fewest_victims_first: bool = False
    exact_cover: bool = False
    tie: Callable[[Sequence[Task]], tuple[float, ...]] = _lowest_priority

    def order(self, victims: list[Task], total: Resource) -> list[Task]:
        """`victims` (in Volcano's order) in the order this strategy takes them."""
        return self.reorder(victims, total) if self.reorder else victims

    def plan_key(self, victims: Sequence[Task], total: Resource,
                 violations: int = 0) -> tuple[float, ...]:
        """How a plan compares with other plans for the same preemptor: lower goes
        first. `violations`: the disruption budgets it would break, which count before
        anything else (kube-scheduler's first rule when it picks a node)."""
        gpus, share = waste_of(_freed(victims), total)
        if self.fewest_victims_first:
            return (violations, len(victims), gpus, share, *self.tie(victims))
        return (violations, gpus, share, *self.tie(victims), len(victims))


def _newest_first(victims: list[Task], total: Resource) -> list[Task]:
    # sorted() is stable: equal start times keep Volcano's order
    return sorted(victims, key=_start, reverse=True)


def _largest_first(victims: list[Task], total: Resource) -> list[Task]:
    return sorted(victims, key=lambda t: waste_of(t.resreq, total), reverse=True)


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("LowestPriority"),
    Strategy("NewestFirst", reorder=_newest_first, tie=_started_last),
    Strategy("MinimumVictims", reorder=_largest_first, fewest_victims_first=True),
    Strategy("MinimumGPUWaste", exact_cover=True),
)}
DEFAULT = STRATEGIES["LowestPriority"]


def cheapest_cover(session: Session, victims: Sequence[Task],
                   suffices: Callable[[list[Task]], bool],
                   gpus_needed: float = 0.0) -> list[Task] | None:
    """The victims, among `victims`, whose eviction `suffices` and frees the fewest GPUs
    (then the least of the rest, then the fewest pods; then the set whose last member
    comes earliest in the given order): every
    subset is weighed, the cheapest tried first (none freeing fewer than `gpus_needed`
    is tried). None if there are more victims than `EXACT_SEARCH_LIMIT` (the caller
    falls back to its order) or no subset suffices."""
    count = len(victims)
    if count > EXACT_SEARCH_LIMIT:
        return None
    total = session.total_resource
    costs = [waste_of(v.resreq, total) for v in victims]
    # Each subset's cost, built from the subset without its lowest member.
    gpus = [0.0] * (1 << count)
    share = [0.0] * (1 << count)
    size = [0] * (1 << count)
    for mask in range(1, 1 << count):
        low = mask & -mask
        rest = mask ^ low
        index = low.bit_length() - 1
        gpus[mask] = gpus[rest] + costs[index][0]
        share[mask] = share[rest] + costs[index][1]
        size[mask] = size[rest] + 1
    floor = gpus_needed - 1e-9
    masks = [m for m in range(1, 1 << count) if gpus[m] >= floor]
    for mask in sorted(masks, key=lambda m: (round(gpus[m], 6), round(share[m], 9),
                                             size[m], m)):
        chosen = [v for i, v in enumerate(victims) if mask >> i & 1]
        if suffices(chosen):
            return chosen
    return None
