"""capacity: deserved, capability and guarantee as written; the verdicts they give."""

from __future__ import annotations

import math
from functools import cmp_to_key

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import gang, node, open_session, pod, podgroup, queue, simulate
from tests.invariants import run_checked
from vscheduler.conf import parse_conf
from vscheduler.framework.session import Session
from vscheduler.hookspecs import PERMIT, Reject
from vscheduler.model import Task, TaskStatus
from vscheduler.plugins.capacity import CapacityPlugin, WrittenDeservedFigures
from vscheduler.quota import quota_exceeded
from vscheduler.resources import Resource
from vscheduler.simulate import Simulation

GI = 1024 ** 3
GPU = "nvidia.com/gpu"

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}]
"""

RECLAIM_CONF = """
actions: "enqueue, allocate, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}]
"""


def open_with(objects: list[dict], conf_text: str = CONF) -> Session:
    """A session opened on the objects with `conf_text` (no action run yet)."""
    return open_session(objects, conf_text)


def plugin_of(session: Session) -> CapacityPlugin:
    return session.plugins["capacity"]


def attrs_of(session: Session) -> dict[str, WrittenDeservedFigures]:
    return plugin_of(session).queue_figures


def bound_in(report: dict, prefix: str) -> int:
    return sum(1 for key in report["binds"] if key.startswith(f"default/{prefix}-"))


def tasks_of(session: Session, job_id: str) -> list[Task]:
    """A job's tasks by pod name (the order the tests hand them to the hooks)."""
    return sorted(session.jobs[job_id].tasks.values(), key=lambda t: t.key)


def running(name: str, count: int, queue_name: str, cpu: str = "1", memory: str = "1Gi",
            **extra: str) -> list[dict]:
    """A Running PodGroup of `count` pods already on node n1."""
    return [podgroup(name, 1, queue=queue_name, phase="Running"),
            *[pod(f"{name}-{i}", cpu, memory, group=name, node_name="n1", **extra)
              for i in range(count)]]


# --------------------------------------------------------------------------- figures


def test_capability_caps_the_queue_below_a_bigger_cluster():
    objects = [node("n1", cpu="8"), queue("q1", capability={"cpu": "4"}),
               *gang("a", 6, 1, queue="q1")]
    attr = attrs_of(open_with(objects))["q1"]
    assert attr.real_capability.cpu == pytest.approx(4000)
    # memory has no capability: the whole cluster
    assert attr.real_capability.memory == pytest.approx(16 * GI)

    report = simulate(objects, CONF, sessions=2)
    assert bound_in(report, "a") == 4
    assert report["queues"]["q1"]["allocated"]["cpu"] == "4"
    assert ("queue q1: insufficient cpu (allocated + request 5 > real capability 4)"
            in report["pending"]["default/a-4"])


def test_queue_allocates_beyond_deserved_up_to_its_capability():
    objects = [node("n1", cpu="8"),
               queue("q1", deserved={"cpu": "2"}, capability={"cpu": "6"}),
               *gang("a", 8, 1, queue="q1")]
    attr = attrs_of(open_with(objects))["q1"]
    assert attr.deserved.cpu == pytest.approx(2000)
    assert attr.real_capability.cpu == pytest.approx(6000)

    report = simulate(objects, CONF)
    assert bound_in(report, "a") == 6
    assert report["queues"]["q1"]["allocated"]["cpu"] == "6"


def test_zero_capability_on_cpu_and_memory_means_unlimited():
    objects = [node("n1", cpu="8", **{GPU: "4"}),
               queue("q1", capability={"cpu": "0", GPU: "1"}), *gang("a", 4, 1, queue="q1")]
    attr = attrs_of(open_with(objects))["q1"]
    assert attr.capability is not None and math.isinf(attr.capability.cpu)
    assert math.isinf(attr.capability.memory)
    assert attr.real_capability.cpu == pytest.approx(8000)
    assert attr.real_capability.scalars[GPU] == pytest.approx(1000)
    assert bound_in(simulate(objects, CONF), "a") == 4


