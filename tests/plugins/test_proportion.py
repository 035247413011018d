"""proportion: deserved shares by weight, capability, guarantee; the verdicts they give."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import vscheduler.plugins.proportion as proportion_module
from tests.builders import (
    conf,
    gang,
    load_cache,
    node,
    open_session,
    pod,
    podgroup,
    queue,
    simulate,
)
from vscheduler.framework.session import Session
from vscheduler.hookspecs import PERMIT, Reject
from vscheduler.model import TaskStatus
from vscheduler.plugins.proportion import ProportionPlugin, WeightedQueueFigures
from vscheduler.plugins.queue_quota import room_refusal
from vscheduler.quota import quota_exceeded
from vscheduler.resources import Resource

GI = 1024 ** 3

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: proportion}]
"""


def open_with(objects: list[dict], conf_text: str = CONF) -> Session:
    """A session opened on the objects with `conf_text` (no action run yet)."""
    return open_session(objects, conf_text)


def plugin_of(session: Session) -> ProportionPlugin:
    return session.plugins["proportion"]


def attrs_of(session: Session) -> dict[str, WeightedQueueFigures]:
    return plugin_of(session).queue_figures


def bound_in(report: dict, prefix: str) -> int:
    return sum(1 for key in report["binds"] if key.startswith(f"default/{prefix}-"))


# --------------------------------------------------------------------------- deserved


def test_weights_one_to_three_share_a_full_cluster_one_to_three():
    objects = [node("n1", cpu="4", memory="16Gi"), queue("q1", 1), queue("q3", 3),
               *gang("a", 8, 1, queue="q1"), *gang("b", 8, 1, queue="q3")]
    attrs = attrs_of(open_with(objects))
    assert attrs["q1"].deserved.cpu == pytest.approx(1000)
    assert attrs["q3"].deserved.cpu == pytest.approx(3000)
    # Memory is plentiful: each queue deserves what it asks (8 pods x 1Gi), no more.
    assert attrs["q1"].deserved.memory == pytest.approx(8 * GI)
    assert attrs["q3"].deserved.memory == pytest.approx(8 * GI)

    report = simulate(objects, CONF)
    assert bound_in(report, "a") == 1
    assert bound_in(report, "b") == 3
    assert report["queues"]["q1"]["allocated"]["cpu"] == "1"
    assert report["queues"]["q3"]["allocated"]["cpu"] == "3"
    reasons = report["pending"]["default/a-1"]
    assert "queue q1: insufficient cpu (allocated + request 2 > deserved 1)" in reasons


def test_a_queue_that_asks_little_leaves_the_rest_to_the_others():
    objects = [node("n1", cpu="6"), queue("small", 1), queue("big", 1),
               *gang("s", 1, 1, queue="small"), *gang("b", 8, 1, queue="big")]
    attrs = attrs_of(open_with(objects))
    assert attrs["small"].deserved.cpu == pytest.approx(1000)
    assert attrs["big"].deserved.cpu == pytest.approx(5000)
    report = simulate(objects, CONF)
    assert bound_in(report, "s") == 1
    assert bound_in(report, "b") == 5


def test_a_queue_without_jobs_takes_no_share():
    objects = [node("n1", cpu="4"), queue("idle", 5), queue("busy", 1),
               *gang("b", 4, 1, queue="busy")]
    attrs = attrs_of(open_with(objects))
    assert "idle" not in attrs
    assert attrs["busy"].deserved.cpu == pytest.approx(4000)
    assert bound_in(simulate(objects, CONF), "b") == 4


def test_capability_caps_deserved_and_allocation():
    objects = [node("n1", cpu="8"), queue("q1", capability={"cpu": "2"}),
               *gang("a", 4, 1, queue="q1")]
    attr = attrs_of(open_with(objects))["q1"]
    assert attr.real_capability.cpu == pytest.approx(2000)
    assert attr.deserved.cpu == pytest.approx(2000)
    report = simulate(objects, CONF, sessions=2)
    assert bound_in(report, "a") == 2
    assert any("queue q1: insufficient cpu" in r for r in report["pending"]["default/a-2"])


