"""Watch events into the cache: one function per kind, the same rules for a list's items
(ADDED) and a watch's changes.

A malformed object is reported (the caller turns it into a Warning event) and left out;
a deleted one is removed whatever state it was in.
"""

from __future__ import annotations

from typing import Any

from vscheduler.cache import Cache
from vscheduler.ingest import READ_GROUPS, parse_object, put_object
from vscheduler.model import ALLOCATED_STATUSES, Task
from vscheduler.model import TaskStatus as S
from vscheduler.objects import BadObject, ParsedPod, metadata
from vscheduler.textinput import brief

__all__ = ["KINDS", "apply_event", "read_event"]

_UNREAD = object()

# kind -> (API group, version, plural, namespaced)
KINDS: dict[str, tuple[str, str, str, bool]] = {
    "PriorityClass": ("scheduling.k8s.io", "v1", "priorityclasses", False),
    "Queue": ("scheduling.volcano.sh", "v1beta1", "queues", False),
    "Node": ("", "v1", "nodes", False),
    "PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups", True),
    "Pod": ("", "v1", "pods", True),
    "PodDisruptionBudget": ("policy", "v1", "poddisruptionbudgets", True),
    "Namespace": ("", "v1", "namespaces", False),
}


def read_event(kind: str, event_type: str, obj: dict) -> Any:
    """What the cache takes of one event, read without the cache (a watch thread may):
    for ADDED / MODIFIED, what `ingest.parse_object` reads; nothing for DELETED. Raises
    BadObject for an object that cannot be read."""
    if kind not in READ_GROUPS:
        raise BadObject(f"kind {brief(kind)} is not watched")
    if event_type == "DELETED":
        return None
    return parse_object(obj, kind)


def apply_event(cache: Cache, kind: str, event_type: str, obj: dict | None,
                read: Any = _UNREAD) -> None:
    """Apply one ADDED / MODIFIED / DELETED object of `kind` to the cache, with what
    `read_event` read of it if that is given (the object itself is then needed only for
    DELETED). Raises BadObject for an object that cannot be read (it is then not in the
    cache). Objects are read by `vscheduler.ingest`, as simulate reads a manifest's."""
    if read is _UNREAD:
        read = read_event(kind, event_type, obj or {})
    if event_type == "DELETED":
        namespace, name, _ = metadata(obj or {})
        _delete(cache, kind, namespace, name)
        return
    if read[0] == "Pod" and (_bind_in_flight(cache, read[1])
                             or _eviction_in_flight(cache, read[1])):
        return
    put_object(cache, *read)


def _bind_in_flight(cache: Cache, parsed: ParsedPod) -> bool:
    """Whether a pod read is a pending view of one the scheduler decided to bind: it
    shows no node until the API server has the Binding, and the decision is kept rather
    than made pending again (Volcano too)."""
    known = _same_pod(cache, parsed)
    if known is None or not known.status & ALLOCATED_STATUSES or not known.node_name:
        return False
    return not parsed.node_name and (parsed.pod.phase or "Pending") == "Pending"


def _eviction_in_flight(cache: Cache, parsed: ParsedPod) -> bool:
    """Whether a pod read is a view from before an eviction the scheduler sent: it
    shows the pod running, not yet terminating, on the node it is being evicted from.
    The pod's room stays releasing until the eviction is refused (`Cache.unevict`) or
    the pod ends; taking the view would offer that room to the next session as held,
    and it would pick another victim for the pod already waiting on it. (Under
    --dry-run no eviction is sent: the victim stays releasing, as the dry run's binds
    stay made.)"""
    known = _same_pod(cache, parsed)
    if known is None or known.status != S.RELEASING or parsed.deleting:
        return False
    return parsed.node_name == known.node_name and parsed.status in (S.RUNNING, S.BOUND)


def _same_pod(cache: Cache, parsed: ParsedPod) -> Task | None:
    """The cache's task of the pod read, if the cache has this very pod (not another of
    its name: one created anew, say)."""
    known = cache.tasks.get(parsed.pod.key)
    return known if known is not None and known.uid == parsed.pod.uid else None


def _delete(cache: Cache, kind: str, namespace: str, name: str) -> None:
    if kind == "Pod":
        cache.delete_pod(f"{namespace}/{name}")
    elif kind == "Node":
        cache.delete_node(name)
    elif kind == "PodGroup":
        cache.delete_podgroup(f"{namespace}/{name}")
    elif kind == "Queue":
        cache.delete_queue(name)
    elif kind == "PriorityClass":
        cache.delete_priority_class(name)
    elif kind == "PodDisruptionBudget":
        cache.delete_disruption_budget(f"{namespace}/{name}")
    elif kind == "HyperNode":
        cache.delete_hypernode(name)
    elif kind == "Namespace":
        cache.delete_namespace(name)
