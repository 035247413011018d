"""backfill: best-effort pods go where predicates allow, within pod slots."""

from __future__ import annotations

from tests.builders import node, pod, podgroup, simulate

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
"""


def best_effort(name: str, **args) -> dict:
    return pod(name, cpu=None, memory=None, **args)


def test_best_effort_pods_are_placed_by_backfill_not_allocate():
    report = simulate([node("n1"), best_effort("be")], CONF)
    assert report["binds"] == {"default/be": "n1"}
    no_backfill = CONF.replace(", backfill", "")
    report = simulate([node("n1"), best_effort("be")], no_backfill)
    assert report["binds"] == {}
    assert "default/be" in report["pending"]


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
