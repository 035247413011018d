"""The resource value type (vscheduler/resources.py): Volcano's units, arithmetic and
tolerant comparisons."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vscheduler.quantity import QuantityError
from vscheduler.resources import CPU, MEMORY, MIN_RESOURCE, PODS, Resource, share

GPU = "nvidia.com/gpu"
FPGA = "example.com/fpga"
GiB = 2**30
FAST = settings(max_examples=100, deadline=None)


def res(cpu: float = 0, memory: float = 0, **scalars: float) -> Resource:
    """A resource in Volcano units (milli-CPU, bytes, milli scalars, whole pods);
    `gpu=` is nvidia.com/gpu, `fpga=` example.com/fpga."""
    names = {"gpu": GPU, "fpga": FPGA, "pods": PODS}
    return Resource(cpu, memory, {names.get(k, k): v for k, v in scalars.items()})


# --------------------------------------------------------------------------- from_k8s


def test_from_k8s_units() -> None:
    r = Resource.from_k8s({
        "cpu": "1500m",
        "memory": "2Gi",
        GPU: "2",
        "ephemeral-storage": "1Gi",
        "hugepages-2Mi": "4Mi",
        "pods": "110",
    })
    assert r.cpu == 1500                       # milli-CPU
    assert r.memory == 2 * GiB                 # bytes
    assert r.scalars[GPU] == 2000              # scalars in milli: 1 GPU = 1000
    assert r.scalars["ephemeral-storage"] == GiB * 1000
    assert r.scalars["hugepages-2Mi"] == 4 * 2**20 * 1000
    assert r.scalars[PODS] == 110              # pods counted whole


def test_from_k8s_rounds_up_as_kubernetes() -> None:
    r = Resource.from_k8s({"cpu": "0.0001", "memory": "0.5", GPU: "0.0001", "pods": "0.5"})
    assert (r.cpu, r.memory, r.scalars[GPU], r.scalars[PODS]) == (1, 1, 1, 1)


def test_from_k8s_yaml_numbers() -> None:
    r = Resource.from_k8s({"cpu": 2, "memory": 1024, GPU: 1, "pods": 10})
    assert (r.cpu, r.memory, r.scalars[GPU], r.scalars[PODS]) == (2000, 1024, 1000, 10)
    assert Resource.from_k8s({"cpu": 0.5}).cpu == 500


def test_from_k8s_ignores_quota_names() -> None:
    r = Resource.from_k8s({"cpu": "1", "count/pods": "10", "requests.cpu": "4",
                           "limits.memory": "1Gi"})
    assert r.cpu == 1000
    assert r.scalars == {}
    # ignored names are not even parsed
    assert Resource.from_k8s({"count/pods": "not-a-number"}).scalars == {}


@pytest.mark.parametrize("empty", [None, {}])
def test_from_k8s_empty(empty: dict | None) -> None:
    r = Resource.from_k8s(empty)
    assert (r.cpu, r.memory, r.scalars) == (0, 0, {})


@pytest.mark.parametrize("name", ["cpu", "memory", GPU, "pods"])
def test_from_k8s_refuses_negative(name: str) -> None:
    with pytest.raises(QuantityError) as err:
        Resource.from_k8s({name: "-1"})
    assert name in str(err.value)
    assert "negative" in str(err.value)


def test_from_k8s_names_the_resource_with_a_bad_quantity() -> None:
    with pytest.raises(QuantityError, match="resource memory"):
        Resource.from_k8s({"cpu": "1", "memory": "1Gb"})


def test_from_k8s_refuses_a_list() -> None:
    with pytest.raises(QuantityError):
        Resource.from_k8s(["cpu", "1"])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- to_k8s


def test_to_k8s_shortest_forms_sorted_zero_left_out() -> None:
    r = Resource.from_k8s({"cpu": "1.5", "memory": "4096Mi", GPU: "2", "pods": "110",
                           FPGA: "0"})
    assert r.to_k8s() == {"cpu": "1500m", "memory": "4Gi", GPU: "2", "pods": "110"}
    assert FPGA not in r.to_k8s()
    assert list(r.to_k8s()) == ["cpu", "memory", GPU, "pods"]


def test_to_k8s_leaves_out_infinite() -> None:
    assert Resource(float("inf"), float("inf")).to_k8s() == {}


@pytest.mark.parametrize(
    "k8s",
    [
        {"cpu": "1", "memory": "1Gi", "pods": "1"},
        {"cpu": "250m", "memory": "1000", GPU: "8", FPGA: "500m"},
        {"memory": "3Mi"},
        {},
    ],
)
def test_to_k8s_round_trip(k8s: dict[str, str]) -> None:
    assert Resource.from_k8s(k8s).to_k8s() == k8s


# --------------------------------------------------------------------------- reading


def test_get_set_names_and_is_empty() -> None:
    r = res(1000, 0, gpu=0.05, pods=1)
    assert r.get(CPU) == 1000
    assert r.get(MEMORY) == 0
    assert r.get(GPU) == 0.05
    assert r.get("missing") == 0
    assert r.names() == [CPU, PODS]            # dimensions >= 0.1, pods included
    r.set(MEMORY, 5)
    r.set(FPGA, 2)
    assert r.names() == [CPU, MEMORY, PODS, FPGA]
    assert res(pods=1).is_empty()              # pods alone is a best-effort request
    assert res(0.05, 0.05, gpu=0.05).is_empty()
    assert not res(gpu=1).is_empty()
    assert not res(memory=1).is_empty()


# --------------------------------------------------------------------------- arithmetic


def test_add_sub_in_place_and_chain() -> None:
    a = res(1000, 10, gpu=1000)
    b = res(500, 5, fpga=2000)
    assert a.add(b) is a
    assert (a.cpu, a.memory, a.scalars) == (1500, 15, {GPU: 1000, FPGA: 2000})
    assert a.sub(b).sub(b) is a
    assert (a.cpu, a.memory, a.scalars) == (500, 5, {GPU: 1000, FPGA: -2000})  # may go < 0
    assert b.scalars == {FPGA: 2000}                                          # untouched


def test_operators_do_not_mutate() -> None:
    a, b = res(1000, 10, gpu=1), res(1, 1, gpu=1)
    c = a + b
    d = a - b
    assert (a.cpu, a.memory, a.scalars) == (1000, 10, {GPU: 1})
    assert (c.cpu, c.memory, c.scalars) == (1001, 11, {GPU: 2})
    assert (d.cpu, d.memory, d.scalars) == (999, 9, {GPU: 0})


def test_clone_is_deep() -> None:
    a = res(1, 2, gpu=3)
    b = a.clone()
    b.scalars[GPU] = 10
    b.cpu = 7
    assert a.scalars[GPU] == 3
    assert a.cpu == 1


def test_multiply_and_set_max() -> None:
    a = res(1000, 10, gpu=2000).multiply(0.5)
    assert (a.cpu, a.memory, a.scalars) == (500, 5, {GPU: 1000})
    m = res(100, 50, gpu=1).set_max(res(10, 60, gpu=5, fpga=3))
    assert (m.cpu, m.memory, m.scalars) == (100, 60, {GPU: 5, FPGA: 3})


def test_share() -> None:
    assert share(1, 4) == 0.25
    assert share(0, 0) == 0
    assert share(3, 0) == 1


# --------------------------------------------------------------------------- comparing


def test_equal_is_tolerant() -> None:
    assert res(1000, 10) == res(1000.05, 10.09)
    assert res(1000, 10) != res(1000.2, 10)
    assert res(gpu=0) == res()                    # missing scalar is zero
    assert res(gpu=0.05) == res()
    assert res(gpu=1) != res()
    assert res() != "cpu=0"


def test_resource_is_not_hashable() -> None:
    with pytest.raises(TypeError):
        hash(res(1))


def test_less_equal_tolerance() -> None:
    assert res(1000.05).less_equal(res(1000))      # within 0.1
    assert res(1000.09, 0, gpu=1000.09).less_equal(res(1000, 0, gpu=1000))
    assert not res(1000.2).less_equal(res(1000))
    assert not res(0, 1.5).less_equal(res(0, 1))
    assert not res(0, 0, gpu=1000.2).less_equal(res(0, 0, gpu=1000))


def test_less_equal_missing_scalar_zero_or_infinite() -> None:
    request = res(1000, GiB, gpu=1000)
    node = res(8000, 16 * GiB)                     # no GPUs at all
    assert not request.less_equal(node)
    assert request.less_equal(node, missing_infinite=True)  # e.g. a queue with no GPU limit
    # a scalar only the other side has is irrelevant
    assert res(1000).less_equal(res(1000, 0, gpu=0))
    assert res(1000).less_equal(res(1000, 0, gpu=8000), missing_infinite=True)
    # a near-zero scalar is not asked for
    assert res(0, 0, gpu=0.05).less_equal(res())
    # cpu and memory are always present: infinite mode does not excuse them
    assert not res(2000).less_equal(res(1000), missing_infinite=True)


def test_unlimited_holds_any_request() -> None:
    assert res(10**9, 2**50, gpu=10**6).less_equal(Resource(float("inf"), float("inf")),
                                                   missing_infinite=True)


def test_first_insufficient() -> None:
    idle = res(2000, 4 * GiB, gpu=1000, pods=10)
    assert res(1000, GiB, gpu=1000, pods=1).first_insufficient(idle) is None
    assert res(3000, 8 * GiB).first_insufficient(idle) == CPU   # cpu reported first
    assert res(1000, 8 * GiB).first_insufficient(idle) == MEMORY
    assert res(1000, GiB, gpu=2000).first_insufficient(idle) == GPU
    assert res(0, 0, fpga=1000).first_insufficient(idle) == FPGA  # missing counts as zero
    assert res(0, 0, fpga=0.05).first_insufficient(idle) is None
    assert res(2000.05).first_insufficient(idle) is None           # tolerance
    assert res(0, 0, pods=11).first_insufficient(idle) == PODS


def test_insufficient_lists_every_short_dimension() -> None:
    idle = res(1000, GiB)
    asked = res(2000, 2 * GiB, gpu=1000)
    assert asked.insufficient(idle) == [CPU, MEMORY, GPU]
    assert asked.insufficient(idle, only=[MEMORY]) == [MEMORY]
    assert res(500).insufficient(idle) == []


def test_exceeds_on_requested_strict_and_only_requested_dimensions() -> None:
    limit = res(4000, 8 * GiB, gpu=2000)
    # usage after the job is added, and what the job asks for
    assert res(4000, 8 * GiB, gpu=2000).exceeds_on_requested(limit, res(1, 1, gpu=1)) == []
    # strict: even 0.05 above is over (no tolerance here)
    assert res(4000.05).exceeds_on_requested(limit, res(1000)) == [CPU]
    over = res(5000, 9 * GiB, gpu=3000)
    assert over.exceeds_on_requested(limit, res(1000, 1, gpu=1000)) == [CPU, MEMORY, GPU]
    # dimensions the request does not ask for are not checked
    assert over.exceeds_on_requested(limit, res(0, 0, gpu=1000)) == [GPU]
    assert over.exceeds_on_requested(limit, res(1000)) == [CPU]
    assert over.exceeds_on_requested(limit, res()) == []


def test_exceeds_on_requested_missing_limit_scalar_is_unlimited_pods_ignored() -> None:
    limit = res(4000, 8 * GiB)                       # no GPU limit, no pods limit
    usage = res(1000, GiB, gpu=64000, pods=500)
    assert usage.exceeds_on_requested(limit, res(1000, GiB, gpu=8000, pods=1)) == []
    # pods is ignored even when the limit names it
    limited = res(4000, 8 * GiB, pods=10)
    assert usage.exceeds_on_requested(limited, res(0, 0, pods=1)) == []
    # a scalar in the limit that usage lacks is zero used
    assert res(1000).exceeds_on_requested(res(4000, 0, gpu=0), res(1000, 0, gpu=1)) == []


def test_min_dimension() -> None:
    a = res(4000, 8, gpu=4000, fpga=5)
    other = res(2000, 16, gpu=1000, x=7)
    zero = a.clone().min_dimension(other, missing_infinite=False)
    assert (zero.cpu, zero.memory, zero.scalars) == (2000, 8, {GPU: 1000, FPGA: 0})
    kept = a.clone().min_dimension(other, missing_infinite=True)
    assert (kept.cpu, kept.memory, kept.scalars) == (2000, 8, {GPU: 1000, FPGA: 5})
    # in place, returns self
    assert a.min_dimension(other, True) is a


def test_exceeded_part() -> None:
    a = res(3000, 10, gpu=2000, fpga=1)
    b = res(1000, 20, gpu=3000)
    part = a.exceeded_part(b)
    assert (part.cpu, part.memory, part.scalars) == (2000, 0, {FPGA: 1})
    assert (a.cpu, a.memory, a.scalars) == (3000, 10, {GPU: 2000, FPGA: 1})  # untouched
    assert part is not a


# --------------------------------------------------------------------------- properties

amounts = st.integers(min_value=0, max_value=10**7)
scalar_names = st.sampled_from([GPU, FPGA, PODS, "ephemeral-storage"])
resources = st.builds(
    Resource,
    amounts,
    st.integers(min_value=0, max_value=2**40),
    st.dictionaries(scalar_names, amounts, max_size=3),
)
float_resources = st.builds(
    Resource,
    st.floats(min_value=0, max_value=1e7),
    st.floats(min_value=0, max_value=1e12),
    st.dictionaries(scalar_names, st.floats(min_value=0, max_value=1e7), max_size=3),
)


@FAST
@given(resources, resources)
def test_add_then_sub_gives_back(a: Resource, b: Resource) -> None:
    assert (a + b) - b == a
    before = a.clone()
    assert a.add(b).sub(b) == before


@FAST
@given(float_resources)
def test_less_equal_is_reflexive(a: Resource) -> None:
    assert a.less_equal(a)
    assert a.less_equal(a, missing_infinite=True)
    assert a.first_insufficient(a) is None


@FAST
@given(resources, resources, resources)
def test_less_equal_is_transitive_on_integers(a: Resource, b: Resource, c: Resource) -> None:
    if a.less_equal(b) and b.less_equal(c):
        assert a.less_equal(c)
    # Where a scalar missing on the right counts as unlimited, transitivity holds among
    # resources that list the same scalars (a limit that lists a resource is finite on
    # it, one that does not is not: {gpu: 1} <= {} <= {gpu: 0}, yet not {gpu: 1} <= {gpu: 0}).
    if set(a.scalars) == set(b.scalars) == set(c.scalars) and a.less_equal(
            b, True) and b.less_equal(c, True):
        assert a.less_equal(c, True)


@FAST
@given(resources, resources)
def test_adding_never_makes_smaller(a: Resource, b: Resource) -> None:
    assert a.less_equal(a + b)


@FAST
@given(float_resources, float_resources)
def test_first_insufficient_agrees_with_less_equal(a: Resource, b: Resource) -> None:
    assert (a.first_insufficient(b) is None) == a.less_equal(b)
    assert (a.insufficient(b) == []) == a.less_equal(b)


@FAST
@given(resources, resources)
def test_exceeded_part_is_what_does_not_fit(a: Resource, b: Resource) -> None:
    part = a.exceeded_part(b)
    assert part.cpu >= 0 and part.memory >= 0
    assert all(v > 0 for v in part.scalars.values())
    assert a.less_equal(b + part)
    if a.less_equal(b):
        assert part == Resource()


@FAST
@given(resources, resources)
def test_min_dimension_fits_in_both(a: Resource, b: Resource) -> None:
    m = a.clone().min_dimension(b, missing_infinite=False)
    assert m.less_equal(a)
    assert m.less_equal(b)
    m_inf = a.clone().min_dimension(b, missing_infinite=True)
    assert m_inf.less_equal(a)
    assert m_inf.less_equal(b, missing_infinite=True)


@FAST
@given(resources)
def test_to_k8s_round_trip_property(a: Resource) -> None:
    assert Resource.from_k8s(a.to_k8s()) == a


@FAST
@given(resources, resources)
def test_exceeds_on_requested_is_empty_within_the_limit(a: Resource, b: Resource) -> None:
    request = a.clone()
    if a.less_equal(b):
        # integer amounts: tolerant <= is plain <=, so strictly-above can not happen
        assert a.exceeds_on_requested(b, request) == []


def test_min_resource_is_volcanos() -> None:
    assert MIN_RESOURCE == 0.1
