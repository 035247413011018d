"""reclaim: across queues, victims from queues over their share, gangs kept whole."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import gang, node, pod, podgroup, priority_class, queue, simulate

CONF = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false},
            {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def running(name: str, queue_name: str, node_name: str, cpu: str = "1", **args) -> dict:
    return pod(name, cpu=cpu, queue=queue_name, node_name=node_name, **args)


def test_pending_pod_takes_back_its_queues_share():
    objects = [node("n1", cpu="4"), queue("a"), queue("b"),
               *(running(f"a-{i}", "a", "n1") for i in range(4)),
               pod("b-0", cpu="1", queue="b")]
    report = simulate(objects, CONF)
    assert len(report["evictions"]) == 1
    eviction = report["evictions"][0]
    assert eviction["action"] == "reclaim" and eviction["for"] == "default/b-0"
    assert eviction["pod"].startswith("default/a-") and eviction["node"] == "n1"
    assert report["pipelined"] == {"default/b-0": "n1"}
    assert any(e["object"] == f"Pod/{eviction['pod']}" and e["reason"] == "Evict"
               and "reclaim for default/b-0" in e["message"] for e in report["events"])
    # The victim terminates; the next session binds the reclaimer.
    report = simulate(objects, CONF, sessions=2)
    assert report["binds"] == {"default/b-0": "n1"}
    assert len(report["evictions"]) == 1


def test_queue_not_reclaimable_keeps_its_pods():
    objects = [node("n1", cpu="4"), queue("a", reclaimable=False), queue("b"),
               *(running(f"a-{i}", "a", "n1") for i in range(4)),
               pod("b-0", cpu="1", queue="b")]
    report = simulate(objects, CONF)
    assert report["evictions"] == []
    assert "default/b-0" in report["pending"]


def test_pods_marked_not_preemptable_are_never_victims():
    protect = {"volcano.sh/preemptable": "false"}
    objects = [node("n1", cpu="4"), queue("a"), queue("b"),
               *(running(f"a-{i}", "a", "n1", annotations=protect) for i in range(4)),
               pod("b-0", cpu="1", queue="b")]
    assert simulate(objects, CONF)["evictions"] == []


def test_queue_within_its_share_is_not_reclaimed_from():
    # a holds 2 of 4 CPUs (its deserved half): b cannot take more than its own half.
    objects = [node("n1", cpu="4"), queue("a"), queue("b"),
               *(running(f"a-{i}", "a", "n1") for i in range(2)),
               *(running(f"b-{i}", "b", "n1") for i in range(2)),
               pod("b-new", cpu="1", queue="b")]
    assert simulate(objects, CONF)["evictions"] == []


def running_gang(name: str, size: int, queue_name: str, node_name: str, cpu: str = "1"):
    objects = [podgroup(name, size, queue=queue_name, phase="Running")]
    objects += [running(f"{name}-{i}", queue_name, node_name, cpu=cpu, group=name)
                for i in range(size)]
    return objects


def test_gang_is_evicted_whole_or_not_at_all():
    objects = [node("n1", cpu="4"), queue("a"), queue("b"),
               *running_gang("train", 4, "a", "n1"), pod("infer", cpu="1", queue="b")]
    report = simulate(objects, CONF)
    assert sorted(e["pod"] for e in report["evictions"]) == [
        f"default/train-{i}" for i in range(4)]
    assert report["pipelined"] == {"default/infer": "n1"}


def _gang_beside_a_deleted_node(min_member: int, live: int) -> list[dict]:
    """Queue a's gang running with `live` pods on n1 (room for them alone) and one more
    on a node that is gone; queue b's pod waiting for a CPU."""
    return [node("n1", cpu=str(live)), queue("a"), queue("b"),
            podgroup("train", min_member, queue="a", phase="Running"),
            *(running(f"train-{i}", "a", "n1", group="train") for i in range(live)),
            running(f"train-{live}", "a", "gone", group="train"),
            pod("infer", cpu="1", queue="b")]


