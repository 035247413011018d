"""backfill: best-effort pods go where predicates allow, within pod slots."""

from __future__ import annotations

from tests.builders import conf, node, pod, podgroup, queue, simulate
from tests.invariants import run_checked
from vscheduler.simulate import Simulation

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
"""
WITH_PREDICATES = CONF + "- plugins: [{name: predicates}, {name: nodeorder}]\n"


def best_effort(name: str, **args) -> dict:
    return pod(name, cpu=None, memory=None, **args)


def test_backfill_places_best_effort_pods_allocate_left():
    objects = [node("n1"), best_effort("be"), pod("sized", cpu="1")]
    report = simulate(objects, CONF.replace("enqueue, allocate, backfill",
                                            "enqueue, backfill"))
    assert report["binds"] == {"default/be": "n1"}
    assert "default/sized" in report["pending"]


def test_allocate_places_best_effort_pods_with_their_job():
    objects = [node("n1"), podgroup("g", 2), pod("g-0", cpu="1", group="g"),
               best_effort("g-1", group="g")]
    report = simulate(objects, CONF.replace(", backfill", ""))
    assert sorted(report["binds"]) == ["default/g-0", "default/g-1"]


def test_best_effort_pods_respect_pod_slots():
    objects = [node("n1", pods="2"), *(best_effort(f"be-{i}") for i in range(3))]
    report = simulate(objects, CONF)
    assert len(report["binds"]) == 2
    [(_, reasons)] = report["pending"].items()
    assert reasons == ["0/1 nodes are available: 1 Too many pods."]


def test_best_effort_members_count_toward_a_gang():
    objects = [node("n1", cpu="1"), podgroup("g", 2), pod("g-0", cpu="1", group="g"),
               best_effort("g-1", group="g")]
    report = simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/g-0", "default/g-1"]


def test_gang_of_best_effort_pods_is_placed_whole_or_not_at_all():
    objects = [node("n1", pods="2"), podgroup("g", 3),
               *(best_effort(f"g-{i}", group="g") for i in range(3))]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert len(report["pending"]) == 3


def test_backfill_does_not_complete_a_gang_allocate_left_only_pipelined():
    releasing = pod("x", cpu="2", node_name="n1", scheduler="other")
    releasing["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    worker = {"volcano.sh/task-spec": "worker"}
    objects = [node("n1", cpu="4"), releasing, podgroup("g", 3),
               pod("g-0", cpu="1", group="g"), pod("g-1", cpu="1", group="g"),
               pod("g-2", cpu="2", group="g"),
               pod("g-3", cpu="100", group="g", annotations=worker),
               pod("g-4", cpu=None, memory=None, group="g", annotations=worker)]
    simulation = Simulation(conf(WITH_PREDICATES))
    simulation.load([(str(i), o) for i, o in enumerate(objects)])
    run_checked(simulation, 2)
    assert simulation.report.binds == {}


def test_backfill_places_nothing_in_a_closed_queue():
    objects = [node("n1"), queue("shut", state="Closed"),
               podgroup("pg", 1, queue="shut", phase="Inqueue"),
               best_effort("be", group="pg")]
    report = simulate(objects, WITH_PREDICATES)
    assert report["binds"] == {}
