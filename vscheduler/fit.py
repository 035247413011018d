"""Why a task does not fit: reasons as data, aggregated the way `kubectl describe` shows.

A predicate answers with an `Unfit` (one or more reasons, and whether evicting pods could
resolve it). The allocate path collects one `Unfit` per node into `NodeFitErrors`, whose
message is the familiar `0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had
untolerated taint {gpu: true}.`

Tasks of one shape share a node search (framework.search), and most of them fail for the
very same reasons on the very same nodes: in a large cluster the per-node verdicts are
thousands of entries, and the tasks that fail are thousands too. So a copy of the
verdicts is not a copy: copies share one immutable set of verdicts, with its histogram,
its message and its unresolvable nodes computed once for all of them. Whoever changes
its verdicts after that gets a set of its own (copy on write) that holds only its
changes over the shared refusals, and a verdict set again to what it already is changes
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from math import isqrt
from types import MappingProxyType

__all__ = ["NodeFitErrors", "Unfit"]


class Unfit:
    """A predicate's refusal of one node. `resolvable` says whether evicting pods from
    the node could make it fit (resources, pod count, host ports: yes; a selector or an
    untolerated taint: no). Preempt and reclaim only look at resolvable refusals.
    `static` says the refusal follows from the node's spec (labels, taints, whether it
    is unschedulable, its cards) and the task's signature alone: node searches and
    evicting actions then keep it from session to session until the node changes, for
    every task of that signature whatever its queue (framework/fit_index.py).
    Two refusals with the same reasons and resolvability are equal: they explain the
    same, whichever predicate call built them."""

    __slots__ = ("reasons", "resolvable", "static")

    def __init__(self, *reasons: str, resolvable: bool = False, static: bool = False) -> None:
        self.reasons: tuple[str, ...] = reasons
        self.resolvable = resolvable
        self.static = static

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Unfit):
            return NotImplemented
        return self.reasons == other.reasons and self.resolvable == other.resolvable

    def __hash__(self) -> int:
        return hash((self.reasons, self.resolvable))

    def __repr__(self) -> str:
        return f"Unfit({', '.join(self.reasons)}{', resolvable' if self.resolvable else ''})"


class _Verdicts:
    """One set of per-node refusals, the count of each reason over them (kept as they
    change, so a copy that changes a few verdicts of thousands does not count them all
    again) and what is derived from them, computed when first asked. Once `frozen`
    (shared by copies) it never changes again; until then a change drops what was
    derived. (A frozen set may still merge its delta into a new base: the same
    refusals.)

    The refusals are a `base` map and this set's own `delta` over it (a node -> its
    refusal, or None: refused in `base`, not here). A base is changed in place only by
    the one set that made it, before any copy shares it (`owned`); once shared it never
    changes. So a holder that changes shared verdicts (a node search, as the nodes
    change, after handing its verdicts to a failed task) copies the delta and the
    counts, not thousands of refusals: tasks of one shape fail one after another in a
    cluster that changes in between, and copying the whole map after each failure cost
    more than the search. The delta is merged into a new base of this set's own once it
    grows past about the square root of the base's refusals, and at least 16 (a copy
    costs the delta, a merge the map)."""

    __slots__ = ("base", "counts", "delta", "frozen", "histogram", "messages", "owned",
                 "size", "unresolvable")

    def __init__(self, base: dict[str, Unfit], counts: dict[str, int],
                 delta: dict[str, Unfit | None] | None = None, size: int | None = None,
                 owned: bool = False) -> None:
        self.base = base
        self.owned = owned  # whether `base` is this set's alone, changed in place
        self.delta: dict[str, Unfit | None] = {} if delta is None else delta
        self.size = len(base) if size is None else size  # nodes refused
        self.counts = counts  # reason -> nodes refused for it (some at 0)
        self.frozen = False
        self.histogram: str | None = None  # "3 Insufficient cpu, 2 node(s) had ..."
        self.messages: dict[tuple[str, int | None], str] = {}
        self.unresolvable: frozenset[str] | None = None

    def get(self, node: str) -> Unfit | None:
        delta = self.delta
        if node in delta:
            return delta[node]
        return self.base.get(node)

    def put(self, node: str, unfit: Unfit | None) -> None:
        """Refuse `node` with `unfit` (None: no longer refused); the counts are the
        caller's. Not for frozen verdicts."""
        if self.owned:  # (then the delta is empty)
            if unfit is None:
                del self.base[node]
            else:
                self.base[node] = unfit
            return
        if unfit is None and node not in self.base:
            self.delta.pop(node, None)
        else:
            self.delta[node] = unfit
        if len(self.delta) > _merge_at(len(self.base)):
            self.flat()

    def flat(self) -> dict[str, Unfit]:
        """Every refusal, as one map (read only: it may be shared, or change with this
        set)."""
        if self.delta:
            merged = dict(self.base)
            for node, unfit in self.delta.items():
                if unfit is None:
                    del merged[node]
                else:
                    merged[node] = unfit
            # (the same refusals: sound for shared verdicts too)
            self.base, self.delta, self.owned = merged, {}, not self.frozen
        return self.base

    def copy(self) -> _Verdicts:
        """A set of its own with the same refusals, sharing the base (neither changes it
        in place from now on): the delta and counts copied."""
        self.owned = False
        return _Verdicts(self.base, dict(self.counts), dict(self.delta), self.size)

    def forget_derived(self) -> None:
        self.histogram = None
        self.unresolvable = None
        if self.messages:
            self.messages = {}

    def histogram_text(self) -> str:
        """The reasons counted over the nodes, each `count reason`, sorted as text and
        joined (as Volcano's FitErrors.Error sorts them: "10 x" before "2 y")."""
        if self.histogram is None:
            self.histogram = ", ".join(sorted(f"{count} {reason}"
                                              for reason, count in self.counts.items()
                                              if count))
        return self.histogram


