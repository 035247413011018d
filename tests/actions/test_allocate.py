"""allocate: gangs bound whole, task order, pipelining, queues and reasons."""

from __future__ import annotations

import pytest

from tests.builders import gang, node, pod, podgroup, priority_class, queue, simulate

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
"""


def test_gang_that_fits_is_bound_whole():
    report = simulate([node("n1", cpu="4"), node("n2", cpu="4"), *gang("g", 4, cpu="2")],
                      CONF)
    assert sorted(report["binds"]) == [f"default/g-{i}" for i in range(4)]
    assert report["pending"] == {}


def test_tasks_are_taken_by_the_index_in_their_names():
    # Names of three parts or more end in an index (`job-worker-3`), as Volcano reads them.
    objects = [node("n1", cpu="2"), podgroup("w", 1),
               *(pod(f"job-w-{i}", cpu="1", group="w") for i in (10, 2, 1))]
    report = simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/job-w-1", "default/job-w-2"]


def test_task_waits_on_resources_being_released():
    releasing = pod("old", cpu="4", node_name="n1", scheduler="default-scheduler")
    releasing["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    report = simulate([node("n1", cpu="4"), releasing, pod("new", cpu="2")], CONF)
    assert report["binds"] == {}
    assert report["pipelined"] == {"default/new": "n1"}


def test_other_schedulers_pods_take_room_but_are_not_scheduled():
    objects = [node("n1", cpu="4"),
               pod("theirs", cpu="3", node_name="n1", scheduler="default-scheduler"),
               pod("unplaced", cpu="1", scheduler="default-scheduler"),
               pod("ours", cpu="2")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert "default/unplaced" not in report["pending"]
    assert report["pending"]["default/ours"] == ["0/1 nodes are available: 1 Insufficient cpu."]


def test_init_containers_and_overhead_count_as_kubernetes_counts_them():
    p = pod("p", cpu="1")
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3"}}}]
    p["spec"]["overhead"] = {"cpu": "500m"}
    report = simulate([node("n1", cpu="3"), p], CONF)
    assert report["pending"]["default/p"] == ["0/1 nodes are available: 1 Insufficient cpu."]
    report = simulate([node("n1", cpu="3500m"), p], CONF)
    assert report["binds"] == {"default/p": "n1"}


def test_nominated_node_is_tried_first():
    p = pod("p", cpu="1")
    p["status"]["nominatedNodeName"] = "n2"
    report = simulate([node("n1"), node("n2"), p], CONF)
    assert report["binds"] == {"default/p": "n2"}


def _terminating(name: str, node_name: str, cpu: str) -> dict:
    """Another scheduler's pod terminating on `node_name`: its room is releasing."""
    obj = pod(name, cpu=cpu, node_name=node_name, scheduler="other")
    obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return obj


def _nominated(name: str, node_name: str, cpu: str) -> dict:
    obj = pod(name, cpu=cpu)
    obj["status"]["nominatedNodeName"] = node_name
    return obj


def test_a_nominated_pod_that_fits_now_elsewhere_does_not_wait():
    """Nominated to n1, whose room is still being released, while n2 has room now: it
    is bound to n2 (as kube-scheduler tries a nominated node only as the cluster is)."""
    objects = [node("n1", cpu="4"), _terminating("old", "n1", cpu="4"),
               node("n2", cpu="4"), _nominated("p", "n1", cpu="2")]
    report = simulate(objects, CONF)
    assert report["binds"] == {"default/p": "n2"} and report["pipelined"] == {}


def test_a_nominated_pod_that_must_wait_waits_on_its_nominated_node():
    """Room releasing on n1 and on n2 alike: nominated to n2 it keeps waiting there,
    not on room released for another pod (unnominated, it would take n1, the first)."""
    objects = [node("n1", cpu="4"), _terminating("old-1", "n1", cpu="4"),
               node("n2", cpu="4"), _terminating("old-2", "n2", cpu="4"),
               _nominated("p", "n2", cpu="2")]
    report = simulate(objects, CONF)
    assert report["binds"] == {} and report["pipelined"] == {"default/p": "n2"}
    objects[-1] = pod("p", cpu="2")
    assert simulate(objects, CONF)["pipelined"] == {"default/p": "n1"}


