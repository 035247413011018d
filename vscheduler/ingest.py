"""A Kubernetes object (the dict the API server sends, or a manifest's document) into the
cache: which kinds the scheduler reads, how each is parsed, and the Warning for one that
cannot be read. `simulate` and the daemon both come through here, so a manifest is read
exactly as the same object arriving from a watch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vscheduler.cache import Cache
from vscheduler.framework.results import Event
from vscheduler.objects import (
    PODGROUP_GROUPS,
    BadObject,
    metadata,
    parse_disruption_budget,
    parse_hypernode,
    parse_namespace,
    parse_node,
    parse_pod,
    parse_podgroup,
    parse_priority_class,
    parse_queue,
)
from vscheduler.textinput import brief

__all__ = ["CLUSTER_SCOPED", "READ_GROUPS", "add_object", "describe", "not_read",
           "parse_object", "put_object", "read_kind", "refused", "skipped_event"]

# kind -> the API groups it is read from ("" is the core group). A Queue of another
# group is someone else's Queue, not Volcano's; a PodGroup may be Volcano's or
# scheduler-plugins' (coscheduling).
READ_GROUPS: dict[str, tuple[str, ...]] = {
    "Node": ("",),
    "Pod": ("",),
    "PodGroup": PODGROUP_GROUPS,
    "Queue": ("scheduling.volcano.sh",),
    "PriorityClass": ("scheduling.k8s.io",),
    "PodDisruptionBudget": ("policy",),
    "HyperNode": ("topology.volcano.sh",),
    "Namespace": ("",),
}
CLUSTER_SCOPED = frozenset({"Node", "Queue", "PriorityClass", "HyperNode", "Namespace"})
# Kubernetes' longest name (a DNS subdomain), and the most an Event's note holds: what a
# Warning about an object keeps of a name or a message that a file makes longer.
_NAME_LIMIT = 253
_NOTE_LIMIT = 1024


def read_kind(obj: dict, kind: str | None = None) -> str | None:
    """The kind the scheduler reads `obj` as, or None if it reads no such object. `kind`
    is the kind the caller watched (objects in a list response carry no kind or
    apiVersion); without it, the object's own `kind` and `apiVersion` decide."""
    if kind is None:
        kind = obj.get("kind")
    groups = READ_GROUPS.get(kind) if isinstance(kind, str) else None
    if groups is None:
        return None
    api_version = obj.get("apiVersion")
    if api_version is None:
        return kind  # e.g. an item of a list response, which names neither
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else None
    return kind if group in groups else None


def not_read(obj: dict) -> str | None:
    """Why a document `read_kind` passes over is likely a mistake, to say so: its kind
    or apiVersion is not text, or it is of a kind the scheduler reads but of an API
    group it does not read that kind from (`core/v1` for a Pod). None for a document
    of a kind it never reads (a Deployment): nothing to say."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if not isinstance(kind, str):
        return f"kind: expected a string, got {brief(kind)}"
    if api_version is not None and not isinstance(api_version, str):
        return f"apiVersion: expected a string, got {brief(api_version)}"
    groups = READ_GROUPS.get(kind)
    if groups is None or read_kind(obj) is not None:
        return None
    named = " or ".join(f"{group}/..." if group else "v1" for group in groups)
    return f"apiVersion {brief(api_version)}: a {kind} is read as {named} only"


# kind -> what reads an object of it (with the order standing for a missing creation
# time, for the kinds that keep one), and what puts it in the cache
_PARSERS: dict[str, Callable[[dict, float], Any]] = {
    "Pod": parse_pod,
    "Node": lambda obj, order: parse_node(obj),
    "PodGroup": parse_podgroup,
    "Queue": parse_queue,
    "PriorityClass": lambda obj, order: parse_priority_class(obj),
    "PodDisruptionBudget": lambda obj, order: parse_disruption_budget(obj),
    "HyperNode": lambda obj, order: parse_hypernode(obj),
    "Namespace": lambda obj, order: parse_namespace(obj),
}
_PUT: dict[str, Callable[[Cache, Any], None]] = {
    "Pod": Cache.add_pod,
    "Node": Cache.add_node,
    "PodGroup": Cache.add_podgroup,
    "Queue": Cache.add_queue,
    "PriorityClass": Cache.add_priority_class,
    "PodDisruptionBudget": Cache.add_disruption_budget,
    "HyperNode": Cache.add_hypernode,
    "Namespace": lambda cache, namespace: cache.add_namespace(*namespace),
}


def parse_object(obj: dict, kind: str | None = None,
                 order: float = 0.0) -> tuple[str | None, Any]:
    """The kind `obj` is read as (None for an object the scheduler does not read) and
    what it reads of it, without the cache: the daemon reads objects as they arrive,
    beside its scheduling. Raises BadObject for one it reads and cannot use. `order`
    stands for the creation time of an object that has none (simulate's files)."""
    read = read_kind(obj, kind)
    return read, (_PARSERS[read](obj, order) if read is not None else None)


def put_object(cache: Cache, read: str | None, parsed: Any) -> None:
    """Put what `parse_object` read in the cache (replacing what it had under its name)."""
    if read is not None:
        _PUT[read](cache, parsed)


def add_object(cache: Cache, obj: dict, kind: str | None = None,
               order: float = 0.0) -> str | None:
    """Parse `obj` and put it in the cache (replacing what the cache had under its name);
    the kind it was read as, or None for an object the scheduler does not read. Raises
    BadObject for one it reads and cannot use (the cache is then unchanged)."""
    read, parsed = parse_object(obj, kind, order)
    put_object(cache, read, parsed)
    return read


def describe(obj: dict, kind: str | None = None) -> str:
    """`Kind/namespace/name` (`Kind/name` for a cluster-scoped kind), as Events name
    objects; `?` for a part the object does not give in a usable form."""
    kind = kind or obj.get("kind")
    kind = kind if isinstance(kind, str) and kind else "?"
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name")
    name = name[:_NAME_LIMIT] if isinstance(name, str) and name else "?"
    if kind in CLUSTER_SCOPED:
        return f"{kind}/{name}"
    namespace = meta.get("namespace")
    namespace = namespace[:_NAME_LIMIT] if isinstance(namespace, str) and namespace \
        else "default"
    return f"{kind}/{namespace}/{name}"


def refused(cache: Cache, obj: dict, err: BadObject, kind: str | None = None,
            where: str = "") -> Event:
    """An object left out (`skipped_event`'s Warning); a PodGroup's refusal is kept in
    the cache too, for its pods to say why they wait."""
    if read_kind(obj, kind) == "PodGroup":
        try:
            namespace, name, _ = metadata(obj)
        except BadObject:
            pass  # (no name: no pod can name it either)
        else:
            cache.refuse_podgroup(f"{namespace}/{name}", _shortened(str(err)))
    return skipped_event(obj, err, kind, where)


def skipped_event(obj: dict, err: BadObject, kind: str | None = None,
                  where: str = "") -> Event:
    """The Warning for an object left out: on the object (named once, by the Event), with
    where it came from when that is a file, and what is wrong."""
    place = f"{where}: " if where else ""
    return Event(describe(obj, kind), "Warning", "BadObject",
                 _shortened(f"{place}skipped: {err}"))


def _shortened(message: str) -> str:
    return message if len(message) <= _NOTE_LIMIT else message[:_NOTE_LIMIT - 3] + "..."
