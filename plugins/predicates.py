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

6. PodTopologySpread: `DoNotSchedule` constraints (`predicate.PodTopologySpreadEnable`);
7. InterPodAffinity: required pod affinity and anti-affinity, the pod's and that of the
   pods already on the nodes (`predicate.PodAffinityEnable`).

6 and 7 follow kube-scheduler (`vscheduler.inter_pod` holds the rules): they read pods
on other nodes of a topology domain, counted by the session's census, which logs the
nodes of a domain as changed when its pods change, so node searches stay shared.

Not implemented (their arguments are accepted so that Volcano confs load, and have no
effect): volume limits, volume zones and volume binding
(`predicate.NodeVolumeLimitsEnable`, `predicate.VolumeZoneEnable`,
`predicate.VolumeBindingEnable`), dynamic resource allocation, shared devices, and
the equivalence cache (`predicate.CacheEnable`: the per-task preparation below makes
it unnecessary). Scheduling gates are the actions' business: a gated pod is never tried.

The matching rules themselves (labels, tolerations, ports) are in `vscheduler.matching`.
"""

from __future__ import annotations

from collections.abc import Hashable

from vscheduler.fit import Unfit
from vscheduler.hookspecs import SessionView, hookimpl
from vscheduler.inter_pod import RuleBook
from vscheduler.matching import (
    HARD_EFFECTS,
    UNSCHEDULABLE_TAINT,
    HostPort,
    Taint,
    first_untolerated_taint,
    ports_conflict,
    required_affinity_matches,
    selector_matches,
    tolerated,
)
from vscheduler.model import Node, Task, TaskStatus
from vscheduler.plugin import Argument, Plugin

__all__ = ["PredicatesPlugin", "taint_reason"]

REASON_POD_NUMBER = "node(s) pod number exceeded"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"

# The refusals that carry no detail are built once: the hot path returns these.
_POD_NUMBER = Unfit(REASON_POD_NUMBER, resolvable=True)
_UNSCHEDULABLE = Unfit(REASON_UNSCHEDULABLE, static=True)
_AFFINITY = Unfit(REASON_AFFINITY, static=True)
_PORTS = Unfit(REASON_PORTS, resolvable=True)


def taint_reason(taint: Taint) -> str:
    """kube-scheduler's words for an untolerated taint."""
    return f"node(s) had untolerated taint {{{taint[0]}: {taint[1]}}}"


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
        Argument("predicate.PodAffinityEnable", bool, True,
                 "check required inter-pod affinity and anti-affinity"),
        Argument("predicate.NodeVolumeLimitsEnable", bool, True, "accepted; not implemented"),
        Argument("predicate.VolumeZoneEnable", bool, True, "accepted; not implemented"),
        Argument("predicate.PodTopologySpreadEnable", bool, True,
                 "check DoNotSchedule topology spread constraints"),
        Argument("predicate.VolumeBindingEnable", bool, True, "accepted; not implemented"),
        Argument("predicate.CacheEnable", bool, False, "accepted; not needed here"),
    )

    @hookimpl
    def task_signature(self, task: Task) -> Hashable:
        """Beyond the task's resources and placement constraints and the node: its
        inter-pod rules, and what they read beyond the node's own domain."""
        if not self._inter_pod:
            return None
        rules = self._book.required(task)
        return None if rules is None else (rules.key, rules.state())

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        self._affinity = bool(self.args["predicate.NodeAffinityEnable"])
        self._taints = bool(self.args["predicate.TaintTolerationEnable"])
        self._ports = bool(self.args["predicate.NodePortsEnable"])
        self._checks: dict[str, _PodChecks] = {}
        self._taint_refusals: dict[Taint, Unfit] = {}
        # node name -> keys of the tasks this session evicted from it: they no longer
        # take a pod slot or a host port there.
        self._evicted: dict[str, set[str]] = {}
        self._inter_pod = bool(self.args["predicate.PodAffinityEnable"]
                               or self.args["predicate.PodTopologySpreadEnable"])
        self._book = RuleBook(session.census, affinity=bool(
            self.args["predicate.PodAffinityEnable"]), spread=bool(
            self.args["predicate.PodTopologySpreadEnable"]))

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
        if refusal is None and checks.host_ports and self._ports_taken(checks.host_ports, node):
            refusal = _PORTS
        if refusal is None and self._inter_pod:
            rules = self._book.required(task)
            if rules is not None:
                refusal = rules.refuse(node)
        if refusal is None:
            return _POD_NUMBER if crowded else None
        if crowded:
            return Unfit(REASON_POD_NUMBER, *refusal.reasons, resolvable=refusal.resolvable)
        return refusal

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
            refusal = self._taint_refusals[taint] = Unfit(taint_reason(taint), static=True)
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
