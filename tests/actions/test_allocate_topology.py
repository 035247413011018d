"""allocate with HyperNodes: a gang with a hard networkTopology placed within one domain
of its allowed tier, a soft one in the smallest domain that holds it, Volcano's cases.

Volcano's `TestAllocateWithNetWorkTopologies` (pkg/scheduler/actions/allocate) ported
case by case: pods ask 2 CPU / 4G, nodes offer 2 CPU / 4Gi and 10 pods, the PodGroup
`c1/pg1` is Inqueue in queue q1, and the conf is Volcano's test conf (allocate; gang,
predicates, network-topology-aware).

Shapes (tier 1 is the lowest):
- A: s0{s0-n1, s0-n2}, s1{s1-n3, s1-n4} at tier 1; s2{s0, s1} at tier 2.
- A0: A's nodes and no HyperNode objects (Volcano's fixture gives node sets only, so its
  session tree is the virtual top alone): the cluster is flat.
- B: s3..s6 at tier 1, two nodes each (sX-n1, sX-n2); s1{s3, s4} and s2{s5, s6} at
  tier 2; s0{s1, s2} at tier 3.
- C: s0-n1 and s1-n2 (labelled nodeRole=master), no HyperNode objects.
- D: A without s2 (two tier-1 HyperNodes under the virtual top, tier 2).
- "+names": tier names from `spec.tierName`: tier 1 `volcano.sh/task-spec`, tier 2
  `volcano.sh/job-spec`, tier 3 (B) `volcano.sh/hypernode-spec`.
"run sX": p1 and p2 already Running on sX's two nodes, p3 pending.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from tests.builders import hypernode, node, pod, podgroup, queue, simulate

CONF = """
actions: "allocate"
tiers:
- plugins: [{name: gang}, {name: predicates}, {name: network-topology-aware}]
"""

TASK_SPEC, JOB_SPEC, HYPERNODE_SPEC = ("volcano.sh/task-spec", "volcano.sh/job-spec",
                                       "volcano.sh/hypernode-spec")
A_NODES = ("s0-n1", "s0-n2", "s1-n3", "s1-n4")
B_NODES = tuple(f"s{i}-n{j}" for i in range(3, 7) for j in (1, 2))


def _nodes(names: tuple[str, ...], cpu: str = "2", memory: str = "4Gi",
           labels: dict[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    return [node(n, cpu=cpu, memory=memory, pods="10", labels=(labels or {}).get(n))
            for n in names]


def shape_a(names: bool = False, top: bool = True) -> list[dict[str, Any]]:
    """Shape A (D without `top`), tier names with `names`."""
    low, high = (TASK_SPEC, JOB_SPEC) if names else (None, None)
    objects = [hypernode("s0", 1, nodes=["s0-n1", "s0-n2"], tier_name=low),
               hypernode("s1", 1, nodes=["s1-n3", "s1-n4"], tier_name=low)]
    if top:
        objects.append(hypernode("s2", 2, children=["s0", "s1"], tier_name=high))
    return [*_nodes(A_NODES), *objects]


def shape_b(names: bool = False) -> list[dict[str, Any]]:
    low, mid, high = (TASK_SPEC, JOB_SPEC, HYPERNODE_SPEC) if names else (None,) * 3
    objects = [hypernode(f"s{i}", 1, nodes=[f"s{i}-n1", f"s{i}-n2"], tier_name=low)
               for i in range(3, 7)]
    objects += [hypernode("s1", 2, children=["s3", "s4"], tier_name=mid),
                hypernode("s2", 2, children=["s5", "s6"], tier_name=mid),
                hypernode("s0", 3, children=["s1", "s2"], tier_name=high)]
    return [*_nodes(B_NODES), *objects]


SHAPES = {
    "A": shape_a(),
    "A0": _nodes(A_NODES),
    "B": shape_b(),
    "C": _nodes(("s0-n1", "s1-n2"), labels={"s1-n2": {"nodeRole": "master"}}),
    "D": shape_a(top=False),
    "A+names": shape_a(names=True),
    "B+names": shape_b(names=True),
    "D+names": [*_nodes(A_NODES),
                hypernode("s0", 1, nodes=["s0-n1", "s0-n2"], tier_name=TASK_SPEC),
                hypernode("s1", 1, nodes=["s1-n3", "s1-n4"], tier_name=TASK_SPEC)],
}


def topology_group(min_member: int, mode: str, tier: int | None = None,
                   tier_name: str | None = None, name: str = "pg1") -> dict[str, Any]:
    group = podgroup(name, min_member, namespace="c1", queue="q1", phase="Inqueue")
    spec: dict[str, Any] = {"mode": mode}
    if tier is not None:
        spec["highestTierAllowed"] = tier
    if tier_name is not None:
        spec["highestTierName"] = tier_name
    group["spec"]["networkTopology"] = spec
    return group


def _pod(name: str, role: str, node_name: str | None = None, cpu: str = "2",
         memory: str = "4G", group: str = "pg1", **args: Any) -> dict[str, Any]:
    return pod(name, cpu, memory, namespace="c1", group=group, queue="q1",
               node_name=node_name, labels={TASK_SPEC: role}, **args)


def pending(count: int, **args: Any) -> list[dict[str, Any]]:
    """p1 (master), p2, p3 ... (workers), all pending."""
    return [_pod(f"p{i}", "master" if i == 1 else "worker", **args)
            for i in range(1, count + 1)]


def running_on(first: str, second: str) -> list[dict[str, Any]]:
    """p1 and p2 running on `first` and `second`, p3 pending."""
    return [_pod("p1", "master", first), _pod("p2", "worker", second),
            _pod("p3", "worker")]


RUN_S0 = running_on("s0-n1", "s0-n2")
RUN_S3 = running_on("s3-n1", "s3-n2")


@dataclass(frozen=True)
class Case:
    shape: str
    group: dict[str, Any]
    pods: list[dict[str, Any]]
    binds: int
    # the nodes every bind must be on (None: anywhere), and binds expected exactly
    within: tuple[str, ...] | None = None
    exactly: dict[str, str] | None = None
    same_domain: bool = False  # all of the job's binds within one tier-1 HyperNode


CASES = {
    # soft: the lowest tier that fits, the whole cluster at worst
    1: Case("A0", topology_group(3, "soft"), pending(3), 3),
    2: Case("A", topology_group(1, "soft"), pending(2), 2),
    3: Case("C", topology_group(1, "soft"), pending(1, node_selector={"nodeRole": "master"}),
            1, exactly={"c1/p1": "s1-n2"}),
    4: Case("A", topology_group(2, "soft"), RUN_S0, 1, within=("s1-n3", "s1-n4")),
    5: Case("A", topology_group(3, "soft"), RUN_S0, 1, within=("s1-n3", "s1-n4")),
    6: Case("B", topology_group(2, "soft"), RUN_S3, 1, within=B_NODES[2:]),
    # hard, by tier number
    7: Case("A", topology_group(3, "hard", 1), pending(3), 0),
    8: Case("A", topology_group(3, "hard", 2), pending(3), 3),
    9: Case("A", topology_group(2, "hard", 1), pending(2), 2, same_domain=True),
    10: Case("A", topology_group(1, "hard", 1), pending(2), 2),
    11: Case("C", topology_group(1, "hard", 1),
             pending(1, node_selector={"nodeRole": "master"}), 1,
             exactly={"c1/p1": "s1-n2"}),
    12: Case("A", topology_group(2, "hard", 2), RUN_S0, 1, within=("s1-n3", "s1-n4")),
    13: Case("A", topology_group(3, "hard", 2), RUN_S0, 1, within=("s1-n3", "s1-n4")),
    14: Case("B", topology_group(2, "hard", 2), RUN_S3, 1, within=("s4-n1", "s4-n2")),
    15: Case("A", topology_group(2, "hard", 1), RUN_S0, 0),
    16: Case("B", topology_group(2, "hard", 1), RUN_S3, 0),
    17: Case("D", topology_group(2, "hard", 2), RUN_S0, 1, within=("s1-n3", "s1-n4")),
    # hard, by tier name (spec.tierName of the HyperNodes)
    18: Case("A+names", topology_group(3, "hard", tier_name=TASK_SPEC), pending(3), 0),
    19: Case("A+names", topology_group(3, "hard", tier_name=JOB_SPEC), pending(3), 3),
    20: Case("A+names", topology_group(2, "hard", tier_name=TASK_SPEC), pending(2), 2,
             same_domain=True),
    21: Case("A+names", topology_group(2, "hard", tier_name=JOB_SPEC), RUN_S0, 1,
             within=("s1-n3", "s1-n4")),
    22: Case("A+names", topology_group(3, "hard", tier_name=JOB_SPEC), RUN_S0, 1,
             within=("s1-n3", "s1-n4")),
    # p1 and p2 run on nodes this cluster does not have: they say nothing of where the
    # job is (Volcano's fixture pins it to s3 by an annotation), so p3 goes where a
    # tier-2 domain allows, s1 or s2
    23: Case("B+names", topology_group(2, "hard", tier_name=JOB_SPEC), RUN_S0, 1),
    24: Case("A+names", topology_group(2, "hard", tier_name=TASK_SPEC), RUN_S0, 0),
    # a tier name no HyperNode has is no limit: the job goes the ordinary way
    25: Case("D+names", topology_group(2, "hard", tier_name="volcano.sh/hypercluster"),
             RUN_S0, 1, within=("s1-n3", "s1-n4")),
}


def _leaf_of(bound_node: str) -> str:
    return bound_node.split("-")[0]


@pytest.mark.parametrize("number", sorted(CASES))
def test_volcano_allocate_with_network_topologies(number: int) -> None:
    """Volcano's TestAllocateWithNetWorkTopologies, case `number` (same order)."""
    case = CASES[number]
    report = simulate([queue("q1"), *SHAPES[case.shape], case.group, *case.pods], CONF)
    binds = report["binds"]
    assert len(binds) == case.binds, report["pending"]
    if case.exactly is not None:
        assert binds == case.exactly
    if case.within is not None:
        assert set(binds.values()) <= set(case.within), binds
    if case.same_domain:
        assert len({_leaf_of(n) for n in binds.values()}) == 1, binds
    for key in report["pending"]:  # what waits says why
        assert report["pending"][key], key


