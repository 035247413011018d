"""Kubernetes objects (as plain dicts, the JSON the API server sends) to our own objects.

Used by both cluster sources: manifest files for `simulate` and watches for the daemon.
Nothing here keeps a reference to the dict it read. Every function raises `BadObject`
with a message naming the field for input it cannot use; the caller skips that object
with a Warning event, and the rest is scheduled.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from vscheduler.guards import MIN_RUNTIME_ANNOTATION, parse_duration
from vscheduler.matching import NAMESPACE_NAME_LABEL, NODE_NAME_FIELD, compile_name_pattern
from vscheduler.model import PriorityClass, Queue, Status, TaskStatus
from vscheduler.quantity import QuantityError
from vscheduler.resources import PODS, Resource
from vscheduler.specs import (
    DisruptionBudget,
    HyperNodeMember,
    HyperNodeSpec,
    InterPod,
    LabelExpression,
    LabelSelector,
    NetworkTopology,
    NodeSpec,
    Pod,
    PodAffinityTerm,
    PodGroupSpec,
    SpreadConstraint,
    SubGroupPolicy,
)
from vscheduler.textinput import TextError, brief, load_json

__all__ = [
    "GROUP_NAME_ANNOTATION",
    "PREEMPTABLE_ANNOTATION",
    "PROTECTION_ANNOTATION",
    "QUEUE_NAME_ANNOTATION",
    "BadObject",
    "NodeSpec",
    "PodGroupSpec",
    "parse_disruption_budget",
    "parse_hypernode",
    "parse_namespace",
    "parse_node",
    "parse_pod",
    "parse_podgroup",
    "parse_priority_class",
    "parse_queue",
    "timestamp_of",
]

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
# Seed 000's protection: "false" keeps a pod, or every pod of a PodGroup, from eviction.
PROTECTION_ANNOTATION = "elastic.gpu/preemptible"
TASK_SPEC_KEY = "volcano.sh/task-spec"
TASK_PRIORITY_ANNOTATION = "volcano.sh/task-priority"
# The coscheduling flavour of gang (scheduler-plugins) names a pod's group by label.
COSCHEDULING_GROUP_LABELS = ("scheduling.x-k8s.io/pod-group",
                             "pod-group.scheduling.sigs.k8s.io/name",
                             "pod-group.scheduling.sigs.k8s.io")
PODGROUP_GROUPS = ("scheduling.volcano.sh", "scheduling.x-k8s.io", "scheduling.sigs.k8s.io")


class BadObject(ValueError):
    """An object that cannot be used; the message says which field and why."""


def _flag(value: Any, where: str, default: bool = False) -> bool:
    """A boolean field (`true` or `false`, as the API server's schema allows; absent:
    `default`). Text is refused: `"false"` is not false to Python, and would be true."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadObject(f"{where}: expected true or false, got {brief(value)}")
    return value


def _map(obj: Any, where: str) -> dict:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise BadObject(f"{where}: expected a map, got {type(obj).__name__}")
    return obj


def _list(obj: Any, where: str) -> list:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise BadObject(f"{where}: expected a list, got {type(obj).__name__}")
    return obj


# Read-only, shared: most pods have no selector, labels or annotations. Parsed objects
# are never mutated (frozen specs, see specs.py), so sharing them saves memory on
# clusters of tens of thousands of pods (lists read become tuples, and the empty tuple
# is one object already).
_NO_STRINGS: dict[str, str] = {}
# The string maps read lately, shared by the objects that read the same: the pods of one
# job (listed one after another) carry the same labels and annotations (`_shared`).
# (A map of more characters is not kept: annotations may hold 256 KiB, and what is kept
# may outlive its objects.)
_RECENT_STRINGS: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
_KEPT_MAPS = 4096
_KEPT_MAP_CHARACTERS = 4096
_SHARED_REQUESTS: dict[tuple, Resource] = {}


def _scalar(value: Any, where: str) -> str:
    """A string. A number, a boolean or a date is refused, as the API server refuses it:
    YAML makes one of an unquoted value (`no`, `1.10`, `010`), and its text is then
    lost (`False`, `1.1`, `8`), so a selector written the same way would not match."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        raise BadObject(f"{where}: expected a string, got {type(value).__name__}")
    raise BadObject(f"{where}: expected a string, got {brief(value)} (YAML reads an "
                    "unquoted value such as no, 1.10 or 010 as no string: quote it)")


def _text(value: Any, where: str, default: str) -> str:
    """A string field (`default` when absent or empty); a list or a map is an error."""
    return _scalar(value, where) if value else default


def _str_map(obj: Any, where: str) -> dict[str, str]:
    """Labels, annotations, a selector: strings to strings (anything else as a value is
    an error: see `_scalar`)."""
    mapping = _map(obj, where)
    if not mapping:
        return _NO_STRINGS
    read = {sys.intern(str(key)): "" if value is None else _scalar(value, f"{where}.{key}")
            for key, value in mapping.items()}
    items = tuple(read.items())
    shared = _RECENT_STRINGS.get(items)
    if shared is not None:  # (asked first: most maps read are kept ones)
        return shared
    if sum(len(key) + len(value) for key, value in items) > _KEPT_MAP_CHARACTERS:
        return read
    return _shared(_RECENT_STRINGS, items, read, _KEPT_MAPS)


def _quantity_texts(obj: Any, where: str) -> dict[str, str]:
    """Resource amounts kept as written (a Queue's `status.allocated`, read again only
    when compared): a quantity may be a number in YAML, as the API server takes it."""
    out = {}
    for key, value in _map(obj, where).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        out[str(key)] = _scalar(value, f"{where}.{key}")
    return out


def _shared(kept: dict[Any, Any], key: Any, read: Any, limit: int) -> Any:
    """What `kept` holds under `key`, else `read`, kept there: parsed objects alike are
    one object (they are never changed). `kept` is cleared when it holds `limit`, which
    bounds it and keeps it safe from several watch threads (at worst a share is missed)."""
    shared = kept.get(key)
    if shared is None:
        if len(kept) >= limit:
            kept.clear()
        shared = kept[key] = read
    return shared


def _labels(meta: dict) -> dict[str, str]:
    """Labels, whose values the API server keeps to 63 characters: one longer (only a
    manifest can hold it) is refused rather than compared as a number of 5,000 digits."""
    labels = _str_map(meta.get("labels"), "metadata.labels")
    for key, value in labels.items():
        if len(value) > 63:
            raise BadObject(f"metadata.labels.{key}: a label value is at most 63 "
                            f"characters, got {len(value)}")
    return labels


def _shared_request(request: Resource) -> Resource:
    """One Resource object for all pods that ask the same (never mutated)."""
    key = (request.cpu, request.memory, tuple(sorted(request.scalars.items())))
    return _shared(_SHARED_REQUESTS, key, request, 100_000)


_INT64 = 2**63
# An integer written as a string: ASCII digits (`str.isdigit` takes "²", which `int`
# refuses), and not thousands of them (which `int` refuses too).
_INTEGER = re.compile(r"^\s*[-+]?[0-9]{1,19}\s*$")


def _int(obj: Any, where: str, default: int | None = None) -> int | None:
    """An integer field; a whole number written with a point (`2.0`) is that integer,
    as kubectl's YAML-to-JSON conversion writes it."""
    if obj is None:
        return default
    if isinstance(obj, float) and obj.is_integer():
        obj = int(obj)
    if isinstance(obj, bool) or not isinstance(obj, int):
        if isinstance(obj, str) and _INTEGER.match(obj):
            obj = int(obj)
        else:
            raise BadObject(f"{where}: expected an integer, got {brief(obj)}")
    if not -_INT64 <= obj < _INT64:
        # Kubernetes' integers are 64-bit at most; Python's would grow without end
        raise BadObject(f"{where}: {brief(obj)} is out of range for an integer")
    return obj