def test_a_gang_with_a_pod_on_a_deleted_node_is_evicted_where_the_session_has_nodes():
    """A node deleted under a running gang leaves its pod in the gang until the pod is
    deleted too: the gang still goes whole from the nodes there are, and the pod with
    no node is neither evicted nor a crash."""
    report = simulate(_gang_beside_a_deleted_node(4, live=3), CONF)
    assert sorted(e["pod"] for e in report["evictions"]) == [
        f"default/train-{i}" for i in range(3)]
    assert report["pipelined"] == {"default/infer": "n1"}


def test_a_pod_on_a_deleted_node_does_not_keep_its_gang_whole():
    """minMember 2, two pods running and one whose node is gone: taking one pod would
    leave one running, so the gang goes whole (counted as three, one could go alone)."""
    report = simulate(_gang_beside_a_deleted_node(2, live=2), CONF)
    assert sorted(e["pod"] for e in report["evictions"]) == [
        "default/train-0", "default/train-1"]


def test_without_gang_safety_one_pod_of_the_gang_goes():
    conf = CONF + """configurations:
- name: reclaim
  arguments: {gangSafeEviction: false}
"""
    objects = [node("n1", cpu="4"), queue("a"), queue("b"),
               *running_gang("train", 4, "a", "n1"), pod("infer", cpu="1", queue="b")]
    report = simulate(objects, conf)
    assert len(report["evictions"]) == 1


def test_victims_that_break_no_gang_are_preferred():
    objects = [node("n1", cpu="4"), queue("a"), queue("b"),
               *running_gang("train", 3, "a", "n1"), running("loose", "a", "n1"),
               pod("infer", cpu="1", queue="b")]
    report = simulate(objects, CONF)
    assert [e["pod"] for e in report["evictions"]] == ["default/loose"]


def test_the_gang_that_wastes_least_goes():
    # Both gangs could make room for 2 CPUs on n1; "small" frees 2 CPUs in all, "big"
    # would free 2 here and 4 more elsewhere.
    objects = [node("n1", cpu="4"), node("n2", cpu="4"), queue("a"), queue("b"),
               *running_gang("small", 2, "a", "n1"),
               podgroup("big", 6, queue="a", phase="Running"),
               *(running(f"big-{i}", "a", "n1" if i < 2 else "n2", group="big")
                 for i in range(6)),
               pod("infer", cpu="2", queue="b")]
    report = simulate(objects, CONF)
    assert sorted(e["pod"] for e in report["evictions"]) == ["default/small-0",
                                                             "default/small-1"]


def test_gang_reclaimer_commits_only_if_the_whole_gang_can_wait():
    # b's gang needs 3 CPUs but b deserves only half of 4: its third task may not
    # reclaim, the gang could not be complete, so nothing is evicted at all.
    objects = [node("n1", cpu="4"), queue("a"), queue("b"),
               *(running(f"a-{i}", "a", "n1") for i in range(4)),
               *gang("need3", 3, queue="b", cpu="1")]
    report = simulate(objects, CONF)
    assert report["evictions"] == [] and report["pipelined"] == {}
    # (the reason the pod could not be placed comes first, ending with reclaim's)
    assert report["pending"]["default/need3-2"][0].endswith(
        ". reclaim: queue b: insufficient cpu (allocated + request 3 > deserved 2)")
    # Room for the whole gang within b's share: it reclaims for all three.
    objects[0] = node("n1", cpu="6")
    objects.append(running("a-4", "a", "n1"))
    objects.append(running("a-5", "a", "n1"))
    report = simulate(objects, CONF)
    assert len(report["evictions"]) == 3
    assert sorted(report["pipelined"]) == [f"default/need3-{i}" for i in range(3)]


TIDAL_CONF = (Path(__file__).parents[2] / "conf" / "tidal-reclaim.conf").read_text()
RTX = {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090", "nvidia.com/gpu.memory": "24564",
       "nvidia.com/gpu.count": "8"}


