"""Which nodes have room for a request, kept across actions and sessions.

In a busy cluster most nodes are full: a node search for a new pod shape that judged
every node from the sampling offset on would refuse thousands of them for lack of
resources before it found enough that fit. A `FitIndex` keeps, per request shape (its
cpu, memory and scalars), the positions of the nodes whose future idle could take it
(`Node.insufficient_future` finds nothing lacking), in order, so that a search visits
only those (framework.search) and still walks them in the order sampling would, and an
evicting action finds where a pod fits without an eviction (framework.eviction,
`_take_room`) without judging each node.

Each shape also keeps why every other node lacks room (its first resource short, as
`Node.insufficient_future` names it), counted by reason: a pod that fits nowhere is
told of every node without judging each one again (framework.search, `_explain`).

Beside it, per task signature, the refusals a predicate marked `static` (see
`fit.Unfit`): a node refused for its labels, taints or cards is refused again for tasks
of that signature without asking, until the node changes. Node searches keep one such
map per signature, and evicting actions another (under `("eviction", signature)`), read
by every preemptor of that signature whatever its queue or action.

It is kept between sessions (`Snapshot.kept`) while the nodes' specs and the conf are
the same (the positions of nodes in the session's list do not move), and brought up to
date with the nodes that changed: those the snapshot copied anew, then those the
session's log names (`Session.node_changes`). A shape or signature unused for
`MAX_IDLE_SESSIONS` sessions is forgotten, and at most `MAX_SHAPES` shapes are kept.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING

from sortedcontainers import SortedList

from vscheduler.fit import NodeFitErrors, Unfit
from vscheduler.framework.placement import insufficient
from vscheduler.model import Node
from vscheduler.resources import Resource

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["MAX_IDLE_SESSIONS", "MAX_SHAPES", "FitIndex", "fit_index"]

# Sessions a shape may go unasked before its index is dropped (each costs its upkeep on
# every node change), and how many shapes are kept at most (the least recently asked
# goes first): a cluster of many pod shapes must not pay for all of them on every change.
MAX_IDLE_SESSIONS = 20
MAX_SHAPES = 64

Shape = tuple[float, float, tuple[tuple[str, float], ...]]


class _Refusals:
    __slots__ = ("by_position", "used")

    def __init__(self, used: int) -> None:
        self.by_position: dict[int, Unfit] = {}
        self.used = used


class _Shape:
    __slots__ = ("counts", "fitting", "lacking", "request", "used")

    def __init__(self, request: Resource, nodes: Iterable[Node], used: int) -> None:
        self.request = request
        self.used = used  # the serial of the last snapshot it was asked in
        # the refusal of every node without room for it, counted by reason
        self.lacking = NodeFitErrors()
        self.fitting = SortedList(  # positions of the nodes it fits on, ascending
            node.position for node in nodes if self.judge(node))

    def judge(self, node: Node) -> bool:
        """Whether `node` has room for the request; its refusal noted if not."""
        short = node.insufficient_future(self.request)
        if short is None:
            self.lacking.forget(node.name)
            return True
        self.lacking.set(node.name, insufficient(short))
        return False


class FitIndex:
    """Per request shape, the nodes that have room for it (see the module docstring)."""

    def __init__(self, node_specs: object, conf: object) -> None:
        self.node_specs = node_specs
        self.conf = conf
        self.serial = 0  # the snapshot whose nodes it is of
        self.position = 0  # how much of that session's node change log it has seen
        self.shapes: dict[Shape, _Shape] = {}
        self.refusals: dict[Hashable, _Refusals] = {}

    def fitting(self, session: Session, request: Resource) -> SortedList:
        """The positions (in `session.node_list`) of the nodes that could take
        `request` once what is releasing is gone, ascending. Read-only."""
        return self._shape(session, request).fitting

    def lacking(self, session: Session, request: Resource) -> NodeFitErrors:
        """The refusal of each node without room for `request` (an `insufficient`
        resource), counted by reason. Read-only: `NodeFitErrors.fill` shares it."""
        return self._shape(session, request).lacking

    def _shape(self, session: Session, request: Resource) -> _Shape:
        """What is kept for `request`'s shape, made if new, up to date with `session`."""
        self._catch_up(session)
        key = request.key()
        shape = self.shapes.get(key)
        if shape is None:
            if len(self.shapes) >= MAX_SHAPES:
                del self.shapes[min(self.shapes, key=lambda k: self.shapes[k].used)]
            shape = self.shapes[key] = _Shape(request.clone(), session.node_list,
                                              self.serial)
        shape.used = self.serial
        return shape

    def static_refusals(self, session: Session, signature: Hashable) -> dict[int, Unfit]:
        """Node position -> the static refusal of tasks of `signature` there (see
        `fit.Unfit`), for the caller to read and add to."""
        self._catch_up(session)
        refusals = self.refusals.get(signature)
        if refusals is None:
            refusals = self.refusals[signature] = _Refusals(self.serial)
        refusals.used = self.serial
        return refusals.by_position

    def _catch_up(self, session: Session) -> None:
        snapshot = session.snapshot
        if self.serial != snapshot.serial:
            if snapshot.base and self.serial == snapshot.base:
                self._recheck(session, snapshot.changed_nodes)
                oldest = snapshot.serial - MAX_IDLE_SESSIONS
                for key in [k for k, s in self.shapes.items() if s.used < oldest]:
                    del self.shapes[key]
                for key in [k for k, r in self.refusals.items() if r.used < oldest]:
                    del self.refusals[key]
            else:
                self.shapes.clear()
                self.refusals.clear()
            self.serial = snapshot.serial
            self.position = 0
        changes = session.node_changes
        if self.position != len(changes):
            # (a probe undone since may have shortened the log: see eviction._undo)
            self._recheck(session, dict.fromkeys(changes[min(self.position, len(changes)):]))
            self.position = len(changes)

    def _recheck(self, session: Session, names: Iterable[str]) -> None:
        if not (self.shapes or self.refusals):
            return
        nodes = session.nodes
        for name in names:
            node = nodes.get(name)
            if node is None:
                continue  # (a node gone: the specs changed, and the index was dropped)
            position = node.position
            for refusals in self.refusals.values():
                refusals.by_position.pop(position, None)
            for shape in self.shapes.values():
                if shape.judge(node):
                    if position not in shape.fitting:
                        shape.fitting.add(position)
                else:
                    shape.fitting.discard(position)


def fit_index(session: Session) -> FitIndex:
    """The session's fit index: the one kept from earlier sessions if the nodes' specs
    and the conf (its plugins' arguments) are the same."""
    kept = session.snapshot.kept.get("framework.fit-index")
    if (not isinstance(kept, FitIndex) or kept.node_specs != session.node_specs
            or kept.conf is not session.conf):
        kept = session.snapshot.kept["framework.fit-index"] = FitIndex(
            session.node_specs, session.conf)
    return kept