def test_capability_without_cpu_or_memory_leaves_them_unlimited():
    objects = [node("n1", cpu="8", **{"nvidia.com/gpu": "4"}),
               queue("q1", capability={"nvidia.com/gpu": "1"}), *gang("a", 4, 1, queue="q1")]
    attr = attrs_of(open_with(objects))["q1"]
    assert attr.capability is not None and math.isinf(attr.capability.cpu)
    assert attr.real_capability.cpu == pytest.approx(8000)
    assert attr.real_capability.scalars["nvidia.com/gpu"] == pytest.approx(1000)
    assert bound_in(simulate(objects, CONF), "a") == 4


def test_guarantee_is_deserved_even_against_weight():
    objects = [node("n1", cpu="4"), queue("g", 1, guarantee={"cpu": "3"}), queue("o", 1),
               *gang("a", 8, 1, queue="g"), *gang("b", 8, 1, queue="o")]
    attrs = attrs_of(open_with(objects))
    # The other queue can never get what `g` is guaranteed.
    assert attrs["o"].real_capability.cpu == pytest.approx(1000)
    assert attrs["g"].real_capability.cpu == pytest.approx(4000)
    assert attrs["g"].deserved.cpu == pytest.approx(3000)
    assert attrs["o"].deserved.cpu == pytest.approx(1000)
    report = simulate(objects, CONF)
    assert bound_in(report, "a") == 3
    assert bound_in(report, "b") == 1


def test_cluster_below_the_guarantees_does_not_crash():
    objects = [node("n1", cpu="2"), queue("q1", guarantee={"cpu": "10"}),
               queue("q2", guarantee={"cpu": "10", "nvidia.com/gpu": "4"}),
               *gang("a", 2, 1, queue="q1"), *gang("b", 2, 1, queue="q2")]
    attrs = attrs_of(open_with(objects))
    for attr in attrs.values():
        assert attr.real_capability.cpu >= 0
        assert attr.deserved.cpu == pytest.approx(10000)  # the guarantee, whatever is left
        assert math.isfinite(attr.share)
    report = simulate(objects, CONF)
    assert len(report["binds"]) == 2


def test_no_nodes_and_zero_weights_do_not_crash():
    objects = [queue("q0", 0), queue("q1", 0), *gang("a", 2, 1, queue="q0"),
               *gang("b", 2, 1, queue="q1")]
    attrs = attrs_of(open_with(objects))
    assert all(a.deserved.is_empty() and a.share == 0 for a in attrs.values())
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert set(report["pending"]) == {"default/a-0", "default/a-1", "default/b-0",
                                      "default/b-1"}


def test_share_is_allocated_over_deserved_on_the_dominant_resource():
    objects = [node("n1", cpu="4", memory="8Gi"), queue("q1"),
               pod("r", cpu="1", memory="4Gi", queue="q1", node_name="n1"),
               pod("p", cpu="1", memory="1Gi", queue="q1")]
    attr = attrs_of(open_with(objects))["q1"]
    # deserved = request: 2 cpu, 5Gi, 2 pods; allocated 1 cpu, 4Gi, 1 pod
    assert attr.share == pytest.approx(4 / 5)


# --------------------------------------------------------------------------- allocate


def test_overused_queue_gets_nothing_more():
    # Pods are a resource too: with 4 pod slots each queue deserves 2 of them.
    objects = [node("n1", cpu="4", memory="16Gi", pods="4"), queue("q1"), queue("q2"),
               podgroup("a", 1, queue="q1", phase="Running"),
               pod("a-0", cpu="1", memory="4Gi", group="a", node_name="n1"),
               pod("a-1", cpu="1", memory="4Gi", group="a", node_name="n1"),
               pod("a-2", cpu="1", memory="4Gi", group="a"),
               *gang("b", 2, 1, cpu="1", memory="4Gi", queue="q2")]
    session = open_with(objects)
    reason = plugin_of(session).overused(session.queues["q1"])
    assert reason is not None and reason.startswith("queue q1 is overused: allocated cpu 2")
    assert plugin_of(session).overused(session.queues["q2"]) is None

    report = simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/b-0", "default/b-1"]
    assert any(r.startswith("queue q1 is overused") for r in report["pending"]["default/a-2"])