def tidal_scene(nodes: int, inference: int, cards: int | None = None) -> list[dict]:
    """Seed 002's scene, small: every node full with one training gang of 8 one-GPU pods
    (Job owners, reclaimable queue of priority 20000), then `inference` one-GPU pods
    (ReplicaSet owners) arrive in a non-reclaimable queue of priority 80000. Each queue
    may hold `cards` GPUs (default all the nodes')."""
    card = "NVIDIA-GeForce-RTX-4090"
    cards = 8 * nodes if cards is None else cards
    objects: list[dict] = [
        priority_class("pc-high", 80000), priority_class("pc-lowest", 20000),
        queue("queue-inference", priority=80000, reclaimable=False,
              capability={"cpu": "1000", "memory": "4000Gi"},
              annotations={"volcano.sh/card.quota": f'{{"{card}": {cards}}}'}),
        queue("queue-training", priority=20000, reclaimable=True,
              capability={"cpu": "1000", "memory": "4000Gi"},
              annotations={"volcano.sh/card.quota": f'{{"{card}": {cards}}}'}),
    ]
    for n in range(nodes):
        objects.append(node(f"gpu-{n}", cpu="64", memory="512Gi", labels=RTX,
                            **{"nvidia.com/gpu": "8"}))
        group = f"train-{n}"
        objects.append(podgroup(group, 8, queue="queue-training", phase="Running",
                                priority_class="pc-lowest"))
        objects += [pod(f"{group}-{i}", cpu="1", queue="queue-training", group=group,
                        node_name=f"gpu-{n}", owner_kind="Job", priority_class="pc-lowest",
                        **{"nvidia.com/gpu": "1"}) for i in range(8)]
    objects += [pod(f"infer-{i}", cpu="1", queue="queue-inference", owner_kind="ReplicaSet",
                    priority_class="pc-high", **{"nvidia.com/gpu": "1"})
                for i in range(inference)]
    return objects


@pytest.mark.parametrize(("nodes", "inference"), [(4, 1), (4, 8), (4, 9), (6, 20)])
def test_tidal_reclaim_reuses_what_earlier_evictions_release(nodes, inference):
    # Seed 002 at small size: after one gang goes, the next inference pods wait on the
    # GPUs it releases; a new gang goes only when those are taken. Whole gangs only.
    report = simulate(tidal_scene(nodes, inference), TIDAL_CONF)
    evicted = [e["pod"] for e in report["evictions"]]
    gangs = {p.rsplit("-", 1)[0] for p in evicted}
    assert len(gangs) == math.ceil(inference / 8)
    assert len(evicted) == 8 * len(gangs)
    assert sorted(report["pipelined"]) == sorted(f"default/infer-{i}"
                                                 for i in range(inference))


def _gang_scene(layout: list[tuple[int, list[int]]], inference: int) -> list[dict]:
    """Nodes of `gpus` GPUs each running training gangs of the given sizes (one GPU a
    pod, whole gangs on one node), and `inference` one-GPU inference pods pending."""
    objects = tidal_scene(0, inference, cards=64)
    for n, (gpus, gangs) in enumerate(layout):
        objects.append(node(f"gpu-{n}", cpu="64", memory="512Gi", labels=RTX,
                            **{"nvidia.com/gpu": str(gpus)}))
        for g, size in enumerate(gangs):
            group = f"train-{n}-{g}"
            objects.append(podgroup(group, size, queue="queue-training", phase="Running",
                                    priority_class="pc-lowest"))
            objects += [pod(f"{group}-{i}", cpu="1", queue="queue-training", group=group,
                            node_name=f"gpu-{n}", owner_kind="Job",
                            priority_class="pc-lowest", **{"nvidia.com/gpu": "1"})
                        for i in range(size)]
    return objects


def _fewest_evictions(layout: list[tuple[int, list[int]]], inference: int) -> int | None:
    """Brute force: the fewest pods whose gangs, evicted whole, leave room for
    `inference` one-GPU pods beside the idle GPUs; None if no choice does."""
    gangs = [(n, size) for n, (_, sizes) in enumerate(layout) for size in sizes]
    idle = sum(gpus - sum(sizes) for gpus, sizes in layout)
    best = None
    for chosen in itertools.product((False, True), repeat=len(gangs)):
        freed = sum(size for (_, size), take in zip(gangs, chosen, strict=True) if take)
        if idle + freed >= inference and (best is None or freed < best):
            best = freed
    return best


@st.composite
def gang_clusters(draw):
    layout = []
    for _ in range(draw(st.integers(1, 4))):
        gpus = draw(st.sampled_from([4, 8]))
        # Mostly full nodes (reclaim must evict), one gang or a few.
        first = draw(st.integers(1, gpus))
        sizes = [first] + ([draw(st.integers(1, gpus - first))] if first < gpus else [])
        layout.append((gpus, sizes))
    return layout, draw(st.integers(1, 12))


