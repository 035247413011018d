"""The scheduler's own objects: tasks, jobs, nodes, queues, priority classes.

They are small `__slots__` classes built once from Kubernetes objects (see `objects.py`)
and cloned cheaply per session: what never changes in a session (a pod's spec) is shared
between clones, only the state a session mutates is copied.

Words as Volcano uses them: a *task* is a pod, a *job* is a PodGroup (or a pod without
a group, scheduled as a job of one), a *queue* is a Volcano Queue.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from vscheduler.fit import NodeFitErrors
from vscheduler.resources import CPU, MEMORY, MIN_RESOURCE, PODS, Resource

__all__ = [
    "ALLOCATED_STATUSES",
    "Condition",
    "Job",
    "Node",
    "Pod",
    "PriorityClass",
    "Queue",
    "Status",
    "Task",
    "TaskStatus",
    "status_label",
]


# A pod of ours without a PodGroup is a job of one named after the pod; '#' never occurs
# in Kubernetes names, so such a job cannot collide with a PodGroup.
BARE_JOB_SUFFIX = "#pod"


def is_bare_job(uid: str) -> bool:
    return uid.endswith(BARE_JOB_SUFFIX)


# A task status is one bit, a set of statuses their union (`status & ALLOCATED_STATUSES`).
# Plain ints, not enum.IntFlag: statuses are tested on every hot path, and IntFlag's
# operators are Python calls.
Status = int


class TaskStatus:
    PENDING = 1
    ALLOCATED = 2
    PIPELINED = 4
    BINDING = 8
    BOUND = 16
    RUNNING = 32
    RELEASING = 64
    SUCCEEDED = 128
    FAILED = 256
    UNKNOWN = 512


_LABELS = {value: name.capitalize() for name, value in vars(TaskStatus).items()
           if name.isupper()}


def status_label(status: Status) -> str:
    """A status as Kubernetes users read it: `Pending`, `Running`, ..."""
    return _LABELS.get(status, "Unknown")


S = TaskStatus
# Counted in a job's and a queue's allocation (Releasing and Pipelined are not).
ALLOCATED_STATUSES = S.BOUND | S.BINDING | S.RUNNING | S.ALLOCATED
PREEMPTABLE_STATUSES = S.BOUND | S.RUNNING
COMPLETED_STATUSES = S.SUCCEEDED | S.FAILED
SCHEDULED_STATUSES = S.RUNNING | S.BOUND | S.SUCCEEDED | S.FAILED


_EMPTY: dict[str, str] = {}  # shared, never mutated


_TRAILING_INDEX = re.compile(r"^[^-]+(?:-[^-]*)+-([0-9]+)$")


def pod_index(name: str) -> int | None:
    """The integer after a pod name's last '-', if the name has three parts or more
    (`job-worker-3`): tasks of a job are placed in the order of their indexes."""
    if name.count("-") < 2:
        return None
    match = _TRAILING_INDEX.match(name)
    return int(match.group(1)) if match else None


class PriorityClass:
    __slots__ = ("global_default", "name", "value")

    def __init__(self, name: str, value: int, global_default: bool = False) -> None:
        self.name = name
        self.value = value
        self.global_default = global_default


class Pod:
    """What the scheduler reads of a pod. Shared, never mutated, between task clones."""

    __slots__ = (
        "annotations",
        "creation",
        "host_ports",
        "index",
        "key",
        "labels",
        "name",
        "namespace",
        "node_selector",
        "nominated_node",
        "owner_kind",
        "phase",
        "preemption_policy",
        "preferred_affinity",
        "priority",
        "priority_class_name",
        "required_affinity",
        "resource_version",
        "scheduler_name",
        "scheduling_gates",
        "tolerations",
        "uid",
    )

    def __init__(self, **fields: Any) -> None:
        self.uid: str = fields["uid"]
        # metadata.resourceVersion: an Event's involvedObject names the version it saw
        self.resource_version: str = fields.get("resource_version", "")
        self.namespace: str = fields["namespace"]
        self.name: str = fields["name"]
        self.key: str = fields.get("key") or f"{self.namespace}/{self.name}"
        self.index = pod_index(self.name)
        self.scheduler_name: str = fields.get("scheduler_name", "")
        self.annotations: dict[str, str] = fields.get("annotations") or _EMPTY
        self.labels: dict[str, str] = fields.get("labels") or _EMPTY
        self.creation: float = fields.get("creation", 0.0)
        self.phase: str = fields.get("phase", "Pending")
        self.priority: int | None = fields.get("priority")
        self.priority_class_name: str = fields.get("priority_class_name", "")
        self.preemption_policy: str = fields.get("preemption_policy", "")
        self.owner_kind: str = fields.get("owner_kind", "")
        self.node_selector: dict[str, str] = fields.get("node_selector") or _EMPTY
        # Required node affinity: a list of terms (ORed), each a list of
        # (key, operator, values) expressions (ANDed); None = no requirement.
        self.required_affinity: list[list[tuple[str, str, tuple[str, ...]]]] | None = (
            fields.get("required_affinity")
        )
        # Preferred node affinity: (weight, expressions) pairs.
        self.preferred_affinity: Sequence[tuple[int, list[tuple[str, str, tuple[str, ...]]]]] = (
            fields.get("preferred_affinity") or ()
        )
        # Tolerations: (key, operator, value, effect) tuples.
        self.tolerations: Sequence[tuple[str, str, str, str]] = fields.get("tolerations") or ()
        # Host ports: (protocol, host IP, port) tuples.
        self.host_ports: Sequence[tuple[str, str, int]] = fields.get("host_ports") or ()
        self.scheduling_gates: tuple[str, ...] = fields.get("scheduling_gates", ())
        self.nominated_node: str = fields.get("nominated_node", "")


class Task:
    """One pod as the scheduler tracks it through a session."""

    __slots__ = (
        "best_effort",
        "eviction_occurred",
        "job_id",
        "key",
        "last_transaction",
        "node_name",
        "pod",
        "preemptable",
        "priority",
        "resreq",
        "role",
        "status",
        "uid",
    )

    def __init__(
        self,
        pod: Pod,
        resreq: Resource,
        job_id: str,
        status: Status,
        node_name: str = "",
        priority: int = 1,
        preemptable: bool = True,
        role: str = "",
    ) -> None:
        self.pod = pod
        self.uid = pod.uid
        self.key = pod.key
        self.job_id = job_id
        self.resreq = resreq
        self.best_effort = resreq.is_empty()
        self.status = status
        self.node_name = node_name
        self.priority = priority
        self.preemptable = preemptable
        self.role = role
        # Pipelined onto resources its own evictions free: the daemon nominates the node
        # for the pod (status.nominatedNodeName), as Volcano does.
        self.eviction_occurred = False
        # (status, node) when a statement holding this task was discarded: what the
        # session had tried for it, used to explain why it is still pending.
        self.last_transaction: tuple[Status, str] | None = None

    @property
    def name(self) -> str:
        return self.pod.name

    @property
    def namespace(self) -> str:
        return self.pod.namespace

    @property
    def scheduling_gated(self) -> bool:
        return bool(self.pod.scheduling_gates)

    def clone(self) -> Task:
        task = Task.__new__(Task)
        task.pod = self.pod
        task.uid = self.uid
        task.key = self.key
        task.job_id = self.job_id
        task.resreq = self.resreq
        task.best_effort = self.best_effort
        task.status = self.status
        task.node_name = self.node_name
        task.priority = self.priority
        task.preemptable = self.preemptable
        task.role = self.role
        task.eviction_occurred = self.eviction_occurred
        task.last_transaction = self.last_transaction
        return task

    def __repr__(self) -> str:
        return f"Task({self.key}, {status_label(self.status)}, node={self.node_name or '-'})"


class Condition:
    __slots__ = ("message", "reason", "status", "transition_id", "type")

    def __init__(
        self, type: str, status: str, reason: str, message: str, transition_id: str = ""
    ) -> None:
        self.type = type
        self.status = status
        self.reason = reason
        self.message = message
        self.transition_id = transition_id

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason,
                "message": self.message}

    def same_as(self, other: Condition) -> bool:
        return (self.type, self.status, self.reason, self.message) == (
            other.type, other.status, other.reason, other.message)


class Job:
    """A PodGroup and its tasks, with the counters Volcano's gang rules read."""

    __slots__ = (
        "_by_status",
        "allocated",
        "annotations",
        "bare",
        "conditions",
        "creation",
        "dirty",
        "fit_errors",
        "held_only",
        "memo",
        "min_available",
        "min_resources",
        "min_task_member",
        "name",
        "namespace",
        "phase",
        "preemptable",
        "priority",
        "priority_class_name",
        "queue",
        "schedule_timeout",
        "tasks",
        "uid",
    )

    def __init__(
        self,
        namespace: str,
        name: str,
        queue: str,
        min_available: int = 1,
        *,
        min_task_member: dict[str, int] | None = None,
        min_resources: Resource | None = None,
        priority_class_name: str = "",
        phase: str = "Pending",
        creation: float = 0.0,
        preemptable: bool = False,
        annotations: dict[str, str] | None = None,
        bare: bool = False,
    ) -> None:
        self.uid = f"{namespace}/{name}"
        self.namespace = namespace
        self.name = name
        self.queue = queue
        self.min_available = min_available
        self.min_task_member = min_task_member or {}
        self.min_resources = min_resources
        self.priority_class_name = priority_class_name
        self.priority = 0
        self.phase = phase
        self.conditions: list[Condition] = []
        self.creation = creation
        self.preemptable = preemptable
        self.annotations = annotations or {}
        self.bare = bare
        # Its PodGroup is gone: only its placed pods are in the session, so that what they
        # hold still counts against their queue; nothing of it is scheduled or written.
        self.held_only = False
        # seconds from creation to give up scheduling it (scheduleTimeoutSeconds)
        self.schedule_timeout: int | None = None
        self.tasks: dict[str, Task] = {}
        self._by_status: dict[Status, dict[str, Task]] = {}
        self.allocated = Resource()
        self.fit_errors: dict[str, NodeFitErrors] = {}
        # Changed since it was copied (or, in the cache, since the last snapshot): a
        # snapshot copies it anew instead of handing on the last session's copy.
        self.dirty = True
        # What plugins derived from this copy at session open, by plugin. A snapshot
        # hands a copy on only if nothing changed it, so the next session's plugins may
        # reuse these instead of recounting every pod (see hookspecs, on_session_open).
        self.memo: dict[str, Any] = {}

    # ---------------------------------------------------------------- tasks

    def add_task(self, task: Task) -> None:
        self.dirty = True
        self.tasks[task.uid] = task
        self._by_status.setdefault(task.status, {})[task.uid] = task
        if task.status & ALLOCATED_STATUSES:
            self.allocated.add(task.resreq)

    def remove_task(self, task: Task) -> None:
        stored = self.tasks.pop(task.uid, None)
        if stored is None:
            return
        self.dirty = True
        self._by_status.get(stored.status, {}).pop(stored.uid, None)
        if stored.status & ALLOCATED_STATUSES:
            self.allocated.sub(stored.resreq)

    def update_task_status(self, task: Task, status: Status) -> None:
        """Move a task to another status, keeping the indexes and sums right."""
        old = task.status
        if old == status:
            return
        self.dirty = True
        bucket = self._by_status.get(old)
        if bucket is not None:
            bucket.pop(task.uid, None)
        was, now = bool(old & ALLOCATED_STATUSES), bool(status & ALLOCATED_STATUSES)
        if was and not now:
            self.allocated.sub(task.resreq)
        elif now and not was:
            self.allocated.add(task.resreq)
        task.status = status
        self._by_status.setdefault(status, {})[task.uid] = task

    def tasks_in(self, statuses: Status) -> Iterator[Task]:
        for status, bucket in self._by_status.items():
            if status & statuses:
                yield from bucket.values()

    def count(self, statuses: Status) -> int:
        n = 0  # (a plain loop: called for every job several times a session)
        for status, bucket in self._by_status.items():
            if status & statuses:
                n += len(bucket)
        return n

    # ---------------------------------------------------------------- gang counters

    def ready_task_num(self) -> int:
        return self.count(ALLOCATED_STATUSES | S.SUCCEEDED)

    def waiting_task_num(self) -> int:
        return self.count(S.PIPELINED)

    def valid_task_num(self) -> int:
        return self.count(ALLOCATED_STATUSES | S.SUCCEEDED | S.PIPELINED | S.PENDING)

    def is_ready(self) -> bool:
        """Enough tasks placed to commit them. Volcano also counts pending best-effort
        tasks as ready, trusting backfill to place them later; when it cannot, the gang
        is left partly bound. Here a task counts once it has a node."""
        return self.ready_task_num() >= self.min_available

    def is_pipelined(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() >= self.min_available

    def is_starving(self) -> bool:
        return self.waiting_task_num() + self.ready_task_num() < self.min_available

    def is_pending(self) -> bool:
        return self.phase in ("Pending", "")

    def _min_task_total(self) -> int:
        return sum(self.min_task_member.values())

    def _role_counts(self, statuses: Status) -> dict:
        counts: dict[str, int] = {}
        for task in self.tasks.values():
            if task.status & statuses:
                counts[task.role] = counts.get(task.role, 0) + 1
        return counts

    def _roles_meet(self, counts: dict[str, int]) -> bool:
        if self.min_available < self._min_task_total():
            return True
        return all(counts.get(role, 0) >= need for role, need in self.min_task_member.items()
                   if need > 0)

    def check_task_valid(self) -> bool:
        if not self.min_task_member:
            return True
        return self._roles_meet(
            self._role_counts(ALLOCATED_STATUSES | S.SUCCEEDED | S.PIPELINED | S.PENDING))

    def check_task_ready(self) -> bool:
        if not self.min_task_member:
            return True
        return self._roles_meet(self._role_counts(ALLOCATED_STATUSES | S.SUCCEEDED))

    def check_task_pipelined(self) -> bool:
        if not self.min_task_member:
            return True
        return self._roles_meet(
            self._role_counts(ALLOCATED_STATUSES | S.SUCCEEDED | S.PIPELINED))

    def task_has_fit_errors(self, task: Task) -> bool:
        """Another task of the same (non-empty) role already failed predicates."""
        if not task.role:
            return False
        return any(
            t.role == task.role and t.uid in self.fit_errors for t in self.tasks.values()
            if t.uid != task.uid
        )

    def need_continue_allocating(self) -> bool:
        """After a task failed, is it worth trying the job's other tasks?"""
        if self.min_available == len(self.tasks):
            return False
        failed_roles = {self.tasks[uid].role for uid in self.fit_errors if uid in self.tasks}
        if self.min_available < self._min_task_total():
            pending_ok = sum(
                1 for t in self._by_status.get(S.PENDING, {}).values()
                if t.role not in failed_roles)
            return self.ready_task_num() + pending_ok >= self.min_available
        ready = self._role_counts(ALLOCATED_STATUSES | S.SUCCEEDED)
        for role in failed_roles:
            need = self.min_task_member.get(role, 0)
            if need > 0 and ready.get(role, 0) < need:
                return False
        return True

    # ---------------------------------------------------------------- reasons

    def fit_error(self) -> str:
        """Why the job is not (fully) placed, as Volcano words it."""
        counts = {status_label(s): len(b) for s, b in self._by_status.items() if b}
        counts["minAvailable"] = self.min_available
        histogram = ", ".join(sorted(f"{n} {label}" for label, n in counts.items()))
        head = "pod group is ready" if self.is_ready() else "pod group is not ready"
        message = f"{head}, {histogram}"
        pending = {}
        for task in self.tasks_in(S.PENDING):
            reason = "Schedulable" if task.last_transaction and task.last_transaction[
                0] == S.ALLOCATED else "Unschedulable"
            pending[reason] = pending.get(reason, 0) + 1
        if pending:
            message += "; Pending: " + ", ".join(
                sorted(f"{n} {reason}" for reason, n in pending.items()))
        for uid in sorted(self.fit_errors, key=lambda u: self.tasks[u].key if u in self.tasks
                          else u):
            task = self.tasks.get(uid)
            if task is not None:
                return f"{message}. Origin reason is {task.name}: {self.fit_errors[uid].message()}"
        return message

    def set_condition(self, condition: Condition) -> None:
        self.dirty = True
        for i, existing in enumerate(self.conditions):
            if existing.type == condition.type:
                self.conditions[i] = condition
                return
        self.conditions.append(condition)

    # ---------------------------------------------------------------- copies

    def clone(self) -> Job:
        job = Job.__new__(Job)
        for slot in ("uid", "namespace", "name", "queue", "min_available",
                     "min_task_member", "min_resources", "priority_class_name", "priority",
                     "phase", "creation", "preemptable", "annotations", "bare",
                     "held_only", "schedule_timeout"):
            setattr(job, slot, getattr(self, slot))
        job.conditions = [
            Condition(c.type, c.status, c.reason, c.message, c.transition_id)
            for c in self.conditions
        ]
        job.tasks = {}
        job._by_status = {}
        job.allocated = Resource()
        job.fit_errors = {}
        job.memo = {}
        for task in self.tasks.values():
            job.add_task(task.clone())
        job.dirty = False
        return job

    def __repr__(self) -> str:
        return f"Job({self.uid}, queue={self.queue}, min={self.min_available}, {self.phase})"


def _charged_alike(old: Status, new: Status) -> bool:
    """Whether a node accounts tasks of these two statuses the same way (idle and used;
    releasing and pipelined have their own sums)."""
    special = S.RELEASING | S.PIPELINED
    return old == new or not (old & special or new & special)


class Node:
    """A node's capacity and what its tasks use, kept per status as Volcano does:
    `idle` is what is free now, `releasing` what terminating pods will free, `pipelined`
    what tasks waiting for those releases have claimed."""

    __slots__ = (
        "allocatable",
        "changes",
        "dirty",
        "idle",
        "labels",
        "max_pods",
        "memo",
        "name",
        "pipelined",
        "releasing",
        "taints",
        "tasks",
        "unschedulable",
        "used",
    )

    def __init__(
        self,
        name: str,
        allocatable: Resource,
        labels: dict[str, str] | None = None,
        taints: list[tuple[str, str, str]] | None = None,
        unschedulable: bool = False,
    ) -> None:
        self.name = name
        self.allocatable = allocatable
        self.labels = labels or {}
        # Taints: (key, value, effect) tuples.
        self.taints = taints or []
        self.unschedulable = unschedulable
        self.max_pods = int(allocatable.scalars.get(PODS, 110))
        self.idle = allocatable.clone()
        self.used = Resource()
        self.releasing = Resource()
        self.pipelined = Resource()
        # key -> (task, the status it was charged under)
        self.tasks: dict[str, tuple[Task, Status]] = {}
        # A session's log of changed nodes (names), so node searches can revisit only
        # the nodes that changed; None outside a session.
        self.changes: list[str] | None = None
        # Changed since it was copied (or, in the cache, since the last snapshot).
        self.dirty = True
        # What plugins derived from the node's labels and allocatable, which never
        # change for a Node object (the cache makes a new one): shared by its copies.
        self.memo: dict[str, Any] = {}

    def future_idle(self) -> Resource:
        """What will be free once releasing pods are gone and pipelined ones placed."""
        return self.idle.clone().add(self.releasing).sub(self.pipelined)

    def insufficient_now(self, req: Resource) -> str | None:
        """The first resource `req` lacks in what is idle now, or None if it fits."""
        return req.first_insufficient(self.idle)

    def insufficient_future(self, req: Resource) -> str | None:
        """The first resource `req` lacks in `future_idle()`, or None if it fits; the
        per-task-per-node check, so it builds no intermediate resource."""
        idle, releasing, pipelined = self.idle, self.releasing, self.pipelined
        if req.cpu - (idle.cpu + releasing.cpu - pipelined.cpu) >= MIN_RESOURCE:
            return CPU
        if req.memory - (idle.memory + releasing.memory - pipelined.memory) >= MIN_RESOURCE:
            return MEMORY
        free, coming, claimed = idle.scalars, releasing.scalars, pipelined.scalars
        for name, amount in req.scalars.items():
            if amount >= MIN_RESOURCE and amount - (
                free.get(name, 0) + coming.get(name, 0) - claimed.get(name, 0)
            ) >= MIN_RESOURCE:
                return name
        return None

    def add_task(self, task: Task) -> None:
        """Charge a task to this node; a task already here is an error (double booking)."""
        if task.key in self.tasks:
            raise ValueError(f"task {task.key} is already on node {self.name}")
        status = task.status
        req = task.resreq
        if status == S.RELEASING:
            self.idle.sub(req)
            self.releasing.add(req)
            self.used.add(req)
        elif status == S.PIPELINED:
            self.pipelined.add(req)
        else:
            self.idle.sub(req)
            self.used.add(req)
        self.tasks[task.key] = (task, status)
        self.dirty = True
        if self.changes is not None:
            self.changes.append(self.name)

    def remove_task(self, task: Task) -> None:
        entry = self.tasks.pop(task.key, None)
        if entry is None:
            return
        stored, status = entry
        req = stored.resreq
        if status == S.RELEASING:
            self.idle.add(req)
            self.releasing.sub(req)
            self.used.sub(req)
        elif status == S.PIPELINED:
            self.pipelined.sub(req)
        else:
            self.idle.add(req)
            self.used.sub(req)
        self.dirty = True
        if self.changes is not None:
            self.changes.append(self.name)

    def update_task(self, task: Task) -> None:
        """Charge a task again after its status changed. A change between statuses
        charged alike (Allocated to Binding, say) only records the new status: what
        the node holds is the same."""
        entry = self.tasks.get(task.key)
        if entry is not None and _charged_alike(entry[1], task.status):
            self.tasks[task.key] = (task, task.status)
            self.dirty = True
            return
        self.remove_task(task)
        self.add_task(task)

    def pod_count(self) -> int:
        return len(self.tasks)

    def clone(self) -> Node:
        node = Node.__new__(Node)
        node.name = self.name
        node.allocatable = self.allocatable
        node.labels = self.labels
        node.taints = self.taints
        node.unschedulable = self.unschedulable
        node.max_pods = self.max_pods
        node.idle = self.idle.clone()
        node.used = self.used.clone()
        node.releasing = self.releasing.clone()
        node.pipelined = self.pipelined.clone()
        node.tasks = dict(self.tasks)
        node.changes = None
        node.dirty = False
        node.memo = self.memo
        return node

    def __repr__(self) -> str:
        return f"Node({self.name}, idle={self.idle})"


class Queue:
    """A Volcano Queue. Read-only in a session: plugins keep their own accounting."""

    __slots__ = (
        "annotations",
        "capability",
        "creation",
        "deserved",
        "guarantee",
        "meta_uid",
        "name",
        "parent",
        "priority",
        "reclaimable",
        "state",
        "status_allocated",
        "weight",
    )

    def __init__(
        self,
        name: str,
        weight: int = 1,
        *,
        capability: Resource | None = None,
        deserved: Resource | None = None,
        guarantee: Resource | None = None,
        reclaimable: bool = True,
        priority: int = 0,
        state: str = "Open",
        parent: str = "",
        annotations: dict[str, str] | None = None,
        creation: float = 0.0,
        status_allocated: dict[str, str] | None = None,
        meta_uid: str = "",
    ) -> None:
        self.name = name
        # metadata.uid of the object (`uid` is the name, the key jobs use): Events name it
        self.meta_uid = meta_uid
        self.weight = weight
        self.capability = capability
        self.deserved = deserved
        self.guarantee = guarantee
        self.reclaimable = reclaimable
        self.priority = priority
        self.state = state
        self.parent = parent
        self.annotations = annotations or {}
        self.creation = creation
        self.status_allocated = status_allocated or {}

    @property
    def uid(self) -> str:
        return self.name

    def is_open(self) -> bool:
        """Open, or without a state at all (no queue controller runs beside us)."""
        return self.state in ("Open", "")

    def closed_reason(self) -> str | None:
        """Why the queue takes nothing new (no admission, no placement), or None while it
        is open: the one wording of that rule, for every action and plugin that checks it."""
        if self.is_open():
            return None
        return f"queue {self.name} is {self.state}: it takes nothing new"

    def __repr__(self) -> str:
        return f"Queue({self.name}, weight={self.weight}, {self.state or 'Open'})"
