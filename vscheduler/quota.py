"""Queue quota arithmetic that several plugins share (proportion, overcommit, capacity).

Volcano's rules: a quota check is strict, looks only at the resources a request asks for
(`pods` aside), and a resource the limit does not list counts as zero there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vscheduler.hookspecs import PERMIT, Reject, hookimpl
from vscheduler.model import ALLOCATED_STATUSES, Job, Queue, Task, TaskStatus
from vscheduler.quantity import format_bytes, format_milli
from vscheduler.resources import INF, MEMORY, PODS, Resource, share

__all__ = ["QueueAttr", "QueueUsage", "admission", "amount_text", "capability_of",
           "inqueue_resource", "quota_exceeded", "real_capability", "resource_text",
           "without_gated"]

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

S = TaskStatus


def admission(session: Session, job: Job, queue: Queue | None,
              figures: QueueAttr | None) -> int | Reject:
    """Volcano's admission by queue quota (proportion, capacity): the job's
    minResources, with what the queue holds and has admitted, less what running jobs
    hold beyond their minimum, must fit the queue's real capability. A refusal is also a
    Normal `Unschedulable` event on the PodGroup."""
    if queue is None:
        return Reject(f"queue {job.queue} not found")
    if not queue.is_open():
        return Reject(f"queue {queue.name} is {queue.state}: it admits no new jobs")
    if job.min_resources is None or figures is None:
        return PERMIT
    minimum = job.min_resources
    needed = (minimum.clone().add(figures.allocated).add(figures.inqueue)
              .sub(figures.elastic))
    failing = quota_exceeded(needed, figures.real_capability, minimum)
    if not failing:
        return PERMIT
    reason = "queue resource quota insufficient: " + ", ".join(
        f"insufficient {n}" for n in failing)
    if not job.bare:
        session.event(f"PodGroup/{job.uid}", "Normal", "Unschedulable", reason)
    return Reject(reason)


def inqueue_resource(job: Job) -> Resource:
    """What an admitted job still has to claim of its minResources: per dimension of
    minResources, the part its allocation does not cover yet."""
    minimum = job.min_resources or Resource()
    held = job.allocated
    out = Resource(max(minimum.cpu - held.cpu, 0), max(minimum.memory - held.memory, 0))
    for name, amount in minimum.scalars.items():
        out.scalars[name] = max(amount - held.scalars.get(name, 0), 0)
    return out


def without_gated(job: Job, amount: Resource) -> Resource:
    """`amount` less what the job's scheduling-gated pods ask, never below zero: a gated
    pod cannot be placed, so it must not hold room that other jobs could be admitted to."""
    gated = Resource()
    for task in job.tasks_in(S.PENDING):
        if task.scheduling_gated:
            gated.add(task.resreq)
    if gated.is_empty():
        return amount.clone()
    return amount.exceeded_part(gated)


def quota_exceeded(used: Resource, limit: Resource, request: Resource) -> list[str]:
    """Dimensions `request` asks for (pods aside) where `used` passes `limit` strictly.
    A quota is a finite amount of everything: a resource `limit` does not list is zero."""
    missing = [n for n, v in request.scalars.items() if v > 0 and n not in limit.scalars]
    if missing:
        limit = limit.clone()
        for name in missing:
            limit.scalars[name] = 0
    return used.exceeds_on_requested(limit, request)


def amount_text(name: str, amount: float) -> str:
    """One resource amount as a quantity a user reads: cpu 1500m, memory 4Gi, pods 3."""
    if amount == INF:
        return "unlimited"
    if name == MEMORY:
        return format_bytes(amount)
    if name == PODS:
        return str(round(amount))
    return format_milli(amount)


def resource_text(resource: Resource) -> str:
    """A resource as `cpu 4, memory 8Gi, pods 4` (dimensions holding something)."""
    parts = [f"{n} {amount_text(n, resource.get(n))}" for n in resource.names()]
    return ", ".join(parts) or "nothing"


def capability_of(queue: Queue) -> Resource | None:
    """A queue's `spec.capability`, with zero (or no) cpu or memory meaning no limit on
    it, as Volcano reads it; None when the queue has no capability."""
    if queue.capability is None:
        return None
    capability = queue.capability.clone()
    if capability.cpu <= 0:
        capability.cpu = INF
    if capability.memory <= 0:
        capability.memory = INF
    return capability


def real_capability(total: Resource, total_guarantee: Resource, guarantee: Resource,
                    capability: Resource | None) -> Resource:
    """What a queue could ever get: the cluster less every queue's guarantee, plus its
    own, capped by its capability. Every dimension of the cluster is kept, at zero if
    the guarantees take it all, so a cluster smaller than its guarantees leaves the
    others nothing rather than a negative amount."""
    real = Resource(max(total.cpu - total_guarantee.cpu, 0),
                    max(total.memory - total_guarantee.memory, 0))
    for name, amount in total.scalars.items():
        real.scalars[name] = max(amount - total_guarantee.scalars.get(name, 0), 0)
    real.add(guarantee)
    if capability is not None:
        real.min_dimension(capability, missing_infinite=True)
    return real


class QueueAttr:
    """A queue's figures in one session, as the quota plugins keep them (proportion and
    capacity extend it with what they compute on top: weight, deserved)."""

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


_USAGE_MEMO = "queue-usage"


def _job_usage(job: Job) -> tuple[Resource, Resource, Resource | None, Resource]:
    """What a job holds, asks for (held and pending), was admitted for and does not
    hold yet (None if nothing), and could give back."""
    allocated = job.allocated.clone()  # (its tasks in ALLOCATED_STATUSES)
    request = allocated.clone()
    for task in job.tasks_in(S.PENDING):
        request.add(task.resreq)
    inqueue = None
    if job.min_resources is not None:
        if job.phase == "Inqueue":
            inqueue = without_gated(job, inqueue_resource(job))
        elif job.phase == "Running" and job.count(ALLOCATED_STATUSES) >= job.min_available:
            # A running job still owed part of its minimum keeps that part reserved;
            # one that fell below minMember (tasks finished) reserves nothing.
            inqueue = without_gated(job, inqueue_resource(job))
    # What a job holds beyond its minimum could be given back: it does not count
    # against admitting others (all of it, for a job that states no minimum).
    elastic = job.allocated.exceeded_part(job.min_resources or Resource())
    return allocated, request, inqueue, elastic


class QueueUsage:
    """What the queue quota plugins (proportion, capacity) share: each queue's figures
    in `queue_attrs` (objects with allocated, request, inqueue, elastic,
    real_capability and `update_share()`), counted from its jobs at session open, kept
    current by the allocate and deallocate events; and admission by them. A plugin
    inherits it beside `Plugin` and fills `queue_attrs` in `on_session_open`."""

    session: Session
    queue_attrs: dict[str, Any]

    def open_queues(self, session: Session, attr_type: type[QueueAttr]) -> None:
        """The figures of every queue that has jobs in the session, counted from them."""
        total_guarantee = Resource()
        for queue in session.queues.values():
            if queue.guarantee is not None:
                total_guarantee.add(queue.guarantee)
        self.queue_attrs = {}
        for job in session.jobs.values():
            queue = session.queues.get(job.queue)
            if queue is None:
                continue
            attr = self.queue_attrs.get(queue.name)
            if attr is None:
                attr = self.queue_attrs[queue.name] = attr_type(
                    queue, session.total_resource, total_guarantee)
            self.count_job(attr, job)

    @staticmethod
    def count_job(attr: Any, job: Job) -> None:
        """Add what a job holds, asks and was admitted for to its queue's figures (read
        once per job copy: see `Job.memo`)."""
        usage = job.memo.get(_USAGE_MEMO)
        if usage is None:
            usage = job.memo[_USAGE_MEMO] = _job_usage(job)
        allocated, request, inqueue, elastic = usage
        attr.allocated.add(allocated)
        attr.request.add(request)
        if inqueue is not None:
            attr.inqueue.add(inqueue)
        attr.elastic.add(elastic)

    def _attr_of(self, queue_name: str) -> Any:
        return self.queue_attrs.get(queue_name)

    def _task_attr(self, task: Task) -> Any:
        job = self.session.jobs.get(task.job_id)
        return self._attr_of(job.queue) if job is not None else None

    @hookimpl
    def job_enqueueable(self, job: Job) -> int | Reject:
        queue = self.session.queues.get(job.queue)
        return admission(self.session, job, queue,
                         self._attr_of(queue.name) if queue is not None else None)

    @hookimpl
    def job_enqueued(self, job: Job) -> None:
        attr = self._attr_of(job.queue)
        if attr is not None and job.min_resources is not None:
            attr.inqueue.add(without_gated(job, job.min_resources))

    @hookimpl
    def allocate_event(self, task: Task) -> str | None:
        attr = self._task_attr(task)
        if attr is not None:
            attr.allocated.add(task.resreq)
            attr.update_share()
        return None

    @hookimpl
    def deallocate_event(self, task: Task) -> None:
        attr = self._task_attr(task)
        if attr is not None:
            attr.allocated.sub(task.resreq)
            attr.update_share()