@settings(max_examples=40, deadline=None)
@given(gang_clusters())
def test_reclaim_evicts_at_most_the_fewest_plus_the_gang_rounding(case):
    # Whole gangs only, and each gang's GPUs used before another goes: what reclaim
    # evicts exceeds the fewest that free enough by less than one gang.
    layout, inference = case
    report = simulate(_gang_scene(layout, inference), TIDAL_CONF)
    evicted = len(report["evictions"])
    assert len(report["pipelined"]) + len(report["binds"]) == min(
        inference, sum(gpus for gpus, _ in layout))
    fewest = _fewest_evictions(layout, inference)
    largest = max(size for _, sizes in layout for size in sizes)
    if fewest is not None:
        assert evicted <= fewest + largest - 1
    gangs = {e["pod"].rsplit("-", 1)[0] for e in report["evictions"]}
    sizes = {f"default/train-{n}-{g}": size for n, (_, s) in enumerate(layout)
             for g, size in enumerate(s)}
    assert evicted == sum(sizes[g] for g in gangs)  # gangs whole


def test_a_gang_uses_idle_room_beside_reclaimable_pods_rather_than_evict_for_it():
    """n1 has 4 cpu idle beside a training pod; n2 is full of training pods. A gang of
    two 4-cpu inference pods needs one eviction: one pod takes n1's idle room (a node
    with pods reclaim could evict, as Volcano's reclaim looks at), the other the room
    freed there. Idle room on a node with nothing to evict is left to allocate."""
    from tests.builders import RECLAIM_CONF, node, pod, podgroup, queue, simulate

    objects = [node("n1", cpu="8", memory="16Gi"), node("n2", cpu="8", memory="16Gi"),
               queue("train", reclaimable=True), queue("inf", reclaimable=False),
               podgroup("t", 1, queue="train", phase="Running"),
               pod("t-a", "4", "4Gi", group="t", queue="train", node_name="n1"),
               pod("t-b", "4", "4Gi", group="t", queue="train", node_name="n2"),
               pod("t-c", "4", "4Gi", group="t", queue="train", node_name="n2"),
               podgroup("g", 2, queue="inf", phase="Inqueue"),
               pod("g-0", "4", "4Gi", group="g", queue="inf"),
               pod("g-1", "4", "4Gi", group="g", queue="inf")]
    report = simulate(objects, RECLAIM_CONF)
    assert [e["pod"] for e in report["evictions"]] == ["default/t-a"]
    assert set(report["pipelined"].values()) == {"n1"}


def test_room_refused_for_the_queue_is_taken_once_an_eviction_gives_the_queue_room():
    """A pod refused room without eviction for its parent queue's limit, not for
    anything on the node, may take that room once an eviction brings the parent back
    under its limit: the next pod alike is pipelined onto the idle card, not onto the
    one being released. (A refusal without eviction is not remembered per node: the
    fit index says which nodes have room, and they are offered again.)"""
    gpu = "nvidia.com/gpu"
    conf = """
actions: "enqueue, reclaim"
tiers:
- plugins:
  - name: capacity
    enableHierarchy: true
  - name: predicates
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
"""
    objects = [
        node("n0", cpu="16", memory="64Gi", **{gpu: "2"}),
        node("n1", cpu="16", memory="64Gi", **{gpu: "2"}),
        queue("dept", parent="root", capability={"cpu": "32", "memory": "128Gi", gpu: "3"}),
        queue("c", parent="dept", deserved={"cpu": "2", "memory": "2Gi", gpu: "2"}),
        queue("d", parent="dept", deserved={"cpu": "1", "memory": "1Gi", gpu: "1"}),
        pod("d-small", cpu="1", memory="1Gi", queue="d", node_name="n0", **{gpu: "1"}),
        pod("d-big", cpu="1", memory="1Gi", queue="d", node_name="n1", **{gpu: "2"}),
        podgroup("j1", 1, queue="c"),
        pod("j1-0", cpu="1", memory="1Gi", group="j1", **{gpu: "1"}),
        podgroup("j2", 1, queue="c"),
        pod("j2-0", cpu="1", memory="1Gi", group="j2", **{gpu: "1"}),
    ]
    report = simulate(objects, conf)
    # j1 finds n0's idle card refused (dept would hold 4 of its 3), evicts d-big on n1
    assert [(e["pod"], e["node"]) for e in report["evictions"]] == [("default/d-big", "n1")]
    assert report["pipelined"] == {"default/j1-0": "n1", "default/j2-0": "n0"}


