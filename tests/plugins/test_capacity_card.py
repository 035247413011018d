"""capacity-card: per-card-model queue quotas (seed 003) and the tidal reclaim policy
between inference and training (seed 002), on manifests shaped like the seeds'."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import (
    conf,
    node,
    open_session,
    pod,
    podgroup,
    priority_class,
    queue,
    simulate,
)
from tests.invariants import run_checked
from vscheduler.card_ledger import CardLedger
from vscheduler.framework.session import Session
from vscheduler.hookspecs import PERMIT, Reject
from vscheduler.model import Task, TaskStatus
from vscheduler.plugins.capacity_card import CapacityCardPlugin
from vscheduler.simulate import Simulation

S = TaskStatus
GPU = "nvidia.com/gpu"
H200, H20, H800 = "NVIDIA-H200", "NVIDIA-H20", "NVIDIA-H800"
RTX, RTX_D = "NVIDIA-GeForce-RTX-4090", "NVIDIA-GeForce-RTX-4090-D"
EITHER_4090 = f"{RTX}|{RTX_D}"
QUOTA, REQUEST, CARD = "volcano.sh/card.quota", "volcano.sh/card.request", "volcano.sh/card.name"

# Seed 003's conf.
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false}, {name: conformance}]
- plugins: [{name: drf, enablePreemptable: false}, {name: predicates},
            {name: capacity-card, arguments: {cardUnlimitedCpuMemory: true}}, {name: nodeorder}]
"""
CONF_LIMITED = CONF.replace("cardUnlimitedCpuMemory: true", "cardUnlimitedCpuMemory: false")
# Seed 002's conf.
TIDAL_CONF = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false},
            {name: conformance, enableReclaimable: false}]
- plugins:
  - name: predicates
  - name: capacity-card
    arguments:
      cardUnlimitedCpuMemory: true
      podOwnerReferenceToServiceType: {ReplicaSet: inference, Deployment: inference,
                                       Job: training}
  - name: nodeorder
