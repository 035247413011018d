"""Why a task does not fit: reasons as data, aggregated the way `kubectl describe` shows.

A predicate answers with an `Unfit` (one or more reasons, and whether evicting pods could
resolve it). The allocate path collects one `Unfit` per node into `NodeFitErrors`, whose
message is the familiar `0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had
untolerated taint {gpu: true}.`
"""

from __future__ import annotations

from collections import Counter

__all__ = ["NodeFitErrors", "Unfit"]


class Unfit:
    """A predicate's refusal of one node. `resolvable` says whether evicting pods from
    the node could make it fit (resources, pod count, host ports: yes; a selector or an
    untolerated taint: no). Preempt and reclaim only look at resolvable refusals."""

    __slots__ = ("reasons", "resolvable")

    def __init__(self, *reasons: str, resolvable: bool = False) -> None:
        self.reasons: tuple[str, ...] = reasons
        self.resolvable = resolvable

    def __repr__(self) -> str:
        return f"Unfit({', '.join(self.reasons)}{', resolvable' if self.resolvable else ''})"


class NodeFitErrors:
    """The refusals of every node tried for one task, or one error for all of them."""

    __slots__ = ("error", "nodes")

    def __init__(self, error: str = "") -> None:
        self.nodes: dict[str, Unfit] = {}
        self.error = error

    def set(self, node: str, unfit: Unfit) -> None:
        self.nodes[node] = unfit

    def copy(self) -> NodeFitErrors:
        """A copy that later changes to this one do not reach."""
        copy = NodeFitErrors(self.error)
        copy.nodes = dict(self.nodes)
        return copy

    def unresolvable_nodes(self) -> set[str]:
        return {name for name, unfit in self.nodes.items() if not unfit.resolvable}

    def message(self, total_nodes: int | None = None) -> str:
        if self.error and not self.nodes:
            return self.error
        counts = Counter(reason for unfit in self.nodes.values() for reason in unfit.reasons)
        histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
        total = len(self.nodes) if total_nodes is None else total_nodes
        head = self.error or f"0/{total} nodes are available"
        if not histogram:
            return f"{head}."
        return f"{head}: {', '.join(histogram)}."
