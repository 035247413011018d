"""What the queue quota plugins share (proportion, capacity): each queue's figures,
counted from its jobs at session open and kept current by the allocate and deallocate
events, admission by them, and the wording of their refusals.

This is not a plugin (no entry point names it): a plugin inherits `QueueUsage` beside
`Plugin`, fills `queue_figures` in `on_session_open` with `open_queues`, and gets these
hooks: job_enqueueable, job_enqueued, allocate_event, deallocate_event. The arithmetic
underneath is `vscheduler.quota`.
"""

from __future__ import annotations

from typing import Any

from vscheduler.hookspecs import PERMIT, Reject, SessionView, hookimpl
from vscheduler.model import Job, Queue, Task, TaskStatus
from vscheduler.quota import (
    amount_text,
    capability_of,
    owed_minimum,
    quota_exceeded,
    real_capability,
    resource_text,
    without_gated,
)
from vscheduler.resources import MIN_RESOURCE, Resource, share
from vscheduler.tally import Part, Tally

__all__ = ["QueueFigures", "QueueUsage", "admission", "priority_first", "queue_usage",
           "room_refusal", "total_guarantee", "warn_guarantees_over_cluster"]


class QueueFigures:
    """A queue's figures in one session, as the quota plugins keep them (proportion and
    capacity extend it with how they compute deserved: by weight, or as written)."""

    __slots__ = ("allocated", "capability", "deserved", "elastic", "guarantee", "inqueue",
                 "name", "real_capability", "request", "share")

    def __init__(self, queue: Queue, total: Resource, total_guarantee: Resource) -> None:
        self.name = queue.name
        self.guarantee = queue.guarantee.clone() if queue.guarantee else Resource()
        self.capability = capability_of(queue)
        self.real_capability = real_capability(total, total_guarantee, self.guarantee,
                                               self.capability)
        self.deserved = Resource()
        self.allocated = Resource()
        self.request = Resource()
        self.inqueue = Resource()
        self.elastic = Resource()
        self.share = 0.0

    def update_share(self) -> None:
        """allocated / deserved on the resource where that is largest (0 if nothing is
        deserved)."""
        deserved, allocated = self.deserved, self.allocated
        self.share = max((share(allocated.get(n), deserved.get(n)) for n in deserved.names()),
                         default=0.0)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.name}: allocated "
                f"{resource_text(self.allocated)}; deserved {resource_text(self.deserved)}; "
                f"real capability {resource_text(self.real_capability)}; "
                f"share {self.share:.3f})")


# --------------------------------------------------------------------------- verdicts


def admission(session: SessionView, job: Job, queue: Queue | None,
              figures: QueueFigures | None) -> int | Reject:
    """Volcano's admission by queue quota (proportion, capacity): the job's
    minResources, with what the queue holds and has admitted, less what running jobs
    hold beyond their minimum, must fit the queue's real capability. A refusal is also a
    Normal `Unschedulable` event on the PodGroup."""
    if queue is None:
        return Reject(f"queue {job.queue} not found")
    closed = queue.closed_reason()
    if closed is not None:
        return Reject(closed)
    if job.min_resources is None or figures is None:
        return PERMIT
    minimum = job.min_resources
    needed = (minimum.clone().add(figures.allocated).add(figures.inqueue)
              .sub(figures.elastic))
    failing = quota_exceeded(needed, figures.real_capability, minimum)
    if not failing:
        return PERMIT
    # (Volcano's words, then the figures behind them)
    reason = "queue resource quota insufficient: " + ", ".join(
        f"insufficient {n}" for n in failing) + f" (queue {queue.name}: " + "; ".join(
        f"minResources + held + admitted {amount_text(n, needed.get(n))} > real "
        f"capability {amount_text(n, figures.real_capability.get(n))}" for n in failing) + ")"
    if not job.bare:
        session.event(f"PodGroup/{job.uid}", "Normal", "Unschedulable", reason)
    return Reject(reason)


def room_refusal(queue: str, allocated: Resource, request: Resource, limit: Resource,
                 limit_name: str) -> str | None:
    """None if a queue holding `allocated` may take `request` more within `limit` (its
    deserved amount, its real capability: `limit_name` says which), else why not."""
    future = allocated.clone().add(request)
    failing = quota_exceeded(future, limit, request)
    if not failing:
        return None
    details = "; ".join(
        f"insufficient {n} (allocated + request {amount_text(n, future.get(n))} > "
        f"{limit_name} {amount_text(n, limit.get(n))})" for n in failing)
    return f"queue {queue}: {details}"


def priority_first(left: Queue, right: Queue) -> int:
    """The queue with the higher `spec.priority` first (0 when equal): every queue
    plugin's first key of queue order."""
    if left.priority != right.priority:
        return -1 if left.priority > right.priority else 1
    return 0


# --------------------------------------------------------------------------- accounting


