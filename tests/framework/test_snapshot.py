"""Copy-on-write snapshots: what a session sees is what a full copy of the cache would
show, whatever the cache and the last session changed in between."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import builders as b
from tests.invariants import run_checked
from tests.test_invariants import CONFS, clusters
from vscheduler.bench import BENCH_CONF, BenchSpec, churn, generate
from vscheduler.cache import Cache, Snapshot
from vscheduler.cards import node_cards
from vscheduler.conf import parse_conf
from vscheduler.framework.session import Session
from vscheduler.model import Job, Node, Queue, Task, TaskStatus
from vscheduler.resources import Resource
from vscheduler.simulate import Simulation
from vscheduler.tally import Tally

S = TaskStatus


def _job_state(job: Job) -> tuple:
    return (job.queue, job.min_available, job.phase, job.priority, job.preemptable,
            [(c.type, c.status, c.reason, c.message) for c in job.conditions],
            {uid: _task_state(t) for uid, t in job.tasks.items()},
            {status: sorted(tasks) for status, tasks in job._by_status.items() if tasks},
            job.allocated.to_k8s(), dict(job.fit_errors))


def _task_state(task: Task) -> tuple:
    return (task.key, task.status, task.node_name, task.priority,
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
    assert incremental.waiting == full.waiting == [
        uid for uid, job in full.jobs.items() if job.is_pending() or job.count(S.PENDING)]


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
    conf = BENCH_CONF if conf_name == "bench" else CONFS[conf_name]
    simulation = Simulation(parse_conf(conf, conf_name))
    simulation.cache.__class__ = cache
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    return simulation


CHANGES = ("delete-pod", "readd-pod", "delete-node", "readd-node", "relabel-node",
           "delete-podgroup", "readd-podgroup", "echo-podgroup", "delete-queue", "readd-queue",
           "delete-priorityclass", "readd-priorityclass", "reprice-priorityclass", "unbind",
           "none")
KINDS = {"pod": "Pod", "node": "Node", "podgroup": "PodGroup", "queue": "Queue",
         "priorityclass": "PriorityClass"}


def _written(obj: dict[str, Any], job: Job) -> dict[str, Any]:
    """A PodGroup as the daemon's watch sees it again after writing `job`'s status
    (with the fields the writer sets, and a new resourceVersion)."""
    echo = copy.deepcopy(obj)
    echo["metadata"]["resourceVersion"] = str(int(
        echo["metadata"].get("resourceVersion", "0")) + 1)
    echo["status"] = {
        "phase": job.phase, "running": job.count(S.RUNNING),
        "succeeded": job.count(S.SUCCEEDED), "failed": job.count(S.FAILED),
        "conditions": [{**c.as_dict(), "lastTransitionTime": "2025-01-01T00:00:00Z"}
                       for c in job.conditions]}
    return echo


def _change(simulation: Simulation, objects: list[dict[str, Any]], kind: str,
            pick: int) -> None:
    """Change the cache between sessions as the world would."""
    cache = simulation.cache
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    manifests = by_kind.get(KINDS.get(kind.split("-", 1)[-1], ""), [])
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
    elif kind == "delete-priorityclass":
        cache.delete_priority_class(meta["name"])
    elif kind.startswith("readd-"):
        simulation._add(obj, float(pick))
    elif kind == "reprice-priorityclass":
        simulation._add({**obj, "value": obj["value"] + 7 * (pick + 1)}, float(pick))
    elif kind == "relabel-node":
        labels = {**meta.get("labels", {}), "changed": str(pick)}
        simulation._add({**obj, "metadata": {**meta, "labels": labels}}, float(pick))
    elif kind == "echo-podgroup" and key in cache.jobs and key in cache.podgroups:
        # (read as when first read: its creation is the order of an object without one)
        simulation._add(_written(obj, cache.jobs[key]), cache.podgroups[key].creation)


# (task facts, shared or not, and job minimums are read lazily, when asked)
_NOT_STATE = {"session", "args", "_tasks", "_alike", "_minimums"}


def _canon(value: Any, depth: int = 0) -> Any:
    """A plugin's figures as plain data; session objects by name."""
    if isinstance(value, Tally):
        return None  # (checked against a recount: `assert_tallies_recount`)
    if isinstance(value, Resource):
        return (round(value.cpu, 3), round(value.memory, 3),
                sorted((k, round(v, 3)) for k, v in value.scalars.items()))
    if isinstance(value, (Job, Task)):
        return value.uid
    if isinstance(value, (Node, Queue)):
        return value.name
    if isinstance(value, float):
        return round(value, 9)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, dict):
        return sorted((str(k), _canon(v, depth + 1)) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_canon(v, depth + 1) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if callable(value) or depth > 4:
        return None
    slots = [n for cls in type(value).__mro__ for n in getattr(cls, "__slots__", ())]
    fields = {n: getattr(value, n) for n in slots if hasattr(value, n)}
    fields.update(getattr(value, "__dict__", {}))
    return sorted((n, _canon(v, depth + 1)) for n, v in fields.items()
                  if n not in _NOT_STATE)


def assert_same_open(simulation: Simulation) -> None:
    """Plugins opened on the incremental snapshot (reusing what they kept in Job.memo
    and the sums they keep between sessions) see what they see when they read every job
    afresh; every kept sum equals a recount."""
    cache = simulation.cache
    fresh = Cache.snapshot(cache, reuse=False)
    fresh.kept = {}  # (counted afresh, leaving what the cache keeps alone)
    full = Session(fresh, simulation.conf, uid="check")
    incremental = Session(Cache.snapshot(cache), simulation.conf, uid="check")
    for name, plugin in incremental.plugins.items():
        assert _canon(plugin) == _canon(full.plugins[name]), name
    assert_tallies_recount(incremental.snapshot)


def _exact(resource: Resource | None) -> Any:
    """A resource's values as they are, its scalars in their order."""
    if resource is None:
        return None
    return (resource.cpu, resource.memory, list(resource.scalars.items()))


def assert_tallies_recount(snapshot: Snapshot) -> None:
    """Every sum kept in the cache equals a recount of the snapshot's jobs or nodes,
    exactly (values, scalars at zero, their order)."""
    for name, tally in snapshot.kept.items():
        if not isinstance(tally, Tally) or tally.serial != snapshot.serial:
            continue
        recount = tally.recounted(snapshot.jobs if tally.over == "jobs" else snapshot.nodes)
        assert {k: [_exact(r) for r in sums] for k, sums in tally.sums.items()} == \
            {k: [_exact(r) for r in sums] for k, sums in recount.sums.items()}, name
        assert tally.members == recount.members, name
        assert {k: (p[0], [_exact(a) for a in p[1]]) for k, p in tally.parts.items()} == \
            {k: (p[0], [_exact(a) for a in p[1]]) for k, p in recount.parts.items()}, name


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), conf_name=st.sampled_from(sorted(CONFS)),
       changes=st.lists(st.tuples(st.sampled_from(CHANGES), st.integers(0, 20)),
                        min_size=1, max_size=4))