def test_guarantees_reduce_the_other_queues_real_capability():
    objects = [node("n1", cpu="8"), queue("g", guarantee={"cpu": "6"}), queue("o"),
               queue("idle", guarantee={"cpu": "1"}),
               *gang("a", 8, 1, queue="g"), *gang("b", 8, 1, queue="o")]
    attrs = attrs_of(open_with(objects))
    # Every queue's guarantee counts, even that of a queue with no jobs.
    assert "idle" not in attrs
    assert attrs["o"].real_capability.cpu == pytest.approx(1000)
    assert attrs["g"].real_capability.cpu == pytest.approx(7000)
    # A guarantee is deserved even when spec.deserved says less (here: nothing).
    assert attrs["g"].deserved.cpu == pytest.approx(6000)

    report = simulate(objects, CONF)
    assert bound_in(report, "b") == 1
    assert bound_in(report, "a") == 7
    assert ("queue o: insufficient cpu (allocated + request 2 > real capability 1)"
            in report["pending"]["default/b-1"])


def test_deserved_is_capped_by_real_capability_and_raised_to_guarantee():
    objects = [node("n1", cpu="8", memory="16Gi"),
               queue("q1", deserved={"cpu": "20", "memory": "1Gi"},
                     capability={"cpu": "5"}, guarantee={"memory": "2Gi"}),
               *gang("a", 1, 1, queue="q1")]
    attr = attrs_of(open_with(objects))["q1"]
    assert attr.deserved.cpu == pytest.approx(5000)
    assert attr.deserved.memory == pytest.approx(2 * GI)


def test_share_is_the_largest_fraction_of_deserved_and_one_when_nothing_is_deserved():
    objects = [node("n1", cpu="8", memory="16Gi"),
               queue("d", deserved={"cpu": "4", "memory": "2Gi"}), queue("none"),
               pod("r", cpu="1", memory="1Gi", queue="d", node_name="n1"),
               pod("p", queue="none")]
    attrs = attrs_of(open_with(objects))
    assert attrs["d"].share == pytest.approx(0.5)  # memory 1Gi of 2Gi beats cpu 1 of 4
    assert attrs["none"].share == 1.0


def test_allocate_and_deallocate_events_keep_allocated_and_share_current():
    objects = [node("n1", cpu="8"), queue("q1", deserved={"cpu": "4"}),
               *gang("a", 2, 1, queue="q1")]
    session = open_with(objects)
    plugin, attr = plugin_of(session), attrs_of(session)["q1"]
    task = tasks_of(session, "default/a")[0]
    plugin.allocate_event(task)
    assert attr.allocated.cpu == pytest.approx(1000)
    assert attr.share == pytest.approx(0.25)
    plugin.deallocate_event(task)
    assert attr.allocated.cpu == pytest.approx(0)
    assert attr.share == pytest.approx(0)


# --------------------------------------------------------------------------- order


def test_queue_order_by_priority_then_share_then_deserving_something():
    objects = [node("n1", cpu="8", memory="16Gi"),
               queue("low", deserved={"cpu": "4"}),
               queue("high", deserved={"cpu": "4"}),
               queue("vip", deserved={"cpu": "4"}, priority=10),
               queue("full", deserved={"cpu": "1"}),
               queue("besteffort"),
               pod("l0", queue="low", node_name="n1"),
               *[pod(f"h{i}", queue="high", node_name="n1") for i in range(3)],
               *[pod(f"v{i}", queue="vip", node_name="n1") for i in range(4)],
               pod("f0", queue="full", node_name="n1", phase="Running"),
               pod("b0", queue="besteffort")]
    session = open_with(objects)
    plugin, queues = plugin_of(session), session.queues
    # priority beats share: vip holds all it deserves and is still first
    assert attrs_of(session)["vip"].share == pytest.approx(1.0)
    assert plugin.queue_order(queues["vip"], queues["low"]) < 0
    # lower share first: low holds 1/4, high 3/4
    assert plugin.queue_order(queues["low"], queues["high"]) < 0
    assert plugin.queue_order(queues["high"], queues["low"]) > 0
    # equal share (1): the queue that deserves something first
    assert attrs_of(session)["full"].share == attrs_of(session)["besteffort"].share == 1.0
    assert plugin.queue_order(queues["full"], queues["besteffort"]) < 0
    assert plugin.queue_order(queues["besteffort"], queues["full"]) > 0
    order = sorted((queues[n] for n in ("besteffort", "full", "high", "low", "vip")),
                   key=cmp_to_key(session.queue_compare))
    assert [q.name for q in order] == ["vip", "low", "high", "full", "besteffort"]


