"""allocate with sub-groups (a PodGroup's `spec.subGroupPolicy`): each group a gang of
its own within one domain of its own tier, the job within its own, `minSubGroups`
groups of each policy before the job runs.

The cluster: blocks a and b, each of racks 1 and 2, each of two nodes of 8 GPUs (a rack
holds 16 GPUs, a block 32). Workers ask 4 GPUs; a replica is 4 workers, one rack.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.builders import hypernode, load_cache, node, pod, podgroup, queue, simulate
from vscheduler.objects import BadObject, parse_podgroup

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: proportion}, {name: network-topology-aware}]
"""
GPU = "nvidia.com/gpu"
RACK, BLOCK = {"mode": "hard", "highestTierAllowed": 1}, {"mode": "hard",
                                                          "highestTierAllowed": 2}


def cluster() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [queue("default")]
    for block in "ab":
        for rack in "12":
            names = [f"n-{block}{rack}-{i}" for i in range(2)]
            objects += [node(n, cpu="64", memory="256Gi", **{GPU: "8"}) for n in names]
            objects.append(hypernode(f"rack-{block}{rack}", 1, nodes=names))
        objects.append(hypernode(f"block-{block}", 2,
                                 children=[f"rack-{block}1", f"rack-{block}2"]))
    return objects


def rack_of(node_name: str) -> str:
    return "rack-" + node_name.split("-")[1]


def block_of(node_name: str) -> str:
    return "block-" + node_name.split("-")[1][0]


def train(min_member: int, replicas: int, *, workers: int = 4, gpus: str = "4",
          size: int = 4, min_groups: int | None = None, job_topology: dict | None = BLOCK,
          group_topology: dict | None = RACK, name: str = "train",
          policy: dict[str, Any] | None = None, role: str | None = None
          ) -> list[dict[str, Any]]:
    """A PodGroup with one policy grouping its workers by their `replica` label, and
    the workers: `replicas` of `workers` pods each."""
    group = podgroup(name, min_member)
    if job_topology is not None:
        group["spec"]["networkTopology"] = job_topology
    entry: dict[str, Any] = {"name": "replica", "matchLabelKeys": ["replica"],
                             "subGroupSize": size}
    if min_groups is not None:
        entry["minSubGroups"] = min_groups
    if group_topology is not None:
        entry["networkTopology"] = group_topology
    entry.update(policy or {})
    group["spec"]["subGroupPolicy"] = [entry]
    annotations = {"volcano.sh/task-spec": role} if role else None
    pods = [pod(f"{name}-{r}-{i}", cpu="1", group=name, annotations=annotations,
                labels={"replica": str(r), "role": "worker"}, **{GPU: gpus})
            for r in range(replicas) for i in range(workers)]
    return [group, *pods]


def replicas_of(binds: dict[str, str], name: str = "train") -> dict[str, list[str]]:
    placed: dict[str, list[str]] = {}
    for key, node_name in binds.items():
        pod_name = key.split("/")[1]
        if pod_name.startswith(name + "-"):
            placed.setdefault(pod_name.split("-")[1], []).append(node_name)
    return placed


def test_each_replica_gets_its_own_rack_within_one_block() -> None:
    """Rack a1 has 12 GPUs free, too few for a replica: block a cannot hold two, so the
    job goes to block b, one replica per rack."""
    filler = pod("filler", cpu="1", node_name="n-a1-0", phase="Running", **{GPU: "4"})
    report = simulate([*cluster(), filler, *train(8, 2, min_groups=2)], CONF)
    placed = replicas_of(report["binds"])
    assert sorted(placed) == ["0", "1"], report["pendingJobs"]
    racks = {replica: {rack_of(n) for n in nodes} for replica, nodes in placed.items()}
    assert all(len(r) == 1 for r in racks.values()), racks
    assert racks["0"] != racks["1"]
    assert {block_of(n) for nodes in placed.values() for n in nodes} == {"block-b"}


def test_replicas_may_span_blocks_when_the_job_has_no_limit() -> None:
    """Three racks have room for a replica, one in block a and two in block b: without
    a limit of its own the job takes all three, each replica whole in one rack."""
    fillers = [pod(f"filler-{i}", cpu="1", node_name=f"n-a1-{i}", phase="Running",
                   **{GPU: "4"}) for i in range(2)]
    report = simulate([*cluster(), *fillers,
                       *train(12, 3, min_groups=3, job_topology=None)], CONF)
    placed = replicas_of(report["binds"])
    assert len(placed) == 3, report["pendingJobs"]
    racks = [{rack_of(n) for n in nodes} for nodes in placed.values()]
    assert all(len(r) == 1 for r in racks)
    assert sorted(r.pop() for r in racks) == ["rack-a2", "rack-b1", "rack-b2"]


