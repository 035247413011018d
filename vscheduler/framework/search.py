"""Node searches that tasks of the same shape share.

A gang's pods are usually identical, and a large batch of jobs has few shapes: matching
each pod against every node again repeats the same predicates and scores. A `NodeSearch`
keeps, per task signature (see the `task_signature` hook), the nodes tried with their
verdicts and scores, ordered best first. The next task of that signature takes the
best node after looking again only at the nodes that changed since (the session logs
every node whose tasks change), but for those refused for their spec (a static
refusal), which stay refused and are judged again only if a failure needs their
reason. Decisions are those of a fresh search: same nodes, same verdicts, same order
(best gradient, then highest score, then node order).

With node sampling, a signature's sample is drawn once, from the session's rotating
offset, and drawn again when it has no feasible node left.

Searches are shared only when every plugin that answers `predicate` or `node_order`
says what its answers depend on (`task_signature`), and never when a batch scorer has
an opinion for the task (its scores are normalised over the candidate nodes, so they
change with them); such tasks are searched afresh each time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING

from sortedcontainers import SortedList

from vscheduler.fit import NodeFitErrors, Unfit
from vscheduler.framework.placement import SamplingWindow, insufficient, node_scores
from vscheduler.model import Node, Task
from vscheduler.resources import Resource

if TYPE_CHECKING:
    from vscheduler.framework.fit_index import FitIndex
    from vscheduler.framework.session import Session

__all__ = ["NodeSearch"]

# (gradient: 0 = fits idle now, 1 = only once releasing pods are gone; -score; index)
Key = tuple[int, float, int]
_NONE: dict[int, Unfit] = {}


class _Entry:
    __slots__ = ("covered", "deferred", "errors", "feasible", "judged", "key_of", "position",
                 "refused", "shared", "task", "tried", "unexplained", "unjudged")

    def __init__(self, task: Task, nodes: int, refused: dict[int, Unfit] | None) -> None:
        # The task the entry judges for: the last to ask. A task that asked earlier
        # may have another signature since (a pod placed with an anti-affinity its
        # labels match), and judging for it would no longer be judging for the others.
        self.task = task
        # node position -> static refusals for the signature, kept by the fit index
        self.refused = refused
        self.shared = True
        self.feasible: SortedList = SortedList()
        self.key_of: dict[str, Key] = {}
        self.errors = NodeFitErrors()
        # by node position: 1 once a sample went past the node (judged, or passed by
        # for lack of room: see `unexplained`), and how many such nodes there are
        self.covered = bytearray(nodes)
        self.tried = 0
        # Nodes passed by without a verdict recorded (the fit index said they lack
        # room): their verdicts are written when a failure needs them (`_explain`).
        self.unexplained = False
        # Nodes with a static refusal known that the session logged as changed since
        # the entry last looked (their pods, or pods of their domain): refused still
        # (their spec did not change), but the check that speaks first may be another
        # now (a pod count before a taint, say), and a verdict held for them may be
        # stale: judged again in `_explain`.
        self.deferred: dict[str, None] = {}
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
                 fits_now: Callable[[Node, Resource], str | None],
                 fit_index: FitIndex | None = None,
                 within: Sequence[Node] | None = None) -> None:
        if fit_index is not None and fits_future is not Node.insufficient_future:
            raise ValueError("a fit index knows the nodes with room by "
                             "Node.insufficient_future: search with it, or without the index")
        if fit_index is not None and within is not None:
            raise ValueError("a search within some nodes judges each of them: no fit index")
        # The nodes searched: all of the session's (sampled), or only `within` (a
        # topology domain's, every one judged).
        self.within = within
        self.session = session
        self.fits_future = fits_future
        self.fits_now = fits_now
        # Which nodes have room, to pass the others by unjudged.
        self.fit_index = fit_index
        self.entries: dict[Hashable, _Entry] = {}

    def best(self, task: Task) -> tuple[Node | None, NodeFitErrors] | None:
        """The best node for `task` (None if no node fits) and why the others do not
        (every node tried when none fits; with a node found, only those judged so far,
        some perhaps stale: see `deferred`); or None if `task` cannot share searches
        (search it afresh)."""
        session = self.session
        signature = session.task_signature(task)
        if signature is None:
            return None
        entry = self.entries.get(signature)
        if entry is None:
            refused = (self.fit_index.static_refusals(session, signature)
                       if self.fit_index is not None else None)
            entry = self.entries[signature] = _Entry(task, len(session.node_list), refused)
            self._sample(entry)
        elif entry.shared:
            entry.task = task
            self._refresh(entry)
            if not entry.feasible and entry.tried < self._count():
                self._sample(entry)
        if entry.shared and session.has_batch_node_order:
            self._check_batch(entry)
        if not entry.shared:
            return None
        if not entry.feasible:
            self._explain(entry)
            return None, entry.errors.copy()
        return session.node_list[entry.feasible[0][2]], entry.errors

    # ---------------------------------------------------------------- internals

    def _count(self) -> int:
        within = self.within
        return len(self.session.node_list) if within is None else len(within)

    def _sample(self, entry: _Entry) -> None:
        """Try nodes from the rotating offset until enough are feasible. With a fit
        index, only the nodes with room and not refused statically are tried, in the
        same order: the others would be refused again, and their verdicts are written
        only when asked (`_explain`)."""
        session = self.session
        nodes = session.node_list
        if self.within is not None:
            self._judge_within(entry)
            return
        count = len(nodes)
        window = SamplingWindow(session, count)
        wanted, start = window.wanted, window.start
        found = len(entry.feasible)
        feasible: list[Node] = []
        covered, refused = entry.covered, entry.refused or _NONE
        tried = 0
        if self.fit_index is None:
            order: Iterable[int] = itertools.chain(range(start, count), range(start))
        else:
            fitting = self.fit_index.fitting(session, entry.task.resreq)
            order = itertools.chain(fitting.irange(start), fitting.irange(None, start - 1))
        for position in order:
            tried = (position - start) % count + 1
            if covered[position]:
                continue
            covered[position] = 1
            if position in refused:
                continue
            if self._judge(entry, nodes[position]):
                feasible.append(nodes[position])
                if found + len(feasible) >= wanted:
                    break
        else:
            tried = count
        if self.fit_index is not None:
            # the nodes passed by in the window: covered, their verdicts to write later
            end = start + tried
            covered[start:min(end, count)] = b"\x01" * (min(end, count) - start)
            if end > count:
                covered[:end - count] = b"\x01" * (end - count)
            entry.unexplained = True
        entry.tried = count - covered.count(0)
        window.end(tried)
        if feasible:
            self._rank(entry, feasible)
        entry.position = len(session.node_changes)

    def _judge_within(self, entry: _Entry) -> None:
        """Judge every node of `within` not judged yet (no sampling: a domain is
        small, and a gang must see all of it)."""
        covered = entry.covered
        feasible = []
        for node in self.within or ():
            if not covered[node.position]:
                covered[node.position] = 1
                if self._judge(entry, node):
                    feasible.append(node)
        entry.tried = len(self.within or ())
        if feasible:
            self._rank(entry, feasible)
        entry.position = len(self.session.node_changes)

    def _explain(self, entry: _Entry) -> None:
        """Judge again the nodes left refused when they changed (`deferred`), and
        write the verdicts of the nodes a sample passed by (see `_sample`): each lacks
        room for the task or has a static refusal known (one that changed since was
        judged again then). Once every node was passed, the fit index's refusals are
        taken whole (a full cluster would otherwise cost a verdict per node per pod
        shape in every session)."""
        if entry.deferred:
            for name in entry.deferred:
                self._judge(entry, self.session.nodes[name])
            entry.deferred.clear()
        if not entry.unexplained:
            return
        entry.unexplained = False
        covered, verdicts, key_of = entry.covered, entry.errors.nodes, entry.key_of
        refused = entry.refused or _NONE
        nodes = self.session.node_list
        if self.fit_index is not None and entry.tried == len(nodes):
            # Every node was passed: those without room take the index's refusals in
            # one copy (a node refused statically keeps that refusal).
            entry.errors.fill(self.fit_index.lacking(self.session, entry.task.resreq), (
                (nodes[position].name, unfit) for position, unfit in refused.items()
                if nodes[position].name not in key_of))
            verdicts = entry.errors.nodes
            if len(verdicts) + len(key_of) == len(nodes):
                return
        for node in nodes:
            if covered[node.position] and node.name not in verdicts \
                    and node.name not in key_of:
                unfit = refused.get(node.position)
                if unfit is not None:
                    entry.errors.set(node.name, unfit)
                else:
                    self._judge(entry, node)

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
        refused = entry.refused or _NONE
        feasible: list[Node] = []
        for name in dirty:
            node = nodes[name]
            if not entry.covered[node.position]:
                continue
            if node.position in refused:
                # (refused whatever its pods: why, only if a failure needs it)
                entry.deferred[name] = None
                continue
            key = entry.key_of.pop(name, None)
            if key is not None:
                entry.feasible.remove(key)
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
            if unfit.static and entry.refused is not None:
                entry.refused[node.position] = unfit
            return False
        return True

    def _rank(self, entry: _Entry, feasible: list[Node]) -> None:
        """Add feasible nodes to the entry in their place: scored together, without
        batch scores (see `_check_batch`)."""
        task = entry.task
        fits_now, key_of = self.fits_now, entry.key_of
        scores = node_scores(self.session, task, feasible, with_batch=False)
        for node, score in zip(feasible, scores, strict=True):
            gradient = 0 if fits_now(node, task.resreq) is None else 1
            key = (gradient, -score, node.position)
            key_of[node.name] = key
            entry.feasible.add(key)
            if node.name not in entry.judged:
                entry.unjudged = True
