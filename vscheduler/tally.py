"""Sums kept from one session to the next, brought up to date by what changed.

A plugin that sums what every job (or node) holds, per queue say, would recount 10,000
jobs at every open of a busy cluster to find that ten changed. A `Tally` keeps each
job's part and the sums per key instead; at the next open it takes away the parts of
the jobs the snapshot copied anew, lost or handed on with a new phase
(`Snapshot.changed_jobs`, or `changed_nodes`) and adds their new parts. Everything else
was handed on unchanged, so its part holds.

The rule for a plugin author (also in `hookspecs.py`): the part of a job must follow
from the job copy alone and from the tally's `token` (the arguments, the nodes' specs:
whatever else it reads). When the token differs, when the tally was not brought up to
date with the snapshot this one was built from, or when there is no such snapshot, the
tally counts every job again. The session may change its job copies freely: a job
changed in a session is copied anew for the next one (or, when only its phase was
written, handed on among the changed jobs) and so counted again.

Parts are `Resource` amounts, which hold whole milli units and bytes (quantities are
rounded up to those when read, and stay whole below 2**53), so taking away what was
added is exact: the kept sums equal a recount in any order. A sum holds a scalar while
some member names it (at zero too, as a recount would), its scalars in name order so
that what it prints does not depend on the order parts came and went in. A part must
not be changed once given.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from vscheduler.resources import Resource

__all__ = ["Part", "Tally", "kept_tally", "kept_value"]

# What one job or node gives: the key it counts under (its queue, say) and its amounts,
# one per sum the tally keeps (None: nothing to add to that one).
Part = tuple[str, tuple[Resource | None, ...]]


_EMPTY = Resource()  # (`Tally.amount`'s, never changed)


class Tally:
    """Sums per key of the parts of a snapshot's jobs (or nodes), and each one's part."""

    __slots__ = ("count", "members", "named", "over", "parts", "serial", "sums", "token",
                 "width")

    def __init__(self, over: str, token: Hashable, width: int,
                 count: Callable[[Any], Part | None]) -> None:
        self.over = over  # "jobs" or "nodes": which of the snapshot's maps it sums
        self.token = token
        self.width = width
        self.count = count
        self.serial = 0  # the snapshot the sums are of
        # each one's part as counted, an empty amount as None (read them with `amount`)
        self.parts: dict[str, Part] = {}
        self.sums: dict[str, list[Resource]] = {}
        self.members: dict[str, int] = {}
        # key -> per amount, how many members name each scalar: a sum holds a scalar,
        # at zero too, while some member names it (as a recount would), in name order
        self.named: dict[str, list[dict[str, int]]] = {}

    def sum(self, key: str, index: int) -> Resource:
        """The sum of one amount over the members of `key` (empty if it has none), as a
        new resource."""
        sums = self.sums.get(key)
        return sums[index].clone() if sums is not None else Resource()

    def amount(self, name: str, index: int) -> Resource:
        """One amount of the part of `name` (empty if it has none). Read-only: the
        empty amount is one object, shared (most jobs of a busy cluster hold nothing,
        and drf reads every waiting job's)."""
        part = self.parts.get(name)
        amount = part[1][index] if part is not None else None
        return amount if amount is not None else _EMPTY

    def total(self, index: int) -> Resource:
        """One amount summed over every key, as a new resource (scalars in name order)."""
        out = Resource()
        for key in sorted(self.sums):
            out.add(self.sums[key][index])
        out.scalars = dict(sorted(out.scalars.items()))
        return out

    # ---------------------------------------------------------------- keeping

    def recount(self, objects: Mapping[str, Any]) -> None:
        self.parts.clear()
        self.sums.clear()
        self.members.clear()
        self.named.clear()
        for name, obj in objects.items():
            self._add(name, obj)

    def update(self, objects: Mapping[str, Any], changed: list[str]) -> None:
        """Take away the old parts of `changed` and add the new ones of those still in
        `objects`."""
        for name in changed:
            old = self.parts.pop(name, None)
            if old is not None:
                self._take(old)
            obj = objects.get(name)
            if obj is not None:
                self._add(name, obj)

    def _add(self, name: str, obj: Any) -> None:
        part = self.count(obj)
        if part is None:
            return
        key, amounts = part
        if len(amounts) != self.width:
            raise ValueError(f"a part of {len(amounts)} amounts in a tally of {self.width}")
        sums = self.sums.get(key)
        if sums is None:
            sums = self.sums[key] = [Resource() for _ in range(self.width)]
            self.named[key] = [{} for _ in range(self.width)]
            self.members[key] = 0
        self.members[key] += 1
        named_per_amount = self.named[key]
        kept: list[Resource | None] | None = None  # (a copy of amounts, once one is empty)
        for index, amount in enumerate(amounts):
            if amount is None:
                continue
            scalars = amount.scalars
            if not (amount.cpu or amount.memory or scalars):
                # (nothing kept for an empty amount, with no cpu, memory nor scalar
                # named, at zero too: see `named`; most jobs of a busy cluster have
                # several, and a part lives as long as its job)
                if kept is None:
                    kept = list(amounts)
                kept[index] = None
                continue
            total = sums[index]
            total.cpu += amount.cpu
            total.memory += amount.memory
            if not scalars:
                continue
            named, into, new = named_per_amount[index], total.scalars, False
            for scalar, value in scalars.items():
                into[scalar] = into.get(scalar, 0) + value
                count = named.get(scalar, 0)
                named[scalar] = count + 1
                if not count:
                    new = True
            if new:
                total.scalars = dict(sorted(into.items()))
        self.parts[name] = part if kept is None else (key, tuple(kept))

    def _take(self, part: Part) -> None:
        key, amounts = part
        self.members[key] -= 1
        if not self.members[key]:
            # (the last member gone: the key goes, with no zero left behind)
            del self.members[key], self.sums[key], self.named[key]
            return
        for total, named, amount in zip(self.sums[key], self.named[key], amounts,
                                        strict=True):
            if amount is None:
                continue
            total.sub(amount)
            for scalar in amount.scalars:
                named[scalar] -= 1
                if not named[scalar]:
                    del named[scalar], total.scalars[scalar]

    def recounted(self, objects: Mapping[str, Any]) -> Tally:
        """A tally of `objects` counted afresh (to check this one against)."""
        fresh = Tally(self.over, self.token, self.width, self.count)
        fresh.recount(objects)
        return fresh


def kept_tally(snapshot: Any, name: str, token: Hashable, width: int,
               count: Callable[[Any], Part | None], over: str = "jobs") -> Tally:
    """The tally kept under `name`, brought up to date with `snapshot` (counted afresh
    when it cannot be: see the module's docstring)."""
    objects = snapshot.jobs if over == "jobs" else snapshot.nodes
    tally = snapshot.kept.get(name)
    if not isinstance(tally, Tally) or tally.token != token or tally.over != over:
        tally = Tally(over, token, width, count)
    tally.count = count
    if tally.serial != snapshot.serial:
        if snapshot.base and tally.serial == snapshot.base:
            tally.update(objects, snapshot.changed_jobs if over == "jobs"
                         else snapshot.changed_nodes)
        else:
            tally.recount(objects)
        tally.serial = snapshot.serial
    snapshot.kept[name] = tally
    return tally


def kept_value(snapshot: Any, name: str, token: Hashable, build: Callable[[], Any]) -> Any:
    """What `build` gives, kept under `name` while `token` stays the same (figures that
    follow from the nodes' specs alone, say, with `session.node_specs` as the token)."""
    kept = snapshot.kept.get(name)
    if not (isinstance(kept, _Kept) and kept.token == token):
        kept = snapshot.kept[name] = _Kept(token, build())
    kept.serial = snapshot.serial
    return kept.value


class _Kept:
    __slots__ = ("serial", "token", "value")

    def __init__(self, token: Hashable, value: Any) -> None:
        self.token = token
        self.value = value
        self.serial = 0  # the last snapshot it was read in (see Cache.snapshot)
