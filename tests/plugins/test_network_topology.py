"""network-topology-aware: node scores by closeness to where the job already is, domain
scores by HyperNode binpack, its arguments, and soft mode's preference for the smallest
domain that holds a gang."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.builders import gang, hypernode, node, open_session, pod, simulate
from vscheduler.conf import ConfError, parse_conf
from vscheduler.framework.session import Session
from vscheduler.model import Task

PLUGIN = "network-topology-aware"
CONF = """
actions: "allocate"
tiers:
- plugins: [{name: gang}, {name: predicates}, {name: network-topology-aware%s}]
"""


def conf(**args: Any) -> str:
    if not args:
        return CONF % ""
    items = ", ".join(f"{k}: {v}" for k, v in args.items())
    return CONF % f", arguments: {{{items}}}"


def limited(name: str, topology: dict[str, Any], *, running: dict[str, str] | None = None,
            pending: int = 1, min_member: int = 1, cpu: str | None = "1",
            memory: str | None = "1Gi", **extra: str) -> list[dict[str, Any]]:
    """A PodGroup with `topology`, pods running on the nodes `running` names (pod name ->
    node) and `pending` pods `<name>-p<i>` more."""
    objects = gang(name, 0, min_member=min_member)
    objects[0]["spec"]["networkTopology"] = topology
    for pod_name, node_name in (running or {}).items():
        objects.append(pod(pod_name, cpu, memory, group=name, node_name=node_name, **extra))
    objects += [pod(f"{name}-p{i}", cpu, memory, group=name, **extra) for i in range(pending)]
    return objects


def _task(session: Session, name: str) -> Task:
    for job in session.jobs.values():
        for task in job.tasks.values():
            if task.key == f"default/{name}":
                return task
    raise KeyError(name)


# --------------------------------------------------------------------------- node scores

B_NODES = [f"s{i}-n{j}" for i in range(3, 7) for j in (1, 2)]


def shape_b(s2_under_top: bool = False) -> list[dict[str, Any]]:
    """Volcano's shape B: s3..s6 (tier 1, two nodes each), s1{s3, s4} and s2{s5, s6}
    (tier 2), s0{s1, s2} (tier 3); with `s2_under_top`, s0 holds s1 only."""
    objects = [node(n) for n in B_NODES]
    objects += [hypernode(f"s{i}", 1, nodes=[f"s{i}-n1", f"s{i}-n2"]) for i in range(3, 7)]
    objects += [hypernode("s1", 2, children=["s3", "s4"]),
                hypernode("s2", 2, children=["s5", "s6"]),
                hypernode("s0", 3, children=["s1"] if s2_under_top else ["s1", "s2"])]
    return objects


def node_scores(objects: list[dict[str, Any]], task: str, nodes: list[str],
                text: str | None = None) -> list[float]:
    session = open_session(objects, text or conf())
    plugin = session.plugins[PLUGIN]
    return [round(plugin.node_order(_task(session, task), session.nodes[n]), 1)
            for n in nodes]


def test_no_placed_pod_no_node_score() -> None:
    """Volcano's NodeScore_Hard (1): nothing placed yet, every node scores 0."""
    objects = [*shape_b(), *limited("j", {"highestTierAllowed": 3})]
    assert node_scores(objects, "j-p0", ["s3-n1", "s4-n1", "s5-n1"]) == [0, 0, 0]


def test_node_score_falls_a_third_a_tier_over_three_tiers() -> None:
    """Volcano's NodeScore_Hard (3): the job runs in s3; tiers 1..3 and the top (4):
    same leaf 100, common s1 (tier 2) 66.6, common s0 (tier 3) 33.3."""
    objects = [*shape_b(), *limited("j", {"highestTierAllowed": 3},
                                    running={"j-r0": "s3-n2"})]
    assert node_scores(objects, "j-p0", ["s3-n1", "s4-n1", "s5-n1", "s6-n2"]) == [
        100, 66.7, 33.3, 33.3]


