"""Eviction for a gang confined to one topology domain: reclaim (and preempt) frees one
domain, the one that takes fewest evictions, not room scattered where the gang cannot
go (framework/topology_eviction.py)."""

from __future__ import annotations

from typing import Any

from tests.builders import RECLAIM_CONF, hypernode, node, pod, podgroup, queue, simulate

GPU = "nvidia.com/gpu"
CONF = RECLAIM_CONF.replace("{name: nodeorder}]", "{name: nodeorder}, "
                            "{name: network-topology-aware}]")


def racks(limit: int | None) -> list[dict[str, Any]]:
    """Two racks of two 4-GPU nodes, every card taken by a reclaimable queue: rack r0 by
    one gang of four 2-GPU pods, rack r1 by eight 1-GPU pods of their own. A gang of
    four 2-GPU pods arrives in another queue, limited to one rack (`limit` 1) or not."""
    objects: list[dict[str, Any]] = [queue("train", reclaimable=True), queue("infer")]
    for rack in ("r0", "r1"):
        names = (f"{rack}n0", f"{rack}n1")
        objects += [node(n, cpu="16", memory="64Gi", **{GPU: "4"}) for n in names]
        objects.append(hypernode(rack, 1, nodes=names))
    objects.append(hypernode("block", 2, children=("r0", "r1")))
    objects.append(podgroup("big", 4, queue="train", phase="Running"))
    objects += [pod(f"big-{i}", cpu="1", group="big", queue="train",
                    node_name=f"r0n{i // 2}", **{GPU: "2"}) for i in range(4)]
    objects += [pod(f"small-{i}", cpu="1", queue="train", node_name=f"r1n{i // 4}",
                    **{GPU: "1"}) for i in range(8)]
    gang = podgroup("g", 4, queue="infer")
    if limit is not None:
        gang["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": limit}
    objects.append(gang)
    objects += [pod(f"g-{i}", cpu="1", group="g", queue="infer", **{GPU: "2"})
                for i in range(4)]
    return objects


def rack_of(node_name: str) -> str:
    return node_name[:2]


def test_a_gang_limited_to_a_rack_gets_the_rack_freed_with_fewest_evictions() -> None:
    confined = simulate(racks(1), CONF)
    anywhere = simulate(racks(None), CONF)
    # Limited to a rack: the whole gang of r0 goes (4 evictions), one rack freed.
    assert sorted(e["pod"] for e in confined["evictions"]) == [
        f"default/big-{i}" for i in range(4)]
    assert {rack_of(n) for n in confined["pipelined"].values()} == {"r0"}
    assert len(confined["pipelined"]) == 4
    # Without the limit each pod frees its own two cards where that wastes least: two
    # small pods each, eight evictions for the same eight cards.
    assert len(anywhere["evictions"]) == 8
    assert len(confined["evictions"]) < len(anywhere["evictions"])


def test_a_gang_no_rack_can_hold_evicts_nothing() -> None:
    objects = [o for o in racks(1) if not o["metadata"]["name"].startswith("g-")]
    objects += [pod(f"g-{i}", cpu="1", group="g", queue="infer", **{GPU: "2"})
                for i in range(5)]
    for o in objects:
        if o["kind"] == "PodGroup" and o["metadata"]["name"] == "g":
            o["spec"]["minMember"] = 5
    report = simulate(objects, CONF)
    assert report["evictions"] == []
    assert report["pipelined"] == {}
    assert any("HyperNode" in reason for reason in report["pending"]["default/g-0"])


def test_a_gang_with_pods_placed_is_freed_room_only_beside_them() -> None:
    """Two of the gang's pods already run in rack r1: the rest may only go there,
    whatever r0 would cost."""
    objects = racks(1)
    objects = [o for o in objects
               if o["metadata"]["name"] not in ("small-0", "small-1", "small-2", "small-3")]
    objects = [o for o in objects if o["metadata"]["name"] not in ("g-0", "g-1")]
    objects += [pod(f"g-{i}", cpu="1", group="g", queue="infer", node_name="r1n0",
                    **{GPU: "2"}) for i in (0, 1)]
    report = simulate(objects, CONF)
    assert {rack_of(n) for n in report["pipelined"].values()} == {"r1"}
    assert {e["node"] for e in report["evictions"]} == {"r1n1"}


def test_nothing_is_evicted_for_a_topology_gang_while_the_tree_is_not_ready() -> None:
    """A second parent claims rack r0: gangs that ask for a topology wait for the tree
    to be mended (allocate would not place them), so reclaim evicts nothing for one,
    soft or hard."""
    for wanted in ({"mode": "soft"}, {"mode": "hard", "highestTierAllowed": 1}):
        objects = [*racks(None), hypernode("other", 2, children=("r0",))]
        for o in objects:
            if o["kind"] == "PodGroup" and o["metadata"]["name"] == "g":
                o["spec"]["networkTopology"] = wanted
        report = simulate(objects, CONF)
        assert report["evictions"] == [] and report["pipelined"] == {}, wanted
        assert report["pending"]["default/g-0"][0].startswith(
            "HyperNodes are not ready for scheduling")
