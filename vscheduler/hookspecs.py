"""The plugin API: every extension point a plugin may implement, in one module.

A plugin is a class with a `name`, its `arguments` (see `vscheduler.plugin`), and
methods marked `@hookimpl` whose names and parameter names are those below; pluggy checks
them when the plugin is loaded, so a misspelt hook or parameter is an error at start,
not a silent no-op. Register it in your distribution's `pyproject.toml`::

    [project.entry-points."vscheduler.plugins"]
    my-plugin = "my_package.module:MyPlugin"

A fresh instance is built for every session, in conf order; then every plugin's
`on_session_open` receives the session, typed as `SessionView` below (what a plugin may
read and call): keep it on `self` and read the cluster from it (`session.jobs`,
`session.nodes`, `session.queues`, ...). Hooks are then called by the session, which
combines the answers of all plugins tier by tier, as Volcano does. Each hook below is
declared with its `Rule`, which says how: the rules are written once, in `Rule`, and the
session binds every hook through `RULES` (framework/combine.py holds the code).

Each hook except the session and event hooks can be turned off per plugin in the conf
with Volcano's flag (`enableJobOrder: false`, ...), listed in `ENABLE_FLAGS`.

Hooks on the per-task-per-node path (`predicate`, `node_order`) are called once per
candidate node: keep them free of allocation and lookups you could do at session open.
Implement `task_signature` too: it tells the session which tasks your answers treat
alike, so that it can match them against the nodes once (see that hook).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pluggy

if TYPE_CHECKING:
    from vscheduler.census import PodCensus
    from vscheduler.fit import Unfit
    from vscheduler.framework.results import SessionResult
    from vscheduler.model import Job, Node, PriorityClass, Queue, Task
    from vscheduler.resources import Resource
    from vscheduler.tally import Part, Tally
    from vscheduler.topology import Domain, Topology

__all__ = ["ABSTAIN", "ENABLE_FLAGS", "PERMIT", "RULES", "Reject", "Rule", "SessionView",
           "hookimpl", "hookspec"]

PROJECT = "vscheduler"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

PERMIT = 1
ABSTAIN = 0


class Reject:
    """A vote against, with the reason users will read."""

    __slots__ = ("reason",)

    def __init__(self, reason: str = "") -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"Reject({self.reason!r})"


# A vote: PERMIT, ABSTAIN, or a Reject carrying its reason.
Vote = int | Reject


class Rule(enum.Enum):
    """How the session combines the plugins' answers to one hook. "In conf order" is
    tier by tier, and within a tier the order the conf lists the plugins; a plugin whose
    hook is turned off by its enable flag is not asked."""

    SESSION = "every plugin is called, in conf order; nothing is combined"
    ORDER = ("the first plugin, in conf order, with a non-zero answer decides; when every "
             "plugin answers 0 (or none has the hook), the session's tie-break does")
    FIRST_REFUSAL = ("every plugin must pass (answer None); the first other answer, in "
                     "conf order, is the session's answer and later plugins are not asked")
    VOTE = ("a vote (PERMIT, ABSTAIN or Reject): in the first tier where some plugin does "
            "not abstain, a Reject wins, else it is PERMIT; when all abstain, PERMIT")
    VICTIMS = ("victims are intersected across the plugins of a tier (None abstains; an "
               "empty list ends the tier's answer, and an empty intersection starts it "
               "anew with the next plugin's list); the first tier with victims decides; "
               "else no victims")
    SUM = "the scores are summed (none: 0)"
    SUM_BY_NODE = "the scores are summed node by node (none: no scores)"
    ALL = "every plugin must answer true (none: true)"
    FIRST_TIER = ("the first tier that has the hook decides, and all of its plugins must "
                  "answer true (none: false)")
    NOTIFY = ("every plugin is told, in conf order; the last non-empty answer (an "
              "allocation refused) is the session's answer")
    SIGNATURE = ("the answers of the plugins that judge (nodes: `predicate`, `node_order`; "
                 "victims: `preemptable`, `reclaimable`; and for `victim_state` the "
                 "victim and order hooks too; jobs' order: `job_order`) are collected, "
                 "in conf order")


# hook name -> its rule, filled in by `_spec` below, hook by hook.
RULES: dict[str, Rule] = {}

_Spec = TypeVar("_Spec", bound=Callable[..., Any])


def _spec(rule: Rule) -> Callable[[_Spec], _Spec]:
    """Declare a hook and the rule its answers are combined by."""
    def declare(fn: _Spec) -> _Spec:
        RULES[fn.__name__] = rule
        return hookspec(fn)
    return declare


class SessionView(Protocol):
    """What a plugin may read and call on its session (`on_session_open`'s argument).

    Read the cluster from these; change jobs and nodes only as `on_session_open` says.
    """

    uid: str  # the session's name, stamped on the conditions it sets
    now: float  # the time the session decides at (seconds since the epoch)
    default_queue: str
    jobs: dict[str, Job]
    nodes: dict[str, Node]
    node_list: list[Node]
    node_changes: list[str]  # names of the nodes whose pods changed this session, in order
    queues: dict[str, Queue]
    priority_classes: dict[str, PriorityClass]
    # Namespaces' labels by name, read only (see `matching.namespace_labels`)
    namespaces: Mapping[str, Mapping[str, str]]
    node_specs: Any  # changes whenever a node's labels or allocatable change
    total_resource: Resource  # the nodes' allocatable, summed
    total_used: Resource  # what pods on the nodes use, summed, as the session opened
    action_names: list[str]  # the conf's actions, in order
    result: SessionResult  # what the session reports (a plugin adds its own figures)
    # The network topology gangs are placed by (`vscheduler.topology`): the HyperNodes'
    # tree, or None without any. A plugin may set one at open (one built from node
    # labels, say) where the cluster has no HyperNodes.
    topology: Topology | None
    # Pods on the nodes counted by the terms of inter-pod affinity, anti-affinity and
    # topology spread (`vscheduler.census`), kept up to date as pods move.
    census: PodCensus

    def event(self, object: str, type: str, reason: str, message: str) -> None:
        """Record a Kubernetes Event (`object` is `Kind/namespace/name`)."""

    def explain_task(self, task: Task, message: str) -> None:
        """Say why `task` could not be placed (shown while it stays pending)."""

    def explain_job(self, job: Job, message: str) -> None:
        """Say why `job` could not be (fully) scheduled (shown on its pending tasks)."""

    def timed_out(self, job: Job, message: str) -> None:
        """`job` passed its scheduleTimeoutSeconds in this session."""

    def tally(self, name: str, token: Hashable, width: int,
              count: Callable[[Any], Part | None], over: str = "jobs") -> Tally:
        """Sums per key (a queue, say) of what each job (or node, `over="nodes"`) gives,
        kept from session to session under `name` and brought up to date with what
        changed: see `on_session_open` and `vscheduler.tally`."""

    def keep(self, name: str, token: Hashable, build: Callable[[], Any]) -> Any:
        """What `build()` gives, kept from session to session under `name` while `token`
        is the same (`session.node_specs` for what follows from the nodes' specs). Treat
        it as read-only."""


# hook name -> the conf flag that turns it off for one plugin (Volcano's spellings).
ENABLE_FLAGS: dict[str, str] = {
    "job_order": "enableJobOrder",
    "job_order_key": "enableJobOrder",
    "queue_order": "enableQueueOrder",
    "task_order": "enableTaskOrder",
    "pre_predicate": "enablePredicate",
    "predicate": "enablePredicate",
    "node_order": "enableNodeOrder",
    "batch_node_order": "enableNodeOrder",
    "domain_order": "enabledHyperNodeOrder",
    "job_ready": "enableJobReady",
    "job_pipelined": "enableJobPipelined",
    "job_enqueueable": "enableJobEnqueued",
    "job_enqueued": "enableJobEnqueued",
    "job_starving": "enableJobStarving",
    "allocatable": "enabledAllocatable",
    "overused": "enabledOverused",
    "preemptive": "enablePreemptive",
    "preemptable": "enablePreemptable",
    "reclaimable": "enableReclaimable",
}


# --------------------------------------------------------------------------- session


@_spec(Rule.SESSION)
def on_session_open(session: SessionView) -> None:
    """The session is open and the snapshot is in place: build per-session state here.

    Sessions share unchanged objects: a snapshot hands the last session's copy of a job
    or node on to the next one when neither the cache nor that session changed it. So:

    - change jobs and nodes only through the session (statements) or their methods
      (`Job.update_task_status`, `Node.add_task`, ...), which mark them `dirty`; a
      plugin that sets a field itself must set `dirty = True` too (a job's conditions
      excepted: `Job.set_condition` says why), also within a statement: a discard
      leaves a job clean only if nothing but the statement marked it;
    - what you derive from a job at open (sums over its pods, say) may be kept in
      `job.memo[your plugin's name]` and reused by the next session while the job copy
      is the same: a copy made anew starts with an empty memo (so does a copy handed on
      with a new phase, the close's). Store beside it what else the figure depends on
      (`session.node_specs` for the nodes' labels and capacity, your arguments) and
      compare. Figures kept on `node.memo` must depend only on the node's labels and
      allocatable, which never change for a Node object;
    - sums over every job (per queue, over the cluster) need not be counted again at
      every open: `session.tally(name, token, width, count)` keeps each job's part
      (`count(job)` gives its key and amounts) and the sums per key between sessions,
      and at open takes away and adds back the parts of the jobs that changed. A part
      must follow from the job copy and `token` alone (put your arguments and
      `session.node_specs` in the token if it reads them), and not from the job's
      `priority`, which every snapshot sets again without copying the job anew.
    """


@_spec(Rule.SESSION)
def on_session_close(session: SessionView) -> None:
    """All actions ran; set job conditions or export figures here."""


# --------------------------------------------------------------------------- order


@_spec(Rule.ORDER)
def job_order(left: Job, right: Job) -> int:
    """Negative if `left` should be scheduled before `right`, positive if after, 0 if this
    plugin has no opinion. Ties are broken by PodGroup creation time, then uid."""


@_spec(Rule.SIGNATURE)
def job_order_key(job: Job) -> Any:
    """`job_order` as a key: a value that compares between jobs as `job_order` does
    (less when `job_order` answers negative, equal when 0), read of the job as it is
    now; so the plugin's keys must all be comparable with one another (no NaN, no None
    beside numbers: `(True, 0.0)` for "last", say). Turned off with `job_order` by
    enableJobOrder. When every plugin that orders jobs gives one, waiting jobs are
    sorted by the tuple of their keys in conf order, then creation and uid, with no
    plugin call per comparison: 20,000 waiting jobs cost over 100,000 calls of
    `job_order` a session otherwise. (Jobs pushed back in line are still placed by
    `job_order`: the two must agree.) A plugin with `job_order` but no `job_order_key`
    turns this off (correct, slower)."""


@_spec(Rule.ORDER)
def queue_order(left: Queue, right: Queue) -> int:
    """Negative if `left` should be served before `right`; 0 for no opinion."""


@_spec(Rule.ORDER)
def task_order(left: Task, right: Task) -> int:
    """Negative if task `left` should be placed before `right` (within one job)."""


@_spec(Rule.ORDER)
def victim_queue_order(left: Queue, right: Queue, preemptor_queue: Queue) -> int:
    """Negative if victims should be taken from `left` before `right`. Ties: the
    reverse of queue order (the queue served last gives first)."""


# --------------------------------------------------------------------------- placement


@_spec(Rule.FIRST_REFUSAL)
def pre_predicate(task: Task) -> Unfit | None:
    """None if the task may be placed at all, else why not (checked once per task)."""


@_spec(Rule.FIRST_REFUSAL)
def predicate(task: Task, node: Node) -> Unfit | None:
    """None if `task` may run on `node`, else why not. Resources are checked by the
    actions before this is asked. Mark a refusal `Unfit(..., static=True)` when it
    follows from the node's spec (labels, taints, unschedulable, allocatable) and what
    `task_signature` covers alone, never from pods on the node, the task's queue or
    queue figures: node searches and evicting actions then keep it from session to
    session until the node changes, for every task of that signature, and do not ask
    again."""


@_spec(Rule.SUM)
def node_order(task: Task, node: Node) -> float:
    """A score for placing `task` on `node` (higher is better)."""


@_spec(Rule.SIGNATURE)
def task_signature(task: Task) -> Hashable:
    """What this plugin's `predicate` and `node_order` answers for `task` depend on,
    besides the node and the task's resources, node selector, node affinity,
    tolerations and host ports (None: nothing else). Tasks that agree on all of it
    share node searches within an action, which is what keeps a session fast on large
    clusters: a gang's identical pods, or many jobs of the same shape, are matched
    against the nodes once, and afterwards only the nodes that changed are looked at
    again. Return everything else the answers read: annotations, the queue and what it
    has used, and so on. A plugin with `predicate` or `node_order` but no
    `task_signature` turns the sharing off for every task (correct, slower)."""


@_spec(Rule.SUM_BY_NODE)
def batch_node_order(task: Task, nodes: list[Node]) -> dict[str, float]:
    """Scores for several candidate nodes at once, by node name, for scorers that
    normalise over the candidates."""


@_spec(Rule.SUM)
def domain_order(job: Job, domain: Domain) -> float:
    """A score for placing `job`'s pending gang within topology domain `domain` (a
    HyperNode; higher is better), asked before the gang is tried there: allocate tries
    a tier's domains best first and keeps the first that holds the gang. Read only the
    domain's nodes as they are and the job: the answer must not change while they do
    not."""


# --------------------------------------------------------------------------- jobs


@_spec(Rule.FIRST_REFUSAL)
def job_valid(job: Job) -> tuple[str, str] | None:
    """None if the job may be scheduled at all, else (reason, message)."""


@_spec(Rule.VOTE)
def job_enqueueable(job: Job) -> Vote:
    """May this Pending job be admitted (Inqueue)? PERMIT, ABSTAIN or Reject(reason)."""


@_spec(Rule.NOTIFY)
def job_enqueued(job: Job) -> None:
    """The job was admitted: count its minimum resources as in the queue."""


@_spec(Rule.ALL)
def job_ready(job: Job) -> bool:
    """Has the job enough tasks placed for its allocations to be committed?"""


@_spec(Rule.VOTE)
def job_pipelined(job: Job) -> Vote:
    """Is the job placed or waiting on releasing resources enough to keep its
    statement? PERMIT, ABSTAIN or Reject(reason)."""


@_spec(Rule.FIRST_TIER)
def job_starving(job: Job) -> bool:
    """Does the job still need resources (so it may reclaim or preempt for them)?"""


# --------------------------------------------------------------------------- queues


@_spec(Rule.FIRST_REFUSAL)
def allocatable(queue: Queue, task: Task) -> str | None:
    """None if `queue` may take `task`'s resources now, else the reason it may not."""


@_spec(Rule.FIRST_REFUSAL)
def overused(queue: Queue) -> str | None:
    """A reason if `queue` has used its share (it gets nothing more this action), else
    None."""


@_spec(Rule.FIRST_REFUSAL)
def preemptive(queue: Queue, task: Task) -> str | None:
    """None if `queue` may reclaim resources for `task`, else the reason it may not."""


# --------------------------------------------------------------------------- victims


@_spec(Rule.VICTIMS)
def preemptable(preemptor: Task, candidates: list[Task]) -> list[Task] | None:
    """Which of `candidates` (same queue) `preemptor` may evict; None to abstain."""


@_spec(Rule.VICTIMS)
def reclaimable(reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
    """Which of `candidates` (other queues) `reclaimer` may evict; None to abstain."""


@_spec(Rule.SIGNATURE)
def preemptor_signature(task: Task) -> Hashable:
    """What this plugin's `preemptable` and `reclaimable` answers for preemptor `task`
    depend on, besides the candidates and the task's queue, requests and placement
    constraints (None: nothing else): its job's priority or share, say. Preemptors that
    agree on all of it share victim plans, node by node, until the node changes (a
    plan is made again before it is carried out): the pending pods of a ReplicaSet, or
    many one-pod jobs of one shape, plan once instead of once each. Signing also
    promises that, within an action, the offers on a node do not grow while the node
    stays as it is (they may shrink: evictions elsewhere bring a queue back to its
    share). A plugin with a victim hook but no `preemptor_signature` turns the sharing
    off (correct, slower)."""


@_spec(Rule.ALL)
def offers_by_signature() -> bool:
    """Whether this plugin's `preemptable` and `reclaimable` answers about the pods of
    a job other than the preemptor's read nothing of the preemptor but what its
    `preemptor_signature` says: not its queue, requests, placement constraints or job.
    When every plugin that offers victims says so, a victim gang refused whole in an
    action is refused for every preemptor that agrees on the signatures, whatever its
    queue and shape: on a full cluster, the reclaimers of several queues ask about
    each gang once, not once per queue and kind of pod. A plugin without the hook is
    taken to read them (correct, slower)."""


@_spec(Rule.SIGNATURE)
def victim_signature(job: Job, tasks: list[Task]) -> Hashable:
    """What this plugin's `preemptable` and `reclaimable` answers about `tasks`, every
    placed task of `job` in key order (a gang asked whether it may go whole, never the
    preemptor's own job), read of them and of the job besides the job's queue and each
    task's requests and priority (None: nothing else): its priority, what it holds, how
    many of its tasks are ready, say; of the job and its tasks alone, nothing that
    changes with other jobs (the session keeps each job's signature until a node with
    its pods changes: `framework.victim_index`). Two gangs that agree on it for every
    plugin that offers victims must get alike answers (the tasks at the same places
    offered) from a preemptor, so that a full cluster's thousands of gangs of a few
    shapes are asked about once per shape, not once each, until a node changes in the
    action. A plugin with a victim hook but no `victim_signature` turns this off
    (correct, slower)."""


@_spec(Rule.SIGNATURE)
def victim_state() -> Hashable:
    """What this plugin's `preemptable` and `reclaimable` offers and its task, job and
    queue orders read besides the candidates, their jobs and nodes, the queues' specs
    and the preemptor's signature (None: nothing else): the cluster's total, what each
    queue holds and deserves. Asked as an evicting action begins. A node where no
    victim plan worked is not planned on again in the next session while it and the
    jobs with pods on it stay as they were, the action changed nothing after it began,
    and every plugin's state is the same: a full cluster whose pending pods can evict
    nobody then costs little session after session. A plugin with a victim or order
    hook but no `victim_state` carries nothing over (correct, slower)."""


# --------------------------------------------------------------------------- events


@_spec(Rule.NOTIFY)
def allocate_event(task: Task) -> str | None:
    """`task` was allocated or pipelined in the session (not yet committed). Update
    accounting; return an error message to refuse the placement (it is rolled back)."""


@_spec(Rule.NOTIFY)
def deallocate_event(task: Task) -> None:
    """`task` was evicted, or its allocation or pipelining rolled back."""