def test_min_sub_groups_lets_the_job_run_with_the_replicas_that_fit() -> None:
    """Block b holds two replicas, not three: with minSubGroups 2 and minMember 8 the
    job runs with two (each in a rack of its own), the third waits."""
    report = simulate([*cluster(), *train(8, 3, min_groups=2)], CONF)
    placed = replicas_of(report["binds"])
    assert len(placed) == 2, report["pendingJobs"]
    assert all(len({rack_of(n) for n in nodes}) == 1 for nodes in placed.values())
    assert len({block_of(n) for nodes in placed.values() for n in nodes}) == 1
    assert len(report["pending"]) == 4  # the third replica's workers


def test_job_waits_when_fewer_than_min_sub_groups_fit() -> None:
    """minSubGroups 3 within one block of two racks: never; nothing is bound, and the
    job says a replica found no rack."""
    report = simulate([*cluster(), *train(8, 3, min_groups=3)], CONF)
    assert report["binds"] == {}
    reasons = " ".join(report["pendingJobs"]["default/train"]["reasons"])
    assert "the 4 pods sub-group replica/2 still needs" in reasons, reasons


def test_a_replica_never_splits_over_racks_even_when_the_gpus_add_up() -> None:
    """Each rack has 8 GPUs free (one node of each rack half full... the other full):
    16 GPUs in the block, but no rack holds a replica of 4 x 4 GPUs."""
    fillers = [pod(f"filler-{r}", cpu="1", node_name=f"n-{r}-0", phase="Running",
                   **{GPU: "8"}) for r in ("a1", "a2", "b1", "b2")]
    report = simulate([*cluster(), *fillers, *train(4, 1, job_topology=None)], CONF)
    assert report["binds"] == {}
    reasons = report["pendingJobs"]["default/train"]["reasons"]
    assert any("sub-group replica/0" in r for r in reasons), reasons


def test_the_same_gpus_split_over_racks_without_a_group_limit() -> None:
    """The cluster of the last test, the group without a limit: the replica is placed
    over two racks (the limit, not the room, kept it out)."""
    fillers = [pod(f"filler-{r}", cpu="1", node_name=f"n-{r}-0", phase="Running",
                   **{GPU: "8"}) for r in ("a1", "a2", "b1", "b2")]
    report = simulate([*cluster(), *fillers,
                       *train(4, 1, job_topology=None, group_topology=None)], CONF)
    placed = replicas_of(report["binds"])
    assert len(placed["0"]) == 4
    assert len({rack_of(n) for n in placed["0"]}) == 2


def test_a_failed_replica_does_not_stop_its_role_in_the_others() -> None:
    """Replica 0's workers select a node label no node has: they fail in every rack.
    Replicas 1 and 2 share their role, whose failure counts for its own group only: the
    job runs with those two."""
    group, *workers = train(8, 3, min_groups=2, job_topology=None, role="worker")
    for worker in workers:
        if worker["metadata"]["labels"]["replica"] == "0":
            worker["spec"]["nodeSelector"] = {"gpu-model": "h100"}
    report = simulate([*cluster(), group, *workers], CONF)
    placed = replicas_of(report["binds"])
    assert sorted(placed) == ["1", "2"], report["pendingJobs"]


def test_pods_in_no_group_go_with_the_job() -> None:
    """A launcher without a replica label is in no group: placed by the job's limits
    (its block), beside the replicas."""
    objects = train(9, 2, min_groups=2)
    launcher = pod("train-launcher", cpu="1", group="train")
    report = simulate([*cluster(), *objects, launcher], CONF)
    assert len(report["binds"]) == 9, report["pendingJobs"]
    blocks = {block_of(n) for n in report["binds"].values()}
    assert len(blocks) == 1


def test_a_policy_without_keys_is_one_group_of_what_it_selects() -> None:
    """No matchLabelKeys: the pods its selector picks (role=worker) are one group of 4,
    placed within one rack."""
    objects = train(4, 1, job_topology=None,
                    policy={"matchLabelKeys": [],
                            "labelSelector": {"matchLabels": {"role": "worker"}}})
    report = simulate([*cluster(), *objects], CONF)
    placed = list(report["binds"].values())
    assert len(placed) == 4
    assert len({rack_of(n) for n in placed}) == 1


