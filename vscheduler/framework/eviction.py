"""Eviction as an API: an action declares its victim policy; this module does the rest.

Reclaim and preempt differ only in what their `VictimPolicy` says: which placed tasks
may be victims, which plugin hook offers them (`reclaimable`, `preemptable`), whether
gangs are kept whole, and what must hold once the victims are gone. From a policy,
`evict_for` derives the candidate nodes (placement's, in node order or best scored
first), the victims on each node in Volcano's victim order, whole-job victims, the plan,
and the step that evicts and pipelines. Plugins say *who may* be evicted; this module
decides *who is*.

Exact: no eviction the preemptor does not need. A pending task first waits on what
earlier evictions of the session already release (a node whose future idle fits it);
only if none does are victims planned, on the candidate nodes (as many as node
sampling finds; every one with sampling off), and the plan that wastes least (GPUs
first, then the other resources) is carried out. On a node, victims go in eviction
order until the preemptor fits (and, for preempt, until its queue has room and every
predicate passes, as Volcano's preempt); then a reprieve pass spares any victim the
later ones made unnecessary.

Gang safety (on by default; the actions' `gangSafeEviction: false` turns it off):
evicting a pod of a gang that would leave the gang with fewer running tasks than its
minMember stops the whole job being useful while it keeps holding the rest of its
resources. So such a victim is taken only together with its whole job, in the same
statement (every task of the job goes, on every node, and all that frees counts), or
not at all. Victims that break no gang are preferred; when gangs must go, of the gangs
that would each make the preemptor fit, the one whose plan after the reprieve the
strategy puts first (so a gang that makes room alone spares the pods taken before it).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cmp_to_key
from typing import TYPE_CHECKING, Any, Literal

from vscheduler.census import ANTI
from vscheduler.framework.fit_index import fit_index
from vscheduler.framework.placement import (
    best_first,
    eviction_candidates,
    judged,
    unresolvable_nodes,
)
from vscheduler.framework.results import EvictionTerms
from vscheduler.framework.strategies import (
    DEFAULT,
    STRATEGIES,
    Strategy,
    cheapest_cover,
    waste_of,
)
from vscheduler.framework.victim_index import gives_only_whole, placed_tasks, victim_index
from vscheduler.guards import (
    DurationArgument,
    EvictionCap,
    allowances,
    charge,
    min_runtime_of,
    split_by_budgets,
    started_at,
    too_young,
)
from vscheduler.model import Job, Node, Task, TaskStatus
from vscheduler.plugin import Argument, ChoiceArgument, LimitArgument
from vscheduler.resources import Resource, gpus_of

if TYPE_CHECKING:
    from vscheduler.fit import Unfit
    from vscheduler.framework.session import Session
    from vscheduler.framework.statement import Statement

__all__ = ["ARGUMENTS", "GANG_SAFE", "UNTIL_QUEUE_HAS_ROOM", "Scope", "VictimPolicy",
           "evict_for", "never_preempts", "plan", "policy_arguments", "victim_order"]

# The arguments of reclaim and preempt: gang-safe eviction can be turned off.
GANG_SAFE = Argument("gangSafeEviction", bool, True,
                     "evict a gang whole or not at all, never below its minMember")
ARGUMENTS = (
    GANG_SAFE,
    Argument("predicateErrorCacheEnable", bool, True, "accepted, as for allocate"),
    DurationArgument("minRuntime", str, 0.0,
                     "a pod runs at least this long (a Go duration, 10m) before it may be "
                     "a victim; its queue's or PodGroup's volcano.sh/min-runtime says "
                     "otherwise; 0, the default, guards nothing"),
    ChoiceArgument("strategy", tuple(STRATEGIES), DEFAULT.name,
                   "which victims go first and which node's plan wins"),
    LimitArgument("maxEvictionRatio", float, 2.0,
                  "evict for one job at most this many times what it asks (GPUs when it "
                  "asks GPUs), beyond its first plan; 0 turns the cap off"),
    LimitArgument("gracePeriodSeconds", int, None,
                  "delete victims with this grace period (at least 1: 0 would delete at "
                  "once, GPUs possibly still held); unset, each pod's own", minimum=1),
)


def policy_arguments(args: Mapping[str, Any]) -> dict[str, Any]:
    """The `VictimPolicy` fields the shared `ARGUMENTS` of an evicting action set."""
    return {"gang_safe": args["gangSafeEviction"], "min_runtime": args["minRuntime"],
            "strategy": STRATEGIES[args["strategy"]],
            "max_eviction_ratio": args["maxEvictionRatio"],
            "grace_seconds": args["gracePeriodSeconds"]}
# preempt's: victims go on until the queue has room too (Volcano's behaviour), or, off,
# only until the preemptor fits the node (the queue then checked once, after).
UNTIL_QUEUE_HAS_ROOM = Argument(
    "evictUntilQueueHasRoom", bool, True,
    "go on evicting until the preemptor's queue has room as well as the node; false "
    "stops at the node and gives it up if the queue is still full")

S = TaskStatus


class Scope(Enum):
    """Whose tasks a preemptor may evict."""

    OTHER_QUEUES = "tasks of other queues that are reclaimable"
    OWN_QUEUE = "tasks of other jobs of the preemptor's queue"
    OWN_JOB = "tasks of the preemptor's own job"


@dataclass(frozen=True, slots=True)
class VictimPolicy:
    """What an evicting action decides; `evict_for` derives the rest from it.

    A victim is a task in one of `statuses`, preemptable (its pod allows it), within
    `scope`, and, with `best_effort_spares_requests`, not a task with requests when the
    preemptor is best-effort. Plugins then offer victims through the `offered_by` hook.
    `gang_safe`: a gang goes whole or not at all. Once the victims are gone the
    preemptor must pass every predicate on the node, and with `queue_must_fit` its
    queue's `allocatable` too; with `until_queue_has_room` as well, victims are taken
    until those pass (Volcano's preempt), not only until the preemptor's resources fit
    the node. `best_node_first`: nodes are tried best scored first,
    else in node order. `action` names the evictions ("reclaim", "preempt").
    `min_runtime` (seconds, the `minRuntime` argument): a pod that has run less is
    no victim, unless its queue or PodGroup says another figure (`guards.py`).
    `strategy` orders a node's victims and ranks the plans (`strategies.py`);
    `max_eviction_ratio` caps what is evicted for one job (`guards.EvictionCap`);
    `grace_seconds` is the victims' grace period (None: each pod's own). `unplaced` is
    what a preemptor for whom no node works is told, unless the cap stopped it (then
    the cap is named); empty, nothing. `idle_is_room`: a preemptor may be pipelined
    onto any node whose idle alone fits it (preempt, as Volcano's); off (reclaim), only
    onto one that also holds pods the policy could evict, or where it needs what
    evictions release: Volcano's reclaim looks only at nodes with pods to evict, and a
    reclaim run before allocate would otherwise pipeline the pod onto an empty node
    session after session, never to be bound. `within`: the names of the only nodes
    to look at (a topology domain: `topology_eviction.py`); None, every node."""

    action: str
    statuses: TaskStatus
    scope: Scope
    offered_by: Literal["reclaimable", "preemptable"]
    gang_safe: bool = True
    best_effort_spares_requests: bool = False
    queue_must_fit: bool = False
    until_queue_has_room: bool = False
    best_node_first: bool = False
    min_runtime: float = 0.0
    strategy: Strategy = field(default=DEFAULT)
    max_eviction_ratio: float = 2.0
    grace_seconds: int | None = None
    unplaced: str = ""
    idle_is_room: bool = True
    within: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.offered_by not in ("reclaimable", "preemptable"):
            raise ValueError(f"victims are offered by 'reclaimable' or 'preemptable', "
                             f"not {self.offered_by!r}")


def never_preempts(task: Task) -> bool:
    """A pod whose preemptionPolicy is Never waits for room; it evicts nobody."""
    return task.pod.preemption_policy == "Never"


def evict_for(session: Session, statement: Statement, policy: VictimPolicy,
              preemptor: Task) -> bool:
    """Make room for `preemptor` and pipeline it, merged into `statement`; False if no
    node works, and then nothing has changed.

    First a node whose future idle (what earlier evictions already release, less what
    is already pipelined there) fits it takes it with no eviction at all: evicting
    again where GPUs are on their way out is how one gang per pending pod would go.
    Only then are victims planned, on candidate nodes in order until node sampling has
    enough plans (`NodeSampling.nodes_to_find`, as allocate counts feasible nodes; every
    node with sampling off), and the plan the strategy ranks first (`Strategy.plan_key`:
    by default the one wasting least, GPUs first, then the other resources) is carried
    out if it keeps the job within its cap; ties keep the node order (best scored first
    with `best_node_first`). Planning on every node of a large cluster for every pod
    that must evict cost a minute a session at 5,000 nodes.

    Within an action, plans are remembered per node for preemptors alike (`PlanMemo`)
    until the node changes, so the next pod of a ReplicaSet plans again only where an
    eviction or a placement happened since (a plan the queue's room decided is not
    remembered: it changes with the queue). Plugins' verdicts may still have changed
    elsewhere: a remembered plan is made again before it is carried out, and if it is
    no longer as good, it goes back in line with what it is now. Plugins that offer
    victims promise, by signing (`hookspecs.preemptor_signature`), that their offers on
    a node do not grow within an action while the node stays as it is."""
    memo = _plans_for(session, policy, preemptor)
    refused = static_refusals(session, preemptor)
    # With no eviction the queue's room is the same on every node: asked once.
    queue_full = policy.queue_must_fit and session.allocatable(
        session.queues[session.jobs[preemptor.job_id].queue], preemptor) is not None
    if not queue_full and _take_room(session, statement, policy, preemptor, refused):
        return True
    found, capped = _plans_in_line(session, policy, preemptor, memo, refused), False
    for node, victims in found:
        if not _within_cap(session, statement, policy, preemptor, victims):
            capped = True
        elif _evict_and_pipeline(session, statement, policy, preemptor, node, victims):
            return True
    if capped:
        session.explain_eviction(preemptor, (
            f"{policy.action}: evicting more for its job would pass maxEvictionRatio "
            f"{policy.max_eviction_ratio:g} times what the job asks"))
    elif policy.unplaced:
        session.explain_eviction(preemptor, policy.unplaced)
    return False


def _take_room(session: Session, statement: Statement, policy: VictimPolicy,
               preemptor: Task, refused: dict[int, Unfit]) -> bool:
    """Pipeline `preemptor` onto a node whose future idle fits it, with no eviction
    (best scored first, or in node order). The fit index (`FitIndex.fitting`) names
    those nodes: in a full cluster, none, without a look at each. `refused`: the static
    refusals known for its signature (`static_refusals`)."""
    req = preemptor.resreq
    within = policy.within
    node_list = session.node_list
    # (copied: the index follows the nodes as pods are pipelined)
    roomy = [node_list[i] for i in fit_index(session).fitting(session, req)]
    if within is not None:
        roomy = [n for n in roomy if n.name in within]
    pool: Iterable[Node] = roomy
    if not policy.idle_is_room:
        eligible = _eligible(session, policy, preemptor)
        pool = (n for n in roomy
                if n.insufficient_now(req) is not None
                or any(eligible(t) for t, _ in n.tasks.values()))
    nodes: Iterable[Node] = eviction_candidates(session, preemptor, pool, refused)
    if policy.best_node_first:
        nodes = best_first(session, preemptor, list(nodes))
    for node in nodes:
        if _evict_and_pipeline(session, statement, policy, preemptor, node, []):
            return True
    return False


def _plans_in_line(session: Session, policy: VictimPolicy, preemptor: Task,
                   memo: Plans, refused: dict[int, Unfit]
                   ) -> Iterator[tuple[Node, list[Task]]]:
    """The plans for `preemptor`, best first (`Strategy.plan_key`, then the node order),
    made on candidate nodes until node sampling has enough, lazily. A remembered plan
    is made again before it is handed out, and goes back in line if it is worse now;
    one that no longer holds gives its place to the next node's."""
    strategy, total = policy.strategy, session.total_resource
    eligible, gives = _victim_rule(session, policy, preemptor, memo)
    # Whether each victim job may go whole: the same on every node until a plan is
    # carried out, so asked once per job here (plugins approving whole gangs dominated
    # the cost of planning node after node); a refusal holds for preemptors alike.
    alike = None
    if session.judges_gangs_alike:
        alike = Alike(session.victim_signature, memo.refused_alike)
    # Nodes found closed by a preemptor sharing these refusals (`Plans.closed`): closed
    # to this one too if it takes nothing from the jobs there the finder took nothing
    # from. (Its own job is no exception: a rule takes from a preemptor's own job only
    # where it takes from no other, and the finder then noted that job as untaken.)
    closed = memo.closed if policy.gang_safe else None
    whole_jobs = WholeJobs(preemptor, session.nodes, eligible, _offer(session, policy),
                           memo.refused, gives, alike, closed)

    def planned(node: Node) -> tuple[Key, list[Task]] | None:
        victims, node_alone = _plan_on_node(session, policy, preemptor, node, whole_jobs)
        plan = (strategy.plan_key(victims, total, _violations(session, victims)), victims) \
            if victims else None
        if node_alone:
            memo.note(node.name, plan)
        else:  # the queue's room was asked: the answer may change with no change here
            memo.by_node.pop(node.name, None)
            memo.planned.discard(node.name)
        return plan

    # The nodes open by the victim index (`_open_nodes`): asked before the walk, or during
    # it once the walk has found enough nodes closed (None: not asked yet, or the
    # index gave no answer).
    holders, index_asked = None, alike is None or not policy.gang_safe
    if not index_asked and _index_pays(session, memo):
        holders, index_asked = _open_nodes(session, whole_jobs), True
    scan = iter(enumerate(_planning_nodes(session, policy, preemptor, memo, refused,
                                          gives, holders)))
    heap: list[tuple[Key, int, Node, list[Task], bool]] = []

    def collect(wanted: int) -> None:
        nonlocal holders, index_asked
        for index, node in scan:
            if not index_asked and _index_pays(session, memo):
                holders, index_asked = _open_nodes(session, whole_jobs), True
            if node.name in memo.by_node:
                plan, fresh = memo.by_node[node.name], False
            elif closed and node.name in closed and not any(map(gives, closed[node.name])):
                memo.by_node[node.name] = None
                continue
            elif holders is not None and node.name not in holders:
                memo.by_node[node.name] = None  # (closed: see `_open_nodes`)
                continue
            else:
                if not policy.best_node_first:  # (best-first nodes are candidates)
                    unfit = judged(session, preemptor, node, refused)
                    if unfit is not None and not unfit.resolvable:
                        memo.by_node[node.name] = None
                        continue
                plan, fresh = planned(node), True
            if plan is not None:
                heapq.heappush(heap, (plan[0], index, node, plan[1], fresh))
                wanted -= 1
                if wanted <= 0:
                    return

    collect(session.node_sampling.nodes_to_find(len(session.node_list)))
    while heap:
        key, index, node, victims, fresh = heapq.heappop(heap)
        if not fresh:  # remembered: made again, and back in line if it is worse now
            again = planned(node)
            if again is None:
                collect(1)
            elif again[0] != key or again[1] != victims:
                heapq.heappush(heap, (again[0], index, node, again[1], True))
            else:
                yield node, victims
            continue
        yield node, victims


def _violations(session: Session, victims: list[Task]) -> int:
    """How many of `victims` would break a disruption budget, as the session's budgets
    stand (`budget_allowances`: an eviction elsewhere charges them, so a plan kept in
    `Plans` may count fewer than now; it is made again before it is carried out)."""
    budgets = session.snapshot.budgets
    if not budgets:
        return 0
    return len(split_by_budgets(victims, budgets, allowed=budget_allowances(session))[0])


def _index_pays(session: Session, memo: Plans) -> bool:
    """Whether to ask the victim index (`_open_nodes`): once it is made, or once
    preemptors sharing these refusals have found an eighth of the nodes closed walking
    them (`Plans.closed`). (It is made once a session, at the cost of a pass over every
    job's pods and a victim signature per gang that gives only whole: it pays where
    walk after walk would find the nodes closed, not where plans are found at once.)"""
    return session.victim_index is not None or \
        len(memo.closed) >= len(session.node_list) // 8


def _open_nodes(session: Session, whole_jobs: WholeJobs) -> set[str] | None:
    """The names of the nodes open to a gang-safe plan for the preemptor of `whole_jobs`
    (`VictimIndex.open_nodes`, with its victim rule, verdicts and refused signatures);
    the others are closed. None when most nodes are open: walking them as node
    sampling asks costs less."""
    assert whole_jobs.gives is not None and whole_jobs.alike is not None
    return victim_index(session).open_nodes(whole_jobs.own_job, whole_jobs.gives,
                                            whole_jobs.get, whole_jobs.alike.refused,
                                            max(len(session.node_list) // 8, 64))


def _planning_nodes(session: Session, policy: VictimPolicy, preemptor: Task,
                    memo: Plans, refused: dict[int, Unfit],
                    gives: Callable[[str], bool],
                    holders: set[str] | None = None) -> Iterable[Node]:
    """The nodes to plan on, best scored first or in node order, less those where a
    preemptor alike found no plan and that have not changed since; within a job, only
    the nodes holding its tasks; with `holders` (`_open_nodes`), only those and the nodes
    with a plan remembered (made again before use). Of the nodes to try best scored
    first, only those holding a pod of a job the rule may take from (`gives`) are
    scored and tried (no plan can be made on the others), though batch scores are
    still taken over all of them, so that the order is what it would be with them
    (`node_scores`)."""
    worth = memo.unsettled(session.node_list)
    if policy.within is not None:
        worth = [n for n in worth if n.name in policy.within]
    if policy.scope is Scope.OWN_JOB:  # no victim where the job has no task
        hosts = {t.node_name for t in session.jobs[preemptor.job_id].tasks_in(
            policy.statuses)}
        memo.by_node.update((n.name, None) for n in worth if n.name not in hosts)
        worth = [n for n in worth if n.name in hosts]
    by_node = memo.by_node
    tried = worth
    if holders is not None:  # the others are closed: no plan there
        tried = [n for n in worth if n.name in holders or by_node.get(n.name) is not None]
    kept = {n.name for n in tried} if len(tried) < len(worth) else None
    if policy.best_node_first:  # scores are judged among the candidates worth a look
        candidates = list(eviction_candidates(session, preemptor, worth, refused)) \
            if tried else []  # (no node to try: none scored)
        giving = [n for n in candidates if (kept is None or n.name in kept)
                  and any(gives(t.job_id) for t, _ in n.tasks.values())]
        if len(giving) < len(worth):
            chosen = {n.name for n in giving}
            by_node.update((n.name, None) for n in worth if n.name not in chosen)
        return best_first(session, preemptor, giving, batch_over=candidates)
    if kept is not None:
        by_node.update((n.name, None) for n in worth if n.name not in kept)
    skip = unresolvable_nodes(session, preemptor)
    return (n for n in tried if n.name not in skip)


def static_refusals(session: Session, preemptor: Task) -> dict[int, Unfit]:
    """The static refusals evicting actions found for tasks of `preemptor`'s signature,
    by node position, kept by the fit index (`FitIndex.static_refusals`) for every
    preemptor of that signature, whatever its queue or action, in this session and the
    next ones: a full cluster's nodes that can never take the pod are judged once, not
    once per preemptor alike and action. (Kept apart from node searches' own: a search
    explains a node by what it finds first, its resources, and must explain alike
    whether or not an eviction judged the node before.) A preemptor that shares no
    searches gets a fresh map."""
    signature = session.task_signature(preemptor)
    if signature is None:
        return {}
    return fit_index(session).static_refusals(session, ("eviction", signature))


Key = tuple[float, ...]  # (Strategy.plan_key)


class Plans:
    """What preemptors alike learnt of the nodes in a session: each node's plan (its
    rank and victims; None: no plan there), forgotten for a node that changes, and the
    victim jobs that may not go whole (`refused`, by uid; shared with the plans of other
    queues and kinds of pod when plugins say: `PlanMemo.refusals`), forgotten when a node
    holding one of their pods changes. (Offers do not grow while the nodes stay as they
    are: a refusal holds; an approval is asked again.)

    Carried into the next session (`PlanMemo.carry`), it keeps only what it knows of
    no plan (`settle` drops the plans): all of it is kept by node position or name,
    none by session objects, so that carrying costs what changed, not a pass over a
    full cluster's nodes."""

    __slots__ = ("_open", "_reopened", "by_node", "clocked", "closed", "planned", "refused",
                 "refused_alike")

    def __init__(self) -> None:
        self.by_node: dict[str, tuple[Key, list[Task]] | None] = {}
        self.planned: set[str] = set()  # the nodes `by_node` holds a plan for
        self.refused: set[str] = set()
        # The victim signatures of gangs the plugins refused whole (`Alike`), until a
        # node changes in the action; shared as `refused` is, never carried.
        self.refused_alike: set[tuple] = set()
        # Nodes closed to a gang-safe plan (`WholeJobs.closed`), each with the uids of
        # its jobs the rule of the preemptor that found it took nothing from: all its
        # other pods are of gangs that may give only whole and are refused whole (in
        # `refused`). So it is closed to any preemptor sharing `refused`, whatever its
        # queue or shape, that takes nothing from those jobs either. Shared as
        # `refused` is, forgotten with the nodes and jobs `refused` forgets, never
        # carried.
        self.closed: dict[str, tuple[str, ...]] = {}
        # A pod was passed over for being younger than its minimum runtime: what was
        # learnt holds for this session's clock only (not carried: `PlanMemo.carry`).
        self.clocked = False
        # The positions of the nodes not known to have no plan, as last listed (None:
        # all), and those forgotten since (`unsettled`).
        self._open: list[int] | None = None
        self._reopened: list[int] = []

    def note(self, name: str, plan: tuple[Key, list[Task]] | None) -> None:
        """The plan on node `name` (None: none there)."""
        self.by_node[name] = plan
        if plan is not None:
            self.planned.add(name)

    def unsettled(self, node_list: list[Node]) -> list[Node]:
        """The nodes of `node_list` (all of the session's, in order) not known to have
        no plan. The list is kept from call to call: a preemptor alike walks only what
        is still open, not every node of a full cluster again."""
        positions: Iterable[int]
        if self._open is None:
            positions = range(len(node_list))
        elif self._reopened:
            positions = sorted(set(self._open).union(self._reopened))
        else:
            positions = self._open
        self._reopened = []
        by_node = self.by_node
        nodes = [n for n in map(node_list.__getitem__, positions)
                 if by_node.get(n.name, n) is not None]
        self._open = [n.position for n in nodes]
        return nodes

    def settle(self) -> None:
        """Keep only what holds of no plan (see `PlanMemo.settle`)."""
        by_node = self.by_node
        for name in self.planned:
            if by_node.get(name) is not None:
                del by_node[name]
        self.planned = set()
        self.refused_alike.clear()
        self.closed.clear()

    def forget(self, node: Node) -> None:
        """What was learnt of `node` no longer holds: it changed."""
        self.by_node.pop(node.name, None)
        if self._open is not None:
            self._reopened.append(node.position)


class PlanMemo:
    """Plans per policy and preemptor signature (`Plans`), kept until their node
    changes: the session's log of changed nodes (`Session.node_changes`) says which.
    A node's plans also go when a job with pods there changed elsewhere (a gang that
    lost a pod on another node may now go whole, or not at all).

    One action's memo is carried into the same action of the next session
    (`plan_memo`), its nodes without a plan and its refused gangs only, when the
    victim state (`Session.victim_state`) is what it was as this action began, the conf
    is the same and nothing changed after that (`unchanged`); the nodes and jobs the
    snapshot copied anew are then forgotten as if they had changed in this session.
    Once its session is done a memo keeps only that (`settle`)."""

    __slots__ = ("alike_refusals", "closed", "conf", "log", "node_specs", "plans",
                 "position", "refusals", "serial", "start", "state", "still")

    def __init__(self, session: Session, state: tuple | None = None) -> None:
        # (not the session itself: a memo kept for the next session must not keep it)
        self.plans: dict[tuple[Any, ...], Plans] = {}
        # Refused gangs shared by the plans of preemptors that differ only in what
        # plugins say their refusals do not read (`Session.refusal_signature`).
        self.refusals: dict[tuple[Any, ...], set[str]] = {}
        self.alike_refusals: dict[tuple[Any, ...], set[tuple]] = {}  # (`Plans.refused_alike`)
        self.closed: dict[tuple[Any, ...], dict[str, tuple[str, ...]]] = {}  # (`Plans.closed`)
        self.position = 0
        self.state = state  # the victim state as the action began; None: not carried
        self.serial = session.snapshot.serial
        self.node_specs = session.node_specs
        self.conf = session.conf
        self.log: list[str] | None = session.node_changes
        self.start = len(session.node_changes)
        self.still = False  # (set by `settle`)

    def unchanged(self) -> bool:
        """Whether no node changed in the session after the action began."""
        return self.still if self.log is None else len(self.log) == self.start

    def settle(self) -> None:
        """The session is over: keep only what `carry` may read (nodes without a plan,
        refused gangs), not the session's nodes and tasks."""
        self.still = self.unchanged()
        self.log = None
        for plans in self.plans.values():
            plans.settle()

    def carry(self, session: Session, kept: PlanMemo) -> None:
        """Take on what `kept` (the last session's memo of this action) learnt that
        still holds in `session`: its nodes without a plan and its refused gangs, less
        the nodes and jobs the snapshot copied anew, and those they touch."""
        snapshot, jobs = session.snapshot, session.jobs
        names = {name for name in snapshot.changed_nodes if name in session.nodes}
        for uid in snapshot.changed_jobs:
            job = jobs.get(uid)
            if job is not None:
                names.update(t.node_name for t in job.tasks.values() if t.node_name)
        stale, touched = _stale(session, names)
        touched.update(snapshot.changed_jobs)
        # Refusals a preemptor passed over for its minimum runtime helped learn hold for
        # its session's clock only: no plans sharing them are carried, since their nodes
        # without a plan may rest on them.
        clocked = {id(p.refused) for p in kept.plans.values() if p.clocked}
        self.refusals = {key: refused for key, refused in kept.refusals.items()
                         if id(refused) not in clocked}
        # (refusals by signature end with their session: the sets are kept, emptied,
        # only so that plans carried and new ones go on sharing them)
        for alike in kept.alike_refusals.values():
            alike.clear()
        self.alike_refusals = kept.alike_refusals
        for closed in kept.closed.values():
            closed.clear()
        self.closed = kept.closed
        for key, plans in kept.plans.items():
            if plans.clocked or id(plans.refused) in clocked:
                continue  # (what it learnt from such refusals, its nodes without a plan too)
            # (taken over, not copied: `kept` is done with; settled again in case its
            # session ended without `settle`, a failed one, say)
            plans.settle()
            self.plans[key] = plans
            plans.refused.difference_update(touched)
            for node in stale:
                plans.forget(node)

    def plans_for(self, session: Session, policy: VictimPolicy,
                  signature: tuple[Any, ...]) -> Plans:
        changes = session.node_changes
        self.position = min(self.position, len(changes))  # (a probe's log is undone)
        if self.position < len(changes):
            changed, jobs = _stale(session, set(changes[self.position:]))
            self.position = len(changes)
            names = [node.name for node in changed]
            for plans in self.plans.values():
                for node in changed:
                    plans.forget(node)
                plans.refused.difference_update(jobs)
                plans.refused_alike.clear()
                for name in names:
                    plans.closed.pop(name, None)
        key = (policy, *signature)
        plans = self.plans.get(key)
        if plans is None:
            plans = self.plans[key] = Plans()
            shared = session.refusal_signature(signature)
            if shared is not None:  # (refusals shared beyond preemptors alike)
                plans.refused = self.refusals.setdefault((policy, *shared), plans.refused)
                plans.refused_alike = self.alike_refusals.setdefault(
                    (policy, *shared), plans.refused_alike)
                plans.closed = self.closed.setdefault((policy, *shared), plans.closed)
        return plans


def _stale(session: Session, names: set[str]) -> tuple[list[Node], set[str]]:
    """The changed nodes, and every node holding a pod of a job with pods on one; and
    those jobs."""
    nodes, jobs = session.nodes, session.jobs
    stale = set(names)
    touched: set[str] = set()
    for name in names:
        node = nodes.get(name)
        if node is None:
            continue
        for task, _ in node.tasks.values():
            job = jobs.get(task.job_id)
            if job is not None and job.uid not in touched:
                touched.add(job.uid)
                stale.update(t.node_name for t in job.tasks.values() if t.node_name)
    return [nodes[name] for name in sorted(stale) if name in nodes], touched


def _plans_for(session: Session, policy: VictimPolicy, preemptor: Task) -> Plans:
    """What preemptors alike (`Session.preemptor_signature`) learnt in this action;
    for a preemptor no other is known to be alike, a fresh `Plans` kept nowhere."""
    signature = session.preemptor_signature(preemptor)
    if signature is None:
        return Plans()
    if session.plan_memo is None:
        session.plan_memo = plan_memo(session)
    return session.plan_memo.plans_for(session, policy, signature)


def plan_memo(session: Session) -> PlanMemo:
    """A new memo for the running action, carrying what the same action learnt in the
    last session if that still holds (`PlanMemo`); kept for the next session."""
    state = session.victim_state()
    memo = PlanMemo(session, state)
    name = f"framework.plan-memo.{session.action_index}"
    kept = session.snapshot.kept.pop(name, None)
    if state is None:
        return memo
    if (isinstance(kept, PlanMemo) and kept.state == state and kept.conf is session.conf
            and session.snapshot.base and kept.serial == session.snapshot.base
            and kept.node_specs == session.node_specs and kept.unchanged()):
        memo.carry(session, kept)
    session.snapshot.kept[name] = memo
    session.plan_memos.append(memo)
    return memo


def _within_cap(session: Session, statement: Statement, policy: VictimPolicy,
                preemptor: Task, victims: list[Task]) -> bool:
    """Whether evicting `victims` for `preemptor` keeps its job within the cap: what the
    session committed for the jobs counted with it, what `statement` holds for them,
    and the plan (`guards.EvictionCap`)."""
    if policy.max_eviction_ratio <= 0:
        return True
    if session.eviction_cap is None:
        session.eviction_cap = EvictionCap(session.jobs.values(), session.total_resource)
    cap, jobs = session.eviction_cap, session.jobs
    job = jobs[preemptor.job_id]
    key = cap.key(job)
    members = cap.members.get(key, [job.uid])
    evicted = Resource()
    for uid in members:
        if uid in session.evicted_for:
            evicted.add(session.evicted_for[uid])
    member_set = set(members)
    for victim, by in statement.evictions():
        if by is not None and by.job_id in member_set:
            evicted.add(victim.resreq)
    plan = Resource()
    for victim in victims:
        plan.add(victim.resreq)
    return cap.allows(job, evicted, plan, policy.max_eviction_ratio)


def plan(session: Session, policy: VictimPolicy, preemptor: Task,
         node: Node) -> list[Task] | None:
    """What `policy` would evict on `node` for `preemptor` (resources only; nothing is
    changed), or None if no choice of victims there makes it fit."""
    return _plan_on_node(session, policy, preemptor, node, WholeJobs(
        preemptor, session.nodes, _eligible(session, policy, preemptor),
        _offer(session, policy), set()))[0]


def _eligible(session: Session, policy: VictimPolicy, preemptor: Task,
              memo: Plans | None = None) -> Callable[[Task], bool]:
    """The policy's victim rule for `preemptor`, as one test per task (`_victim_rule`)."""
    return _victim_rule(session, policy, preemptor, memo)[0]


def _victim_rule(session: Session, policy: VictimPolicy, preemptor: Task,
                 memo: Plans | None = None
                 ) -> tuple[Callable[[Task], bool], Callable[[str], bool]]:
    """The policy's victim rule for `preemptor`, as one test per task, and the part of
    it that holds for a whole job (given its uid: False if no pod of the job may be a
    victim). Never a victim: a protected pod (its own annotation, read into
    `Task.preemptable`) or a pod of a protected PodGroup, and a pod younger than its
    minimum runtime (noted in `memo`: what it learns then holds only for now)."""
    jobs, queues = session.jobs, session.queues
    statuses, scope = policy.statuses, policy.scope
    own_job = preemptor.job_id
    own_queue = jobs[own_job].queue
    spare_requests = policy.best_effort_spares_requests and preemptor.best_effort
    argument, now = policy.min_runtime, session.now
    # Job uid -> the minimum runtime of its pods if they may be victims, else None: the
    # same for every pod of a job (this runs per candidate per node).
    runtimes: dict[str, float | None] = {}

    def job_runtime(uid: str) -> float | None:
        job = jobs.get(uid)
        if job is None or job.spec.protected:
            return None
        queue = queues.get(job.queue)
        if scope is Scope.OWN_JOB:
            if uid != own_job:
                return None
        elif scope is Scope.OWN_QUEUE:
            if job.queue != own_queue or uid == own_job:
                return None
        elif job.queue == own_queue or queue is None or not queue.reclaimable:
            return None
        if job.spec.min_runtime_problem is not None:
            session.warn_once(f"PodGroup/{job.uid}", "InvalidMinRuntime",
                              job.spec.min_runtime_problem)
        elif queue is not None and queue.min_runtime_problem is not None \
                and job.spec.min_runtime is None:  # (else the PodGroup's says it)
            session.warn_once(f"Queue/{queue.name}", "InvalidMinRuntime",
                              queue.min_runtime_problem)
        return min_runtime_of(argument, queue.min_runtime if queue else None,
                              job.spec.min_runtime)

    def eligible(victim: Task) -> bool:
        if not (victim.status & statuses and victim.preemptable):
            return False
        if spare_requests and not victim.best_effort:
            return False
        uid = victim.job_id
        if uid in runtimes:
            runtime = runtimes[uid]
        else:
            runtime = runtimes[uid] = job_runtime(uid)
        if runtime is None:
            return False
        if too_young(started_at(victim.pod), now, runtime):
            if memo is not None:
                memo.clocked = True
            return False
        return True

    def gives(uid: str) -> bool:
        if uid in runtimes:
            return runtimes[uid] is not None
        runtime = runtimes[uid] = job_runtime(uid)
        return runtime is not None

    return eligible, gives


def victim_order(session: Session, victims: list[Task], preemptor: Task) -> list[Task]:
    """Victims in eviction order (Volcano's): within a job, the task it would place last
    goes first; within a queue, the job it would schedule last; across queues, the
    queue the victim queue order puts first."""
    if len(victims) < 2:
        return list(victims)
    jobs, queues = session.jobs, session.queues
    preemptor_queue = queues[jobs[preemptor.job_id].queue]

    def compare(left: Task, right: Task) -> int:
        left_job, right_job = jobs[left.job_id], jobs[right.job_id]
        if left_job is right_job:
            return -session.task_compare(left, right)
        if left_job.queue == right_job.queue:
            result = session.job_compare(left_job, right_job)
            return -result if result else -session.task_compare(left, right)
        left_queue, right_queue = queues[left_job.queue], queues[right_job.queue]
        if session.victim_queue_less(left_queue, right_queue, preemptor_queue):
            return -1
        if session.victim_queue_less(right_queue, left_queue, preemptor_queue):
            return 1
        return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)

    return sorted(victims, key=cmp_to_key(compare))


def _fits(need: Resource, available: Resource) -> bool:
    return need.first_insufficient(available) is None


def _take_victims(
    session: Session,
    preemptor: Task,
    node: Node,
    victims: list[Task],
    gang_safe: bool,
    whole_job: Callable[[Job], list[Task] | None],
    room: Callable[[list[Task]], bool] | None,
    plan_key: Callable[[list[Task]], tuple],
) -> list[Task] | None:
    """The tasks to evict so that `preemptor` fits on `node` (resources, and `room` of
    the chosen tasks when given: the queue's room, say), taken from `victims` (already
    in eviction order, all on `node`), or None if they cannot make it fit. With
    `gang_safe`, a victim whose gang would drop below minMember is taken only with its
    whole job, as `whole_job(job)` gives it (None: the job cannot be evicted whole);
    of the gangs that would each complete the plan, the one whose plan, after the
    reprieve, `plan_key` puts first (the strategy's: fewest victims, or least waste),
    then the least wasteful gang. Last, a reprieve: a victim (or whole gang) that the
    later ones made unnecessary is spared, the last taken first, so nothing is evicted
    the plan does not need."""
    jobs = session.jobs
    need = preemptor.resreq

    def enough(available: Resource, tasks: list[Task]) -> bool:
        return _fits(need, available) and (room is None or room(tasks))

    # What is taken, as units evicted together (one task, or a whole gang), each with
    # what it frees on this node.
    units: list[tuple[list[Task], Resource]] = []
    available = node.future_idle()
    singles = _singles(session, preemptor, victims, gang_safe)
    for victim in singles:
        if enough(available, _tasks_of(units)):
            break
        units.append(([victim], victim.resreq))
        available.add(victim.resreq)

    if not enough(available, _tasks_of(units)):
        # Whole gangs: what each would free here, and in all.
        single_keys = {t.key for t in singles}
        breakers = [v for v in victims if v.key not in single_keys]
        chosen_keys = {t.key for t in _tasks_of(units)}
        options: dict[str, tuple[list[Task], Resource, tuple[float, float]]] = {}
        for victim in breakers:
            if victim.job_id in options:
                continue
            tasks = whole_job(jobs[victim.job_id])
            if not tasks:
                continue
            tasks = [t for t in tasks if t.key not in chosen_keys]
            here = Resource()
            total = Resource()
            for task in tasks:
                total.add(task.resreq)
                if task.node_name == node.name:
                    here.add(task.resreq)
            options[victim.job_id] = (tasks, here,
                                      waste_of(total, session.total_resource))
        while options and not enough(available, _tasks_of(units)):
            sufficient = [uid for uid, (tasks, here, _) in options.items()
                          if enough(available.clone().add(here), _tasks_of(units) + tasks)]
            if len(sufficient) > 1:
                plans = {uid: plan_key(_reprieve(
                    _with_gang(units, uid, *options[uid][:2]),
                    available.clone().add(options[uid][1]), enough)) for uid in sufficient}
                pick = min(sufficient, key=lambda uid: (plans[uid], options[uid][2]))
            elif sufficient:
                pick = min(sufficient, key=lambda uid: options[uid][2])  # least waste
            else:
                pick = max(options, key=lambda uid: waste_of(options[uid][1],
                                                              session.total_resource))
            tasks, here, _ = options.pop(pick)
            available.add(here)
            units = _with_gang(units, pick, tasks, here)
        if not enough(available, _tasks_of(units)):
            return None
    return _reprieve(units, available, enough)


def _tasks_of(units: list[tuple[list[Task], Resource]]) -> list[Task]:
    return [t for tasks, _ in units for t in tasks]


def _with_gang(units: list[tuple[list[Task], Resource]], uid: str, tasks: list[Task],
               here: Resource) -> list[tuple[list[Task], Resource]]:
    """`units` with job `uid`'s `tasks` (freeing `here` on the node) added as one unit:
    its pods taken one by one before go with it, so that the reprieve does not spare
    a part of a gang evicted whole."""
    unit_tasks, unit_here = list(tasks), here.clone()
    kept = []
    for unit in units:
        if unit[0][0].job_id == uid:
            unit_tasks[:0] = unit[0]
            unit_here.add(unit[1])
        else:
            kept.append(unit)
    return [*kept, (unit_tasks, unit_here)]


def _reprieve(units: list[tuple[list[Task], Resource]], available: Resource,
              enough: Callable[[Resource, list[Task]], bool]) -> list[Task]:
    """The tasks of `units` less those the units taken after them made unnecessary
    (the last taken is looked at first), `available` being what all of them leave."""
    spared: set[int] = set()
    for index in reversed(range(len(units))):
        spared.add(index)
        without = available.clone().sub(units[index][1])
        if enough(without, [t for i, (tasks, _) in enumerate(units) if i not in spared
                            for t in tasks]):
            available = without
        else:
            spared.discard(index)
    return [t for i, (tasks, _) in enumerate(units) if i not in spared for t in tasks]


def _singles(session: Session, preemptor: Task, victims: list[Task],
             gang_safe: bool) -> list[Task]:
    """The victims that may go one by one, in order: with `gang_safe`, a job gives up
    only the tasks it has above its minMember (its elastic replicas)."""
    jobs = session.jobs
    counts: dict[str, int] = {}
    singles = []
    for victim in victims:
        job = jobs[victim.job_id]
        # Breaking a gang leaves it with some tasks but fewer than its minimum; taking
        # its last one evicts it whole. (A task taking the place of a task of its own
        # job leaves the job no smaller.)
        remaining = job.live_ready_num() - counts.get(job.uid, 0) - 1
        if (gang_safe and victim.job_id != preemptor.job_id
                and 0 < remaining < job.min_available):
            continue
        singles.append(victim)
        counts[job.uid] = counts.get(job.uid, 0) + 1
    return singles


def _cheapest_singles(session: Session, preemptor: Task, node: Node, victims: list[Task],
                      gang_safe: bool,
                      room: Callable[[list[Task]], bool] | None) -> list[Task] | None:
    """The cheapest set of victims that break no gang and make room for `preemptor` on
    `node` (`strategies.cheapest_cover`), or None (then victims are taken in order)."""

    def suffices(chosen: list[Task]) -> bool:
        return _could_fit(preemptor, node, chosen) and (room is None or room(chosen))

    short = max(gpus_of(preemptor.resreq) - gpus_of(node.future_idle()), 0.0)
    return cheapest_cover(session, _singles(session, preemptor, victims, gang_safe),
                          suffices, short)


def _could_fit(task: Task, node: Node, victims: list[Task]) -> bool:
    """Whether evicting `victims` would make room for `task` on `node` (resources only)."""
    available = node.future_idle()
    for victim in victims:
        available.add(victim.resreq)
    return task.resreq.first_insufficient(available) is None


def _whole_job(job: Job, nodes: Mapping[str, Node], eligible: Callable[[Task], bool],
               approve: Callable[[list[Task]], list[Task]],
               alike: Alike | None = None) -> list[Task] | None:
    """Every task of `job` placed on one of `nodes` (`placed_tasks`), if each is
    `eligible` and plugins `approve` them all as victims (asked in a fixed order); else
    None: evicting only some would leave the gang broken. With `alike`, plugins are
    asked once per victim signature."""
    placed = placed_tasks(job, nodes)
    if not placed:
        return None
    signature = alike.signature(job, placed) if alike is not None else None
    if signature is not None and signature in alike.refused:
        return None  # (whatever the tasks' eligibility)
    if not all(eligible(t) for t in placed):
        return None
    if signature is not None and signature in alike.approved:
        return placed
    approved = {t.key for t in approve(placed)} == {t.key for t in placed}
    if signature is not None:
        (alike.approved if approved else alike.refused).add(signature)
    return placed if approved else None


class Alike:
    """Whole-gang verdicts by victim signature (`Session.victim_signature`): gangs
    that agree on it get alike answers, so one is asked for all. Approvals hold for
    one preemptor's plans, as `WholeJobs.approved`; refusals for preemptors alike
    until a node changes in the action (`Plans.refused_alike`)."""

    __slots__ = ("approved", "refused", "signature")

    def __init__(self, signature: Callable[[Job, list[Task]], tuple | None],
                 refused: set[tuple]) -> None:
        self.signature = signature
        self.refused = refused
        self.approved: set[tuple] = set()


# What a job may give a gang-safe plan (`WholeJobs.closed`).
_GIVES_NOTHING, _GIVES_SINGLES, _WHOLE_ONLY = range(3)


class WholeJobs:
    """Which victim jobs may go whole for one preemptor (`get`, by `_whole_job`: each
    placed task `eligible`, all of them approved by `offer`), asked once per job:
    approvals for this preemptor only, as long as nothing is evicted; refusals also for
    preemptors alike (`Plans.refused`, shared). With `gives` (the job part of the victim
    rule: `_victim_rule`), also which nodes are closed to it (`closed`); with `alike`,
    asked once per victim signature (`Alike`). The preemptor's own job gives it tasks
    one by one and is never judged by signature."""

    __slots__ = ("_kinds", "alike", "approved", "closed_nodes", "eligible", "gives",
                 "nodes", "offer", "own_job", "preemptor", "refused")

    def __init__(self, preemptor: Task, nodes: Mapping[str, Node],
                 eligible: Callable[[Task], bool],
                 offer: Callable[[Task, list[Task]], list[Task]], refused: set[str],
                 gives: Callable[[str], bool] | None = None,
                 alike: Alike | None = None,
                 closed_nodes: dict[str, tuple[str, ...]] | None = None) -> None:
        self.preemptor = preemptor
        self.nodes = nodes  # (the session's: a pod elsewhere is not evicted)
        self.eligible = eligible
        self.offer = offer  # (the plugins' hook, as `_offer` gives it)
        self.approved: dict[str, list[Task]] = {}
        self.refused = refused
        self.gives = gives
        # (plugins read more of the preemptor's own job than its signature says)
        self.alike = alike
        self.own_job = preemptor.job_id
        self._kinds: dict[str, int] = {}  # job uid -> what it may give (`closed`)
        # where to note the nodes found closed (`Plans.closed`)
        self.closed_nodes = closed_nodes

    def closed(self, node: Node, jobs: Mapping[str, Job]) -> bool:
        """Whether every pod on `node` is of a job closed to a gang-safe plan: one the
        rule takes nothing from, or a gang with more than one pod placed but no more
        than its minMember (not the preemptor's own job), so that each of its pods
        would break it, that may not go whole (`get`). Then no plan can be made
        there: `_plan_on_node` would find no pod to take alone and no gang to take
        whole. Judged per job, asked once per job (a full cluster's nodes hold a few
        gangs each), not per pod. False without `gives`."""
        gives = self.gives
        if gives is None:
            return False
        kinds = self._kinds
        gangs: dict[str, Job] = {}  # (asked last: asking costs most)
        untaken: dict[str, None] = {}  # (jobs the rule takes nothing from, in order)
        for task, _ in node.tasks.values():
            uid = task.job_id
            kind = kinds.get(uid)
            if kind is None:
                job = jobs.get(uid)
                if not gives(uid) or job is None:
                    kind = kinds[uid] = _GIVES_NOTHING
                elif uid == self.own_job or not gives_only_whole(job):
                    kind = kinds[uid] = _GIVES_SINGLES
                else:
                    kind = kinds[uid] = _WHOLE_ONLY
            if kind == _GIVES_SINGLES:
                return False
            if kind == _WHOLE_ONLY:
                gangs[uid] = jobs[uid]
            else:
                untaken[uid] = None
        if not all(self.get(job) is None for job in gangs.values()):
            return False
        if self.closed_nodes is not None:
            self.closed_nodes[node.name] = tuple(untaken)
        return True

    def _approve(self, placed: list[Task]) -> list[Task]:
        return self.offer(self.preemptor, placed)

    def get(self, job: Job) -> list[Task] | None:
        """Every placed task of `job`, if it may go whole for the preemptor; else None."""
        uid = job.uid
        if uid in self.refused:
            return None
        tasks = self.approved.get(uid)
        if tasks is None:
            tasks = _whole_job(job, self.nodes, self.eligible, self._approve,
                               self.alike if uid != self.own_job else None)
            if tasks is None:
                self.refused.add(uid)
                return None
            self.approved[uid] = tasks
        return tasks


def _plan_on_node(session: Session, policy: VictimPolicy, preemptor: Task, node: Node,
                  whole_jobs: WholeJobs) -> tuple[list[Task] | None, bool]:
    """What to evict on `node` for `preemptor` (None: nothing works there), and whether
    that answer is the node's alone (False when the queue's room was asked, which may
    change with no change to the node): the node's `eligible` tasks, in eviction order,
    as plugins offer them, in the strategy's order, those that break no disruption
    budget first; the strategy's cheapest set of them (`exact_cover`), else as
    `_take_victims` takes them. `whole_jobs` holds the victim rule and the offer, and
    keeps which victim jobs may go whole (`WholeJobs`)."""
    eligible, whole_job, offer = whole_jobs.eligible, whole_jobs.get, whole_jobs.offer
    jobs = session.jobs
    if preemptor.resreq.first_insufficient(node.allocatable) is not None:
        return None, True  # (it would not fit the node empty: plugins not asked)
    if policy.gang_safe and whole_jobs.closed(node, jobs):
        return None, True
    candidates = [t for t, _ in node.tasks.values() if eligible(t)]
    if not candidates or not _could_fit(preemptor, node, candidates):
        return None, True  # (evicting every candidate would not do: plugins not asked)
    if policy.gang_safe and not _singles(session, preemptor, candidates, True) and all(
            whole_job(jobs[uid]) is None for uid in {t.job_id: None for t in candidates}):
        # Every candidate would break its gang and no gang may go whole: whatever the
        # plugins offer here, no plan (`_take_victims` takes singles or whole gangs).
        return None, True
    # Plugins see candidates in eviction order: their running sums depend on it.
    candidates = victim_order(session, candidates, preemptor)
    victims = offer(preemptor, candidates)
    if not victims or not _could_fit(preemptor, node, victims):
        return None, True
    # Plugins keep the candidates' order, or are put back in it; then the strategy's.
    position = {t.key: i for i, t in enumerate(candidates)}
    victims = sorted(victims, key=lambda t: position.get(t.key, len(position)))
    victims = policy.strategy.order(victims, session.total_resource)
    budgets = session.snapshot.budgets
    sparing = victims
    if budgets:  # kube-scheduler's rule: victims that break no budget go first
        violating, sparing = split_by_budgets(victims, budgets,
                                              allowed=budget_allowances(session))
        victims = sparing + violating
    asked: list[bool] = []
    room = _room(session, policy, preemptor, node, asked) \
        if (policy.queue_must_fit and policy.until_queue_has_room) \
        or _reads_other_pods(session, preemptor) else None

    if policy.strategy.exact_cover:
        # the cheapest set among victims that break no budget, else among all
        for among in (sparing, victims) if len(sparing) < len(victims) else (victims,):
            chosen = _cheapest_singles(session, preemptor, node, among, policy.gang_safe,
                                       room)
            if chosen is not None:
                return chosen, not asked
    total = session.total_resource
    return (_take_victims(session, preemptor, node, victims, policy.gang_safe, whole_job,
                          room, lambda plan: policy.strategy.plan_key(plan, total)),
            not asked)


def _offer(session: Session, policy: VictimPolicy
           ) -> Callable[[Task, list[Task]], list[Task]]:
    """The plugins' hook that offers victims under `policy`, as the session combines it."""
    return session.reclaimable if policy.offered_by == "reclaimable" \
        else session.preemptable


def budget_allowances(session: Session) -> dict[str, int]:
    """Each PodDisruptionBudget's allowed disruptions: counted once a session (a budget
    without a status counts the cluster's pods), then charged for every victim the
    session evicts (`_evict_and_pipeline`), so later plans see what is left. (A job's
    evictions its statement discards stay charged: budgets then err on the safe side.)"""
    if session.budget_allowances is None:
        placed = (task for node in session.node_list for task, _ in node.tasks.values())
        session.budget_allowances = allowances(session.snapshot.budgets, placed)
    return session.budget_allowances


def _room(session: Session, policy: VictimPolicy, preemptor: Task, node: Node,
          asked: list[bool]) -> Callable[[list[Task]], bool]:
    """Whether, with the given victims gone, the preemptor's queue is `allocatable`
    (with `queue_must_fit`) and every predicate passes on `node`: tried in a statement
    that is then discarded. Each question is noted in `asked`."""
    queue = session.queues[session.jobs[preemptor.job_id].queue]

    def room(victims: list[Task]) -> bool:
        asked.append(True)
        mark = len(session.node_changes)
        step = session.statement()
        for victim in victims:
            step.evict(victim, policy.action, preemptor)
        passes = (not policy.queue_must_fit or session.allocatable(queue, preemptor) is None) \
            and session.predicate(preemptor, node) is None
        _undo(session, step, mark)
        return passes

    return room


def _reads_other_pods(session: Session, preemptor: Task) -> bool:
    """Whether the preemptor's predicates read the pods on the node beyond their room:
    it has inter-pod rules, or pods on the nodes carry a required anti-affinity (which
    may refuse it). Victims are then taken until every predicate passes, not only until
    its resources fit: the pod its anti-affinity refuses may not be the first victim."""
    return preemptor.pod.inter_pod is not None or any(
        role == ANTI for role, _, _ in session.census.owner_terms())


def _undo(session: Session, step: Statement, mark: int) -> None:
    """Discard `step`, made since the session's node change log was `mark` long, and
    forget the changes it logged: the nodes are as they were, and plans kept for them
    still hold. (Nothing searched nodes in between, so no search has read the log
    past `mark`.)"""
    step.discard()
    del session.node_changes[mark:]


def _evict_and_pipeline(session: Session, statement: Statement, policy: VictimPolicy,
                        preemptor: Task, node: Node, victims: list[Task]) -> bool:
    """Evict `victims` and pipeline `preemptor` onto `node`, as one step merged into
    `statement`, if with the victims gone the preemptor's queue has room (when the policy
    asks) and every predicate passes; else nothing of the step remains. Each victim
    goes on the policy's terms (strategy, grace period) and is marked elastic when its
    job keeps at least its minMember running (`_elastic`)."""
    mark = len(session.node_changes)
    step = session.statement()
    elastic = _elastic(session, preemptor, victims)
    for victim in victims:
        step.evict(victim, policy.action, preemptor, EvictionTerms(
            policy.strategy.name, victim.key in elastic, policy.grace_seconds))
    if policy.queue_must_fit:
        queue = session.queues[session.jobs[preemptor.job_id].queue]
        passes = session.allocatable(queue, preemptor) is None
    else:
        passes = True
    if not passes or session.predicate(preemptor, node) is not None or step.pipeline(
            preemptor, node) is not None:
        _undo(session, step, mark)
        return False
    statement.merge(step)
    budgets = session.snapshot.budgets
    if victims and budgets:  # what later plans may still take from each budget
        allowed = budget_allowances(session)
        for victim in victims:
            charge(allowed, budgets, victim)
    return True


def _elastic(session: Session, preemptor: Task, victims: list[Task]) -> set[str]:
    """The keys of `victims` that are elastic replicas: their job has more replicas than
    its minMember, and still runs at least minMember once all of `victims` are gone
    (seed 000: an elastic job shrinks before any gang breaks)."""
    jobs = session.jobs
    going: dict[str, int] = {}
    for victim in victims:
        going[victim.job_id] = going.get(victim.job_id, 0) + 1
    elastic = set()
    for victim in victims:
        job = jobs[victim.job_id]
        if (victim.job_id != preemptor.job_id and job.min_available < len(job.tasks)
                and job.live_ready_num() - going[job.uid] >= job.min_available):
            elastic.add(victim.key)
    return elastic