"""
# The same plugins without the reclaim action: its hooks are tested on an open session.
TIDAL_HOOKS_CONF = TIDAL_CONF.replace(", reclaim", "")


def _reclaim_available() -> bool:
    """Is the reclaim action (written alongside this plugin) installed?"""
    try:
        conf(TIDAL_CONF)
    except Exception:
        return False
    return True


RECLAIM = _reclaim_available()


# --------------------------------------------------------------------------- builders


def card_labels(model: str, memory_mib: int = 143771, count: int = 8,
                **extra: str) -> dict[str, str]:
    """The labels GPU feature discovery puts on a node of `model`."""
    return {"nvidia.com/gpu.product": model, "nvidia.com/gpu.memory": str(memory_mib),
            "nvidia.com/gpu.count": str(count), **extra}


def gpu_node(name: str, model: str, cards: int = 8, cpu: str = "64",
             memory: str = "512Gi", **extra: str) -> dict[str, Any]:
    return node(name, cpu=cpu, memory=memory, labels=card_labels(model, count=cards),
                **{GPU: str(cards)}, **extra)


def card_queue(name: str, quota: dict[str, int] | str | None, **kwargs: Any) -> dict[str, Any]:
    annotations = {}
    if quota is not None:
        annotations[QUOTA] = quota if isinstance(quota, str) else json.dumps(quota)
    return queue(name, annotations=annotations, **kwargs)


def card_pod(name: str, card: str | None, cards: int = 1, *, resource: str = GPU,
             owner_kind: str = "ReplicaSet", cpu: str = "1", memory: str = "1Gi",
             annotations: dict[str, str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """A pod asking for `cards` of `resource`, naming `card` (None: no annotation)."""
    notes = dict(annotations or {})
    if card is not None:
        notes[CARD] = card
    return pod(name, cpu, memory, annotations=notes, owner_kind=owner_kind,
               **{resource: str(cards)}, **kwargs)


def plugin_of(session: Session) -> CapacityCardPlugin:
    return session.plugins["capacity-card"]


def task_of(session: Session, key: str) -> Task:
    return next(t for job in session.jobs.values() for t in job.tasks.values() if t.key == key)


def events_of(report: dict[str, Any], obj: str, reason: str | None = None) -> list[str]:
    return [e["message"] for e in report["events"] if e["object"] == obj
            and e["type"] == "Warning" and (reason is None or e["reason"] == reason)]


def session_events(session: Session, obj: str) -> list[str]:
    return [e.message for e in session.result.events if e.object == obj]


def bound(report: dict[str, Any], prefix: str) -> dict[str, str]:
    return {k: v for k, v in report["binds"].items() if k.startswith(f"default/{prefix}")}


# --------------------------------------------------------------------------- quotas


def test_a_quota_of_three_h200_binds_three_pods_and_tells_the_fourth_why():
    objects = [gpu_node("h200-1", H200), card_queue("cr-queue1", {H200: 3}),
               podgroup("deploy", 1, queue="cr-queue1", min_resources={"cpu": "1"})]
    objects += [card_pod(f"deploy-{i}", H200, group="deploy") for i in range(4)]
    report = simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/deploy-0", "default/deploy-1",
                                       "default/deploy-2"]
    message = ("Queue <cr-queue1> has insufficient <NVIDIA-H200> quota: requested <1000>, "
               "total would be <4000>, but capability is <3000>")
    assert events_of(report, "Pod/default/deploy-3", "InsufficientScalarQuota") == [message]
    assert report["pending"]["default/deploy-3"][0] == message
    assert report["queues"]["cr-queue1"]["cards"] == {H200: 3}


def test_pods_without_a_group_are_held_back_at_enqueue_with_the_same_words():
    objects = [gpu_node("h200-1", H200), card_queue("cr-queue1", {H200: 3})]
    objects += [card_pod(f"p{i}", H200, queue="cr-queue1") for i in range(4)]
    report = simulate(objects, CONF)
    assert len(report["binds"]) == 3
    assert "default/p3" not in report["binds"]
    assert events_of(report, "Pod/default/p3", "InsufficientScalarQuota") == [
        "Queue <cr-queue1> has insufficient <NVIDIA-H200> quota: requested <1000>, "
        "total would be <4000>, but capability is <3000>"]


def test_allocatable_refuses_with_the_numbers_and_an_event_on_the_pod():
    objects = [gpu_node("h200-1", H200, cards=8),
               card_pod("running", H200, 2, queue="q", node_name="h200-1"),
               card_queue("q", {H200: 3}), card_pod("p", H200, 2, queue="q")]
    session = open_session(objects, CONF)
    plugin = plugin_of(session)
    message = ("Queue <q> has insufficient <NVIDIA-H200> quota: requested <2000>, "
               "total would be <4000>, but capability is <3000>")
    assert plugin.allocatable(session.queues["q"], task_of(session, "default/p")) == message
    assert session_events(session, "Pod/default/p") == [message]
    assert plugin.ledger.queues["q"].allocated.scalars == {H200: 2000}


def test_a_queue_uses_only_the_cards_it_names():
    objects = [gpu_node("h200-1", H200), card_queue("q", {H20: 4}),
               card_pod("p", H200, queue="q"), card_pod("d", H200)]  # `d`: default queue
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert events_of(report, "Pod/default/p", "InsufficientScalarQuota") == [
        "Queue <q> has insufficient <NVIDIA-H200> quota: requested <1000>, total would be "
        "<1000>, but capability is <0>"]
    assert events_of(report, "Pod/default/d", "InsufficientScalarQuota")


def test_a_pod_without_a_card_name_is_charged_the_card_of_its_node():
    objects = [gpu_node("h200-1", H200), gpu_node("h20-1", H20),
               card_queue("q", {H20: 1}), card_pod("p", None, queue="q")]
    session = open_session(objects, CONF)
    plugin = plugin_of(session)
    task = task_of(session, "default/p")
    assert plugin.allocatable(session.queues["q"], task) is None
    refused = plugin.predicate(task, session.nodes["h200-1"])
    assert refused is not None and refused.reasons == (
        "node(s) had card NVIDIA-H200, whose quota in the pod's queue is used up",)
    assert plugin.predicate(task, session.nodes["h20-1"]) is None
    report = simulate(objects, CONF)
    assert report["binds"] == {"default/p": "h20-1"}
    assert report["queues"]["q"]["cards"] == {H20: 1}


def test_other_scalar_resources_are_not_limited():
    objects = [node("n1", **{"rdma/hca": "10"}), card_queue("q", {H200: 1}),
               *(pod(f"p{i}", queue="q", **{"rdma/hca": "2"}) for i in range(3))]
    assert len(simulate(objects, CONF)["binds"]) == 3


def test_cpu_and_memory_follow_the_capability_and_its_absence_is_no_limit():
    objects = [node("n1", cpu="16", memory="64Gi"),
               card_queue("capped", {}, capability={"cpu": "2", "memory": "2Gi"}),
               card_queue("open", {}),
               *(pod(f"c{i}", queue="capped") for i in range(3)),
               *(pod(f"o{i}", queue="open") for i in range(5))]
    report = simulate(objects, CONF)
    assert len(bound(report, "c")) == 2
    assert len(bound(report, "o")) == 5


def test_the_cpu_and_memory_messages_carry_milli_cpu_and_mi():
    objects = [node("n1", cpu="16", memory="64Gi"),
               card_queue("q", {}, capability={"cpu": "2", "memory": "2Gi"}),
               pod("held", "1500m", "1Gi", queue="q", node_name="n1"),
               pod("p", "1", "1536Mi", queue="q")]
    session = open_session(objects, CONF)
    reason = plugin_of(session).allocatable(session.queues["q"], task_of(session, "default/p"))
    assert reason == (
        "Queue <q> has insufficient CPU quota: requested <1000>, total would be <2500>, "
        "but capability is <2000>; Queue <q> has insufficient memory quota: requested "
        "<1536 Mi>, total would be <2560 Mi>, but capability is <2048 Mi>")


# --------------------------------------------------------------------------- A|B


def test_a_pod_that_accepts_either_card_prefers_the_first_and_falls_back_to_the_second():
    # The 4090 node is busier (other work on it), so the nodeorder scorers alone would
    # pick the 4090-D node: the listed preference must win.
    objects = [gpu_node("rtx-1", RTX, cards=4, cpu="8"), gpu_node("rtx-d-1", RTX_D, cards=4,
                                                                  cpu="64"),
               pod("other", "6", "8Gi", node_name="rtx-1", scheduler="default-scheduler"),
               card_queue("q", {RTX: 2, RTX_D: 2}),
               podgroup("svc", 1, queue="q", min_resources={"cpu": "1"})]
    objects += [card_pod(f"svc-{i}", EITHER_4090, group="svc", cpu="500m") for i in range(5)]
    report = simulate(objects, CONF)
    assert bound(report, "svc") == {"default/svc-0": "rtx-1", "default/svc-1": "rtx-1",
                                    "default/svc-2": "rtx-d-1", "default/svc-3": "rtx-d-1"}
    assert report["queues"]["q"]["cards"] == {RTX: 2, RTX_D: 2}
    assert events_of(report, "Pod/default/svc-4", "InsufficientScalarQuota") == [
        f"Queue <q> has insufficient <{RTX}> quota: requested <1000>, total would be "
        "<3000>, but capability is <2000>",
        f"Queue <q> has insufficient <{RTX_D}> quota: requested <1000>, total would be "
        "<3000>, but capability is <2000>"]


def test_node_order_scores_earlier_alternatives_higher_and_others_zero():
    objects = [gpu_node("rtx-1", RTX), gpu_node("rtx-d-1", RTX_D), gpu_node("h200-1", H200),
               card_queue("q", {RTX: 8, RTX_D: 8}),
               card_pod("either", EITHER_4090, queue="q"), card_pod("one", RTX, queue="q"),
               pod("cpu-only", queue="q")]
    session = open_session(objects, CONF)
    plugin = plugin_of(session)
    either, one, plain = (task_of(session, f"default/{n}") for n in ("either", "one",
                                                                    "cpu-only"))
    nodes = session.nodes
    assert plugin.node_order(either, nodes["rtx-1"]) > plugin.node_order(either,
                                                                         nodes["rtx-d-1"])
    assert plugin.node_order(either, nodes["rtx-d-1"]) == 0
    assert plugin.node_order(either, nodes["h200-1"]) == 0
    assert plugin.node_order(one, nodes["rtx-1"]) == 0
    assert plugin.node_order(plain, nodes["rtx-1"]) == 0


def test_predicate_refuses_cards_the_pod_does_not_accept_and_builds_nothing_per_call():
    objects = [gpu_node("rtx-1", RTX), gpu_node("h200-1", H200), node("cpu-1"),
               card_queue("q", {RTX: 8, H200: 8}), card_pod("p", RTX, queue="q"),
               pod("cpu-only", queue="q")]
    session = open_session(objects, CONF)
    plugin = plugin_of(session)
    task, plain = task_of(session, "default/p"), task_of(session, "default/cpu-only")
    first = plugin.predicate(task, session.nodes["h200-1"])
    assert first is not None and not first.resolvable
    assert first.reasons == ("node(s) had card NVIDIA-H200, which the pod does not accept",)
    assert plugin.predicate(task, session.nodes["h200-1"]) is first  # the same object
    assert plugin.predicate(task, session.nodes["rtx-1"]) is None
    # A node that has no card at all is not one a pod naming a card accepts.
    assert plugin.predicate(task, session.nodes["cpu-1"]) is not None
    assert all(plugin.predicate(plain, n) is None for n in session.node_list)


@pytest.mark.parametrize("grouped", [False, True], ids=["bare pod", "pod of a group"])
def test_alternatives_mixing_resource_names_are_refused_with_a_clear_reason(grouped):
    # A pod without a group is stopped at enqueue, a group's pod at allocate: the same
    # reason, on the Pod, either way.
    mixed = f"{RTX}|NVIDIA-H20/mig-1g.24gb-mixed"
    objects = [gpu_node("rtx-1", RTX), card_queue("q", {RTX: 8})]
    if grouped:
        objects += [podgroup("svc", 1, queue="q", min_resources={"cpu": "1"}),
                    card_pod("mixed", mixed, group="svc")]
    else:
        objects += [card_pod("mixed", mixed, queue="q")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    [message] = events_of(report, "Pod/default/mixed", "InvalidCardName")
    assert message == (
        f"Pod default/mixed: volcano.sh/card.name: cards {mixed} mix kinds of card "
        f"({RTX} is a whole card, NVIDIA-H20/mig-1g.24gb-mixed is a MIG sub-card (1g.24gb)); "
        "the alternatives of one pod must use the same resource name")
    assert report["pending"]["default/mixed"][0] == message


def test_pods_alike_share_card_facts_but_a_malformed_name_is_each_pod_own():
    """The ledger reads the card facts of pods alike (queue, card name, requests) once;
    a card name that cannot be used is still reported against each pod by name."""
    mixed = f"{RTX}|NVIDIA-H20/mig-1g.24gb-mixed"
    objects = [gpu_node("rtx-1", RTX), card_queue("q", {RTX: 8}),
               *(card_pod(f"bad-{i}", mixed, queue="q") for i in range(2)),
               *(card_pod(f"good-{i}", RTX, queue="q") for i in range(2))]
    report = simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/good-0", "default/good-1"]
    for name in ("bad-0", "bad-1"):
        [message] = events_of(report, f"Pod/default/{name}", "InvalidCardName")
        assert message.startswith(f"Pod default/{name}: volcano.sh/card.name: cards {mixed}")
    session = open_session(objects, CONF)
    ledger = session.plugins["capacity-card"].ledger
    facts = {t.name: ledger.task(t) for job in session.jobs.values()
             for t in job.tasks.values()}
    assert facts["good-0"] is facts["good-1"]
    assert facts["bad-0"] is not facts["bad-1"]


def test_alternatives_the_nodes_offer_under_different_resources_are_refused():
    npu = node("npu-1", labels={"huawei.com/npu.product": "Ascend-910B",
                                "huawei.com/npu.memory": "65536"},
               **{"huawei.com/Ascend910": "8"})
    objects = [gpu_node("h200-1", H200), npu, card_queue("q", {H200: 8, "Ascend-910B": 8}),
               card_pod("p", f"{H200}|Ascend-910B", queue="q")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    [message] = events_of(report, "Pod/default/p", "InvalidCardName")
    assert "use different resource names" in message
    assert "NVIDIA-H200 is nvidia.com/gpu" in message


def test_a_card_name_that_does_not_match_the_requested_resource_is_refused():
    objects = [gpu_node("h200-1", H200, **{"nvidia.com/mig-1g.18gb": "3"}),
               card_queue("q", {H200: 8}),
               card_pod("p", H200, resource="nvidia.com/mig-1g.18gb", queue="q")]
    [message] = events_of(simulate(objects, CONF), "Pod/default/p", "InvalidCardName")
    assert "card(s) NVIDIA-H200 are resource nvidia.com/gpu" in message
    assert "asks for nvidia.com/mig-1g.18gb" in message


# --------------------------------------------------------------------------- sub-cards


def mig_node(name: str = "h200-mig") -> dict[str, Any]:
    """Seed 003's node: 8 H200, 7 whole and one split into 1 x 3g.71gb + 3 x 1g.18gb."""
    labels = card_labels(H200, **{"nvidia.com/mig-1g.18gb.count": "3",
                                  "nvidia.com/mig-1g.18gb.product": "NVIDIA-H200-MIG-1g.18gb",
                                  "nvidia.com/mig-1g.18gb.memory": "16384",
                                  "nvidia.com/mig.strategy": "mixed"})
    return node(name, cpu="64", memory="512Gi", labels=labels,
                **{GPU: "7", "nvidia.com/mig-1g.18gb": "3", "nvidia.com/mig-3g.71gb": "1"})


