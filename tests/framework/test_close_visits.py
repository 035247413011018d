"""A close visits what changed: jobs that close as they did last session are passed by,
and the session's result, the statuses written and the report are what a close of
every job gives (a full copy each session makes every job a new copy: all are visited).
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import builders as b
from tests.framework.test_snapshot import CHANGES, _change, _FullCache, _simulation, _written
from tests.test_invariants import CONFS, clusters
from vscheduler.bench import BenchSpec, churn, generate
from vscheduler.cache import Cache
from vscheduler.framework.results import SessionResult
from vscheduler.model import Job, Task
from vscheduler.resources import Resource
from vscheduler.simulate import Simulation


class _Recorder:
    """The status writer of a simulation, recording every write in order."""

    def __init__(self) -> None:
        self.writes: list[tuple] = []

    def podgroup(self, job: Job) -> None:
        self.writes.append(("podgroup", job.uid, job.phase,
                            [c.as_dict() for c in job.conditions]))

    def queue(self, name: str, allocated: Resource) -> None:
        self.writes.append(("queue", name, _exact(allocated)))

    def pending(self, task: Task, reasons: list[str]) -> None:
        self.writes.append(("pending", task.key, list(reasons)))

    def nominate(self, task: Task, node: str) -> None:
        self.writes.append(("nominate", task.key, node))


def _recorded(simulation: Simulation) -> _Recorder:
    recorder = _Recorder()
    simulation.scheduler.status = recorder
    return recorder


def _exact(resource: Resource) -> list:
    return [repr(resource.cpu), repr(resource.memory),
            sorted((k, repr(v)) for k, v in resource.scalars.items())]


def _result(result: SessionResult) -> dict[str, Any]:
    """Everything a session's result says, as plain data (conditions as written)."""
    return {
        "binds": result.binds,
        "evictions": [(e.task, e.node, e.action, e.preemptor) for e in result.evictions],
        "pipelined": result.pipelined,
        "pending": result.pending,
        "pending_jobs": result.pending_jobs,
        "podgroups": [(uid, phase, [c.as_dict() for c in conditions])
                      for uid, (phase, conditions) in result.podgroups.items()],
        "queues": [(name, _exact(r)) for name, r in result.queues.items()],
        "queue_cards": result.queue_cards,
        "events": [e.key() for e in result.events],
        "timeouts": result.timeouts,
    }


def _step(simulation: Simulation, recorder: _Recorder) -> str:
    """One session: its result, the statuses it wrote and the report, as one text."""
    recorder.writes.clear()
    result = simulation.step()
    return json.dumps([_result(result), recorder.writes, simulation.report.as_dict()],
                      default=str)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), conf_name=st.sampled_from(sorted(CONFS)),
       changes=st.lists(st.tuples(st.sampled_from(CHANGES), st.integers(0, 20)),
                        min_size=2, max_size=6))
def test_a_close_of_what_changed_decides_as_a_close_of_every_job(
        objects, conf_name, changes):
    """Generated clusters and confs; between sessions pods, nodes, PodGroups and queues
    go and come back, binds fail, and PodGroups come back with their written status."""
    runs = []
    for cache in (Cache, _FullCache):
        simulation = _simulation(objects, conf_name, cache)
        recorder = _recorded(simulation)
        sessions = []
        for kind, pick in changes:
            sessions.append(_step(simulation, recorder))
            _change(simulation, objects, kind, pick)
        sessions.append(_step(simulation, recorder))
        sessions.append(_step(simulation, recorder))  # (one with nothing changed)
        runs.append(sessions)
    assert runs[0] == runs[1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(3, 30), running=st.integers(0, 120), jobs=st.integers(0, 8),
       churn_size=st.integers(1, 6), seed=st.integers(0, 1000))
