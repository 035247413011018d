"""Elastic jobs under pressure (seed 000): a job with more replicas than its minMember
gives up the replicas above it first, before any pod whose eviction would break a gang,
and the report and the Evict events say which victims were such elastic replicas.

(Their placement, min first as a gang then the rest as room allows, is allocate's:
tests/actions/test_allocate.py.)"""

from __future__ import annotations

import pytest

from tests.builders import (
    PREEMPT_CONF,
    RECLAIM_CONF,
    gang,
    node,
    pod,
    priority_class,
    queue,
    simulate,
)

GPU = "nvidia.com/gpu"
CLASSES = [priority_class("production", 1000000), priority_class("normal", 10000),
           priority_class("spot", 100)]
ELASTIC_NOTE = "(an elastic replica: its job keeps at least its minMember 2)"


def scene(need: int, queue_name: str | None = None) -> list[dict]:
    """One full 8-GPU node: `finetune` (4 replicas, minMember 2, normal) and `pretrain`
    (a strict gang of 4, spot: the lower class), one GPU a pod, Job owners; a production
    pod asks `need` GPUs."""
    common = {"node_name": "gpu-0", "owner_kind": "Job", "phase": "Running",
              GPU: "1"}
    if queue_name:
        common["queue"] = queue_name
    objects = [*CLASSES, node("gpu-0", cpu="64", memory="512Gi", **{GPU: "8"}),
               *gang("finetune", 4, 2, priority_class="normal", **common),
               *gang("pretrain", 4, 4, priority_class="spot", **common)]
    for obj in objects:
        if obj["kind"] == "PodGroup":
            obj["status"]["phase"] = "Running"
    objects.append(pod("urgent", cpu="4", priority_class="production",
                       owner_kind="ReplicaSet", **{GPU: str(need)}))
    return objects


def victims(report: dict) -> dict[str, bool]:
    """Each evicted pod's name and whether the report marks it elastic."""
    return {e["pod"].split("/")[1]: e["elastic"] for e in report["evictions"]}


def evict_messages(report: dict) -> dict[str, str]:
    """The pods' Evict events (their PodGroups have one each too), by pod name."""
    return {e["object"].split("/")[2]: e["message"] for e in report["events"]
            if e["reason"] == "Evict" and e["object"].startswith("Pod/")}


def test_replicas_above_min_member_go_before_a_gang_of_a_lower_class():
    """The strict gang is of the lowest class, yet evicting any of its pods would break
    it: the two replicas finetune has above its minMember go instead."""
    report = simulate(scene(2), PREEMPT_CONF)
    assert victims(report) == {"finetune-3": True, "finetune-2": True}
    messages = evict_messages(report)
    assert set(messages) == {"finetune-2", "finetune-3"}
    for message in messages.values():
        assert message == f"Pod is evicted, because of preempt for default/urgent " \
                          f"{ELASTIC_NOTE}"
    assert report["pipelined"] == {"default/urgent": "gpu-0"}


def test_once_the_elastic_replicas_are_gone_a_gang_goes_whole_and_is_not_elastic():
    report = simulate(scene(6), PREEMPT_CONF)
    assert victims(report) == {"finetune-3": True, "finetune-2": True,
                               **{f"pretrain-{i}": False for i in range(4)}}
    messages = evict_messages(report)
    for i in range(4):
        assert messages[f"pretrain-{i}"] == \
            "Pod is evicted, because of preempt for default/urgent"


def test_an_elastic_job_evicted_whole_is_not_marked_elastic():
    # All eight GPUs: both jobs go whole; finetune keeps nothing, so none of its pods
    # was an elastic replica.
    report = simulate(scene(8), PREEMPT_CONF)
    marked = victims(report)
    assert len(marked) == 8 and not any(marked.values())
    assert not any(ELASTIC_NOTE in m for m in evict_messages(report).values())


@pytest.mark.parametrize("strategy", ["LowestPriority", "NewestFirst", "MinimumVictims",
                                      "MinimumGPUWaste"])
def test_every_strategy_takes_elastic_replicas_before_breaking_a_gang(strategy):
    conf = PREEMPT_CONF + f"""configurations:
- name: preempt
  arguments: {{strategy: {strategy}}}
"""
    report = simulate(scene(2), conf)
    marked = victims(report)
    assert len(marked) == 2 and all(name.startswith("finetune-") for name in marked)
    assert all(marked.values())


def test_reclaim_marks_elastic_replicas_too():
    objects = [queue("training", priority=20000, reclaimable=True),
               queue("inference", priority=80000, reclaimable=False),
               *scene(2, "training")]
    objects[-1]["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "inference"
    report = simulate(objects, RECLAIM_CONF)
    marked = victims(report)
    assert len(marked) == 2 and all(marked.values())
    assert all(name.startswith("finetune-") for name in marked)
    assert {e["queue"] for e in report["evictions"]} == {"training"}
