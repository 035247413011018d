"""Node labels, taints and ports against what a pod asks: Kubernetes' matching rules.

Shared by the plugins that filter nodes (predicates) and that score them (nodeorder),
and open to third-party plugins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import re2

if TYPE_CHECKING:
    from vscheduler.specs import Pod, PodAffinityTerm

__all__ = [
    "NAMESPACE_NAME_LABEL",
    "NODE_NAME_FIELD",
    "Expression",
    "HostPort",
    "Taint",
    "Toleration",
    "compile_name_pattern",
    "expression_matches",
    "first_untolerated_taint",
    "label_selector_matches",
    "namespace_labels",
    "parse_label_int",
    "pod_term_selects",
    "ports_conflict",
    "required_affinity_matches",
    "selector_matches",
    "term_matches",
    "tolerated",
    "tolerates",
]

# (key, operator, values); the key `NODE_NAME_FIELD` stands for `matchFields`
# `metadata.name` (see `vscheduler.objects`).
Expression = tuple[str, str, tuple[str, ...]]
Toleration = tuple[str, str, str, str]  # (key, operator, value, effect)
Taint = tuple[str, str, str]  # (key, value, effect)
HostPort = tuple[str, str, int]  # (protocol, host IP, port)

NODE_NAME_FIELD = "\0metadata.name"
# The label the API server sets on every Namespace, its value the namespace's name: a
# `namespaceSelector` can always pick a namespace by it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
UNSCHEDULABLE_TAINT: Taint = ("node.kubernetes.io/unschedulable", "", "NoSchedule")
# Taint effects that keep a pod off a node (PreferNoSchedule only scores lower).
HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
ANY_IP = "0.0.0.0"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_GO_INT = re.compile(r"[+-]?[0-9]+")


def parse_label_int(text: str) -> int | None:
    """`text` as Go's `strconv.ParseInt(text, 10, 64)` reads it, or None. Stricter than
    `int()`, which would also take spaces, underscores and non-ASCII digits: a label value
    kube-scheduler cannot compare must not match here either."""
    if not _GO_INT.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def expression_matches(expression: Expression, labels: Mapping[str, str],
                       node_name: str) -> bool:
    """One node selector requirement against a node's labels (or, for `matchFields`,
    its name). NotIn and DoesNotExist match a node without the label; Gt and Lt need
    the label and both sides to be integers, and otherwise do not match."""
    key, operator, values = expression
    value = node_name if key == NODE_NAME_FIELD else labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        have, bound = parse_label_int(value), parse_label_int(values[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def term_matches(term: Sequence[Expression], labels: Mapping[str, str],
                 node_name: str) -> bool:
    """A node selector term: all its expressions hold. An empty term selects no node,
    as in Kubernetes."""
    if not term:
        return False
    return all(expression_matches(expression, labels, node_name) for expression in term)


def required_affinity_matches(terms: Sequence[Sequence[Expression]],
                              labels: Mapping[str, str], node_name: str) -> bool:
    """Required node affinity: any one of its terms holds (none given: no node)."""
    return any(term_matches(term, labels, node_name) for term in terms)


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # (a bad pattern is the caller's error, not a log line)


def compile_name_pattern(pattern: str) -> Any:
    """A HyperNode's `regexMatch` pattern, compiled as Volcano reads it: RE2 syntax (Go's
    regexp), searched anywhere in a name (`.search`), in time linear in the name, so no
    pattern can stall a session. Raises ValueError saying what is wrong."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as err:
        detail = err.args[0] if err.args else ""
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ValueError(f"not a regular expression: {detail}") from None


def namespace_labels(namespaces: Mapping[str, Mapping[str, str]],
                     name: str) -> Mapping[str, str]:
    """The labels a `namespaceSelector` sees on namespace `name`: its Namespace object's
    (`namespaces`, name -> labels, as `Session.namespaces` holds them), else only the
    label the API server puts on every namespace. A pod's namespace may have no Namespace
    object known: a simulate file that lists none, or one not listed yet."""
    labels = namespaces.get(name)
    return labels if labels is not None else {NAMESPACE_NAME_LABEL: name}


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """`nodeSelector`: every label present with that value."""
    return selector.items() <= labels.items()


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' rule: an empty effect matches every effect, an empty key every key
    (Exists with neither tolerates everything); Equal compares the values."""
    key, operator, value, effect = toleration
    taint_key, taint_value, taint_effect = taint
    if effect and effect != taint_effect:
        return False
    if key and key != taint_key:
        return False
    if operator == "Exists":
        return True
    return operator in ("", "Equal") and value == taint_value


def tolerated(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    return any(tolerates(toleration, taint) for toleration in tolerations)


def first_untolerated_taint(taints: Iterable[Taint],
                            tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule or NoExecute taint none of `tolerations` tolerates: the one
    kube-scheduler names in its refusal."""
    for taint in taints:
        if taint[2] in HARD_EFFECTS and not (tolerations and tolerated(taint, tolerations)):
            return taint
    return None


def ports_conflict(wanted: HostPort, used: HostPort) -> bool:
    """Same protocol and port, on the same host IP or on all of them (0.0.0.0)."""
    protocol, ip, port = wanted
    used_protocol, used_ip, used_port = used
    if port != used_port or (protocol or "TCP") != (used_protocol or "TCP"):
        return False
    return ip == used_ip or ip in ("", ANY_IP) or used_ip in ("", ANY_IP)


def label_selector_matches(selector: Sequence[Expression] | None,
                           labels: Mapping[str, str]) -> bool:
    """A label selector (`specs.LabelSelector`): every requirement holds. An empty one
    selects everything, None nothing, as Kubernetes reads a pod affinity term's."""
    if selector is None:
        return False
    for key, operator, values in selector:
        value = labels.get(key)
        if operator == "In":
            if value is None or value not in values:
                return False
        elif operator == "NotIn":
            if value is not None and value in values:
                return False
        elif operator == "Exists":
            if value is None:
                return False
        elif value is not None:  # DoesNotExist
            return False
    return True


def pod_term_selects(term: PodAffinityTerm, pod: Pod,
                     namespaces: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether a pod affinity term picks `pod`: its namespace is among the term's (or its
    labels, `namespace_labels`, match the term's namespace selector) and its labels
    match the term's selector."""
    namespace = pod.namespace
    if namespace not in term.namespaces:
        chooser = term.namespace_selector
        if chooser is None or (chooser and not label_selector_matches(
                chooser, namespace_labels(namespaces, namespace))):
            return False
    return label_selector_matches(term.selector, pod.labels)
