"""The scheduler's own objects: tasks, jobs, nodes, queues, priority classes.

They are small `__slots__` classes built once from Kubernetes objects (see `objects.py`)
and cloned cheaply per session: what never changes in a session (a pod's spec) is shared
between clones, only the state a session mutates is copied.

Words as Volcano uses them: a *task* is a pod, a *job* is a PodGroup (or a pod without
a group, scheduled as a job of one), a *queue* is a Volcano Queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from vscheduler.fit import NodeFitErrors
from vscheduler.resources import CPU, MEMORY, MIN_RESOURCE, PODS, Resource
from vscheduler.specs import Pod, PodGroupSpec, SubGroupPolicy
from vscheduler.sub_groups import GroupKey, SubGroup, group_tasks, short_policy

__all__ = [
    "ALLOCATED_STATUSES",
    "PIPELINED_STATUSES",
    "READY_STATUSES",
    "VALID_STATUSES",
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
# in Kubernetes names (and a group name with one is refused where it is read), so such a
# job cannot collide with a PodGroup.
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
# Placed for good: what a queue's reported and written figures count. A task still
# ALLOCATED at close was never committed (its gang only got pipelined): it is pending.
PLACED_FOR_GOOD = ALLOCATED_STATUSES & ~S.ALLOCATED
# What the gang counters count: a task is ready (placed, or done), pipelined (ready or
# waiting on releasing resources), valid (pipelined or still to place)
READY_STATUSES = ALLOCATED_STATUSES | S.SUCCEEDED
PIPELINED_STATUSES = READY_STATUSES | S.PIPELINED
VALID_STATUSES = PIPELINED_STATUSES | S.PENDING
PREEMPTABLE_STATUSES = S.BOUND | S.RUNNING
COMPLETED_STATUSES = S.SUCCEEDED | S.FAILED
SCHEDULED_STATUSES = S.RUNNING | S.BOUND | S.SUCCEEDED | S.FAILED


# ----------------------------------------------------------------------- snapshot copies
#
# A snapshot copies tasks, jobs and nodes (`clone`), and a session changes the copies
# only. Each of these classes says once, beside its slots, how a copy gets each slot:
#   SHARED  handed to the copy as is (immutable, or never changed in place);
#   COPIED  slot -> the function that copies it (a container a session changes);
#   REBUILT set by `clone` itself after the rest (indexes made anew, flags reset).
# tests/test_cache.py checks that every slot is in exactly one of the three.


_Copy = Callable[[Any], Any]


def _copier(cls: type) -> _Copy:
    """A function copying a `cls` as its SHARED and COPIED say. Generated once as plain
    assignments, so a copy costs what a hand-written one does: snapshots copy every task
    of every job that changed."""
    env: dict[str, Any] = {"cls": cls}
    lines = ["def copy(self):", "    new = cls.__new__(cls)"]
    lines += [f"    new.{slot} = self.{slot}" for slot in cls.SHARED]
    for slot, copy in cls.COPIED.items():
        env[f"copy_{slot}"] = copy
        lines.append(f"    new.{slot} = copy_{slot}(self.{slot})")
    lines.append("    return new")
    exec("\n".join(lines), env)  # (source built from the class's own slot names)
    return env["copy"]


class PriorityClass:
    __slots__ = ("global_default", "name", "value")

    def __init__(self, name: str, value: int, global_default: bool = False) -> None:
        self.name = name
        self.value = value
        self.global_default = global_default


class Task:
    """One pod as the scheduler tracks it through a session."""

    __slots__ = (
        "best_effort",
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
    # What a session changes of a task is plain values: a copy shares every slot.
    SHARED: ClassVar[tuple[str, ...]] = __slots__
    COPIED: ClassVar[dict[str, _Copy]] = {}
    REBUILT: ClassVar[tuple[str, ...]] = ()

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
        return _copy_task(self)

    def __repr__(self) -> str:
        return f"Task({self.key}, {status_label(self.status)}, node={self.node_name or '-'})"


_copy_task = _copier(Task)


@dataclass(frozen=True, slots=True, eq=False)
class Condition:
    """A PodGroup condition. Frozen: a job's copies share them (`set_condition` replaces
    one, never changes it)."""

    type: str
    status: str
    reason: str
    message: str
    transition_id: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason,
                "message": self.message}

    def same_as(self, other: Condition) -> bool:
        return (self.type, self.status, self.reason, self.message) == (
            other.type, other.status, other.reason, other.message)


class Job:
    """A PodGroup and its tasks, with the counters Volcano's gang rules read.

    It holds its PodGroup's `spec`, shared by its copies, and reads what never changes
    in a session from it (`min_available`, `creation`, ...); what the scheduler decides
    (queue with the default filled in, priority, phase, conditions) it holds itself."""

    __slots__ = (
        "_by_status",
        "_dirty",
        "_sub_groups",
        "allocated",
        "bare",
        "changes",
        "conditions",
        "fit_errors",
        "held_only",
        "memo",
        "orphaned",
        "phase",
        "priority",
        "queue",
        "spec",
        "tasks",
        "uid",
        "watch",
    )
    SHARED = ("bare", "held_only", "orphaned", "phase", "priority", "queue", "spec", "uid")
    COPIED: ClassVar[dict[str, _Copy]] = {"conditions": list}
    REBUILT = ("_by_status", "_dirty", "_sub_groups", "allocated", "changes", "fit_errors",
               "memo", "tasks", "watch")

    def __init__(self, spec: PodGroupSpec, queue: str, *, bare: bool = False) -> None:
        self.spec = spec
        self.uid = f"{spec.namespace}/{spec.name}"
        self.queue = queue
        self.priority = 0
        self.phase = spec.phase
        self.conditions: list[Condition] = [Condition(*c) for c in spec.conditions]
        self.bare = bare
        # Its PodGroup is gone: only its placed pods are in the session, so that what they
        # hold still counts against their queue; nothing of it is scheduled or written.
        self.held_only = False
        # How many of its placed tasks are on a node the cache no longer has (deleted
        # under them): kept by the cache, which marks the job dirty when it changes.
        self.orphaned = 0
        self.tasks: dict[str, Task] = {}
        self._by_status: dict[Status, dict[str, Task]] = {}
        self.allocated = Resource()
        self.fit_errors: dict[str, NodeFitErrors] = {}
        # Where its uid goes when it is marked `dirty` (see there); None: nowhere.
        self.watch: set[str] | None = None
        self._dirty = True
        # How many times it was marked dirty: a statement that finds the count where
        # its own changes left it knows nothing else changed the job (`mark_restored`).
        self.changes = 0
        # What plugins derived from this copy at session open, by plugin. A snapshot
        # hands a copy on only if nothing changed it, so the next session's plugins may
        # reuse these instead of recounting every pod (see hookspecs, on_session_open).
        self.memo: dict[str, Any] = {}
        # Its sub-groups (`sub_groups()`) and each grouped task's, by uid: made when
        # first asked and again after its tasks change
        self._sub_groups: tuple[dict[GroupKey, SubGroup], dict[str, SubGroup]] | None = None

    # ---------------------------------------------------------------- the spec's fields

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def min_available(self) -> int:
        return self.spec.min_member

    @property
    def min_task_member(self) -> Mapping[str, int]:
        return self.spec.min_task_member

    @property
    def min_resources(self) -> Resource | None:
        return self.spec.min_resources

    @property
    def priority_class_name(self) -> str:
        return self.spec.priority_class_name

    @property
    def creation(self) -> float:
        return self.spec.creation

    @property
    def schedule_timeout(self) -> int | None:
        return self.spec.schedule_timeout

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.spec.annotations

    @property
    def preemptable(self) -> bool:
        return self.spec.preemptable

    @property
    def dirty(self) -> bool:
        """Changed since it was copied (or, in the cache, since the last snapshot): a
        snapshot copies it anew instead of handing on the last session's copy. Its
        conditions are left out: the snapshot gives the copy the cache's own. Marking it
        notes its uid in `watch`, so that a snapshot visits what changed only."""
        return self._dirty

    @dirty.setter
    def dirty(self, value: bool) -> None:
        self._dirty = value
        if value:
            self.changes += 1
            if self.watch is not None:
                self.watch.add(self.uid)

    def mark_restored(self) -> None:
        """A discarded statement undid every change made to this copy since it was
        clean (`Statement.discard` checks it by `changes`): it is clean again, and a
        snapshot may hand it on. Its tasks hold what they held before, but not in the
        same order per status, and its `allocated` may name cards at zero; `settle`
        puts both as a copy made anew would have them."""
        self._dirty = False

    def settle(self) -> None:
        """Make a restored copy (`mark_restored`) what a copy made anew would be: its tasks
        per status in its tasks' order, `allocated` summed again, and nothing of the
        last session's attempts on its tasks (run when a snapshot hands it on)."""
        self._by_status = {}
        self.allocated = Resource()
        for task in self.tasks.values():
            task.last_transaction = None
            self._by_status.setdefault(task.status, {})[task.uid] = task
            if task.status & ALLOCATED_STATUSES:
                self.allocated.add(task.resreq)

    # ---------------------------------------------------------------- tasks

    def add_task(self, task: Task) -> None:
        self.dirty = True
        self._sub_groups = None
        self.tasks[task.uid] = task
        self._by_status.setdefault(task.status, {})[task.uid] = task
        if task.status & ALLOCATED_STATUSES:
            self.allocated.add(task.resreq)

    def remove_task(self, task: Task) -> None:
        stored = self.tasks.pop(task.uid, None)
        if stored is None:
            return
        self.dirty = True
        self._sub_groups = None
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
        return self.count(READY_STATUSES)

    def live_ready_num(self) -> int:
        """Its ready tasks less those on a deleted node (`orphaned`): what gang-safe
        eviction counts. Such a pod stays Running in the API until it is deleted too,
        and the gang rules count it as Volcano does, but it runs nowhere: taking a pod
        of the gang because that one seems to keep it whole would break it."""
        return self.count(READY_STATUSES) - self.orphaned

    def waiting_task_num(self) -> int:
        return self.count(S.PIPELINED)

    def valid_task_num(self) -> int:
        return self.count(VALID_STATUSES)

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

    def waits(self) -> bool:
        """Something of it waits for a session: admission, or pods for a node."""
        return self.is_pending() or bool(self.count(S.PENDING))

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
            self._role_counts(VALID_STATUSES))

    def check_task_ready(self) -> bool:
        if not self.min_task_member:
            return True
        return self._roles_meet(self._role_counts(READY_STATUSES))

    def check_task_pipelined(self) -> bool:
        if not self.min_task_member:
            return True
        return self._roles_meet(
            self._role_counts(PIPELINED_STATUSES))

    # ---------------------------------------------------------------- sub-groups

    def sub_groups(self) -> dict[GroupKey, SubGroup]:
        """Its sub-groups by key (vscheduler.sub_groups), empty without policies."""
        return self._grouping()[0]

    def sub_group_of(self, task: Task) -> SubGroup | None:
        """The sub-group `task` is in; None for a task in none (the job's rest)."""
        return self._grouping()[1].get(task.uid)

    def forget_sub_groups(self) -> None:
        """Make its sub-groups anew when next asked (its spec changed)."""
        self._sub_groups = None

    def _grouping(self) -> tuple[dict[GroupKey, SubGroup], dict[str, SubGroup]]:
        if self._sub_groups is None:
            policies = self.spec.sub_groups
            groups = group_tasks(policies, self.tasks.values()) if policies else {}
            self._sub_groups = groups, {task.uid: group for group in groups.values()
                                        for task in group.tasks}
        return self._sub_groups

    def _peers(self, task: Task) -> Iterable[Task]:
        """The tasks whose failures speak for `task`'s: the job's, or with sub-groups,
        its group's (or the rest's): another group may sit in another domain."""
        if not self.spec.sub_groups:
            return self.tasks.values()
        group = self.sub_group_of(task)
        if group is not None:
            return group.tasks
        return [t for t in self.tasks.values() if self.sub_group_of(t) is None]

    def sub_groups_short(self, statuses: Status) -> tuple[SubGroupPolicy, int] | None:
        """The first sub-group policy with fewer than its minSubGroups groups having
        `size` tasks in `statuses`, and how many it has (None: none falls short)."""
        if not self.spec.sub_groups:
            return None
        return short_policy(self.spec.sub_groups, self.sub_groups().values(), statuses)

    def task_has_fit_errors(self, task: Task) -> bool:
        """Another task of the same (non-empty) role already failed predicates."""
        if not task.role:
            return False
        return any(
            t.role == task.role and t.uid in self.fit_errors for t in self._peers(task)
            if t.uid != task.uid
        )

    def need_continue_allocating(self, task: Task | None = None) -> bool:
        """After a task (`task`) failed, is it worth trying the job's other tasks? With
        sub-groups, those of its group: not if the group needs every one of its pods
        (Volcano's rule for sub-groups)."""
        if self.spec.sub_groups and task is not None:
            group = self.sub_group_of(task)
            return group is None or group.size < len(group.tasks)
        if self.min_available == len(self.tasks):
            return False
        failed_roles = {self.tasks[uid].role for uid in self.fit_errors if uid in self.tasks}
        if self.min_available < self._min_task_total():
            pending_ok = sum(
                1 for t in self._by_status.get(S.PENDING, {}).values()
                if t.role not in failed_roles)
            return self.ready_task_num() + pending_ok >= self.min_available
        ready = self._role_counts(READY_STATUSES)
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
        # (the first of its tasks by key with a fit error: called for every job that
        # waits, in every session, so not a sort of them all)
        tasks = self.tasks
        first = min((tasks[uid] for uid in self.fit_errors if uid in tasks),
                    key=lambda task: task.key, default=None)
        if first is None:
            return message
        return f"{message}. Origin reason is {first.name}: {self.fit_errors[first.uid].message()}"

    def set_condition(self, condition: Condition) -> None:
        """Set the condition of its type. This leaves the job clean (`dirty`): conditions
        are its status, which the cache takes from every session's copy after it and a
        snapshot hands on from the cache, whatever the copy holds (nothing derived at
        open reads them)."""
        for i, existing in enumerate(self.conditions):
            if existing.type == condition.type:
                self.conditions[i] = condition
                return
        self.conditions.append(condition)

    # ---------------------------------------------------------------- copies

    def clone(self) -> Job:
        job = _copy_job(self)
        job.watch = None
        job.tasks = {}
        job._by_status = {}
        job.allocated = Resource()
        job.fit_errors = {}
        job.memo = {}
        job._sub_groups = None
        job.changes = 0
        for task in self.tasks.values():
            job.add_task(task.clone())
        job.dirty = False
        return job

    def __repr__(self) -> str:
        return f"Job({self.uid}, queue={self.queue}, min={self.min_available}, {self.phase})"