def test_plugins_open_on_an_incremental_snapshot_as_on_a_full_copy(
        objects, conf_name, changes):
    simulation = _simulation(objects, conf_name, Cache)
    for kind, pick in changes:
        run_checked(simulation, 1)
        _change(simulation, objects, kind, pick)
        assert_same_open(simulation)


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


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(3, 30), running=st.integers(0, 120), jobs=st.integers(0, 8),
       churn_size=st.integers(1, 6), seed=st.integers(0, 1000),
       relabel=st.lists(st.integers(0, 29), max_size=3))
def test_plugins_reusing_what_they_read_decide_as_when_reading_afresh(
        nodes, running, jobs, churn_size, seed, relabel):
    """capacity-card, drf and proportion keep what they read of a job in Job.memo; with
    full copies every session they read everything again. Between sessions pods come
    and go, and a node may get another card model."""
    spec = BenchSpec(nodes=nodes, running=running, jobs=jobs, churn=churn_size, seed=seed,
                     mig_every=3)
    objects = generate(spec)
    node_objects = [o for o in objects if o["kind"] == "Node"]
    runs = []
    for cache in (_CheckedCache, _FullCache):
        simulation = _simulation(objects, "bench", cache)
        rng = random.Random(seed)
        for number in range(4):
            if number:
                churn(simulation, spec, rng, number)
            if number and number <= len(relabel):
                node = copy.deepcopy(node_objects[relabel[number - 1] % nodes])
                labels = node["metadata"]["labels"]
                labels["nvidia.com/gpu.product"] = "NVIDIA-A100-" + labels[
                    "nvidia.com/gpu.product"]
                simulation.load([("relabel", node)])
            if cache is _CheckedCache:
                assert_same_open(simulation)
            run_checked(simulation, 1)
            assert _reported_cards(simulation) == _placed_cards(simulation)
        runs.append(json.dumps(simulation.report.as_dict()))
    assert runs[0] == runs[1]