def mps_node(name: str = "h800-mps") -> dict[str, Any]:
    labels = card_labels(H800, memory_mib=81920, count=8, **{"nvidia.com/gpu.replicas": "2"})
    return node(name, cpu="64", memory="512Gi", labels=labels,
                **{GPU: "6", "nvidia.com/gpu.shared": "4"})


def test_mig_and_mps_cards_are_detected_from_the_node_objects():
    session = open_session([mig_node(), mps_node(), node("cpu-1")], CONF)
    plugin = plugin_of(session)
    assert plugin.ledger.node_cards["cpu-1"] is None
    assert plugin.ledger.node_cards["h200-mig"].amounts == {
        H200: 7000, f"{H200}/mig-1g.18gb-mixed": 3000, f"{H200}/mig-3g.71gb-mixed": 1000}
    assert plugin.ledger.node_cards["h800-mps"].amounts == {H800: 6000, f"{H800}/mps-80g*1/2": 4000}
    assert plugin.ledger.total.scalars == {
        H200: 7000, f"{H200}/mig-1g.18gb-mixed": 3000, f"{H200}/mig-3g.71gb-mixed": 1000,
        H800: 6000, f"{H800}/mps-80g*1/2": 4000}
    assert plugin.ledger.total.cpu == 64000 * 2 + 8000


def test_sub_cards_and_whole_cards_are_charged_separately():
    mig, mps = f"{H200}/mig-1g.18gb-mixed", f"{H800}/mps-80g*1/2"
    objects = [mig_node(), mps_node(),
               card_queue("q", {H200: 1, mig: 2, mps: 1}),
               card_pod("whole", H200, queue="q"),
               *(card_pod(f"mig{i}", mig, resource="nvidia.com/mig-1g.18gb", queue="q")
                 for i in range(3)),
               *(card_pod(f"mps{i}", mps, resource="nvidia.com/gpu.shared", queue="q")
                 for i in range(2))]
    report = simulate(objects, CONF)
    assert report["binds"]["default/whole"] == "h200-mig"
    assert len(bound(report, "mig")) == 2
    assert len(bound(report, "mps")) == 1
    assert report["queues"]["q"]["cards"] == {H200: 1, mig: 2, mps: 1}


