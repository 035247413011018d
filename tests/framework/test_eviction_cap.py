"""The cap on what one job may evict in a session (`maxEvictionRatio`, `guards.EvictionCap`):
seed 002's incident (48 GPUs asked, 376 evicted) cannot happen again.

Reusing what earlier evictions release already keeps the incident's shape to the GPUs
needed; the cap binds where that cannot help: victims much larger than what each pod
asks, on nodes each pod needs for itself (one hostPort per node)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import node, pod, podgroup, priority_class, queue, simulate

ROOT = Path(__file__).resolve().parents[2]
TIDAL_CONF = (ROOT / "conf" / "tidal-reclaim.conf").read_text()
GPU = "nvidia.com/gpu"
CARD = "NVIDIA-GeForce-RTX-4090"
LABELS = {"nvidia.com/gpu.product": CARD, "nvidia.com/gpu.count": "8"}
CAPPED = ("reclaim: evicting more for its job would pass maxEvictionRatio {ratio} times "
          "what the job asks")


def with_ratio(ratio: float | None, conf: str = TIDAL_CONF) -> str:
    if ratio is None:
        return conf
    return conf + f"""configurations:
- name: reclaim
  arguments: {{maxEvictionRatio: {ratio}}}
"""


def queues(cards: int) -> list[dict]:
    """Seed 002's queues and classes: inference (not reclaimable) takes from training."""
    quota = {"volcano.sh/card.quota": f'{{"{CARD}": {cards}}}'}
    limit = {"cpu": "10000", "memory": "40000Gi"}
    return [priority_class("pc-high", 80000), priority_class("pc-lowest", 20000),
            queue("queue-inference", priority=80000, reclaimable=False, capability=limit,
                  annotations=quota),
            queue("queue-training", priority=20000, reclaimable=True, capability=limit,
                  annotations=quota)]


def training_nodes(count: int, gpus_per_pod: int = 1) -> list[dict]:
    """`count` full 8-GPU nodes, each running one training gang of `8 / gpus_per_pod`
    pods (Job owners)."""
    objects: list[dict] = []
    for n in range(count):
        objects.append(node(f"gpu-{n}", cpu="64", memory="512Gi", labels=LABELS,
                            **{GPU: "8"}))
        size = 8 // gpus_per_pod
        objects.append(podgroup(f"train-{n}", size, queue="queue-training",
                                phase="Running", priority_class="pc-lowest"))
        objects += [pod(f"train-{n}-{i}", cpu="1", queue="queue-training",
                        group=f"train-{n}", node_name=f"gpu-{n}", owner_kind="Job",
                        priority_class="pc-lowest", **{GPU: str(gpus_per_pod)})
                    for i in range(size)]
    return objects


def replica_set(name: str, replicas: int, host_port: int | None = None,
                **requests: str) -> list[dict]:
    """A ReplicaSet's pending pods (one owner for all, as the controller makes them)."""
    pods = []
    for i in range(replicas):
        obj = pod(f"{name}-{i}", queue="queue-inference", priority_class="pc-high",
                  host_ports=[host_port] if host_port else None, **requests)
        obj["metadata"]["ownerReferences"] = [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
            "uid": f"{name}-uid", "controller": True}]
        pods.append(obj)
    return pods


def evicted(report: dict) -> list[str]:
    return sorted(e["pod"].split("/")[1] for e in report["evictions"])


def test_the_incidents_shape_evicts_what_the_replicas_need():
    """48 one-GPU inference replicas, 12 nodes full of 8-GPU training gangs: six gangs
    go (48 GPUs), each whole, and every replica waits on their GPUs, with or without
    the cap: the replicas reuse what is released."""
    objects = [*queues(96), *training_nodes(12),
               *replica_set("chat", 48, cpu="1", **{GPU: "1"})]
    for ratio in (None, 0):
        report = simulate(objects, with_ratio(ratio))
        gone = evicted(report)
        assert len(gone) == 48
        gangs = {name.rsplit("-", 1)[0] for name in gone}
        assert len(gangs) == 6 and all(
            sum(n.startswith(f"{g}-") for n in gone) == 8 for g in gangs)
        assert len(report["pipelined"]) == 48


def _one_per_node(ratio: float | None, replicas: int = 3, sessions: int = 1) -> dict:
    """`replicas` one-GPU replicas that each need a node of their own (one hostPort),
    on nodes full of 8-GPU gangs: each replica needs a gang of 8 GPUs gone."""
    objects = [*queues(64), *training_nodes(4),
               *replica_set("edge", replicas, host_port=8080, cpu="1", **{GPU: "1"})]
    return simulate(objects, with_ratio(ratio), sessions=sessions)


@pytest.mark.parametrize(("ratio", "placed"), [
    (None, 1),  # the default, 2: 3 GPUs asked, 6 may go; the first gang's 8 may anyway
    (5, 1),     # 15 may go: 8 + 8 would pass it
    (16 / 3, 2),  # 16 may go: two gangs, not three
    (8, 3),     # 24 may go: three gangs, exactly
    (0, 3),     # off
])
def test_the_cap_counts_gpus_for_a_job_that_asks_gpus(ratio, placed):
    report = _one_per_node(ratio)
    gone = evicted(report)
    assert len(gone) == 8 * placed
    assert len(report["pipelined"]) == placed


