"""Finding nodes for a task: the steps allocate, backfill, reclaim and preempt share.

One home each for: which pending tasks may be placed (`placeable_tasks`), how many nodes
a search looks at and where it starts (`NodeSampling`, `SamplingWindow`), the nodes
worth evicting on (`eviction_candidates`) and what a node scores for a task
(`node_scores`, with its guard against a plugin's NaN).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from vscheduler.fit import NodeFitErrors, Unfit
from vscheduler.model import Job, Node, Task, TaskStatus
from vscheduler.resources import PODS, Resource

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["OFF", "NodeSampling", "SamplingWindow", "best_first", "eviction_candidates",
           "insufficient", "insufficient_reason", "judged", "node_scores",
           "placeable_tasks", "predicate_nodes", "select_best_node", "unresolvable_nodes"]


def placeable_tasks(job: Job) -> list[Task]:
    """The job's pending tasks that may be placed now: a pod with scheduling gates waits
    until whoever set them removes them (Kubernetes' rule), whatever the action."""
    return [t for t in job.tasks_in(TaskStatus.PENDING) if not t.scheduling_gated]


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


class SamplingWindow:
    """One sampled search over `count` nodes: it starts at the session's rotating offset
    and ends once `wanted` nodes are feasible; `end` moves the offset past the nodes it
    tried, so the next search starts where this one stopped."""

    __slots__ = ("count", "session", "start", "wanted")

    def __init__(self, session: Session, count: int) -> None:
        self.session = session
        self.count = count
        self.wanted = session.node_sampling.nodes_to_find(count)
        self.start = session.node_offset % count if self.wanted < count else 0

    def end(self, tried: int) -> None:
        if self.wanted < self.count:
            self.session.node_offset = (self.start + tried) % self.count


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
    window = SamplingWindow(session, count) if sample else None
    wanted, start = (window.wanted, window.start) if window is not None else (count, 0)
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
    if window is not None:
        window.end(tried)
    return feasible, errors


def node_scores(session: Session, task: Task, nodes: list[Node],
                with_batch: bool = True, batch_over: list[Node] | None = None
                ) -> list[float]:
    """What each of `nodes` scores for `task`: the plugins' `node_order` summed, plus
    their `batch_node_order` unless `with_batch` is off, taken over `batch_over` if
    given (batch scores are normalised over the nodes scored together: a caller that
    leaves out nodes it knows it will not use keeps them in that set, so the others
    score as if it had not). A NaN or infinite score counts as 0: it would leave the
    nodes' order undefined (NaN compares false with every number), and decisions must
    not depend on where it falls."""
    if not session.has_node_order:
        return [0.0] * len(nodes)
    node_order = session.node_order
    batch = session.batch_node_order(task, nodes if batch_over is None else batch_over) \
        if with_batch and session.has_batch_node_order else None
    scores = []
    for node in nodes:
        score = node_order(task, node)
        if batch:
            score += batch.get(node.name, 0.0)
        scores.append(score if math.isfinite(score) else 0.0)
    return scores


def select_best_node(session: Session, task: Task, nodes: list[Node]) -> Node:
    """The highest-scoring node; ties go to the node listed first (deterministic, where
    Volcano picks at random)."""
    if len(nodes) == 1 or not session.has_node_order:
        return nodes[0]
    scores = node_scores(session, task, nodes)
    return nodes[max(range(len(nodes)), key=scores.__getitem__)]  # max keeps the first


def best_first(session: Session, task: Task, nodes: list[Node],
               batch_over: list[Node] | None = None) -> list[Node]:
    """`nodes` best scored first (batch scores taken over `batch_over` if given:
    `node_scores`); ties keep their order."""
    if len(nodes) < 2 or not session.has_node_order:
        return nodes
    scores = node_scores(session, task, nodes, batch_over=batch_over)
    return [nodes[i] for i in sorted(range(len(nodes)), key=lambda i: -scores[i])]


def unresolvable_nodes(session: Session, task: Task) -> Container[str]:
    """The nodes `task`'s last search found it could never fit, evictions or not."""
    errors = session.jobs[task.job_id].fit_errors.get(task.uid)
    return errors.unresolvable_nodes() if errors is not None else ()


def eviction_candidates(session: Session, task: Task,
                        among: Iterable[Node] | None = None,
                        refused: dict[int, Unfit] | None = None) -> Iterator[Node]:
    """The nodes where evicting could make room for `task`, in node order: those that
    pass every predicate or fail only for what evictions free (resolvable), leaving out
    those its last search found unresolvable. `among` narrows the nodes looked at (by a
    cheaper test first: predicates are the costly part); `refused` is read and added to
    as `judged` says. Lazy: a caller that has found enough stops asking."""
    skip = unresolvable_nodes(session, task)
    known: dict[int, Unfit] = {} if refused is None else refused
    for node in session.node_list if among is None else among:
        if node.name in skip:
            continue
        unfit = judged(session, task, node, known)
        if unfit is None or unfit.resolvable:
            yield node


def judged(session: Session, task: Task, node: Node, refused: dict[int, Unfit]) -> Unfit | None:
    """The predicates' verdict on `task` for `node`. `refused` holds the static refusals
    known for tasks of `task`'s signature, by node position (`fit.Unfit`: they follow
    from the node's spec and the task's signature alone): one found there is not asked
    again, and a static refusal found is added."""
    unfit = refused.get(node.position)
    if unfit is None:
        unfit = session.predicate(task, node)
        if unfit is not None and unfit.static:
            refused[node.position] = unfit
    return unfit
