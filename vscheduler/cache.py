"""The authoritative picture of the cluster, kept up to date object by object.

A source (manifest files, or the daemon's watches) feeds it parsed objects; each session
takes a `Snapshot`, a copy the session may change freely. Decisions come back through
`bind`, `evict` and `set_podgroup_status`.

Standalone, as ARCHITECTURE.md asks: a pod of ours without a PodGroup is a job of one,
the default queue exists even if no object names it, and a PodGroup whose queue is
missing waits, with a Warning event saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from types import MappingProxyType

from vscheduler.model import (
    ALLOCATED_STATUSES,
    BARE_JOB_SUFFIX,
    Condition,
    Job,
    Node,
    PriorityClass,
    Queue,
    Status,
    Task,
    TaskStatus,
)
from vscheduler.objects import (
    QUEUE_NAME_ANNOTATION,
    BadObject,
    ParsedPod,
    read_pod_network_topology,
)
from vscheduler.queue_tree import ROOT
from vscheduler.specs import DisruptionBudget, HyperNodeSpec, NodeSpec, PodGroupSpec
from vscheduler.textinput import brief

__all__ = ["Cache", "Snapshot"]

S = TaskStatus
_NO_NAMESPACES: Mapping[str, Mapping[str, str]] = MappingProxyType({})
# Snapshots after which what sessions keep (`Snapshot.kept`) is dropped if none read it.
KEPT_IDLE_SESSIONS = 20


class Snapshot:
    """What one session sees: its own copies of jobs and nodes, in a fixed order."""

    __slots__ = ("base", "budgets", "changed_jobs", "changed_nodes", "closed", "dirty_jobs",
                 "hypernodes", "jobs", "kept", "namespaces", "node_specs", "nodes",
                 "nominated", "priority_classes", "queues", "restated", "restored", "revisit",
                 "serial", "skipped", "topology_key", "waiting", "warnings")

    def __init__(self, jobs: dict[str, Job], nodes: dict[str, Node], queues: dict[str, Queue],
                 priority_classes: dict[str, PriorityClass],
                 skipped: dict[str, tuple[Task, str]],
                 warnings: list[tuple[str, str, str]], node_specs: int = 0,
                 budgets: tuple[DisruptionBudget, ...] = ()) -> None:
        self.jobs = jobs
        # The cache's count of node additions, removals and spec changes: what plugins
        # derived from jobs' placements on nodes (Job.memo) holds while it is the same.
        self.node_specs = node_specs
        self.nodes = nodes
        self.queues = queues
        self.priority_classes = priority_classes
        # pending tasks of ours that no session job holds: key -> (task, reason)
        self.skipped = skipped
        # (object, reason, message) Warning events about what was left out
        self.warnings = warnings
        # PodDisruptionBudgets, by namespace then name: which victims would break one
        # (guards.split_by_budgets)
        self.budgets = budgets
        # HyperNodes, by name, and what says when they or the nodes last changed (the
        # session's topology is built again only then: `Session.topology`)
        self.hypernodes: tuple[HyperNodeSpec, ...] = ()
        self.topology_key: tuple[int, int] = (0, node_specs)
        # Namespace name -> labels, of the Namespace objects known (a pod's namespace may
        # have none: `matching.namespace_labels`). Read only, and shared: the same mapping
        # snapshot after snapshot until a namespace changes, so its identity says whether
        # they did.
        self.namespaces: Mapping[str, Mapping[str, str]] = _NO_NAMESPACES
        # Pods of ours with a nominated node (status.nominatedNodeName), by pod key: their
        # job's uid, their uid and the node (what `nominations.nominated_pods` reads, so
        # that a session does not visit every pending pod to find them).
        self.nominated: dict[str, tuple[str, str, str]] = {}
        # What changed since the snapshot this one was built from (see `vscheduler.tally`):
        # its number `serial`, the number of that earlier one `base` (0 if none: then
        # nothing is known of changes), and the uids of jobs and names of nodes copied
        # anew or gone since, and of the job copies handed on with a new phase (what
        # plugins derive from a job may read its phase). A copy handed on unchanged is
        # not in these.
        self.serial = 0
        self.base = 0
        self.changed_jobs: list[str] = []
        self.changed_nodes: list[str] = []
        # uids of the copies handed on with other conditions than they had: the cache's,
        # written since by someone else (or read back after our own write)
        self.restated: list[str] = []
        # uids of the copies its session changed and put back (`Job.mark_restored`): the
        # next snapshot settles them (`Job.settle`) if it hands them on
        self.restored: set[str] = set()
        # uids of the jobs that wait for something, in order: not admitted yet, or with
        # pods pending. The actions look at these only (Session.waiting_jobs).
        self.waiting: list[str] = []
        # uids the next snapshot looks at again whatever changes: jobs left out (their
        # pods' reasons are given anew) or held only; and the jobs its session closed
        # (whose phase and conditions the session set on its copies).
        self.revisit: set[str] = set()
        self.closed: list[str] = []
        # The uids of the jobs marked dirty since the snapshot was taken (its copies
        # note themselves there: `Job.watch`), with perhaps some of the cache's; None
        # when its copies note nothing (a snapshot not handed on).
        self.dirty_jobs: set[str] | None = None
        # What plugins keep from one session to the next, by a key of their own (the
        # cache's dict, handed to every snapshot; see `vscheduler.tally`).
        self.kept: dict[str, object] = {}


class Cache:
    def __init__(self, scheduler_names: tuple[str, ...] = ("vscheduler",),
                 default_queue: str = "default") -> None:
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        self.nodes: dict[str, Node] = {}
        self.tasks: dict[str, Task] = {}  # pod key -> task (ours, and others' with a node)
        # pod uid -> key, of `tasks`: a job holds its tasks by uid, and a session keeps
        # what it worked out per task uid, so no two pods may share one
        self._keys_by_uid: dict[str, str] = {}
        self.jobs: dict[str, Job] = {}
        self.podgroups: dict[str, PodGroupSpec] = {}
        # PodGroup namespace/name -> why it could not be read (its pods wait for it to be
        # fixed, and say why, rather than that it is missing)
        self.refused_podgroups: dict[str, str] = {}
        # PodGroup uid -> (running, succeeded, failed) as last read or written
        self._status_counts: dict[str, tuple[int, int, int]] = {}
        self.queues: dict[str, Queue] = {}
        self._implied_queue: Queue | None = None  # the default queue when none is listed
        # pod key -> (job uid, uid, node) of the pods of ours with a nominated node
        self._nominated: dict[str, tuple[str, str, str]] = {}
        # (object, reason, message) Warnings about objects as they were read, for the
        # next session to write (a PodGroup phase read as Pending, say)
        self._read_warnings: list[tuple[str, str, str]] = []
        # queue name -> (its object, the closed ancestor, the session's copy saying so)
        self._closed_copies: dict[str, tuple[Queue, tuple[str, str], Queue]] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.budgets: dict[str, DisruptionBudget] = {}  # namespace/name -> budget
        self.hypernodes: dict[str, HyperNodeSpec] = {}
        self.hypernode_changes = 0  # (Snapshot.topology_key)
        self.namespaces: dict[str, Mapping[str, str]] = {}  # name -> labels
        # What snapshots are handed (Snapshot.namespaces): a copy of `namespaces`, made
        # again at the first snapshot after one changed (None until then).
        self._namespace_view: Mapping[str, Mapping[str, str]] | None = _NO_NAMESPACES
        self._orphans: dict[str, dict[str, Task]] = {}  # node name -> tasks of a missing node
        # The last snapshot, whose unchanged copies the next one hands on, and the task
        # copies of its jobs by pod key.
        self._previous: Snapshot | None = None
        self._task_clones: dict[str, Task] = {}
        self.node_specs = 0  # see Snapshot.node_specs
        # Counts every change; a session over a cache that did not change since the last
        # one, with no work pending, would decide nothing (see `has_work`).
        self.generation = 0
        self._serial = 0  # the number of the last snapshot (see Snapshot.serial)
        self.kept: dict[str, object] = {}  # see Snapshot.kept
        # The uids of jobs and names of nodes that changed since the last snapshot, in
        # the cache or in the session over it: each job and node, the cache's and the
        # copies handed out, notes itself here when marked dirty (`Job.watch`), and the
        # cache notes what it adds, deletes or restates. The next snapshot visits these
        # only (`snapshot`).
        self._job_watch: set[str] = set()
        self._node_watch: set[str] = set()
        # The uids of jobs whose phase alone the close wrote since the last snapshot
        # (`set_podgroup_status`): their copies stay good, and are handed on as changed.
        self._rephased: set[str] = set()

    # ---------------------------------------------------------------- nodes

    def add_node(self, spec: NodeSpec) -> None:
        old = self.nodes.get(spec.name)
        if old is not None and _same_spec(old, spec):
            return  # a status update (heartbeat, conditions): nothing the scheduler reads
        self.generation += 1
        self.node_specs += 1
        node = Node(spec.name, spec.allocatable, spec.labels, spec.taints, spec.unschedulable)
        node.watch = self._node_watch
        self._node_watch.add(spec.name)
        tasks = [t for t, _ in old.tasks.values()] if old else []
        for task in self._orphans.pop(spec.name, {}).values():
            self._count_orphan(task, -1)
            tasks.append(task)
        for task in tasks:
            node.add_task(task)
        self.nodes[spec.name] = node

    def delete_node(self, name: str) -> None:
        self.generation += 1
        self.node_specs += 1
        self._node_watch.add(name)
        node = self.nodes.pop(name, None)
        if node is not None and node.tasks:
            self._orphans[name] = {t.key: t for t, _ in node.tasks.values()}
            for task in self._orphans[name].values():
                self._count_orphan(task, 1)

    def _count_orphan(self, task: Task, change: int) -> None:
        """Count `task` into (1) or out of (-1) its job's pods on a missing node
        (`Job.orphaned`), marking the job changed: its copies must say it too."""
        job = self.jobs.get(task.job_id)
        if job is not None and task.status & ALLOCATED_STATUSES:
            job.orphaned += change
            job.dirty = True

    # ---------------------------------------------------------------- pods

    def is_ours(self, parsed: ParsedPod) -> bool:
        return parsed.pod.scheduler_name in self.scheduler_names

    def add_pod(self, parsed: ParsedPod) -> None:
        """Add or replace a pod."""
        self.generation += 1
        pod = parsed.pod
        key = pod.key
        holder = self._keys_by_uid.get(pod.uid, key)
        if holder != key:
            # (never two pods from an API server; two in a manifest, written by hand)
            raise BadObject(f"metadata.uid: {brief(pod.uid)} is pod {holder}'s uid too")
        ours = self.is_ours(parsed)
        if ours and "#" in parsed.group:
            # An annotation is not checked as a name is: this one could name a pod's job
            # of one (see model.BARE_JOB_SUFFIX). (Another scheduler's pod is not
            # refused: on a node, it holds room there whatever its group.)
            raise BadObject(f"PodGroup name {brief(parsed.group)}: '#' is in no "
                            "Kubernetes name")
        if key in self.tasks:
            self.delete_pod(key)
        if not ours and not parsed.node_name:
            return  # another scheduler's business until it lands on a node
        priority = parsed.task_priority
        if priority is None:
            priority = self._pod_priority(pod.priority, pod.priority_class_name)
        job_id = ""
        if ours:
            job_id = self._job_for(parsed).uid
        task = Task(pod, parsed.resreq, job_id, parsed.status, parsed.node_name, priority,
                    parsed.preemptable, parsed.role)
        self.tasks[key] = task
        self._keys_by_uid[pod.uid] = key
        if job_id:
            self.jobs[job_id].add_task(task)
            if pod.nominated_node:
                self._nominated[key] = (job_id, pod.uid, pod.nominated_node)
        self._charge(task)

    def delete_pod(self, key: str) -> None:
        self.generation += 1
        task = self.tasks.pop(key, None)
        if task is None:
            return
        del self._keys_by_uid[task.uid]
        self._nominated.pop(key, None)
        self._uncharge(task)
        job = self.jobs.get(task.job_id)
        if job is not None:
            job.remove_task(task)
            if job.bare or (not job.tasks and job.uid not in self.podgroups):
                del self.jobs[job.uid]
                self._job_watch.add(job.uid)

    def _charge(self, task: Task) -> None:
        if not task.node_name or task.status & (S.SUCCEEDED | S.FAILED):
            return
        node = self.nodes.get(task.node_name)
        if node is None:
            self._orphans.setdefault(task.node_name, {})[task.key] = task
            self._count_orphan(task, 1)
        elif task.key not in node.tasks:
            node.add_task(task)

    def _uncharge(self, task: Task) -> None:
        node = self.nodes.get(task.node_name)
        if node is not None:
            node.remove_task(task)
        elif self._orphans.get(task.node_name, {}).pop(task.key, None) is not None:
            self._count_orphan(task, -1)

    def _pod_priority(self, spec_priority: int | None, class_name: str) -> int:
        if spec_priority is not None:
            return spec_priority
        if class_name in self.priority_classes:
            return self.priority_classes[class_name].value
        default = self._global_default()
        return default.value if default else 1

    def _global_default(self) -> PriorityClass | None:
        return next((c for c in self.priority_classes.values() if c.global_default), None)

    def _job_for(self, parsed: ParsedPod) -> Job:
        pod = parsed.pod
        if parsed.group:
            uid = f"{pod.namespace}/{parsed.group}"
            job = self.jobs.get(uid)
            if job is None:  # its PodGroup is not here yet: a job of defaults until it is
                job = self._adopt(Job(PodGroupSpec(pod.namespace, parsed.group,
                                                   creation=pod.creation),
                                      self.default_queue))
            return job
        # A pod of ours without a group: a job of one.
        queue = pod.annotations.get(QUEUE_NAME_ANNOTATION) or self.default_queue
        spec = PodGroupSpec(
            pod.namespace, pod.name + BARE_JOB_SUFFIX, queue, min_member=1,
            min_resources=parsed.resreq, priority_class_name=pod.priority_class_name,
            creation=pod.creation, preemptable=parsed.preemptable,
            annotations=pod.annotations,
            network_topology=read_pod_network_topology(pod.annotations),
            phase="Pending" if parsed.status == S.PENDING else "Running")
        return self._adopt(Job(spec, queue, bare=True))

    def _adopt(self, job: Job) -> Job:
        """Take a new job in, noted for the next snapshot (see `_job_watch`)."""
        job.watch = self._job_watch
        self._job_watch.add(job.uid)
        self.jobs[job.uid] = job
        return job

    # ---------------------------------------------------------------- volcano objects

    def add_podgroup(self, spec: PodGroupSpec) -> None:
        self.generation += 1
        uid = f"{spec.namespace}/{spec.name}"
        self.refused_podgroups.pop(uid, None)
        self.podgroups[uid] = spec
        if spec.phase_problem is not None:
            self._read_warnings.append((f"PodGroup/{uid}", "InvalidPhase", spec.phase_problem))
        counts_seen = self._status_counts.get(uid)
        self._status_counts[uid] = spec.counts
        queue = spec.queue or self.default_queue
        job = self.jobs.get(uid)
        self._job_watch.add(uid)  # (a status alone too: the copy handed on takes it)
        if job is None:
            self._adopt(Job(spec, queue))
            return
        # The job keeps its tasks and takes the new spec, with the status it says. A
        # change of status alone (our own write, seen again by the watch) leaves the last
        # snapshot's copy good: it takes the spec and conditions from here when handed on.
        # (Other counts than those last written: the next session writes them again.)
        if (job.phase != spec.phase or counts_seen != spec.counts
                or not _same_but_status(job.spec, spec)):
            job.dirty = True
        job.spec = spec
        job.forget_sub_groups()  # (its policies may have changed)
        job.queue = queue
        job.phase = spec.phase
        job.conditions = [Condition(*c) for c in spec.conditions]

    def refuse_podgroup(self, uid: str, error: str) -> None:
        """A PodGroup that could not be read (what it had before, if anything, stays)."""
        self.generation += 1
        self._job_watch.add(uid)
        self.refused_podgroups[uid] = error

    def delete_podgroup(self, uid: str) -> None:
        self.generation += 1
        self._job_watch.add(uid)  # (its job is held only, or gone)
        self.refused_podgroups.pop(uid, None)
        self.podgroups.pop(uid, None)
        self._status_counts.pop(uid, None)
        job = self.jobs.get(uid)
        if job is not None and not job.tasks:
            del self.jobs[uid]

    def add_queue(self, queue: Queue) -> None:
        self.generation += 1
        known = self.queues.get(queue.name)
        if known is not None and known.same_but_status(queue):
            # (the same object kept: snapshots compare queues by identity, and a new one
            # would make the next visit every job)
            known.status_allocated = queue.status_allocated
            return
        self.queues[queue.name] = queue

    def delete_queue(self, name: str) -> None:
        self.generation += 1
        self.queues.pop(name, None)

    def add_priority_class(self, pc: PriorityClass) -> None:
        self.generation += 1
        known = self.priority_classes.get(pc.name)
        if known is not None and (known.value, known.global_default) == (
                pc.value, pc.global_default):
            return  # (read again as it was: the same object, see `add_queue`)
        self.priority_classes[pc.name] = pc

    def delete_priority_class(self, name: str) -> None:
        self.generation += 1
        self.priority_classes.pop(name, None)

    def add_disruption_budget(self, budget: DisruptionBudget) -> None:
        self.generation += 1
        self.budgets[budget.key] = budget

    def delete_disruption_budget(self, key: str) -> None:
        self.generation += 1
        self.budgets.pop(key, None)

    def add_hypernode(self, hypernode: HyperNodeSpec) -> None:
        known = self.hypernodes.get(hypernode.name)
        self.hypernodes[hypernode.name] = hypernode
        if known is not None and (known.tier, known.tier_name, known.members) == (
                hypernode.tier, hypernode.tier_name, hypernode.members):
            return  # (a status written by its controller: the tree is the same)
        self.generation += 1
        self.hypernode_changes += 1

    def delete_hypernode(self, name: str) -> None:
        self.generation += 1
        self.hypernode_changes += 1
        self.hypernodes.pop(name, None)

    def add_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        if self.namespaces.get(name) == labels:
            return  # (its status or annotations changed: nothing a selector reads)
        self.generation += 1
        self.namespaces[name] = labels
        self._namespace_view = None

    def delete_namespace(self, name: str) -> None:
        if self.namespaces.pop(name, None) is not None:
            self.generation += 1
            self._namespace_view = None

    # ---------------------------------------------------------------- decisions

    def _move(self, task: Task, status: Status, node_name: str) -> None:
        """Give a task a new status and node, its node's accounting with it."""
        self._uncharge(task)
        job = self.jobs.get(task.job_id)
        if job is not None:
            job.update_task_status(task, status)
        else:
            task.status = status
        task.node_name = node_name
        self._charge(task)

    def bind(self, key: str, node_name: str) -> None:
        """A bind was decided: the pod is on its node (Bound until it runs)."""
        self.generation += 1
        self._move(self.tasks[key], S.BOUND, node_name)

    def unbind(self, key: str) -> None:
        """A bind the API server refused: the pod waits again."""
        self.generation += 1
        task = self.tasks.get(key)
        if task is not None and task.status in (S.BOUND, S.BINDING):
            self._move(task, S.PENDING, "")

    def unevict(self, key: str) -> None:
        """An eviction the API server refused: the pod runs on."""
        self.generation += 1
        task = self.tasks.get(key)
        if task is not None and task.status == S.RELEASING:
            self._move(task, S.RUNNING, task.node_name)

    def set_running(self, key: str) -> None:
        self.generation += 1
        task = self.tasks.get(key)
        if task is None or task.status != S.BOUND:
            return
        self._move(task, S.RUNNING, task.node_name)
        job = self.jobs.get(task.job_id)
        if job is not None and job.bare:
            job.phase = "Running"
            job.dirty = True

    def set_nominated(self, key: str, node: str) -> None:
        """The pod's `status.nominatedNodeName` is now `node` ("" for none): what the
        watch brings back once a session's nomination is written (simulate has no
        watch)."""
        task = self.tasks.get(key)
        if task is None or task.pod.nominated_node == node:
            return
        self.generation += 1
        task.pod = replace(task.pod, nominated_node=node)
        self._nominated.pop(key, None)
        if node and task.job_id:
            self._nominated[key] = (task.job_id, task.uid, node)
        job = self.jobs.get(task.job_id)
        if job is not None:
            job.dirty = True  # (the next snapshot copies it anew, with the new pod)

    def set_releasing(self, key: str) -> None:
        """An eviction was sent: the pod is terminating."""
        self.generation += 1
        task = self.tasks.get(key)
        if task is not None:
            self._move(task, S.RELEASING, task.node_name)

    def set_podgroup_status(self, uid: str, phase: str, conditions: list[Condition]) -> bool:
        """Take a PodGroup's new phase and conditions; whether its status (with its
        running, succeeded and failed counts) differs from the one last written."""
        job = self.jobs.get(uid)
        if job is None:
            return False
        self._job_watch.add(uid)  # (the copy handed on takes the cache's status)
        counts = (job.count(S.RUNNING), job.count(S.SUCCEEDED), job.count(S.FAILED))
        counted = self._status_counts.get(uid, counts) == counts
        if uid in self._status_counts:
            self._status_counts[uid] = counts
        if job.phase == phase and len(job.conditions) == len(conditions) and all(
                a.same_as(b) for a, b in zip(job.conditions, conditions, strict=True)):
            return not counted
        self.generation += 1
        if job.phase != phase:
            # The session's copy holds this phase already, and its pods are the cache's:
            # it is handed on, but as a changed job, since what plugins derive from a
            # job may read its phase (an admitted job holds room in its queue).
            self._rephased.add(uid)
        job.phase = phase
        # (not dirty for the conditions: the copy that set them is handed on with these)
        job.conditions = [Condition(c.type, c.status, c.reason, c.message)
                          for c in conditions]
        return True

    # ---------------------------------------------------------------- snapshot

    def has_work(self) -> bool:
        """Whether a session could decide anything: a PodGroup waits for admission or a
        pod of ours waits for a node. (Without either, actions have nothing to do, and
        the statuses a session writes only change when the cache does.) After a
        snapshot, only the jobs that waited then, were left out or changed since can."""
        previous, jobs = self._previous, self.jobs
        if previous is None:
            return any(job.waits() for job in jobs.values())
        uids = self._job_watch.union(previous.waiting, previous.revisit)
        return any(job.waits() for job in map(jobs.get, uids) if job is not None)

    def snapshot(self, reuse: bool = True) -> Snapshot:
        """The jobs and nodes a session may change, copied from the cache.

        Copy-on-write across sessions (see `_CopyOnWrite`): a snapshot costs what changed
        (a queue or PriorityClass read again unchanged keeps its object: `add_queue`).
        Only the jobs and nodes noted as changed since the last snapshot (`_job_watch`,
        `_node_watch`) and the jobs it must look at again (`Snapshot.revisit`, those that
        waited, those closed) are visited; the others' copies are handed on as they
        are. Every job is visited when queues or PriorityClasses changed, every node
        when a node's spec did. The last session must have ended: this takes the last
        snapshot apart. `reuse=False` copies everything and leaves what the next
        snapshot reuses alone (tests compare the two)."""
        queues = self._session_queues()
        priority_classes = dict(self.priority_classes)
        # The last snapshot is taken apart as this one is built, so that what is not
        # handed on is freed along the way, not held until the end.
        previous, self._previous = (self._previous, None) if reuse else (None, self._previous)
        base = previous.serial if previous is not None else 0
        # (a copy handed on waits as it did: its tasks and phase are those it had)
        waited = set(previous.waiting) if previous is not None else set()
        job_visits: set[str] | None = None
        node_visits: set[str] | None = None
        if previous is not None:
            if (_same_values(previous.queues, queues)
                    and _same_values(previous.priority_classes, priority_classes)):
                job_visits = self._job_watch.union(waited, previous.revisit, previous.closed)
            if previous.node_specs == self.node_specs:
                node_visits = set(self._node_watch)
        copies = _CopyOnWrite(previous, self._task_clones if reuse else {},
                              self._job_watch if reuse else None,
                              self._node_watch if reuse else None, self._rephased)
        if reuse:
            self._job_watch.clear()
            self._node_watch.clear()
            self._rephased = set()  # (the copies read the last one)
        previous_nodes = previous.nodes if previous is not None else {}
        del previous
        visit = _JobVisit(self, queues, copies, reuse, waited)
        if job_visits is None:
            jobs = {}
            for uid in sorted(self.jobs):
                clone = visit.job(uid)
                if clone is not None:
                    jobs[uid] = clone
            copies.drop_old_jobs()
        else:
            jobs = dict(copies.old_jobs)
            added = False
            for uid in sorted(job_visits):
                clone = visit.job(uid)
                if clone is None:
                    jobs.pop(uid, None)
                else:
                    added = added or uid not in jobs
                    jobs[uid] = clone
            copies.drop_old_jobs(job_visits)
            if added:  # (in uid order, as every snapshot's)
                jobs = dict(sorted(jobs.items()))
        if node_visits is None:
            nodes: dict[str, Node] = {}
            for name, node in self.nodes.items():
                nodes[name] = copies.node(node)
                if reuse:
                    node.dirty = False
        else:
            nodes = dict(previous_nodes)
            for name in sorted(node_visits):  # (an order that is the same run after run)
                node = self.nodes[name]
                nodes[name] = copies.node(node)
                node.dirty = False
            copies.old_nodes = {}
        del previous_nodes
        copies.relink(nodes, self.tasks)
        # (what reading objects found worth a Warning, once each, before the visit's)
        warnings, self._read_warnings = [*self._read_warnings, *visit.warnings], []
        snapshot = Snapshot(jobs, nodes, queues, priority_classes, visit.skipped,
                            warnings, self.node_specs,
                            tuple(self.budgets[key] for key in sorted(self.budgets)))
        self._serial += 1
        snapshot.serial, snapshot.base = self._serial, base
        snapshot.nominated = dict(self._nominated)
        # What no session read for a while goes (a plugin the conf no longer names):
        # everything kept says the last snapshot it was brought up to date with.
        oldest = self._serial - KEPT_IDLE_SESSIONS
        for name in [n for n, v in self.kept.items() if getattr(v, "serial", oldest) < oldest]:
            del self.kept[name]
        snapshot.hypernodes = tuple(self.hypernodes[name] for name in sorted(self.hypernodes))
        snapshot.topology_key = (self.hypernode_changes, self.node_specs)
        if self._namespace_view is None:
            self._namespace_view = MappingProxyType(dict(sorted(self.namespaces.items())))
        snapshot.namespaces = self._namespace_view
        snapshot.changed_jobs, snapshot.changed_nodes = copies.changed_jobs, copies.changed_nodes
        snapshot.restated = copies.restated
        snapshot.kept = self.kept
        snapshot.waiting = visit.waiting  # (visited in uid order)
        snapshot.revisit = visit.revisit
        if reuse:
            snapshot.dirty_jobs = self._job_watch
            self._previous = snapshot
        return snapshot

    def _session_queues(self) -> dict[str, Queue]:
        """The queues a session sees: the default queue exists even if no object names
        it, and a queue under a closed one is closed too (`Queue.closed_by`)."""
        queues = dict(self.queues)
        if self.default_queue not in queues:
            # (the same object session after session: what sessions keep compares
            # queues by identity, see eviction.PlanMemo)
            if self._implied_queue is None:
                self._implied_queue = Queue(self.default_queue)
            queues[self.default_queue] = self._implied_queue
        closed_copies: dict[str, tuple[Queue, tuple[str, str], Queue]] = {}
        for name, queue in queues.items():
            closed_by = _closed_ancestor(queue, queues)
            if closed_by is None:
                continue
            # (the same copy while the queue and its closing ancestor stay as they are)
            kept = self._closed_copies.get(name)
            if kept is None or kept[0] is not queue or kept[1] != closed_by:
                copy = _copy_queue(queue)
                copy.closed_by = closed_by
                kept = (queue, closed_by, copy)
            closed_copies[name] = kept
            queues[name] = kept[2]
        self._closed_copies = closed_copies
        return queues

    def _left_out(self, job: Job, held_only: bool, queues: dict[str, Queue],
                  skipped: dict[str, tuple[Task, str]],
                  warnings: list[tuple[str, str, str]]) -> bool:
        """Whether a job stays out of the session, recording why its pending pods wait.

        A job whose PodGroup was deleted under running pods enters `held_only` (its
        placed pods still count against their queue); its pending pods wait for the
        PodGroup, and with nothing placed it stays out. A job whose queue is missing
        stays out with a Warning event: its pods wait for the queue."""
        if held_only:
            refused = self.refused_podgroups.get(job.uid)
            why = (f"PodGroup {job.uid} not found: the pod waits for it" if refused is None
                   else f"PodGroup {job.uid} cannot be read ({refused}): the pod waits for "
                        "it to be fixed")
            for task in job.tasks_in(S.PENDING):
                skipped[task.key] = (task, why)
            if len(job.tasks) == job.count(S.PENDING):
                return True
        if job.queue in queues:
            return False
        message = f"queue {job.queue!r} not found: the job waits for it"
        for task in job.tasks_in(S.PENDING):
            skipped[task.key] = (task, message)
        obj = f"Pod/{next(iter(job.tasks.values())).key}" if job.bare else f"PodGroup/{job.uid}"
        warnings.append((obj, "QueueNotFound", message))
        return True

    def _default_job_priority(self) -> int:
        default = self._global_default()
        return default.value if default else 0

    def _job_priority(self, job: Job, default: int) -> int:
        """A job's priority: its PriorityClass's value, else the global default class's,
        else 0 (a pod's is 1: see `_pod_priority`). Read at every snapshot, since
        PriorityClasses may change under a job."""
        pc = self.priority_classes.get(job.priority_class_name)
        return pc.value if pc else default


