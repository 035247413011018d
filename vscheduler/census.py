"""Pods on a session's nodes, counted by the pod affinity terms that pick them: what
inter-pod affinity, anti-affinity and topology spread read (`vscheduler.inter_pod`).

Counting a term's pods over a cluster of 40,000 for every pending pod and every node
would cost far more than placing them. The census counts each term once, when first
asked, per node (`TermCount`), and the session's statements keep every count up to date
as they place, evict and roll back pods (`moved`). Each change is logged, so that the
sums per topology domain built on the counts (`DomainTotals`) take in only the changes.

It also keeps the other side of a rule: the pods on the nodes that carry terms of their
own ("owners": existing pods' required anti-affinity keeps a newcomer away, their
affinity draws it), counted per node and term the same way.

A change in one domain changes what the rules say about every node of that domain, not
only the node whose pods changed: the census adds the domain's nodes to the session's
log of changed nodes, so that node searches (framework/search.py) judge them again.

Which pods count: every pod on a node, whatever its status, except those evicted in
this session (Volcano removes them from its node view at once, and so preemption can
resolve an anti-affinity). Topology spread counts as kube-scheduler counts for it
(`spread`): terminating pods left out, and none at all for an empty selector.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from vscheduler.matching import pod_term_selects
from vscheduler.model import Task, TaskStatus
from vscheduler.specs import Pod, PodAffinityTerm

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["AFFINITY", "ANTI", "PREFERRED", "PREFERRED_ANTI", "DomainTotals", "PodCensus",
           "TermCount"]

# What an owner's term is to the pods it picks: required anti-affinity (keeps them
# out of its domain), required affinity, preferred affinity and anti-affinity (score).
ANTI, AFFINITY, PREFERRED, PREFERRED_ANTI = "anti", "affinity", "preferred", "preferred-anti"


class TermCount:
    """Per node, how many pods all of `terms` pick (counted for topology spread with
    `spread`), or, for an owner term, how many pods carry it (times their weight for
    a preferred term); and the log of changes, (node name, change), since the count
    was made."""

    __slots__ = ("by_node", "keys", "log", "spread", "terms")

    def __init__(self, terms: tuple[PodAffinityTerm, ...], spread: bool) -> None:
        self.terms = terms
        self.keys = tuple(dict.fromkeys(term.topology_key for term in terms))
        self.spread = spread
        self.by_node: dict[str, int] = {}
        self.log: list[tuple[str, int]] = []

    def picks(self, task: Task, namespaces: Mapping[str, Mapping[str, str]]) -> bool:
        """Whether the task counts here, its status aside (a terminating pod is left out
        of a spread count when it is made; a pod that moves is never one)."""
        if self.spread and not self.terms[0].selector:
            return False
        pod = task.pod
        return all(pod_term_selects(term, pod, namespaces) for term in self.terms)

    def add(self, node: str, change: int) -> None:
        count = self.by_node.get(node, 0) + change
        if count:
            self.by_node[node] = count
        else:
            self.by_node.pop(node, None)
        self.log.append((node, change))


class PodCensus:
    """The session's census (`Session.census`). Nothing is counted until a rule asks:
    a session without inter-pod rules pays only for noting its evictions."""

    def __init__(self, session: Session | None) -> None:
        self.session = session
        self.evicted: set[str] = set()  # keys of the pods evicted in this session
        self._scanned = False  # the owners were found (`owner_terms`)
        self.counts: dict[tuple[tuple[PodAffinityTerm, ...], bool], TermCount] = {}
        # (role, weight, term) -> its count, in the order they were first seen
        self.owners: dict[tuple[str, int, PodAffinityTerm], TermCount] = {}
        self.version = 0  # changes to any count, for the sums built on them
        self._domains: dict[str, dict[str, list[str]]] = {}

    # ---------------------------------------------------------------- reading

    def count(self, *terms: PodAffinityTerm, spread: bool = False) -> TermCount:
        """The pods that every one of `terms` picks, per node, counted for topology
        spread with `spread` (made on first ask, then kept up to date)."""
        counted = self.counts.get((terms, spread))
        if counted is None:
            self.owner_terms()  # (from here on, every move is counted)
            counted = self.counts[(terms, spread)] = TermCount(terms, spread)
            namespaces = self.session.namespaces
            by_node = counted.by_node
            for task, node in self._pods():
                if counted.picks(task, namespaces) and not (
                        spread and task.status == TaskStatus.RELEASING):
                    by_node[node] = by_node.get(node, 0) + 1
        return counted

    def owner_terms(self) -> Mapping[tuple[str, int, PodAffinityTerm], TermCount]:
        """Every (role, weight, term) that pods on the nodes carry, with their count
        (found on first ask)."""
        if not self._scanned:
            self._scanned = True
            evicted = self.evicted
            for name, pods in self._carriers().items():
                for pod in pods:
                    if pod.key not in evicted:
                        self._own(pod, name, 1, touch=False)
        return self.owners

    def _carriers(self) -> dict[str, tuple[Pod, ...]]:
        """Per node, the pods on it that carry inter-pod terms, as the nodes hold them
        now. Kept from session to session: only the nodes the snapshot copied anew and
        those this session changed are looked at again, not the 40,000 pods of a busy
        cluster at every session."""
        session = self.session
        snapshot = session.snapshot
        kept = session.keep("census.carriers", None, _Carriers)
        if kept.serial != snapshot.serial:
            if kept.serial and kept.serial == snapshot.base:
                names: Iterable[str] = snapshot.changed_nodes
            else:
                kept.by_node.clear()
                names = session.nodes
            kept.serial = snapshot.serial
            kept.update(session, names)
        kept.update(session, dict.fromkeys(session.node_changes))
        return kept.by_node

    def _pods(self) -> Iterator[tuple[Task, str]]:
        """Every pod that counts, with its node's name, as the nodes hold them now."""
        evicted = self.evicted
        for node in self.session.node_list:
            name = node.name
            for key, (task, _) in node.tasks.items():
                if key not in evicted:
                    yield task, name

    def in_use(self) -> bool:
        """Whether any rule reads the census: a pod on the nodes or a pending one has
        inter-pod rules (then what a node may take depends on other nodes' pods)."""
        if self.owners or self.counts:
            return True
        session = self.session
        if any(task.pod.inter_pod is not None for job in session.waiting_jobs
               for task in job.tasks.values() if task.status == TaskStatus.PENDING):
            return True
        return any(self._carriers().values())

    def domain(self, key: str, value: str) -> list[str]:
        """The names of the nodes whose label `key` is `value`."""
        by_value = self._domains.get(key)
        if by_value is None:
            session = self.session
            by_value = self._domains[key] = session.keep(
                f"census.domains.{key}", session.node_specs,
                lambda: _domains(session.node_list, key))
        return by_value.get(value, [])

    # ---------------------------------------------------------------- changes

    def moved(self, task: Task, node: str, change: int, evicted: bool = False) -> None:
        """`task` came onto `node` (`change` 1: placed, or its eviction undone) or left it
        (-1: evicted, or its placement undone); `evicted` for an eviction and its undoing."""
        if evicted:
            if change < 0:
                self.evicted.add(task.key)
            else:
                self.evicted.discard(task.key)
        if not self._scanned:
            return  # (nothing counted yet: what is counted later sees the nodes as they are)
        namespaces, labels = self.session.namespaces, None
        for counted in self.counts.values():
            if counted.picks(task, namespaces):
                counted.add(node, change)
                self.version += 1
                labels = labels or self.session.nodes[node].labels
                for key in counted.keys:
                    self._touch(key, labels)
        if task.pod.inter_pod is not None:
            self._own(task.pod, node, change, touch=True)

    def _own(self, pod: Pod, node: str, change: int, touch: bool) -> None:
        """Count the terms `pod` carries, as an owner, on `node`."""
        owners = self.owners
        for role, weight, term in _carried(pod):
            counted = owners.get((role, weight, term))
            if counted is None:
                counted = owners[(role, weight, term)] = TermCount((term,), False)
            counted.add(node, change * weight)
            self.version += 1
            if touch:
                self._touch(term.topology_key, self.session.nodes[node].labels)

    def _touch(self, key: str, labels: Mapping[str, str]) -> None:
        """Log the nodes of the domain of `key` that holds a node with `labels` as
        changed (the node itself is logged by the move)."""
        value = labels.get(key)
        if value is not None:
            names = self.domain(key, value)
            if len(names) > 1:
                self.session.node_changes.extend(names)