def _reported_cards(simulation: Simulation) -> dict[str, dict[str, float]]:
    queues = simulation.report.as_dict()["queues"]
    return {name: {card: count for card, count in queue.get("cards", {}).items() if count}
            for name, queue in queues.items()}


def _placed_cards(simulation: Simulation) -> dict[str, dict[str, float]]:
    """Cards per queue recounted from the cache: the card each placed pod's node offers
    for the resource it asks."""
    cache = simulation.cache
    out: dict[str, dict[str, float]] = {name: {} for name in _reported_cards(simulation)}
    for job in cache.jobs.values():
        for task in job.tasks.values():
            node = cache.nodes.get(task.node_name)
            if node is None or not task.status & (S.BOUND | S.BINDING | S.RUNNING):
                continue
            cards = node_cards(node.labels, node.allocatable)
            for resource, amount in task.resreq.scalars.items():
                card = cards.by_resource.get(resource) if cards else None
                if card is not None and amount > 0:
                    counts = out.setdefault(job.queue, {})
                    counts[card] = counts.get(card, 0.0) + amount / 1000
    return out


def test_an_unchanged_job_and_node_are_handed_on():
    simulation = _simulation([b.node("n1"), b.node("n2"),
                              *b.gang("train", 2, cpu="1"), b.pod("solo", cpu="1")],
                             "default", Cache)
    simulation.run(2)  # binds, then sees them run
    cache = simulation.cache
    first = cache.snapshot()
    # (the next snapshot takes this one apart: keep what to compare)
    first_jobs, first_nodes = dict(first.jobs), dict(first.nodes)
    solo_node = next(iter(first_jobs["default/solo#pod"].tasks.values())).node_name
    cache.delete_pod("default/solo")
    second = cache.snapshot()
    assert second.jobs["default/train"] is first_jobs["default/train"]
    assert "default/solo#pod" not in second.jobs
    changed = {name for name in second.nodes if second.nodes[name] is not first_nodes[name]}
    assert changed == {solo_node}


def test_what_a_session_changed_is_copied_again():
    simulation = _simulation([b.node("n1", cpu="4"), *b.gang("train", 2, cpu="1")],
                             "default", Cache)
    cache = simulation.cache
    before = cache.snapshot()
    job, node = before.jobs["default/train"], before.nodes["n1"]
    simulation.run(1)  # the session used `before`'s copies and bound the gang
    after = cache.snapshot()
    assert after.jobs["default/train"] is not job
    assert after.nodes["n1"] is not node
    assert {t.status for t in after.jobs["default/train"].tasks.values()} == {
        cache.tasks["default/train-0"].status}