def test_gang_too_big_for_every_allowed_domain_says_so() -> None:
    """Case 7's reason: no tier-1 HyperNode has room for three pods."""
    report = simulate([queue("q1"), *SHAPES["A"], topology_group(3, "hard", 1),
                       *pending(3)], CONF)
    assert report["pendingJobs"]["c1/pg1"]["reasons"][0] == (
        "no HyperNode of tier 1 or lower has free room for the 3 pods the gang still needs")


def test_pods_held_in_a_full_domain_say_where_they_failed() -> None:
    """Case 15's reason: the rest of the job may go only into s0, and s0 is full."""
    report = simulate([queue("q1"), *SHAPES["A"], topology_group(2, "hard", 1), *RUN_S0],
                      CONF)
    assert report["pending"]["c1/p3"] == [
        "In hyperNode s0: 0/2 nodes are available: 2 Insufficient cpu."]


# --------------------------------------------------------------------------- scoring


def test_gang_goes_to_the_fuller_domain_and_binpacks_within() -> None:
    """Volcano's TestNodeLevelScoreWithNetWorkTopologies: s0 already runs pg2 (2 + 4 CPU
    of its 12), so with pg1 it would be full (HyperNode binpack 100) where s1 would be
    half full (50): pg1 goes to s0, p1 onto the node binpack finds fuller."""
    nodes = [node("s0-n1", cpu="4", memory="8Gi", pods="10"),
             node("s0-n2", cpu="8", memory="16Gi", pods="10"),
             node("s1-n3", cpu="4", memory="8Gi", pods="10"),
             node("s1-n4", cpu="8", memory="16Gi", pods="10")]
    hypernodes = [hypernode("s0", 1, nodes=["s0-n1", "s0-n2"]),
                  hypernode("s1", 1, nodes=["s1-n3", "s1-n4"]),
                  hypernode("s2", 2, children=["s0", "s1"])]
    running = podgroup("pg2", 2, namespace="c1", queue="q1", phase="Running")
    objects = [queue("q1"), *nodes, *hypernodes, topology_group(2, "hard", 1), running,
               _pod("p1", "master", cpu="2", memory="4Gi"),
               _pod("p2", "worker", cpu="4", memory="8Gi"),
               _pod("p3", "master", "s0-n1", cpu="2", memory="4Gi", group="pg2"),
               _pod("p4", "worker", "s0-n2", cpu="4", memory="8Gi", group="pg2")]
    conf = """
actions: "allocate"
tiers:
- plugins: [{name: gang}, {name: predicates}, {name: binpack},
            {name: network-topology-aware}]
"""
    report = simulate(objects, conf)
    assert report["binds"] == {"c1/p1": "s0-n1", "c1/p2": "s0-n2"}


