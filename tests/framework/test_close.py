"""The close of a session (framework/close.py): what a queue is reported and written
to hold, and the PodGroup phases the session leaves behind."""

from __future__ import annotations

from typing import Any

from tests.builders import conf, gang, load_cache, node, pod, queue
from vscheduler.framework.close import held_for_good
from vscheduler.framework.results import Event, Eviction
from vscheduler.model import Job, Task, TaskStatus
from vscheduler.resources import Resource
from vscheduler.scheduler import Scheduler


class Recorder:
    """The scheduler's four receivers, recording what would be written."""

    def __init__(self) -> None:
        self.binds: dict[str, str] = {}
        self.queues: list[tuple[str, dict[str, str]]] = []

    def bind(self, task: Task, node: str) -> None:
        self.binds[task.key] = node

    def evict(self, task: Task, eviction: Eviction) -> None:
        pass

    def podgroup(self, job: Job) -> None:
        pass

    def queue(self, name: str, allocated: Resource) -> None:
        self.queues.append((name, allocated.to_k8s()))

    def pending(self, task: Task, reasons: list[str]) -> None:
        pass

    def nominate(self, task: Task, node: str) -> None:
        pass

    def emit(self, event: Event) -> None:
        pass


def run_once(objects: list[dict[str, Any]]) -> tuple[Scheduler, Recorder, Any]:
    recorder = Recorder()
    scheduler = Scheduler(load_cache(objects), conf(), binder=recorder, evictor=recorder,
                          status=recorder, events=recorder)
    return scheduler, recorder, scheduler.run_once()


def terminating(name: str, node_name: str, cpu: str) -> dict[str, Any]:
    """A pod of another scheduler that is terminating on `node_name`: its resources
    are releasing, so a pod placed there is pipelined, not allocated."""
    obj = pod(name, cpu=cpu, node_name=node_name, scheduler="other")
    obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return obj


def test_a_gangs_uncommitted_allocations_are_not_its_queues() -> None:
    """A gang of 3 (minMember 3) on a node with room for 2 now and 1 once a pod
    terminates: two pods are allocated and one pipelined, the gang is not ready, so
    nothing is committed. The two allocated pods are pending, and the queue holds
    nothing of them: not in the session's result, not in what is written to the Queue's
    status (ARCHITECTURE.md invariant 8)."""
    objects = [node("n1", cpu="3"), terminating("old", "n1", cpu="1"), queue("q"),
               *gang("g", 3, cpu="1", queue="q")]
    scheduler, written, result = run_once(objects)

    assert result.binds == {}
    assert result.pipelined == {"default/g-2": "n1"}
    assert sorted(result.pending) == ["default/g-0", "default/g-1"]
    assert result.queues["q"].to_k8s() == {}
    assert written.queues == []
    job = next(iter(j for j in scheduler.cache.snapshot().jobs.values() if j.queue == "q"))
    assert job.count(TaskStatus.ALLOCATED) == 0  # the cache never took them either


def test_a_queue_counts_what_its_jobs_hold_for_good() -> None:
    """Running pods and pods committed (binding) this session count; a queue with a
    Queue object gets the figure written once."""
    objects = [node("n1", cpu="8"), queue("q"),
               pod("running", cpu="2", queue="q", node_name="n1"),
               *gang("g", 2, cpu="1", queue="q")]
    _, written, result = run_once(objects)

    assert sorted(result.binds) == ["default/g-0", "default/g-1"]
    assert result.queues["q"].to_k8s() == {"cpu": "4", "memory": "3Gi", "pods": "3"}
    assert written.queues == [("q", {"cpu": "4", "memory": "3Gi", "pods": "3"})]


def test_held_for_good_leaves_out_allocated_tasks_only() -> None:
    from tests.builders import open_session

    session = open_session([node("n1", cpu="8"), pod("running", cpu="2", node_name="n1"),
                            *gang("g", 2, cpu="1")])
    job = session.jobs["default/g"]
    statement = session.statement()
    for task in sorted(job.tasks.values(), key=lambda t: t.name):
        assert statement.allocate(task, session.nodes["n1"]) is None
    assert job.allocated.cpu == 2000  # the job's running total counts them...
    assert held_for_good(job).cpu == 0  # ...what it holds for good does not
    assert job.allocated.cpu == 2000  # (and is left as it was)
    statement.commit()
    assert held_for_good(job).cpu == 2000
    running = session.jobs[next(uid for uid in session.jobs if uid != "default/g")]
    assert held_for_good(running).cpu == 2000