def _carried(pod: Pod) -> Iterator[tuple[str, int, PodAffinityTerm]]:
    """The (role, weight, term) a pod carries as an owner (weight 1 when required)."""
    rules = pod.inter_pod
    if rules is None:
        return
    for term in rules.anti_affinity:
        yield ANTI, 1, term
    for term in rules.affinity:
        yield AFFINITY, 1, term
    for weight, term in rules.preferred_affinity:
        yield PREFERRED, weight, term
    for weight, term in rules.preferred_anti_affinity:
        yield PREFERRED_ANTI, weight, term


class _Carriers:
    """Per node name, the pods there with inter-pod terms; up to date with snapshot
    `serial` (kept between sessions: see `PodCensus._carriers`)."""

    __slots__ = ("by_node", "serial")

    def __init__(self) -> None:
        self.by_node: dict[str, tuple[Pod, ...]] = {}
        self.serial = 0

    def update(self, session: Session, names: Iterable[str]) -> None:
        nodes, by_node = session.nodes, self.by_node
        for name in names:
            node = nodes.get(name)
            pods = () if node is None else tuple(
                task.pod for task, _ in node.tasks.values() if task.pod.inter_pod is not None)
            if pods:
                by_node[name] = pods
            else:
                by_node.pop(name, None)


def _domains(nodes: Iterable, key: str) -> dict[str, list[str]]:
    by_value: dict[str, list[str]] = {}
    for node in nodes:
        value = node.labels.get(key)
        if value is not None:
            by_value.setdefault(value, []).append(node.name)
    return by_value