# --------------------------------------------------------------------------- enqueue


def test_a_job_card_request_is_checked_before_its_pods_exist():
    objects = [gpu_node("h200-1", H200), card_queue("q", {H200: 3}),
               card_pod("running", H200, 2, queue="q", node_name="h200-1"),
               podgroup("fits", 1, queue="q", min_resources={"cpu": "1"},
                        annotations={REQUEST: '{"NVIDIA-H200": 1}'},
                        creation="2024-01-01T00:00:00Z"),
               podgroup("big", 1, queue="q", min_resources={"cpu": "1"},
                        annotations={REQUEST: '{"NVIDIA-H200": 2}'},
                        creation="2024-01-02T00:00:00Z")]
    report = simulate(objects, CONF)
    assert report["podGroups"]["default/fits"]["phase"] == "Inqueue"
    assert report["podGroups"]["default/big"]["phase"] == "Pending"
    assert events_of(report, "PodGroup/default/big", "InsufficientScalarQuota") == [
        "Queue <q> has insufficient <NVIDIA-H200> quota: requested <2000>, total would be "
        "<5000>, but capability is <3000>"]


def test_admitted_jobs_hold_their_request_against_the_next_ones():
    objects = [gpu_node("h200-1", H200), card_queue("q", {H200: 3})]
    objects += [podgroup(f"job{i}", 1, queue="q", min_resources={"cpu": "1"},
                         annotations={REQUEST: '{"NVIDIA-H200": 2}'},
                         creation=f"2024-01-0{i + 1}T00:00:00Z") for i in range(2)]
    report = simulate(objects, CONF)
    assert report["podGroups"]["default/job0"]["phase"] == "Inqueue"
    assert report["podGroups"]["default/job1"]["phase"] == "Pending"
    assert events_of(report, "PodGroup/default/job1") == [
        "Queue <q> has insufficient <NVIDIA-H200> quota: requested <2000>, total would be "
        "<4000>, but capability is <3000>"]


def test_once_pods_exist_their_own_requests_count_instead_of_the_annotation():
    objects = [gpu_node("h200-1", H200), card_queue("q", {H200: 3}),
               podgroup("hpa", 1, queue="q", min_resources={"cpu": "1"},
                        annotations={REQUEST: '{"NVIDIA-H200": 10}'}),
               card_pod("hpa-0", H200, group="hpa")]
    session = open_session(objects, CONF)
    assert plugin_of(session).job_enqueueable(session.jobs["default/hpa"]) == PERMIT
    assert simulate(objects, CONF)["binds"] == {"default/hpa-0": "h200-1"}


def test_a_request_for_either_card_is_measured_against_both_quotas():
    objects = [gpu_node("rtx-1", RTX), card_queue("q", {RTX: 2, RTX_D: 2}),
               podgroup("fits", 1, queue="q", min_resources={"cpu": "1"},
                        annotations={REQUEST: json.dumps({EITHER_4090: 3})}),
               podgroup("big", 1, queue="q", min_resources={"cpu": "1"},
                        annotations={REQUEST: json.dumps({EITHER_4090: 5})})]
    session = open_session(objects, CONF)
    plugin = plugin_of(session)
    assert plugin.job_enqueueable(session.jobs["default/fits"]) == PERMIT
    vote = plugin.job_enqueueable(session.jobs["default/big"])
    assert isinstance(vote, Reject)
    assert vote.reason == (f"Queue <q> has insufficient <{EITHER_4090}> quota: requested "
                           "<5000>, total would be <5000>, but capability is <4000>")


def test_a_malformed_card_request_keeps_the_job_out_with_the_reason():
    objects = [gpu_node("h200-1", H200), card_queue("q", {H200: 3}),
               podgroup("bad", 1, queue="q", min_resources={"cpu": "1"},
                        annotations={REQUEST: '{"NVIDIA-H200": -2}'})]
    report = simulate(objects, CONF)
    assert report["podGroups"]["default/bad"]["phase"] == "Pending"
    [message] = events_of(report, "PodGroup/default/bad", "InvalidCardRequest")
    assert "volcano.sh/card.request" in message and "0 or more" in message


def test_an_infinite_card_request_is_refused_not_a_crash():
    card_conf = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: capacity-card}, {name: nodeorder}]
