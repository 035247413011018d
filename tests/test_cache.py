"""The cache: what objects arriving and leaving do to it, what it says to write, and how
its tasks, jobs and nodes are copied for a session (snapshots themselves are tested in
tests/framework/test_snapshot.py)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from tests.builders import conf, gang, load_cache, node, pod, podgroup
from vscheduler import model
from vscheduler.cache import Cache
from vscheduler.kube.apply import apply_event
from vscheduler.model import Condition
from vscheduler.objects import BadObject, parse_node, parse_pod, parse_podgroup
from vscheduler.simulate import Simulation
from vscheduler.specs import NodeSpec, Pod, PodGroupSpec

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""

COPIED_CLASSES = [cls for _, cls in inspect.getmembers(model, inspect.isclass)
                  if cls.__module__ == model.__name__ and hasattr(cls, "clone")]


def test_the_classes_a_snapshot_copies_are_found():
    assert {cls.__name__ for cls in COPIED_CLASSES} >= {"Task", "Job", "Node"}


@pytest.mark.parametrize("cls", COPIED_CLASSES, ids=lambda cls: cls.__name__)
def test_every_slot_is_shared_copied_or_rebuilt_exactly_once(cls: type):
    declared = [*cls.SHARED, *cls.COPIED, *cls.REBUILT]
    assert sorted(declared) == sorted(set(declared)), "a slot declared twice"
    assert set(declared) == set(cls.__slots__)


def _copies() -> list[tuple[object, object]]:
    """(original, copy) pairs of every copied class, the originals as the cache holds
    them after a session ran."""
    simulation = Simulation(conf(CONF))
    objects = [node("n1", cpu="2"), *gang("g", 3, cpu="1"), pod("solo", cpu="1")]
    simulation.load([(f"t#{i}", obj) for i, obj in enumerate(objects)])
    simulation.run(1)
    cache = simulation.cache
    job, bare, task, n1 = (cache.jobs["default/g"], cache.jobs["default/solo#pod"],
                           cache.tasks["default/g-0"], cache.nodes["n1"])
    assert job.conditions and n1.tasks  # (what there is to copy is there)
    return [(job, job.clone()), (bare, bare.clone()), (task, task.clone()),
            (n1, n1.clone())]


def test_a_copy_shares_what_is_shared_and_has_its_own_of_what_is_copied():
    for original, copy in _copies():
        cls = type(original)
        for slot in cls.SHARED:
            assert getattr(copy, slot) is getattr(original, slot), (cls.__name__, slot)
        for slot in cls.COPIED:
            mine, theirs = getattr(copy, slot), getattr(original, slot)
            assert mine is not theirs, (cls.__name__, slot)
            assert type(mine) is type(theirs), (cls.__name__, slot)
        for slot in cls.REBUILT:
            getattr(copy, slot)  # set (an unset slot raises)


def test_a_copy_rebuilds_a_jobs_indexes_on_its_own_task_copies():
    cache = load_cache([node("n1"), *gang("g", 2)])
    job = cache.jobs["default/g"]
    copy = job.clone()
    assert set(copy.tasks) == set(job.tasks) and not copy.dirty
    assert all(copy.tasks[uid] is not task for uid, task in job.tasks.items())
    assert copy.count(model.TaskStatus.PENDING) == 2 and copy.allocated.is_empty()


def test_what_is_read_from_the_api_cannot_be_changed():
    parsed = parse_pod(pod("p"))
    spec = parse_podgroup(podgroup("g", 2))
    for frozen, field in ((parsed.pod, "phase"), (spec, "min_member"),
                          (parse_node(node("n1")), "unschedulable"),
                          (Condition("Ready", "True", "", ""), "status")):
        assert isinstance(frozen, Pod | PodGroupSpec | NodeSpec | Condition)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(frozen, field, None)


def test_a_job_reads_its_podgroups_spec_and_takes_a_new_one():
    cache = load_cache([podgroup("g", 2, queue="q"), pod("g-0", group="g")])
    job = cache.jobs["default/g"]
    assert (job.spec is cache.podgroups["default/g"], job.min_available, job.queue) == (
        True, 2, "q")
    cache.add_podgroup(parse_podgroup(podgroup("g", 3)))
    assert (job.min_available, job.queue, len(job.tasks)) == (3, "default", 1)


def test_a_pod_before_its_podgroup_waits_in_a_job_of_defaults():
    cache = load_cache([pod("g-0", group="g", creation="2024-01-01T00:00:00Z")])
    job = cache.jobs["default/g"]
    assert (job.min_available, job.queue, job.creation) == (1, "default", 1704067200)
    assert "default/g" not in cache.podgroups


def test_a_status_is_written_only_when_it_changes():
    cache = load_cache([node("n1"), podgroup("g", 1, phase="Running"),
                        pod("g-0", group="g", node_name="n1", phase="Running")])
    job = cache.jobs["default/g"]
    # the object says 0 running: the count differs, so the status is written once
    assert cache.set_podgroup_status("default/g", "Running", [])
    assert not cache.set_podgroup_status("default/g", "Running", [])
    assert cache.set_podgroup_status("default/g", "Running", [
        Condition("Scheduled", "True", "tasks in gang are ready to be scheduled", "")])
    assert [c.type for c in job.conditions] == ["Scheduled"]
    cache.add_podgroup(parse_podgroup(podgroup("g", 1, phase="Running")))  # read again
    assert cache.set_podgroup_status("default/g", "Running", [])


def test_a_podgroup_whose_pods_are_all_gone_waits_again():
    objects = [node("n1", cpu="2"), *gang("g", 2, cpu="1")]
    simulation = Simulation(conf(CONF))
    simulation.load([(str(i), o) for i, o in enumerate(objects)])
    simulation.run(2)
    assert simulation.report.as_dict()["podGroups"]["default/g"]["phase"] == "Running"
    for i in range(2):
        simulation.cache.delete_pod(f"default/g-{i}")
    simulation.step()
    assert simulation.report.as_dict()["podGroups"]["default/g"]["phase"] == "Pending"


def test_a_node_update_that_changes_nothing_read_changes_nothing():
    cache = load_cache([node("n1", labels={"zone": "a"}), pod("p", node_name="n1")])
    before = (cache.generation, cache.node_specs, cache.nodes["n1"])
    heartbeat = node("n1", labels={"zone": "a"})
    heartbeat["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    cache.add_node(parse_node(heartbeat))
    assert (cache.generation, cache.node_specs, cache.nodes["n1"]) == before
    cache.add_node(parse_node(node("n1", labels={"zone": "b"})))
    assert cache.node_specs == before[1] + 1 and cache.nodes["n1"] is not before[2]
    assert "default/p" in cache.nodes["n1"].tasks  # its pods move to the new object


def test_a_jobs_pods_on_a_missing_node_are_counted_and_its_copies_say_so():
    """`Job.orphaned` follows nodes and pods coming and going, and each change reaches
    the next snapshot's copy (the job is copied anew), which gang-safe eviction reads."""
    cache = load_cache([node("n1"), node("n2"), podgroup("g", 3, phase="Running"),
                        *(pod(f"g-{i}", group="g", node_name="n1" if i else "n2")
                          for i in range(3)),
                        pod("done", group="g", node_name="n2", phase="Succeeded")])
    job = cache.jobs["default/g"]

    def copied() -> tuple[int, int]:
        copy = cache.snapshot().jobs["default/g"]
        return copy.orphaned, copy.live_ready_num()

    assert copied() == (0, 4)
    cache.delete_node("n2")
    assert job.orphaned == 1 and copied() == (1, 3)  # (the Succeeded pod still counts)
    cache.add_pod(parse_pod(pod("g-3", group="g", node_name="gone")))
    assert copied() == (2, 3)
    cache.delete_pod("default/g-3")
    assert copied() == (1, 3)
    cache.add_node(parse_node(node("n2")))
    assert copied() == (0, 4)
    cache.delete_node("n2")
    cache.delete_pod("default/g-0")
    assert copied() == (0, 3)


