"""predicates: may this pod run on this node at all, as kube-scheduler's filters decide.

Resources are not checked here: the actions do that before asking plugins. What is
checked, in Volcano's order, each refusal worded as kube-scheduler words it so that the
pending reason reads like `kubectl describe`:

1. pod count: the node already holds `max_pods` pods -> "node(s) pod number exceeded"
   (resolvable: evicting a pod frees a slot);
2. NodeUnschedulable: `spec.unschedulable` unless the pod tolerates the
   `node.kubernetes.io/unschedulable:NoSchedule` taint;
3. NodeAffinity: `nodeSelector` and required node affinity
   (`predicate.NodeAffinityEnable`);
4. TaintToleration: every NoSchedule / NoExecute taint tolerated
   (`predicate.TaintTolerationEnable`);
5. NodePorts: no host port already taken on the node (`predicate.NodePortsEnable`;
   resolvable).

As in Volcano, a pod-count refusal is reported together with the first of 2-4 that
fails, and 2-4 stop the evaluation (they cannot be resolved by evicting anything).

Pods count on a node whatever their state there (running, placed or pipelined in this
session, terminating), except pods this session evicted: Volcano removes those from its
node view at once, which is what lets preempt free a pod slot or a host port. That is
the only per-node state kept, through the event hooks.

Not implemented (their arguments are accepted so that Volcano confs load, and have no
effect): inter-pod affinity and anti-affinity (`predicate.PodAffinityEnable`), volume
limits, volume zones and volume binding (`predicate.NodeVolumeLimitsEnable`,
`predicate.VolumeZoneEnable`, `predicate.VolumeBindingEnable`), pod topology spread
(`predicate.PodTopologySpreadEnable`), dynamic resource allocation, shared devices, and
the equivalence cache (`predicate.CacheEnable`: the per-task preparation below makes
it unnecessary). Scheduling gates are the actions' business: a gated pod is never tried.

The helpers that match labels and tolerations are plain functions, also used by the
nodeorder plugin's scorers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from vscheduler.fit import Unfit
from vscheduler.framework.session import Session
from vscheduler.hookspecs import hookimpl
from vscheduler.model import Node, Task, TaskStatus
from vscheduler.plugin import Argument, Plugin

__all__ = [
    "NODE_NAME_FIELD",
    "Expression",
    "HostPort",
    "PredicatesPlugin",
    "Taint",
    "Toleration",
    "expression_matches",
    "first_untolerated_taint",
    "parse_label_int",
    "ports_conflict",
    "required_affinity_matches",
    "selector_matches",
    "taint_reason",
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
UNSCHEDULABLE_TAINT: Taint = ("node.kubernetes.io/unschedulable", "", "NoSchedule")
# Taint effects that keep a pod off a node (PreferNoSchedule only scores lower).
HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
ANY_IP = "0.0.0.0"

REASON_POD_NUMBER = "node(s) pod number exceeded"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"

# The refusals that carry no detail are built once: the hot path returns these.
_POD_NUMBER = Unfit(REASON_POD_NUMBER, resolvable=True)
_UNSCHEDULABLE = Unfit(REASON_UNSCHEDULABLE)
_AFFINITY = Unfit(REASON_AFFINITY)
_PORTS = Unfit(REASON_PORTS, resolvable=True)

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_GO_INT = re.compile(r"[+-]?[0-9]+")


# --------------------------------------------------------------------------- matching


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


def taint_reason(taint: Taint) -> str:
    """kube-scheduler's words for an untolerated taint."""
    return f"node(s) had untolerated taint {{{taint[0]}: {taint[1]}}}"


def ports_conflict(wanted: HostPort, used: HostPort) -> bool:
    """Same protocol and port, on the same host IP or on all of them (0.0.0.0)."""
    protocol, ip, port = wanted
    used_protocol, used_ip, used_port = used
    if port != used_port or (protocol or "TCP") != (used_protocol or "TCP"):
        return False
    return ip == used_ip or ip in ("", ANY_IP) or used_ip in ("", ANY_IP)


# --------------------------------------------------------------------------- plugin


class _PodChecks:
    """What one pod asks of every node, worked out once per task so that the
    per-node check reads a few attributes and skips what does not apply."""

    __slots__ = ("affinity", "host_ports", "required", "selector", "taints",
                 "tolerates_unschedulable", "tolerations")

    def __init__(self, task: Task, *, affinity: bool, taints: bool, ports: bool) -> None:
        pod = task.pod
        self.selector = pod.node_selector if affinity else {}
        self.required = pod.required_affinity if affinity else None
        self.affinity = bool(self.selector) or self.required is not None
        self.tolerates_unschedulable = tolerated(UNSCHEDULABLE_TAINT, pod.tolerations)
        # Only tolerations that can match a NoSchedule / NoExecute taint matter here.
        self.tolerations = tuple(t for t in pod.tolerations if t[3] in ("", *HARD_EFFECTS))
        tolerates_all = any(not key and op == "Exists" and not effect
                            for key, op, _, effect in self.tolerations)
        self.taints = taints and not tolerates_all
        self.host_ports = tuple(pod.host_ports) if ports else ()

    def node_matches(self, node: Node) -> bool:
        labels = node.labels
        if self.selector and not selector_matches(self.selector, labels):
            return False
        return self.required is None or required_affinity_matches(
            self.required, labels, node.name)


