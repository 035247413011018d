"""The close of a session, as Volcano's job updater: what the session leaves behind.

After the actions ran: each PodGroup's phase and conditions, why every pod still
pending waits (its reasons, a FailedScheduling event, the PodGroup's Unschedulable
event), which pods are pipelined or nominated, and what each queue holds. A queue's
figures count only what its jobs hold for good (`held_for_good`): a gang's allocations
that were never committed are pending pods, not the queue's.

A close costs what changed: a job copy handed on unchanged from the last session (see
the cache's snapshot), which that session's close left *settled* (nothing waits, its
gang ready or empty) and whose status the cache took as it was, closes as before: no
pending reasons, no events, the same phase and conditions. Such a job is not visited
again: the close, the gang's close and the status writes visit only the others
(`SessionResult.visited_jobs`), and its PodGroup's entry in the result is its status as
it stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vscheduler.model import (
    ALLOCATED_STATUSES,
    COMPLETED_STATUSES,
    PLACED_FOR_GOOD,
    SCHEDULED_STATUSES,
    Condition,
    Job,
    Node,
    Task,
    TaskStatus,
    is_bare_job,
)
from vscheduler.queue_tree import ROOT, QueueTree
from vscheduler.resources import Resource
from vscheduler.tally import Part

if TYPE_CHECKING:
    from vscheduler.framework.results import SessionResult
    from vscheduler.framework.session import Session

__all__ = ["NO_NODES", "add_held_for_good", "close_session", "held_for_good", "held_part",
           "podgroup_phase", "reasons_for"]

S = TaskStatus
# Why every pod waits in a session with no nodes at all (none yet, or none readable).
NO_NODES = "0/0 nodes are available: the cluster has no nodes."
# The key in `Job.memo` under which a close leaves how it left the job copy.
MEMO_KEY = "framework.close"
# Tasks that make a close say something each session (reasons, events, pipelined pods).
_UNPLACED = S.PENDING | S.ALLOCATED | S.PIPELINED


def held_part(job: Job) -> Part:
    """What a job holds for good, as a part of its queue's figures (see
    `Session.held_at_open`)."""
    return job.queue, (held_for_good(job),)


def held_for_good(job: Job) -> Resource:
    """What `job` holds for good: its bound, binding and running pods' requests. Its
    tasks still ALLOCATED at close were never committed (the gang only got pipelined),
    so they are pending, not held."""
    return add_held_for_good(Resource(), job)


def add_held_for_good(total: Resource, job: Job) -> Resource:
    """`total` plus what `job` holds for good (its tasks `PLACED_FOR_GOOD`; without a
    copy per job: the close sums every job of the session)."""
    total.add(job.allocated)  # ALLOCATED_STATUSES: PLACED_FOR_GOOD and ALLOCATED
    for task in job.tasks_in(ALLOCATED_STATUSES & ~PLACED_FOR_GOOD):
        total.sub(task.resreq)
    return total


@dataclass(slots=True)
class _Closed:
    """How a close left a settled job copy: its result `entry` (phase and a copy of its
    conditions) and the `conf` it closed by."""

    entry: tuple[str, list[Condition]]
    conf: object


def _same_conditions(left: list[Condition], right: list[Condition]) -> bool:
    return len(left) == len(right) and all(
        a is b or a.same_as(b) for a, b in zip(left, right, strict=True))


def _remember(session: Session, job: Job, entry: tuple[str, list[Condition]]) -> None:
    """Leave on the copy how this close left it, if the next close of the copy, still
    unchanged, would decide the same (see `_sort_jobs`)."""
    if job.count(_UNPLACED) == 0 and (not job.tasks or job.is_ready()):
        job.memo[MEMO_KEY] = _Closed(entry, session.conf)
    else:
        job.memo.pop(MEMO_KEY, None)


class _LastClose:
    """What the close keeps for the next one (`Snapshot.kept`): the snapshot and conf it
    closed, and the jobs it left unsettled (visited again whatever happens)."""

    __slots__ = ("conf", "serial", "unsettled")

    def __init__(self, conf: object, serial: int) -> None:
        self.conf = conf
        self.serial = serial
        self.unsettled: set[str] = set()


def _candidates(session: Session) -> list[Job] | None:
    """The jobs that may close otherwise than last time, in the session's order; None
    for every job (no last close of the snapshot this one was built from, by this
    conf). Any other job is a copy handed on that the last close left settled, that
    neither the cache nor this session changed (not `dirty`), and whose phase and
    conditions the cache still holds as that close left them (else it was copied anew
    or handed on with a new phase, or its conditions restated: `Snapshot.changed_jobs`,
    `Snapshot.restated`)."""
    snapshot = session.snapshot
    last = snapshot.kept.get(MEMO_KEY)
    if (not isinstance(last, _LastClose) or not snapshot.base
            or last.serial != snapshot.base or last.conf is not session.conf):
        return None
    jobs = session.jobs
    uids = set(snapshot.changed_jobs)
    uids.update(snapshot.restated)
    uids.update(snapshot.waiting)
    uids.update(last.unsettled)
    if snapshot.dirty_jobs is not None:
        uids.update(snapshot.dirty_jobs)
    else:
        uids.update(uid for uid, job in jobs.items() if job.dirty)
    return [jobs[uid] for uid in sorted(uids) if uid in jobs]


def _sort_jobs(session: Session) -> list[Job]:
    """The jobs whose close may differ from the last session's, in the session's order,
    and each queue's figures (what its jobs held as the session opened, kept between
    sessions, with the jobs this session changed counted again).

    A job closes as before if its copy was handed on (neither the cache nor the last
    session changed its tasks or phase since the last close: a copy made anew, or handed
    on with a new phase, has no memo), this session did not change it (`dirty`), the
    cache holds the phase and conditions that close left (an outside write of either is
    seen here), and that close left it settled, by the same conf (a reloaded one may
    close otherwise). A settled job's close depends on nothing else: without waiting
    tasks there are no reasons, no nodes to name, no time-out (a ready gang is never
    timed out), its phase is a fixed point of its counts, and the gang has nothing to
    add to its conditions. Only the candidates (`_candidates`) are looked at."""
    result = session.result
    queues = result.queues
    held = session.held_at_open
    for name in session.queues:
        queues[name] = held.sum(name, 0)
    conf = session.conf
    visit: list[Job] = []
    candidates = _candidates(session)
    for job in session.jobs.values() if candidates is None else candidates:
        closed = job.memo.get(MEMO_KEY)
        conditions = job.conditions
        if (closed is None or job.dirty or closed.entry[0] != job.phase
                or closed.conf is not conf
                or (closed.entry[1] != conditions  # (shared Conditions: by identity)
                    and not _same_conditions(closed.entry[1], conditions))):
            visit.append(job)
            allocated = queues.get(job.queue)
            if job.dirty and allocated is not None:
                # (changed in this session: what it holds now, not as the session opened)
                allocated.sub(held.amount(job.uid, 0))
                add_held_for_good(allocated, job)
    _count_in_ancestors(session, queues)
    result.visited_jobs = session.snapshot.closed = [job.uid for job in visit]
    # every PodGroup's phase and conditions, read when asked (see SessionResult)
    result.podgroup_jobs = session.jobs
    return visit


def _count_in_ancestors(session: Session, queues: dict[str, Resource]) -> None:
    """When queues form a tree (a `root` queue, or any `spec.parent`), each queue's
    figure counts what its descendants hold too, as Volcano writes a parent queue's
    `status.allocated`."""
    if ROOT not in session.queues and not any(q.parent for q in session.queues.values()):
        return
    tree = QueueTree(session.queues)
    own = {name: amount.clone() for name, amount in queues.items()}
    for name, amount in own.items():
        for ancestor in tree.ancestors.get(name, ()):
            if ancestor in queues:  # (a root no object names has no status to write)
                queues[ancestor].add(amount)


def close_session(session: Session) -> SessionResult:
    """Tell the plugins the session closes, then write what it leaves behind into its
    result. Jobs that close as before are passed by (see `_sort_jobs`)."""
    visit = _sort_jobs(session)
    session.on_session_close(session)
    result = session.result
    for obj, reason, message in session.snapshot.warnings:
        session.event(obj, "Warning", reason, message)
    for job in visit:
        uid = job.uid
        job.phase = podgroup_phase(session, job)
        # (a copy: the job may be handed on to the next session)
        entry = (job.phase, list(job.conditions))
        # Allocated but never committed (the job only got pipelined): nothing was
        # decided for these, so they are pending too, with where they could go.
        for task in job.tasks_in(S.ALLOCATED):
            task.last_transaction = (S.ALLOCATED, task.node_name)
        pending = list(job.tasks_in(S.PENDING | S.ALLOCATED))
        for task in sorted(pending, key=lambda t: t.key):
            reasons = reasons_for(session, task)
            result.pending[task.key] = reasons
            name = task.key if job.bare else uid
            result.pending_jobs.setdefault(name, (job.queue, []))[1].append(task.key)
            session.event(f"Pod/{task.key}", "Warning", "FailedScheduling", reasons[0])
        if pending and not job.bare:
            session.event(f"PodGroup/{uid}", "Warning", "Unschedulable",
                          _unschedulable_message(session, job, len(pending)))
        for task in job.tasks_in(S.PIPELINED):
            result.pipelined[task.key] = task.node_name
            session.event(f"Pod/{task.key}", "Warning", "FailedScheduling",
                          pipelined_reason(task.key, task.node_name))
        _remember(session, job, entry)
    last = session.snapshot.kept[MEMO_KEY] = _LastClose(session.conf, session.snapshot.serial)
    last.unsettled.update(job.uid for job in visit if MEMO_KEY not in job.memo)
    for key, (task, reason) in session.snapshot.skipped.items():
        result.pending[key] = [reason]
        # (kubectl describe shows events, not the condition's message)
        session.event(f"Pod/{key}", "Warning", "FailedScheduling", reason)
        job_name = key if is_bare_job(task.job_id) else task.job_id
        result.pending_jobs.setdefault(job_name, ("", []))[1].append(key)
    return result


def pipelined_reason(key: str, node: str) -> str:
    """What a pod waiting on `node`'s releasing resources is told (its condition and
    event, as Volcano words it): it is not bound yet, and where it will go."""
    return f"Pod {key} can possibly be assigned to {node}, once resource is released"


def reasons_for(session: Session, task: Task) -> list[str]:
    """Every reason known for a task still pending, most specific first: why it could
    not be placed, then why its job could not; the first ends with why evicting for it
    did not help (reclaim, preempt). In a cluster without nodes that is the only
    reason: every other verdict (a queue deserving nothing of an empty cluster is
    "overused") follows from it."""
    if not session.node_list:
        return [NO_NODES]
    job = session.jobs[task.job_id]
    reasons = list(session.task_notes.get(task.uid, ()))
    errors = job.fit_errors.get(task.uid)
    if errors is not None:
        reasons.append(errors.message(len(session.node_list)))
    if task.last_transaction and task.last_transaction[0] == S.ALLOCATED:
        node = session.nodes.get(task.last_transaction[1])
        if node is not None and _still_fits(task, node):
            reasons.append(f"Pod {task.key} can possibly be assigned to {node.name}, "
                           "once minAvailable is satisfied")
    reasons.extend(session.job_notes.get(job.uid, ()))
    for condition in job.conditions:
        if (condition.type == "Unschedulable" and condition.status == "True"
                and condition.transition_id == session.uid
                and condition.message not in reasons):
            reasons.append(condition.message)
    if not reasons:
        reasons.append(job.fit_error())
    evicting = session.eviction_notes.get(task.uid)
    if evicting:
        # (as kube-scheduler adds its preemption's verdict to the filters' message: the
        # first reason is the condition's and the event's, and says both)
        first = reasons[0]
        reasons[0] = f"{first}{'' if first.endswith('.') else '.'} {'; '.join(evicting)}"
    return reasons


def _still_fits(task: Task, node: Node) -> bool:
    """Whether `node`, as the session leaves it, still has room for `task`: a node the
    task was tried on may since have been filled by pods placed after it."""
    return task.key in node.tasks or node.insufficient_now(task.resreq) is None


def _unschedulable_message(session: Session, job: Job, pending: int) -> str:
    """The PodGroup's Unschedulable event says what its condition says, when a plugin
    set one in this session (kubectl describe shows both, side by side)."""
    for condition in job.conditions:
        if (condition.type == "Unschedulable" and condition.status == "True"
                and condition.transition_id == session.uid):
            return condition.message
    return f"{pending}/{len(job.tasks)} tasks in gang unschedulable: {job.fit_error()}"


def podgroup_phase(session: Session, job: Job) -> str:
    """A PodGroup's phase after the session, as Volcano computes it: only tasks seen
    bound or running count as scheduled, so a job stays Inqueue in the session that
    binds it."""
    unschedulable = any(
        c.type == "Unschedulable" and c.status == "True" and c.transition_id == session.uid
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
