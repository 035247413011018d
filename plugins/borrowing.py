"""Borrowing and lending between queues, with limits (seed 000; Kueue's cohort limits as
the anchor), for the capacity plugin.

Capacity lets a queue hold more than it deserves, up to its real capability, from any
idle resources. A Queue's annotations narrow that (each a JSON map of resource
quantities, or a comma-separated list of queues):

- `elastic.gpu/borrow-from: "team-b,shared"`: what the queue holds beyond its
  deserved amount must be lent by these queues, out of what they deserve and do not
  use;
- `elastic.gpu/max-borrow: '{"nvidia.com/gpu": "8"}'`: the most it holds beyond its
  deserved amount, per resource listed;
- `elastic.gpu/lending-limit: '{"nvidia.com/gpu": "4"}'`: the most of its unused
  deserved amount it lends; the rest waits for its own jobs;
- `elastic.gpu/protected: '{"nvidia.com/gpu": "4"}'`: reclaim never takes the queue
  below this, counting what it has placed or pipelined (seed 000's protectedGPUs: a
  guarantee that reserves nothing);
- `elastic.gpu/borrowed-preemption: "false"`: its lenders may not take back what it
  borrowed (by default they may, before anything else).

Who lent what to whom is worked out as a session opens, borrowers by name, each
borrower's lenders in its order (`Lending`), and kept up to date as tasks are placed
and evicted. A lender whose own jobs use what it lent is owed it: on each node, reclaim
takes from the queues that borrow from it first (capacity's victim queue order).
Queues without terms keep capacity's rule (any idle resources, up to the real
capability): a lending limit holds against the queues that borrow by these terms.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vscheduler.model import Queue
from vscheduler.objects import parse_bool
from vscheduler.quantity import QuantityError
from vscheduler.resources import MIN_RESOURCE, PODS, Resource

__all__ = ["ANNOTATIONS", "BORROW_FROM", "NO_TERMS", "BorrowTerms", "Lending", "beyond",
           "read_terms"]

PREFIX = "elastic.gpu/"
BORROW_FROM = PREFIX + "borrow-from"
MAX_BORROW = PREFIX + "max-borrow"
LENDING_LIMIT = PREFIX + "lending-limit"
PROTECTED = PREFIX + "protected"
BORROWED_PREEMPTION = PREFIX + "borrowed-preemption"
ANNOTATIONS = (BORROW_FROM, MAX_BORROW, LENDING_LIMIT, PROTECTED, BORROWED_PREEMPTION)


@dataclass(frozen=True, slots=True)
class BorrowTerms:
    """What a queue's annotations say of borrowing and lending (None: not said)."""

    lenders: tuple[str, ...] = ()
    max_borrow: Resource | None = None
    lending_limit: Resource | None = None
    protected: Resource | None = None
    borrowed_preemption: bool = True

    @property
    def limits_borrowing(self) -> bool:
        return bool(self.lenders) or self.max_borrow is not None


NO_TERMS = BorrowTerms()


def read_terms(queue: Queue) -> tuple[BorrowTerms, list[str]]:
    """A queue's terms, and why any annotation it has cannot be used (it is then
    ignored: the plugin says so in a Warning event)."""
    annotations = queue.annotations or {}
    raw = tuple(annotations.get(key) for key in ANNOTATIONS)
    if not any(value is not None for value in raw):
        return NO_TERMS, []
    return _read(raw)


@lru_cache(maxsize=1024)
def _read(raw: tuple[str | None, ...]) -> tuple[BorrowTerms, list[str]]:
    lenders_raw, max_raw, limit_raw, protected_raw, preemption_raw = raw
    problems: list[str] = []
    lenders: tuple[str, ...] = ()
    if lenders_raw is not None:
        lenders = tuple(dict.fromkeys(n.strip() for n in str(lenders_raw).split(",")
                                      if n.strip()))
        if not lenders:
            problems.append(f"{BORROW_FROM}: names no queue; ignored")
    amounts: list[Resource | None] = []
    for key, value in ((MAX_BORROW, max_raw), (LENDING_LIMIT, limit_raw),
                       (PROTECTED, protected_raw)):
        amount, problem = _amounts(key, value)
        amounts.append(amount)
        if problem:
            problems.append(problem)
    preemption = True
    if preemption_raw is not None:
        said = parse_bool(preemption_raw)
        if said is None:
            problems.append(f"{BORROWED_PREEMPTION}: not true or false: "
                            f"{str(preemption_raw)[:40]!r}; ignored")
        else:
            preemption = said
    return BorrowTerms(lenders, *amounts, borrowed_preemption=preemption), problems


