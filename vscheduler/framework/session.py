"""One scheduling session: a snapshot, the plugins' hooks bound by their rules, the
actions run in conf order, then the close (framework/close.py).

At open the session builds every plugin, turns the conf's tiers into one function per
hook through `combine` (each hook's rule is in `hookspecs.RULES`), and only then opens
the plugins. The per-task-per-node path (`predicate`, `node_order`) so calls plugin
code directly, with no dispatch through pluggy or a dict per call. The session adds
what no plugin decides: the tie-breaks that make every order total, the node-search
state shared by the actions, and the notes that say why a pod waits.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

from vscheduler.cache import Snapshot
from vscheduler.census import PodCensus
from vscheduler.conf import SchedulerConf
from vscheduler.fit import Unfit
from vscheduler.framework.close import close_session, held_part
from vscheduler.framework.combine import Tiers, combine
from vscheduler.framework.nominations import holding, nominated_pods
from vscheduler.framework.placement import NodeSampling
from vscheduler.framework.queue import PriorityQueue
from vscheduler.framework.results import Event, Eviction, EvictionTerms, SessionResult
from vscheduler.framework.statement import Statement
from vscheduler.guards import EvictionCap
from vscheduler.hookspecs import RULES, Reject
from vscheduler.model import ALLOCATED_STATUSES, Job, Node, Queue, Task, TaskStatus
from vscheduler.resources import Resource
from vscheduler.tally import Part, Tally, kept_tally, kept_value
from vscheduler.topology import Domain, Topology, from_hypernodes

# The hooks that order victims (eviction.victim_order) besides those that offer them.
ORDER_HOOKS = ("task_order", "job_order", "queue_order", "victim_queue_order")

if TYPE_CHECKING:
    from vscheduler.framework.eviction import PlanMemo
    from vscheduler.framework.victim_index import VictimIndex

__all__ = ["Session"]

S = TaskStatus
_PLACED = ALLOCATED_STATUSES | S.PIPELINED  # placed, or waiting to be
_SESSION_COUNTER = itertools.count(1)


def _node_part(node: Node) -> Part:
    return "", (node.allocatable, node.used.clone())


class Session:
    """One session. Plugins read the cluster from its attributes (`hookspecs.SessionView`
    lists them); actions drive it."""

    def __init__(self, snapshot: Snapshot, conf: SchedulerConf, *,
                 default_queue: str = "default", uid: str = "",
                 node_sampling: NodeSampling | None = None, now: float = 0.0) -> None:
        self.uid = uid or f"session-{next(_SESSION_COUNTER)}"
        # The time the session decides at (seconds since the epoch), for timeouts; the
        # daemon's wall clock, or simulate's clock.
        self.now = now
        self.conf = conf
        self.default_queue = default_queue
        self.jobs: dict[str, Job] = snapshot.jobs
        # The jobs that wait for something, in order (Snapshot.waiting): not admitted,
        # or with pods pending. Nothing else has anything for the actions to place.
        self.waiting_jobs: list[Job] = [snapshot.jobs[uid] for uid in snapshot.waiting]
        self.nodes: dict[str, Node] = snapshot.nodes
        self.node_list: list[Node] = list(snapshot.nodes.values())
        # Names of nodes whose tasks changed, in order (see framework.search).
        self.node_changes: list[str] = []
        for position, node in enumerate(self.node_list):
            node.changes = self.node_changes
            node.position = position
        self.queues: dict[str, Queue] = snapshot.queues
        self.priority_classes = snapshot.priority_classes
        self.snapshot = snapshot
        # Each PodDisruptionBudget's allowed disruptions as the session starts, counted
        # once when an eviction first asks (eviction.budget_allowances).
        self.budget_allowances: dict[str, int] | None = None
        # What committed evictions freed for each preemptor's job (by job uid), and the
        # per-job cap on it, built when an eviction first asks (eviction.py).
        self.evicted_for: dict[str, Resource] = {}
        self.eviction_cap: EvictionCap | None = None
        # Victim plans per node, kept until the node changes (eviction.PlanMemo).
        self.plan_memo: PlanMemo | None = None
        # Victim jobs by kind, made when an evicting action first needs it
        # (victim_index.VictimIndex).
        self.victim_index: VictimIndex | None = None
        self.action_index = 0  # the running action's place in the conf's list
        self._warned: set[tuple[str, str, str]] = set()  # (warn_once)
        # The memos kept for the next session, settled once the session is done.
        self.plan_memos: list[PlanMemo] = []
        self.node_specs = snapshot.node_specs
        # The nodes' allocatable and what pods use of it, summed as the session opens
        # (kept between sessions: see vscheduler.tally).
        node_sums = kept_tally(snapshot, "session.nodes", None, 2, _node_part, over="nodes")
        self.total_resource = node_sums.total(0)
        self.total_used = node_sums.total(1)
        # What each queue's jobs hold for good as the session opens (the close's queue
        # figures start from it).
        self.held_at_open = kept_tally(snapshot, "session.held", None, 1, held_part)
        self.action_names = conf.action_names()
        # Node sampling for the actions' node searches, and where the next one starts.
        self.node_sampling = node_sampling or NodeSampling()
        self.node_offset = 0
        self.namespaces = snapshot.namespaces  # (SessionView.namespaces)
        self.topology: Topology | None = None
        if snapshot.hypernodes:
            nodes = {node.name: node.labels for node in self.node_list}
            matched = self.keep("session.topology.matched", tuple(nodes), dict)
            self.topology = self.keep("session.topology", snapshot.topology_key,
                                      lambda: from_hypernodes(snapshot.hypernodes, nodes,
                                                              matched))
        # Pods counted by the terms of inter-pod rules, kept up to date by statements.
        self.census = PodCensus(self)
        self.plugins: dict[str, Any] = {}
        self.result = SessionResult()
        # Why tasks and jobs could not be placed, by uid (framework.close reads them).
        self.task_notes: dict[str, list[str]] = {}
        self.eviction_notes: dict[str, list[str]] = {}
        self.job_notes: dict[str, list[str]] = {}
        # Seconds spent per phase ("open", each action's name, "close"), for metrics and
        # `vscheduler bench`.
        self.timings: dict[str, float] = {}
        # Pending pods nominated to a node, by node: their room is held against pods of
        # lower priority (framework/nominations.py).
        self.nominated = nominated_pods(snapshot.nominated, self.jobs, self.nodes)
        started = time.perf_counter()
        self._open_plugins()
        self.timings["open"] = time.perf_counter() - started

    # ================================================================ plugins

    def _open_plugins(self) -> None:
        """Build every plugin, bind the hooks, then open the plugins in conf order."""
        tiers: dict[str, Tiers] = {}
        for tier_index, tier in enumerate(self.conf.tiers):
            for option in tier:
                plugin = option.cls(option.args)
                self.plugins[option.name] = plugin
                for hook in option.hooks():
                    if option.enabled(hook):
                        per_tier = tiers.setdefault(hook, [[] for _ in self.conf.tiers])
                        per_tier[tier_index].append(getattr(plugin, hook))
        self._bind_hooks(tiers)
        self.on_session_open(self)
        if self.topology is not None:
            for name, problem in self.topology.problems:
                self.event(f"HyperNode/{name}", "Warning", "InvalidTopology", problem)

    def tally(self, name: str, token: Hashable, width: int,
              count: Callable[[Any], Part | None], over: str = "jobs") -> Tally:
        """See `SessionView.tally`."""
        return kept_tally(self.snapshot, name, token, width, count, over)

    def keep(self, name: str, token: Hashable, build: Callable[[], Any]) -> Any:
        """See `SessionView.keep`."""
        return kept_value(self.snapshot, name, token, build)

    def _bind_hooks(self, tiers: dict[str, Tiers]) -> None:
        """Bind every hook by its rule: `self.<hook>` is what the session and actions
        call (the order hooks are `_<hook>`: the session adds the tie-breaks)."""
        bound = {hook: combine(hook, tiers.get(hook, [])) for hook in RULES}
        self.on_session_open = bound["on_session_open"]
        self.on_session_close = bound["on_session_close"]
        self._job_order = bound["job_order"]
        self._queue_order = bound["queue_order"]
        self._task_order = bound["task_order"]
        self._victim_queue_order = bound["victim_queue_order"]
        self.pre_predicate: Callable[[Task], Unfit | None] = bound["pre_predicate"]
        self.predicate: Callable[[Task, Node], Unfit | None] = bound["predicate"]
        if self.nominated:
            self.predicate = holding(self.predicate, self.nominated)
        self.node_order: Callable[[Task, Node], float] = bound["node_order"]
        self._task_signature = bound["task_signature"]
        self.batch_node_order: Callable[[Task, list[Node]], dict[str, float]] = \
            bound["batch_node_order"]
        self.job_valid: Callable[[Job], tuple[str, str] | None] = bound["job_valid"]
        self.job_enqueueable: Callable[[Job], int | Reject] = bound["job_enqueueable"]
        self.job_enqueued: Callable[[Job], None] = bound["job_enqueued"]
        self.job_ready: Callable[[Job], bool] = bound["job_ready"]
        self._job_pipelined = bound["job_pipelined"]
        self.job_starving: Callable[[Job], bool] = bound["job_starving"]
        self.allocatable: Callable[[Queue, Task], str | None] = bound["allocatable"]
        self.overused: Callable[[Queue], str | None] = bound["overused"]
        self.preemptive: Callable[[Queue, Task], str | None] = bound["preemptive"]
        self.preemptable: Callable[[Task, list[Task]], list[Task]] = bound["preemptable"]
        self.reclaimable: Callable[[Task, list[Task]], list[Task]] = bound["reclaimable"]
        self.allocate_event: Callable[[Task], str | None] = bound["allocate_event"]
        self.deallocate_event: Callable[[Task], None] = bound["deallocate_event"]

        def flat(hook: str) -> list[Callable]:
            return [fn for tier in tiers.get(hook, []) for fn in tier]

        # Node searches may be shared by tasks of one signature only if every plugin
        # that judges nodes says what its answers depend on (hookspecs.task_signature);
        # only the judges' signatures count.
        judges = {fn.__self__ for fn in (*flat("predicate"), *flat("node_order"))}
        signers = {fn.__self__ for fn in flat("task_signature")}
        self.shares_searches = judges <= signers
        self._signed = bool(judges & signers)
        if self._signed:
            self._task_signature = combine("task_signature", [
                [fn for fn in tier if fn.__self__ in judges]
                for tier in tiers.get("task_signature", [])])
        self._base_signatures: dict[str, tuple] = {}
        # Waiting jobs are sorted by key only if every plugin that orders jobs gives its
        # order as a key (hookspecs.job_order_key).
        orderers = {fn.__self__ for fn in flat("job_order")}
        self.job_key: Callable[[Job], tuple] | None = None
        if orderers <= {fn.__self__ for fn in flat("job_order_key")}:
            keys = combine("job_order_key", [[fn for fn in tier if fn.__self__ in orderers]
                                             for tier in tiers.get("job_order_key", [])])
            self.job_key = lambda job: (*keys(job), job.creation, job.uid)
        # Victim plans may be shared by preemptors alike only if every plugin that offers
        # victims says what its offers depend on (hookspecs.preemptor_signature).
        offerers = {fn.__self__ for fn in (*flat("preemptable"), *flat("reclaimable"))}
        self.shares_plans = offerers <= {fn.__self__ for fn in flat("preemptor_signature")}
        self._preemptor_signature = combine("preemptor_signature", [
            [fn for fn in tier if fn.__self__ in offerers]
            for tier in tiers.get("preemptor_signature", [])])
        # ... and their refusals of whole gangs shared whatever the preemptor's queue and
        # shape only if every such plugin says it reads nothing else
        # (hookspecs.offers_by_signature).
        self.offers_by_signature: Callable[[], bool] = bound["offers_by_signature"]
        by_signature = [fn for fn in flat("offers_by_signature") if fn.__self__ in offerers]
        self.shares_refusals = self.shares_plans and offerers <= {
            fn.__self__ for fn in by_signature} and all(fn() for fn in by_signature)
        # ... and a gang's verdict shared by gangs alike only if every such plugin says
        # what its answers read of them (hookspecs.victim_signature).
        self.judges_gangs_alike = self.shares_plans and offerers <= {
            fn.__self__ for fn in flat("victim_signature")}
        self._victim_signature = combine("victim_signature", [
            [fn for fn in tier if fn.__self__ in offerers]
            for tier in tiers.get("victim_signature", [])])
        # ... and carried into the next session only if every plugin that offers or
        # orders victims says what else they read (hookspecs.victim_state).
        deciders = offerers | {fn.__self__ for hook in ORDER_HOOKS for fn in flat(hook)}
        self.carries_plans = self.shares_plans and deciders <= {
            fn.__self__ for fn in flat("victim_state")}
        self._victim_state = combine("victim_state", [
            [fn for fn in tier if fn.__self__ in deciders]
            for tier in tiers.get("victim_state", [])])
        self.domain_order: Callable[[Job, Domain], float] = bound["domain_order"]
        self.has_domain_order = bool(flat("domain_order"))
        self.has_batch_node_order = bool(flat("batch_node_order"))
        self.has_node_order = bool(flat("node_order")) or self.has_batch_node_order

    # ================================================================ order

    def job_compare(self, left: Job, right: Job) -> int:
        """Negative if `left` is scheduled before `right`. Ties: older first, then uid
        (`job_ties`)."""
        result = self._job_order(left, right)
        if result:
            return result
        # (`job_ties`' order, compared field by field: no tuples on this hot path)
        if left.creation != right.creation:
            return -1 if left.creation < right.creation else 1
        return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)

    @staticmethod
    def job_ties(job: Job) -> tuple[float, str]:
        """The key `job_compare` ends on where the plugins' orders tie (`PriorityQueue`
        puts jobs in it first). `job_key`, when the plugins give their orders as keys
        (`hookspecs.job_order_key`), is the whole order as a key: it ends on this."""
        return job.creation, job.uid

    def job_less(self, left: Job, right: Job) -> bool:
        return self.job_compare(left, right) < 0

    def job_line(self, jobs: Iterable[Job]) -> PriorityQueue[Job]:
        """`jobs` in line in job order, sorted at once: by `job_key` when the plugins
        give their orders as keys, else compared, put in `job_ties`' order first."""
        return PriorityQueue(self.job_less, jobs, self.job_ties, self.job_key)

    def queue_compare(self, left: Queue, right: Queue) -> int:
        result = self._queue_order(left, right)
        if result:
            return result
        if left.creation != right.creation:
            return -1 if left.creation < right.creation else 1
        return -1 if left.name < right.name else (1 if left.name > right.name else 0)

    def queue_less(self, left: Queue, right: Queue) -> bool:
        return self.queue_compare(left, right) < 0

    def task_compare(self, left: Task, right: Task) -> int:
        """Negative if `left` is placed before `right`. Ties: the index at the end of the
        pod name (`worker-2` before `worker-10`), then older first, then uid."""
        result = self._task_order(left, right)
        if result:
            return result
        li, ri = left.pod.index, right.pod.index
        if li is not None and ri is not None and li != ri:
            return -1 if li < ri else 1
        if left.pod.creation != right.pod.creation:
            return -1 if left.pod.creation < right.pod.creation else 1
        return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)

    def task_less(self, left: Task, right: Task) -> bool:
        return self.task_compare(left, right) < 0

    def victim_queue_less(self, left: Queue, right: Queue, preemptor: Queue) -> bool:
        """Whether victims are taken from `left` before `right`. Ties: the reverse of
        queue order."""
        result = self._victim_queue_order(left, right, preemptor)
        if result:
            return result < 0
        return self.queue_compare(left, right) > 0

    # ================================================================ placement

    def preemptor_signature(self, task: Task) -> tuple | None:
        """What victim plans for preemptor `task` depend on besides the node, or None if
        that is not known (then its plans are its own): what its predicates depend on
        (`task_signature`), its queue, whether it is best-effort, its job when the job
        has tasks placed (they are never its victims, or the only ones within its job),
        and what the plugins that offer victims say."""
        placement = self.task_signature(task)
        if placement is None or not self.shares_plans:
            return None
        job = self.jobs[task.job_id]
        own = job.uid if job.count(_PLACED) else ""
        # (placement, job and queue first: `refusal_signature` keeps what follows them)
        return (placement, own, job.queue, task.best_effort,
                *self._preemptor_signature(task))

    def victim_signature(self, job: Job, tasks: list[Task]) -> tuple | None:
        """What the plugins' answers about `tasks`, every placed task of `job` in key
        order, read of them (`hookspecs.victim_signature`): the job's queue, each
        task's requests and priority, and what the plugins that offer victims say. None
        if some such plugin does not say (then each gang is asked about)."""
        if not self.judges_gangs_alike:
            return None
        keys: dict[int, tuple] = {}  # (a gang's pods mostly share one requests object)
        shapes = []
        for task in tasks:
            key = keys.get(id(task.resreq))
            if key is None:
                key = keys[id(task.resreq)] = task.resreq.key()
            shapes.append((key, task.priority))
        return (job.queue, tuple(shapes), *self._victim_signature(job, tasks))

    def refusal_signature(self, signature: tuple) -> tuple | None:
        """Of a preemptor's signature (`preemptor_signature`), the part a refusal to let
        a victim gang go whole depends on, if plugins say so (`shares_refusals`):
        whether it is best-effort and what the plugins that offer victims say, not its
        placement, job or queue. None: refusals are not shared beyond preemptors alike."""
        return signature[3:] if self.shares_refusals else None

    def victim_state(self) -> tuple | None:
        """What victim plans read besides their nodes, jobs and preemptors: the queues
        and the PodDisruptionBudgets (both by identity: the cache replaces an object
        that changes), the nominated pods (the room they hold: `nominations.py`) and
        what the plugins that offer or order victims say; None if
        some such plugin does not say, a budget without a status has its allowance
        counted from every pod of the cluster, or inter-pod rules are in use, which
        make a node's verdicts depend on pods elsewhere (then plans are not carried
        into the next session)."""
        budgets = self.snapshot.budgets
        if not self.carries_plans or any(b.disruptions_allowed is None for b in budgets):
            return None
        if self.census.in_use():
            return None
        nominated = tuple((name, tuple(t.uid for t in tasks))
                          for name, tasks in sorted(self.nominated.items()))
        return ((tuple(self.queues.items()), nominated), budgets, *self._victim_state())

    def task_signature(self, task: Task) -> tuple | None:
        """What the answers of `predicate` and `node_order` for `task` depend on, or None
        if that is not known (then its node searches are not shared)."""
        if not self.shares_searches:
            return None
        base = self._base_signatures.get(task.uid)
        if base is None:
            pod, req = task.pod, task.resreq
            base = self._base_signatures[task.uid] = (
                req.cpu, req.memory, tuple(sorted(req.scalars.items())),
                tuple(sorted(pod.node_selector.items())),
                None if pod.required_affinity is None else tuple(
                    tuple(term) for term in pod.required_affinity),
                tuple((weight, tuple(term)) for weight, term in pod.preferred_affinity),
                tuple(pod.tolerations), tuple(pod.host_ports))
        if self.nominated:
            # (the room nominated pods hold depends on its priority, and a nominated pod
            # holds nothing against itself)
            base = (base, task.priority, task.uid if task.pod.nominated_node else "")
        if not self._signed:
            return base
        return (base, *self._task_signature(task))

    # ================================================================ jobs

    def job_pipelined(self, job: Job) -> bool:
        return not isinstance(self._job_pipelined(job), Reject)

    # ================================================================ operations

    def statement(self) -> Statement:
        return Statement(self)

    def dispatch(self, task: Task) -> None:
        """The task is decided: it will be bound to its node."""
        self.jobs[task.job_id].update_task_status(task, S.BINDING)
        self.nodes[task.node_name].update_task(task)
        self.result.binds[task.key] = task.node_name

    def record_eviction(self, task: Task, action: str, preemptor: Task | None,
                        terms: EvictionTerms | None = None) -> None:
        by = preemptor.key if preemptor else ""
        terms = terms or EvictionTerms()
        if preemptor is not None:
            self.evicted_for.setdefault(preemptor.job_id, Resource()).add(task.resreq)
        job = self.jobs.get(task.job_id)
        self.result.evictions.append(Eviction(
            task.key, task.node_name, action, by, queue=job.queue if job else "",
            strategy=terms.strategy, elastic=terms.elastic,
            grace_seconds=terms.grace_seconds))
        message = f"Pod is evicted, because of {action}" + (f" for {by}" if by else "")
        if terms.elastic and job is not None:
            message += (f" (an elastic replica: its job keeps at least its minMember "
                        f"{job.min_available})")
        self.event(f"Pod/{task.key}", "Warning", "Evict", message)
        if job is not None and not (job.bare or job.held_only):
            # (and on its PodGroup, as Volcano records it, where `kubectl describe pg`
            # shows why the gang lost pods)
            self.event(f"PodGroup/{job.uid}", "Normal", "Evict", f"Pod {task.key}: {message}")

    def timed_out(self, job: Job, message: str) -> None:
        """`job` passed its scheduleTimeoutSeconds in this session (once per PodGroup)."""
        self.result.timeouts.append(job.uid)
        self.event(f"PodGroup/{job.uid}", "Warning", "ScheduleTimeout", message)

    # ================================================================ reasons

    def event(self, object: str, type: str, reason: str, message: str) -> None:
        self.result.events.append(Event(object, type, reason, message))

    def warn_once(self, object: str, reason: str, message: str) -> None:
        """A Warning about `object` that several decisions of the session may meet (an
        unreadable annotation, say): written once a session."""
        key = (object, reason, message)
        if key not in self._warned:
            self._warned.add(key)
            self.event(object, "Warning", reason, message)

    def explain_task(self, task: Task, message: str) -> None:
        """Why `task` could not be placed (shown while it stays pending)."""
        notes = self.task_notes.setdefault(task.uid, [])
        if message not in notes:
            notes.append(message)

    def explain_eviction(self, task: Task, message: str) -> None:
        """Why evicting for `task` did not place it either (reclaim, preempt): shown
        after why it could not be placed as the cluster is, which says more."""
        notes = self.eviction_notes.setdefault(task.uid, [])
        if message not in notes:
            notes.append(message)

    def explain_job(self, job: Job, message: str) -> None:
        """Why `job` could not be (fully) scheduled (shown on its pending tasks)."""
        notes = self.job_notes.setdefault(job.uid, [])
        if message not in notes:
            notes.append(message)

    # ================================================================ run

    def run(self) -> SessionResult:
        """Run the conf's actions in order, then close."""
        for index, (name, cls, args) in enumerate(self.conf.actions):
            self.plan_memo = None  # plans are shared within an action only
            self.action_index = index
            started = time.perf_counter()
            cls(args).execute(self)
            self.timings[name] = time.perf_counter() - started
        started = time.perf_counter()
        result = self.close()
        self.timings["close"] = time.perf_counter() - started
        return result

    def close(self) -> SessionResult:
        """Close the session (framework.close): phases, reasons, events, queue totals."""
        return close_session(self)

    def release(self) -> None:
        """Drop the plugins and every hook bound to them, once the decisions are applied.
        Plugins keep the session (`self.session`), so without this each session, its
        node copies and the plugins' state would live until the cyclic garbage
        collector happens to run."""
        self.plugins = {}
        self._bind_hooks({})
        self.census = PodCensus(None)  # (the census keeps its session)
        for memo in self.plan_memos:
            memo.settle()
        self.plan_memos = []