"""
    group = podgroup("g", 1, annotations={REQUEST: '{"A": 1e308}'})
    report = simulate([node("n1"), group], card_conf)
    assert report["podGroups"]["default/g"]["phase"] == "Pending"
    assert any(e["object"] == "PodGroup/default/g" and e["type"] == "Warning"
               for e in report["events"])


def test_a_closed_queue_admits_nothing():
    objects = [gpu_node("h200-1", H200), card_queue("q", {H200: 3}, state="Closed"),
               podgroup("pg", 1, queue="q", min_resources={"cpu": "1"})]
    session = open_session(objects, CONF)
    vote = plugin_of(session).job_enqueueable(session.jobs["default/pg"])
    assert isinstance(vote, Reject) and "Closed" in vote.reason


def test_elastic_tasks_beyond_min_member_leave_room_for_admission():
    # `elastic` runs 3 cards with minMember 1: two of them are elastic, so a job asking
    # for 2 more still fits a quota of 3 at enqueue (allocate then decides per pod).
    objects = [gpu_node("h200-1", H200), card_queue("q", {H200: 3}),
               podgroup("elastic", 1, queue="q", min_resources={"cpu": "1"}, phase="Running"),
               *(card_pod(f"elastic-{i}", H200, group="elastic", node_name="h200-1")
                 for i in range(3)),
               podgroup("next", 1, queue="q", min_resources={"cpu": "1"},
                        annotations={REQUEST: '{"NVIDIA-H200": 2}'})]
    session = open_session(objects, CONF)
    attr = plugin_of(session).ledger.queues["q"]
    assert attr.allocated.scalars == {H200: 3000}
    assert attr.elastic.scalars == {H200: 2000}
    assert plugin_of(session).job_enqueueable(session.jobs["default/next"]) == PERMIT


# --------------------------------------------------------------------------- arguments


def test_card_pods_are_not_limited_on_cpu_and_memory_when_the_argument_says_so():
    objects = [gpu_node("h200-1", H200), node("cpu-1", cpu="16"),
               card_queue("q", {H200: 8}, capability={"cpu": "2", "memory": "4Gi"}),
               podgroup("train", 1, queue="q", min_resources={"cpu": "1"}),
               *(card_pod(f"train-{i}", H200, group="train", cpu="1") for i in range(3)),
               podgroup("web", 1, queue="q", min_resources={"cpu": "1"}),
               *(pod(f"web-{i}", group="web") for i in range(3))]
    unlimited = simulate(objects, CONF)
    assert len(bound(unlimited, "train")) == 3
    # The card pods' cpu is not counted either: the cpu pods still get their 2 cpus.
    assert len(bound(unlimited, "web")) == 2

    limited = simulate(objects, CONF_LIMITED)
    assert len(bound(limited, "train")) + len(bound(limited, "web")) == 2
    refused = [m for e in ("train-2", "web-2") for m in events_of(
        limited, f"Pod/default/{e}", "InsufficientCPUQuota")]
    assert ("Queue <q> has insufficient CPU quota: requested <1000>, total would be <3000>, "
            "but capability is <2000>") in refused


def test_over_commit_factor_bounds_what_the_whole_cluster_admits():
    def objects(quota: int) -> list[dict[str, Any]]:
        return [gpu_node("h200-1", H200, cards=4),
                card_queue("a", {H200: quota}), card_queue("b", {H200: quota}),
                podgroup("ja", 1, queue="a", min_resources={"cpu": "1"},
                         annotations={REQUEST: '{"NVIDIA-H200": 3}'},
                         creation="2024-01-01T00:00:00Z"),
                podgroup("jb", 1, queue="b", min_resources={"cpu": "1"},
                         annotations={REQUEST: '{"NVIDIA-H200": 3}'},
                         creation="2024-01-02T00:00:00Z")]
    phases = {}
    for factor in (1, 2):
        report = simulate(objects(8), CONF.replace(
            "cardUnlimitedCpuMemory: true",
            f"cardUnlimitedCpuMemory: true, overCommitFactor: {factor}"))
        phases[factor] = {k: v["phase"] for k, v in report["podGroups"].items()}
        if factor == 1:
            [message] = events_of(report, "PodGroup/default/jb", "InsufficientClusterResource")
            assert message == ("Cluster has insufficient <NVIDIA-H200> for queue <b>: "
                               "requested <3000>, total would be <6000>, but the cluster "
                               "holds <4000> with overCommitFactor 1")
    assert phases[1] == {"default/ja": "Inqueue", "default/jb": "Pending"}
    assert phases[2] == {"default/ja": "Inqueue", "default/jb": "Inqueue"}
    # Off by default: quotas alone decide, and they may over-commit the cluster.
    report = simulate(objects(8), CONF)
    assert {v["phase"] for v in report["podGroups"].values()} == {"Inqueue"}


def test_arguments_have_their_documented_defaults():
    session = open_session([node("n1")], """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: capacity-card}]
""")
    plugin = plugin_of(session)
    assert plugin.unlimited is False
    assert plugin.owner_types == {}
    assert plugin.overcommit == 0.0


def test_a_bad_argument_type_is_a_conf_error():
    from vscheduler.conf import ConfError
    with pytest.raises(ConfError, match="podOwnerReferenceToServiceType"):
        conf("""
actions: "allocate"
tiers:
- plugins: [{name: capacity-card, arguments: {podOwnerReferenceToServiceType: inference}}]
""")



@pytest.mark.parametrize("mapping", ["{ReplicaSet: inferense}", "{Job: trainig}",
                                     "{Job: [training]}", "{1: training}"])
def test_a_service_type_that_is_neither_inference_nor_training_is_a_conf_error(mapping):
    """A misspelt type left such jobs of unknown type, with nothing said: training
    jobs were never reclaimed from."""
    from vscheduler.conf import ConfError
    with pytest.raises(ConfError, match="maps owner kinds to inference or training"):
        conf(f"""
actions: "allocate"
tiers:
- plugins: [{{name: capacity-card, arguments: {{podOwnerReferenceToServiceType: {mapping}}}}}]
""")
    plugin_conf = conf("""
actions: "allocate"
tiers:
- plugins: [{name: capacity-card, arguments: {podOwnerReferenceToServiceType:
    {ReplicaSet: ' Inference ', Job: TRAINING}}}]
