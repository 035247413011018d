"""Finding nodes for a task: the steps allocate, backfill, reclaim and preempt share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from vscheduler.fit import NodeFitErrors, Unfit
from vscheduler.model import Node, Task
from vscheduler.resources import PODS

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["insufficient_reason", "predicate_nodes", "select_best_node"]


def insufficient_reason(name: str) -> str:
    """The words kube-scheduler uses for a resource a node lacks."""
    return "Too many pods" if name == PODS else f"Insufficient {name}"


def predicate_nodes(
    session: Session,
    task: Task,
    nodes: Iterable[Node],
    resource_check: Callable[[Node, Task], str | None] | None,
    known_failures: dict[str, Unfit] | None = None,
) -> tuple[list[Node], NodeFitErrors]:
    """Nodes that pass `resource_check` (a node method returning the first lacking
    resource) and every plugin predicate, in the order given; and why the others fail.
    `known_failures` (node -> Unfit) are refused again without asking the plugins; new
    refusals are added to it."""
    feasible: list[Node] = []
    errors = NodeFitErrors()
    predicate = session.predicate
    req = task.resreq
    for node in nodes:
        if known_failures is not None:
            known = known_failures.get(node.name)
            if known is not None:
                errors.set(node.name, known)
                continue
        if resource_check is not None:
            lacking = resource_check(node, req)
            if lacking is not None:
                unfit = Unfit(insufficient_reason(lacking), resolvable=True)
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
        if score > best_score:
            best, best_score = node, score
    return best