def test_a_selector_leaves_other_pods_out_of_the_policy() -> None:
    """The policy picks role=trainer: the workers are in no group and may spread over
    racks (the cluster is full but for 4 GPUs per rack)."""
    fillers = [pod(f"filler-{r}", cpu="1", node_name=f"n-{r}-0", phase="Running",
                   **{GPU: "8"}) for r in ("a1", "a2", "b1", "b2")]
    objects = train(4, 1, job_topology=None,
                    policy={"labelSelector": {"matchLabels": {"role": "trainer"}}})
    report = simulate([*cluster(), *fillers, *objects], CONF)
    assert len(report["binds"]) == 4


def test_too_few_groups_is_an_invalid_job() -> None:
    """minSubGroups 3 with two replicas can never run: not placed, and said so."""
    report = simulate([*cluster(), *train(8, 2, min_groups=3)], CONF)
    assert report["binds"] == {}
    reasons = " ".join(report["pendingJobs"]["default/train"]["reasons"])
    assert "Not enough valid subGroups" in reasons and "replica has 2" in reasons, reasons


def test_a_ready_job_adds_the_rest_of_a_replica_in_its_rack() -> None:
    """minMember 4 and replicas of 6 workers, subGroupSize 4: the job is ready with
    four; the other two workers of each replica follow in the replica's rack."""
    objects = train(4, 1, workers=4, size=4, job_topology=None, gpus="2")
    extra = [pod(f"train-0-{i}", cpu="1", group="train",
                 labels={"replica": "0", "role": "worker"}, **{GPU: "2"})
             for i in (4, 5)]
    report = simulate([*cluster(), *objects, *extra], CONF)
    placed = replicas_of(report["binds"])
    assert len(placed["0"]) == 6, report["pendingJobs"]
    assert len({rack_of(n) for n in placed["0"]}) == 1


def test_backfill_and_later_sessions_keep_groups_whole() -> None:
    """Two sessions, with the replicas' pods arriving over both: each replica stays in
    one rack (backfill leaves such jobs to allocate)."""
    group, *workers = train(4, 2, min_groups=1, job_topology=None)
    report = simulate([*cluster(), group, *workers], CONF, sessions=2)
    placed = replicas_of(report["binds"])
    assert all(len({rack_of(n) for n in nodes}) == 1 for nodes in placed.values())
    assert sum(len(nodes) for nodes in placed.values()) == 8


def test_backfill_never_places_part_of_a_group() -> None:
    """Two groups of two best-effort pods, minSubGroups 1, a node with three pod slots:
    allocate places group 0 and refuses group 1, which backfill leaves whole (pod by
    pod it would bind one of its two)."""
    group = podgroup("train", 2)
    group["spec"]["subGroupPolicy"] = [{"name": "r", "matchLabelKeys": ["r"],
                                        "subGroupSize": 2, "minSubGroups": 1}]
    pods = [pod(f"train-{r}-{i}", cpu=None, memory=None, group="train",
                labels={"r": str(r)}) for r in range(2) for i in range(2)]
    conf = CONF.replace(", {name: network-topology-aware}", "")
    binds = simulate([queue("default"), node("n1", pods="3"), group, *pods], conf)["binds"]
    assert sorted(binds) == ["default/train-0-0", "default/train-0-1"]


def test_groups_of_two_policies_never_merge() -> None:
    """Policy `a/1` (no keys) and policy `a` with a pod's value 1 would both show as
    a/1: they stay two groups, each with its own size."""
    group = podgroup("train", 1)
    group["spec"]["subGroupPolicy"] = [
        {"name": "a/1", "labelSelector": {"matchLabels": {"kind": "x"}}},
        {"name": "a", "matchLabelKeys": ["r"], "subGroupSize": 2}]
    cache = load_cache([queue("default"), group,
                        pod("x", group="train", labels={"kind": "x"}),
                        pod("y", group="train", labels={"r": "1"})])
    groups = cache.jobs["default/train"].clone().sub_groups()
    assert sorted((g.name, g.size, len(g.tasks)) for g in groups.values()) == [
        ("a/1", 1, 1), ("a/1", 2, 1)]


def test_a_changed_policy_regroups_the_cached_job() -> None:
    group = podgroup("train", 1)
    group["spec"]["subGroupPolicy"] = [{"name": "a", "matchLabelKeys": ["r"]}]
    cache = load_cache([queue("default"), group, pod("x", group="train", labels={"r": "1"})])
    job = cache.jobs["default/train"]
    assert [g.name for g in job.sub_groups().values()] == ["a/1"]
    group["spec"]["subGroupPolicy"] = [{"name": "b", "matchLabelKeys": ["r"]}]
    cache.add_podgroup(parse_podgroup(group))
    assert [g.name for g in job.sub_groups().values()] == ["b/1"]