def test_disruption_budgets_are_kept_and_handed_to_each_snapshot_in_name_order():
    from vscheduler.cache import Cache
    from vscheduler.ingest import add_object
    cache = Cache()
    for name in ("web", "api"):
        assert add_object(cache, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                  "metadata": {"name": name, "namespace": "shop"},
                                  "spec": {"minAvailable": 1,
                                           "selector": {"matchLabels": {"app": name}}}}) \
            == "PodDisruptionBudget"
    # A PodDisruptionBudget of another group is not one the scheduler reads.
    assert add_object(cache, {"apiVersion": "example.com/v1", "kind": "PodDisruptionBudget",
                              "metadata": {"name": "x"}}) is None
    assert [b.key for b in cache.snapshot().budgets] == ["shop/api", "shop/web"]
    cache.delete_disruption_budget("shop/api")
    assert [b.key for b in cache.snapshot().budgets] == ["shop/web"]


# --------------------------------------------------------------------------- collisions


def _apply(cache: Cache, kind: str, event_type: str, obj: dict) -> str | None:
    """Apply one watch event; the BadObject message if it is refused."""
    try:
        apply_event(cache, kind, event_type, obj)
    except BadObject as err:
        return str(err)
    return None


def _every_task_in_its_job(cache: Cache) -> None:
    for key, task in cache.tasks.items():
        if task.job_id:
            assert cache.jobs[task.job_id].tasks.get(task.uid) is task, key