def test_allocatable_compares_only_requested_dimensions_strictly():
    objects = [node("n1", cpu="4", memory="8Gi", **{"nvidia.com/gpu": "2"}), queue("q1"),
               *gang("a", 2, 1, cpu="2", memory="1Gi", queue="q1")]
    session = open_with(objects)
    plugin, q1 = plugin_of(session), session.queues["q1"]
    task = next(t for t in session.jobs["default/a"].tasks.values())
    assert plugin.allocatable(q1, task) is None
    assert plugin.preemptive(q1, task) is None
    attr = plugin.queue_figures["q1"]
    attr.allocated = Resource(3000, 0)  # 3 cpu held of 4 deserved: 2 more do not fit
    reason = plugin.allocatable(q1, task)
    assert reason == ("queue q1: insufficient cpu (allocated + request 5 > deserved 4)")
    assert plugin.preemptive(q1, task) == reason


def test_a_queue_judges_its_room_once_per_pod_shape_while_it_holds_the_same(monkeypatch):
    """Thirty one-pod jobs of one shape wait in a queue at its capability: allocate asks
    the queue's room for each, and the verdict is made once, not thirty times, each pod
    told the same. When the queue holds less (its running pod leaves), the shape is
    judged again as each placement changes what the queue holds: two fit, the rest are
    refused with one verdict more."""
    judged = []

    def counting(*args, **kwargs):
        judged.append(args[0])
        return room_refusal(*args, **kwargs)

    monkeypatch.setattr(proportion_module, "room_refusal", counting)
    objects = [node("n1", cpu="8", memory="16Gi"), queue("q1", capability={"cpu": "2"}),
               pod("r", cpu="2", queue="q1", node_name="n1"),
               *(obj for i in range(30) for obj in gang(f"j{i:02d}", 1, queue="q1"))]
    cache = load_cache(objects, conf_text=CONF)
    first = Session(cache.snapshot(), conf(CONF)).run()
    assert len(judged) == 1 and not first.binds
    refusal = "queue q1: insufficient cpu (allocated + request 3 > deserved 2)"
    assert {first.pending[f"default/j{i:02d}-0"][0] for i in range(30)} == {refusal}
    cache.delete_pod("default/r")
    judged.clear()
    second = Session(cache.snapshot(), conf(CONF)).run()
    assert len(second.binds) == 2 and len(judged) == 3


def test_quota_counts_a_resource_the_limit_lacks_as_zero():
    request = Resource(1000, 0, {"nvidia.com/gpu": 1000, "pods": 1})
    assert quota_exceeded(request, Resource(2000, 0), request) == ["nvidia.com/gpu"]
    assert quota_exceeded(request, Resource(2000, 0, {"nvidia.com/gpu": 1000}), request) == []
    # pods never limit here; cpu equal to the limit passes (strict comparison)
    assert quota_exceeded(Resource(2000, 0, {"pods": 9}), Resource(2000, 0, {"pods": 1}),
                          Resource(1, 0, {"pods": 1})) == []


def test_allocate_events_keep_allocated_and_share_current():
    objects = [node("n1", cpu="4"), queue("q1"), queue("q2"),
               *gang("a", 4, 1, queue="q1"), *gang("b", 4, 1, queue="q2")]
    session = open_with(objects)
    attr = attrs_of(session)["q1"]
    assert attr.allocated.cpu == 0 and attr.share == 0
    task = session.jobs["default/a"].tasks[next(iter(session.jobs["default/a"].tasks))]
    statement = session.statement()
    assert statement.allocate(task, session.nodes["n1"]) is None
    assert attr.allocated.cpu == 1000
    assert attr.share == pytest.approx(0.5)  # 1 of 2 deserved cpu (pods: 1 of 4)
    # q1 now sorts after q2, which holds nothing yet
    assert session.queue_compare(session.queues["q2"], session.queues["q1"]) < 0
    statement.discard()
    assert attr.allocated.cpu == 0 and attr.share == 0


def test_pipelined_tasks_count_as_allocated():
    objects = [node("n1", cpu="2"), queue("q1"),
               pod("old", cpu="2", queue="q1", node_name="n1"), *gang("a", 1, 1, queue="q1")]
    session = open_with(objects)
    attr = attrs_of(session)["q1"]
    before = attr.allocated.cpu
    task = next(iter(session.jobs["default/a"].tasks.values()))
    statement = session.statement()
    assert statement.pipeline(task, session.nodes["n1"]) is None
    assert attr.allocated.cpu == before + 1000


# --------------------------------------------------------------------------- order