_copy_job = _copier(Job)


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
        "_dirty",
        "allocatable",
        "changes",
        "idle",
        "labels",
        "max_pods",
        "memo",
        "name",
        "pipelined",
        "position",
        "releasing",
        "taints",
        "tasks",
        "unschedulable",
        "used",
        "watch",
    )
    # memo: derived from labels and allocatable, which never change for a Node object
    SHARED = ("allocatable", "labels", "max_pods", "memo", "name", "taints", "unschedulable")
    COPIED: ClassVar[dict[str, _Copy]] = {
        "idle": Resource.clone, "pipelined": Resource.clone, "releasing": Resource.clone,
        "tasks": dict, "used": Resource.clone}
    REBUILT = ("_dirty", "changes", "position", "watch")

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
        # Where its name goes when it is marked `dirty` (see there); None: nowhere.
        self.watch: set[str] | None = None
        self._dirty = True
        # Where it stands in its session's node list (set by the session).
        self.position = 0
        # What plugins derived from the node's labels and allocatable, which never
        # change for a Node object (the cache makes a new one): shared by its copies.
        self.memo: dict[str, Any] = {}

    @property
    def dirty(self) -> bool:
        """Changed since it was copied (or, in the cache, since the last snapshot).
        Marking it notes its name in `watch` (see `Job.dirty`)."""
        return self._dirty

    @dirty.setter
    def dirty(self, value: bool) -> None:
        self._dirty = value
        if value and self.watch is not None:
            self.watch.add(self.name)

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
            if self.changes is not None:  # (who may be a victim depends on the status)
                self.changes.append(self.name)
            return
        self.remove_task(task)
        self.add_task(task)

    def pod_count(self) -> int:
        return len(self.tasks)

    def clone(self) -> Node:
        node = _copy_node(self)
        node.watch = None
        node.changes = None
        node.dirty = False
        node.position = 0
        return node

    def __repr__(self) -> str:
        return f"Node({self.name}, idle={self.idle})"


