"""Placing a gang with sub-groups (`vscheduler.sub_groups`): allocate's path for a job
whose PodGroup has a `subGroupPolicy`.

The job is placed where its own limits say (anywhere, or within the domain
`topology_placement` tries); within that, its groups are placed one at a time, each as
a small gang: its pods go into a statement of their own until `size` of them are placed,
and the statement is kept only if the group got ready (or pipelined), else discarded.
A group whose policy has a hard network topology below the job's domain is tried in
the domains of its tier within the job's, as a job is (lowest tier first, best scored
first, the first that holds it wins); so two groups of one job may sit in two racks
while the job as a whole stays within one block.

Groups take turns, Volcano's order: those still needed to reach a policy's
`minSubGroups` first, then those not ready, then the rest, each placing until it is
ready; a ready group with pods left comes back for one more pod per turn. The turns end
when the job is ready. Pods in no group (the job's rest) form one group of size 1, with
the job's limits only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from vscheduler.framework.queue import PriorityQueue
from vscheduler.framework.statement import Statement
from vscheduler.framework.topology_placement import (
    PLACED,
    DomainRoom,
    around,
    explain_not_ready,
    least_request,
    try_domains,
)
from vscheduler.model import PIPELINED_STATUSES, READY_STATUSES, Job, Queue, Task, TaskStatus
from vscheduler.specs import SubGroupPolicy
from vscheduler.sub_groups import GroupKey, SubGroup
from vscheduler.topology import Domain

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["PlaceUntil", "allocate_sub_groups"]

S = TaskStatus
_REST = SubGroupPolicy(name="")  # (the job's pods in no group: one group of size 1)

# (session, job, queue, the tasks to place, the domain to place them in or None:
# anywhere, when to stop) -> the statement of what was placed, kept or not by the caller
PlaceUntil = Callable[["Session", Job, Queue, PriorityQueue[Task], Domain | None,
                       Callable[[], bool]], Statement]


def allocate_sub_groups(session: Session, job: Job, queue: Queue,
                        tasks: PriorityQueue[Task], domain: Domain | None,
                        place: PlaceUntil, room: DomainRoom | None) -> Statement | None:
    """Place `job`'s groups within `domain` (None: anywhere) as the module says; the
    statement if the job got ready or pipelined, else None (all of it discarded). What
    is left of `tasks` are the pods neither placed nor refused."""
    topology = session.topology
    if topology is not None and not topology.ready \
            and any(p.network_topology for p in job.spec.sub_groups):
        explain_not_ready(session, job)
        return None
    pending = {task.uid for task in tasks}
    groups = job.sub_groups()
    grouped = {task.uid for group in groups.values() for task in group.tasks}
    rest = SubGroup(_REST, ())
    rest.tasks = [task for task in job.tasks.values() if task.uid not in grouped]
    turns: dict[GroupKey, tuple[SubGroup, PriorityQueue[Task]]] = {}
    for group in (*groups.values(), rest):
        mine = [task for task in group.tasks if task.uid in pending]
        if mine:
            turns[group.key] = (group, PriorityQueue(session.task_less, mine))
    order = {policy.name: i for i, policy in enumerate(job.spec.sub_groups)}
    order[_REST.name] = len(order)
    statement = session.statement()
    while turns:  # (a job ready already places one more pod a turn)
        ready = _ready_counts(groups.values())
        group, waiting = turns.pop(min(turns, key=lambda key: _turn(
            turns[key][0], ready, order)))
        placed = _place_group(session, job, queue, group, waiting, domain, place, room)
        if placed is None:
            continue  # (refused: its pods are out of turns)
        statement.merge(placed)
        if waiting:
            turns[group.key] = (group, waiting)
        if session.job_ready(job):
            break
    left = {task.uid for _, waiting in turns.values() for task in waiting}
    tasks.retain(lambda task: task.uid in left)
    if session.job_ready(job) or session.job_pipelined(job):
        return statement
    statement.discard()
    return None


def _ready_counts(groups: Iterable[SubGroup]) -> dict[str, int]:
    """Policy name -> how many of its groups are ready."""
    counts: dict[str, int] = {}
    for group in groups:
        if group.full(READY_STATUSES):
            counts[group.policy.name] = counts.get(group.policy.name, 0) + 1
    return counts


def _turn(group: SubGroup, ready: dict[str, int], order: dict[str, int]) -> tuple:
    """A group's place in line (lowest first): still needed for its policy's
    minSubGroups, then not ready, then ready; then the policies' order, the groups'
    numbers, their keys."""
    policy = group.policy
    if group.full(READY_STATUSES):
        rank = 2
    elif ready.get(policy.name, 0) < policy.min_sub_groups:
        rank = 0
    else:
        rank = 1
    return rank, order[policy.name], group.index, group.key


def _place_group(session: Session, job: Job, queue: Queue, group: SubGroup,
                 waiting: PriorityQueue[Task], domain: Domain | None, place: PlaceUntil,
                 room: DomainRoom | None) -> Statement | None:
    """Place `group`'s `waiting` pods until it is ready, within one domain of its own
    limit if it has one below `domain`; the statement if it got ready or pipelined."""

    def done() -> bool:
        return group.full(READY_STATUSES)

    def attempt(within: Domain | None) -> Statement | None:
        for task in group.tasks:  # (this try's reasons only, as for a job's domains)
            job.fit_errors.pop(task.uid, None)
            if task.status == S.PENDING:
                task.last_transaction = None
        trial = waiting.copy()
        statement = place(session, job, queue, trial, within, done)
        if statement.operations and group.full(PIPELINED_STATUSES):
            waiting.adopt(trial)
            return statement
        statement.discard()
        return None

    topology = session.topology
    limit = topology.limit(group.policy.network_topology) if topology is not None else None
    if topology is None or limit is None:
        return attempt(domain)
    top = domain if domain is not None else topology.top
    placed = [t.node_name for t in group.tasks if t.status & PLACED and t.node_name]
    if limit >= top.tier and not placed:  # (the job's domain is within the group's limit)
        return attempt(domain)
    assert room is not None
    root = around(session, job, placed, limit, f"the pods of sub-group {group.name}")
    if root is None:
        return None
    candidates = [
        [d for d in tier if d is top or top in topology.ancestors(d)]
        for tier in topology.candidates(root, limit)]
    candidates = [tier for tier in candidates if tier]
    if not candidates and placed:
        session.explain_job(job, (
            f"the pods of sub-group {group.name} already placed are outside HyperNode "
            f"{top.name}"))
        return None
    lacking, least = least_request(waiting, group.size - group.count(READY_STATUSES))
    return try_domains(
        session, job, candidates, limit, bool(placed), lacking,
        least, room, lambda d: attempt(None if d is topology.top else d),
        who=f"sub-group {group.name}")
