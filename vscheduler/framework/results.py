"""What a session hands on: the decisions and the reasons, as plain values.

The binder, evictor, status writer and event sink (in memory for `simulate`, the
Kubernetes API for the daemon) read only these. One exception: every PodGroup's status
(`SessionResult.podgroups`) is read from the session's job copies when first asked, so
it must be read before the next session starts (the next snapshot hands those copies
on, to be changed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from vscheduler.model import Condition, Job
from vscheduler.resources import Resource

__all__ = ["Event", "Eviction", "EvictionTerms", "SessionResult"]


class Event:
    """A Kubernetes Event to write: `object` is `Kind/namespace/name` (or `Kind/name`)."""

    __slots__ = ("message", "object", "reason", "type")

    def __init__(self, object: str, type: str, reason: str, message: str) -> None:
        self.object = object
        self.type = type
        self.reason = reason
        self.message = message

    def key(self) -> tuple[str, str, str, str]:
        return (self.object, self.type, self.reason, self.message)

    def __repr__(self) -> str:
        return f"Event({self.object} {self.type} {self.reason}: {self.message})"


class EvictionTerms(NamedTuple):
    """How a victim goes, beyond who evicts it: the `strategy` that chose it, whether it
    is an `elastic` replica (above its job's minMember), and the `grace_seconds` to
    delete it with (None: the pod's own)."""

    strategy: str = ""
    elastic: bool = False
    grace_seconds: int | None = None


class Eviction:
    """A committed eviction: pod `task` of `queue` leaves `node`, by `action`, for
    `preemptor`. `strategy` chose it (empty when no strategy did); `elastic`: it was a
    replica above its job's minMember, so the job runs on; `grace_seconds`: the grace
    period to delete it with (None: the pod's own)."""

    __slots__ = ("action", "elastic", "grace_seconds", "node", "preemptor", "queue",
                 "strategy", "task")

    def __init__(self, task: str, node: str, action: str, preemptor: str, *,
                 queue: str = "", strategy: str = "", elastic: bool = False,
                 grace_seconds: int | None = None) -> None:
        self.task = task
        self.node = node
        self.action = action
        self.preemptor = preemptor
        self.queue = queue
        self.strategy = strategy
        self.elastic = elastic
        self.grace_seconds = grace_seconds


class SessionResult:
    """What a session decided, for the binder, evictor and status writer."""

    __slots__ = ("_podgroups", "binds", "events", "evictions", "pending",
                 "pending_jobs", "pipelined", "podgroup_jobs", "queue_annotations",
                 "queue_cards", "queues", "timeouts", "visited_jobs")

    def __init__(self) -> None:
        self.binds: dict[str, str] = {}
        self.evictions: list[Eviction] = []
        # pods waiting on their node's releasing resources (their victims', say): the
        # node is nominated for them (status.nominatedNodeName) and their condition
        # says where they wait (`close.pipelined_reason`)
        self.pipelined: dict[str, str] = {}
        self.pending: dict[str, list[str]] = {}
        # job (PodGroup uid, or the pod's key for a pod without one) -> (queue, pod keys)
        self.pending_jobs: dict[str, tuple[str, list[str]]] = {}
        # The session's jobs after its close, whose PodGroups' statuses `podgroups` reads
        # when first asked (a daemon never asks: it writes the changed ones only).
        self.podgroup_jobs: Mapping[str, Job] = {}
        self._podgroups: dict[str, tuple[str, list[Condition]]] | None = None
        self.queues: dict[str, Resource] = {}
        # queue -> card name -> cards allocated (whole units), from a card-aware plugin
        self.queue_cards: dict[str, dict[str, float]] = {}
        # Annotations to write on Queues (what a plugin keeps across restarts there:
        # fairshare's usage history), by queue name; written as the session's decisions.
        self.queue_annotations: dict[str, dict[str, str]] = {}
        self.events: list[Event] = []
        # PodGroups that passed their scheduleTimeoutSeconds in this session
        self.timeouts: list[str] = []
        # the jobs the close visited, whose status may have changed (the others close as
        # they did in the last session: see framework.close)
        self.visited_jobs: list[str] = []

    @property
    def podgroups(self) -> dict[str, tuple[str, list[Condition]]]:
        """PodGroup uid -> (phase, conditions), for every PodGroup in the session, in its
        order. Read it before the next session starts: that one may change the jobs."""
        if self._podgroups is None:
            self._podgroups = {uid: (job.phase, list(job.conditions))
                               for uid, job in self.podgroup_jobs.items()
                               if not (job.bare or job.held_only)}
        return self._podgroups

    @podgroups.setter
    def podgroups(self, value: dict[str, tuple[str, list[Condition]]]) -> None:
        self._podgroups = value
