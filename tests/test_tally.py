"""Tally: sums kept by taking away and adding back parts equal a recount exactly,
scalars at zero and their order included, whatever the order parts come and go in."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vscheduler.resources import Resource
from vscheduler.tally import Tally

NAMES = ("nvidia.com/gpu", "example.com/rdma", "amd.com/gpu", "pods")

amounts = st.builds(
    Resource, st.integers(0, 4000), st.integers(0, 2**34),
    st.dictionaries(st.sampled_from(NAMES), st.integers(0, 3000), max_size=3))
objects = st.tuples(st.sampled_from(("q1", "q2", "q3")), amounts, st.one_of(st.none(), amounts))
# a step: an object (by name) comes, changes, or goes (None)
steps = st.lists(st.tuples(st.sampled_from("abcdefgh"), st.one_of(st.none(), objects)),
                 max_size=40)


def _count(obj: tuple[str, Resource, Resource | None]) -> Any:
    queue, first, second = obj
    return queue, (first, second)


def _exact(tally: Tally) -> Any:
    """The sums as they are: values, and scalars in their order."""
    return {key: [(r.cpu, r.memory, list(r.scalars.items())) for r in sums]
            for key, sums in tally.sums.items()}


@given(steps)
def test_kept_sums_equal_a_recount(steps):
    tally = Tally("jobs", None, 2, _count)
    world: dict[str, Any] = {}
    for name, obj in steps:
        if obj is None:
            world.pop(name, None)
        else:
            world[name] = obj
        tally.update(world, [name])
        fresh = tally.recounted(world)
        assert _exact(tally) == _exact(fresh)
        assert tally.members == fresh.members
        assert tally.parts == fresh.parts


@given(st.lists(steps, max_size=6))
def test_kept_sums_equal_a_recount_when_many_change_at_once(batches):
    """A snapshot's changed jobs come together, some named twice: the sums still
    equal a recount."""
    tally = Tally("jobs", None, 2, _count)
    world: dict[str, Any] = {}
    for batch in batches:
        for name, obj in batch:
            if obj is None:
                world.pop(name, None)
            else:
                world[name] = obj
        tally.update(world, [name for name, _ in batch])
        fresh = tally.recounted(world)
        assert _exact(tally) == _exact(fresh)
        assert tally.members == fresh.members
        assert tally.parts == fresh.parts


def test_a_scalar_named_at_zero_stays_while_a_member_names_it():
    tally = Tally("jobs", None, 1, lambda obj: ("q", (obj,)))
    world = {"a": Resource(1, 0, {"nvidia.com/gpu": 0}), "b": Resource(1, 0, {"x/y": 5})}
    tally.update(world, ["a", "b"])
    assert list(tally.sum("q", 0).scalars.items()) == [("nvidia.com/gpu", 0), ("x/y", 5)]
    del world["b"]
    tally.update(world, ["b"])
    assert tally.sum("q", 0).scalars == {"nvidia.com/gpu": 0}
    del world["a"]
    tally.update(world, ["a"])
    assert not tally.sums and tally.sum("q", 0).is_empty()


def test_a_part_of_the_wrong_width_is_refused_at_once():
    """A plugin whose parts do not match the tally's width fails where it counts, not
    later when the part is taken away."""
    tally = Tally("jobs", None, 2, lambda obj: ("q1", (Resource(1),)))
    with pytest.raises(ValueError, match="a part of 1 amounts in a tally of 2"):
        tally.recount({"a": object()})
    assert not tally.parts and not tally.sums