def test_queue_below_its_deserved_share_is_served_first():
    # One free cpu; both queues want it. `behind` holds less of what it deserves.
    objects = [node("n1", cpu="4"),
               queue("ahead", deserved={"cpu": "2"}), queue("behind", deserved={"cpu": "2"}),
               *running("ra", 2, "ahead"), *running("rb", 1, "behind"),
               *gang("a", 1, 1, queue="ahead"), *gang("b", 1, 1, queue="behind")]
    report = simulate(objects, CONF)
    assert report["binds"] == {"default/b-0": "n1"}


# --------------------------------------------------------------------------- enqueue


def test_enqueue_rejects_min_resources_over_real_capability():
    objects = [node("n1", cpu="8"), queue("q1", capability={"cpu": "2"}),
               podgroup("big", 1, queue="q1", min_resources={"cpu": "4"}),
               pod("big-0", cpu="4", group="big")]
    session = open_with(objects)
    vote = plugin_of(session).job_enqueueable(session.jobs["default/big"])
    assert isinstance(vote, Reject)

    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert report["podGroups"]["default/big"]["phase"] == "Pending"
    reason = ("queue resource quota insufficient: insufficient cpu (queue q1: minResources + "
              "held + admitted 4 > real capability 2)")
    assert vote.reason == reason
    assert reason in report["pending"]["default/big-0"]
    assert {"object": "PodGroup/default/big", "type": "Normal", "reason": "Unschedulable",
            "message": reason, "count": 1} in report["events"]


def test_enqueue_admits_up_to_capability_not_deserved():
    objects = [node("n1", cpu="8"),
               queue("q1", deserved={"cpu": "1"}, capability={"cpu": "4"}),
               podgroup("g", 4, queue="q1", min_resources={"cpu": "4"}),
               *[pod(f"g-{i}", group="g") for i in range(4)]]
    session = open_with(objects)
    assert plugin_of(session).job_enqueueable(session.jobs["default/g"]) == PERMIT
    assert bound_in(simulate(objects, CONF), "g") == 4


def test_enqueue_counts_allocated_admitted_and_elastic():
    # `run` needs 1 cpu and holds 3: 2 of them could be given back.
    objects = [node("n1", cpu="8"), queue("q1", capability={"cpu": "6"}),
               podgroup("run", 1, queue="q1", min_resources={"cpu": "1"}, phase="Running"),
               *[pod(f"run-{i}", group="run", node_name="n1") for i in range(3)],
               podgroup("new", 1, queue="q1", min_resources={"cpu": "3"}),
               pod("new-0", cpu="3", group="new"),
               podgroup("more", 1, queue="q1", min_resources={"cpu": "2"}),
               pod("more-0", cpu="2", group="more")]
    session = open_with(objects)
    plugin, attr = plugin_of(session), attrs_of(session)["q1"]
    assert attr.elastic.cpu == pytest.approx(2000)
    # 3 + 3 held - 2 elastic = 4 <= 6
    assert plugin.job_enqueueable(session.jobs["default/new"]) == PERMIT
    plugin.job_enqueued(session.jobs["default/new"])
    assert attr.inqueue.cpu == pytest.approx(3000)
    # 2 + 3 held + 3 admitted - 2 elastic = 6 <= 6: still fits (the check is strict)
    assert plugin.job_enqueueable(session.jobs["default/more"]) == PERMIT
    plugin.job_enqueued(session.jobs["default/more"])
    vote = plugin.job_enqueueable(session.jobs["default/new"])
    assert isinstance(vote, Reject) and "insufficient cpu" in vote.reason


