"""Queue quota arithmetic: pure functions of queues, jobs and resources that the queue
plugins (proportion, capacity, overcommit, capacity-card) and the card ledger share.

Volcano's rules: a quota check is strict, looks only at the resources a request asks for
(`pods` aside), and a resource the limit does not list counts as zero there. Nothing here
keeps state, answers a hook or sends an event: the shared hooks are in
`vscheduler.plugins.queue_quota`.
"""

from __future__ import annotations

from vscheduler.model import ALLOCATED_STATUSES, Job, Queue, TaskStatus
from vscheduler.quantity import format_bytes, format_milli
from vscheduler.resources import INF, MEMORY, MIN_RESOURCE, PODS, Resource

__all__ = ["amount_text", "capability_of", "holds_admission", "owed", "owed_minimum",
           "passes", "quota_exceeded", "real_capability", "resource_text", "without_gated"]

S = TaskStatus


# --------------------------------------------------------------------------- admitted jobs


def holds_admission(job: Job) -> bool:
    """Does an admitted job still hold room for its minimum? While Inqueue, and while
    Running with at least minMember tasks placed; one that fell below minMember (tasks
    finished) holds nothing."""
    return job.phase == "Inqueue" or (
        job.phase == "Running" and job.count(ALLOCATED_STATUSES) >= job.min_available)


def owed(minimum: Resource, held: Resource) -> Resource:
    """What is still owed of `minimum` when `held` is placed: per dimension, the part
    `held` does not cover, never below zero."""
    return minimum.exceeded_part(held)


def owed_minimum(job: Job) -> Resource | None:
    """What an admitted job still owes of its minResources (the part its allocation does
    not cover yet, less what its gated pods ask), or None for a job without minResources
    or not admitted: the room such a job keeps reserved in its queue and the cluster."""
    if job.min_resources is None or not holds_admission(job):
        return None
    return without_gated(job, owed(job.min_resources, job.allocated))


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


# --------------------------------------------------------------------------- limits


def quota_exceeded(used: Resource, limit: Resource, request: Resource) -> list[str]:
    """Dimensions `request` asks for (pods aside) where `used` passes `limit` strictly.
    A quota is a finite amount of everything: a resource `limit` does not list is zero."""
    missing = [n for n, v in request.scalars.items() if v > 0 and n not in limit.scalars]
    if missing:
        limit = limit.clone()
        for name in missing:
            limit.scalars[name] = 0
    return used.exceeds_on_requested(limit, request)


def passes(total: float, limit: float) -> bool:
    """`total` passes `limit` by at least `MIN_RESOURCE` (the tolerance of every resource
    comparison), one amount at a time: the card quotas' check."""
    return total - limit >= MIN_RESOURCE


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


# --------------------------------------------------------------------------- amounts as text


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