def test_a_capped_replica_waits_with_the_reason():
    report = _one_per_node(None)
    waiting = [key for key in report["pending"] if key.startswith("default/edge-")]
    assert len(waiting) == 2
    # Why it does not fit as the cluster is, then why reclaim did not help: the first
    # reason, the pod's condition and event, says both (as kube-scheduler's does).
    message = f"0/4 nodes are available: 4 Insufficient {GPU}. {CAPPED.format(ratio=2)}"
    for key in waiting:
        assert report["pending"][key][0] == message
        assert report["pendingJobs"][key]["reasons"][0] == message
    assert sorted(e["object"] for e in report["events"]
                  if e["reason"] == "FailedScheduling" and e["message"] == message) == [
        f"Pod/{key}" for key in sorted(waiting)]


def test_the_cap_is_per_session_so_a_capped_job_goes_on_in_the_next():
    # Each session the ReplicaSet's first plan may go: one gang a session, never three
    # at once.
    report = _one_per_node(None, sessions=3)
    assert len(report["evictions"]) == 24
    assert sorted(report["binds"]) == ["default/edge-0", "default/edge-1"]
    assert list(report["pipelined"]) == ["default/edge-2"]


def test_a_first_plan_may_take_a_gang_far_larger_than_the_job():
    """A one-GPU pod on nodes full of 8-GPU gangs: a gang cannot be evicted in part, so
    its first plan goes though it frees 8 times what it asks (a ratio of 2)."""
    objects = [*queues(64), *training_nodes(2),
               *replica_set("solo", 1, cpu="1", **{GPU: "1"})]
    report = simulate(objects, with_ratio(1))
    assert len(report["evictions"]) == 8
    assert report["pipelined"] == {"default/solo-0": "gpu-0"}


def test_a_job_without_gpus_is_measured_in_its_share_of_the_cluster():
    """Two one-CPU replicas (hostPort: one a node) on two 16-CPU nodes, each full with one
    16-CPU training pod: the two victims are 1.0 of the cluster's CPU and memory each
    way, the job asks 1/16 of each (and a pod slot): about 16 times as much. A ratio of
    10 stops the second eviction, 20 lets it go; measured in GPUs (none asked) nothing
    past the first plan could ever go."""
    objects = [*queues(0)]
    for n in range(2):
        objects.append(node(f"cpu-{n}", cpu="16", memory="16Gi"))
        objects.append(pod(f"batch-{n}", cpu="16", memory="16Gi", queue="queue-training",
                           node_name=f"cpu-{n}", owner_kind="Job",
                           priority_class="pc-lowest"))
    objects += replica_set("api", 2, host_port=8080, cpu="1", memory="1Gi")
    for ratio, gone in ((None, 1), (10, 1), (20, 2), (0, 2)):
        report = simulate(objects, with_ratio(ratio))
        assert len(report["evictions"]) == gone, ratio
        assert len(report["pipelined"]) == gone, ratio
    capped = simulate(objects, with_ratio(10))["pending"]
    assert [reasons[0].endswith(f". {CAPPED.format(ratio=10)}")
            for reasons in capped.values()] == [True]


def test_pods_of_different_controllers_are_capped_apart():
    # Three replica sets of one pod each: each job's first plan, none capped.
    objects = [*queues(64), *training_nodes(4)]
    for name in ("a", "b", "c"):
        objects += replica_set(name, 1, host_port=8080, cpu="1", **{GPU: "1"})
    report = simulate(objects, TIDAL_CONF)
    assert len(report["evictions"]) == 24
    assert len(report["pipelined"]) == 3


def _spread_gang(ratio: float | None) -> dict:
    """A gang of 3 one-GPU pods (minMember 3) that each need a node of their own, on
    nodes full of 8-GPU gangs. Its pods are planned one by one in one statement,
    committed only if the whole gang can wait."""
    group = podgroup("edge", 3, queue="queue-inference", priority_class="pc-high")
    members = [pod(f"edge-{i}", cpu="1", queue="queue-inference", group="edge",
                   priority_class="pc-high", host_ports=[8080], **{GPU: "1"})
               for i in range(3)]
    return simulate([*queues(64), *training_nodes(4), group, *members], with_ratio(ratio))


def test_evictions_not_yet_committed_count_against_the_cap():
    """The gang's second pod finds the first pod's gang of 8 already in its statement:
    8 + 8 would pass 2 x 3 GPUs, so the gang cannot wait whole and nothing is evicted
    (counting only committed evictions, each pod would pass as its job's first plan and
    three gangs would go). Without the cap, three gangs go."""
    report = _spread_gang(None)
    assert evicted(report) == [] and report["pipelined"] == {}
    assert any(CAPPED.format(ratio=2) in reason
               for reasons in report["pending"].values() for reason in reasons)
    uncapped = _spread_gang(0)
    assert len(evicted(uncapped)) == 24 and len(uncapped["pipelined"]) == 3
