"""nodeorder: which of the feasible nodes suits a pod best, by kube-scheduler's scorers.

Each scorer gives a node 0..100; the plugin's score is each scorer's score times its
weight (an argument), summed. A weight of 0 turns that scorer off.

Per node (`node_order`), from what the node already uses (`node.used`, which includes
the pods this session placed) plus this pod, over cpu and memory:
- least requested: `(allocatable - requested) * 100 / allocatable`, averaged: favours
  the emptier node, spreading pods;
- most requested: `requested * 100 / allocatable`, averaged: favours the fuller node;
- balanced allocation: `(1 - standard deviation of the utilisation fractions) * 100`,
  with `nvidia.com/gpu` as a third resource when the pod asks for it: favours nodes
  whose resources stay evenly used.

Over the candidates (`batch_node_order`), normalised as kube-scheduler does:
- node affinity: the sum of the weights of the pod's preferred node-affinity terms a
  node matches, scaled so the best candidate gets 100;
- taint toleration: the number of PreferNoSchedule taints the pod does not tolerate,
  inverted so the candidates with the fewest get 100;
- inter-pod affinity: the pod's preferred pod affinity and anti-affinity, and the
  terms of pods on the nodes that pick it, per topology domain, scaled to span 0..100;
- topology spread: the pod's `ScheduleAnyway` constraints, fewer matching pods in the
  node's domain scoring higher (`vscheduler.inter_pod` holds both).

Integer arithmetic follows kube-scheduler's (each score truncated), so scores are the
ones kube-scheduler would give and are deterministic.

Differences from Volcano: scorers see this session's placements whether or not the
predicates plugin is enabled (Volcano's only do with it); pods without requests are
counted as requesting nothing (kube-scheduler counts 100m CPU / 200MiB for scoring).
Difference from Volcano: an existing pod's required pod affinity that picks the
incoming pod adds 1 per term to its domain's score (kube-scheduler's default
hardPodAffinityWeight); Volcano builds the scorer without that default, so it adds 0.
Accepted with no effect, as there is no such scorer here: `imagelocality.weight`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from vscheduler.hookspecs import SessionView, hookimpl
from vscheduler.inter_pod import RuleBook, normalize_affinity
from vscheduler.matching import Toleration, term_matches, tolerated
from vscheduler.model import Node, Task
from vscheduler.plugin import Argument, Plugin

__all__ = [
    "GPU",
    "MAX_SCORE",
    "NodeOrderPlugin",
    "balanced_allocation",
    "balanced_score",
    "intolerable_prefer_no_schedule",
    "least_requested",
    "least_requested_score",
    "most_requested",
    "most_requested_score",
    "normalize",
    "preferred_affinity_score",
]

MAX_SCORE = 100
GPU = "nvidia.com/gpu"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


# --------------------------------------------------------------------------- formulas


def least_requested_score(requested: float, capacity: float) -> int:
    """Share of `capacity` left free, 0..100; 0 when nothing is offered or it overflows."""
    if capacity <= 0 or requested > capacity:
        return 0
    return int((capacity - requested) * MAX_SCORE // capacity)


def most_requested_score(requested: float, capacity: float) -> int:
    """Share of `capacity` in use, 0..100 (an overflow counts as full)."""
    if capacity <= 0:
        return 0
    return int(min(requested, capacity) * MAX_SCORE // capacity)


def balanced_score(fractions: Sequence[float]) -> int:
    """`(1 - standard deviation of the fractions) * 100`, each fraction capped at 1."""
    capped = [min(f, 1.0) for f in fractions]
    if len(capped) < 2:
        return MAX_SCORE
    if len(capped) == 2:
        deviation = abs(capped[0] - capped[1]) / 2
    else:
        mean = sum(capped) / len(capped)
        deviation = math.sqrt(sum((f - mean) ** 2 for f in capped) / len(capped))
    return int((1 - deviation) * MAX_SCORE)


def normalize(raw: Sequence[float], reverse: bool = False) -> list[int]:
    """kube-scheduler's default normalisation: scale so the highest is 100 (truncating);
    `reverse` turns it around so the lowest gets 100. All zero: all 0, or all 100
    reversed."""
    highest = max(raw, default=0)
    if highest <= 0:
        return [MAX_SCORE if reverse else 0 for _ in raw]
    scores = [int(MAX_SCORE * value / highest) for value in raw]
    return [MAX_SCORE - s for s in scores] if reverse else scores


# --------------------------------------------------------------------------- scorers


def least_requested(task: Task, node: Node) -> int:
    req, used, alloc = task.resreq, node.used, node.allocatable
    return (least_requested_score(used.cpu + req.cpu, alloc.cpu)
            + least_requested_score(used.memory + req.memory, alloc.memory)) // 2


def most_requested(task: Task, node: Node) -> int:
    req, used, alloc = task.resreq, node.used, node.allocatable
    return (most_requested_score(used.cpu + req.cpu, alloc.cpu)
            + most_requested_score(used.memory + req.memory, alloc.memory)) // 2


def balanced_allocation(task: Task, node: Node) -> int:
    """Resources the node does not offer are left out; GPUs count only for a pod that
    asks for them."""
    req, used, alloc = task.resreq, node.used, node.allocatable
    cpu_capacity, memory_capacity = alloc.cpu, alloc.memory
    gpus = req.scalars.get(GPU, 0)
    if gpus <= 0 and cpu_capacity > 0 and memory_capacity > 0:
        # The common case, without building a list.
        cpu_fraction = min((used.cpu + req.cpu) / cpu_capacity, 1.0)
        memory_fraction = min((used.memory + req.memory) / memory_capacity, 1.0)
        return int((1 - abs(cpu_fraction - memory_fraction) / 2) * MAX_SCORE)
    fractions = []
    if cpu_capacity > 0:
        fractions.append((used.cpu + req.cpu) / cpu_capacity)
    if memory_capacity > 0:
        fractions.append((used.memory + req.memory) / memory_capacity)
    if gpus > 0:
        gpu_capacity = alloc.scalars.get(GPU, 0)
        if gpu_capacity > 0:
            fractions.append((used.scalars.get(GPU, 0) + gpus) / gpu_capacity)
    return balanced_score(fractions)


def preferred_affinity_score(task: Task, node: Node) -> int:
    """Sum of the weights of the preferred terms `node` matches (before normalising)."""
    labels, name = node.labels, node.name
    return sum(weight for weight, term in task.pod.preferred_affinity
               if weight and term_matches(term, labels, name))


def intolerable_prefer_no_schedule(node: Node, tolerations: Sequence[Toleration]) -> int:
    """How many of the node's PreferNoSchedule taints `tolerations` leave untolerated."""
    return sum(1 for taint in node.taints
               if taint[2] == PREFER_NO_SCHEDULE and not tolerated(taint, tolerations))