def _weight(item: dict, where: str) -> int:
    """A preferred term's weight: 1 to 100, as the API server validates it (node and pod
    affinity alike)."""
    weight = _int(item.get("weight"), where, 0) or 0
    if not 1 <= weight <= 100:
        raise BadObject(f"{where}: 1 to 100, got {weight}")
    return weight


def _int32(value: int | None, where: str) -> int | None:
    """A priority, which Kubernetes holds in 32 bits (the API server refuses more)."""
    if value is not None and not -2**31 <= value < 2**31:
        raise BadObject(f"{where}: {value} is out of range for a priority (32 bits)")
    return value


# A resource name: a qualified name (an optional DNS-subdomain prefix of 253 characters
# at most, and a name of 63), as the API server validates it.
_RESOURCE_NAME = re.compile(r"^(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*"
                            r"[a-z0-9])?)*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$")


# Resource names found well formed (a few per cluster: every pod asks for the same ones).
_GOOD_RESOURCE_NAMES: set[str] = set()


def _resources(obj: Any, where: str) -> Resource:
    mapping = _map(obj, where)
    for name in mapping:
        if name in _GOOD_RESOURCE_NAMES:
            continue
        if not isinstance(name, str) or len(name) > 317 or not _RESOURCE_NAME.match(name):
            raise BadObject(f"{where}: {brief(name)} is not a resource name")
        if len(_GOOD_RESOURCE_NAMES) < 4096:  # (bounded: names are user text)
            _GOOD_RESOURCE_NAMES.add(name)
    try:
        return Resource.from_k8s(mapping)
    except QuantityError as err:
        raise BadObject(f"{where}: {err}") from None


def _timestamp(meta: dict) -> float | None:
    return _time(meta.get("creationTimestamp"), "metadata.creationTimestamp")


def _time(raw: Any, where: str) -> float | None:
    """A timestamp field (RFC 3339, as the API server writes them), None if absent."""
    if raw is None:
        return None
    if not isinstance(raw, datetime):
        try:
            text = _scalar(raw, where)
            raw = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise BadObject(f"{where}: not a timestamp: {brief(raw)}") from None
    # A time without a zone is UTC, as the API server writes it: never the local zone
    # of the machine that reads it (that would change decisions from one to another).
    if raw.tzinfo is None:
        raw = raw.replace(tzinfo=UTC)
    return raw.timestamp()


