"""Placing a gang by network topology (`vscheduler.topology`): allocate's path for a job
whose PodGroup asks for one (`spec.networkTopology`).

A gang limited to tier T is tried in the domains of tier T and below, lowest tier first
(the closest placement that holds it wins over a wider one), and within a tier in the
order of the plugins' `domain_order` scores, best first, then by name. The first domain
where the whole gang gets ready (or pipelined) takes it; each failed try is a dry run,
discarded. This is Volcano's choice (it tries every domain of the tier and keeps the
best scored that worked) at the cost of trying until the first success: the scores are
asked before the gang is placed, so the best scored that works is the first that works.

A domain is tried only if its nodes' free room, summed, could hold what the gang still
needs (`DomainRoom`): most domains of a busy cluster are passed by without a try.

A job with pods already placed stays near them: it is tried only within the widest
domain around them that its tier allows (Volcano's rule); one whose pods already span a
wider domain waits, saying so. Soft mode asks for the top tier: the smallest domain that
holds the gang first, and the whole cluster last, so it is never refused for topology.

A job with a hard limit below the top (`confined`) is left to allocate by backfill, and
reclaim and preempt make room for it within one domain (`topology_eviction.py`), so no
action places a pod of one outside its domain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from vscheduler.fit import NodeFitErrors
from vscheduler.framework.queue import PriorityQueue
from vscheduler.framework.statement import Statement
from vscheduler.model import ALLOCATED_STATUSES, Job, Node, Queue, Task, TaskStatus
from vscheduler.resources import Resource
from vscheduler.specs import NetworkTopology
from vscheduler.topology import Domain, Topology

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["PLACED", "DomainRoom", "allocate_by_topology", "around", "confined", "domain_errors",
           "explain_not_ready", "gang_request", "groups_confined", "least_request",
           "search_root", "try_domains"]

PLACED = ALLOCATED_STATUSES | TaskStatus.PIPELINED

# (session, job, queue, its tasks, the domain to place them in or None: anywhere) ->
# the statement if the job got ready or pipelined (else it is discarded and None)
Place = Callable[["Session", Job, Queue, PriorityQueue[Task], Domain | None], Statement | None]


def confined(session: Session, job: Job) -> bool:
    """Whether `job` must stay within a domain below the top (a hard limit that
    resolves to a lower tier, its own or a sub-group's), or waits, with every job that
    asks for a topology, for the tree to be mended: backfill leaves it to allocate, and
    reclaim and preempt evict for it only within a domain (`topology_eviction`)."""
    return _below_top(session, job.spec.network_topology) or groups_confined(session, job)


def groups_confined(session: Session, job: Job) -> bool:
    """Whether a sub-group of `job` must stay within a domain below the top."""
    return any(_below_top(session, policy.network_topology) for policy in job.spec.sub_groups)


def _below_top(session: Session, wanted: NetworkTopology | None) -> bool:
    topology = session.topology
    if topology is None or wanted is None:
        return False
    if not topology.ready:
        return True
    limit = topology.limit(wanted)
    return limit is not None and limit < topology.max_tier


def allocate_by_topology(session: Session, job: Job, queue: Queue,
                         tasks: PriorityQueue[Task], place: Place,
                         room: DomainRoom) -> Statement | None:
    """Place `job`'s tasks within one domain its topology allows (see the module)."""
    topology = session.topology
    assert topology is not None
    if not topology.ready:  # (every job with a networkTopology waits, as in Volcano)
        explain_not_ready(session, job)
        return None
    limit = topology.limit(job.spec.network_topology)
    if limit is None:
        return place(session, job, queue, tasks, None)
    root = search_root(session, job)
    if root is None:
        return None

    notes = list(session.job_notes.get(job.uid, ()))

    def attempt(domain: Domain) -> Statement | None:
        # This domain's reasons only, as a fresh try: what an abandoned try said (a
        # pod "can possibly be assigned" in a domain not taken) would mislead.
        job.fit_errors = {}
        session.job_notes[job.uid] = list(notes)
        for task in tasks:
            task.last_transaction = None
        trial = tasks.copy()
        statement = place(session, job, queue, trial,
                          None if domain is topology.top else domain)
        if statement is not None and statement.operations:
            tasks.adopt(trial)
            return statement
        if statement is not None:  # (ready already, and nothing placed here)
            statement.discard()
        return None

    placed = any(t.node_name for t in job.tasks_in(PLACED))
    lacking, least = gang_request(job)
    return try_domains(session, job, topology.candidates(root, limit), limit,
                       placed, lacking, least, room, attempt)


def try_domains(session: Session, job: Job, groups: list[list[Domain]], limit: int,
                placed: bool, lacking: int, least: Resource, room: DomainRoom,
                attempt: Callable[[Domain], Statement | None], who: str = "the gang"
                ) -> Statement | None:
    """The statement of the first domain, of `groups` in order (lowest tier first, best
    scored first within a tier, then by name), where `attempt` works; None, with the job
    told why, if none does. A domain too small in free room for `least` (what the
    `lacking` pods still needed ask at the least) is not tried, unless some of the pods
    are `placed` already (what they hold is not free room, yet is theirs)."""
    tried = False
    for group in groups:
        ranked = [d for d in group if placed or room.may_hold(d, least)]
        if len(ranked) > 1 and session.has_domain_order:
            scores = {d.name: session.domain_order(job, d) for d in ranked}
            ranked.sort(key=lambda d: (-scores[d.name], d.name))
        for domain in ranked:
            tried = True
            statement = attempt(domain)
            if statement is not None:
                return statement
    if not groups:
        session.explain_job(job, f"no HyperNode of tier {limit} or lower exists")
    elif not tried:
        session.explain_job(job, (
            f"no HyperNode of tier {limit} or lower has free room for the {lacking} "
            f"pod{'s' if lacking != 1 else ''} {who} still needs"))
    return None


def explain_not_ready(session: Session, job: Job) -> None:
    """Why a job asking for a topology waits while the tree cannot be used."""
    assert session.topology is not None
    problems = "; ".join(why for _, why in session.topology.problems)
    session.explain_job(job, f"HyperNodes are not ready for scheduling: {problems}")


def search_root(session: Session, job: Job) -> Domain | None:
    """Where `job`'s gang may go: the top for a job with nothing placed, else the
    widest domain around its placed pods that its tier allows; None (and the job told
    why) if its pods already span a wider one."""
    topology = session.topology
    assert topology is not None
    limit = topology.limit(job.spec.network_topology)
    placed = [t.node_name for t in job.tasks_in(PLACED) if t.node_name]
    return around(session, job, placed, limit, "its pods")


def around(session: Session, job: Job, placed: list[str], limit: int | None,
           whose: str) -> Domain | None:
    """The widest domain within tier `limit` around the nodes `placed` (the top for
    none); None, with the job told why, if they already span a wider one."""
    topology = session.topology
    assert topology is not None
    held = topology.holding(placed) if placed and limit is not None else None
    if held is None:  # (nothing placed on a node the cluster has)
        return topology.top
    assert limit is not None
    widest = topology.widest_allowed(held, limit)
    if widest is None:
        session.explain_job(job, (
            f"{whose} already span HyperNode {held.name} of tier {held.tier}, above the "
            f"highest tier allowed ({limit})"))
    return widest


def domain_errors(domain: Domain, errors: NodeFitErrors) -> NodeFitErrors:
    """`errors` headed by the domain they were found in (Volcano's words)."""
    headed = errors.copy()
    headed.error = (f"In hyperNode {domain.name}: 0/{len(domain.nodes)} nodes are "
                    "available")
    return headed


def gang_request(job: Job) -> tuple[int, Resource]:
    """`least_request` for `job`'s pending tasks, as short as the gang is of ready."""
    return least_request(job.tasks_in(TaskStatus.PENDING),
                         job.min_available - job.ready_task_num())


def least_request(pending: Iterable[Task], short: int) -> tuple[int, Resource]:
    """How many of the `pending` tasks a gang `short` of ready still needs (one at
    least), and a floor under what they ask: each counted at the smallest request among
    the pending (per resource)."""
    pending = list(pending)
    if not pending:
        return 0, Resource()
    smallest = pending[0].resreq.clone()
    for task in pending[1:]:
        request = task.resreq
        smallest.cpu = min(smallest.cpu, request.cpu)
        smallest.memory = min(smallest.memory, request.memory)
        smallest.scalars = {name: min(amount, request.scalars.get(name, 0.0))
                            for name, amount in smallest.scalars.items()}
    lacking = min(max(short, 1), len(pending))
    total = Resource()
    for _ in range(lacking):
        total.add(smallest)
    return lacking, total


class DomainRoom:
    """The free room of each domain (what its nodes' future idle adds up to), counted
    when first asked and then kept up to date from the session's log of changed nodes."""

    def __init__(self, session: Session, topology: Topology) -> None:
        self.session = session
        self.topology = topology
        self.sums: dict[str, Resource] = {}
        self.counted: dict[str, Resource] = {}  # node -> its future idle as counted
        self.position = len(session.node_changes)

    def may_hold(self, domain: Domain, request: Resource) -> bool:
        """Whether `request` fits in `domain`'s free room, summed (a floor: the gang may
        still not fit node by node)."""
        return request.first_insufficient(self.room(domain)) is None

    def room(self, domain: Domain) -> Resource:
        self._refresh()
        total = self.sums.get(domain.name)
        if total is None:
            total = self.sums[domain.name] = Topology.summed(
                domain, self.session.nodes, self._count)
        return total

    def _count(self, node: Node) -> Resource:
        counted = self.counted.get(node.name)
        if counted is None:
            counted = self.counted[node.name] = node.future_idle()
        return counted

    def _refresh(self) -> None:
        changes = self.session.node_changes
        if self.position >= len(changes):
            self.position = len(changes)
            return
        nodes, containing = self.session.nodes, self.topology.containing
        for name in dict.fromkeys(changes[self.position:]):
            old = self.counted.pop(name, None)
            node = nodes.get(name)
            if old is None or node is None:
                continue  # (never counted: no sum holds it yet)
            new = self._count(node)
            for domain in (*containing.get(name, ()), self.topology.top):
                total = self.sums.get(domain.name)
                if total is not None:
                    total.sub(old).add(new)
        self.position = len(changes)