def test_gang_wider_than_a_leaf_spans_two_leaves_not_three() -> None:
    """Volcano's TestHyperNodeBinpackWithNetWorkTopologies: four pods, each filling a
    node, in three tier-1 HyperNodes of two nodes under one of tier 2: no leaf holds
    the gang, so it goes to the tier-2 HyperNode, two pods to a leaf."""
    names = [f"s{i}-n{2 * i + j}" for i in range(3) for j in (1, 2)]
    hypernodes = [hypernode(f"s{i}", 1, nodes=names[2 * i:2 * i + 2]) for i in range(3)]
    hypernodes.append(hypernode("s3", 2, children=["s0", "s1", "s2"]))
    objects = [queue("q1"), *_nodes(tuple(names), cpu="4", memory="8Gi"), *hypernodes,
               topology_group(4, "hard", 2),
               *pending(4, cpu="4", memory="8Gi")]
    report = simulate(objects, CONF)
    assert len(report["binds"]) == 4
    per_leaf = Counter(_leaf_of(n) for n in report["binds"].values())
    assert sorted(per_leaf.values()) == [2, 2]


def test_a_ready_job_tries_every_domain_for_its_next_pod() -> None:
    """A gang already ready takes its next pod in another rack of its block when the
    first rack tried has no room: an empty try is no placement (Volcano skips it too)."""
    objects = [queue("q1"), node("n1", cpu="1"), node("n2", cpu="1"), node("n3", cpu="1"),
               hypernode("r0", 1, nodes=["n1"]), hypernode("r1", 1, nodes=["n2", "n3"]),
               hypernode("b", 2, children=["r0", "r1"])]
    group = podgroup("pg", 1, queue="q1")
    group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 2}
    objects += [group, *(pod(f"p{i}", cpu="1", memory="1Gi", group="pg", queue="q1")
                         for i in range(4))]
    report = simulate(objects, CONF, sessions=2)
    assert sorted(report["binds"].values()) == ["n1", "n2", "n3"]
    assert report["pending"]["default/p3"] == [
        "In hyperNode b: 0/3 nodes are available: 3 Insufficient cpu."]