def _merge_at(size: int) -> int:
    """How large a delta over a base of `size` refusals grows before it is merged."""
    return max(16, isqrt(size))


class NodeFitErrors:
    """The refusals of every node tried for one task, or one error for all of them.
    `copy()` is cheap and safe: the copy and the original share their verdicts until
    either changes them (see the module's docstring)."""

    __slots__ = ("_verdicts", "error")

    def __init__(self, error: str = "") -> None:
        self._verdicts = _Verdicts({}, {}, owned=True)
        self.error = error

    @property
    def nodes(self) -> Mapping[str, Unfit]:
        """Node name -> its refusal, read only, and to be read before this holder
        changes again (change them with `set` and `forget`)."""
        return MappingProxyType(self._verdicts.flat())

    def set(self, node: str, unfit: Unfit) -> None:
        old = self._verdicts.get(node)
        if old == unfit:
            return  # no change: nothing to copy, nothing derived to drop
        verdicts = self._own()
        verdicts.put(node, unfit)
        counts = verdicts.counts
        if old is not None:
            for reason in old.reasons:
                counts[reason] -= 1
        else:
            verdicts.size += 1
        for reason in unfit.reasons:
            counts[reason] = counts.get(reason, 0) + 1

    def forget(self, node: str) -> None:
        """`node` is no longer refused (it fits now, or is to be judged again)."""
        old = self._verdicts.get(node)
        if old is not None:
            verdicts = self._own()
            verdicts.put(node, None)
            verdicts.size -= 1
            counts = verdicts.counts
            for reason in old.reasons:
                counts[reason] -= 1

    def fill(self, base: NodeFitErrors, overrides: Iterable[tuple[str, Unfit]] = ()) -> None:
        """Give every node `base` refuses that has no verdict here its refusal there, or
        the one `overrides` names for it: `base`'s refusals shared (its delta and counts
        copied), not set a verdict at a time. The verdicts held keep theirs."""
        held = self._verdicts.flat()
        self._verdicts = base._verdicts.copy()
        for node, unfit in overrides:
            if node not in held:
                self.set(node, unfit)
        for node, unfit in held.items():
            self.set(node, unfit)

    def copy(self) -> NodeFitErrors:
        """A copy that later changes to this one do not reach (nor its changes this
        one): both share the verdicts, frozen, until one of them changes its own."""
        self._verdicts.frozen = True
        self._verdicts.owned = False  # (shared now: see `_Verdicts`)
        copy = NodeFitErrors.__new__(NodeFitErrors)
        copy._verdicts = self._verdicts
        copy.error = self.error
        return copy

    def unresolvable_nodes(self) -> frozenset[str]:
        """The nodes no eviction could make fit (computed once per set of verdicts)."""
        verdicts = self._verdicts
        if verdicts.unresolvable is None:
            verdicts.unresolvable = frozenset(
                name for name, unfit in verdicts.flat().items() if not unfit.resolvable)
        return verdicts.unresolvable

    def message(self, total_nodes: int | None = None) -> str:
        """`0/N nodes are available: <histogram>.` (N: `total_nodes`, else the nodes
        refused), headed by the error instead when there is one; the error alone when no
        node was refused. Rendered once per set of verdicts, error and N: the tasks
        sharing them share the one string."""
        verdicts = self._verdicts
        if self.error and not verdicts.size:
            return self.error
        key = (self.error, total_nodes)
        message = verdicts.messages.get(key)
        if message is None:
            histogram = verdicts.histogram_text()
            total = verdicts.size if total_nodes is None else total_nodes
            head = self.error or f"0/{total} nodes are available"
            message = f"{head}: {histogram}." if histogram else f"{head}."
            verdicts.messages[key] = message
        return message

    def _own(self) -> _Verdicts:
        """The verdicts, made this holder's own before a change: a private copy of
        shared ones (their delta: see `_Verdicts`); with what was derived from them
        dropped."""
        verdicts = self._verdicts
        if verdicts.frozen:
            verdicts = self._verdicts = verdicts.copy()
        else:
            verdicts.forget_derived()
        return verdicts