def _same_values(old: Mapping[str, object], new: Mapping[str, object]) -> bool:
    """Whether two mappings hold the very same objects under the same keys."""
    return old.keys() == new.keys() and all(old[k] is v for k, v in new.items())


class _JobVisit:
    """One snapshot's look at jobs, one uid at a time (`job`): what it copies or hands
    on, and what it notes on the way (pods that wait outside the session, warnings,
    the jobs that wait, those to look at again next time)."""

    __slots__ = ("cache", "copies", "default_priority", "queues", "reuse", "revisit",
                 "skipped", "waited", "waiting", "warnings")

    def __init__(self, cache: Cache, queues: dict[str, Queue], copies: _CopyOnWrite,
                 reuse: bool, waited: set[str]) -> None:
        self.cache = cache
        self.queues = queues
        self.copies = copies
        self.reuse = reuse
        self.waited = waited
        self.default_priority = cache._default_job_priority()
        self.skipped: dict[str, tuple[Task, str]] = {}
        self.warnings: list[tuple[str, str, str]] = []
        self.waiting: list[str] = []
        self.revisit: set[str] = set()

    def job(self, uid: str) -> Job | None:
        """The session's copy of job `uid`; None if it is gone or stays out."""
        cache = self.cache
        job = cache.jobs.get(uid)
        if job is None:
            return None
        held_only = not job.bare and uid not in cache.podgroups
        if held_only:
            self.revisit.add(uid)
        if cache._left_out(job, held_only, self.queues, self.skipped, self.warnings):
            self.revisit.add(uid)
            return None
        copies = self.copies
        clone, fresh = copies.job(job, held_only)
        if self.reuse:
            job.dirty = False
        priority = cache._job_priority(job, self.default_priority)
        if not fresh and clone.priority != priority:
            # A PriorityClass changed under a copy handed on: what sessions kept
            # of the job (victim plans, say) must be thought again.
            copies.changed_jobs.append(uid)
        clone.priority = priority
        if clone.waits() if fresh else uid in self.waited:
            self.waiting.append(uid)
        return clone