def test_with_pods_coming_and_going_a_close_of_what_changed_decides_alike(
        nodes, running, jobs, churn_size, seed):
    """The bench's clusters: running gangs and pending work, pods finishing and new ones
    arriving each session."""
    spec = BenchSpec(nodes=nodes, running=running, jobs=jobs, churn=churn_size, seed=seed,
                     mig_every=3)
    objects = generate(spec)
    runs = []
    for cache in (Cache, _FullCache):
        simulation = _simulation(objects, "bench", cache)
        recorder = _recorded(simulation)
        rng = random.Random(seed)
        sessions = []
        for number in range(5):
            if number:
                churn(simulation, spec, rng, number)
            sessions.append(_step(simulation, recorder))
        runs.append(sessions)
    assert runs[0] == runs[1]


def _running_gangs(count: int) -> list[dict[str, Any]]:
    """Gangs that fit, and a pod that never does (so that every cycle runs a session)."""
    objects: list[dict[str, Any]] = [b.node("n1", cpu="64", memory="64Gi"),
                                     b.pod("huge", cpu="1000")]
    for i in range(count):
        objects += b.gang(f"g{i}", 2, cpu="1")
    return objects


def _visited(result: SessionResult) -> list[str]:
    """The gangs a session's close visited (the pod that never fits always is)."""
    assert "huge" in " ".join(result.visited_jobs)
    return [uid for uid in result.visited_jobs if "huge" not in uid]


def test_a_settled_job_is_not_visited_again_until_something_changes_it():
    """Gangs bound, then running: after the session that sees them run, their close is
    passed by; a pod finishing, conditions written by someone else, or other counts in
    the PodGroup read back make the job visited again."""
    objects = _running_gangs(3)
    simulation = _simulation(objects, "default", Cache)
    jobs = ["default/g0", "default/g1", "default/g2"]
    simulation.run(2)  # bound; seen running: Running (a new phase: copied anew)
    assert _visited(simulation.step()) == jobs  # settled
    result = simulation.step()
    assert _visited(result) == []
    assert {uid: entry[0] for uid, entry in result.podgroups.items()} == dict.fromkeys(
        jobs, "Running")

    simulation.cache.delete_pod("default/g1-0")  # a pod of g1 is gone: short of its
    assert _visited(simulation.step()) == ["default/g1"]  # gang, visited from now on
    jobs.remove("default/g1")

    groups = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PodGroup"}
    echo = _written(groups["g2"], simulation.cache.jobs["default/g2"])
    order = simulation.cache.podgroups["default/g2"].creation  # (read as when first read)
    simulation._add(echo, order)  # our own write, read back: nothing to visit
    assert _visited(simulation.step()) == ["default/g1"]
    other = copy.deepcopy(echo)
    other["status"]["running"] = 7  # counts someone else wrote: written again
    simulation._add(other, order)
    assert _visited(simulation.step()) == ["default/g1", "default/g2"]
    assert _visited(simulation.step()) == ["default/g1"]
    other = copy.deepcopy(echo)
    other["status"]["conditions"] = []  # conditions someone else cleared
    simulation._add(other, order)
    result = simulation.step()
    assert _visited(result) == ["default/g1", "default/g2"]
    assert [c.type for c in result.podgroups["default/g2"][1]] == ["Scheduled"]


def test_a_settled_job_losing_pods_to_preemption_is_visited():
    """Low-priority gangs run and settle; a high-priority pod arriving later evicts
    one of them: the victim's close (its queue's figures, its phase) is that of a close
    of every job, though nothing of it waits."""
    objects = [b.priority_class("low", 10), b.priority_class("high", 1000),
               b.node("n1", cpu="4", memory="8Gi"),
               *b.gang("g0", 2, cpu="1", priority_class="low"),
               *b.gang("g1", 2, cpu="1", priority_class="low")]
    arrival = b.pod("urgent", cpu="2", priority_class="high")
    runs = []
    for cache in (Cache, _FullCache):
        simulation = _simulation(objects, "reclaim-preempt", cache)
        recorder = _recorded(simulation)
        sessions = [_step(simulation, recorder) for _ in range(3)]
        simulation._add(arrival, 100.0)
        sessions += [_step(simulation, recorder) for _ in range(3)]
        assert simulation.report.evictions
        runs.append(sessions)
    assert runs[0] == runs[1]
