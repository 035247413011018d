"""Watch events into the cache: one function per kind, the same rules for a list's items
(ADDED) and a watch's changes.

A malformed object is reported (the caller turns it into a Warning event) and left out;
a deleted one is removed whatever state it was in.
"""

from __future__ import annotations

from vscheduler.cache import Cache
from vscheduler.model import ALLOCATED_STATUSES
from vscheduler.objects import (
    PODGROUP_GROUPS,
    BadObject,
    metadata,
    parse_node,
    parse_pod,
    parse_podgroup,
    parse_priority_class,
    parse_queue,
)

__all__ = ["KINDS", "apply_event"]

# kind -> (API group, version, plural, namespaced)
KINDS: dict[str, tuple[str, str, str, bool]] = {
    "PriorityClass": ("scheduling.k8s.io", "v1", "priorityclasses", False),
    "Queue": ("scheduling.volcano.sh", "v1beta1", "queues", False),
    "Node": ("", "v1", "nodes", False),
    "PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups", True),
    "Pod": ("", "v1", "pods", True),
}


def apply_event(cache: Cache, kind: str, event_type: str, obj: dict) -> None:
    """Apply one ADDED / MODIFIED / DELETED object of `kind` to the cache. Raises
    BadObject for an object that cannot be read (it is then not in the cache)."""
    namespace, name, _ = metadata(obj)
    if event_type == "DELETED":
        _delete(cache, kind, namespace, name)
        return
    if kind == "Pod":
        parsed = parse_pod(obj)
        known = cache.tasks.get(parsed.pod.key)
        # A pod we decided to bind still shows no node until the API server has the
        # Binding: keep our decision rather than make it pending again (Volcano too).
        if (known is not None and known.status & ALLOCATED_STATUSES and known.node_name
                and not parsed.node_name and parsed.pod.phase == "Pending"):
            return
        cache.add_pod(parsed)
    elif kind == "Node":
        cache.add_node(parse_node(obj))
    elif kind == "PodGroup":
        group = str(obj.get("apiVersion", "scheduling.volcano.sh")).split("/")[0]
        if group in PODGROUP_GROUPS:
            cache.add_podgroup(parse_podgroup(obj))
    elif kind == "Queue":
        cache.add_queue(parse_queue(obj))
    elif kind == "PriorityClass":
        cache.add_priority_class(parse_priority_class(obj))
    else:
        raise BadObject(f"kind {kind!r} is not watched")


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
