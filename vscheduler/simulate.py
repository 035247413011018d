"""`vscheduler simulate`: the real sessions on manifest files, with no cluster.

The world moves between sessions as a cluster would: bound pods start running, evicted
pods terminate and are gone, pipelined pods wait for what they wait on. Its clock starts
at the newest creationTimestamp in the files (or `now`) and moves one second a session,
Volcano's default period, so timeouts are decided the same way every run. Decisions are
applied in memory by the same cache methods the daemon calls when the API server
confirms them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import yaml

from vscheduler.cache import Cache
from vscheduler.conf import SchedulerConf
from vscheduler.framework.placement import NodeSampling
from vscheduler.framework.session import Event, Eviction, SessionResult
from vscheduler.model import Job, Task
from vscheduler.objects import (
    PODGROUP_GROUPS,
    BadObject,
    parse_node,
    parse_pod,
    parse_podgroup,
    parse_priority_class,
    parse_queue,
    timestamp_of,
)
from vscheduler.resources import Resource
from vscheduler.scheduler import Scheduler

__all__ = ["Report", "Simulation", "load_manifests"]


def load_manifests(paths: Iterable[str]) -> tuple[list[tuple[str, dict]], list[Event]]:
    """Every object in the files, as (where, object), and a Warning per unreadable part.
    `List` kinds are flattened. Raises OSError for a file that cannot be read."""
    objects: list[tuple[str, dict]] = []
    problems: list[Event] = []
    for path in paths:
        with open(path, encoding="utf-8", errors="strict") as handle:
            try:
                text = handle.read()
            except UnicodeDecodeError as err:
                problems.append(Event(f"File/{path}", "Warning", "BadManifest",
                                      f"{path}: not UTF-8 text (byte {err.start}), skipped"))
                continue
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else path
            problems.append(Event(f"File/{path}", "Warning", "BadManifest",
                                  f"{where}: not valid YAML, file skipped: "
                                  f"{getattr(err, 'problem', err)}"))
            continue
        for index, doc in enumerate(documents):
            if doc is None:
                continue
            where = f"{path}#{index}"
            if not isinstance(doc, dict):
                problems.append(Event(f"File/{path}", "Warning", "BadManifest",
                                      f"{where}: not a Kubernetes object, skipped"))
                continue
            if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
                objects.extend((f"{where}.items[{i}]", item) for i, item in
                               enumerate(doc["items"]) if isinstance(item, dict))
            else:
                objects.append((where, doc))
    return objects, problems


def _describe(obj: dict) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name", "?")
    namespace = meta.get("namespace")
    kind = obj.get("kind", "?")
    cluster_scoped = kind in ("Node", "Queue", "PriorityClass")
    if cluster_scoped:
        return f"{kind}/{name}"
    return f"{kind}/{namespace or 'default'}/{name}"


def _job_reasons(pods: list[str], pending: dict[str, list[str]]) -> list[str]:
    """A job's reasons: those all its pending pods share, then each pod's own, named."""
    shared = [r for r in pending[pods[0]] if all(r in pending[p] for p in pods[1:])]
    own = [f"{p.split('/', 1)[1]}: {r}" for p in pods for r in pending[p] if r not in shared]
    return shared + own if len(pods) > 1 else shared


def _queue_status(allocated: Resource, cards: dict[str, float] | None) -> dict[str, Any]:
    status: dict[str, Any] = {"allocated": allocated.to_k8s()}
    if cards is not None:
        status["cards"] = {name: int(count) if float(count).is_integer() else count
                           for name, count in sorted(cards.items())}
    return status


class Report:
    """Everything the run decided, in the JSON shape ARCHITECTURE.md fixes."""

    def __init__(self) -> None:
        self.sessions = 0
        self.binds: dict[str, str] = {}
        self.evictions: list[Eviction] = []
        self.last: SessionResult | None = None
        self.events: dict[tuple[str, str, str, str], int] = {}

    def add_event(self, event: Event) -> None:
        key = event.key()
        self.events[key] = self.events.get(key, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        last = self.last or SessionResult()
        return {
            "sessions": self.sessions,
            "binds": dict(self.binds),
            "evictions": [{"pod": e.task, "node": e.node, "action": e.action,
                           "for": e.preemptor} for e in self.evictions],
            "pipelined": dict(sorted(last.pipelined.items())),
            "pending": dict(sorted(last.pending.items())),
            "pendingJobs": {
                name: {"queue": queue, "pods": sorted(pods),
                       "reasons": _job_reasons(sorted(pods), last.pending)}
                for name, (queue, pods) in sorted(last.pending_jobs.items())
            },
            "podGroups": {
                uid: {"phase": phase, "conditions": [c.as_dict() for c in conditions]}
                for uid, (phase, conditions) in sorted(last.podgroups.items())
            },
            "queues": {name: _queue_status(allocated, last.queue_cards.get(name))
                       for name, allocated in sorted(last.queues.items())},
            "events": [
                {"object": obj, "type": type_, "reason": reason, "message": message,
                 "count": count}
                for (obj, type_, reason, message), count in self.events.items()
            ],
        }


class _InMemory:
    """Where simulate's decisions go: the cache already holds them; here they are
    recorded for the report, and the world moves on from them between sessions."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.bound: list[str] = []
        self.evicted: list[str] = []

    def bind(self, task: Task, node: str) -> None:
        self.report.binds[task.key] = node
        self.bound.append(task.key)
        self.emit(Event(f"Pod/{task.key}", "Normal", "Scheduled",
                        f"Successfully assigned {task.key} to {node}"))

    def evict(self, task: Task, eviction: Eviction) -> None:
        self.report.evictions.append(eviction)
        self.evicted.append(task.key)

    def podgroup(self, job: Job) -> None:
        pass  # the report reads the statuses from the last session's result

    def queue(self, name: str, allocated: Resource) -> None:
        pass

    def pending(self, task: Task, reasons: list[str]) -> None:
        pass

    def nominate(self, task: Task, node: str) -> None:
        pass

    def emit(self, event: Event) -> None:
        self.report.add_event(event)


