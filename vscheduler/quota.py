"""Queue quota arithmetic that several plugins share (proportion, overcommit, capacity).

Volcano's rules: a quota check is strict, looks only at the resources a request asks for
(`pods` aside), and a resource the limit does not list counts as zero there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from vscheduler.hookspecs import PERMIT, Reject
from vscheduler.model import Job, Queue, TaskStatus
from vscheduler.quantity import format_bytes, format_milli
from vscheduler.resources import INF, MEMORY, PODS, Resource

__all__ = ["QueueFigures", "admission", "amount_text", "capability_of", "inqueue_resource",
           "quota_exceeded", "real_capability", "resource_text", "without_gated"]

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

S = TaskStatus


class QueueFigures(Protocol):
    """What a quota plugin keeps of a queue, as admission reads it."""

    allocated: Resource
    inqueue: Resource
    elastic: Resource
    real_capability: Resource


def admission(session: Session, job: Job, queue: Queue | None,
              figures: QueueFigures | None) -> int | Reject:
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