# --------------------------------------------------------------------------- plugin


class NodeOrderPlugin(Plugin):
    name = "nodeorder"
    arguments = (
        Argument("leastrequested.weight", int, 1, "favour emptier nodes"),
        Argument("mostrequested.weight", int, 0, "favour fuller nodes"),
        Argument("nodeaffinity.weight", int, 2, "favour preferred node affinity"),
        Argument("podaffinity.weight", int, 2, "favour preferred inter-pod affinity"),
        Argument("balancedresource.weight", int, 1, "favour evenly used nodes"),
        Argument("tainttoleration.weight", int, 3,
                 "avoid PreferNoSchedule taints the pod does not tolerate"),
        Argument("imagelocality.weight", int, 1, "accepted; no image locality scorer"),
        Argument("podtopologyspread.weight", int, 2,
                 "favour nodes that spread the pod by its ScheduleAnyway constraints"),
    )

    @hookimpl
    def task_signature(self, task: Task) -> Hashable:
        """Beyond the task's resources and placement constraints and the node: for a pod
        that inter-pod scores concern, those scorers and how far the census has moved
        (their scores change whenever a pod they count does)."""
        book = self._book
        if book is None:
            return None
        affinity, spread = book.affinity(task), book.spread(task)
        if affinity is None and spread is None:
            return None
        return (affinity and affinity.key, spread and spread.key, self.session.census.version)

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        args = self.args
        self._least: int = args["leastrequested.weight"]
        self._most: int = args["mostrequested.weight"]
        self._balanced: int = args["balancedresource.weight"]
        self._affinity_weight: int = args["nodeaffinity.weight"]
        self._taint_weight: int = args["tainttoleration.weight"]
        self._pod_affinity_weight: int = args["podaffinity.weight"]
        self._spread_weight: int = args["podtopologyspread.weight"]
        self._book = RuleBook(session.census, affinity=bool(self._pod_affinity_weight),
                              spread=bool(self._spread_weight)) \
            if self._pod_affinity_weight or self._spread_weight else None

    @hookimpl
    def node_order(self, task: Task, node: Node) -> float:
        # Direct calls, each behind its weight: this runs per task per node.
        score = 0
        if self._least:
            score += self._least * least_requested(task, node)
        if self._most:
            score += self._most * most_requested(task, node)
        if self._balanced:
            score += self._balanced * balanced_allocation(task, node)
        return float(score)

    @hookimpl
    def batch_node_order(self, task: Task, nodes: list[Node]) -> dict[str, float]:
        totals = [0] * len(nodes)
        if self._affinity_weight and task.pod.preferred_affinity:
            raw = [preferred_affinity_score(task, node) for node in nodes]
            self._add(totals, normalize(raw), self._affinity_weight)
        if self._taint_weight:
            tolerations = [t for t in task.pod.tolerations if t[3] in ("", PREFER_NO_SCHEDULE)]
            raw = [intolerable_prefer_no_schedule(node, tolerations) for node in nodes]
            self._add(totals, normalize(raw, reverse=True), self._taint_weight)
        if self._book is not None:
            affinity = self._book.affinity(task)
            if affinity is not None:
                self._add(totals, normalize_affinity([affinity.raw(node) for node in nodes]),
                          self._pod_affinity_weight)
            spread = self._book.spread(task)
            if spread is not None:
                self._add(totals, spread.scores(nodes), self._spread_weight)
        return {node.name: float(total) for node, total in zip(nodes, totals, strict=True)}

    @staticmethod
    def _add(totals: list[int], scores: list[int], weight: int) -> None:
        for i, score in enumerate(scores):
            totals[i] += weight * score