def test_node_score_is_zero_where_only_the_top_is_common() -> None:
    """Volcano's NodeScore_Hard (2): s2 hangs under the virtual top, not s0."""
    objects = [*shape_b(s2_under_top=True), *limited("j", {"highestTierAllowed": 3},
                                                     running={"j-r0": "s3-n1"})]
    assert node_scores(objects, "j-p0", ["s4-n1", "s5-n1", "s6-n1"]) == [66.7, 0, 0]


def test_node_score_over_two_tiers() -> None:
    """Volcano's NodeScore_Hard (4): s1, s2 (tier 1) under s0 (tier 2): 100 / 50."""
    objects = [node("s1-n1"), node("s1-n2"), node("s2-n1"),
               hypernode("s1", 1, nodes=["s1-n1", "s1-n2"]),
               hypernode("s2", 1, nodes=["s2-n1"]),
               hypernode("s0", 2, children=["s1", "s2"]),
               *limited("j", {"highestTierAllowed": 2}, running={"j-r0": "s1-n2"})]
    assert node_scores(objects, "j-p0", ["s1-n1", "s2-n1"]) == [100, 50]


def test_node_score_over_one_tier() -> None:
    """Volcano's NodeScore_Hard (5): s1, s2 (tier 1) under the top alone: 100 / 0."""
    objects = [node("s1-n1"), node("s1-n2"), node("s2-n1"),
               hypernode("s1", 1, nodes=["s1-n1", "s1-n2"]),
               hypernode("s2", 1, nodes=["s2-n1"]),
               *limited("j", {"mode": "soft"}, running={"j-r0": "s1-n2"})]
    assert node_scores(objects, "j-p0", ["s1-n1", "s2-n1"]) == [100, 0]


def test_node_score_times_weight() -> None:
    """Volcano's NodeScore_Hard (6): (3) with weight 2."""
    objects = [*shape_b(), *limited("j", {"highestTierAllowed": 3},
                                    running={"j-r0": "s3-n2"})]
    assert node_scores(objects, "j-p0", ["s3-n1", "s4-n1", "s5-n1"], conf(weight=2)) == [
        200, 133.3, 66.7]


def test_jobs_without_topology_get_no_node_score() -> None:
    objects = [*shape_b(), *gang("plain", 1), pod("other", node_name="s3-n1",
                                                  group="plain")]
    assert node_scores(objects, "plain-0", ["s3-n1", "s4-n1"]) == [0, 0]


def test_pending_pods_land_next_to_the_running_ones() -> None:
    """The node scores at work: with room everywhere, the job's next pod goes to the
    leaf its running pod is in, not to the first node by name."""
    objects = [*shape_b(), *limited("j", {"highestTierAllowed": 3},
                                    running={"j-r0": "s5-n2"})]
    report = simulate(objects, conf())
    assert report["binds"] == {"default/j-p0": "s5-n1"}


# --------------------------------------------------------------------------- domain scores


def domain_objects(**extra: str) -> list[dict[str, Any]]:
    """Domain d: two nodes of 4 CPU / 8Gi (8 / 16Gi in all), 4 GPUs each; a pod of
    another job uses 2 CPU / 8Gi / 2 GPUs there. Domain e: the same, empty."""
    gpus = {"nvidia.com/gpu": "4"}
    objects = [node("d-1", cpu="4", memory="8Gi", **gpus),
               node("d-2", cpu="4", memory="8Gi", **gpus),
               node("e-1", cpu="4", memory="8Gi", **gpus),
               node("e-2", cpu="4", memory="8Gi", **gpus),
               hypernode("d", 1, nodes=["d-1", "d-2"]),
               hypernode("e", 1, nodes=["e-1", "e-2"]),
               pod("other", cpu="2", memory="8Gi", node_name="d-1",
                   **{"nvidia.com/gpu": "2"})]
    return objects


def domain_scores(objects: list[dict[str, Any]], job: str, text: str | None = None
                  ) -> dict[str, float]:
    session = open_session(objects, text or conf())
    plugin, topology = session.plugins[PLUGIN], session.topology
    assert topology is not None
    target = next(j for j in session.jobs.values() if j.name == job)
    return {name: round(plugin.domain_order(target, topology.domains[name]), 2)
            for name in ("d", "e")}


GPU_ARGS = {"hypernode.binpack.resources": "nvidia.com/gpu",
            "hypernode.binpack.resources.nvidia.com/gpu": 2}


