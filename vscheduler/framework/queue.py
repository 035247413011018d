"""A priority queue ordered by a session's `less` function (job, queue or task order)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import cmp_to_key
from typing import Any, Generic, TypeVar

__all__ = ["PriorityQueue"]

T = TypeVar("T")


class PriorityQueue(Generic[T]):
    """`pop` returns the item that `less` puts first. The session's orders end on
    uids, so where the plugins' orders are transitive (the built-in ones are) the
    result does not depend on insertion order; `ties` fixes the order going in, for
    a plugin whose order is not.

    The items are kept in a list sorted from the last to pop to the first: a pop takes
    the end without comparing anything, a push finds its place by bisection. A heap
    compares about twice the log of its size on every pop, and the orders are plugin
    code: with 20,000 waiting jobs, popping each once cost more than placing them.
    (Like a heap, it takes an item's order as fixed while the item is queued: an
    action changes a job only after popping it.)"""

    __slots__ = ("_items", "_less")

    def __init__(self, less: Callable[[T, T], bool], items: Iterable[T] = (),
                 ties: Callable[[T], Any] | None = None,
                 key: Callable[[T], Any] | None = None) -> None:
        """`ties`: the key `less` ends on, when it has one (`Session.job_ties`): the
        items are put in that order first, which costs no plugin call, so that where
        the plugins' orders tie, sorting by `less` takes one pass, not a comparison
        sort's log n passes; and the order going in is then that key's, not the
        caller's. `key`: `less` as a key, a total order (`Session.job_key`):
        the items are sorted by it alone, with no call of `less`."""
        self._less = less
        if key is not None:  # (last to pop first, as `_items` holds them)
            self._items = sorted(items, key=key, reverse=True)
            return
        if ties is not None:
            items = sorted(items, key=ties, reverse=True)
        self._items = sorted(items, key=cmp_to_key(
            lambda left, right: -1 if less(right, left) else 1))

    def push(self, item: T) -> None:
        items, less = self._items, self._less
        low, high = 0, len(items)
        while low < high:  # the first place whose item pops before `item`
            middle = (low + high) // 2
            if less(items[middle], item):
                high = middle
            else:
                low = middle + 1
        items.insert(low, item)

    def pop(self) -> T:
        return self._items.pop()

    def adopt(self, other: PriorityQueue[T]) -> None:
        """Take on what is left in `other` (a copy this queue's dry run kept)."""
        self._items = other._items

    def retain(self, keep: Callable[[T], bool]) -> None:
        """Drop the items `keep` refuses; the others stay in order."""
        self._items = [item for item in self._items if keep(item)]

    def copy(self) -> PriorityQueue[T]:
        """The same items in the same order, popped independently (a dry run's)."""
        clone = PriorityQueue.__new__(PriorityQueue)
        clone._less = self._less
        clone._items = list(self._items)
        return clone

    def __iter__(self) -> Iterator[T]:
        """The items in the order they would pop."""
        return reversed(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)
