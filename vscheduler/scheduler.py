"""One scheduling cycle over a cache, and where its decisions go.

The same `Scheduler` runs in `vscheduler simulate` and in the daemon; only the four
small receivers of its decisions differ: a binder, an evictor, a status writer and an
event sink (in memory for simulate; the Kubernetes API for the daemon). The cache takes
each decision at once (a bound pod is on its node for the next session, an evicted one
is terminating), as Volcano's cache assumes them; the receivers make them real, and a
receiver that fails puts the cache back (see the daemon).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from vscheduler.cache import Cache
from vscheduler.conf import SchedulerConf
from vscheduler.framework.close import pipelined_reason
from vscheduler.framework.placement import NodeSampling
from vscheduler.framework.results import Event, Eviction, SessionResult
from vscheduler.framework.session import Session
from vscheduler.model import Job, Task
from vscheduler.quantity import QuantityError
from vscheduler.resources import Resource

__all__ = ["Binder", "EventSink", "Evictor", "Scheduler", "StatusWriter"]


class Binder(Protocol):
    def bind(self, task: Task, node: str) -> None:
        """Bind the pod of `task` to `node`."""


class Evictor(Protocol):
    def evict(self, task: Task, eviction: Eviction) -> None:
        """Evict the pod of `task` (with its grace period), for `eviction.preemptor`."""


class StatusWriter(Protocol):
    def podgroup(self, job: Job) -> None:
        """Write a PodGroup's phase and conditions (called when they changed)."""

    def queue(self, name: str, allocated: Resource) -> None:
        """Write a queue's `status.allocated` (called when it changed)."""

    def queue_annotations(self, name: str, annotations: dict[str, str]) -> None:
        """Set these annotations on a Queue (what a plugin keeps there across
        restarts)."""

    def pending(self, task: Task, reasons: list[str]) -> None:
        """Say why a pod still waits (its PodScheduled=False condition)."""

    def nominate(self, task: Task, node: str) -> None:
        """Nominate `node` for a pod waiting on releasing room there ("": none)."""


class EventSink(Protocol):
    def emit(self, event: Event) -> None:
        """Record a Kubernetes Event."""


class Scheduler:
    """Runs sessions over `cache` with `conf` (replaceable between cycles)."""

    def __init__(self, cache: Cache, conf: SchedulerConf, *, binder: Binder,
                 evictor: Evictor, status: StatusWriter, events: EventSink,
                 default_queue: str = "default",
                 node_sampling: NodeSampling | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.cache = cache
        self.clock = clock
        self.conf = conf
        self.binder = binder
        self.evictor = evictor
        self.status = status
        self.events = events
        self.default_queue = default_queue
        self.node_sampling = node_sampling
        self.sessions = 0
        # seconds per phase of the last cycle: snapshot, open, each action, close (or
        # "idle" for a cycle that had nothing to do)
        self.timings: dict[str, float] = {}
        self._settled = -1  # the cache's generation when the last session was applied
        # queue name -> (the Queue object's uid, its status.allocated as last written)
        self._queues: dict[str, tuple[str, Resource]] = {}

    def run_once(self) -> SessionResult | None:
        """One cycle; None when nothing changed since the last session and nothing
        waits (a session would decide nothing and write what it wrote last time)."""
        started = time.perf_counter()
        cache = self.cache
        if cache.generation == self._settled and not cache.has_work():
            self.timings = {"idle": time.perf_counter() - started}
            return None
        self.sessions += 1  # (sessions run, numbered as the daemon logs them)
        snapshot = cache.snapshot()
        snapshot_seconds = time.perf_counter() - started
        session = Session(snapshot, self.conf, default_queue=self.default_queue,
                          uid=f"session-{self.sessions}", node_sampling=self.node_sampling,
                          now=self.clock())
        result = session.run()
        self.timings = {"snapshot": snapshot_seconds, **session.timings}
        self._apply(session, result)
        session.release()
        self._settled = cache.generation
        return result

    def _apply(self, session: Session, result: SessionResult) -> None:
        cache = self.cache
        for key, node in result.binds.items():
            cache.bind(key, node)
            task = cache.tasks[key]
            self.binder.bind(task, node)
            if task.pod.nominated_node:
                # (an API server before Kubernetes 1.35 keeps a bound pod's nomination,
                # which `kubectl get pod -o wide` then shows for good)
                self.status.nominate(task, "")
        for eviction in result.evictions:
            cache.set_releasing(eviction.task)
            self.evictor.evict(cache.tasks[eviction.task], eviction)
        # (the other jobs close as before: the cache holds their status, as written)
        for uid in result.visited_jobs:
            job = session.jobs[uid]
            changed = cache.set_podgroup_status(uid, job.phase, job.conditions)
            if changed and not (job.bare or job.held_only):  # (else no PodGroup to write)
                self.status.podgroup(job)
        for name, allocated in result.queues.items():
            # (A default queue that exists only in memory has no status to write.)
            if name in cache.queues and not allocated.equal(self._written_queue(name)):
                self._queues[name] = (cache.queues[name].meta_uid, allocated)
                self.status.queue(name, allocated)
        for name, written in result.queue_annotations.items():
            if name in cache.queues:  # (a default queue only in memory has no object)
                self.status.queue_annotations(name, written)
        for key, reasons in result.pending.items():
            task = cache.tasks.get(key)
            if task is not None:
                self.status.pending(task, reasons)
                if task.pod.nominated_node:
                    # (it waits on no node any more: the cluster autoscaler counts a
                    # nominated pod on its node)
                    self.status.nominate(task, "")
        for key, node in result.pipelined.items():
            task = cache.tasks.get(key)
            if task is not None:
                self.status.pending(task, [pipelined_reason(key, node)])
                if task.pod.nominated_node != node:
                    self.status.nominate(task, node)
        for event in result.events:
            self.events.emit(event)

    def _written_queue(self, name: str) -> Resource:
        """What the queue's status says it has allocated (as last written to this Queue
        object, or as the object came: one deleted and created again has the status
        it came with; unreadable counts as nothing)."""
        queue = self.cache.queues.get(name)
        uid = queue.meta_uid if queue is not None else ""
        kept = self._queues.get(name)
        if kept is not None and kept[0] == uid:
            return kept[1]
        try:
            written = Resource.from_k8s(queue.status_allocated if queue else None)
        except QuantityError:
            written = Resource()
        self._queues[name] = (uid, written)
        return written