def test_queue_order_priority_first_then_lower_share():
    objects = [node("n1", cpu="8"), queue("hi", priority=10), queue("lo1"), queue("lo2"),
               pod("h", cpu="4", queue="hi", node_name="n1"), pod("hp", queue="hi"),
               pod("l", cpu="1", queue="lo1", node_name="n1"), pod("lp", queue="lo1"),
               pod("m", queue="lo2")]
    session = open_with(objects)
    plugin, queues = plugin_of(session), session.queues
    attrs = plugin.queue_figures
    assert attrs["hi"].share > attrs["lo1"].share > attrs["lo2"].share
    # priority beats share
    assert plugin.queue_order(queues["hi"], queues["lo2"]) == -1
    assert plugin.queue_order(queues["lo2"], queues["hi"]) == 1
    # same priority: lower share first
    assert plugin.queue_order(queues["lo2"], queues["lo1"]) == -1
    assert plugin.queue_order(queues["lo1"], queues["lo2"]) == 1
    assert plugin.queue_order(queues["lo1"], queues["lo1"]) == 0


# --------------------------------------------------------------------------- reclaim


def test_reclaimable_takes_victims_until_the_queue_is_back_within_deserved():
    objects = [node("n1", cpu="4"), queue("q1"), queue("q2"),
               podgroup("a", 1, queue="q1", phase="Running"),
               *[pod(f"a-{i}", group="a", node_name="n1") for i in range(4)],
               *gang("b", 4, 1, queue="q2")]
    session = open_with(objects)
    attrs = attrs_of(session)
    assert attrs["q1"].deserved.cpu == pytest.approx(2000)
    running = sorted(session.jobs["default/a"].tasks.values(), key=lambda t: t.key)
    reclaimer = next(iter(session.jobs["default/b"].tasks.values()))
    victims = plugin_of(session).reclaimable(reclaimer, running)
    assert [t.key for t in victims] == ["default/a-0", "default/a-1"]
    # a queue within its deserved gives nothing
    assert plugin_of(session).reclaimable(running[0], [reclaimer]) == []


# --------------------------------------------------------------------------- enqueue


