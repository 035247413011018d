"""Node searches that tasks of the same shape share.

A gang's pods are usually identical, and a large batch of jobs has few shapes: matching
each pod against every node again repeats the same predicates and scores. A `NodeSearch`
keeps, per task signature (see the `task_signature` hook), the nodes tried with their
verdicts and scores, ordered best first. The next task of that signature takes the
best node after looking again only at the nodes that changed since (the session logs
every node whose tasks change). Decisions are those of a fresh search: same nodes, same
verdicts, same order (best gradient, then highest score, then node order).

With node sampling, a signature's sample is drawn once, from the session's rotating
offset, and drawn again when it has no feasible node left.

Searches are shared only when every plugin that answers `predicate` or `node_order`
says what its answers depend on (`task_signature`), and never when a batch scorer has
an opinion for the task (its scores are normalised over the candidate nodes, so they
change with them); such tasks are searched afresh each time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from sortedcontainers import SortedList

from vscheduler.fit import NodeFitErrors
from vscheduler.framework.placement import SamplingWindow, insufficient, node_scores
from vscheduler.model import Node, Task
from vscheduler.resources import Resource

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["NodeSearch"]

# (gradient: 0 = fits idle now, 1 = only once releasing pods are gone; -score; index)
Key = tuple[int, float, int]


class _Entry:
    __slots__ = ("errors", "feasible", "judged", "key_of", "position", "sampled", "shared",
                 "task", "unjudged")

    def __init__(self, task: Task) -> None:
        self.task = task  # the task the verdicts were computed for (same signature)
        self.shared = True
        self.feasible: SortedList = SortedList()
        self.key_of: dict[str, Key] = {}
        self.errors = NodeFitErrors()
        self.sampled: set[str] = set()
        self.judged: set[str] = set()  # candidates a batch scorer was asked about
        self.unjudged = False  # a candidate joined that it was not asked about
        self.position = 0  # how much of the session's change log has been seen


class NodeSearch:
    """Best nodes for tasks during one action, sharing work between tasks that have the
    same signature. `fits_future(node, request)` and `fits_now(node, request)` name the
    first resource lacking (or None), as `Node.insufficient_future` / `insufficient_now`.
    """

    def __init__(self, session: Session,
                 fits_future: Callable[[Node, Resource], str | None],
                 fits_now: Callable[[Node, Resource], str | None]) -> None:
        self.session = session
        self.fits_future = fits_future
        self.fits_now = fits_now
        self.index = {node.name: i for i, node in enumerate(session.node_list)}
        self.entries: dict[Hashable, _Entry] = {}

    def best(self, task: Task) -> tuple[Node | None, NodeFitErrors] | None:
        """The best node for `task` (None if no node fits) and why the others do not;
        or None if `task` cannot share searches (search it afresh)."""
        session = self.session
        signature = session.task_signature(task)
        if signature is None:
            return None
        entry = self.entries.get(signature)
        if entry is None:
            entry = self.entries[signature] = _Entry(task)
            self._sample(entry)
        elif entry.shared:
            self._refresh(entry)
            if not entry.feasible and len(entry.sampled) < len(session.node_list):
                self._sample(entry)
        if entry.shared and session.has_batch_node_order:
            self._check_batch(entry)
        if not entry.shared:
            return None
        if not entry.feasible:
            return None, entry.errors.copy()
        return session.node_list[entry.feasible[0][2]], entry.errors

    # ---------------------------------------------------------------- internals

    def _sample(self, entry: _Entry) -> None:
        """Try nodes from the rotating offset until enough are feasible."""
        session = self.session
        nodes = session.node_list
        count = len(nodes)
        window = SamplingWindow(session, count)
        wanted, start = window.wanted, window.start
        found = len(entry.feasible)
        feasible: list[Node] = []
        tried = 0
        for tried in range(1, count + 1):
            node = nodes[(start + tried - 1) % count]
            if node.name in entry.sampled:
                continue
            entry.sampled.add(node.name)
            if self._judge(entry, node):
                feasible.append(node)
                if found + len(feasible) >= wanted:
                    break
        window.end(tried)
        if feasible:
            self._rank(entry, feasible)
        entry.position = len(session.node_changes)

    def _check_batch(self, entry: _Entry) -> None:
        """Stop sharing the entry once a batch scorer tells its candidates apart (its
        scores are normalised over them, so they change with them). If every node ever
        a candidate scored the same, so does any set of them: only new candidates call
        for a new look."""
        if not entry.unjudged:
            return
        entry.unjudged = False
        nodes = self.session.node_list
        batch = self.session.batch_node_order(
            entry.task, [nodes[key[2]] for key in entry.feasible])
        entry.judged.update(entry.key_of)
        if len(set(batch.values())) > 1:
            entry.shared = False

    def _refresh(self, entry: _Entry) -> None:
        changes = self.session.node_changes
        if entry.position == len(changes):
            return
        dirty = dict.fromkeys(changes[entry.position:])  # in the order they changed
        entry.position = len(changes)
        nodes = self.session.nodes
        feasible: list[Node] = []
        for name in dirty:
            if name not in entry.sampled:
                continue
            key = entry.key_of.pop(name, None)
            if key is not None:
                entry.feasible.remove(key)
            node = nodes[name]
            # A verdict judged again and found the same changes nothing: the copies
            # handed to failed tasks keep sharing it (see fit.NodeFitErrors).
            if self._judge(entry, node):
                entry.errors.forget(name)
                feasible.append(node)
        if feasible:
            self._rank(entry, feasible)

    def _judge(self, entry: _Entry, node: Node) -> bool:
        """Whether `node` can take the entry's task; if not, record why."""
        task = entry.task
        lacking = self.fits_future(node, task.resreq)
        if lacking is not None:
            entry.errors.set(node.name, insufficient(lacking))
            return False
        unfit = self.session.predicate(task, node)
        if unfit is not None:
            entry.errors.set(node.name, unfit)
            return False
        return True

    def _rank(self, entry: _Entry, feasible: list[Node]) -> None:
        """Add feasible nodes to the entry in their place: scored together, without
        batch scores (see `_check_batch`)."""
        task = entry.task
        fits_now, index, key_of = self.fits_now, self.index, entry.key_of
        scores = node_scores(self.session, task, feasible, with_batch=False)
        for node, score in zip(feasible, scores, strict=True):
            gradient = 0 if fits_now(node, task.resreq) is None else 1
            key = (gradient, -score, index[node.name])
            key_of[node.name] = key
            entry.feasible.add(key)
            if node.name not in entry.judged:
                entry.unjudged = True
