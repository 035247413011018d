"""Quotas per priority class within a queue, and the classes a queue allows (capacity with
`plugins/priority_quota.py`, seed 000's priorityQuotas)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import (
    CAPACITY_RECLAIM_CONF,
    node,
    pod,
    podgroup,
    priority_class,
    queue,
    simulate,
)
from tests.invariants import run_checked
from vscheduler.conf import parse_conf
from vscheduler.simulate import Simulation

GPU = "nvidia.com/gpu"
QUOTAS = "elastic.gpu/priority-quotas"
CLASSES = "elastic.gpu/priority-classes"
CONF = CAPACITY_RECLAIM_CONF
CLASS_VALUES = {"production": 1000, "high": 100, "normal": 10}


def cluster(annotations: dict[str, str], gpus: int = 8) -> list[dict[str, Any]]:
    return [node("n0", cpu="64", memory="256Gi", **{GPU: str(gpus)}),
            *(priority_class(name, value) for name, value in CLASS_VALUES.items()),
            queue("q", deserved={GPU: str(gpus)}, annotations=annotations)]


def job(name: str, cls: str, pods: int = 1, on: str | None = None) -> list[dict[str, Any]]:
    return [podgroup(name, 1, queue="q", priority_class=cls,
                     phase="Running" if on else None),
            *(pod(f"{name}-{i}", cpu="1", memory="1Gi", group=name, queue="q",
                  priority_class=cls, node_name=on, phase="Running" if on else None,
                  **{GPU: "1"}) for i in range(pods))]


def placed(report: dict[str, Any], prefix: str) -> int:
    return sum(1 for key in {**report["binds"], **report["pipelined"]}
               if key.startswith(f"default/{prefix}-"))


def test_a_class_holds_no_more_than_its_quota_and_the_others_go_on():
    objects = [*cluster({QUOTAS: json.dumps({"high": {GPU: "2"}})}),
               *job("h", "high", 3), *job("n", "normal", 2)]
    report = simulate(objects, CONF)
    assert placed(report, "h") == 2 and placed(report, "n") == 2
    [waiting] = [key for key in report["pending"] if key.startswith("default/h-")]
    assert report["pending"][waiting][0] == (
        f"queue q: priority class high may hold at most nvidia.com/gpu 2 ({QUOTAS})")


def test_what_a_class_already_holds_counts_against_its_quota():
    objects = [*cluster({QUOTAS: json.dumps({"high": {GPU: "3"}})}),
               *job("old", "high", 2, on="n0"), *job("h", "high", 3)]
    assert placed(simulate(objects, CONF), "h") == 1


def test_a_queue_takes_only_the_classes_it_allows():
    objects = [*cluster({CLASSES: "production, high"}), *job("h", "high"),
               *job("n", "normal")]
    report = simulate(objects, CONF)
    assert placed(report, "h") == 1 and placed(report, "n") == 0
    assert report["podGroups"]["default/n"]["phase"] == "Pending"
    reasons = report["pendingJobs"]["default/n"]["reasons"]
    assert any(f"queue q takes jobs of priority classes production, high only, not "
               f"normal ({CLASSES})" in r for r in reasons), reasons


@pytest.mark.parametrize(("key", "raw"), [
    (QUOTAS, "{oops"), (QUOTAS, '{"high": "2"}'), (QUOTAS, '{"high": {"cpu": "x"}}'),
    (QUOTAS, "[" * 3000 + "]" * 3000), (CLASSES, " , ")])
def test_an_unreadable_annotation_is_a_warning_and_ignored(key, raw):
    report = simulate([*cluster({key: raw}), *job("h", "high", 2)], CONF)
    assert placed(report, "h") == 2
    [warning] = [e["message"] for e in report["events"]
                 if e["object"] == "Queue/q" and e["reason"] == "InvalidPriorityQuota"]
    assert warning.startswith(f"{key}: ") and warning.endswith("; ignored")


@st.composite
def class_clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, int]]:
    quotas = {cls: draw(st.integers(0, 4)) for cls in CLASS_VALUES if draw(st.booleans())}
    objects = cluster({QUOTAS: json.dumps({c: {GPU: str(n)} for c, n in quotas.items()})},
                      gpus=draw(st.integers(2, 8)))
    for i in range(draw(st.integers(1, 6))):
        cls = draw(st.sampled_from(sorted(CLASS_VALUES)))
        objects += job(f"j{i}", cls, draw(st.integers(1, 3)))
    return objects, quotas


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(class_clusters())
def test_no_class_ever_holds_more_than_its_quota(case):
    """On generated queues and jobs, with reclaim in the conf: after every session, what
    each class holds (bound, and pipelined onto what evictions release) is within its
    quota."""
    objects, quotas = case
    classes = {o["metadata"]["name"]: o["spec"]["priorityClassName"] for o in objects
               if o["kind"] == "PodGroup"}
    simulation = Simulation(parse_conf(CONF, "test"))
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    for _ in range(3):
        run_checked(simulation, 1)
        held: dict[str, int] = {}
        pipelined = simulation.report.last.pipelined
        for key, task in simulation.cache.tasks.items():
            if task.node_name or key in pipelined:
                cls = classes[task.job_id.split("/")[1]]
                held[cls] = held.get(cls, 0) + 1
        for cls, quota in quotas.items():
            assert held.get(cls, 0) <= quota, (cls, held, quotas)
