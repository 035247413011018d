"""Borrowing and lending between queues with limits (capacity with `plugins/borrowing.py`,
seed 000): a queue borrows idle deserved resources from the lenders it names, within its
limit; a lender's returning jobs take back what was lent first; the protected part of a
queue is never reclaimed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import CAPACITY_RECLAIM_CONF, node, pod, queue, simulate
from tests.invariants import run_checked
from vscheduler.conf import parse_conf
from vscheduler.model import TaskStatus
from vscheduler.plugins.borrowing import Lending, read_terms
from vscheduler.simulate import Simulation

GPU = "nvidia.com/gpu"
CONF = CAPACITY_RECLAIM_CONF


def gpus(n: int | str) -> dict[str, str]:
    return {GPU: str(n)}


def lending_queue(name: str, deserved: int, **terms: Any) -> dict[str, Any]:
    """A queue deserving `deserved` GPUs, with borrowing annotations (`borrow_from`,
    `max_borrow`, `lending_limit`, `protected`, `borrowed_preemption`)."""
    annotations = {}
    for key, value in terms.items():
        name_ = "elastic.gpu/" + key.replace("_", "-")
        annotations[name_] = value if isinstance(value, str) else json.dumps(value)
    return queue(name, deserved={"cpu": "64", "memory": "256Gi", GPU: str(deserved)},
                 annotations=annotations)


def gpu_nodes(count: int, each: int = 4) -> list[dict[str, Any]]:
    return [node(f"n{i}", cpu="64", memory="256Gi", **gpus(each)) for i in range(count)]


def pods(prefix: str, queue_name: str, count: int, on: str | None = None
         ) -> list[dict[str, Any]]:
    return [pod(f"{prefix}-{i}", cpu="1", memory="1Gi", queue=queue_name, node_name=on,
                phase="Running" if on else None, **gpus(1)) for i in range(count)]


def placed(report: dict[str, Any], prefix: str) -> int:
    return sum(1 for key in {**report["binds"], **report["pipelined"]}
               if key.startswith(f"default/{prefix}-"))


def test_a_queue_borrows_from_its_lender_up_to_its_limit():
    """c deserves nothing and may borrow 3 GPUs from a, which deserves 4 and uses none:
    three of its five pods run; the others wait, told of the limit."""
    objects = [*gpu_nodes(2), lending_queue("a", 4), lending_queue("b", 2),
               lending_queue("c", 0, borrow_from="a", max_borrow=gpus(3)),
               *pods("c", "c", 5)]
    report = simulate(objects, CONF)
    assert placed(report, "c") == 3
    waiting = [r for key, reasons in report["pending"].items() for r in reasons]
    assert any("may borrow at most nvidia.com/gpu 3" in r for r in waiting), waiting


def test_a_queue_never_borrows_from_a_queue_it_does_not_name():
    """a lends at most 1 GPU (its lending limit keeps the rest for its own jobs); b has 2
    unused but c does not name it: c runs one pod."""
    objects = [*gpu_nodes(2), lending_queue("a", 4, lending_limit=gpus(1)),
               lending_queue("b", 2), lending_queue("c", 0, borrow_from="a"),
               *pods("c", "c", 4)]
    report = simulate(objects, CONF)
    assert placed(report, "c") == 1
    waiting = [r for reasons in report["pending"].values() for r in reasons]
    assert any("its lenders (a) have none of it unused" in r for r in waiting), waiting


def test_without_terms_a_queue_takes_any_idle_resources_as_capacity_does():
    objects = [*gpu_nodes(2), lending_queue("a", 4), lending_queue("c", 0),
               *pods("c", "c", 5)]
    assert placed(simulate(objects, CONF), "c") == 5


@pytest.mark.parametrize(("protected", "from_c", "from_d"), [(None, 3, 1), (gpus(2), 2, 1)])
def test_the_lender_takes_back_what_it_lent_first_and_never_the_protected_part(
        protected, from_c, from_d):
    """c (deserves 1) runs 4 GPUs, 3 of them lent by a; d (deserves 3) runs 4, one
    beyond its share, lent by nobody. Both spread over the two nodes. a's four pods
    arrive: reclaim takes c's borrowed pods (on each node before d's), then d's extra
    one; with c's protected part at 2 GPUs, c gives only 2 and a gets one pod less."""
    terms: dict[str, Any] = {"borrow_from": "a"}
    if protected:
        terms["protected"] = protected
    objects = [*gpu_nodes(2), lending_queue("a", 4), lending_queue("c", 1, **terms),
               lending_queue("d", 3),
               *[p for i in range(2) for p in pods(f"c{i}", "c", 2, on=f"n{i}")],
               *[p for i in range(2) for p in pods(f"d{i}", "d", 2, on=f"n{i}")],
               *pods("a", "a", 4)]
    report = simulate(objects, CONF)
    victims = [e["queue"] for e in report["evictions"]]
    assert victims.count("c") == from_c
    assert victims.count("d") == from_d
    for name in ("n0", "n1"):  # on a node, the borrowed go first
        here = [e["queue"] for e in report["evictions"] if e["node"] == name]
        assert here == sorted(here)
    assert placed(report, "a") == from_c + from_d


