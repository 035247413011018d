"""Evicting for a gang that must sit within one topology domain (reclaim and preempt).

Room freed anywhere is no use to a gang limited to a rack: it needs one rack with room
for all of it. So for such a job (`topology_placement.confined`) the action's own pass
over the job's pods (`Attempt`: each pending pod evicts what it needs, `evict_for`) is
made once per candidate domain, as a dry run with the nodes narrowed to the domain's
(`VictimPolicy.within`), and the domain where the job gets pipelined with the fewest
evictions is chosen (ties: the lower tier, then by name); that pass is then made for
real. Within a domain the eviction strategy, gang safety, guards and caps apply as
everywhere (`vscheduler.framework.eviction`).

Candidates are the domains of the allowed tiers (around the job's placed pods, if it has
any) whose nodes offer at least what the gang still needs, at most `MAX_DOMAINS` of
them, fullest of free room first: the domains closest to holding the gang already.
A dry run charges nothing: disruption budgets are as they were before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from vscheduler.framework.eviction import VictimPolicy
from vscheduler.framework.statement import Statement
from vscheduler.framework.topology_placement import (
    confined,
    gang_request,
    groups_confined,
    search_root,
)
from vscheduler.model import Job, Node
from vscheduler.resources import Resource
from vscheduler.topology import Domain, Topology

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["MAX_DOMAINS", "evict_for_job", "evict_within_domain"]

# Domains tried per job: each try plans evictions for the whole gang.
MAX_DOMAINS = 16

# The action's pass over a job's pending pods, evicting into the statement with the
# policy given; afterwards the session says whether the job is pipelined.
Attempt = Callable[[Statement, VictimPolicy], None]


def evict_for_job(session: Session, policy: VictimPolicy, job: Job,
                  attempt: Attempt) -> None:
    """Make room for `job` by `attempt`, its action's pass over the job's pods, and keep
    it only if the job is then pipelined: within one domain for a job confined to one
    (`evict_within_domain`), else on any node."""
    if groups_confined(session, job):
        # (where each group would go is allocate's search, group by group: room freed
        # for the job as a whole would not say which group's domain it serves)
        session.explain_job(job, (
            f"{policy.action}: no evictions for a job whose sub-groups have a hard "
            "network topology"))
        return
    if confined(session, job):
        evict_within_domain(session, policy, job, attempt)
        return
    statement = session.statement()
    attempt(statement, policy)
    if session.job_pipelined(job):
        statement.commit()
    else:
        statement.discard()


def evict_within_domain(session: Session, policy: VictimPolicy, job: Job,
                        attempt: Attempt) -> None:
    """Make room for `job` within the one domain where it takes fewest evictions, and
    commit it if the job is then pipelined (see the module)."""
    if session.topology is None or not session.topology.ready:
        return  # (the job waits for the tree to be mended: allocate says so)
    chosen = _cheapest_domain(session, policy, job, attempt)
    if chosen is None:
        session.explain_job(job, (
            f"{policy.action}: no HyperNode the job's topology allows frees room for "
            "the whole gang"))
        return
    statement = session.statement()
    attempt(statement, replace(policy, within=frozenset(chosen.nodes)))
    if session.job_pipelined(job):
        statement.commit()
    else:
        statement.discard()


def _cheapest_domain(session: Session, policy: VictimPolicy, job: Job,
                     attempt: Attempt) -> Domain | None:
    topology = session.topology
    if topology is None or not topology.ready:
        return None
    root = search_root(session, job)
    limit = topology.limit(job.spec.network_topology)
    if root is None or limit is None:
        return None
    _, need = gang_request(job)
    nodes = session.nodes
    offered: list[tuple[Domain, Resource]] = []
    for group in topology.candidates(root, limit):
        for domain in group:
            if domain is topology.top:
                continue
            total = Topology.summed(domain, nodes, lambda node: node.allocatable)
            if need.first_insufficient(total) is None:
                offered.append((domain, Topology.summed(domain, nodes, Node.future_idle)))
    # Fullest of free room first (by the share of the need it already covers), then
    # the lower tier, then by name.
    offered.sort(key=lambda pair: (-_covered(need, pair[1]), pair[0].tier, pair[0].name))
    best: tuple[tuple[int, int, str], Domain] | None = None
    for domain, _ in offered[:MAX_DOMAINS]:
        allowances = dict(session.budget_allowances or {}) \
            if session.budget_allowances is not None else None
        statement = session.statement()
        attempt(statement, replace(policy, within=frozenset(domain.nodes)))
        if session.job_pipelined(job):
            cost = (len(statement.evictions()), domain.tier, domain.name)
            if best is None or cost < best[0]:
                best = (cost, domain)
        statement.discard()
        session.budget_allowances = allowances
    return best[1] if best is not None else None


def _covered(need: Resource, free: Resource) -> float:
    """How much of `need` `free` covers, on the scarcest resource (0..1)."""
    shares = [min(free.get(name) / amount, 1.0)
              for name in need.names() if (amount := need.get(name)) > 0]
    return min(shares, default=1.0)