def test_enqueue_without_min_resources_is_permitted():
    objects = [node("n1", cpu="1"), queue("q1", capability={"cpu": "1"}),
               podgroup("g", 1, queue="q1"), pod("g-0", cpu="4", group="g")]
    session = open_with(objects)
    assert plugin_of(session).job_enqueueable(session.jobs["default/g"]) == PERMIT


def test_closed_queue_takes_nothing():
    objects = [node("n1", cpu="8"), queue("shut", state="Closed"),
               podgroup("a", 1, queue="shut", min_resources={"cpu": "1"}),
               pod("a-0", group="a"), pod("solo", queue="shut")]
    session = open_with(objects)
    plugin, shut = plugin_of(session), session.queues["shut"]
    vote = plugin.job_enqueueable(session.jobs["default/a"])
    assert isinstance(vote, Reject) and "Closed" in vote.reason
    task = tasks_of(session, "default/a")[0]
    assert "queue shut is Closed" in (plugin.allocatable(shut, task) or "")
    assert "queue shut is Closed" in (plugin.preemptive(shut, task) or "")

    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert set(report["pending"]) == {"default/a-0", "default/solo"}


def test_queue_without_state_is_open():
    objects = [node("n1", cpu="8"), queue("q1", deserved={"cpu": "1"}),
               podgroup("a", 1, queue="q1", min_resources={"cpu": "1"}), pod("a-0", group="a")]
    session = open_with(objects)
    assert session.queues["q1"].state == ""
    task = tasks_of(session, "default/a")[0]
    assert plugin_of(session).job_enqueueable(session.jobs["default/a"]) == PERMIT
    assert plugin_of(session).allocatable(session.queues["q1"], task) is None
    assert simulate(objects, CONF)["binds"] == {"default/a-0": "n1"}


# --------------------------------------------------------------------------- preemptive


def test_preemptive_allows_a_queue_below_its_deserved_share():
    objects = [node("n1", cpu="4"), queue("q1", deserved={"cpu": "2", "memory": "2Gi"}),
               *running("r", 1, "q1"), *gang("p", 1, 1, queue="q1")]
    session = open_with(objects)
    task = tasks_of(session, "default/p")[0]
    assert plugin_of(session).preemptive(session.queues["q1"], task) is None


def test_preemptive_refuses_a_queue_at_its_deserved_share():
    objects = [node("n1", cpu="4"), queue("q1", deserved={"cpu": "2", "memory": "2Gi"}),
               *running("r", 2, "q1"), *gang("p", 1, 1, queue="q1")]
    session = open_with(objects)
    task = tasks_of(session, "default/p")[0]
    reason = plugin_of(session).preemptive(session.queues["q1"], task)
    assert reason == ("queue q1 may not reclaim: it would pass its deserved amount on every "
                      "resource the task asks for (cpu allocated + request 3 > deserved 2; "
                      "memory allocated + request 3Gi > deserved 2Gi)")


def test_preemptive_needs_only_one_requested_resource_below_deserved():
    # cpu is at its deserved amount, memory is not: the queue may still reclaim.
    objects = [node("n1", cpu="4"), queue("q1", deserved={"cpu": "2", "memory": "8Gi"}),
               *running("r", 2, "q1"), *gang("p", 1, 1, queue="q1")]
    session = open_with(objects)
    task = tasks_of(session, "default/p")[0]
    assert plugin_of(session).preemptive(session.queues["q1"], task) is None