def test_a_group_tried_in_several_racks_says_only_why_the_last_failed() -> None:
    """Three 5-GPU workers that must sit on rack a1's nodes (a label only they have):
    two fit there, the third does not; the racks tried after it refuse them all. No pod
    says it "can possibly be assigned" to a1, a try given up."""
    objects = [queue("default")]
    for block in "ab":
        for rack in "12":
            names = [f"n-{block}{rack}-{i}" for i in range(2)]
            labels = {"ok": "1"} if block + rack == "a1" else {}
            objects += [node(n, cpu="64", memory="256Gi", labels=labels, **{GPU: "8"})
                        for n in names]
            objects.append(hypernode(f"rack-{block}{rack}", 1, nodes=names))
        objects.append(hypernode(f"block-{block}", 2,
                                 children=[f"rack-{block}1", f"rack-{block}2"]))
    group, *workers = train(3, 1, workers=3, size=3, gpus="5", job_topology=None)
    for worker in workers:
        worker["spec"]["nodeSelector"] = {"ok": "1"}
    reasons = simulate([*objects, group, *workers], CONF)["pending"]["default/train-0-0"]
    assert not any("can possibly be assigned" in r for r in reasons), reasons


def test_decisions_repeat() -> None:
    objects = [*cluster(), *train(8, 3, min_groups=2)]
    assert simulate(objects, CONF) == simulate(objects, CONF)


@pytest.mark.parametrize(("entry", "field"), [
    ({"matchLabelKeys": ["r"]}, "spec.subGroupPolicy[0].name"),
    ({"name": "a", "subGroupSize": 0}, "spec.subGroupPolicy[0].subGroupSize"),
    ({"name": "a", "minSubGroups": -1}, "spec.subGroupPolicy[0].minSubGroups"),
    ({"name": "a", "matchLabelKeys": "r"}, "spec.subGroupPolicy[0].matchLabelKeys"),
    ({"name": "a", "matchLabelKeys": [""]}, "spec.subGroupPolicy[0].matchLabelKeys"),
    ({"name": "a", "labelSelector": {"matchExpressions": [{"key": "r", "operator": "Is"}]}},
     "spec.subGroupPolicy[0].labelSelector"),
    ({"name": "a", "networkTopology": {"mode": "tight"}},
     "spec.subGroupPolicy[0].networkTopology.mode"),
    ({"name": "a", "subGroupSize": "four"}, "spec.subGroupPolicy[0].subGroupSize"),
    ("not a map", "spec.subGroupPolicy[0]"),
])
def test_bad_policies_name_their_field(entry: Any, field: str) -> None:
    group = podgroup("train", 1)
    group["spec"]["subGroupPolicy"] = [entry]
    with pytest.raises(BadObject, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_podgroup(group)


def test_two_policies_of_one_name_are_refused() -> None:
    group = podgroup("train", 1)
    group["spec"]["subGroupPolicy"] = [{"name": "a"}, {"name": "a"}]
    with pytest.raises(BadObject, match="used by two"):
        parse_podgroup(group)


def test_a_bad_policy_skips_its_job_only() -> None:
    """The PodGroup with a bad policy is skipped, with a reason; the other job runs."""
    bad, *bad_pods = train(4, 1, name="bad", job_topology=None)
    bad["spec"]["subGroupPolicy"][0]["subGroupSize"] = -3
    good = train(4, 1, name="good", job_topology=None)
    report = simulate([*cluster(), bad, *bad_pods, *good], CONF)
    assert len(replicas_of(report["binds"], "good")["0"]) == 4
    assert not replicas_of(report["binds"], "bad")


def test_first_policy_that_takes_a_pod_wins() -> None:
    """Two policies both select the workers: the first one's groups take them; a pod
    without the first one's key goes to the second."""
    group = podgroup("train", 1)
    group["spec"]["subGroupPolicy"] = [
        {"name": "first", "matchLabelKeys": ["replica"], "subGroupSize": 2},
        {"name": "second", "matchLabelKeys": ["role"], "subGroupSize": 5}]
    pods = [pod(f"t{i}", group="train", labels={"replica": str(i % 2), "role": "w"})
            for i in range(4)]
    pods.append(pod("t-other", group="train", labels={"role": "w"}))
    cache = load_cache([queue("default"), group, *pods])
    groups = cache.jobs["default/train"].sub_groups()
    assert Counter({g.name: len(g.tasks) for g in groups.values()}) == Counter(
        {"first/0": 2, "first/1": 2, "second/w": 1})