@pytest.mark.parametrize("reuse", [True, False])
def test_running_pods_of_a_deleted_podgroup_still_count_against_their_queue(reuse):
    """A PodGroup deleted while its pods run: the pods keep their node and their queue's
    room. Left out of the session, they let a pending pod of the same queue past the
    queue's capability. Their pending siblings wait for the PodGroup."""
    simulation = Simulation(b.conf())
    simulation.load([(f"t#{i}", obj) for i, obj in enumerate([
        b.node("n1", cpu="4"),
        b.queue("q1", capability={"cpu": "2"}),
        b.podgroup("run", 1, queue="q1", phase="Running"),
        b.pod("run-0", cpu="1", group="run", queue="q1", node_name="n1", phase="Running"),
        b.pod("run-1", cpu="1", group="run", queue="q1"),
        b.pod("solo", cpu="2", queue="q1"),
    ])])
    simulation.cache.delete_podgroup("default/run")
    snapshot = simulation.cache.snapshot(reuse=reuse)
    held = snapshot.jobs["default/run"]
    assert held.held_only and set(held.tasks) == {"default/run-0"}
    assert "default/run-1" in snapshot.skipped
    simulation.cache.snapshot(reuse=reuse)  # the next session sees the same
    written: list[str] = []
    simulation.scheduler.status.podgroup = lambda job: written.append(job.uid)
    report = simulation.run(1).as_dict()
    assert written == []  # no PodGroup object to write
    assert "default/solo" not in report["binds"]
    assert "default/run" not in report["podGroups"]
    assert report["pending"]["default/run-1"] == [
        "PodGroup default/run not found: the pod waits for it"]
    assert report["queues"]["q1"]["allocated"]["cpu"] == "1"


def _running_gangs(count: int) -> list[dict[str, Any]]:
    """Gangs of 2 running on their nodes, their PodGroups Running with no conditions
    yet, and a pod that fits nowhere (so every session has work)."""
    objects: list[dict[str, Any]] = [b.node("n1", cpu="4"), b.node("n2", cpu="4")]
    for i in range(count):
        group = b.podgroup(f"g{i}", 2, phase="Running", creation="2025-01-01T00:00:00Z")
        objects += [group, *(b.pod(f"g{i}-{k}", cpu="1", group=f"g{i}",
                                   node_name=f"n{1 + i % 2}", phase="Running")
                             for k in range(2))]
    return [*objects, b.pod("huge", cpu="64")]


def test_conditions_a_session_set_leave_its_copies_good_for_the_next():
    """The first session writes every gang's Scheduled condition; the next one hands on
    the same copies (and what plugins kept in them) with the cache's conditions."""
    simulation = _simulation(_running_gangs(4), "default", _CheckedCache)
    cache = simulation.cache
    first = cache.snapshot()
    first_jobs = dict(first.jobs)
    simulation.run(1)  # the session used `first`'s copies and set their conditions
    assert [c.type for c in cache.jobs["default/g0"].conditions] == ["Scheduled"]
    second = cache.snapshot()
    for uid in ("default/g0", "default/g1", "default/g2", "default/g3"):
        job = second.jobs[uid]
        assert job is first_jobs[uid], uid
        assert job.memo, uid  # what plugins read at the first open is kept
        assert job.conditions == cache.jobs[uid].conditions  # (the cache's very ones)
        assert job.conditions is not cache.jobs[uid].conditions


def test_a_podgroup_seen_again_with_its_written_status_is_not_copied_again():
    """The daemon writes a PodGroup's status and its watch brings the object back: the
    job's copy is still good. A change to what it asks (minMember) is copied anew."""
    objects = _running_gangs(2)
    simulation = _simulation(objects, "default", _CheckedCache)
    cache = simulation.cache
    simulation.run(2)
    before = dict(cache.snapshot().jobs)
    groups = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PodGroup"}
    simulation._add(_written(groups["g0"], cache.jobs["default/g0"]), 0.0)
    changed = _written(groups["g1"], cache.jobs["default/g1"])
    changed["spec"]["minMember"] = 1
    simulation._add(changed, 0.0)
    after = cache.snapshot()
    assert after.jobs["default/g0"] is before["default/g0"]
    assert after.jobs["default/g0"].spec is cache.jobs["default/g0"].spec
    assert after.jobs["default/g1"] is not before["default/g1"]
    assert after.jobs["default/g1"].min_available == 1