@pytest.mark.parametrize("args, expected", [
    # cpu (2 + 2) / 8 = 0.5, memory (8 + 4) / 16 = 0.75: (0.5 + 0.75) / 2
    # e: cpu 2 / 8, memory 4 / 16
    ({}, {"d": 62.5, "e": 25.0}),
    # (3 * 0.5 + 0.75) / 4; e: (3 * 0.25 + 0.25) / 4
    ({"hypernode.binpack.cpu": 3}, {"d": 56.25, "e": 25.0}),
    ({"weight": 2}, {"d": 125.0, "e": 50.0}),
    # gpus (2 + 2) / 8 = 0.5 at weight 2: (0.5 + 0.75 + 2 * 0.5) / 4; e: (0.25 * 4) / 4
    (GPU_ARGS, {"d": 56.25, "e": 25.0}),
    ({"hypernode.binpack.cpu": 0, "hypernode.binpack.memory": 0}, {"d": 0.0, "e": 0.0}),
])
def test_domain_score_is_hypernode_binpack(args: dict[str, Any],
                                           expected: dict[str, float]) -> None:
    """A gang of two pending pods of 1 CPU / 2Gi / 1 GPU: how full each domain would be
    with it, `sum(weight * (used + requested) / allocatable) / sum(weights) * 100 *
    weight`; a resource weighs only where it is weighted (GPUs only when listed)."""
    objects = [*domain_objects(), *limited("j", {"highestTierAllowed": 1}, pending=2,
                                           cpu="1", memory="2Gi",
                                           **{"nvidia.com/gpu": "1"})]
    assert domain_scores(objects, "j", conf(**args)) == expected


def test_domain_score_counts_only_pods_still_to_place() -> None:
    """Ours differs from Volcano here on purpose: Volcano adds the job's running pods to
    the request on top of their place in `used` (2 + 4 CPU and 8 + 12Gi in d would
    overflow: 0); here only the pending pods are requested: cpu (2 + 2) / 8 = 0.5,
    memory (8 + 4) / 16 = 0.75, so d scores 62.5."""
    objects = [*domain_objects(), node("f-1", cpu="8", memory="32Gi"),
               *limited("j", {"highestTierAllowed": 1}, pending=2, cpu="1",
                        memory="2Gi", running={"j-r0": "f-1"})]
    objects[-3]["spec"]["containers"][0]["resources"]["requests"] = {
        "cpu": "2", "memory": "8Gi"}
    assert domain_scores(objects, "j")["d"] == 62.5


def test_domain_that_would_overflow_scores_zero() -> None:
    objects = [*domain_objects(), *limited("j", {"highestTierAllowed": 1}, pending=4,
                                           cpu="2", memory="1Gi")]
    # d: cpu (2 + 8) / 8 overflows; e: cpu 8 / 8, memory 4 / 16
    assert domain_scores(objects, "j") == {"d": 0.0, "e": 62.5}


def test_resource_the_gang_does_not_ask_is_left_out() -> None:
    """Pods asking CPU only: memory's weight counts nowhere."""
    objects = [*domain_objects(), *limited("j", {"highestTierAllowed": 1}, pending=2,
                                           cpu="1", memory=None)]
    assert domain_scores(objects, "j") == {"d": 50.0, "e": 25.0}


def test_gang_goes_to_the_domain_it_fills_most() -> None:
    """Two tier-1 domains could hold the gang: the fuller one takes it (d's nodes run a
    pod), though the other comes first by name."""
    objects = [*domain_objects(), *limited("j", {"highestTierAllowed": 1}, pending=2,
                                           cpu="1", memory="1Gi")]
    objects[4]["metadata"]["name"] = "z"  # hypernode d, now last by name
    report = simulate(objects, conf())
    assert len(report["binds"]) == 2
    assert set(report["binds"].values()) <= {"d-1", "d-2"}


def test_domain_scores_only_where_enabled_hypernode_order() -> None:
    text = conf().replace("network-topology-aware", "network-topology-aware, "
                                                    "enabledHyperNodeOrder: false")
    assert not open_session(domain_objects(), text).has_domain_order
    assert open_session(domain_objects(), conf()).has_domain_order


