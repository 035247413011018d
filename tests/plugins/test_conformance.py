"""conformance: what keeps the cluster itself running is never a victim: pods in
`kube-system` and pods of the `system-cluster-critical` and `system-node-critical`
priority classes, for preempt and for reclaim alike."""

from __future__ import annotations

import pytest

from tests.builders import node, open_session, pod, priority_class, queue, simulate

CONF = """
actions: "allocate, backfill, preempt"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false},
            {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""
RECLAIM_CONF = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false},
            {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""

CLASSES = [priority_class("high", 1000), priority_class("low", 10)]


def running(name: str, **args) -> dict:
    return pod(name, cpu="1", node_name="n1", **args)


@pytest.mark.parametrize("hook", ["preemptable", "reclaimable"])
def test_system_pods_are_never_offered_as_victims(hook: str):
    session = open_session([
        node("n1", cpu="8"),
        running("app"),
        running("dns", namespace="kube-system"),
        running("agent", priority_class="system-node-critical", priority=10),
        running("ctl", priority_class="system-cluster-critical", priority=10),
        running("other-class", priority_class="system-other", priority=10),
        pod("urgent")], CONF)
    tasks = {t.name: t for job in session.jobs.values() for t in job.tasks.values()}
    candidates = [tasks[name] for name in ("app", "dns", "agent", "ctl", "other-class")]
    victims = getattr(session.plugins["conformance"], hook)(tasks["urgent"], candidates)
    assert [t.name for t in victims] == ["app", "other-class"]


@pytest.mark.parametrize(("namespace", "evicted"), [
    ("default", ["default/low"]), ("kube-system", [])])
def test_preempt_leaves_kube_system_pods_running(namespace: str, evicted: list[str]):
    objects = [*CLASSES, node("n1", cpu="1"),
               running("low", namespace=namespace, priority_class="low"),
               pod("urgent", namespace=namespace, priority_class="high")]
    assert [e["pod"] for e in simulate(objects, CONF)["evictions"]] == evicted


# An empty answer leaves the choice to the next tier (Volcano's rule), where drf and
# proportion offer victims of their own: conformance decides when its tier has others to
# offer. Without it, the victim here would be whichever pod came first.
@pytest.mark.parametrize("first", ["sys", "app"])
def test_reclaim_takes_the_ordinary_pod_and_leaves_the_system_one(first: str):
    system = running("sys", namespace="kube-system", queue="a")
    ordinary = running("app", queue="a")
    pods = [system, ordinary] if first == "sys" else [ordinary, system]
    objects = [node("n1", cpu="2"), queue("a"), queue("b"), *pods, pod("infer", queue="b")]
    evictions = simulate(objects, RECLAIM_CONF)["evictions"]
    assert [e["pod"] for e in evictions] == ["default/app"]
