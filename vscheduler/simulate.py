"""`vscheduler simulate`: the real sessions on manifest files, with no cluster.

The world moves between sessions as a cluster would: bound pods start running, evicted
pods terminate and are gone, pipelined pods wait for what they wait on. Its clock starts
at the newest creationTimestamp in the files (or `now`) and moves one second a session,
Volcano's default period (or `session_seconds`: a usage history replayed over hours),
so timeouts are decided the same way every run. Decisions are
applied in memory by the same cache methods the daemon calls when the API server
confirms them.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterable
from typing import Any, ClassVar

from vscheduler.cache import Cache
from vscheduler.conf import SchedulerConf
from vscheduler.framework.placement import NodeSampling
from vscheduler.framework.results import Event, Eviction, SessionResult
from vscheduler.ingest import (
    READ_GROUPS,
    add_object,
    describe,
    not_read,
    read_kind,
    refused,
    skipped_event,
)
from vscheduler.model import Job, Task
from vscheduler.objects import BadObject, metadata, timestamp_of
from vscheduler.resources import Resource
from vscheduler.scheduler import Scheduler
from vscheduler.textinput import (
    MAX_MANIFEST_BYTES,
    TextError,
    brief,
    load_yaml_documents,
    read_limited,
)

__all__ = ["ManifestError", "Manifests", "Report", "Simulation", "load_manifests"]


class ManifestError(Exception):
    """A manifest file that cannot be used at all (missing, unreadable, not YAML): one
    line for the user; `simulate` exits with 2."""


class Manifests:
    """What the files hold: every object as (where, object), a Warning per part left out,
    and a line per file that gives the scheduler nothing to read (for stderr)."""

    __slots__ = ("notes", "objects", "problems")

    def __init__(self) -> None:
        self.objects: list[tuple[str, dict]] = []
        self.problems: list[Event] = []
        self.notes: list[str] = []


STDIN = "-"


def _read_text(path: str) -> str:
    name = "stdin" if path == STDIN else path
    try:
        if path == STDIN:
            stream = getattr(sys.stdin, "buffer", None)
            data: str | bytes = read_limited(stream, MAX_MANIFEST_BYTES, name) \
                if stream is not None else sys.stdin.read(MAX_MANIFEST_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                data = read_limited(handle, MAX_MANIFEST_BYTES, name)
        if len(data) > MAX_MANIFEST_BYTES:  # (a text stdin, as tests give it)
            raise TextError(f"{name}: larger than {MAX_MANIFEST_BYTES:,} bytes; not read")
        return data if isinstance(data, str) else data.decode("utf-8")
    except OSError as err:
        raise ManifestError(f"cannot read {name}: {err.strerror or err}") from None
    except TextError as err:
        raise ManifestError(str(err)) from None
    except UnicodeDecodeError as err:
        raise ManifestError(f"{name}: not UTF-8 text (byte {err.start})") from None


def load_manifests(paths: Iterable[str]) -> Manifests:
    """The objects in the files (`-` is stdin). A document nested too deeply, or that is
    not a map, is left out with a Warning; `List` kinds are flattened. ManifestError for
    a file that is missing, unreadable or not YAML."""
    found = Manifests()
    for path in paths:
        name = "stdin" if path == STDIN else path
        text = _read_text(path)
        objects: list[tuple[str, dict]] = []
        try:
            for index, doc in enumerate(load_yaml_documents(text)):
                where = f"{name}#{index}"
                if doc is None:
                    continue
                if isinstance(doc, TextError):
                    found.problems.append(Event(f"File/{name}", "Warning", "BadManifest",
                                                f"{where}: {doc}; document skipped"))
                else:
                    _add_object(name, where, doc, objects, found.problems)
        except TextError as err:
            raise ManifestError(f"{name}: not valid YAML: {err}") from None
        found.objects.extend(objects)
        note = _unread_note(name, [obj for _, obj in objects])
        if note:
            found.notes.append(note)
    return found


def _add_object(name: str, where: str, doc: Any, objects: list[tuple[str, dict]],
                problems: list[Event]) -> None:
    """`doc` into `objects`, the items of a `List` kind (of Lists too) in its place; with
    a Warning for what is not an object."""
    todo = [(where, doc)]
    while todo:
        where, doc = todo.pop()
        if not isinstance(doc, dict):
            problems.append(Event(f"File/{name}", "Warning", "BadManifest",
                                  f"{where}: not a Kubernetes object, skipped"))
        elif str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            todo.extend(reversed([(f"{where}.items[{i}]", item)
                                  for i, item in enumerate(doc["items"])]))
        else:
            objects.append((where, doc))


def _unread_note(name: str, objects: list[dict]) -> str | None:
    """A line for a file the scheduler reads nothing from, saying what it holds."""
    if not objects:
        return f"{name}: no Kubernetes objects"
    if any(read_kind(obj) for obj in objects):
        return None
    kinds = sorted({_kind_and_group(obj) for obj in objects})
    count = len(objects)
    return (f"{name}: ignored {count} object{'s' if count > 1 else ''} of "
            f"kind{'s' if len(kinds) > 1 else ''} {', '.join(kinds)} "
            f"(simulate reads {', '.join(READ_GROUPS)})")


def _kind_and_group(obj: dict) -> str:
    """`Kind`, or `Kind (apiVersion)` for a kind read only from other groups."""
    kind = obj.get("kind")
    kind = kind if isinstance(kind, str) and kind else "(no kind)"
    if kind in READ_GROUPS:
        return f"{kind} ({brief(obj.get('apiVersion'))})"
    return kind


def _job_reasons(pods: list[str], pending: dict[str, list[str]]) -> list[str]:
    """A job's reasons: those all its pending pods share, then each pod's own, named."""
    shared = [r for r in pending[pods[0]] if all(r in pending[p] for p in pods[1:])]
    own = [f"{p.split('/', 1)[1]}: {r}" for p in pods for r in pending[p] if r not in shared]
    return shared + own if len(pods) > 1 else shared


def _queue_status(allocated: Resource, cards: dict[str, float] | None,
                  annotations: dict[str, str] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"allocated": allocated.to_k8s()}
    if cards is not None:
        status["cards"] = {name: int(count) if float(count).is_integer() else count
                           for name, count in sorted(cards.items())}
    if annotations:  # (what the run wrote on the Queue: fairshare's usage history)
        status["annotations"] = dict(sorted(annotations.items()))
    return status


def _eviction_entry(eviction: Eviction) -> dict[str, Any]:
    """One eviction in the report: the contract's keys, then the victim's queue, whether
    it was an elastic replica, the strategy and any grace period the action set."""
    entry: dict[str, Any] = {"pod": eviction.task, "node": eviction.node,
                             "action": eviction.action, "for": eviction.preemptor,
                             "queue": eviction.queue, "elastic": eviction.elastic}
    if eviction.strategy:
        entry["strategy"] = eviction.strategy
    if eviction.grace_seconds is not None:
        entry["gracePeriodSeconds"] = eviction.grace_seconds
    return entry


class Report:
    """Everything the run decided, in the JSON shape ARCHITECTURE.md fixes."""

    def __init__(self) -> None:
        self.sessions = 0
        self.binds: dict[str, str] = {}
        self.evictions: list[Eviction] = []
        self.last: SessionResult | None = None
        self.events: dict[tuple[str, str, str, str], int] = {}
        # the annotations sessions wrote on queues, the last value of each
        self.queue_annotations: dict[str, dict[str, str]] = {}

    def add_event(self, event: Event) -> None:
        key = event.key()
        self.events[key] = self.events.get(key, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        last = self.last or SessionResult()
        return {
            "sessions": self.sessions,
            "binds": dict(self.binds),
            "evictions": [_eviction_entry(e) for e in self.evictions],
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
            "queues": {name: _queue_status(allocated, last.queue_cards.get(name),
                                           self.queue_annotations.get(name))
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
        self.nominated: list[tuple[str, str]] = []  # (pod key, node; "" for none)

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

    def queue_annotations(self, name: str, annotations: dict[str, str]) -> None:
        self.report.queue_annotations.setdefault(name, {}).update(annotations)

    def pending(self, task: Task, reasons: list[str]) -> None:
        pass

    def nominate(self, task: Task, node: str) -> None:
        self.nominated.append((task.key, node))

    def emit(self, event: Event) -> None:
        self.report.add_event(event)


class Simulation:
    """A cluster in memory, fed from manifests, scheduled by real sessions."""

    # Load order, so that what an object refers to is there before it.
    _ORDER: ClassVar[dict[str, int]] = {
        "PriorityClass": 0, "Queue": 1, "Node": 2, "PodGroup": 3, "Pod": 4}

    def __init__(self, conf: SchedulerConf, scheduler_names: tuple[str, ...] = ("vscheduler",),
                 default_queue: str = "default",
                 node_sampling: NodeSampling | None = None, now: float | None = None, *,
                 session_seconds: float = 1.0) -> None:
        self.conf = conf
        # how far the clock moves from one session to the next
        self.session_seconds = session_seconds
        # seconds since the epoch; None until set by `now` or the files' timestamps
        self.now = now
        self._fixed_start = now is not None
        self.cache = Cache(scheduler_names, default_queue)
        self.report = Report()
        self._world = _InMemory(self.report)
        self._given: dict[tuple[str, str, str], str] = {}  # object -> where last given
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
                kind = self._add(obj, float(index))
            except BadObject as err:
                self.report.add_event(refused(self.cache, obj, err, where=where))
                continue
            if kind:
                self._see_time(obj, float(index))
                self._note_repeat(kind, obj, where)
                continue
            mistake = not_read(obj)
            if mistake is not None:
                self.report.add_event(skipped_event(obj, BadObject(mistake), where=where))

    def _note_repeat(self, kind: str, obj: dict, where: str) -> None:
        """A Warning for an object given twice (as `kubectl apply` of the files would,
        the later one is what is read): a silent replacement hid the first one's pods."""
        key = (kind, *metadata(obj)[:2])
        first = self._given.setdefault(key, where)
        if first != where:
            self.report.add_event(Event(
                describe(obj, kind), "Warning", "DuplicateObject",
                f"{where}: given again (first at {first}); the later one is read"))
            self._given[key] = where

    def _see_time(self, obj: dict, order: float) -> None:
        """The clock starts at the newest creation time read: an object's
        creationTimestamp, else its place in the files, which stands for it."""
        if self._fixed_start or self.report.sessions:
            return
        stamp = timestamp_of(obj)
        stamp = order if stamp is None else stamp
        if self.now is None or stamp > self.now:
            self.now = stamp

    def _add(self, obj: dict, order: float) -> str | None:
        """Read one object into the cache as the daemon reads it from a watch; the kind it
        was read as, None for one the scheduler does not read (a Deployment, ...)."""
        return add_object(self.cache, obj, order=order)

    def step(self) -> SessionResult:
        """Let time pass, then run one session and apply its decisions."""
        self._advance()
        if self.report.sessions:
            self.now = (self.now or 0.0) + self.session_seconds
        self.report.sessions += 1
        result = self.scheduler.run_once()
        if result is not None:
            self._annotate_queues(result.queue_annotations)
        if result is None:
            # Nothing to do: the state is the last session's, with nothing decided.
            result = SessionResult()
            if self.report.last is not None:
                result.podgroups = self.report.last.podgroups
                result.queues = self.report.last.queues
                result.queue_cards = self.report.last.queue_cards
        self.report.last = result
        return result

    def _annotate_queues(self, written: dict[str, dict[str, str]]) -> None:
        """Annotations sessions wrote on Queues reach the cache as the watch would bring
        them back to the daemon (a new Queue object)."""
        for name, added in written.items():
            queue = self.cache.queues.get(name)
            if queue is not None:
                updated = copy.copy(queue)
                updated.annotations = {**(queue.annotations or {}), **added}
                self.cache.add_queue(updated)

    def _advance(self) -> None:
        """Bound pods start running; evicted pods terminate and are gone; nominations
        written are read back."""
        world = self._world
        for key in world.bound:
            self.cache.set_running(key)
        for key in world.evicted:
            self.cache.delete_pod(key)
        for key, node in world.nominated:
            self.cache.set_nominated(key, node)
        world.bound.clear()
        world.evicted.clear()
        world.nominated.clear()

    def run(self, sessions: int = 1) -> Report:
        for _ in range(sessions):
            self.step()
        return self.report
