"""drf: dominant resource fairness between jobs.

A job's *dominant share* is the largest fraction of the cluster it holds on any one
resource (cpu, memory, pods, GPUs, ...): 3 of 12 GPUs and 2 of 64 CPUs is a share of
0.25. Jobs with a lower share are scheduled first, so a job that already holds much of
one scarce resource waits behind jobs that hold little, whatever the other resources.

What a job holds counts its tasks allocated, binding, bound and running, plus whatever
this session allocates or pipelines for it (the event handlers keep the shares current,
so the order changes as allocate hands out tasks one turn at a time).

A preemptor may take a task of another job (or its own) only if, after the move, the
preemptor's job would still hold no larger a share than the victim's job would keep.

Not implemented: Volcano's hierarchical mode (`enableHierarchy: true`, "hdrf"), which
orders and reclaims between queues by a tree of queue annotations. Volcano itself says
it conflicts with proportion; a conf that sets it gets plain drf here.
"""

from __future__ import annotations

from vscheduler.hookspecs import SessionView, hookimpl
from vscheduler.model import Job, Task
from vscheduler.plugin import Plugin
from vscheduler.resources import CPU, MEMORY, Resource
from vscheduler.tally import Part

__all__ = ["DrfPlugin"]

# Two shares this close are equal: a victim whose job would keep exactly the preemptor's
# share may still be taken (Volcano's shareDelta).
SHARE_DELTA = 1e-6


class _JobAttr:
    """What drf tracks of one job: its allocation and the dominant share it gives. The
    allocation starts as the one kept from the session's open (shared with the next
    session) and is copied only when this session changes it: most jobs of a session
    never do."""

    __slots__ = ("allocated", "owned", "share")

    def __init__(self, allocated: Resource, share: float) -> None:
        self.allocated = allocated
        self.owned = False
        self.share = share

    def own(self) -> Resource:
        """The allocation, this session's own to change."""
        if not self.owned:
            self.allocated = self.allocated.clone()
            self.owned = True
        return self.allocated


def _allocation(job: Job) -> Part:
    """What a job holds as the session opens (its tasks in ALLOCATED_STATUSES)."""
    return job.queue, (job.allocated.clone(),)


class DrfPlugin(Plugin):
    name = "drf"

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        self.total = session.total_resource
        # The dimensions the cluster has, the only ones a share is taken over: cpu's and
        # memory's totals (zero for one it lacks) and each scalar's, read once, since a
        # share is taken per candidate per node in preempt.
        names = self.total.names()
        self._totals = (self.total.cpu if CPU in names else 0.0,
                        self.total.memory if MEMORY in names else 0.0,
                        tuple((n, self.total.scalars[n]) for n in names
                              if n not in (CPU, MEMORY)))
        # Each job's allocation as the session opened, kept between sessions (a job
        # copied anew is read again); its `_JobAttr` is made when first asked, since
        # most jobs of a busy cluster never are in a session.
        self.opened = session.tally(self.name, None, 1, _allocation)
        self.jobs: dict[str, _JobAttr] = {}

    def attr_of(self, uid: str) -> _JobAttr | None:
        """What drf tracks of a job of the session (None for a job it does not hold)."""
        attr = self.jobs.get(uid)
        if attr is not None:
            return attr
        job = self.session.jobs.get(uid)
        if job is None:
            return None
        allocated = self.opened.amount(uid, 0)  # (every job of the session has a part)
        # The share as the session opened, kept on the job copy for the next session
        # (it holds while the nodes do).
        known = job.memo.get(self.name)
        if known is None or known[0] != self.session.node_specs:
            known = job.memo[self.name] = (self.session.node_specs,
                                           self.dominant_share(allocated))
        attr = self.jobs[uid] = _JobAttr(allocated, known[1])
        return attr

    # ---------------------------------------------------------------- shares

    def dominant_share(self, allocated: Resource) -> float:
        """The largest fraction of the cluster `allocated` takes on any one resource."""
        cpu, memory, scalars = self._totals
        shares = [allocated.scalars.get(n, 0) / whole for n, whole in scalars]
        if cpu:
            shares.append(allocated.cpu / cpu)
        if memory:
            shares.append(allocated.memory / memory)
        return max(shares, default=0.0)

    def job_share(self, uid: str) -> float:
        """The dominant share of a job now (0 for a job this session does not know)."""
        attr = self.attr_of(uid)
        return attr.share if attr is not None else 0.0

    # ---------------------------------------------------------------- order

    @hookimpl
    def job_order(self, left: Job, right: Job) -> int:
        """The smaller share first. Shares are compared exactly, as Volcano does: the
        running sums hold whole milli units and bytes (`vscheduler.tally`), so two jobs
        that hold the same have the very same share."""
        ls, rs = self.job_share(left.uid), self.job_share(right.uid)
        return -1 if ls < rs else (1 if ls > rs else 0)

    @hookimpl
    def job_order_key(self, job: Job) -> float:
        """The share (compared exactly: see `job_order`)."""
        return self.job_share(job.uid)

    # ---------------------------------------------------------------- victims

    @hookimpl
    def preemptor_signature(self, task: Task) -> float | None:
        """The dominant share its job would reach with it (None: a job not known here)."""
        attr = self.attr_of(task.job_id)
        if attr is None:
            return None
        return round(self.dominant_share(attr.allocated.clone().add(task.resreq)), 12)

    @hookimpl
    def offers_by_signature(self) -> bool:
        """The offers read the share the preemptor's job would reach only."""
        return True

    @hookimpl
    def victim_signature(self, job: Job, tasks: list[Task]) -> tuple:
        """What its job holds: the offers take the tasks' requests from it. (Read
        without making the job's `_JobAttr`: most gangs asked about are never offered.)"""
        attr = self.jobs.get(job.uid)
        allocated = attr.allocated if attr is not None else self.opened.amount(job.uid, 0)
        return allocated.key()

    @hookimpl
    def victim_state(self) -> tuple:
        """The cluster's total: the shares the offers and the job order compare are
        the jobs' allocations over it."""
        return self.total.key()

    @hookimpl
    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        """Candidates whose job, once each earlier candidate of that job is gone too,
        would still hold at least the share the preemptor's job would reach."""
        attr = self.attr_of(preemptor.job_id)
        if attr is None:
            return None
        preemptor_share = self.dominant_share(attr.allocated.clone().add(preemptor.resreq))
        remaining: dict[str, Resource] = {}
        victims = []
        for task in candidates:
            victim_attr = self.attr_of(task.job_id)
            if victim_attr is None:
                continue
            left = remaining.get(task.job_id)
            if left is None:
                left = remaining[task.job_id] = victim_attr.allocated.clone()
            # Every candidate considered counts as gone, taken or not (Volcano's rule).
            left.sub(task.resreq)
            if preemptor_share <= self.dominant_share(left) + SHARE_DELTA:
                victims.append(task)
        return victims

    # ---------------------------------------------------------------- events

    @hookimpl
    def allocate_event(self, task: Task) -> str | None:
        attr = self.attr_of(task.job_id)
        if attr is not None:
            attr.share = self.dominant_share(attr.own().add(task.resreq))
        return None

    @hookimpl
    def deallocate_event(self, task: Task) -> None:
        attr = self.attr_of(task.job_id)
        if attr is not None:
            attr.share = self.dominant_share(attr.own().sub(task.resreq))