class PredicatesPlugin(Plugin):
    name = "predicates"
    arguments = (
        Argument("predicate.NodeAffinityEnable", bool, True,
                 "check nodeSelector and required node affinity"),
        Argument("predicate.NodePortsEnable", bool, True, "check host port conflicts"),
        Argument("predicate.TaintTolerationEnable", bool, True,
                 "keep pods off nodes with NoSchedule/NoExecute taints they do not tolerate"),
        Argument("predicate.PodAffinityEnable", bool, True, "accepted; not implemented"),
        Argument("predicate.NodeVolumeLimitsEnable", bool, True, "accepted; not implemented"),
        Argument("predicate.VolumeZoneEnable", bool, True, "accepted; not implemented"),
        Argument("predicate.PodTopologySpreadEnable", bool, True,
                 "accepted; not implemented"),
        Argument("predicate.VolumeBindingEnable", bool, True, "accepted; not implemented"),
        Argument("predicate.CacheEnable", bool, False, "accepted; not needed here"),
    )

    @hookimpl
    def on_session_open(self, session: Session) -> None:
        self.session = session
        self._affinity = bool(self.args["predicate.NodeAffinityEnable"])
        self._taints = bool(self.args["predicate.TaintTolerationEnable"])
        self._ports = bool(self.args["predicate.NodePortsEnable"])
        self._checks: dict[str, _PodChecks] = {}
        self._taint_refusals: dict[Taint, Unfit] = {}
        # node name -> keys of the tasks this session evicted from it: they no longer
        # take a pod slot or a host port there.
        self._evicted: dict[str, set[str]] = {}

    def _prepare(self, task: Task) -> _PodChecks:
        checks = _PodChecks(task, affinity=self._affinity, taints=self._taints,
                            ports=self._ports)
        self._checks[task.uid] = checks
        return checks

    @hookimpl
    def predicate(self, task: Task, node: Node) -> Unfit | None:
        checks = self._checks.get(task.uid) or self._prepare(task)
        crowded = node.pod_count() >= node.max_pods and self._crowded(node)
        refusal = self._unresolvable(checks, node)
        if refusal is not None:
            if crowded:
                return Unfit(REASON_POD_NUMBER, *refusal.reasons)
            return refusal
        if checks.host_ports and self._ports_taken(checks.host_ports, node):
            return Unfit(REASON_POD_NUMBER, REASON_PORTS, resolvable=True) if crowded else _PORTS
        return _POD_NUMBER if crowded else None

    def _crowded(self, node: Node) -> bool:
        """The node's pod slots are all taken, counting out pods evicted this session."""
        evicted = self._evicted.get(node.name)
        return node.pod_count() - (len(evicted) if evicted else 0) >= node.max_pods

    def _unresolvable(self, checks: _PodChecks, node: Node) -> Unfit | None:
        """The first refusal that evicting pods could not resolve, in Volcano's order."""
        if node.unschedulable and not checks.tolerates_unschedulable:
            return _UNSCHEDULABLE
        if checks.affinity and not checks.node_matches(node):
            return _AFFINITY
        if checks.taints and node.taints:
            taint = first_untolerated_taint(node.taints, checks.tolerations)
            if taint is not None:
                return self._taint_refusal(taint)
        return None

    def _taint_refusal(self, taint: Taint) -> Unfit:
        """One refusal per distinct taint, shared by every node that carries it."""
        refusal = self._taint_refusals.get(taint)
        if refusal is None:
            refusal = self._taint_refusals[taint] = Unfit(taint_reason(taint))
        return refusal

    def _ports_taken(self, wanted: tuple[HostPort, ...], node: Node) -> bool:
        evicted = self._evicted.get(node.name, ())
        for key, (other, _) in node.tasks.items():
            used = other.pod.host_ports
            if used and key not in evicted and any(
                    ports_conflict(w, u) for w in wanted for u in used):
                return True
        return False

    @hookimpl
    def allocate_event(self, task: Task) -> str | None:
        # An eviction rolled back: the pod is on its node again.
        if self._evicted:
            evicted = self._evicted.get(task.node_name)
            if evicted:
                evicted.discard(task.key)
        return None

    @hookimpl
    def deallocate_event(self, task: Task) -> None:
        # Evicted tasks are Releasing and stay on their node; rolled-back placements
        # are already off it (and Pending).
        if task.status == TaskStatus.RELEASING and task.node_name:
            self._evicted.setdefault(task.node_name, set()).add(task.key)