def test_why_a_pod_does_not_fit_comes_before_why_reclaim_did_not_help():
    """A pod whose node selector matches no node: its condition and event say so
    first; reclaim's verdict follows in the same message, as kube-scheduler adds its
    preemption's to the filters' message."""
    objects = [node("n1", cpu="8"), queue("a"), queue("b"),
               *(running(f"a-{i}", "a", "n1") for i in range(4)),
               pod("picky", cpu="1", queue="b", node_selector={"zone": "nowhere"})]
    report = simulate(objects, CONF)
    assert report["evictions"] == []
    first = report["pending"]["default/picky"][0]
    assert first == ("0/1 nodes are available: 1 node(s) didn't match Pod's node "
                     "affinity/selector. reclaim: no node where evicting reclaimable "
                     "pods of other queues makes room")
    assert [e["message"] for e in report["events"]
            if e["object"] == "Pod/default/picky"] == [first]


@pytest.mark.parametrize("low_queue", ["a-first", "z-last"])
def test_what_is_reclaimed_for_a_pod_is_bound_to_it_not_to_a_lower_pod(low_queue: str):
    """prod's pod reclaims n1 from a batch gang and is nominated there. In the next
    session, a pod of lower priority in another queue fits the freed room too: whether
    its queue goes first or last, the room is prod's (the evictions were made for it),
    and prod's pod is bound there; the other waits, evicting nothing."""
    gpu = {"nvidia.com/gpu": "8"}
    objects = [priority_class("high", 1000), priority_class("low", 10),
               queue(low_queue, reclaimable=False), queue("prod", reclaimable=False),
               queue("batch", reclaimable=True),
               node("n1", cpu="8", memory="16Gi", **gpu),
               *gang("batch", 2, queue="batch", node_name="n1", priority_class="low",
                     **{"nvidia.com/gpu": "4"}),
               podgroup("prod", 1, queue="prod", priority_class="high"),
               pod("prod-0", cpu="1", group="prod", priority_class="high", **gpu),
               podgroup("low", 1, queue=low_queue, priority_class="low"),
               pod("low-0", cpu="1", group="low", priority_class="low", **gpu)]
    objects[-1]["spec"]["preemptionPolicy"] = "Never"  # (it evicts for nobody)
    conf = CONF.replace(" {name: proportion},", "")  # (no shares: batch gives to anyone)
    report = simulate(objects, conf, sessions=3)
    assert {e["pod"] for e in report["evictions"]} == {"default/batch-0", "default/batch-1"}
    assert {e["for"] for e in report["evictions"]} == {"default/prod-0"}
    assert report["binds"] == {"default/prod-0": "n1"}
    assert list(report["pending"]) == ["default/low-0"]



def test_a_bound_pod_loses_its_nomination():
    """An API server before Kubernetes 1.35 keeps a bound pod's nominatedNodeName (1.35
    clears it on binding): the scheduler clears it itself, so `kubectl get pod -o wide`
    does not show a nomination for a pod that runs."""
    from tests.builders import conf as build_conf
    from vscheduler.simulate import Simulation

    objects = [node("n1", cpu="4"), queue("a"), queue("b"),
               *(running(f"a-{i}", "a", "n1") for i in range(4)),
               pod("b-0", cpu="1", queue="b")]
    simulation = Simulation(build_conf(CONF), ("vscheduler",))
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    simulation.step()
    assert simulation.cache.tasks["default/b-0"].pod.nominated_node == ""  # (not yet read)
    simulation.step()  # (the victim is gone: b-0 is bound)
    assert simulation.report.binds == {"default/b-0": "n1"}
    simulation.step()
    assert simulation.cache.tasks["default/b-0"].pod.nominated_node == ""