class DomainTotals:
    """The counts of some terms (`sources`, each with a factor) summed per value of node
    label `key`, over the nodes `eligible` allows (None: all), kept up to date from the
    counts' logs. With `domains` given, every one of them is a domain even at 0, and
    the lowest total is kept (`lowest`), as topology spread needs."""

    __slots__ = ("census", "eligible", "frequency", "key", "lowest", "positions", "positive",
                 "sources", "totals", "version")

    def __init__(self, census: PodCensus, key: str, sources: list[tuple[TermCount, int]],
                 eligible: frozenset[str] | None = None,
                 domains: Iterable[str] | None = None) -> None:
        self.census = census
        self.key = key
        self.sources = sources
        self.eligible = eligible
        self.totals: dict[str, int] = dict.fromkeys(domains, 0) if domains is not None else {}
        # how many domains have each total (with `domains`), for the lowest
        self.frequency: dict[int, int] | None = None
        self.lowest = 0
        self.positive = 0  # how many domains total more than 0
        nodes = census.session.nodes
        for counted, factor in sources:
            for name, count in counted.by_node.items():
                self._add(nodes, name, count * factor)
        if domains is not None:
            self.frequency = {}
            for total in self.totals.values():
                self.frequency[total] = self.frequency.get(total, 0) + 1
            self.lowest = min(self.frequency, default=0)
        self.positions = [len(counted.log) for counted, _ in sources]
        self.version = census.version

    def refresh(self) -> None:
        """Take in the changes logged since the last look."""
        if self.version == self.census.version:
            return
        self.version = self.census.version
        nodes = self.census.session.nodes
        for i, (counted, factor) in enumerate(self.sources):
            log = counted.log
            if self.positions[i] < len(log):
                for name, change in log[self.positions[i]:]:
                    self._add(nodes, name, change * factor)
                self.positions[i] = len(log)

    def _add(self, nodes: Mapping, name: str, change: int) -> None:
        if self.eligible is not None and name not in self.eligible:
            return
        value = nodes[name].labels.get(self.key)
        if value is None:
            return
        totals = self.totals
        before = totals.get(value, 0)
        after = totals[value] = before + change
        self.positive += (after > 0) - (before > 0)
        frequency = self.frequency
        if frequency is not None:
            frequency[before] -= 1
            if not frequency[before]:
                del frequency[before]
            frequency[after] = frequency.get(after, 0) + 1
            if after < self.lowest:
                self.lowest = after
            elif before == self.lowest and before not in frequency:
                self.lowest = min(frequency)
