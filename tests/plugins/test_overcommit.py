"""overcommit: enqueue admits PodGroups while the overcommitted cluster has room."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import conf, node, open_session, pod, podgroup, queue, simulate
from vscheduler.conf import ConfError
from vscheduler.framework.session import Session
from vscheduler.hookspecs import PERMIT, Reject
from vscheduler.plugins.overcommit import OvercommitPlugin

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}]
"""


def conf_with_factor(factor: object) -> str:
    return f"""
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}, {{name: conformance}}]
- plugins: [{{name: overcommit, arguments: {{overcommit-factor: {factor}}}}}]
"""


ENQUEUE_ONLY = """
actions: "enqueue"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}]
"""


def open_with(objects: list[dict], conf_text: str = CONF) -> Session:
    """A session opened on the objects with `conf_text` (no action run yet)."""
    return open_session(objects, conf_text)


def plugin_of(session: Session) -> OvercommitPlugin:
    return session.plugins["overcommit"]


def job_with_min(name: str, cpu: str, *, pods: int = 1, phase: str | None = None,
                 min_member: int = 1, memory: str | None = None) -> list[dict]:
    """A PodGroup with minResources and its pending pods sharing that cpu."""
    minimum = {"cpu": cpu, **({"memory": memory} if memory else {})}
    per_pod = f"{round(float(cpu) * 1000 / pods)}m"
    return [podgroup(name, min_member, min_resources=minimum, phase=phase),
            *[pod(f"{name}-{i}", per_pod, "1Gi", group=name) for i in range(pods)]]


# --------------------------------------------------------------------------- admission


def test_rejects_when_admitted_jobs_would_pass_total_times_factor():
    objects = [node("n1", cpu="4"), *job_with_min("first", "4"), *job_with_min("second", "1")]
    report = simulate(objects, CONF)
    # 4 of 4.8 cpu admitted; 4 + 1 would pass it
    assert report["binds"] == {"default/first-0": "n1"}
    assert report["podGroups"]["default/second"]["phase"] == "Pending"
    reason = "resource in cluster is overused: overused cpu"
    assert reason in report["pending"]["default/second-0"]
    assert {"object": "PodGroup/default/second", "type": "Normal", "reason": "Unschedulable",
            "message": reason, "count": 1} in report["events"]


def test_admits_up_to_the_factor_not_only_what_fits_now():
    objects = [node("n1", cpu="4"), *job_with_min("a", "2"), *job_with_min("b", "2"),
               *job_with_min("c", "0.8"), *job_with_min("d", "0.1")]
    report = simulate(objects, ENQUEUE_ONLY)
    phases = {uid: group["phase"] for uid, group in report["podGroups"].items()}
    # 2 + 2 + 0.8 = 4.8 fits exactly; one more tenth does not
    assert phases == {"default/a": "Inqueue", "default/b": "Inqueue", "default/c": "Inqueue",
                      "default/d": "Pending"}


def test_factor_argument_lets_more_in():
    objects = [node("n1", cpu="4"), *job_with_min("first", "4"), *job_with_min("second", "4")]
    report = simulate(objects, conf_with_factor(2.0))
    assert report["podGroups"]["default/second"]["phase"] == "Inqueue"
    assert plugin_of(open_with(objects, conf_with_factor(2))).factor == 2.0


@pytest.mark.parametrize("factor", [0.5, 0, -3])
def test_factor_below_one_means_the_default(factor: float):
    plugin = plugin_of(open_with([node("n1", cpu="10")], conf_with_factor(factor)))
    assert plugin.factor == 1.2
    assert plugin.idle.cpu == pytest.approx(12000)


def test_bad_factor_is_a_conf_error():
    with pytest.raises(ConfError, match=r"overcommit-factor.*must be a number"):
        conf(conf_with_factor('"lots"'))


def test_room_is_less_what_pods_use_now():
    objects = [node("n1", cpu="4"),
               pod("other", cpu="3", node_name="n1", scheduler="default-scheduler"),
               *job_with_min("two", "2"), *job_with_min("smaller", "1.5")]
    session = open_with(objects)
    plugin = plugin_of(session)
    assert plugin.idle.cpu == pytest.approx(1800)
    vote = plugin.job_enqueueable(session.jobs["default/two"])
    assert isinstance(vote, Reject) and vote.reason == (
        "resource in cluster is overused: overused cpu")
    assert plugin.job_enqueueable(session.jobs["default/smaller"]) == PERMIT


def test_every_overused_resource_is_named():
    objects = [node("n1", cpu="4", memory="4Gi"),
               *job_with_min("huge", "10", memory="100Gi")]
    session = open_with(objects)
    vote = plugin_of(session).job_enqueueable(session.jobs["default/huge"])
    assert isinstance(vote, Reject)
    assert vote.reason == "resource in cluster is overused: overused cpu, overused memory"