class Simulation:
    """A cluster in memory, fed from manifests, scheduled by real sessions."""

    # Load order, so that what an object refers to is there before it.
    _ORDER: ClassVar[dict[str, int]] = {
        "PriorityClass": 0, "Queue": 1, "Node": 2, "PodGroup": 3, "Pod": 4}

    def __init__(self, conf: SchedulerConf, scheduler_names: tuple[str, ...] = ("vscheduler",),
                 default_queue: str = "default",
                 node_sampling: NodeSampling | None = None, now: float | None = None) -> None:
        self.conf = conf
        # seconds since the epoch; None until set by `now` or the files' timestamps
        self.now = now
        self._fixed_start = now is not None
        self.cache = Cache(scheduler_names, default_queue)
        self.report = Report()
        self._world = _InMemory(self.report)
        self.scheduler = Scheduler(self.cache, conf, binder=self._world,
                                   evictor=self._world, status=self._world,
                                   events=self._world, default_queue=default_queue,
                                   node_sampling=node_sampling,
                                   clock=lambda: self.now or 0.0)

    @property
    def timings(self) -> dict[str, float]:
        """Seconds per phase of the last session (snapshot, open, each action, close;
        "idle" for one that had nothing to do)."""
        return self.scheduler.timings

    def load(self, objects: list[tuple[str, dict]], problems: Iterable[Event] = ()) -> None:
        """Add objects; a malformed one is skipped with a Warning event naming it."""
        for event in problems:
            self.report.add_event(event)
        ranked = sorted(enumerate(objects), key=lambda item: (
            self._ORDER.get(str(item[1][1].get("kind")), 9), item[0]))
        for index, (where, obj) in ranked:
            try:
                self._add(obj, float(index))
                self._see_time(obj)
            except BadObject as err:
                self.report.add_event(Event(_describe(obj), "Warning", "BadObject",
                                            f"{where}: {_describe(obj)} skipped: {err}"))

    def _see_time(self, obj: dict) -> None:
        if self._fixed_start or self.report.sessions:
            return
        stamp = timestamp_of(obj)
        if stamp is not None and (self.now is None or stamp > self.now):
            self.now = stamp

    def _add(self, obj: dict, order: float) -> None:
        kind = obj.get("kind")
        group = str(obj.get("apiVersion", "")).split("/")[0]
        cache = self.cache
        if kind == "Pod":
            cache.add_pod(parse_pod(obj, order))
        elif kind == "Node":
            cache.add_node(parse_node(obj))
        elif kind == "PodGroup" and group in PODGROUP_GROUPS:
            cache.add_podgroup(parse_podgroup(obj, order))
        elif kind == "Queue" and group == "scheduling.volcano.sh":
            cache.add_queue(parse_queue(obj, order))
        elif kind == "PriorityClass":
            cache.add_priority_class(parse_priority_class(obj))
        # Other kinds (Deployments, Services, ...) do not affect scheduling.

    def step(self) -> SessionResult:
        """Let time pass, then run one session and apply its decisions."""
        self._advance()
        if self.report.sessions and self.now is not None:
            self.now += 1.0
        self.report.sessions += 1
        result = self.scheduler.run_once()
        if result is None:
            # Nothing to do: the state is the last session's, with nothing decided.
            result = SessionResult()
            if self.report.last is not None:
                result.podgroups = self.report.last.podgroups
                result.queues = self.report.last.queues
                result.queue_cards = self.report.last.queue_cards
        self.report.last = result
        return result

    def _advance(self) -> None:
        """Bound pods start running; evicted pods terminate and are gone."""
        world = self._world
        for key in world.bound:
            self.cache.set_running(key)
        for key in world.evicted:
            self.cache.delete_pod(key)
        world.bound.clear()
        world.evicted.clear()

    def run(self, sessions: int = 1) -> Report:
        for _ in range(sessions):
            self.step()
        return self.report