""")
    assert plugin_conf.tiers[0][0].args["podOwnerReferenceToServiceType"] == {
        "ReplicaSet": "inference", "Job": "training"}


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("quota", ["{not json", '{"NVIDIA-H200": -1}', '["NVIDIA-H200"]'])
def test_a_malformed_quota_is_a_warning_and_the_queue_gets_no_cards(quota):
    objects = [gpu_node("h200-1", H200), card_queue("q", quota),
               card_pod("gpu", H200, queue="q"), pod("cpu", queue="q")]
    report = simulate(objects, CONF)
    assert report["binds"] == {"default/cpu": "h200-1"}
    [warning] = events_of(report, "Queue/q", "InvalidCardQuota")
    assert warning.startswith("Queue <q>: volcano.sh/card.quota") and "no cards" in warning


def test_a_node_with_malformed_card_labels_has_no_cards_and_is_otherwise_used():
    bad = node("bad", labels={"nvidia.com/gpu.product": H200, "nvidia.com/gpu.memory": "lots"},
               **{GPU: "4"})
    objects = [bad, card_queue("q", {H200: 8}),
               card_pod("named", H200, queue="q"), card_pod("unnamed", None, queue="q"),
               pod("cpu", queue="q")]
    report = simulate(objects, CONF)
    assert report["binds"] == {"default/unnamed": "bad", "default/cpu": "bad"}
    assert "node(s) had no card model the pod accepts" in report["pending"]["default/named"][0]
    assert report["queues"]["q"]["cards"] == {H200: 0}


def test_a_cluster_smaller_than_its_quotas_schedules_what_fits():
    objects = [gpu_node("h200-1", H200, cards=2), card_queue("q", {H200: 10, H20: 10})]
    objects += [card_pod(f"p{i}", H200, queue="q") for i in range(4)]
    objects += [card_pod("h20", H20, queue="q")]
    report = simulate(objects, CONF, sessions=2)
    assert len(bound(report, "p")) == 2
    assert "default/h20" in report["pending"]
    assert report["queues"]["q"]["cards"] == {H200: 2, H20: 0}


def test_the_report_lists_the_cards_of_queues_with_a_quota_or_usage():
    objects = [gpu_node("h200-1", H200), card_queue("q", {H200: 2, H20: 1}),
               card_queue("idle", {H800: 4}), card_queue("none", None),
               card_pod("p", H200, queue="q")]
    queues = simulate(objects, CONF)["queues"]
    assert queues["q"]["cards"] == {H200: 1, H20: 0}
    assert queues["idle"]["cards"] == {H800: 0}
    assert "cards" not in queues["none"]
    assert "cards" not in queues["default"]


# --------------------------------------------------------------------------- accounting


def test_the_report_counts_no_cards_of_a_gang_only_pipelined():
    # Two of the gang's three pods fit now, the third waits on a card being released:
    # the gang is pipelined, nothing of it is committed, so its queue holds no card yet
    # (what the report says and the daemon writes to the Queue's status).
    releasing = card_pod("old", H200, queue="q", node_name="h200-2",
                         scheduler="default-scheduler")
    releasing["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    objects = [gpu_node("h200-1", H200, cards=2), gpu_node("h200-2", H200, cards=1),
               card_queue("q", {H200: 8}), releasing,
               podgroup("gang", 3, queue="q", min_resources={"cpu": "3"}),
               *(card_pod(f"gang-{i}", H200, group="gang") for i in range(3))]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert list(report["pipelined"].values()) == ["h200-2"]
    assert len([k for k in report["pending"] if k.startswith("default/gang-")]) == 2
    assert report["queues"]["q"]["cards"] == {H200: 0}


def test_allocation_and_pipelining_count_the_node_card_and_rolling_back_uncounts_it():
    objects = [gpu_node("rtx-d-1", RTX_D), card_queue("q", {RTX: 4, RTX_D: 4}),
               card_pod("p", EITHER_4090, 2, queue="q"), card_pod("w", EITHER_4090, queue="q")]
    session = open_session(objects, CONF)
    attr = plugin_of(session).ledger.queues["q"]
    node_ = session.nodes["rtx-d-1"]
    statement = session.statement()
    assert statement.allocate(task_of(session, "default/p"), node_) is None
    assert statement.pipeline(task_of(session, "default/w"), node_) is None
    assert attr.allocated.scalars == {RTX_D: 3000}
    statement.discard()
    assert attr.allocated.scalars == {RTX_D: 0}


def test_a_placement_past_the_quota_is_refused_whatever_action_makes_it():
    objects = [gpu_node("h200-1", H200), card_queue("q", {H200: 1}),
               card_pod("a", H200, queue="q"), card_pod("b", H200, queue="q")]
    session = open_session(objects, CONF)
    attr = plugin_of(session).ledger.queues["q"]
    statement = session.statement()
    assert statement.allocate(task_of(session, "default/a"), session.nodes["h200-1"]) is None
    error = statement.allocate(task_of(session, "default/b"), session.nodes["h200-1"])
    assert error == ("Queue <q> has insufficient <NVIDIA-H200> quota: requested <1000>, "
                     "total would be <2000>, but capability is <1000>")
    assert attr.allocated.scalars == {H200: 1000}
    assert task_of(session, "default/b").status == S.PENDING


# --------------------------------------------------------------------------- generated


MODELS = [H200, H20, RTX, RTX_D]


@st.composite
def card_clusters(draw: st.DrawFn, capped: bool = True) -> list[dict[str, Any]]:
    """Nodes with fewer cards than the quotas, some with malformed labels; queues with
    quotas (some malformed) and, if `capped`, cpu and memory capabilities; pods naming
    cards, alternatives, bad names or none."""
    objects: list[dict[str, Any]] = [priority_class("pc-high", 80000),
                                     priority_class("pc-low", 20000)]
    for i in range(draw(st.integers(1, 4))):
        model = draw(st.sampled_from(MODELS))
        labels = card_labels(model, count=2)
        mangle = draw(st.sampled_from([None, None, "memory", "product", "count", "extra"]))
        if mangle == "memory":
            labels["nvidia.com/gpu.memory"] = draw(st.sampled_from(["", "x", "-1", "0"]))
        elif mangle == "product":
            labels["nvidia.com/gpu.product"] = draw(st.sampled_from(["", "a b", "A|B"]))
        elif mangle == "count":
            labels["nvidia.com/gpu.count"] = "two"
        elif mangle == "extra":
            labels["huawei.com/npu.product"] = "Ascend-910B"
            labels["huawei.com/npu.memory"] = "65536"
        objects.append(node(f"n{i}", cpu="8", memory="32Gi", labels=labels,
                            **{GPU: str(draw(st.integers(0, 2)))}))
    queue_names = ["qa", "qb"]
    for name in queue_names:
        quota = draw(st.one_of(
            st.dictionaries(st.sampled_from(MODELS), st.integers(0, 6), max_size=3).map(
                json.dumps),
            st.sampled_from(["{bad", '{"NVIDIA-H200": -3}'])))
        capability = draw(st.sampled_from([None, {"cpu": "3"}, {"cpu": "2", "memory": "2Gi"}])
                          if capped else st.none())
        objects.append(queue(name, annotations={QUOTA: quota}, capability=capability))
    names = [*MODELS, EITHER_4090, f"{H200}|{H20}", f"{RTX}|{H20}/mig-1g.24gb-mixed", "A||B",
             None]
    for i in range(draw(st.integers(1, 8))):
        card = draw(st.sampled_from(names))
        cards = draw(st.integers(0, 2))
        objects.append(card_pod(f"p{i}", card, cards, queue=draw(st.sampled_from(queue_names)),
                                priority_class=draw(st.sampled_from(["pc-high", "pc-low"]))))
    return objects


def _cards_used(simulation: Simulation) -> dict[str, dict[str, float]]:
    """Per queue, the cards its placed pods hold, recomputed from the cache."""
    from vscheduler.cards import node_cards
    cache = simulation.cache
    used: dict[str, dict[str, float]] = {}
    for task in cache.tasks.values():
        job = cache.jobs.get(task.job_id)
        node_ = cache.nodes.get(task.node_name)
        if job is None or node_ is None or not task.status & (S.BOUND | S.RUNNING):
            continue
        cards = node_cards(node_.labels, node_.allocatable)
        for resource, amount in task.resreq.scalars.items():
            card = cards.by_resource.get(resource) if cards is not None else None
            if card is not None:
                counts = used.setdefault(job.queue, {})
                counts[card] = counts.get(card, 0.0) + amount / 1000
    return used


# The shared invariant checker counts every pod's cpu against `spec.capability`; under
# cardUnlimitedCpuMemory card pods are exempt on purpose, so capabilities are drawn only
# with the conf that limits them.
GENERATED = st.one_of(
    st.tuples(card_clusters(capped=True), st.just(CONF_LIMITED)),
    st.tuples(card_clusters(capped=False),
              st.sampled_from([CONF, TIDAL_CONF] if RECLAIM else [CONF])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GENERATED)
def test_generated_card_clusters_keep_every_invariant_and_every_quota(case):
    objects, conf_text = case
    simulation = Simulation(conf(conf_text))
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    run_checked(simulation, 3)
    quotas = {}
    for name, queue_ in simulation.cache.queues.items():
        try:
            quotas[name] = json.loads(queue_.annotations.get(QUOTA, "{}"))
        except ValueError:
            quotas[name] = {}
        if not isinstance(quotas[name], dict) or any(v < 0 for v in quotas[name].values()):
            quotas[name] = {}
    for name, counts in _cards_used(simulation).items():
        for card, count in counts.items():
            assert count <= quotas.get(name, {}).get(card, 0), (name, card, count)
    report = simulation.report.as_dict()
    for name, status in report["queues"].items():
        for card, count in status.get("cards", {}).items():
            assert count == _cards_used(simulation).get(name, {}).get(card, 0)


# --------------------------------------------------------------------------- tidal


def tidal_world(extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Seed 002: one 4090 node, an inference queue and a training queue, the four
    priority classes."""
    return [priority_class("pc-highest", 80000), priority_class("pc-high", 60000),
            priority_class("pc-medium", 40000), priority_class("pc-low", 20000),
            gpu_node("rtx-1", RTX, cards=8),
            card_queue("queue-inference", {RTX: 8}, priority=80000, reclaimable=False,
                       capability={"cpu": "4", "memory": "4Gi"}),
            card_queue("queue-training", {RTX: 8}, priority=20000, reclaimable=True,
                       capability={"cpu": "4", "memory": "4Gi"}),
            *(extra or [])]