def test_job_without_min_resources_is_permitted():
    objects = [node("n1", cpu="1"), podgroup("free", 1), pod("free-0", cpu="8", group="free")]
    session = open_with(objects)
    assert plugin_of(session).job_enqueueable(session.jobs["default/free"]) == PERMIT


def test_bare_pod_is_judged_by_its_request_without_a_podgroup_event():
    objects = [node("n1", cpu="4"), pod("solo", cpu="5")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert ("resource in cluster is overused: overused cpu"
            in report["pending"]["default/solo"])
    assert not any(e["object"].startswith("PodGroup/") for e in report["events"])


# --------------------------------------------------------------------------- what is held


def test_inqueue_job_holds_its_full_minimum_even_when_partly_running():
    objects = [node("n1", cpu="4"),
               podgroup("half", 4, min_resources={"cpu": "4"}, phase="Inqueue"),
               *[pod(f"half-{i}", group="half", node_name="n1") for i in range(2)],
               *[pod(f"half-{i}", group="half") for i in range(2, 4)],
               *job_with_min("next", "0.5")]
    session = open_with(objects)
    plugin = plugin_of(session)
    assert plugin.inqueue.cpu == pytest.approx(4000)
    assert plugin.idle.cpu == pytest.approx(2800)
    assert isinstance(plugin.job_enqueueable(session.jobs["default/next"]), Reject)


def test_running_job_holds_only_what_it_still_lacks():
    objects = [node("n1", cpu="8"),
               podgroup("ready", 2, min_resources={"cpu": "4"}, phase="Running"),
               *[pod(f"ready-{i}", group="ready", node_name="n1") for i in range(2)],
               podgroup("short", 3, min_resources={"cpu": "4"}, phase="Running"),
               *[pod(f"short-{i}", group="short", node_name="n1") for i in range(2)],
               pod("short-2", group="short")]
    plugin = plugin_of(open_with(objects))
    # `ready` has minMember placed and lacks 2 cpu; `short` is below minMember: nothing
    assert plugin.inqueue.cpu == pytest.approx(2000)


def test_scheduling_gated_pods_hold_no_room():
    objects = [node("n1", cpu="4"),
               podgroup("gated", 2, min_resources={"cpu": "2"}, phase="Inqueue"),
               pod("gated-0", group="gated"), pod("gated-1", group="gated", gates=["x/y"])]
    assert plugin_of(open_with(objects)).inqueue.cpu == pytest.approx(1000)


def test_admission_adds_to_what_is_held():
    objects = [node("n1", cpu="4"), *job_with_min("a", "3")]
    session = open_with(objects)
    plugin = plugin_of(session)
    plugin.job_enqueued(session.jobs["default/a"])
    assert plugin.inqueue.cpu == pytest.approx(3000)
    plugin.job_enqueued(session.jobs["default/a"])
    assert isinstance(plugin.job_enqueueable(session.jobs["default/a"]), Reject)


def test_overcommit_and_proportion_must_both_admit():
    both = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: proportion}]
"""
    objects = [node("n1", cpu="4"), queue("roomy", capability={"cpu": "100"}),
               podgroup("big", 1, queue="roomy", min_resources={"cpu": "6"}),
               pod("big-0", cpu="1", queue="roomy", group="big")]
    report = simulate(objects, both)
    assert report["podGroups"]["default/big"]["phase"] == "Pending"
    reasons = report["pending"]["default/big-0"]
    # overcommit (first in the tier) says why; proportion refuses too (4 cpu real capability)
    assert reasons[0] == "resource in cluster is overused: overused cpu" or reasons[
        0].startswith("queue resource quota insufficient: insufficient cpu (queue roomy")


# --------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 8), min_size=1, max_size=3),
       st.lists(st.integers(100, 6000), min_size=1, max_size=8))
def test_admitted_minimums_never_pass_total_times_factor(nodes: list[int],
                                                         minimums: list[int]):
    objects: list[dict] = [node(f"n{i}", cpu=str(cpu)) for i, cpu in enumerate(nodes)]
    for index, milli in enumerate(minimums):
        objects += job_with_min(f"j{index}", str(milli / 1000))
    report = simulate(objects, ENQUEUE_ONLY)
    admitted = [minimums[i] for i in range(len(minimums))
                if report["podGroups"][f"default/j{i}"]["phase"] == "Inqueue"]
    room = sum(nodes) * 1000 * 1.2
    assert sum(admitted) <= room + 0.1
    # nothing is refused that would still have fitted beside what was admitted
    refused = [m for i, m in enumerate(minimums)
               if report["podGroups"][f"default/j{i}"]["phase"] == "Pending"]
    assert all(sum(admitted) + m > room for m in refused)