def test_a_phase_written_alone_hands_the_copy_on_as_changed():
    """The close admits a gang it cannot place (Pending to Inqueue): its copy already
    holds that phase and the cache's pods, so the next snapshot hands it on rather than
    copying it again (a cluster's first sessions after a start would copy every waiting
    job twice). What plugins derive from a job may read its phase, so the copy comes as
    a changed job, its memo empty, and the sums kept between sessions count it again."""
    big = [b.podgroup("big", 3, min_resources={"cpu": "4"}),
           *(b.pod(f"big-{i}", "2", group="big") for i in range(3))]
    simulation = _simulation([b.node("n1", cpu="4"), *big], "default", _CheckedCache)
    cache = simulation.cache
    first = cache.snapshot()
    copy_of_first = first.jobs["default/big"]
    assert copy_of_first.phase == "Pending"
    simulation.run(1)  # admitted, not placed: the session's copy is Inqueue
    assert cache.jobs["default/big"].phase == "Inqueue"
    second = cache.snapshot()
    job = second.jobs["default/big"]
    assert job is copy_of_first and job.phase == "Inqueue"
    assert "default/big" in second.changed_jobs and job.memo == {}
    # the next session's kept sums, brought up to date, equal a recount: the queue's
    # room held for the gang it admitted too
    session = Session(second, simulation.conf)
    assert_tallies_recount(second)
    usage = second.kept["queue-usage"]
    assert usage.serial == second.serial and usage.amount("default/big", 2).cpu == 4000
    session.release()
    third = cache.snapshot()  # nothing written since: handed on as it is
    assert third.jobs["default/big"] is job and "default/big" not in third.changed_jobs


def test_a_gang_admitted_and_bound_is_copied_anew():
    """Its pods changed in the cache (bound), not only its phase: a new copy."""
    simulation = _simulation([b.node("n1", cpu="4"), *b.gang("train", 2, cpu="1")],
                             "default", _CheckedCache)
    cache = simulation.cache
    first = dict(cache.snapshot().jobs)
    simulation.run(1)  # admitted and bound: Inqueue
    assert cache.jobs["default/train"].phase == "Inqueue"
    assert cache.snapshot().jobs["default/train"] is not first["default/train"]


def test_a_gang_tried_and_not_placed_is_handed_on_as_a_copy_made_anew_would_be():
    """A gang that cannot be placed whole is tried in every session and its statement
    discarded: the discard puts its copy back as it was, so the next snapshot hands the
    copy on (checked against a full copy: its tasks in their order, nothing left of
    the attempt) instead of copying it anew and counting it again."""
    simulation = _simulation([b.node("n1", cpu="4"), *b.gang("big", 3, cpu="2")],
                             "default", _CheckedCache)
    cache = simulation.cache
    simulation.run(1)  # admitted: its phase changed, so it counts as changed next time
    job = cache.snapshot().jobs["default/big"]
    simulation.run(1)  # two of its three pods placed, then the statement discarded
    assert job.count(S.PENDING) == 3
    assert [t.last_transaction for t in job.tasks.values()] == [
        (S.ALLOCATED, "n1"), (S.ALLOCATED, "n1"), None]
    assert list(job.tasks_in(S.PENDING)) != list(job.tasks.values())
    after = cache.snapshot()
    assert after.jobs["default/big"] is job
    assert "default/big" not in after.changed_jobs
    assert list(job.tasks_in(S.PENDING)) == list(job.tasks.values())
    assert all(t.last_transaction is None for t in job.tasks.values())
    assert cache.snapshot().jobs["default/big"] is job


def test_sessions_after_the_first_update_their_sums_and_recount_none(monkeypatch):
    """With pods coming and going, every session after the first brings each kept sum
    up to date from what changed: none is counted whole again."""
    recounts: list[str] = []
    recount = Tally.recount

    def counted(self: Tally, objects: Any) -> None:
        recounts.append(self.over)
        recount(self, objects)

    monkeypatch.setattr(Tally, "recount", counted)
    spec = BenchSpec(nodes=20, running=100, jobs=4, churn=5, seed=3, mig_every=3)
    simulation = _simulation(generate(spec), "bench", Cache)
    rng = random.Random(3)
    simulation.step()
    assert recounts  # (the first session counts everything)
    recounts.clear()
    for number in range(1, 4):
        churn(simulation, spec, rng, number)
        simulation.step()
    assert recounts == []