def test_enqueue_rejects_min_resources_over_real_capability():
    objects = [node("n1", cpu="8"), queue("q1", capability={"cpu": "2"}),
               podgroup("big", 1, queue="q1", min_resources={"cpu": "4"}),
               pod("big-0", cpu="4", group="big")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert report["podGroups"]["default/big"]["phase"] == "Pending"
    # (Volcano's words, then the figures behind them)
    reason = ("queue resource quota insufficient: insufficient cpu (queue q1: minResources + "
              "held + admitted 4 > real capability 2)")
    assert reason in report["pending"]["default/big-0"]
    assert {"object": "PodGroup/default/big", "type": "Normal", "reason": "Unschedulable",
            "message": reason, "count": 1} in report["events"]


def test_enqueue_counts_allocated_and_admitted_jobs():
    objects = [node("n1", cpu="4"), queue("q1"),
               podgroup("first", 1, queue="q1", min_resources={"cpu": "3"}),
               pod("first-0", cpu="3", group="first"),
               podgroup("second", 1, queue="q1", min_resources={"cpu": "3"}),
               pod("second-0", cpu="3", group="second")]
    report = simulate(objects, CONF, sessions=2)
    assert report["binds"] == {"default/first-0": "n1"}
    assert report["podGroups"]["default/first"]["phase"] == "Running"
    assert report["podGroups"]["default/second"]["phase"] == "Pending"
    assert ("queue resource quota insufficient: insufficient cpu (queue q1: minResources + "
            "held + admitted 6 > real capability 4)" in report["pending"]["default/second-0"])


def test_elastic_part_of_running_jobs_does_not_block_admission():
    # `run` needs 1 cpu and holds 3: 2 of them could be given back.
    objects = [node("n1", cpu="4"), queue("q1"),
               podgroup("run", 1, queue="q1", min_resources={"cpu": "1"}, phase="Running"),
               *[pod(f"run-{i}", group="run", node_name="n1") for i in range(3)],
               podgroup("new", 1, queue="q1", min_resources={"cpu": "3"}),
               pod("new-0", cpu="3", group="new"),
               podgroup("huge", 1, queue="q1", min_resources={"cpu": "4"}),
               pod("huge-0", cpu="4", group="huge")]
    session = open_with(objects)
    plugin = plugin_of(session)
    attr = plugin.queue_figures["q1"]
    assert attr.elastic.cpu == pytest.approx(2000)
    assert plugin.job_enqueueable(session.jobs["default/new"]) == PERMIT
    vote = plugin.job_enqueueable(session.jobs["default/huge"])
    assert isinstance(vote, Reject)
    plugin.job_enqueued(session.jobs["default/new"])
    assert attr.inqueue.cpu == pytest.approx(3000)


def test_inqueue_job_holds_what_it_still_lacks_of_its_minimum():
    objects = [node("n1", cpu="8"), queue("q1"),
               podgroup("a", 3, queue="q1", min_resources={"cpu": "3"}, phase="Inqueue"),
               pod("a-0", group="a", node_name="n1"), pod("a-1", group="a"),
               pod("a-2", group="a", gates=["example.com/wait"])]
    attr = attrs_of(open_with(objects))["q1"]
    # 3 cpu minimum, 1 held, 1 more asked by a gated pod that cannot be placed yet
    assert attr.inqueue.cpu == pytest.approx(1000)


def test_bare_pod_rejection_records_no_podgroup_event():
    objects = [node("n1", cpu="8"), queue("q1", capability={"cpu": "1"}),
               pod("lonely", cpu="2", queue="q1")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert ("queue resource quota insufficient: insufficient cpu (queue q1: minResources + "
            "held + admitted 2 > real capability 1)" in report["pending"]["default/lonely"])
    assert not any(e["object"].startswith("PodGroup/") for e in report["events"])


def test_closed_queue_admits_nothing():
    objects = [node("n1", cpu="8"), queue("shut", state="Closed"),
               podgroup("a", 1, queue="shut", min_resources={"cpu": "1"}),
               pod("a-0", group="a"), pod("solo", queue="shut")]
    session = open_with(objects)
    plugin, shut = plugin_of(session), session.queues["shut"]
    vote = plugin.job_enqueueable(session.jobs["default/a"])
    assert isinstance(vote, Reject) and "Closed" in vote.reason
    task = next(iter(session.jobs["default/a"].tasks.values()))
    assert "queue shut is Closed" in (plugin.allocatable(shut, task) or "")
    assert "queue shut is Closed" in (plugin.preemptive(shut, task) or "")

    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert report["podGroups"]["default/a"]["phase"] == "Pending"
    assert set(report["pending"]) == {"default/a-0", "default/solo"}


def test_queue_without_state_is_open():
    objects = [node("n1", cpu="8"), queue("q1"),
               podgroup("a", 1, queue="q1", min_resources={"cpu": "1"}), pod("a-0", group="a")]
    session = open_with(objects)
    assert session.queues["q1"].state == ""
    assert plugin_of(session).job_enqueueable(session.jobs["default/a"]) == PERMIT
    assert simulate(objects, CONF)["binds"] == {"default/a-0": "n1"}


# --------------------------------------------------------------------------- properties


@st.composite
def clusters(draw: st.DrawFn, guarantees: bool, roomy: bool = False) -> list[dict]:
    """Nodes, queues (weight, maybe a capability or guarantee) and jobs of pending pods,
    in many shapes. `roomy`: big nodes, no capabilities, weights of 1 or more, so that
    everything asked often fits."""
    objects: list[dict] = []
    for n in range(draw(st.integers(1 if roomy else 0, 3))):
        objects.append(node(f"n{n}", cpu=str(draw(st.integers(16 if roomy else 1, 64))),
                            memory=f"{draw(st.integers(64 if roomy else 1, 256))}Gi",
                            pods=str(draw(st.integers(30 if roomy else 1, 40))),
                            **({"nvidia.com/gpu": str(draw(st.integers(0, 8)))}
                               if draw(st.booleans()) else {})))
    for q in range(draw(st.integers(1, 4))):
        name = f"q{q}"
        capability = ({"cpu": str(draw(st.integers(0, 12)))}
                      if not roomy and draw(st.booleans()) else None)
        guarantee = ({"cpu": str(draw(st.integers(0, 8))),
                      "memory": f"{draw(st.integers(0, 16))}Gi"}
                     if guarantees and draw(st.booleans()) else None)
        objects.append(queue(name, draw(st.integers(1 if roomy else 0, 5)),
                             capability=capability, guarantee=guarantee))
        for j in range(draw(st.integers(0, 2))):
            size = draw(st.integers(1, 4))
            cpu = f"{draw(st.integers(1, 4000))}m"
            memory = f"{draw(st.integers(1, 8))}Gi"
            extra = {"nvidia.com/gpu": "1"} if draw(st.booleans()) else {}
            objects += gang(f"{name}-j{j}", size, 1, cpu=cpu, memory=memory, queue=name,
                            **extra)
    return objects


DIMENSIONS = ("cpu", "memory", "pods", "nvidia.com/gpu")
# Amounts are in milli units and bytes: a unit or so is rounding, not a breach.
SLACK = 1.0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(guarantees=False))
def test_deserved_stays_within_request_capability_and_cluster(objects: list[dict]):
    session = open_with(objects)
    attrs = attrs_of(session)
    total = session.total_resource
    for attr in attrs.values():
        for name in DIMENSIONS:
            deserved = attr.deserved.get(name)
            assert deserved >= 0
            assert deserved <= attr.request.get(name) + SLACK
            assert deserved <= attr.real_capability.get(name) + SLACK
        assert attr.share >= 0 and math.isfinite(attr.share)
    for name in DIMENSIONS:
        assert sum(a.deserved.get(name) for a in attrs.values()) <= total.get(name) + SLACK


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(guarantees=True))
def test_deserved_is_at_least_guarantee_and_at_most_what_bounds_allow(objects: list[dict]):
    session = open_with(objects)
    for attr in attrs_of(session).values():
        for name in DIMENSIONS:
            deserved = attr.deserved.get(name)
            assert deserved >= attr.guarantee.get(name) - SLACK
            bound = max(min(attr.request.get(name), attr.real_capability.get(name)),
                        attr.guarantee.get(name))
            assert deserved <= bound + SLACK


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(guarantees=False, roomy=True))
def test_every_queue_deserves_its_request_when_everything_fits(objects: list[dict]):
    session = open_with(objects)
    attrs = attrs_of(session)
    requested = Resource()
    for attr in attrs.values():
        requested.add(attr.request)
    assume(requested.less_equal(session.total_resource))
    for attr in attrs.values():
        for name in DIMENSIONS:
            assert attr.deserved.get(name) == pytest.approx(attr.request.get(name), abs=SLACK)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(guarantees=True))
