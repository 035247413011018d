"""Cases a review found, kept so they stay fixed."""

from __future__ import annotations

from tests.builders import conf, node, pod, podgroup, priority_class, queue, simulate
from tests.invariants import run_checked
from vscheduler.simulate import Simulation

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""


def test_backfill_does_not_complete_a_gang_allocate_left_only_pipelined():
    releasing = pod("x", cpu="2", node_name="n1", scheduler="other")
    releasing["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    worker = {"volcano.sh/task-spec": "worker"}
    objects = [node("n1", cpu="4"), releasing, podgroup("g", 3),
               pod("g-0", cpu="1", group="g"), pod("g-1", cpu="1", group="g"),
               pod("g-2", cpu="2", group="g"),
               pod("g-3", cpu="100", group="g", annotations=worker),
               pod("g-4", cpu=None, memory=None, group="g", annotations=worker)]
    simulation = Simulation(conf(CONF))
    simulation.load([(str(i), o) for i, o in enumerate(objects)])
    run_checked(simulation, 2)
    assert simulation.report.binds == {}


def test_backfill_places_nothing_in_a_closed_queue():
    objects = [node("n1"), queue("shut", state="Closed"),
               podgroup("pg", 1, queue="shut", phase="Inqueue"),
               pod("be", cpu=None, memory=None, group="pg")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}


def test_a_job_of_one_is_taken_in_victim_order():
    preempt = """
actions: "allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false}, {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""
    objects = [priority_class("low", 10), priority_class("mid", 50), priority_class("high", 100),
               node("n1", cpu="3"),
               pod("lone", cpu="1", node_name="n1", priority_class="low"),
               podgroup("el", 1, priority_class="mid", phase="Running"),
               *(pod(f"el-{i}", cpu="1", node_name="n1", group="el", priority_class="mid")
                 for i in range(2)),
               pod("urgent", cpu="1", priority_class="high")]
    report = simulate(objects, preempt)
    assert [e["pod"] for e in report["evictions"]] == ["default/lone"]


def test_an_infinite_card_request_is_refused_not_a_crash():
    card_conf = CONF.replace("{name: nodeorder}", "{name: capacity-card}, {name: nodeorder}")
    group = podgroup("g", 1, annotations={"volcano.sh/card.request": '{"A": 1e308}'})
    report = simulate([node("n1"), group], card_conf)
    assert report["podGroups"]["default/g"]["phase"] == "Pending"
    assert any(e["object"] == "PodGroup/default/g" and e["type"] == "Warning"
               for e in report["events"])