class _CopyOnWrite:
    """One snapshot's copies, made from the last snapshot's where it can.

    A job or node that neither the cache nor the last session changed since the last
    snapshot (see `dirty`) keeps the copy that snapshot made; any other is copied anew.
    Tasks in the snapshot's jobs must be the very objects the snapshot's nodes hold, so a
    session's changes to one are seen by the other: `clones` maps pod keys to the task
    copies of the jobs handed out, and `moved` notes the task copies made or dropped,
    whose nodes must point at the right copy (`relink`)."""

    __slots__ = ("changed_jobs", "changed_nodes", "clones", "job_watch", "moved", "node_watch",
                 "old_jobs", "old_nodes", "rephased", "restated", "restored")

    def __init__(self, previous: Snapshot | None, clones: dict[str, Task],
                 job_watch: set[str] | None, node_watch: set[str] | None,
                 rephased: set[str]) -> None:
        self.old_jobs = previous.jobs if previous else {}
        self.old_nodes = previous.nodes if previous else {}
        self.restored = previous.restored if previous else set()
        self.clones = clones
        # where copies note themselves when a session marks them dirty (`Cache._job_watch`)
        self.job_watch = job_watch
        self.node_watch = node_watch
        self.moved: list[tuple[str, str]] = []  # (pod key, node) of task copies
        # uids of jobs and names of nodes copied anew or gone (Snapshot.changed_jobs)
        self.changed_jobs: list[str] = []
        self.changed_nodes: list[str] = []
        self.restated: list[str] = []  # (Snapshot.restated)
        self.rephased = rephased  # (Cache._rephased)

    def job(self, job: Job, held_only: bool) -> tuple[Job, bool]:
        """The last snapshot's copy of `job` if still good, else a new copy; and
        whether it is to be read as new (a copy handed on with a new phase is: it
        starts with an empty memo and is among the changed jobs)."""
        clone = self.old_jobs.pop(job.uid, None)
        if clone is not None and not (clone.dirty or job.dirty) \
                and clone.held_only == held_only:
            # What sessions change without marking the job dirty is reset: its status
            # and fit errors; and a spec the cache took with a new status alone.
            clone.phase = job.phase
            if clone.conditions != job.conditions:  # (frozen Conditions: by identity)
                clone.conditions = list(job.conditions)
                self.restated.append(job.uid)
            clone.spec = job.spec
            if clone.fit_errors:
                clone.fit_errors = {}
            if job.uid in self.restored:
                clone.settle()
            if job.uid in self.rephased:
                clone.memo = {}
                self.changed_jobs.append(job.uid)
                return clone, True
            return clone, False
        if clone is not None:
            self._drop(clone)
        self.changed_jobs.append(job.uid)
        clone = job.clone()
        clone.watch = self.job_watch
        if held_only:
            clone.held_only = True
            for task in list(clone.tasks_in(S.PENDING)):
                clone.remove_task(task)
        for task in clone.tasks.values():
            self.clones[task.key] = task
            self.moved.append((task.key, task.node_name))
        return clone, True

    def drop_old_jobs(self, visited: set[str] | None = None) -> None:
        """Forget the last snapshot's copies of jobs gone, or left out this time: those
        not taken (of `visited` only, if given: the others were handed on as they are)."""
        old_jobs = self.old_jobs
        gone = list(old_jobs) if visited is None else sorted(
            uid for uid in visited if uid in old_jobs)
        for uid in gone:
            self._drop(old_jobs[uid])
            self.changed_jobs.append(uid)
        old_jobs.clear()

    def _drop(self, old: Job) -> None:
        for task in old.tasks.values():
            if self.clones.get(task.key) is task:
                del self.clones[task.key]
            self.moved.append((task.key, task.node_name))

    def node(self, node: Node) -> Node:
        """The last snapshot's copy of `node` if still good, else a new copy holding the
        task copies of this snapshot's jobs."""
        clone = self.old_nodes.pop(node.name, None)
        if clone is None or clone.dirty or node.dirty:
            self.changed_nodes.append(node.name)
            clone = node.clone()
            clone.watch = self.node_watch
            for key, (_, status) in node.tasks.items():
                task = self.clones.get(key)
                if task is not None:
                    clone.tasks[key] = (task, status)
        return clone

    def relink(self, nodes: dict[str, Node], cache_tasks: dict[str, Task]) -> None:
        """A node copy handed on may still hold the task copies of jobs copied anew (or
        dropped): point it at this snapshot's copy, or the cache's task."""
        self.changed_nodes.extend(self.old_nodes)  # (nodes gone)
        self.old_nodes.clear()
        for key, node_name in self.moved:
            node = nodes.get(node_name)
            entry = node.tasks.get(key) if node is not None else None
            if entry is not None:
                current = self.clones.get(key) or cache_tasks.get(key)
                if current is not None and current is not entry[0]:
                    node.tasks[key] = (current, entry[1])