def test_preemptive_refuses_past_the_real_capability():
    objects = [node("n1", cpu="4"),
               queue("q1", deserved={"cpu": "8"}, capability={"cpu": "2"}),
               *running("r", 2, "q1"), *gang("p", 1, 1, queue="q1")]
    session = open_with(objects)
    task = tasks_of(session, "default/p")[0]
    assert plugin_of(session).preemptive(session.queues["q1"], task) == (
        "queue q1: insufficient cpu (allocated + request 3 > real capability 2)")


def test_preemptive_refuses_a_queue_that_deserves_nothing():
    objects = [node("n1", cpu="4"), queue("q1"), *gang("p", 1, 1, queue="q1")]
    session = open_with(objects)
    task = tasks_of(session, "default/p")[0]
    assert "may not reclaim" in (plugin_of(session).preemptive(session.queues["q1"], task)
                                 or "")


# --------------------------------------------------------------------------- reclaimable


def test_reclaimable_takes_victims_only_while_a_queue_is_over_its_deserved_amount():
    objects = [node("n1", cpu="8"),
               queue("over", deserved={"cpu": "2"}), queue("within", deserved={"cpu": "4"}),
               queue("thief", deserved={"cpu": "4"}),
               *running("o", 3, "over"), *running("w", 2, "within"),
               *gang("t", 1, 1, queue="thief")]
    session = open_with(objects)
    reclaimer = tasks_of(session, "default/t")[0]
    candidates = tasks_of(session, "default/o") + tasks_of(session, "default/w")
    victims = plugin_of(session).reclaimable(reclaimer, candidates)
    # over holds 3 of 2 deserved: one victim brings it back; within gives nothing
    assert [t.key for t in victims] == ["default/o-0"]


def test_reclaimable_never_takes_a_queue_below_its_guarantee():
    # deserved cpu 1 (memory raised to the 3Gi guarantee); 4 pods of 1 cpu and 1Gi
    objects = [node("n1", cpu="8"),
               queue("over", deserved={"cpu": "1"}, guarantee={"memory": "3Gi"}),
               queue("thief", deserved={"cpu": "4"}),
               *running("o", 4, "over"), *gang("t", 1, 1, queue="thief")]
    session = open_with(objects)
    reclaimer = tasks_of(session, "default/t")[0]
    victims = plugin_of(session).reclaimable(reclaimer, tasks_of(session, "default/o"))
    # cpu stays over deserved, but a second eviction would leave 2Gi < 3Gi guaranteed
    assert [t.key for t in victims] == ["default/o-0"]


def test_reclaimable_takes_from_a_queue_that_deserves_none_of_what_the_task_uses():
    objects = [node("n1", cpu="8"), queue("besteffort"),
               queue("gpuonly", deserved={GPU: "1"}), queue("thief", deserved={"cpu": "4"}),
               *running("b", 2, "besteffort"), *running("g", 1, "gpuonly"),
               *gang("t", 1, 1, queue="thief")]
    session = open_with(objects)
    reclaimer = tasks_of(session, "default/t")[0]
    candidates = tasks_of(session, "default/b") + tasks_of(session, "default/g")
    victims = plugin_of(session).reclaimable(reclaimer, candidates)
    assert [t.key for t in victims] == ["default/b-0", "default/b-1", "default/g-0"]


def test_reclaimable_skips_candidates_that_free_nothing_the_reclaimer_asks_for():
    objects = [node("n1", cpu="8", **{GPU: "4"}), queue("over", deserved={"cpu": "1"}),
               queue("thief", deserved={GPU: "2"}),
               *running("o", 3, "over"),
               podgroup("t", 1, queue="thief"),
               pod("t-0", cpu=None, memory=None, group="t", **{GPU: "1"})]
    session = open_with(objects)
    reclaimer = tasks_of(session, "default/t")[0]
    assert plugin_of(session).reclaimable(reclaimer, tasks_of(session, "default/o")) == []