def test_a_node_in_two_hypernodes_of_a_tier_counts_in_the_first_only() -> None:
    """n2 is in racks a and b: it counts in a, the first by name, only. Rack a has one
    CPU free (n1 is busy), rack b two (n3): a gang of three one-CPU pods held to one rack
    waits, rather than go to n2 and n3 as if they shared a rack; with a third CPU on n3,
    rack b holds it."""
    objects = [queue("q1"), node("n1", cpu="1"), node("n2", cpu="1"), node("n3", cpu="2"),
               hypernode("a", 1, nodes=["n1", "n2"]), hypernode("b", 1, nodes=["n2", "n3"]),
               pod("busy", cpu="1", node_name="n1")]
    group = podgroup("pg", 3, queue="q1")
    group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    objects += [group, *(pod(f"p{i}", cpu="1", memory="1Gi", group="pg", queue="q1")
                         for i in range(3))]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert sorted(report["pending"]) == ["default/p0", "default/p1", "default/p2"]
    objects[3] = node("n3", cpu="3")
    report = simulate(objects, CONF)
    assert sorted(report["binds"].values()) == ["n3", "n3", "n3"]


def test_a_pod_without_a_podgroup_asks_by_annotations() -> None:
    """Volcano's pod annotations for a pod without a PodGroup: hard tier 1 keeps it to a
    node some tier-1 HyperNode holds (n3 is in none and would score best: emptiest);
    annotations it cannot read are Volcano's defaults (hard, no tier): placed anyway."""
    nodes = [node("n1", cpu="4"), node("n2", cpu="4"), node("n3", cpu="8")]
    held = [pod(f"busy-{n}", cpu="2", node_name=n, phase="Running") for n in ("n1", "n2")]
    asks = pod("asks", cpu="1", annotations={"volcano.sh/network-topology-mode": "hard",
                                             "volcano.sh/network-topology-highest-tier": "1"})
    odd = pod("odd", cpu="1", annotations={"volcano.sh/network-topology-mode": "tight",
                                           "volcano.sh/network-topology-highest-tier": "x"})
    plain = pod("plain", cpu="1")
    conf = CONF.replace("{name: predicates}", "{name: predicates}, {name: nodeorder}")
    report = simulate([queue("default"), *nodes, *held,
                       hypernode("s0", 1, nodes=["n1", "n2"]), asks, odd, plain], conf)
    assert report["binds"]["default/asks"] in ("n1", "n2")
    assert report["binds"]["default/plain"] == "n3"
    assert "default/odd" in report["binds"]
