"""Copy-on-write snapshots: what a session sees is what a full copy of the cache would
show, whatever the cache and the last session changed in between."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import builders as b
from tests.invariants import run_checked
from tests.test_invariants import CONFS, clusters
from vscheduler.cache import Cache, Snapshot
from vscheduler.conf import parse_conf
from vscheduler.model import Job, Node, Task
from vscheduler.simulate import Simulation


def _job_state(job: Job) -> tuple:
    return (job.queue, job.min_available, job.phase, job.priority, job.preemptable,
            [(c.type, c.status, c.reason, c.message) for c in job.conditions],
            {uid: _task_state(t) for uid, t in job.tasks.items()},
            {status: sorted(tasks) for status, tasks in job._by_status.items() if tasks},
            job.allocated.to_k8s(), dict(job.fit_errors))


def _task_state(task: Task) -> tuple:
    return (task.key, task.status, task.node_name, task.priority, task.eviction_occurred,
            task.last_transaction, task.resreq is not None and task.resreq.to_k8s())


def _node_state(node: Node) -> tuple:
    return (node.idle.to_k8s(), node.used.to_k8s(), node.releasing.to_k8s(),
            node.pipelined.to_k8s(), node.labels, node.unschedulable,
            {key: (_task_state(t), status) for key, (t, status) in node.tasks.items()})


def assert_same_snapshot(cache: Cache, incremental: Snapshot, full: Snapshot) -> None:
    assert list(incremental.jobs) == list(full.jobs)
    for uid, job in incremental.jobs.items():
        assert _job_state(job) == _job_state(full.jobs[uid]), uid
    assert list(incremental.nodes) == list(full.nodes)
    copies = {t.key: t for job in incremental.jobs.values() for t in job.tasks.values()}
    for name, node in incremental.nodes.items():
        assert _node_state(node) == _node_state(full.nodes[name]), name
        for key, (task, _) in node.tasks.items():
            # the very objects the session's jobs hold, or the cache's for the others
            assert task is copies.get(key, cache.tasks.get(key)), (name, key)
            assert task is not cache.tasks.get(key) or key not in copies
    assert sorted(incremental.skipped) == sorted(full.skipped)
    assert incremental.warnings == full.warnings


class _CheckedCache(Cache):
    """Compares every snapshot with a full copy taken at the same moment."""

    def snapshot(self, reuse: bool = True) -> Snapshot:
        full = super().snapshot(reuse=False)
        incremental = super().snapshot(reuse=reuse)
        assert_same_snapshot(self, incremental, full)
        return incremental


class _FullCache(Cache):
    def snapshot(self, reuse: bool = True) -> Snapshot:
        return super().snapshot(reuse=False)


def _simulation(objects: list[dict[str, Any]], conf_name: str, cache: type[Cache]
                ) -> Simulation:
    simulation = Simulation(parse_conf(CONFS[conf_name], conf_name))
    simulation.cache.__class__ = cache
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    return simulation


CHANGES = ("delete-pod", "readd-pod", "delete-node", "readd-node", "delete-podgroup",
           "readd-podgroup", "delete-queue", "readd-queue", "unbind", "none")


def _change(simulation: Simulation, objects: list[dict[str, Any]], kind: str,
            pick: int) -> None:
    """Change the cache between sessions as the world would."""
    cache = simulation.cache
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    name = kind.split("-", 1)[-1].capitalize().replace("group", "Group")
    manifests = by_kind.get(name, [])
    if kind == "unbind":
        bound = sorted(k for k, t in cache.tasks.items() if t.node_name and t.job_id)
        if bound:
            cache.unbind(bound[pick % len(bound)])
        return
    if not manifests:
        return
    obj = manifests[pick % len(manifests)]
    meta = obj["metadata"]
    key = f"{meta.get('namespace', 'default')}/{meta['name']}"
    if kind == "delete-pod":
        cache.delete_pod(key)
    elif kind == "delete-node":
        cache.delete_node(meta["name"])
    elif kind == "delete-podgroup":
        cache.delete_podgroup(key)
    elif kind == "delete-queue":
        cache.delete_queue(meta["name"])
    elif kind.startswith("readd-"):
        simulation._add(obj, float(pick))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), conf_name=st.sampled_from(sorted(CONFS)),
       changes=st.lists(st.tuples(st.sampled_from(CHANGES), st.integers(0, 20)),
                        min_size=1, max_size=4))
def test_incremental_snapshots_equal_full_copies(objects, conf_name, changes):
    checked = _simulation(objects, conf_name, _CheckedCache)
    full = _simulation(objects, conf_name, _FullCache)
    for kind, pick in changes:
        for simulation in (checked, full):
            run_checked(simulation, 1)
            _change(simulation, objects, kind, pick)
    run_checked(checked, 1)
    run_checked(full, 1)
    assert json.dumps(checked.report.as_dict()) == json.dumps(full.report.as_dict())


def test_an_unchanged_job_and_node_are_handed_on():
    simulation = _simulation([b.node("n1"), b.node("n2"),
                              *b.gang("train", 2, cpu="1"), b.pod("solo", cpu="1")],
                             "default", Cache)
    simulation.run(2)  # binds, then sees them run
    cache = simulation.cache
    first = cache.snapshot()
    cache.delete_pod("default/solo")
    second = cache.snapshot()
    assert second.jobs["default/train"] is first.jobs["default/train"]
    solo_node = first.jobs["default/solo#pod"].tasks
    assert "default/solo#pod" not in second.jobs, solo_node
    changed = {name for name in second.nodes if second.nodes[name] is not first.nodes[name]}
    assert len(changed) == 1  # the node solo ran on, only


def test_what_a_session_changed_is_copied_again():
    simulation = _simulation([b.node("n1", cpu="4"), *b.gang("train", 2, cpu="1")],
                             "default", Cache)
    cache = simulation.cache
    before = cache.snapshot()
    simulation.run(1)  # the session used `before`'s copies and bound the gang
    after = cache.snapshot()
    assert after.jobs["default/train"] is not before.jobs["default/train"]
    assert after.nodes["n1"] is not before.nodes["n1"]
    assert {t.status for t in after.jobs["default/train"].tasks.values()} == {
        cache.tasks["default/train-0"].status}