def metadata(obj: dict) -> tuple[str, str, dict]:
    """(namespace, name, metadata) of an object, with the name required."""
    meta = _map(obj.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise BadObject("metadata.name: missing")
    return _text(meta.get("namespace"), "metadata.namespace", "default"), name, meta


def timestamp_of(obj: dict) -> float | None:
    """An object's creationTimestamp (seconds since the epoch), None if it has none or it
    cannot be read."""
    try:
        return _timestamp(_map(obj.get("metadata"), "metadata"))
    except BadObject:
        return None


def creation_of(obj: dict, fallback: float) -> float:
    stamp = _timestamp(_map(obj.get("metadata"), "metadata"))
    return fallback if stamp is None else stamp


# --------------------------------------------------------------------------- pods


def pod_request(spec: dict) -> Resource:
    """What a pod asks of a node, as Kubernetes counts it: the larger of its containers'
    sum (with restartable init containers, i.e. sidecars) and each init container's peak,
    plus `spec.overhead`, plus one pod slot."""
    total = Resource()
    for i, container in enumerate(_list(spec.get("containers"), "spec.containers")):
        container = _map(container, f"spec.containers[{i}]")
        res = _map(container.get("resources"), f"spec.containers[{i}].resources")
        total.add(_resources(res.get("requests"), f"spec.containers[{i}].resources.requests"))
    sidecars = Resource()
    init_peak = Resource()
    for i, container in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        container = _map(container, f"spec.initContainers[{i}]")
        res = _map(container.get("resources"), f"spec.initContainers[{i}].resources")
        request = _resources(res.get("requests"), f"spec.initContainers[{i}].resources.requests")
        if container.get("restartPolicy") == "Always":
            sidecars.add(request)
            total.add(request)
        else:
            init_peak.set_max(request.clone().add(sidecars))
    total.set_max(init_peak)
    total.add(_resources(spec.get("overhead"), "spec.overhead"))
    total.scalars[PODS] = 1
    return _shared_request(total)


def _expressions(raw: Any, where: str) -> list[tuple[str, str, tuple[str, ...]]]:
    out: list[tuple[str, str, tuple[str, ...]]] = []
    for i, expr in enumerate(_list(raw, where)):
        expr = _map(expr, f"{where}[{i}]")
        key, operator = expr.get("key"), expr.get("operator")
        if not isinstance(key, str) or operator not in (
                "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            raise BadObject(f"{where}[{i}]: needs a key and an operator among In, NotIn, "
                            f"Exists, DoesNotExist, Gt, Lt")
        values = tuple(_scalar(v, f"{where}[{i}].values")
                       for v in _list(expr.get("values"), f"{where}[{i}].values"))
        if operator in ("Gt", "Lt") and (len(values) != 1 or not _INTEGER.match(values[0])):
            raise BadObject(f"{where}[{i}]: {operator} needs one integer value")
        out.append((key, operator, values))
    return out


_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _label_expressions(raw: Any, where: str) -> list[LabelExpression]:
    """A label selector's `matchExpressions`, validated as the API server does: In,
    NotIn, Exists or DoesNotExist; In and NotIn take values, the other two none."""
    expressions = _expressions(raw, where)
    for i, (_, operator, values) in enumerate(expressions):
        if operator not in _LABEL_OPERATORS:
            raise BadObject(f"{where}[{i}]: a label selector's operator is In, NotIn, "
                            f"Exists or DoesNotExist, got {operator}")
        if (operator in ("In", "NotIn")) != bool(values):
            raise BadObject(f"{where}[{i}]: In and NotIn need values, Exists and "
                            "DoesNotExist take none")
    return expressions


def _label_selector(raw: Any, where: str) -> LabelSelector | None:
    """A `metav1.LabelSelector` as one tuple of requirements (`matchLabels` read as In
    with one value); None when absent, which selects nothing where Kubernetes says so."""
    if raw is None:
        return None
    selector = _map(raw, where)
    matched = _str_map(selector.get("matchLabels"), f"{where}.matchLabels")
    return (*((key, "In", (value,)) for key, value in sorted(matched.items())),
            *_label_expressions(selector.get("matchExpressions"), f"{where}.matchExpressions"))


def _folded(selector: LabelSelector | None, labels: dict[str, str], keys: Any,
            operator: str, where: str) -> LabelSelector | None:
    """`selector` with `matchLabelKeys` (In) or `mismatchLabelKeys` (NotIn) folded in:
    each key the pod has a label for, with the pod's value (a key it lacks is left out,
    and a term without a selector stays without one), as the API server merges them."""
    names = [_scalar(key, f"{where}[]") for key in _list(keys, where)]
    if selector is None or not names:
        return selector
    return (*selector, *((key, operator, (labels[key],)) for key in names if key in labels))


def _pod_affinity_term(raw: Any, where: str, namespace: str,
                       labels: dict[str, str]) -> PodAffinityTerm:
    term = _map(raw, where)
    key = _text(term.get("topologyKey"), f"{where}.topologyKey", "")
    if not key:
        raise BadObject(f"{where}.topologyKey: required")
    selector = _label_selector(term.get("labelSelector"), f"{where}.labelSelector")
    selector = _folded(selector, labels, term.get("matchLabelKeys"), "In",
                       f"{where}.matchLabelKeys")
    selector = _folded(selector, labels, term.get("mismatchLabelKeys"), "NotIn",
                       f"{where}.mismatchLabelKeys")
    namespaces = frozenset(_scalar(ns, f"{where}.namespaces[]")
                           for ns in _list(term.get("namespaces"), f"{where}.namespaces"))
    namespace_selector = _label_selector(term.get("namespaceSelector"),
                                         f"{where}.namespaceSelector")
    if not namespaces and namespace_selector is None:
        namespaces = frozenset((namespace,))
    return PodAffinityTerm(selector, namespaces, namespace_selector, sys.intern(key))


def _pod_affinity_terms(section: dict, where: str, namespace: str, labels: dict[str, str],
                        ) -> tuple[tuple[PodAffinityTerm, ...],
                                   tuple[tuple[int, PodAffinityTerm], ...]]:
    """A `podAffinity` or `podAntiAffinity`: its required terms and its preferred
    (weight, term) pairs (weight 1 to 100, as the API server validates)."""
    required_where = f"{where}.requiredDuringSchedulingIgnoredDuringExecution"
    required = tuple(
        _pod_affinity_term(raw, f"{required_where}[{i}]", namespace, labels)
        for i, raw in enumerate(_list(section.get(
            "requiredDuringSchedulingIgnoredDuringExecution"), required_where)))
    preferred_where = f"{where}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = []
    for i, raw in enumerate(_list(section.get(
            "preferredDuringSchedulingIgnoredDuringExecution"), preferred_where)):
        item = _map(raw, f"{preferred_where}[{i}]")
        weight = _weight(item, f"{preferred_where}[{i}].weight")
        preferred.append((weight, _pod_affinity_term(
            item.get("podAffinityTerm"), f"{preferred_where}[{i}].podAffinityTerm",
            namespace, labels)))
    return required, tuple(preferred)


_SPREAD_POLICIES = ("Honor", "Ignore")


def _spread_constraint(raw: Any, where: str, namespace: str,
                       labels: dict[str, str]) -> SpreadConstraint:
    item = _map(raw, where)
    max_skew = _int(item.get("maxSkew"), f"{where}.maxSkew", 0) or 0
    if max_skew < 1:
        raise BadObject(f"{where}.maxSkew: must be 1 or more, got {max_skew}")
    key = _text(item.get("topologyKey"), f"{where}.topologyKey", "")
    if not key:
        raise BadObject(f"{where}.topologyKey: required")
    when = item.get("whenUnsatisfiable")
    if when not in ("DoNotSchedule", "ScheduleAnyway"):
        raise BadObject(f"{where}.whenUnsatisfiable: DoNotSchedule or ScheduleAnyway, "
                        f"got {brief(when)}")
    min_domains = _int(item.get("minDomains"), f"{where}.minDomains")
    if min_domains is not None and (min_domains < 1 or when != "DoNotSchedule"):
        raise BadObject(f"{where}.minDomains: 1 or more, and only with DoNotSchedule")
    policies = []
    for field_name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
        policy = _text(item.get(field_name), f"{where}.{field_name}", default)
        if policy not in _SPREAD_POLICIES:
            raise BadObject(f"{where}.{field_name}: Honor or Ignore, got {brief(policy)}")
        policies.append(policy == "Honor")
    selector = _label_selector(item.get("labelSelector"), f"{where}.labelSelector")
    selector = _folded(selector, labels, item.get("matchLabelKeys"), "In",
                       f"{where}.matchLabelKeys")
    term = PodAffinityTerm(selector, frozenset((namespace,)), None, sys.intern(key))
    return SpreadConstraint(max_skew, term, when == "DoNotSchedule", min_domains,
                            honor_affinity=policies[0], honor_taints=policies[1])


def _inter_pod(spec: dict, namespace: str, labels: dict[str, str]) -> InterPod | None:
    """The pod's affinity and anti-affinity to other pods and its topology spread
    constraints; None when it has none."""
    affinity = _map(spec.get("affinity"), "spec.affinity")
    raw_affinity = affinity.get("podAffinity")
    raw_anti = affinity.get("podAntiAffinity")
    raw_spread = spec.get("topologySpreadConstraints")
    if not (raw_affinity or raw_anti or raw_spread):
        return None
    required, preferred = _pod_affinity_terms(
        _map(raw_affinity, "spec.affinity.podAffinity"), "spec.affinity.podAffinity",
        namespace, labels)
    anti, preferred_anti = _pod_affinity_terms(
        _map(raw_anti, "spec.affinity.podAntiAffinity"), "spec.affinity.podAntiAffinity",
        namespace, labels)
    spread = tuple(
        _spread_constraint(raw, f"spec.topologySpreadConstraints[{i}]", namespace, labels)
        for i, raw in enumerate(_list(raw_spread, "spec.topologySpreadConstraints")))
    rules = InterPod(required, anti, preferred, preferred_anti, spread)
    return rules if rules != _NO_RULES else None


_NO_RULES = InterPod()


def _node_selector_term(term: Any, where: str) -> list[tuple[str, str, tuple[str, ...]]]:
    term = _map(term, where)
    exprs = _expressions(term.get("matchExpressions"), f"{where}.matchExpressions")
    # matchFields supports metadata.name only, as in Kubernetes.
    for i, field in enumerate(_expressions(term.get("matchFields"), f"{where}.matchFields")):
        if field[0] != "metadata.name":
            raise BadObject(f"{where}.matchFields[{i}]: only metadata.name is supported")
        exprs.append((NODE_NAME_FIELD, field[1], field[2]))
    return exprs


def _affinity(spec: dict) -> tuple[list | None, tuple]:
    affinity = _map(spec.get("affinity"), "spec.affinity")
    node_affinity = _map(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required_raw = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = None
    if required_raw is not None:
        terms = _list(_map(required_raw, where).get("nodeSelectorTerms"),
                      f"{where}.nodeSelectorTerms")
        required = [_node_selector_term(t, f"{where}.nodeSelectorTerms[{i}]")
                    for i, t in enumerate(terms)]
    where = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = []
    for i, pref in enumerate(_list(node_affinity.get(
            "preferredDuringSchedulingIgnoredDuringExecution"), where)):
        pref = _map(pref, f"{where}[{i}]")
        weight = _weight(pref, f"{where}[{i}].weight")
        preferred.append((weight, _node_selector_term(pref.get("preference"),
                                                      f"{where}[{i}].preference")))
    return required, tuple(preferred)


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _tolerations(spec: dict) -> tuple[tuple[str, str, str, str], ...]:
    out = []
    for i, tol in enumerate(_list(spec.get("tolerations"), "spec.tolerations")):
        tol = _map(tol, f"spec.tolerations[{i}]")
        operator = tol.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise BadObject(f"spec.tolerations[{i}].operator: {brief(operator)} is not Equal "
                            "or Exists")
        where = f"spec.tolerations[{i}]"
        effect = _text(tol.get("effect"), f"{where}.effect", "")
        if effect not in ("", *TAINT_EFFECTS):  # (empty: every effect)
            raise BadObject(f"{where}.effect: {brief(effect)} is not NoSchedule, "
                            "PreferNoSchedule or NoExecute")
        out.append((_text(tol.get("key"), f"{where}.key", ""), operator,
                    _text(tol.get("value"), f"{where}.value", ""), effect))
    return tuple(out)


def _host_ports(spec: dict) -> tuple[tuple[str, str, int], ...]:
    out = []
    for i, container in enumerate(_list(spec.get("containers"), "spec.containers")):
        for j, port in enumerate(_list(_map(container, "c").get("ports"),
                                       f"spec.containers[{i}].ports")):
            port = _map(port, f"spec.containers[{i}].ports[{j}]")
            host_port = _int(port.get("hostPort"), f"spec.containers[{i}].ports[{j}].hostPort",
                             0)
            if host_port:
                where = f"spec.containers[{i}].ports[{j}]"
                out.append((_text(port.get("protocol"), f"{where}.protocol", "TCP"),
                            _text(port.get("hostIP"), f"{where}.hostIP", "0.0.0.0"), host_port))
    return tuple(out)


def task_status(phase: str, node_name: str, deleting: bool) -> Status:
    """A pod's status as Volcano derives it."""
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if node_name else TaskStatus.PENDING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


@dataclass(frozen=True, slots=True, eq=False)
class ParsedPod:
    """A pod read from its dict: the shared `Pod`, plus what a task needs."""

    pod: Pod
    resreq: Resource
    node_name: str
    deleting: bool
    group: str  # its PodGroup's name, "" for none
    role: str  # volcano.sh/task-spec
    preemptable: bool
    task_priority: int | None  # volcano.sh/task-priority, None for none

    @property
    def status(self) -> Status:
        return task_status(self.pod.phase, self.node_name, self.deleting)


# strconv.ParseBool's spellings: Volcano reads `volcano.sh/preemptable` with it.
_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_FALSE = frozenset(("0", "f", "F", "FALSE", "false", "False"))


def parse_bool(text: str) -> bool | None:
    """A boolean as Go's strconv.ParseBool reads it (`1`, `t`, `True`, ...), None for
    text it refuses (`yes`, ` true`, `tRuE`)."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def read_preemptable(annotations: dict[str, str], labels: dict[str, str], default: bool) -> bool:
    """`volcano.sh/preemptable` of a pod or a PodGroup, one rule for both as in Volcano:
    the annotation, else the label; absent, `default` (a pod may be evicted, a PodGroup is
    not preemptable); unreadable, not preemptable (protected). Seed 000's
    `elastic.gpu/preemptible` is read the same way, and either one saying false (or
    unreadable) protects: a pod is preemptable only if neither keeps it."""
    said = None
    for key in (PREEMPTABLE_ANNOTATION, PROTECTION_ANNOTATION):
        raw = annotations.get(key, labels.get(key))
        if raw is None:
            continue
        if not parse_bool(raw):
            return False
        said = True
    return default if said is None else said


# The phases Volcano gives a PodGroup (its status is the scheduler's to write).
PODGROUP_PHASES = frozenset({"Pending", "Inqueue", "Running", "Unknown", "Completed"})


def _podgroup_phase(phase: str) -> tuple[str, str | None]:
    """A PodGroup's phase, and what is wrong with it if it is none of Volcano's: then it
    is read as Pending (its admission is checked again, and the phase the session
    writes mends it), not as admitted, which would let it skip its queue's checks."""
    if phase in PODGROUP_PHASES or phase == "":
        return phase, None
    return "Pending", (f"status.phase: {brief(phase)} is not a PodGroup phase (one of "
                       f"{', '.join(sorted(PODGROUP_PHASES))}): read as Pending")


def read_min_runtime(annotations: dict[str, str]) -> tuple[float | None, str | None]:
    """`volcano.sh/min-runtime` of a Queue or a PodGroup in seconds (a Go duration:
    `90s`, `10m`, `1h30m`), None when absent; with what is wrong with it, if anything.
    A malformed one guards for ever (infinity): it was written to protect pods for some
    time, and which is not known. The object is kept, so that one typo does not leave a
    whole queue unscheduled; the eviction that meets it warns (`eviction._victim_rule`)."""
    raw = annotations.get(MIN_RUNTIME_ANNOTATION)
    if raw is None:
        return None, None
    try:
        return parse_duration(raw), None
    except ValueError as err:
        return math.inf, (f"metadata.annotations.{MIN_RUNTIME_ANNOTATION}: {err}; its pods "
                          f"are not evicted until it is fixed")


NETWORK_TOPOLOGY_MODE_ANNOTATION = "volcano.sh/network-topology-mode"
NETWORK_TOPOLOGY_TIER_ANNOTATION = "volcano.sh/network-topology-highest-tier"


def read_pod_network_topology(annotations: dict[str, str]) -> NetworkTopology | None:
    """The network topology a pod without a PodGroup asks for by annotations (what
    Volcano's PodGroup controller copies into the PodGroup it makes for such a pod):
    `volcano.sh/network-topology-mode` hard (the default) or soft, and
    `volcano.sh/network-topology-highest-tier` a tier. As there, a mode it cannot read
    is hard and a tier it cannot read is none: the pod is scheduled all the same."""
    mode = annotations.get(NETWORK_TOPOLOGY_MODE_ANNOTATION)
    tier = annotations.get(NETWORK_TOPOLOGY_TIER_ANNOTATION)
    if mode is None and tier is None:
        return None
    mode = (mode or "").lower()
    highest = int(tier) if tier is not None and _INTEGER.match(tier) else None
    return NetworkTopology(mode if mode in ("hard", "soft") else "hard",
                           highest if highest is not None and highest >= 0 else None)


# The phases the API server lets a pod have.
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def parse_pod(obj: dict, creation_fallback: float = 0.0) -> ParsedPod:
    namespace, name, meta = metadata(obj)
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")
    phase = _text(status.get("phase"), "status.phase", "Pending")
    node_name = _text(spec.get("nodeName"), "spec.nodeName", "")
    if phase not in POD_PHASES and not node_name:
        # (a manifest's typo, `pending` say: it would be neither scheduled nor explained;
        # one on a node holds its room there, Unknown, as in Volcano)
        raise BadObject(f"status.phase: {brief(phase)} is not a pod phase "
                        f"({', '.join(POD_PHASES)})")
    if phase == "Running" and not node_name:
        # (only a kubelet sets Running, on its node: such a pod would count against its
        # queue and hold no node's room)
        raise BadObject("status.phase: Running, with no spec.nodeName")
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    labels = _labels(meta)
    owners = _list(meta.get("ownerReferences"), "metadata.ownerReferences")
    owner_kind = owner_uid = ""
    if owners:
        refs = [_map(ref, "metadata.ownerReferences[]") for ref in owners]
        owner = next((ref for ref in refs if ref.get("controller") is True), refs[0])
        owner_kind = _text(owner.get("kind"), "metadata.ownerReferences[].kind", "")
        owner_uid = _text(owner.get("uid"), "metadata.ownerReferences[].uid", "")
    required, preferred = _affinity(spec)
    gates = tuple(_text(_map(g, "spec.schedulingGates[]").get("name"),
                        "spec.schedulingGates[].name", "")
                  for g in _list(spec.get("schedulingGates"), "spec.schedulingGates"))
    if "" in gates:
        raise BadObject("spec.schedulingGates[].name: missing")
    key = f"{namespace}/{name}"
    pod = Pod(
        uid=_text(meta.get("uid"), "metadata.uid", key),
        resource_version=_text(meta.get("resourceVersion"), "metadata.resourceVersion", ""),
        key=key,
        namespace=sys.intern(namespace),
        name=name,
        scheduler_name=_text(spec.get("schedulerName"), "spec.schedulerName", "default-scheduler"),
        annotations=annotations,
        labels=labels,
        creation=creation_of(obj, creation_fallback),
        phase=phase,
        priority=_int32(_int(spec.get("priority"), "spec.priority"), "spec.priority"),
        priority_class_name=_text(spec.get("priorityClassName"), "spec.priorityClassName", ""),
        preemption_policy=_text(spec.get("preemptionPolicy"), "spec.preemptionPolicy", ""),
        owner_kind=owner_kind,
        owner_uid=owner_uid,
        node_selector=_str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        required_affinity=required,
        preferred_affinity=preferred,
        tolerations=_tolerations(spec),
        host_ports=_host_ports(spec),
        inter_pod=_inter_pod(spec, namespace, labels),
        scheduling_gates=gates,
        nominated_node=_text(status.get("nominatedNodeName"), "status.nominatedNodeName", ""),
        start_time=_time(status.get("startTime"), "status.startTime"),
    )
    group = annotations.get(GROUP_NAME_ANNOTATION, "")
    if not group:
        group = next((labels[k] for k in COSCHEDULING_GROUP_LABELS if labels.get(k)), "")
    role = annotations.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY, "")
    task_priority = None
    raw_priority = annotations.get(TASK_PRIORITY_ANNOTATION)
    if raw_priority is not None and _INTEGER.match(raw_priority):
        task_priority = int(raw_priority)
    return ParsedPod(
        pod=pod,
        resreq=pod_request(spec),
        node_name=node_name,
        deleting=bool(meta.get("deletionTimestamp")),
        group=group,
        role=role,
        preemptable=read_preemptable(annotations, labels, default=True),
        task_priority=task_priority,
    )


# --------------------------------------------------------------------------- nodes


def parse_node(obj: dict) -> NodeSpec:
    _, name, meta = metadata(obj)
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")
    raw = status.get("allocatable")
    if raw is None:
        raw = status.get("capacity")
    allocatable = _resources(raw, "status.allocatable")
    allocatable.scalars.setdefault(PODS, 110)
    taints = []
    for i, taint in enumerate(_list(spec.get("taints"), "spec.taints")):
        taint = _map(taint, f"spec.taints[{i}]")
        effect = taint.get("effect")
        if effect not in TAINT_EFFECTS:
            raise BadObject(f"spec.taints[{i}].effect: {brief(effect)} is not NoSchedule, "
                            "PreferNoSchedule or NoExecute")
        taints.append((_text(taint.get("key"), f"spec.taints[{i}].key", ""),
                       _text(taint.get("value"), f"spec.taints[{i}].value", ""), effect))
    return NodeSpec(name, allocatable, _labels(meta),
                    taints, _flag(spec.get("unschedulable"), "spec.unschedulable"))


# --------------------------------------------------------------------------- namespaces


def parse_namespace(obj: dict) -> tuple[str, dict[str, str]]:
    """A core v1 Namespace: its name and labels (what a pod affinity term's
    `namespaceSelector` matches). The API server gives every namespace the label
    `kubernetes.io/metadata.name` with its name, whatever the manifest says; a manifest
    read by simulate is given it here, so selectors on it match as in a cluster."""
    _, name, meta = metadata(obj)
    labels = dict(_labels(meta))
    labels[NAMESPACE_NAME_LABEL] = name
    return name, labels


# --------------------------------------------------------------------------- volcano


def parse_podgroup(obj: dict, creation_fallback: float = 0.0) -> PodGroupSpec:
    namespace, name, meta = metadata(obj)
    if "#" in name:  # (a manifest's: see Cache.add_pod)
        raise BadObject(f"metadata.name: {brief(name)}: '#' is in no Kubernetes name")
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")
    min_member = _int(spec.get("minMember"), "spec.minMember", 1)
    if min_member is None or min_member < 0:
        raise BadObject(f"spec.minMember: must be 0 or more, got {min_member}")
    min_task_member = {}
    for role, count in _map(spec.get("minTaskMember"), "spec.minTaskMember").items():
        value = _int(count, f"spec.minTaskMember.{role}")
        if value is None or value < 0:
            raise BadObject(f"spec.minTaskMember.{role}: must be 0 or more")
        min_task_member[str(role)] = value
    min_resources = None
    if spec.get("minResources") is not None:
        min_resources = _resources(spec.get("minResources"), "spec.minResources")
    timeout = _int(spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds")
    if timeout is not None and (timeout <= 0 or _timestamp(meta) is None):
        # Counted from creationTimestamp: without one (simulate's files may have none)
        # there is nothing to count from.
        timeout = None
    conditions = []
    for cond in _list(status.get("conditions"), "status.conditions"):
        cond = _map(cond, "status.conditions[]")
        type_, state, reason, message = (_text(cond.get(k), f"status.conditions[].{k}", "")
                                         for k in ("type", "status", "reason", "message"))
        conditions.append((type_, state, reason, message))
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    labels = _str_map(meta.get("labels"), "metadata.labels")
    min_runtime, min_runtime_problem = read_min_runtime(annotations)
    phase, phase_problem = _podgroup_phase(_text(status.get("phase"), "status.phase", "Pending"))
    return PodGroupSpec(
        namespace=namespace,
        name=name,
        api_version=_text(obj.get("apiVersion"), "apiVersion", "scheduling.volcano.sh/v1beta1"),
        uid=_text(meta.get("uid"), "metadata.uid", ""),
        resource_version=_text(meta.get("resourceVersion"), "metadata.resourceVersion", ""),
        annotations=annotations,
        preemptable=read_preemptable(annotations, labels, default=False),
        protected=not read_preemptable(annotations, labels, default=True),
        min_runtime=min_runtime,
        min_runtime_problem=min_runtime_problem,
        creation=creation_of(obj, creation_fallback),
        min_member=min_member,
        min_task_member=min_task_member,
        min_resources=min_resources,
        priority_class_name=_text(spec.get("priorityClassName"), "spec.priorityClassName", ""),
        queue=_text(spec.get("queue"), "spec.queue", ""),
        phase=phase,
        phase_problem=phase_problem,
        conditions=tuple(conditions),
        counts=(_count(status, "running"), _count(status, "succeeded"),
                _count(status, "failed")),
        schedule_timeout=timeout,
        network_topology=_network_topology(spec.get("networkTopology"),
                                           "spec.networkTopology"),
        sub_groups=_sub_group_policies(spec.get("subGroupPolicy"), "spec.subGroupPolicy"),
    )


def _sub_group_policies(raw: Any, where: str) -> tuple[SubGroupPolicy, ...]:
    """`spec.subGroupPolicy`: named entries (a name used twice would make two policies
    count as one), each a selector, the label keys that split what it selects into
    groups, a group size of 1 or more and a minimum number of groups of 0 or more."""
    policies = []
    names: set[str] = set()
    for i, entry in enumerate(_list(raw, where)):
        at = f"{where}[{i}]"
        entry = _map(entry, at)
        name = _text(entry.get("name"), f"{at}.name", "")
        if not name:
            raise BadObject(f"{at}.name: a sub-group policy needs a name")
        if name in names:
            raise BadObject(f"{at}.name: {brief(name)} is used by two sub-group policies")
        names.add(name)
        keys = tuple(_text(key, f"{at}.matchLabelKeys[]", "")
                     for key in _list(entry.get("matchLabelKeys"), f"{at}.matchLabelKeys"))
        if any(not key for key in keys):
            raise BadObject(f"{at}.matchLabelKeys: a key cannot be empty")
        size = _int(entry.get("subGroupSize"), f"{at}.subGroupSize", 1)
        if size is None or size < 1:
            raise BadObject(f"{at}.subGroupSize: must be 1 or more, got {size}")
        least = _int(entry.get("minSubGroups"), f"{at}.minSubGroups", 0)
        if least is None or least < 0:
            raise BadObject(f"{at}.minSubGroups: must be 0 or more, got {least}")
        policies.append(SubGroupPolicy(
            name=name,
            selector=_label_selector(entry.get("labelSelector"), f"{at}.labelSelector"),
            match_label_keys=keys,
            size=size,
            min_sub_groups=least,
            network_topology=_network_topology(entry.get("networkTopology"),
                                               f"{at}.networkTopology"),
        ))
    return tuple(policies)


def _network_topology(raw: Any, where: str) -> NetworkTopology | None:
    """A `networkTopology` block: mode hard (the default) or soft, and at most one of
    highestTierAllowed and highestTierName (Volcano's admission refuses both)."""
    if raw is None:
        return None
    block = _map(raw, where)
    mode = _text(block.get("mode"), f"{where}.mode", "hard")
    if mode not in ("hard", "soft"):
        raise BadObject(f"{where}.mode: must be hard or soft, got {brief(mode)}")
    tier = _int(block.get("highestTierAllowed"), f"{where}.highestTierAllowed")
    if tier is not None and tier < 0:
        raise BadObject(f"{where}.highestTierAllowed: must be 0 or more, got {tier}")
    name = block.get("highestTierName")
    if name is not None:
        name = _text(name, f"{where}.highestTierName", "") or None
    if tier is not None and name is not None:
        raise BadObject(f"{where}: highestTierAllowed and highestTierName cannot both be set")
    return NetworkTopology(mode, tier, name)


def parse_hypernode(obj: dict) -> HyperNodeSpec:
    """A `topology.volcano.sh/v1alpha1` HyperNode: its tier (0 or more), tier name and
    members, each a Node or a HyperNode chosen by exactly one of exactMatch, regexMatch
    (a pattern that must compile) and labelMatch (nodes only, as Volcano reads it)."""
    _, name, meta = metadata(obj)
    spec = _map(obj.get("spec"), "spec")
    tier = _int(spec.get("tier"), "spec.tier")
    if tier is None or tier < 0:
        raise BadObject(f"spec.tier: must be 0 or more, got {brief(spec.get('tier'))}")
    members = []
    for i, raw in enumerate(_list(spec.get("members"), "spec.members")):
        members.append(_hypernode_member(raw, f"spec.members[{i}]"))
    return HyperNodeSpec(name=name, tier=tier,
                         tier_name=_text(spec.get("tierName"), "spec.tierName", ""),
                         members=tuple(members),
                         uid=_text(meta.get("uid"), "metadata.uid", ""))


def _hypernode_member(raw: Any, where: str) -> HyperNodeMember:
    member = _map(raw, where)
    kind = member.get("type")
    if kind not in ("Node", "HyperNode"):
        raise BadObject(f"{where}.type: must be Node or HyperNode, got {brief(kind)}")
    selector = _map(member.get("selector"), f"{where}.selector")
    given = [key for key in ("exactMatch", "regexMatch", "labelMatch") if key in selector]
    if len(given) != 1:
        raise BadObject(f"{where}.selector: exactly one of exactMatch, regexMatch and "
                        "labelMatch must be set")
    way = _map(selector[given[0]], f"{where}.selector.{given[0]}")
    if given[0] == "exactMatch":
        name = _text(way.get("name"), f"{where}.selector.exactMatch.name", "")
        if not name:
            raise BadObject(f"{where}.selector.exactMatch.name: missing")
        return HyperNodeMember(kind, name=name)
    if given[0] == "regexMatch":
        pattern = _text(way.get("pattern"), f"{where}.selector.regexMatch.pattern", "")
        if not pattern:
            raise BadObject(f"{where}.selector.regexMatch.pattern: missing")
        try:
            compile_name_pattern(pattern)
        except ValueError as err:
            raise BadObject(f"{where}.selector.regexMatch.pattern: {err}") from None
        return HyperNodeMember(kind, pattern=pattern)
    expressions = _label_expressions(way.get("matchExpressions"),
                                     f"{where}.selector.labelMatch.matchExpressions")
    return HyperNodeMember(kind, match_labels=_str_map(way.get("matchLabels"),
                                                       f"{where}.selector.labelMatch.matchLabels"),
                           match_expressions=tuple(expressions))


def _count(status: dict, key: str) -> int:
    return _int(status.get(key), f"status.{key}", 0) or 0


def parse_queue(obj: dict, creation_fallback: float = 0.0) -> Queue:
    _, name, meta = metadata(obj)
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")
    weight = _int(spec.get("weight"), "spec.weight", 1)
    if weight is None or weight < 0:
        raise BadObject("spec.weight: must be 0 or more")
    guarantee = _map(spec.get("guarantee"), "spec.guarantee").get("resource")
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    reclaimable = _flag(spec.get("reclaimable"), "spec.reclaimable", default=True)
    min_runtime, min_runtime_problem = read_min_runtime(annotations)
    return Queue(
        name,
        weight,
        capability=(_resources(spec["capability"], "spec.capability")
                    if spec.get("capability") is not None else None),
        deserved=(_resources(spec["deserved"], "spec.deserved")
                  if spec.get("deserved") is not None else None),
        guarantee=(_resources(guarantee, "spec.guarantee.resource")
                   if guarantee is not None else None),
        reclaimable=reclaimable,
        priority=_int(spec.get("priority"), "spec.priority", 0) or 0,
        state=_text(status.get("state"), "status.state", ""),
        parent=_text(spec.get("parent"), "spec.parent", ""),
        annotations=annotations,
        min_runtime=min_runtime,
        min_runtime_problem=min_runtime_problem,
        creation=creation_of(obj, creation_fallback),
        status_allocated=_quantity_texts(status.get("allocated"), "status.allocated"),
        meta_uid=_text(meta.get("uid"), "metadata.uid", ""),
    )


# --------------------------------------------------------------------------- policy

_PERCENT = re.compile(r"^[0-9]{1,9}%$")


def _int_or_percent(raw: Any, where: str) -> int | str | None:
    """An IntOrString as a budget uses it: a count of 0 or more, or a percent `50%`."""
    if raw is None:
        return None
    if isinstance(raw, str) and _PERCENT.match(raw):
        if int(raw[:-1]) > 100:
            raise BadObject(f"{where}: a percent is at most 100%, got {brief(raw)}")
        return raw
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise BadObject(f"{where}: expected an integer or a percent, got {brief(raw)}")
    value = _int(raw, where)
    if value is None or value < 0:
        raise BadObject(f"{where}: must be 0 or more, got {brief(raw)}")
    return value


def parse_disruption_budget(obj: dict) -> DisruptionBudget:
    """A `policy/v1` PodDisruptionBudget: its selector (matchLabels and matchExpressions),
    minAvailable or maxUnavailable (an integer or a percent), and from its status
    disruptionsAllowed and disruptedPods where the disruption controller wrote them."""
    namespace, name, _ = metadata(obj)
    spec = _map(obj.get("spec"), "spec")
    status = _map(obj.get("status"), "status")
    selector = _map(spec.get("selector"), "spec.selector")
    expressions = _label_expressions(selector.get("matchExpressions"),
                                     "spec.selector.matchExpressions")
    min_available = _int_or_percent(spec.get("minAvailable"), "spec.minAvailable")
    max_unavailable = _int_or_percent(spec.get("maxUnavailable"), "spec.maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        raise BadObject("spec: minAvailable and maxUnavailable cannot both be set")
    allowed = _int(status.get("disruptionsAllowed"), "status.disruptionsAllowed")
    if allowed is not None and allowed < 0:
        raise BadObject(f"status.disruptionsAllowed: must be 0 or more, got {allowed}")
    disrupted = _map(status.get("disruptedPods"), "status.disruptedPods")
    return DisruptionBudget(
        namespace=namespace,
        name=name,
        match_labels=_str_map(selector.get("matchLabels"), "spec.selector.matchLabels"),
        match_expressions=tuple(expressions),
        min_available=min_available,
        max_unavailable=max_unavailable,
        disruptions_allowed=allowed,
        disrupted_pods=frozenset(str(pod) for pod in disrupted),
    )


def parse_priority_class(obj: dict) -> PriorityClass:
    _, name, _ = metadata(obj)
    value = _int(obj.get("value"), "value")
    if value is None:
        raise BadObject("value: missing")
    _int32(value, "value")
    return PriorityClass(name, value, _flag(obj.get("globalDefault"), "globalDefault"))


def parse_json_annotation(text: str, where: str) -> dict[str, Any]:
    """A JSON object held in an annotation (card quotas, card requests), read by
    `textinput.load_json`: too long or too deeply nested is a BadObject too."""
    try:
        data = load_json(text)
    except TextError as err:
        raise BadObject(f"{where}: {err}") from None
    if not isinstance(data, dict):
        raise BadObject(f"{where}: expected a JSON object")
    return data
