"""PriorityQueue: whatever the order items come in and are pushed and popped in, each
pop gives the item the order puts first among those queued, as a heap would."""

from __future__ import annotations

import heapq
import random

from hypothesis import given
from hypothesis import strategies as st

from vscheduler.framework.queue import PriorityQueue

# (key, name): a total order with ties on the key broken by name, as the session's are
items = st.tuples(st.integers(0, 5), st.text("abcdef", min_size=1, max_size=3))


@given(st.lists(items, unique=True), st.lists(st.one_of(items, st.none())))
def test_pops_come_in_order_as_from_a_heap(start, steps):
    queue = PriorityQueue(lambda left, right: left < right, start)
    heap = list(start)
    heapq.heapify(heap)
    popped, expected = [], []
    for step in steps:
        if step is None:  # a pop
            if heap:
                expected.append(heapq.heappop(heap))
                popped.append(queue.pop())
        elif step not in heap:
            heapq.heappush(heap, step)
            queue.push(step)
        assert len(queue) == len(heap) and bool(queue) == bool(heap)
    while heap:
        expected.append(heapq.heappop(heap))
        popped.append(queue.pop())
    assert popped == expected
    assert not queue


@given(st.lists(items, unique=True), st.lists(items))
def test_items_sorted_by_a_key_pop_as_compared_and_pushes_find_their_place(start, pushed):
    """With `key` (the order as a key: `Session.job_key`), the items are sorted by it
    without one call of `less`; items pushed later are placed by `less` among them."""
    asked: list[int] = []

    def less(left: tuple[int, str], right: tuple[int, str]) -> bool:
        asked.append(1)
        return left < right

    queue = PriorityQueue(less, start, key=lambda item: item)
    assert not asked
    queued = list(start)
    for item in pushed:
        if item not in queued:
            queue.push(item)
            queued.append(item)
    assert [queue.pop() for _ in range(len(queued))] == sorted(queued)


@given(st.lists(items, unique=True))
def test_items_put_in_the_order_the_ties_end_on_pop_alike_for_fewer_comparisons(start):
    """With `ties` (the key a session's order ends on: here the name), the pops are
    those of a heap all the same; where the rest of the order ties for every item, the
    items are sorted with one comparison per item, whatever order they came in."""
    asked: list[int] = []

    def less(left: tuple[int, str], right: tuple[int, str]) -> bool:
        asked.append(1)
        return left < right

    queue = PriorityQueue(less, start, ties=lambda item: item[1])
    assert [queue.pop() for _ in range(len(start))] == sorted(start)
    asked.clear()
    tied = [(0, name) for _, name in start]
    random.Random(len(tied)).shuffle(tied)
    PriorityQueue(less, tied, ties=lambda item: item[1])
    assert len(asked) <= max(len(tied) - 1, 0)