# What a PodGroup's status holds: the scheduler's own figures, written after sessions.
_STATUS_FIELDS = frozenset({"phase", "conditions", "counts", "resource_version"})
_SPEC_FIELDS = tuple(f.name for f in fields(PodGroupSpec) if f.name not in _STATUS_FIELDS)


def _same_but_status(old: PodGroupSpec, new: PodGroupSpec) -> bool:
    """Whether two readings of a PodGroup differ in their status at most (so a session
    would schedule its job alike)."""
    return old is new or all(getattr(old, name) == getattr(new, name)
                             for name in _SPEC_FIELDS)


def _same_spec(node: Node, spec: NodeSpec) -> bool:
    a, b = node.allocatable, spec.allocatable
    return (a.cpu == b.cpu and a.memory == b.memory and a.scalars == b.scalars
            and node.labels == spec.labels and node.taints == spec.taints
            and node.unschedulable == spec.unschedulable)


def _closed_ancestor(queue: Queue, queues: Mapping[str, Queue]) -> tuple[str, str] | None:
    """The nearest ancestor of `queue` (by `parent`, a queue without one being a child of
    `root`, as Volcano defaults it; up to root, a missing one or a cycle) that takes
    nothing new, with its state; None if there is none."""
    seen = {queue.name}
    parent = queues.get(_parent_of(queue))
    while parent is not None and parent.name not in seen:
        if parent.state not in ("Open", ""):
            return parent.name, parent.state
        seen.add(parent.name)
        parent = queues.get(_parent_of(parent))
    return None


def _parent_of(queue: Queue) -> str:
    return queue.parent or ("" if queue.name == ROOT else ROOT)


def _copy_queue(queue: Queue) -> Queue:
    copy = Queue.__new__(Queue)
    for slot in Queue.__slots__:
        setattr(copy, slot, getattr(queue, slot))
    return copy