# --------------------------------------------------------------------------- soft mode


def test_soft_prefers_the_lowest_tier_that_fits() -> None:
    """Shape B, nodes of 8 CPU: a soft gang of 4 x 4 CPU fits in one tier-1 domain (s3,
    first by name, all scoring alike) and goes there, not spread."""
    objects = [*shape_b(), *limited("j", {"mode": "soft"}, pending=4, min_member=4,
                                    cpu="4")]
    report = simulate(objects, conf())
    assert sorted(report["binds"].values()) == ["s3-n1", "s3-n1", "s3-n2", "s3-n2"]


def test_soft_takes_the_next_tier_when_no_lower_domain_fits() -> None:
    """6 x 4 CPU: no tier-1 domain (16 CPU) holds it, s1 (32 CPU) does."""
    objects = [*shape_b(), *limited("j", {"mode": "soft"}, pending=6, min_member=6,
                                    cpu="4")]
    report = simulate(objects, conf())
    assert len(report["binds"]) == 6
    assert {n.split("-")[0] for n in report["binds"].values()} <= {"s3", "s4"}


def test_soft_falls_back_to_the_whole_cluster() -> None:
    """Two tier-1 domains of one 2-CPU node each, nothing above: a soft gang of 2 x 2
    CPU fits in none of them, so it spans the cluster; a hard one at tier 1 waits."""
    objects = [node("a-1", cpu="2"), node("b-1", cpu="2"),
               hypernode("a", 1, nodes=["a-1"]), hypernode("b", 1, nodes=["b-1"])]
    soft = limited("j", {"mode": "soft"}, pending=2, min_member=2, cpu="2")
    report = simulate([*objects, *soft], conf())
    assert sorted(report["binds"].values()) == ["a-1", "b-1"]
    hard = limited("j", {"highestTierAllowed": 1}, pending=2, min_member=2, cpu="2")
    assert simulate([*objects, *hard], conf())["binds"] == {}


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("key", ["weight", "hypernode.binpack.cpu",
                                 "hypernode.binpack.memory",
                                 "hypernode.binpack.resources.nvidia.com/gpu"])
def test_negative_weight_is_refused(key: str) -> None:
    """Volcano quietly puts 1 for a negative weight; a conf error says what is wrong."""
    with pytest.raises(ConfError, match=rf"{re.escape(key)}.*at least 0"):
        parse_conf(conf(**{key: -1}))


@pytest.mark.parametrize("value, keys", [
    ("[example.com/block, example.com/rack]", ("example.com/block", "example.com/rack")),
    ("'example.com/block, example.com/rack'", ("example.com/block", "example.com/rack")),
    ("example.com/rack", ("example.com/rack",)),
    ("''", ()),
])
def test_label_keys_as_a_list_or_a_string(value: str, keys: tuple[str, ...]) -> None:
    session = open_session([node("n1")], conf(**{"topology.labels": value}))
    assert session.plugins[PLUGIN].labels == keys


@pytest.mark.parametrize("value", ["[rack, rack]", "'rack, block, rack'", "[1, 2]", "{a: b}"])
def test_label_keys_twice_or_not_keys_are_refused(value: str) -> None:
    with pytest.raises(ConfError, match=re.escape("topology.labels")):
        parse_conf(conf(**{"topology.labels": value}))


def test_label_topology_places_a_gang_within_a_rack() -> None:
    """No HyperNodes: `topology.labels` makes the tree, and a PodGroup names a tier by
    its label key."""
    rack = {"a-1": "r1", "a-2": "r1", "b-1": "r2", "b-2": "r2"}
    objects = [node(n, cpu="2", labels={"example.com/rack": r}) for n, r in rack.items()]
    objects.append(node("loose", cpu="2"))
    job = limited("j", {"highestTierName": "example.com/rack"}, pending=2, min_member=2,
                  cpu="2")
    objects.append(pod("filler", cpu="2", node_name="a-1"))
    report = simulate([*objects, *job], conf(**{"topology.labels": "[example.com/rack]"}))
    assert sorted(report["binds"].values()) == ["b-1", "b-2"]