def test_borrowed_for_good_is_not_taken_back_by_its_lender():
    objects = [*gpu_nodes(1), lending_queue("a", 4),
               lending_queue("c", 0, borrow_from="a", borrowed_preemption="false"),
               *pods("c", "c", 4, on="n0"), *pods("a", "a", 2)]
    report = simulate(objects, CONF)
    assert report["evictions"] == []


@pytest.mark.parametrize(("key", "raw"), [
    ("max-borrow", "{not json"), ("max-borrow", '["gpu"]'), ("protected", '{"cpu": "lots"}'),
    ("borrowed-preemption", "maybe"), ("borrow-from", " , "),
    ("lending-limit", "[" * 5000 + "]" * 5000)])
def test_an_unreadable_annotation_is_a_warning_and_ignored(key, raw):
    objects = [*gpu_nodes(1), queue("a", deserved=gpus(4)),
               queue("c", annotations={f"elastic.gpu/{key}": raw}), *pods("c", "c", 2)]
    report = simulate(objects, CONF)
    assert placed(report, "c") == 2
    [warning] = [e["message"] for e in report["events"]
                 if e["object"] == "Queue/c" and e["reason"] == "InvalidBorrowing"]
    assert warning.startswith(f"elastic.gpu/{key}: ") and warning.endswith("; ignored")


def test_a_lender_that_does_not_exist_or_is_the_queue_itself_is_a_warning():
    """`borrow-from: "a, ghost, c"` on c: a lends, ghost (no such queue) and c itself do
    not, and each is named in a Warning; c still borrows from a."""
    objects = [*gpu_nodes(1), lending_queue("a", 4),
               lending_queue("c", 0, borrow_from="a, ghost, c", max_borrow=gpus(2)),
               *pods("c", "c", 3)]
    report = simulate(objects, CONF)
    assert placed(report, "c") == 2
    warnings = sorted(e["message"] for e in report["events"]
                      if e["object"] == "Queue/c" and e["reason"] == "InvalidBorrowing")
    assert warnings == [
        "elastic.gpu/borrow-from: names queue ghost, which does not exist; it lends nothing",
        "elastic.gpu/borrow-from: names the queue itself; it lends nothing"]


# --------------------------------------------------------------------------- the ledger


@st.composite
def borrowing_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = ["a", "b", "c", "d"]
    objects: list[dict[str, Any]] = list(gpu_nodes(draw(st.integers(1, 3))))
    for name in names:
        terms: dict[str, Any] = {}
        lenders = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
        if lenders:
            terms["borrow_from"] = ",".join(lenders)
        for key in ("max_borrow", "lending_limit", "protected"):
            if draw(st.booleans()):
                terms[key] = gpus(draw(st.integers(0, 4)))
        objects.append(lending_queue(name, draw(st.integers(0, 4)), **terms))
        objects += pods(f"{name}-run", name, draw(st.integers(0, 3)))
        objects += pods(f"{name}-new", name, draw(st.integers(0, 3)))
    return objects


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(borrowing_clusters())
def test_no_queue_holds_more_than_its_limits_allow_and_none_falls_below_protected(objects):
    """On generated clusters, after each session: a queue that limits its borrowing
    holds no more GPUs beyond its deserved amount than its max-borrow; reclaim never
    took a queue below its protected part."""
    simulation = Simulation(parse_conf(CONF, "test"))
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    queues = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Queue"}
    for _ in range(3):
        before = _held(simulation)
        evictions = len(simulation.report.evictions)
        run_checked(simulation, 1)
        after = _held(simulation, simulation.report.last.pipelined)
        for name, obj in queues.items():
            annotations = obj["metadata"]["annotations"]
            deserved = int(obj["spec"]["deserved"][GPU])
            if "elastic.gpu/max-borrow" in annotations:
                limit = json.loads(annotations["elastic.gpu/max-borrow"])[GPU]
                # (what it held before this session may have been admitted under
                # other terms: only what grew is bound by them)
                assert after[name] <= max(deserved + int(limit), before[name])
            if "elastic.gpu/protected" in annotations:
                protected = int(json.loads(annotations["elastic.gpu/protected"])[GPU])
                evicted = sum(1 for e in simulation.report.evictions[evictions:]
                              if e.queue == name)
                assert evicted == 0 or after[name] >= min(protected, before[name])