@pytest.mark.parametrize(("other", "held"), [(10, True), (1000, True), (5000, False)])
def test_room_released_for_a_nominated_pod_is_held_against_lower_priority(other: int,
                                                                         held: bool):
    """n1's room is being released for p (priority 1000, nominated there). q, of another
    queue that goes first, fits that room too: of a lower or equal priority it must
    leave it to p (as kube-scheduler counts nominated pods when it filters a node), else
    the evictions made for p were for nothing; of a higher priority it may take it."""
    objects = [priority_class("p-class", 1000), priority_class("q-class", other),
               queue("a"), queue("b"), node("n1", cpu="4"),
               _terminating("old", "n1", cpu="4"),
               pod("q", cpu="2", queue="a", priority_class="q-class"),
               _nominated("p", "n1", cpu="4")]
    objects[-1]["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] = "b"
    objects[-1]["spec"]["priorityClassName"] = "p-class"
    report = simulate(objects, CONF)
    if held:
        assert report["pipelined"] == {"default/p": "n1"}
        assert report["pending"]["default/q"] == [
            "0/1 nodes are available: 1 node(s) had room held for a nominated pod of "
            "higher or equal priority."]
    else:
        assert report["pipelined"] == {"default/q": "n1"}
        assert "default/p" in report["pending"]


def test_scheduling_gated_pod_waits_with_a_reason():
    report = simulate([node("n1"), pod("p", gates=["example.com/quota"])], CONF)
    assert report["binds"] == {}
    assert report["pending"]["default/p"] == [
        "Pod has scheduling gates: example.com/quota"]


def test_closed_queue_takes_nothing_new():
    objects = [node("n1"), queue("closed", state="Closed"),
               *gang("g", 1, queue="closed"), pod("solo", queue="closed")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert report["podGroups"]["default/g"]["phase"] == "Pending"
    assert "queue closed is Closed" in report["pending"]["default/g-0"][0]


@pytest.mark.parametrize(("closed", "parent", "state"), [
    ("dept", "dept", "Closed"), ("dept", "dept", "Closing"), ("root", "", "Closed"),
    ("org", "dept", "Closing")])
def test_a_queue_under_a_closed_one_takes_nothing_new(closed: str, parent: str, state: str):
    """Closing a department closes its teams, as Volcano's queue controller does (here,
    where no controller may run, the scheduler reads it so): no admission, no placement,
    with the ancestor named. A queue without a parent is under root. Reopened, the
    team's pods are placed."""
    tree = {"root": queue("root"), "org": queue("org"), "dept": queue("dept", parent="org")}
    tree[closed] = queue(closed, state=state, parent=tree[closed]["spec"].get("parent"))
    objects = [node("n1"), *tree.values(), queue("team", parent=parent or None),
               *gang("g", 1, queue="team"), pod("solo", queue="team"), pod("other")]
    report = simulate(objects, CONF)
    # another branch goes on (under a closed root, nothing does)
    assert report["binds"] == ({} if closed == "root" else {"default/other": "n1"})
    assert report["podGroups"]["default/g"]["phase"] == "Pending"
    reason = f"queue team's ancestor {closed} is {state}: it takes nothing new"
    assert report["pending"]["default/g-0"][0] == reason
    assert report["pending"]["default/solo"][0] == reason
    objects[list(tree).index(closed) + 1] = queue(
        closed, parent=tree[closed]["spec"].get("parent"))
    report = simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/g-0", "default/other", "default/solo"]


def test_podgroup_naming_a_missing_queue_waits_with_a_warning():
    report = simulate([node("n1"), *gang("g", 1, queue="nowhere")], CONF)
    assert report["binds"] == {}
    assert report["pending"]["default/g-0"] == ["queue 'nowhere' not found: the job waits "
                                                "for it"]
    assert any(e["object"] == "PodGroup/default/g" and e["type"] == "Warning"
               and e["reason"] == "QueueNotFound" for e in report["events"])
    # The pod's own event says it too (kubectl describe pod shows events, not the
    # condition's message).
    assert [(e["type"], e["reason"], e["message"]) for e in report["events"]
            if e["object"] == "Pod/default/g-0"] == [
        ("Warning", "FailedScheduling", "queue 'nowhere' not found: the job waits for it")]


def test_pod_naming_a_missing_podgroup_waits_with_a_reason():
    report = simulate([node("n1"), pod("p", group="ghost")], CONF)
    assert report["pending"]["default/p"] == ["PodGroup default/ghost not found: the pod "
                                              "waits for it"]
    assert [(e["type"], e["reason"], e["message"]) for e in report["events"]
            if e["object"] == "Pod/default/p"] == [
        ("Warning", "FailedScheduling", "PodGroup default/ghost not found: the pod waits for it")]


def test_without_enqueue_jobs_are_admitted_by_allocate():
    conf = CONF.replace('"enqueue, allocate, backfill"', '"allocate"')
    report = simulate([node("n1"), *gang("g", 2)], conf)
    assert sorted(report["binds"]) == ["default/g-0", "default/g-1"]


def test_bare_pods_are_jobs_of_one_in_their_annotated_queue():
    objects = [node("n1", cpu="2"), queue("q1"), pod("a", cpu="1", queue="q1"),
               pod("b", cpu="1")]
    report = simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/a", "default/b"]
    assert report["queues"]["q1"]["allocated"]["cpu"] == "1"
    assert report["queues"]["default"]["allocated"]["cpu"] == "1"
    assert report["podGroups"] == {}


def test_podgroup_phase_moves_inqueue_then_running():
    objects = [node("n1"), *gang("g", 2)]
    assert simulate(objects, CONF, sessions=1)["podGroups"]["default/g"]["phase"] == "Inqueue"
    assert simulate(objects, CONF, sessions=2)["podGroups"]["default/g"]["phase"] == "Running"


# --------------------------------------------------------------------------- elastic jobs


def _elastic(name: str, **args) -> list[dict]:
    """An elastic job (seed 000): 4 one-GPU replicas, minMember 2, Job owners."""
    return gang(name, 4, 2, cpu="1", owner_kind="Job", **{"nvidia.com/gpu": "1"}, **args)


def _gpu_node(gpus: int) -> dict:
    return node("gpu-0", cpu="64", memory="512Gi", **{"nvidia.com/gpu": str(gpus)})


def test_an_elastic_job_is_placed_min_first_then_as_room_allows():
    for gpus, placed in ((1, 0), (2, 2), (3, 3), (5, 4)):
        report = simulate([_gpu_node(gpus), *_elastic("finetune")], CONF)
        assert len(report["binds"]) == placed, gpus
        # the job runs on what it has; the rest wait for room
        assert len(report["pending"]) == 4 - placed


def test_every_elastic_job_gets_its_minimum_before_any_gets_more():
    # Two elastic jobs, 4 GPUs: two each, not four for the first and none for the
    # other; more GPUs: the extra replicas as room allows.
    for gpus in (4, 5, 6):
        report = simulate([_gpu_node(gpus), *_elastic("a"), *_elastic("b")], CONF)
        counts = [sum(key.startswith(f"default/{job}-") for key in report["binds"])
                  for job in ("a", "b")]
        assert sum(counts) == gpus and min(counts) == 2, (gpus, counts)


def test_pod_of_a_podgroup_that_cannot_be_read_says_so():
    """A PodGroup refused (minMember -2): its pods wait and say why, not that it is
    missing; the PodGroup itself has the BadObject Warning."""
    bad = podgroup("neg", 1)
    bad["spec"]["minMember"] = -2
    report = simulate([node("n1"), bad, pod("p", group="neg")], CONF)
    why = ("PodGroup default/neg cannot be read (spec.minMember: must be 0 or more, got "
           "-2): the pod waits for it to be fixed")
    assert report["pending"]["default/p"] == [why]
    assert [(e["object"], e["reason"]) for e in report["events"]
            if e["type"] == "Warning"] == [("PodGroup/default/neg", "BadObject"),
                                           ("Pod/default/p", "FailedScheduling")]