def test_reclaimable_reads_over_deserved_on_the_resources_the_victim_uses():
    # `over` holds 2 gpus of 1 deserved; its cpu-only pods free no gpu share, so they
    # are not victims although the queue is over its deserved amount (on gpus).
    objects = [node("n1", cpu="8", **{GPU: "4"}),
               queue("over", deserved={"cpu": "4", GPU: "1"}),
               queue("thief", deserved={"cpu": "4"}),
               *running("c", 2, "over"), *running("g", 2, "over", **{GPU: "1"}),
               *gang("t", 1, 1, queue="thief")]
    session = open_with(objects)
    reclaimer = tasks_of(session, "default/t")[0]
    candidates = tasks_of(session, "default/c") + tasks_of(session, "default/g")
    victims = plugin_of(session).reclaimable(reclaimer, candidates)
    assert [t.key for t in victims] == ["default/g-0"]


def test_reclaimable_of_a_task_without_queue_figures_is_empty():
    objects = [node("n1", cpu="8"), queue("over", deserved={"cpu": "1"}),
               *running("o", 3, "over"), *gang("t", 1, 1, queue="over")]
    session = open_with(objects)
    plugin = plugin_of(session)
    stranger = tasks_of(session, "default/t")[0].clone()
    stranger.job_id = "default/nobody"
    assert plugin.reclaimable(stranger, tasks_of(session, "default/o")) == []


def test_reclaim_end_to_end_takes_back_what_a_queue_borrowed():
    """Queue a borrowed the whole node beyond its deserved cpu; b, below its deserved,
    gets one cpu back by evicting one of a's pods (and waits for it, pipelined)."""
    objects = [node("n1", cpu="4"),
               queue("a", deserved={"cpu": "1"}), queue("b", deserved={"cpu": "3"}),
               *running("ra", 4, "a"), *gang("b", 1, 1, queue="b")]
    report = simulate(objects, RECLAIM_CONF)
    assert len(report["evictions"]) == 1
    eviction = report["evictions"][0]
    assert eviction["pod"].startswith("default/ra-")
    assert eviction["action"] == "reclaim" and eviction["for"] == "default/b-0"
    assert report["pipelined"] == {"default/b-0": "n1"}


# --------------------------------------------------------------------------- robustness


def test_cluster_smaller_than_the_guarantees_does_not_crash():
    objects = [node("n1", cpu="2"), queue("q1", guarantee={"cpu": "10"}),
               queue("q2", guarantee={"cpu": "10", GPU: "4"}, deserved={"cpu": "1"}),
               *gang("a", 2, 1, queue="q1"), *gang("b", 2, 1, queue="q2")]
    attrs = attrs_of(open_with(objects))
    for attr in attrs.values():
        assert attr.real_capability.cpu == pytest.approx(10000)  # nothing left + own
        assert attr.deserved.cpu == pytest.approx(10000)
        assert math.isfinite(attr.share)
    report = simulate(objects, CONF)
    assert len(report["binds"]) == 2


def test_no_nodes_missing_queue_and_zero_deserved_do_not_crash():
    objects = [queue("zero", deserved={"cpu": "0", "memory": "0"}),
               *gang("a", 2, 1, queue="zero"), *gang("m", 1, 1, queue="missing")]
    session = open_with(objects)
    attrs = attrs_of(session)
    assert attrs["zero"].share == 1.0
    assert "missing" not in attrs
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert {"default/a-0", "default/a-1", "default/m-0"} <= set(report["pending"])


# --------------------------------------------------------------------------- properties


