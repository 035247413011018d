"""Queue quota arithmetic that several plugins share (proportion, overcommit, capacity).

Volcano's rules: a quota check is strict, looks only at the resources a request asks for
(`pods` aside), and a resource the limit does not list counts as zero there.
"""

from __future__ import annotations

from vscheduler.model import Job, TaskStatus
from vscheduler.quantity import format_bytes, format_milli
from vscheduler.resources import INF, MEMORY, PODS, Resource

__all__ = ["amount_text", "inqueue_resource", "quota_exceeded", "resource_text",
           "without_gated"]

S = TaskStatus


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