def training_job(name: str, pods: int, cards: int, *, running: bool = True,
                 annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    objects = [podgroup(name, pods, queue="queue-training", priority_class="pc-low",
                        min_resources={"cpu": "100m"}, annotations=annotations,
                        phase="Running" if running else None)]
    objects += [card_pod(f"{name}-{i}", RTX, cards, group=name, owner_kind="Job",
                         cpu="100m", memory="100Mi", priority_class="pc-low",
                         node_name="rtx-1" if running else None) for i in range(pods)]
    return objects


def inference_pod(name: str, cards: int, **kwargs: Any) -> dict[str, Any]:
    return card_pod(name, RTX, cards, queue="queue-inference", owner_kind="ReplicaSet",
                    cpu="100m", memory="100Mi", priority_class="pc-highest", **kwargs)


def test_service_type_comes_from_the_job_annotation_else_the_owner_kind():
    objects = tidal_world([
        *training_job("train", 1, 1),
        inference_pod("web", 1),
        inference_pod("declared", 1, annotations={"volcano.sh/service.type": "training"}),
        card_pod("orphan", RTX, queue="queue-training", owner_kind="StatefulSet"),
        card_pod("odd", RTX, queue="queue-training",
                 annotations={"volcano.sh/service.type": "batch"}, owner_kind="Job"),
    ])
    session = open_session(objects, TIDAL_HOOKS_CONF)
    plugin = plugin_of(session)
    kinds = {key: plugin.service_type(task_of(session, f"default/{key}"))
             for key in ("train-0", "web", "declared", "orphan", "odd")}
    assert kinds == {"train-0": "training", "web": "inference", "declared": "training",
                     "orphan": "unknown", "odd": "unknown"}


def test_reclaimable_lets_inference_take_training_only():
    objects = tidal_world([
        *training_job("train", 2, 2),
        card_pod("infer-running", RTX, 2, queue="queue-inference", node_name="rtx-1"),
        card_pod("unknown-running", RTX, 1, queue="queue-training", owner_kind="StatefulSet",
                 node_name="rtx-1"),
        inference_pod("web", 4),
        card_pod("trainer", RTX, 4, queue="queue-training", owner_kind="Job"),
        card_pod("nobody", RTX, 1, queue="queue-inference", owner_kind="StatefulSet"),
    ])
    session = open_session(objects, TIDAL_HOOKS_CONF)
    plugin = plugin_of(session)
    candidates = [task_of(session, f"default/{k}") for k in
                  ("train-0", "infer-running", "unknown-running", "train-1")]
    web, trainer, nobody = (task_of(session, f"default/{k}") for k in
                            ("web", "trainer", "nobody"))
    assert [t.name for t in plugin.reclaimable(web, candidates)] == ["train-0", "train-1"]
    assert plugin.reclaimable(trainer, candidates) == []
    # A reclaimer of unknown type may take training tasks, as the seed's code does.
    assert [t.name for t in plugin.reclaimable(nobody, candidates)] == ["train-0", "train-1"]
    # Through the session's tier rules: the first tier abstains, capacity-card decides.
    assert [t.name for t in session.reclaimable(web, candidates)] == ["train-0", "train-1"]
    assert session.reclaimable(trainer, candidates) == []


def test_preemptive_needs_an_open_queue_and_room_in_its_quota_with_events():
    objects = tidal_world([
        card_pod("held", RTX, 6, queue="queue-inference", node_name="rtx-1"),
        inference_pod("small", 2), inference_pod("big", 3),
        card_pod("hungry", None, 0, queue="queue-training", cpu="5", owner_kind="Job"),
        card_queue("queue-closed", {RTX: 8}, priority=80000, state="Closed"),
        card_pod("shut", RTX, 1, queue="queue-closed"),
    ])
    session = open_session(objects, TIDAL_HOOKS_CONF)
    plugin = plugin_of(session)
    queues = session.queues
    assert plugin.preemptive(queues["queue-inference"], task_of(session, "default/small")) \
        is None
    message = (f"Queue <queue-inference> has insufficient <{RTX}> quota: requested <3000>, "
               "total would be <9000>, but capability is <8000>")
    assert plugin.preemptive(queues["queue-inference"], task_of(session, "default/big")) \
        == message
    assert session_events(session, "Pod/default/big") == [message]
    cpu = ("Queue <queue-training> has insufficient CPU quota: requested <5000>, total "
           "would be <5000>, but capability is <4000>")
    assert plugin.preemptive(queues["queue-training"], task_of(session, "default/hungry")) \
        == cpu
    closed = plugin.preemptive(queues["queue-closed"], task_of(session, "default/shut"))
    assert closed is not None and "Closed" in closed
    assert session_events(session, "Pod/default/shut") == [closed]


def test_queue_order_serves_higher_priority_queues_first():
    session = open_session(tidal_world(), TIDAL_HOOKS_CONF)
    plugin = plugin_of(session)
    inference, training = session.queues["queue-inference"], session.queues["queue-training"]
    assert plugin.queue_order(inference, training) < 0
    assert plugin.queue_order(training, inference) > 0
    assert session.queue_less(inference, training)


@pytest.mark.skipif(not RECLAIM, reason="the reclaim action is not installed")
def test_tidal_inference_reclaims_a_training_gang_whole_and_gets_its_cards():
    # The node is full of a training gang (2 pods x 4 cards). An inference pod asking for
    # 4 cards evicts the whole gang (never half of it) and waits for the cards.
    objects = tidal_world([*training_job("train", 2, 4), inference_pod("web", 4)])
    report = simulate(objects, TIDAL_CONF, sessions=1)
    assert sorted(e["pod"] for e in report["evictions"]) == ["default/train-0",
                                                              "default/train-1"]
    assert {e["for"] for e in report["evictions"]} == {"default/web"}
    assert report["pipelined"] == {"default/web": "rtx-1"}
    later = simulate(objects, TIDAL_CONF, sessions=3)
    assert later["binds"] == {"default/web": "rtx-1"}
    assert later["queues"]["queue-inference"]["cards"] == {RTX: 4}


def reclaim_refusals_world() -> list[dict[str, Any]]:
    """A 4090 node full of a training gang, wanted by a training pod of another training
    queue; an H200 node full of inference pods in a reclaimable queue, wanted by a
    higher-priority inference queue."""
    return tidal_world([
        *training_job("train", 2, 4),
        card_queue("queue-training-2", {RTX: 8}, priority=20000, reclaimable=True),
        card_pod("late-train", RTX, 4, queue="queue-training-2", owner_kind="Job",
                 priority_class="pc-high"),
        gpu_node("h200-1", H200, cards=4),
        card_queue("queue-inference-b", {H200: 4}, priority=20000, reclaimable=True),
        *(card_pod(f"infer-b-{i}", H200, 2, queue="queue-inference-b", node_name="h200-1",
                   priority_class="pc-low") for i in range(2)),
        card_queue("queue-inference-a", {H200: 4}, priority=80000, reclaimable=False),
        card_pod("infer-a", H200, 2, queue="queue-inference-a", priority_class="pc-highest"),
    ])


@pytest.mark.skipif(not RECLAIM, reason="the reclaim action is not installed")
def test_tidal_training_never_reclaims_and_inference_never_reclaims_inference():
    report = simulate(reclaim_refusals_world(), TIDAL_CONF, sessions=2)
    assert report["evictions"] == []
    assert "default/late-train" in report["pending"]
    assert "default/infer-a" in report["pending"]
    # The same world, were the pods wanting cards inference and those holding them
    # training, would reclaim on both nodes.
    turned = reclaim_refusals_world()
    for obj in turned:
        if obj["kind"] in ("Pod", "PodGroup"):
            running = obj["kind"] == "PodGroup" or obj["spec"].get("nodeName")
            obj["metadata"]["annotations"]["volcano.sh/service.type"] = (
                "training" if running else "inference")
    evicted = {e["for"] for e in simulate(turned, TIDAL_CONF, sessions=1)["evictions"]}
    assert evicted == {"default/late-train", "default/infer-a"}


# --------------------------------------------------------------------------- minimums


@st.composite
def gang_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Card nodes (one without cards) and gangs whose pods are running, bound, unknown
    or being deleted on them, pending, done or of another card, with minMember below,
    at or above their pod count."""
    objects: list[dict[str, Any]] = [priority_class("pc-high", 80000),
                                     priority_class("pc-low", 20000),
                                     card_queue("qa", {H200: 8, RTX: 8})]
    nodes = ["h200-1", "rtx-1", "plain-1"]
    objects += [gpu_node("h200-1", H200), gpu_node("rtx-1", RTX),
                node("plain-1", cpu="64", memory="512Gi", **{GPU: "8"})]
    for g in range(draw(st.integers(1, 4))):
        pods = draw(st.integers(1, 5))
        objects.append(podgroup(f"g{g}", draw(st.integers(0, pods + 1)), queue="qa",
                                phase="Running"))
        for i in range(pods):
            where = draw(st.sampled_from([*nodes, None]))
            # (one on a node may be live and not placed: Unknown, or Releasing once
            # deleted; one Running on no node is not read at all, see test_bad_input)
            phase = draw(st.sampled_from(["Running", "Pending", "Unknown", "Succeeded",
                                          "Failed"] if where else [None, "Pending"]))
            made = card_pod(
                f"g{g}-{i}", draw(st.sampled_from([H200, RTX, EITHER_4090, "A||B", None])),
                draw(st.integers(0, 2)), group=f"g{g}", queue="qa", node_name=where,
                phase=phase, priority_class=draw(st.sampled_from(["pc-high", "pc-low"])))
            if where and draw(st.booleans()):
                made["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            objects.append(made)
    return objects


@settings(max_examples=150, deadline=None)
@given(gang_clusters())
def test_the_minimum_counted_at_open_is_the_one_read_from_the_job(objects):
    """At the open, a job whose live pods are all placed has its minimum's cards
    counted in the same pass as what it holds; they are those `_minimum_cards` reads
    from the job afresh, whatever its pods' cards, places and states."""
    session = open_session(objects, CONF)
    ledger = plugin_of(session).ledger
    for job in session.jobs.values():
        minimum, error = ledger.minimum(job)
        if error is None:
            assert minimum.scalars == ledger._minimum_cards(job), job.uid


def test_a_running_gang_is_not_read_a_second_time_for_its_minimum(monkeypatch):
    """The open counts a gang whose pods all run in one pass: its minimum is not read
    again from the job (a first session counts every job of the cluster)."""
    read_again: list[str] = []
    minimum_cards = CardLedger._minimum_cards

    def spy(ledger: CardLedger, job: Any) -> dict[str, float]:
        read_again.append(job.uid)
        return minimum_cards(ledger, job)

    monkeypatch.setattr(CardLedger, "_minimum_cards", spy)
    objects = [priority_class("pc-low", 20000), card_queue("qa", {H200: 8}),
               gpu_node("h200-1", H200), podgroup("g", 2, queue="qa", phase="Running"),
               *(card_pod(f"g-{i}", H200, 1, group="g", queue="qa", node_name="h200-1",
                          phase="Running", priority_class="pc-low") for i in range(3))]
    session = open_session(objects, CONF)
    job = session.jobs["default/g"]
    assert plugin_of(session).ledger.minimum(job)[0].scalars == {H200: 2000.0}
    assert read_again == []