@st.composite
def clusters(draw: st.DrawFn) -> list[dict]:
    """Nodes, queues (maybe deserved, capability, guarantee: often more than the
    cluster) and jobs of pending and running pods."""
    objects: list[dict] = []
    node_count = draw(st.integers(0, 3))
    for n in range(node_count):
        objects.append(node(f"n{n}", cpu=str(draw(st.integers(1, 16))),
                            memory=f"{draw(st.integers(1, 32))}Gi",
                            pods=str(draw(st.integers(1, 20))),
                            **({GPU: str(draw(st.integers(0, 4)))}
                               if draw(st.booleans()) else {})))
    for q in range(draw(st.integers(1, 4))):
        name = f"q{q}"

        def amounts(top: int) -> dict[str, str] | None:
            if not draw(st.booleans()):
                return None
            out = {"cpu": str(draw(st.integers(0, top)))}
            if draw(st.booleans()):
                out["memory"] = f"{draw(st.integers(0, top * 2))}Gi"
            if draw(st.booleans()):
                out[GPU] = str(draw(st.integers(0, 4)))
            return out

        objects.append(queue(name, deserved=amounts(16), capability=amounts(12),
                             guarantee=amounts(10),
                             state=draw(st.sampled_from([None, None, "Open", "Closed"]))))
        for j in range(draw(st.integers(0, 2))):
            size = draw(st.integers(1, 4))
            extra = {GPU: "1"} if draw(st.booleans()) else {}
            group = gang(f"{name}-j{j}", size, draw(st.integers(1, size)),
                         cpu=f"{draw(st.integers(1, 4000))}m",
                         memory=f"{draw(st.integers(1, 4))}Gi", queue=name, **extra)
            if draw(st.booleans()):
                group[0]["spec"]["minResources"] = {"cpu": str(draw(st.integers(1, 8)))}
            if node_count and draw(st.integers(0, 3)) == 0:
                group[0]["status"]["phase"] = "Running"
                for obj in group[1:]:
                    obj["spec"]["nodeName"] = "n0"
                    obj["status"]["phase"] = "Running"
            objects += group
    return objects


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_figures_stay_sane_on_any_cluster(objects: list[dict]):
    for attr in attrs_of(open_with(objects)).values():
        for name in ("cpu", "memory", GPU):
            assert attr.real_capability.get(name) >= 0
            assert attr.deserved.get(name) >= attr.guarantee.get(name) - 1
        assert attr.share >= 0 and math.isfinite(attr.share)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_allocation_never_passes_the_real_capability(objects: list[dict]):
    """What a session places keeps each queue within its real capability (and so its
    capability) on the resources the placed tasks ask for."""
    session = open_with(objects)
    attrs = attrs_of(session)
    limits = {name: attr.real_capability.clone() for name, attr in attrs.items()}
    session.run()
    for name, attr in attrs.items():
        placed = Resource()
        for job in session.jobs.values():
            if job.queue == name:
                for task in job.tasks_in(TaskStatus.BINDING):
                    placed.add(task.resreq)
        if placed.is_empty():
            continue
        assert quota_exceeded(attr.allocated, limits[name], placed) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(1, 3))
def test_invariants_hold_over_sessions(objects: list[dict], sessions: int):
    """The architecture's invariants (capability included) after every session."""
    simulation = Simulation(parse_conf(CONF, "capacity test conf"))
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    run_checked(simulation, sessions)


def test_a_resource_the_nodes_offer_at_zero_still_caps_what_a_queue_deserves():
    """Nodes listing `nvidia.com/gpu: 0` give the cluster a GPU total of zero (not an
    unknown one): a queue written to deserve 4 GPUs deserves none of a cluster that has
    none, so its share is full and the other queue's pod goes first, in every session
    (the cluster's total is kept between sessions)."""
    objects = [node("n1", cpu="1", **{"nvidia.com/gpu": "0"}), queue("b"),
               queue("z", deserved={"nvidia.com/gpu": "4"}),
               pod("pb", queue="b", cpu="1"), pod("pa", queue="z", cpu="1")]
    conf = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: capacity}]
"""
    session = open_session(objects, conf)
    figures = session.plugins["capacity"].queue_figures["z"]
    assert figures.deserved.scalars.get("nvidia.com/gpu") == 0 and figures.share == 1.0
    assert sorted(session.run().binds) == ["default/pb"]