def _amounts(key: str, raw: str | None) -> tuple[Resource | None, str | None]:
    if raw is None:
        return None, None
    try:
        parsed: Any = json.loads(raw)
        if not isinstance(parsed, Mapping):
            raise ValueError("not a JSON object of resource quantities")
        return Resource.from_k8s(parsed), None
    except (ValueError, QuantityError, RecursionError) as err:
        return None, f"{key}: {str(err)[:120]}; ignored"


class Lending:
    """Who lends what to whom in one session: each borrower's amounts per lender, and
    what each lender has lent in all. `unused(lender)` is what a lender deserves and
    does not hold, within its lending limit."""

    def __init__(self, terms: Mapping[str, BorrowTerms], figures: Mapping[str, Any]) -> None:
        self.terms = terms
        self.figures = figures
        self.lent: dict[str, Resource] = {}
        self.borrowed: dict[str, dict[str, Resource]] = {}
        for name in sorted(terms):
            term = terms[name]
            attr = figures.get(name)
            if term.lenders and attr is not None:
                self.take(name, beyond(attr.allocated, attr.deserved))

    def unused(self, lender: str) -> Resource:
        """What `lender` could still lend: its deserved amount less what it holds and
        what it lent already, within its lending limit (never below zero)."""
        attr = self.figures.get(lender)
        if attr is None:
            return Resource()
        free = beyond(attr.deserved, attr.allocated)
        limit = self.terms.get(lender, NO_TERMS).lending_limit
        if limit is not None:
            free.min_dimension(limit, missing_infinite=True)
        free.sub(self.lent.get(lender, Resource()))
        return _positive(free)

    def available(self, borrower: str) -> Resource:
        """What the borrower's lenders could lend it, in all."""
        total = Resource()
        for lender in self.terms[borrower].lenders:
            if lender != borrower:
                total.add(self.unused(lender))
        return total

    def take(self, borrower: str, amount: Resource) -> None:
        """Borrow `amount` from the borrower's lenders, in order, as far as they have
        it (what none has is booked to the first, which then owes it back)."""
        lenders = [n for n in self.terms[borrower].lenders if n != borrower]
        if not lenders or amount.is_empty():
            return
        mine = self.borrowed.setdefault(borrower, {})
        left = amount.clone()
        for lender in lenders:
            if left.is_empty():
                break
            part = left.clone()
            part.min_dimension(self.unused(lender), missing_infinite=False)
            part = _positive(part)
            if part.is_empty():
                continue
            self._book(mine, lender, part)
            left.sub(part)
        if not _positive(left).is_empty():
            self._book(mine, lenders[0], _positive(left))

    def give_back(self, borrower: str, amount: Resource) -> None:
        """Return `amount` of what the borrower borrowed, to its last lenders first."""
        mine = self.borrowed.get(borrower)
        if not mine or amount.is_empty():
            return
        left = amount.clone()
        for lender in reversed(list(mine)):
            part = left.clone()
            part.min_dimension(mine[lender], missing_infinite=False)
            part = _positive(part)
            if part.is_empty():
                continue
            mine[lender].sub(part)
            self.lent[lender].sub(part)
            left.sub(part)

    def borrows_from(self, borrower: str, lender: str) -> bool:
        """Whether `borrower` holds something lent by `lender`."""
        part = self.borrowed.get(borrower, {}).get(lender)
        return part is not None and not _positive(part).is_empty()

    def _book(self, mine: dict[str, Resource], lender: str, part: Resource) -> None:
        mine.setdefault(lender, Resource()).add(part)
        self.lent.setdefault(lender, Resource()).add(part)


def beyond(amount: Resource, limit: Resource) -> Resource:
    """What `amount` holds beyond `limit`, resource by resource (never below zero; a
    resource `limit` does not list counts as zero)."""
    return _positive(amount.clone().sub(limit))


def _positive(amount: Resource) -> Resource:
    """What `amount` holds above zero (the tolerance aside), `pods` left out: every pod
    asks for one, and nobody lends pod slots."""
    out = Resource(amount.cpu if amount.cpu >= MIN_RESOURCE else 0.0,
                   amount.memory if amount.memory >= MIN_RESOURCE else 0.0)
    for name, value in amount.scalars.items():
        if value >= MIN_RESOURCE and name != PODS:
            out.scalars[name] = value
    return out
