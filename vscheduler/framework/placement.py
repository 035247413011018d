"""Finding nodes for a task: the steps allocate, backfill, reclaim and preempt share."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vscheduler.fit import NodeFitErrors, Unfit
from vscheduler.model import Node, Task
from vscheduler.resources import PODS, Resource

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["OFF", "NodeSampling", "insufficient", "insufficient_reason", "predicate_nodes",
           "select_best_node"]


def insufficient_reason(name: str) -> str:
    """The words kube-scheduler uses for a resource a node lacks."""
    return "Too many pods" if name == PODS else f"Insufficient {name}"


class NodeSampling:
    """How many feasible nodes are enough (kube-scheduler's and Volcano's rule): on a
    large cluster a task is not tried on every node; the search stops once this many
    nodes passed, and the next search starts where the last one stopped, so every node
    gets its turn. `percentage` 0 is adaptive: 50% minus 1% per 125 nodes, at least
    `minimum_percentage`; 100 turns sampling off."""

    __slots__ = ("minimum_feasible", "minimum_percentage", "percentage")

    def __init__(self, minimum_feasible: int = 100, minimum_percentage: int = 5,
                 percentage: int = 0) -> None:
        self.minimum_feasible = minimum_feasible
        self.minimum_percentage = minimum_percentage
        self.percentage = percentage

    def nodes_to_find(self, nodes: int) -> int:
        if nodes <= self.minimum_feasible or self.percentage >= 100:
            return nodes
        percentage = self.percentage or max(50 - nodes // 125, self.minimum_percentage)
        return max(nodes * percentage // 100, self.minimum_feasible)


OFF = NodeSampling(percentage=100)
_INSUFFICIENT: dict[str, Unfit] = {}


def insufficient(name: str) -> Unfit:
    """The refusal of a node that lacks resource `name` (one object per resource)."""
    unfit = _INSUFFICIENT.get(name)
    if unfit is None:
        unfit = _INSUFFICIENT[name] = Unfit(insufficient_reason(name), resolvable=True)
    return unfit


def predicate_nodes(
    session: Session,
    task: Task,
    nodes: Sequence[Node],
    resource_check: Callable[[Node, Resource], str | None] | None,
    known_failures: dict[str, Unfit] | None = None,
    sample: bool = False,
) -> tuple[list[Node], NodeFitErrors]:
    """Nodes that pass `resource_check` (a node method returning the first lacking
    resource) and every plugin predicate, in the order tried; and why the others fail.
    `known_failures` (node -> Unfit) are refused again without asking the plugins; new
    refusals are added to it. With `sample`, the session's node sampling applies: the
    search starts at the session's rotating offset and stops at enough feasible nodes."""
    feasible: list[Node] = []
    errors = NodeFitErrors()
    predicate = session.predicate
    req = task.resreq
    count = len(nodes)
    wanted = session.node_sampling.nodes_to_find(count) if sample else count
    start = session.node_offset % count if sample and wanted < count else 0
    tried = 0
    for tried in range(1, count + 1):
        node = nodes[(start + tried - 1) % count] if start else nodes[tried - 1]
        if known_failures is not None:
            known = known_failures.get(node.name)
            if known is not None:
                errors.set(node.name, known)
                continue
        if resource_check is not None:
            lacking = resource_check(node, req)
            if lacking is not None:
                unfit = insufficient(lacking)
                errors.set(node.name, unfit)
                if known_failures is not None:
                    known_failures[node.name] = unfit
                continue
        unfit = predicate(task, node)
        if unfit is not None:
            errors.set(node.name, unfit)
            if known_failures is not None:
                known_failures[node.name] = unfit
            continue
        feasible.append(node)
        if len(feasible) >= wanted:
            break
    if sample and wanted < count:
        session.node_offset = (start + tried) % count
    return feasible, errors


def select_best_node(session: Session, task: Task, nodes: list[Node]) -> Node:
    """The highest-scoring node; ties go to the node listed first (deterministic, where
    Volcano picks at random)."""
    if len(nodes) == 1 or not session.has_node_order:
        return nodes[0]
    node_order = session.node_order
    batch = session.batch_node_order(task, nodes) if session.has_batch_node_order else {}
    best = nodes[0]
    best_score = float("-inf")
    for node in nodes:
        score = node_order(task, node) + batch.get(node.name, 0.0)
        if not math.isfinite(score):
            score = 0.0  # a plugin's NaN or infinity would break the order
        if score > best_score:
            best, best_score = node, score
    return best
