"""Inter-pod affinity, anti-affinity and topology spread, decided as kube-scheduler
decides them (its InterPodAffinity and PodTopologySpread plugins), from the session's
census of pods (`vscheduler.census`).

`RequiredRules` filters nodes (the predicates plugin asks it), `AffinityScore` and
`SpreadScore` score them (the nodeorder plugin). Each is made for one pod and shared by
the pods that agree on everything it reads (the replicas of a Deployment, a gang's
pods): its rules, which of them pick the pod itself, which terms of the pods on the
nodes pick it, and, for spread, the pod's node affinity and tolerations. Its figures are
sums per topology domain kept up to date from the census's log, so a check on a node is
a few dictionary lookups, whatever the cluster's size.

The rules, in short (kube-scheduler's; the refusals are worded as it words them):

- required pod affinity: the node has every term's topology key, and each term's domain
  there holds a pod the term picks (counts of terms with the same key are summed, as
  kube-scheduler does). When no pod anywhere is picked by any term and the pod picks
  itself with all of them, it may go anywhere that has the keys (the first of a group
  drawn to itself). Not resolvable by eviction.
- required anti-affinity: no pod a term picks in the term's domain of the node (a node
  without the key passes); and no pod on the nodes whose required anti-affinity picks
  this pod in its domain. Resolvable: evicting those pods makes room.
- topology spread, `DoNotSchedule`: the node has the key (else not resolvable); the
  pods the constraint picks in the node's domain, plus one if the pod picks itself,
  exceed the lowest domain's count by at most `maxSkew`. Domains are the values of the
  key on the nodes that have every such constraint's key and pass its node inclusion
  policies; fewer than `minDomains` of them count as a lowest of 0.
- scores: preferred terms (the pod's, and those of the pods on the nodes that pick it,
  with the required affinity of those pods at weight `HARD_AFFINITY_WEIGHT`) summed per
  domain and scaled so the candidates span 0..100; `ScheduleAnyway` constraints score
  fewer matching pods higher (kube-scheduler's formula, `SpreadScore`).

Not followed: kube-scheduler's default spread constraints for pods without any (they
need the pod's Services and ReplicaSets), and the `NodeInclusionPolicy` feature gate
(always on, as in current Kubernetes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vscheduler.census import (
    AFFINITY,
    ANTI,
    PREFERRED,
    PREFERRED_ANTI,
    DomainTotals,
    PodCensus,
    TermCount,
)
from vscheduler.fit import Unfit
from vscheduler.matching import (
    HARD_EFFECTS,
    first_untolerated_taint,
    pod_term_selects,
    required_affinity_matches,
    selector_matches,
)

if TYPE_CHECKING:
    from vscheduler.model import Node, Task
    from vscheduler.specs import Pod, SpreadConstraint

__all__ = ["HARD_AFFINITY_WEIGHT", "HOSTNAME", "REASON_AFFINITY", "REASON_ANTI_AFFINITY",
           "REASON_EXISTING_ANTI_AFFINITY", "REASON_SPREAD", "REASON_SPREAD_LABEL",
           "AffinityScore", "RequiredRules", "RuleBook", "SpreadScore", "normalize_affinity",
           "picking_owners", "spread_domains"]

REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = ("node(s) didn't match pod topology spread constraints "
                       "(missing required label)")

_AFFINITY = Unfit(REASON_AFFINITY)
_ANTI_AFFINITY = Unfit(REASON_ANTI_AFFINITY, resolvable=True)
_EXISTING_ANTI_AFFINITY = Unfit(REASON_EXISTING_ANTI_AFFINITY, resolvable=True)
_SPREAD = Unfit(REASON_SPREAD, resolvable=True)
_SPREAD_LABEL = Unfit(REASON_SPREAD_LABEL)

# kube-scheduler's hardPodAffinityWeight: what an existing pod's required affinity that
# picks the incoming pod adds to a node's score.
HARD_AFFINITY_WEIGHT = 1
HOSTNAME = "kubernetes.io/hostname"
MAX_SCORE = 100


def _by_key(census: PodCensus, sources: Iterable[tuple[TermCount, int]]) -> list[DomainTotals]:
    """One-term counts summed per topology key (terms with one key share their domains,
    as kube-scheduler's counts by (key, value) do)."""
    groups: dict[str, list[tuple[TermCount, int]]] = {}
    for counted, factor in sources:
        groups.setdefault(counted.terms[0].topology_key, []).append((counted, factor))
    return [DomainTotals(census, key, group) for key, group in groups.items()]


def picking_owners(census: PodCensus, pod: Pod, roles: Sequence[str]) -> list[
        tuple[str, TermCount]]:
    """The owner terms (of pods on the nodes) of `roles` that pick `pod`."""
    namespaces = census.session.namespaces
    return [(role, counted) for (role, _, term), counted in census.owner_terms().items()
            if role in roles and pod_term_selects(term, pod, namespaces)]


class _Spread:
    """One `DoNotSchedule` constraint of a pod, with its domains' counts."""

    __slots__ = ("key", "max_skew", "min_domains", "own", "totals")

    def __init__(self, census: PodCensus, pod: Pod, constraint: SpreadConstraint,
                 keys: tuple[str, ...]) -> None:
        term = constraint.term
        self.key = term.topology_key
        self.max_skew = constraint.max_skew
        self.min_domains = constraint.min_domains
        self.own = 1 if pod_term_selects(term, pod, census.session.namespaces) else 0
        eligible, domains = spread_domains(census, pod, constraint, keys)
        self.totals = DomainTotals(census, self.key, [(census.count(term, spread=True), 1)],
                                   eligible, domains)

    def lowest(self) -> int:
        totals = self.totals
        if self.min_domains is not None and len(totals.totals) < self.min_domains:
            return 0
        return totals.lowest


def spread_domains(census: PodCensus, pod: Pod, constraint: SpreadConstraint,
                   keys: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The nodes whose pods count for `constraint` (they have every one of `keys` and
    pass its node inclusion policies) and the domains they make, kept between sessions
    while the nodes' specs are the same."""
    session = census.session
    honor_affinity, honor_taints = constraint.honor_affinity, constraint.honor_taints
    selector = pod.node_selector if honor_affinity else {}
    required = pod.required_affinity if honor_affinity else None
    tolerations = tuple(pod.tolerations) if honor_taints else None
    token = (constraint.term.topology_key, keys, tuple(sorted(selector.items())),
             None if required is None else tuple(tuple(t) for t in required), tolerations)

    def build() -> tuple[frozenset[str], tuple[str, ...]]:
        names, domains = [], {}
        for node in session.node_list:
            labels = node.labels
            if any(key not in labels for key in keys):
                continue
            if selector and not selector_matches(selector, labels):
                continue
            if required is not None and not required_affinity_matches(
                    required, labels, node.name):
                continue
            if tolerations is not None and node.taints and first_untolerated_taint(
                    (t for t in node.taints if t[2] in HARD_EFFECTS), tolerations):
                continue
            names.append(node.name)
            domains[labels[constraint.term.topology_key]] = None
        return frozenset(names), tuple(domains)

    return session.keep(f"inter_pod.spread.{hash(token)}", (session.node_specs, token), build)


class RequiredRules:
    """What a pod's required rules, and the required anti-affinity of the pods on the
    nodes that picks it, say about each node (`refuse`). `affinity` and `spread` say
    which of the two filters are on."""

    __slots__ = ("affinity", "anti", "existing", "first", "key", "spread")

    def __init__(self, census: PodCensus, pod: Pod, owners: list[TermCount],
                 affinity: bool = True, spread: bool = True) -> None:
        self.key: tuple = ()  # (set by RuleBook: what it was made from)
        rules = pod.inter_pod
        namespaces = census.session.namespaces
        terms = rules.affinity if rules is not None and affinity else ()
        # A pod counts for the affinity when all the terms pick it, in each term's
        # domain (two terms with one key: twice), as kube-scheduler counts.
        self.affinity: list[DomainTotals] = []
        if terms:
            counted = census.count(*terms)
            for key in counted.keys:
                times = sum(1 for term in terms if term.topology_key == key)
                self.affinity.append(DomainTotals(census, key, [(counted, times)]))
        # the first of a group drawn to itself: it picks itself with every term
        self.first = bool(terms) and all(pod_term_selects(t, pod, namespaces) for t in terms)
        anti = rules.anti_affinity if rules is not None and affinity else ()
        self.anti = _by_key(census, [(census.count(term), 1) for term in anti])
        self.existing = _by_key(census, [(counted, 1) for counted in owners]) \
            if affinity else []
        hard = [c for c in (rules.spread if rules is not None and spread else ()) if c.hard]
        keys = tuple(dict.fromkeys(c.term.topology_key for c in hard))
        self.spread = [_Spread(census, pod, c, keys) for c in hard]

    def state(self) -> tuple:
        """What the verdicts read beyond each node's own domain: whether any pod is
        picked by the affinity terms, and each constraint's lowest count. Node searches
        keep verdicts only while it is the same (a change in one domain is logged by
        the census as a change of its nodes)."""
        for totals in self.affinity:
            totals.refresh()
        for spread in self.spread:
            spread.totals.refresh()
        return (any(t.positive for t in self.affinity),
                tuple(spread.lowest() for spread in self.spread))

    def refuse(self, node: Node) -> Unfit | None:
        """Why the rules keep the pod off `node`, in Volcano's order (inter-pod affinity,
        then topology spread); None if they do not."""
        labels = node.labels
        if self.affinity:
            found = True
            for totals in self.affinity:
                value = labels.get(totals.key)
                if value is None:
                    return _AFFINITY
                totals.refresh()
                if totals.totals.get(value, 0) <= 0:
                    found = False
            if not found and not (self.first and not any(t.positive for t in self.affinity)):
                return _AFFINITY
        if self.anti and _occupied(self.anti, labels):
            return _ANTI_AFFINITY
        if self.existing and _occupied(self.existing, labels):
            return _EXISTING_ANTI_AFFINITY
        for spread in self.spread:
            value = labels.get(spread.key)
            if value is None:
                return _SPREAD_LABEL
            totals = spread.totals
            totals.refresh()
            if totals.totals.get(value, 0) + spread.own - spread.lowest() > spread.max_skew:
                return _SPREAD
        return None


def _occupied(sums: list[DomainTotals], labels: Mapping[str, str]) -> bool:
    """Whether, for one of `sums`, the node's domain (by its `labels`) holds a pod the
    sum counts (a node without the key is in no domain of it)."""
    for totals in sums:
        value = labels.get(totals.key)
        if value is not None:
            totals.refresh()
            if totals.totals.get(value, 0) > 0:
                return True
    return False


class AffinityScore:
    """kube-scheduler's inter-pod affinity score before normalising: per domain, the
    weights of the pod's preferred terms times the pods they pick (anti-affinity
    negative), plus the terms of pods on the nodes that pick this pod."""

    __slots__ = ("key", "totals")

    def __init__(self, census: PodCensus, pod: Pod,
                 owners: list[tuple[str, TermCount]]) -> None:
        self.key: tuple = ()  # (set by RuleBook: what it was made from)
        rules = pod.inter_pod
        sources: list[tuple[TermCount, int]] = []
        if rules is not None:
            sources += [(census.count(term), weight) for weight, term in rules.preferred_affinity]
            sources += [(census.count(term), -weight)
                        for weight, term in rules.preferred_anti_affinity]
        factors = {AFFINITY: HARD_AFFINITY_WEIGHT, PREFERRED: 1, PREFERRED_ANTI: -1}
        sources += [(counted, factors[role]) for role, counted in owners]
        self.totals = _by_key(census, sources)

    def raw(self, node: Node) -> int:
        labels, score = node.labels, 0
        for totals in self.totals:
            value = labels.get(totals.key)
            if value is not None:
                totals.refresh()
                score += totals.totals.get(value, 0)
        return score


def normalize_affinity(raw: Sequence[int]) -> list[int]:
    """kube-scheduler's: the candidates scaled to span 0..100 (all equal: all 0)."""
    if not raw:
        return []
    low, high = min(raw), max(raw)
    if high == low:
        return [0] * len(raw)
    return [int(MAX_SCORE * ((score - low) / (high - low))) for score in raw]


class _SoftSpread:
    __slots__ = ("count", "key", "max_skew", "totals")

    def __init__(self, census: PodCensus, pod: Pod, constraint: SpreadConstraint,
                 keys: tuple[str, ...]) -> None:
        self.key = constraint.term.topology_key
        self.max_skew = constraint.max_skew
        self.count = census.count(constraint.term, spread=True)
        eligible, _ = spread_domains(census, pod, constraint, keys)
        self.totals = None if self.key == HOSTNAME else DomainTotals(
            census, self.key, [(self.count, 1)], eligible)


class SpreadScore:
    """kube-scheduler's topology spread score for a pod's `ScheduleAnyway` constraints,
    over a list of candidate nodes (`scores`): per constraint, the matching pods in the
    node's domain times log(domains + 2), plus maxSkew - 1, summed and rounded; then
    turned around so the fewest score 100. Candidates without every key score 0."""

    __slots__ = ("constraints", "key", "keys")

    def __init__(self, census: PodCensus, pod: Pod) -> None:
        self.key: tuple = ()  # (set by RuleBook: what it was made from)
        rules = pod.inter_pod
        soft = [c for c in (rules.spread if rules is not None else ()) if not c.hard]
        self.keys = tuple(dict.fromkeys(c.term.topology_key for c in soft))
        self.constraints = [_SoftSpread(census, pod, c, self.keys) for c in soft]

    def scores(self, nodes: Sequence[Node]) -> list[int]:
        keys = self.keys
        counted = [node for node in nodes if all(key in node.labels for key in keys)]
        weights = []
        for constraint in self.constraints:
            if constraint.totals is None:
                size = len(counted)
            else:
                size = len({node.labels[constraint.key] for node in counted})
                constraint.totals.refresh()
            weights.append(math.log(size + 2))
        raw: dict[str, int] = {}
        for node in counted:
            score = 0.0
            for constraint, weight in zip(self.constraints, weights, strict=True):
                if constraint.totals is None:
                    matching = constraint.count.by_node.get(node.name, 0)
                else:
                    matching = constraint.totals.totals.get(node.labels[constraint.key], 0)
                score += matching * weight + (constraint.max_skew - 1)
            raw[node.name] = math.floor(score + 0.5)  # (Go's math.Round, for score >= 0)
        if not raw:
            return [0] * len(nodes)
        low, high = min(raw.values()), max(raw.values())
        out = []
        for node in nodes:
            score = raw.get(node.name)
            if score is None:
                out.append(0)
            elif high == 0:
                out.append(MAX_SCORE)
            else:
                out.append(MAX_SCORE * (high + low - score) // high)
        return out


class RuleBook:
    """A session's rule objects for its pods (`required`, `affinity`, `spread`), made
    once per task and shared by the tasks that agree on what they read. What pods on the
    nodes carry can grow during a session (a pod with anti-affinity placed): a task's
    objects are made again when it has."""

    __slots__ = ("census", "made", "shared", "use_affinity", "use_spread")

    def __init__(self, census: PodCensus, affinity: bool = True, spread: bool = True) -> None:
        self.census = census
        self.use_affinity = affinity  # inter-pod affinity and anti-affinity on
        self.use_spread = spread  # topology spread on
        # (kind, task uid) -> (owner terms known then, the object or None)
        self.made: dict[str, dict[str, tuple[int, Any]]] = {
            "required": {}, "affinity": {}, "spread": {}}
        self.shared: dict[tuple, Any] = {}

    def required(self, task: Task) -> RequiredRules | None:
        """The required rules for `task`, or None when nothing required applies to it
        (no rules of its own, no required anti-affinity of a pod on the nodes picks it)."""
        made = self.made["required"].get(task.uid)
        if made is not None and made[0] == len(self.census.owners):
            return made[1]  # (the common case, asked per node: kept short)
        return self._get("required", task)

    def affinity(self, task: Task) -> AffinityScore | None:
        """The affinity scorer for `task`, or None when no preferred term concerns it."""
        return self._get("affinity", task)

    def spread(self, task: Task) -> SpreadScore | None:
        """The spread scorer for `task`, or None without a `ScheduleAnyway` constraint."""
        return self._get("spread", task)

    def _get(self, kind: str, task: Task) -> Any:
        owners = self.census.owner_terms()
        known = len(owners)
        made = self.made[kind].get(task.uid)
        if made is not None and made[0] == known:
            return made[1]
        made_now = self._make(kind, task.pod) \
            if owners or task.pod.inter_pod is not None else None
        self.made[kind][task.uid] = (known, made_now)
        return made_now

    def _make(self, kind: str, pod: Pod) -> object:
        census, rules = self.census, pod.inter_pod
        namespaces = census.session.namespaces
        if kind == "spread":
            if not self.use_spread or rules is None or all(c.hard for c in rules.spread):
                return None
            key: tuple = (kind, rules.spread, _placement(pod))
            return self._share(key, lambda: SpreadScore(census, pod))
        if kind == "required":
            owners = [counted for _, counted in picking_owners(census, pod, (ANTI,))] \
                if self.use_affinity else []
            if not owners and (rules is None or not (
                    (self.use_affinity and (rules.affinity or rules.anti_affinity))
                    or (self.use_spread and any(c.hard for c in rules.spread)))):
                return None
            own = () if rules is None else (
                tuple(pod_term_selects(t, pod, namespaces) for t in rules.affinity),
                tuple(pod_term_selects(c.term, pod, namespaces) for c in rules.spread),
                rules.affinity, rules.anti_affinity, rules.spread,
                _placement(pod) if rules.spread else None)
            key = (kind, tuple(counted.terms for counted in owners), own)
            return self._share(key, lambda: RequiredRules(census, pod, owners, self.use_affinity,
                                                          self.use_spread))
        if not self.use_affinity:
            return None
        scoring = picking_owners(census, pod, (AFFINITY, PREFERRED, PREFERRED_ANTI))
        if not scoring and (rules is None or not (
                rules.preferred_affinity or rules.preferred_anti_affinity)):
            return None
        key = (kind, tuple((role, counted.terms) for role, counted in scoring),
               None if rules is None else (rules.preferred_affinity,
                                           rules.preferred_anti_affinity))
        return self._share(key, lambda: AffinityScore(census, pod, scoring))

    def _share(self, key: tuple, make: Callable[[], Any]) -> Any:
        """One object per `key` (which says, by value, all it was made from: what a
        node search's signature carries, for it outlives the session)."""
        made = self.shared.get(key)
        if made is None:
            made = self.shared[key] = make()
            made.key = key
        return made


def _placement(pod: Pod) -> tuple:
    """What of a pod decides which nodes count for its spread constraints."""
    return (tuple(sorted(pod.node_selector.items())),
            None if pod.required_affinity is None else tuple(
                tuple(term) for term in pod.required_affinity),
            tuple(pod.tolerations))