def _running(name: str, size: int, node: str) -> list[dict[str, Any]]:
    """A gang admitted and running on `node`, its PodGroup without conditions."""
    return [b.podgroup(name, size, phase="Running"),
            *(b.pod(f"{name}-{i}", group=name, node_name=node, phase="Running")
              for i in range(size))]


def test_a_snapshot_visits_what_changed_only_and_a_job_closed_without_a_write():
    """A running gang is closed by a session run without writing its status back (the
    session's copy got its Scheduled condition; the cache did not): the next snapshot
    looks at it again and gives the copy the cache's conditions, as a full copy does.
    A job and nodes that nothing changed are not looked at."""
    simulation = _simulation([b.node("n1", cpu="2"), b.node("n2", cpu="2"),
                              *_running("run", 2, "n1"), *_running("idle", 1, "n2")],
                             "default", _CheckedCache)
    cache = simulation.cache
    session = Session(cache.snapshot(), simulation.conf)
    session.run()
    assert [c.type for c in session.jobs["default/run"].conditions] == ["Scheduled"]
    assert cache.jobs["default/run"].conditions == []
    looked_at: list[str] = []
    cache._left_out = lambda job, *args, left_out=cache._left_out: (
        looked_at.append(job.uid) or left_out(job, *args))
    # (the checked cache compares it with a full copy: the conditions are the cache's)
    snapshot = cache.snapshot()
    assert snapshot.jobs["default/run"].conditions == []
    assert snapshot.restated == ["default/idle", "default/run"]
    session = Session(snapshot, simulation.conf)
    session.run()
    cache.__class__ = Cache  # (from here on, what one snapshot looks at is counted)
    closed = {uid: list(session.jobs[uid].conditions) for uid in session.result.visited_jobs}
    looked_at.clear()
    cache.snapshot()
    assert looked_at == sorted(closed) == ["default/idle", "default/run"]
    for _ in range(2):
        for uid, conditions in closed.items():  # (as the scheduler writes them)
            cache.set_podgroup_status(uid, "Running", conditions)
        session = Session(cache.snapshot(), simulation.conf)
        session.run()
        closed = {uid: list(session.jobs[uid].conditions)
                  for uid in session.result.visited_jobs}
    assert closed == {}
    looked_at.clear()
    snapshot = cache.snapshot()
    assert looked_at == [] and snapshot.changed_nodes == [] and snapshot.changed_jobs == []


def test_a_queue_or_priority_class_read_again_unchanged_leaves_the_snapshot_its_visits():
    """The watch brings back our own write of a queue's status (a new object, the same
    spec): the queue keeps its object, with the new status, and the next snapshot
    visits nothing; a queue whose weight changed, or a PriorityClass of a new value,
    makes it visit every job, as a full copy would."""
    simulation = _simulation([b.node("n1", cpu="4"), b.queue("q", weight=1),
                              b.priority_class("high", 100),
                              *_running("a", 1, "n1"), *_running("b", 1, "n1")],
                             "default", Cache)
    simulation.run(2)
    cache = simulation.cache
    looked_at: list[str] = []
    cache._left_out = lambda job, *args, left_out=cache._left_out: (
        looked_at.append(job.uid) or left_out(job, *args))
    cache.snapshot()
    looked_at.clear()
    queue = cache.queues["q"]
    simulation._add(b.queue("q", weight=1) | {"status": {"allocated": {"cpu": "2"}}}, 1.0)
    simulation._add(b.priority_class("high", 100), 1.0)
    cache.snapshot()
    assert cache.queues["q"] is queue and queue.status_allocated == {"cpu": "2"}
    assert looked_at == []
    simulation._add(b.priority_class("high", 101), 1.0)
    cache.snapshot()
    assert looked_at == ["default/a", "default/b"]
    looked_at.clear()
    simulation._add(b.queue("q", weight=2), 1.0)
    cache.snapshot()
    assert cache.queues["q"].weight == 2
    assert looked_at == ["default/a", "default/b"]