def _held(simulation: Simulation, pipelined: Any = ()) -> dict[str, int]:
    """GPUs each queue's placed pods hold, those being evicted left out, and those
    `pipelined` onto what they release counted in."""
    cache = simulation.cache
    held: dict[str, int] = {}
    for key, task in cache.tasks.items():
        if (task.node_name and not task.status & TaskStatus.RELEASING) or key in pipelined:
            job = cache.jobs.get(task.job_id)
            if job is not None:
                held[job.queue] = held.get(job.queue, 0) + int(
                    task.resreq.scalars.get(GPU, 0) // 1000)
    return {name: held.get(name, 0) for name in ("a", "b", "c", "d")}


def test_the_ledger_lends_in_the_borrowers_order_and_gives_back_from_the_last():
    from vscheduler.model import Queue
    from vscheduler.resources import Resource

    class Figures:
        def __init__(self, name: str, deserved: int, allocated: int) -> None:
            self.name = name
            self.deserved = Resource.from_k8s(gpus(deserved))
            self.allocated = Resource.from_k8s(gpus(allocated))

    terms = {"c": read_terms(Queue("c", annotations={
        "elastic.gpu/borrow-from": "a,b"}))[0]}
    terms["a"] = read_terms(Queue("a", annotations={
        "elastic.gpu/lending-limit": json.dumps(gpus(2))}))[0]
    figures = {"a": Figures("a", 4, 1), "b": Figures("b", 3, 0), "c": Figures("c", 0, 4)}
    lending = Lending(terms, figures)
    # c holds 4 beyond its share: a lends 2 (its limit), b the other 2
    assert lending.borrowed["c"]["a"].scalars[GPU] == 2000
    assert lending.borrowed["c"]["b"].scalars[GPU] == 2000
    assert lending.unused("b").scalars.get(GPU, 0) == 1000
    lending.give_back("c", Resource.from_k8s(gpus(3)))
    assert lending.borrowed["c"]["b"].scalars.get(GPU, 0) == 0
    assert lending.borrowed["c"]["a"].scalars[GPU] == 1000


def test_a_capability_lowered_under_running_pods_is_said_and_what_is_over_goes_first():
    """c's capability drops to 2 GPUs while it runs 4 (two older, two newer pods): a
    Warning says so and nothing is evicted for it alone; when a needs GPUs, reclaim takes
    c's newest pods, and only as many as a needs."""
    running = [pod(f"c-{i}", cpu="1", memory="1Gi", queue="c", node_name="n0",
                   phase="Running", creation=f"2026-01-01T00:0{i}:00Z", **gpus(1))
               for i in range(4)]
    c = queue("c", deserved=gpus(1), capability={"cpu": "64", "memory": "256Gi", GPU: "2"})
    alone = simulate([*gpu_nodes(1), c, lending_queue("a", 3), *running], CONF)
    [warning] = [e["message"] for e in alone["events"]
                 if e["object"] == "Queue/c" and e["reason"] == "OverCapability"]
    assert warning.startswith("queue c holds more than its real capability: "
                              "nvidia.com/gpu 4 > 2")
    assert alone["evictions"] == []
    wanted = simulate([*gpu_nodes(1), c, lending_queue("a", 3), *running,
                       *pods("a", "a", 2)], CONF)
    assert [e["pod"] for e in wanted["evictions"]] == ["default/c-3", "default/c-2"]


@pytest.mark.parametrize("c_first", [True, False])
def test_a_queue_over_its_capability_gives_before_one_that_is_only_over_its_share(c_first):
    """c (capability 2) runs 3, d (no capability) runs 3 beyond its share of 1; a needs
    one GPU: it is c's, whichever queue's pods are older."""
    c = queue("c", deserved=gpus(1), capability={"cpu": "64", "memory": "256Gi", GPU: "2"})
    d = queue("d", deserved=gpus(1))
    c_start, d_start = (0, 5) if c_first else (5, 0)
    objects = [*gpu_nodes(1, each=6), c, d, lending_queue("a", 4), *pods("a", "a", 1)]
    for name, start in (("c", c_start), ("d", d_start)):
        objects += [pod(f"{name}-{i}", cpu="1", memory="1Gi", queue=name, node_name="n0",
                        phase="Running", creation=f"2026-01-01T00:0{start + i}:00Z",
                        **gpus(1)) for i in range(3)]
    report = simulate(objects, CONF)
    assert [e["queue"] for e in report["evictions"]] == ["c"]


def test_a_borrowed_gang_is_taken_back_whole():
    """c's gang of two (minMember 2) runs on GPUs lent by a; a's pod needs one GPU back:
    the gang goes whole (breaking it would leave one pod holding a GPU for nothing),
    and d's pods, lent by nobody, stay."""
    from tests.builders import podgroup

    objects = [*gpu_nodes(1), lending_queue("a", 2), lending_queue("c", 0, borrow_from="a"),
               lending_queue("d", 2), podgroup("g", 2, queue="c", phase="Running"),
               *[pod(f"g-{i}", cpu="1", memory="1Gi", group="g", queue="c", node_name="n0",
                     phase="Running", **gpus(1)) for i in range(2)],
               *pods("d", "d", 2, on="n0"), *pods("a", "a", 1)]
    report = simulate(objects, CONF)
    assert sorted(e["pod"] for e in report["evictions"]) == ["default/g-0", "default/g-1"]
    assert placed(report, "a") == 1