def _job_usage(job: Job) -> Part:
    """A job's part of its queue's figures: what it holds, asks for (held and pending),
    was admitted for and does not hold yet (None if nothing), and could give back."""
    allocated = job.allocated.clone()  # (its tasks in ALLOCATED_STATUSES)
    request = allocated.clone()
    for task in job.tasks_in(TaskStatus.PENDING):
        request.add(task.resreq)
    inqueue = owed_minimum(job)
    # What a job holds beyond its minimum could be given back: it does not count
    # against admitting others (all of it, for a job that states no minimum).
    elastic = job.allocated.exceeded_part(job.min_resources or Resource())
    return job.queue, (allocated, request, inqueue, elastic)


def total_guarantee(session: SessionView) -> Resource:
    """What every queue is guaranteed, summed (the real capabilities leave it aside)."""
    total = Resource()
    for queue in session.queues.values():
        if queue.guarantee is not None:
            total.add(queue.guarantee)
    return total


def warn_guarantees_over_cluster(session: SessionView, total: Resource,
                                 queues: list[str]) -> None:
    """A Warning on each of `queues` when their guarantees, `total`, pass what the
    cluster holds: the queues without a guarantee are then left none of it, and their
    pods would say only that their queue's quota is insufficient."""
    cluster = session.total_resource
    over = [n for n in total.names() if total.get(n) - cluster.get(n) >= MIN_RESOURCE]
    if not over:
        return
    amounts = ", ".join(f"{n} {amount_text(n, total.get(n))} > "
                        f"{amount_text(n, cluster.get(n))}" for n in over)
    for name in sorted(queues):
        session.event(f"Queue/{name}", "Warning", "GuaranteeOverCluster", (
            f"the queues' guarantees pass what the cluster holds ({amounts}): the queues "
            "without a guarantee get none of it"))


def queue_usage(session: SessionView) -> Tally:
    """What each queue's jobs hold, ask, have admitted and could give back (allocated,
    request, inqueue, elastic), summed by queue and kept between sessions
    (`vscheduler.tally`; proportion and capacity share it)."""
    return session.tally("queue-usage", None, 4, _job_usage)


class QueueUsage:
    """The queue figures and hooks a quota plugin inherits: `queue_figures` maps each
    queue with jobs in the session to its figures (a `QueueFigures` subclass)."""

    session: SessionView
    queue_figures: dict[str, Any]

    def open_queues(self, session: SessionView, figures_type: type[QueueFigures]) -> None:
        """The figures of every queue that has jobs in the session, from the jobs' sums
        kept between sessions (`vscheduler.tally`; proportion and capacity share them)."""
        guarantees = total_guarantee(session)
        warn_guarantees_over_cluster(session, guarantees, [
            queue.name for queue in session.queues.values() if queue.guarantee is not None])
        usage = queue_usage(session)
        self.queue_figures = {}
        for name in sorted(usage.sums):
            queue = session.queues.get(name)
            if queue is None:
                continue
            figures = self.queue_figures[name] = figures_type(
                queue, session.total_resource, guarantees)
            allocated, request, inqueue, elastic = usage.sums[name]
            figures.allocated = allocated.clone()
            figures.request = request.clone()
            figures.inqueue = inqueue.clone()
            figures.elastic = elastic.clone()

    def figures_of(self, queue_name: str) -> Any:
        return self.queue_figures.get(queue_name)

    def order_by_share(self, left: Queue, right: Queue) -> int:
        """Queue order: the higher priority first, then the lower share (0 when equal,
        or when either queue has no figures)."""
        first = priority_first(left, right)
        if first:
            return first
        la, ra = self.figures_of(left.name), self.figures_of(right.name)
        if la is None or ra is None or la.share == ra.share:
            return 0
        return -1 if la.share < ra.share else 1

    def task_figures(self, task: Task) -> Any:
        job = self.session.jobs.get(task.job_id)
        return self.queue_figures.get(job.queue) if job is not None else None

    @hookimpl
    def victim_state(self) -> tuple:
        """Each queue's figures: the offers take from queues above what they deserve
        (or keep their guarantee), and the queue order compares shares."""
        return tuple((name, f.allocated.key(), f.deserved.key(), f.guarantee.key(),
                      f.real_capability.key())
                     for name, f in self.queue_figures.items())

    @hookimpl
    def job_enqueueable(self, job: Job) -> int | Reject:
        queue = self.session.queues.get(job.queue)
        return admission(self.session, job, queue,
                         self.figures_of(queue.name) if queue is not None else None)

    @hookimpl
    def job_enqueued(self, job: Job) -> None:
        figures = self.figures_of(job.queue)
        if figures is not None and job.min_resources is not None:
            figures.inqueue.add(without_gated(job, job.min_resources))

    @hookimpl
    def allocate_event(self, task: Task) -> str | None:
        figures = self.task_figures(task)
        if figures is not None:
            figures.allocated.add(task.resreq)
            figures.update_share()
        return None

    @hookimpl
    def deallocate_event(self, task: Task) -> None:
        figures = self.task_figures(task)
        if figures is not None:
            figures.allocated.sub(task.resreq)
            figures.update_share()