def test_allocation_never_passes_deserved_on_requested_dimensions(objects: list[dict]):
    """After a session, what allocate placed keeps each queue within deserved on the
    dimensions its placed tasks ask for (what was already running aside)."""
    session = open_with(objects)
    attrs = attrs_of(session)
    deserved = {name: attr.deserved.clone() for name, attr in attrs.items()}
    session.run()
    for name, attr in attrs.items():
        placed = Resource()
        for job in session.jobs.values():
            if job.queue == name:
                for task in job.tasks_in(TaskStatus.BINDING | TaskStatus.PIPELINED):
                    placed.add(task.resreq)
        if placed.is_empty():
            continue
        assert quota_exceeded(attr.allocated, deserved[name], placed) == []


def test_guarantees_beyond_the_cluster_warn_on_the_guaranteed_queues():
    """A cluster of 8 CPUs, queue qx guaranteed 100: every other queue's real capability
    is nothing. Their pods wait saying so with the figures, and qx has a Warning naming
    the amounts (a cluster smaller than its quotas, said where an operator looks)."""
    objects = [node("n1", cpu="8"), queue("qx", guarantee={"cpu": "100"}), queue("other"),
               pod("p-qx", cpu="500m", queue="qx"), pod("p-other", cpu="500m", queue="other")]
    report = simulate(objects, CONF)
    assert report["binds"] == {"default/p-qx": "n1"}
    assert report["pending"]["default/p-other"] == [
        "queue resource quota insufficient: insufficient cpu (queue other: minResources + "
        "held + admitted 500m > real capability 0)"]
    [warning] = [e for e in report["events"] if e["reason"] == "GuaranteeOverCluster"]
    assert warning["object"] == "Queue/qx" and warning["type"] == "Warning"
    assert "(cpu 100 > 8)" in warning["message"] and warning["count"] == 1
    objects[1] = queue("qx", guarantee={"cpu": "4"})
    report = simulate(objects, CONF)
    assert not any(e["reason"] == "GuaranteeOverCluster" for e in report["events"])
    assert len(report["binds"]) == 2