_copy_node = _copier(Node)


class Queue:
    """A Volcano Queue. Read-only in a session: plugins keep their own accounting."""

    __slots__ = (
        "annotations",
        "capability",
        "closed_by",
        "creation",
        "deserved",
        "guarantee",
        "meta_uid",
        "min_runtime",
        "min_runtime_problem",
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
        min_runtime: float | None = None,
        min_runtime_problem: str | None = None,
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
        # volcano.sh/min-runtime in seconds: its pods' minimum runtime before they may be
        # victims, over the action's argument (None: not said here; see guards.py)
        self.min_runtime = min_runtime
        # what is wrong with that annotation, if anything (it then guards for ever)
        self.min_runtime_problem = min_runtime_problem
        # (ancestor, its state) when an ancestor takes nothing new (Closed, Closing):
        # then neither does this queue, as Volcano's queue controller closes a closed
        # queue's children. Set on the session's copy only (`Cache._session_queues`).
        self.closed_by: tuple[str, str] | None = None

    @property
    def uid(self) -> str:
        return self.name

    def same_but_status(self, other: Queue) -> bool:
        """Whether `other` reads the same but for its status (which sessions do not read:
        our own write of it, seen again by the watch, changes nothing a session sees)."""
        return all(getattr(self, name) == getattr(other, name)
                   for name in self.__slots__ if name != "status_allocated")

    def is_open(self) -> bool:
        """Open, or without a state at all (no queue controller runs beside us), and so
        is every ancestor."""
        return self.state in ("Open", "") and self.closed_by is None

    def closed_reason(self) -> str | None:
        """Why the queue takes nothing new (no admission, no placement), or None while it
        is open: the one wording of that rule, for every action and plugin that checks it."""
        if self.is_open():
            return None
        if self.state in ("Open", "") and self.closed_by is not None:
            ancestor, state = self.closed_by
            return f"queue {self.name}'s ancestor {ancestor} is {state}: it takes nothing new"
        return f"queue {self.name} is {self.state}: it takes nothing new"

    def __repr__(self) -> str:
        return f"Queue({self.name}, weight={self.weight}, {self.state or 'Open'})"