@pytest.mark.parametrize("first", ["alone", "grouped"])
def test_a_group_name_with_a_hash_cannot_take_a_pods_job_of_one(first: str):
    """`solo#pod` is the id of pod solo's job of one. A group annotation can say anything
    (an API server checks names, not annotations): one naming it is refused, whichever
    pod comes first, and deleting the pods leaves no job behind."""
    cache = Cache()
    _apply(cache, "Node", "ADDED", node("n1"))
    alone, grouped = pod("solo"), pod("other", group="solo#pod")
    events = [alone, grouped] if first == "alone" else [grouped, alone]
    refused = [_apply(cache, "Pod", "ADDED", obj) for obj in events]
    assert refused[events.index(alone)] is None
    assert "'#' is in no Kubernetes name" in refused[events.index(grouped)]
    assert list(cache.tasks) == ["default/solo"]
    _every_task_in_its_job(cache)
    _apply(cache, "Pod", "DELETED", alone)
    assert cache.tasks == {} and cache.jobs == {}
    named = podgroup("solo#pod", 1)
    assert "'#' is in no Kubernetes name" in _apply(cache, "PodGroup", "ADDED", named)
    # Another scheduler's pod is not refused for it: on a node, it holds room there.
    theirs = pod("theirs", group="x#pod", node_name="n1", phase="Running",
                 scheduler="default-scheduler")
    assert _apply(cache, "Pod", "ADDED", theirs) is None
    assert list(cache.nodes["n1"].tasks) == ["default/theirs"]


def test_a_pod_whose_uid_another_pod_has_is_refused():
    """Jobs hold their tasks by uid and sessions keep what they worked out per uid: two
    pods of one uid (hand-written; never from an API server) made one vanish from its job
    and another judged with the first's requests. The second is refused; the first keeps
    its uid through updates, and once it is gone the uid is free."""
    cache = Cache()
    first, second = pod("a", group="g"), pod("b", cpu="4", namespace="other")
    first["metadata"]["uid"] = second["metadata"]["uid"] = "same"
    assert _apply(cache, "Pod", "ADDED", first) is None
    assert _apply(cache, "Pod", "ADDED", second) == \
        "metadata.uid: 'same' is pod default/a's uid too"
    assert _apply(cache, "Pod", "MODIFIED", first) is None
    assert list(cache.tasks) == ["default/a"]
    _every_task_in_its_job(cache)
    _apply(cache, "Pod", "DELETED", first)
    assert _apply(cache, "Pod", "ADDED", second) is None
    assert list(cache.tasks) == ["other/b"]
