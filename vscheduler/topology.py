"""The network topology a session places gangs by: a tree of domains over the nodes.

A domain is a HyperNode (`topology.volcano.sh/v1alpha1`): a leaf switch, a rack, a block,
at a tier (lower: closer, faster). Members are nodes (by exact name, by a regular
expression searched in the name, or by labels) and other HyperNodes (by exact name); a
domain holds every node of its members, recursively. Over all of them stands a virtual
top domain, `<cluster-top-hypernode>`, one tier above the highest, holding every node:
a gang limited to it may go anywhere.

Clusters without HyperNode objects can derive the same tree from node labels
(`from_labels`): an ordered list of keys, widest first (block, rack, host), each a tier.

A tree that cannot be used (a HyperNode claimed by two parents, a cycle) is not ready,
as in Volcano: gangs that ask for a topology wait, with a Warning naming the HyperNode,
until it is mended; the rest is scheduled. (Volcano's other rules kept: a member named
exactly that does not exist adds nothing, a regular expression is searched anywhere in
a name, an empty label selector matches nothing, and HyperNode members are named
exactly.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vscheduler.matching import compile_name_pattern, expression_matches, selector_matches
from vscheduler.resources import Resource
from vscheduler.specs import HyperNodeMember, HyperNodeSpec, NetworkTopology

__all__ = ["TOP", "Domain", "Topology", "from_hypernodes", "from_labels"]

TOP = "<cluster-top-hypernode>"


@dataclass(eq=False, slots=True)
class Domain:
    """One domain of the tree: its tier, its parent (None for the top) and children, and
    the names of every node under it, sorted."""

    name: str
    tier: int
    tier_name: str = ""
    parent: Domain | None = None
    children: list[Domain] = field(default_factory=list)
    nodes: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Domain({self.name!r}, tier {self.tier}, {len(self.nodes)} nodes)"


class Topology:
    """The domains of a cluster, the top among them, and what a session asks of them."""

    def __init__(self, domains: Mapping[str, Domain], top: Domain,
                 problems: Sequence[tuple[str, str]] = (), ready: bool = True) -> None:
        self.domains = dict(domains)
        self.top = top
        # (HyperNode name, what is wrong): Warnings, and why gangs wait when not ready
        self.problems = list(problems)
        self.ready = ready
        self.tiers = sorted({d.tier for d in self.domains.values()} | {top.tier})
        self.by_tier: dict[int, list[Domain]] = {}
        for domain in sorted(self.domains.values(), key=lambda d: d.name):
            self.by_tier.setdefault(domain.tier, []).append(domain)
        self.by_tier.setdefault(top.tier, []).append(top)
        # tier name -> tier (a name two tiers claim keeps the higher: the wider limit)
        self.tier_names: dict[str, int] = {}
        for domain in self.domains.values():
            if domain.tier_name:
                known = self.tier_names.get(domain.tier_name)
                self.tier_names[domain.tier_name] = max(domain.tier, known or domain.tier)
        self._containing: dict[str, list[Domain]] | None = None
        self._known: frozenset[str] | None = None
        self._node_sets: dict[str, frozenset[str]] = {}
        # What plugins derive from the tree and the nodes' specs, neither of which
        # changes for one Topology (a change builds another).
        self.memo: dict[str, Any] = {}
        # node -> the lowest-tier domain holding it (ties: the first by name)
        self.leaf: dict[str, Domain] = {}
        for domain in sorted(self.domains.values(), key=lambda d: (d.tier, d.name)):
            for node in domain.nodes:
                self.leaf.setdefault(node, domain)

    @property
    def containing(self) -> dict[str, list[Domain]]:
        """Node -> every domain holding it but the top (counted once, when first asked)."""
        if self._containing is None:
            self._containing = {}
            for domain in self.domains.values():
                for node in domain.nodes:
                    self._containing.setdefault(node, []).append(domain)
        return self._containing

    @property
    def max_tier(self) -> int:
        return self.top.tier

    @property
    def min_tier(self) -> int:
        return self.tiers[0]

    def leaf_of(self, node: str) -> Domain:
        """The lowest domain holding `node` (the top for a node in no HyperNode)."""
        return self.leaf.get(node, self.top)

    @staticmethod
    def ancestors(domain: Domain) -> list[Domain]:
        """`domain`, its parent, and so on up to the top."""
        chain = []
        current: Domain | None = domain
        while current is not None:
            chain.append(current)
            current = current.parent
        return chain

    def lowest_common(self, left: Domain | None, right: Domain) -> Domain:
        """The lowest domain holding both (`right` if `left` is None)."""
        if left is None or left is right:
            return right
        mine = {id(d) for d in self.ancestors(left)}
        for domain in self.ancestors(right):
            if id(domain) in mine:
                return domain
        return self.top

    def holding(self, nodes: Iterable[str]) -> Domain | None:
        """The lowest domain holding every node of `nodes` (ties: the first by name;
        None for no nodes). A node the cluster does not have (gone, with pods still on
        record) says nothing of where a gang is: it is passed over."""
        known = self._known
        if known is None:
            known = self._known = frozenset(self.top.nodes)
        wanted = {node for node in nodes if node in known}
        if not wanted:
            return None
        first = next(iter(sorted(wanted)))
        for domain in sorted(self.containing.get(first, ()), key=lambda d: (d.tier, d.name)):
            if wanted <= self.node_set(domain):
                return domain
        return self.top

    @staticmethod
    def summed(domain: Domain, nodes: Mapping[str, Any],
               amount: Callable[[Any], Resource]) -> Resource:
        """`amount` of each of `domain`'s nodes found in `nodes` (the session's, by
        name), summed as a new resource."""
        total = Resource()
        for name in domain.nodes:
            node = nodes.get(name)
            if node is not None:
                total.add(amount(node))
        return total

    def node_set(self, domain: Domain) -> frozenset[str]:
        """The names of `domain`'s nodes, as a set (made when first asked)."""
        found = self._node_sets.get(domain.name)
        if found is None:
            found = self._node_sets[domain.name] = frozenset(domain.nodes)
        return found

    def limit(self, wanted: NetworkTopology | None) -> int | None:
        """The highest tier a gang asking `wanted` may span, or None if it asks nothing
        this tree can hold it to: soft asks for the top (the smallest domain that fits
        first, then wider ones); hard asks for its tier, by number or by a tier name
        (one that names no tier is no limit, as in Volcano)."""
        if wanted is None:
            return None
        if wanted.mode == "soft":
            return self.max_tier
        if wanted.highest_tier is not None:
            return wanted.highest_tier
        if wanted.highest_tier_name is not None:
            return self.tier_names.get(wanted.highest_tier_name)
        return None

    def widest_allowed(self, domain: Domain, limit: int) -> Domain | None:
        """The highest ancestor of `domain` (itself included) within tier `limit`: where
        the rest of a gang placed in `domain` may go. None if `domain` itself is above."""
        allowed = None
        for ancestor in self.ancestors(domain):
            if ancestor.tier > limit:
                break
            allowed = ancestor
        return allowed

    def candidates(self, root: Domain, limit: int) -> list[list[Domain]]:
        """The domains under `root` (itself included) within tier `limit`, grouped by
        tier, lowest tier first, each group by name: where a gang is tried, in order."""
        groups: dict[int, list[Domain]] = {}
        stack = [root]
        while stack:
            domain = stack.pop()
            if domain.tier <= limit:
                groups.setdefault(domain.tier, []).append(domain)
            stack.extend(domain.children)
        return [sorted(groups[tier], key=lambda d: d.name) for tier in sorted(groups)]


# --------------------------------------------------------------------------- building


def _member_nodes(member: HyperNodeMember, nodes: Mapping[str, Mapping[str, str]],
                  matched: dict[str, list[str]]) -> list[str]:
    """The names of the nodes a Node member chooses. `matched` keeps, per pattern, the
    names it matches among `nodes`' names (which a change of labels leaves alone)."""
    if member.name is not None:
        return [member.name] if member.name in nodes else []
    if member.pattern is not None:
        names = matched.get(member.pattern)
        if names is None:
            pattern = compile_name_pattern(member.pattern)
            names = matched[member.pattern] = [name for name in nodes if pattern.search(name)]
        return names
    if not member.match_labels and not member.match_expressions:
        return []  # (an empty selector chooses nothing, as in Volcano)
    chosen = []
    for name, labels in nodes.items():
        if selector_matches(member.match_labels or {}, labels) and all(
                expression_matches(e, labels, name) for e in member.match_expressions):
            chosen.append(name)
    return chosen


def from_hypernodes(hypernodes: Sequence[HyperNodeSpec],
                    nodes: Mapping[str, Mapping[str, str]],
                    matched: dict[str, list[str]] | None = None) -> Topology:
    """The tree of `hypernodes` over `nodes` (name -> labels, in the session's order).
    `matched` (pattern -> the names it matches) may be kept by the caller for as long
    as the nodes' names are the same: a tree built again because a node's labels
    changed then searches no name again (313 patterns over 5,000 names take 1.5 s)."""
    domains = {h.name: Domain(h.name, h.tier, h.tier_name) for h in hypernodes}
    problems: list[tuple[str, str]] = []
    direct: dict[str, list[str]] = {}
    patterns: dict[str, list[str]] = {} if matched is None else matched
    ready = True
    for hypernode in hypernodes:
        own: list[str] = []
        for member in hypernode.members:
            if member.kind == "Node":
                own.extend(_member_nodes(member, nodes, patterns))
                continue
            if member.name is None:
                problems.append((hypernode.name, "a HyperNode member is chosen by exactMatch "
                                                 "only: this one is ignored"))
                continue
            child = domains.get(member.name)
            if child is None:
                continue  # (not here yet: it adds nothing until it is)
            if child.parent is not None and child.parent.name != hypernode.name:
                problems.append((member.name, f"HyperNode {member.name} already has a parent "
                                              f"{child.parent.name}, and {hypernode.name} "
                                              "claims it too"))
                ready = False
                continue
            if child.parent is None:
                child.parent = domains[hypernode.name]
                domains[hypernode.name].children.append(child)
        direct[hypernode.name] = own
    for domain in domains.values():  # a cycle: a chain of parents that comes back
        seen = {domain.name}
        parent = domain.parent
        while parent is not None:
            if parent.name in seen:
                problems.append((domain.name, f"HyperNode {domain.name} is in a cycle of "
                                              "parents"))
                ready = False
                break
            seen.add(parent.name)
            parent = parent.parent
    _one_domain_per_tier(domains, direct, problems)
    if ready:
        order = {name: i for i, name in enumerate(nodes)}
        for domain in domains.values():
            domain.nodes = tuple(sorted(_nodes_under(domain, direct), key=order.__getitem__))
    top_tier = max((d.tier for d in domains.values()), default=0) + 1
    top = Domain(TOP, top_tier, "", None,
                 sorted((d for d in domains.values() if d.parent is None), key=lambda d: d.name),
                 tuple(nodes))
    for domain in top.children:
        domain.parent = top
    for domain in domains.values():
        domain.children.sort(key=lambda d: d.name)
    return Topology(domains, top, problems, ready)


def _one_domain_per_tier(domains: Mapping[str, Domain], direct: dict[str, list[str]],
                         problems: list[tuple[str, str]]) -> None:
    """A node in two HyperNodes of one tier counts in the first by name only: in the
    other it would let a gang held to one domain of that tier span two. A HyperNode
    that names such a node itself loses it (`direct` is mended), with a problem; one
    that holds it through its members cannot lose it without breaking its members'
    tree, and the problem says it counts in both. Lower tiers first, so that what a
    domain holds through its members is known when its tier is."""
    reach: dict[str, set[str]] = {}
    first_of: dict[tuple[str, int], str] = {}  # (node, tier) -> its first domain by name
    for domain in sorted(domains.values(), key=lambda d: (d.tier, d.name)):
        inherited: set[str] = set()
        for child in domain.children:
            inherited |= reach.get(child.name, set())
        kept = []
        for node in direct.get(domain.name, ()):
            first = first_of.get((node, domain.tier))
            if node in inherited or first is None or first == domain.name:
                kept.append(node)
            else:
                problems.append((domain.name, f"node {node} is in HyperNodes {first} and "
                                              f"{domain.name} of tier {domain.tier}: it "
                                              f"counts as in {first}"))
        direct[domain.name] = kept
        reach[domain.name] = inherited.union(kept)
        for node in sorted(inherited):
            first = first_of.setdefault((node, domain.tier), domain.name)
            if first != domain.name:
                problems.append((domain.name, f"node {node} is in HyperNodes {first} and "
                                              f"{domain.name} of tier {domain.tier} through "
                                              "their members: it counts in both"))
        for node in kept:
            first_of.setdefault((node, domain.tier), domain.name)


def _nodes_under(domain: Domain, direct: Mapping[str, list[str]]) -> set[str]:
    found = set(direct.get(domain.name, ()))
    stack = list(domain.children)
    while stack:
        child = stack.pop()
        found.update(direct.get(child.name, ()))
        stack.extend(child.children)
    return found


def from_labels(keys: Sequence[str], nodes: Mapping[str, Mapping[str, str]]) -> Topology:
    """The tree that node labels `keys` (widest first: block, rack, host) describe: the
    last key is tier 1, the first tier `len(keys)`. A domain is named by the values of
    its key and those above it (`block-a/rack-3`), as a rack is one only within its
    block; a node without a key is in no domain of that tier nor below."""
    domains: dict[str, Domain] = {}
    members: dict[str, list[str]] = {}
    tiers = len(keys)
    for name, labels in nodes.items():
        parent: Domain | None = None
        path: list[str] = []
        for level, key in enumerate(keys):
            value = labels.get(key)
            if not value:
                break
            path.append(value)
            domain_name = "/".join(path)
            domain = domains.get(domain_name)
            if domain is None:
                domain = domains[domain_name] = Domain(domain_name, tiers - level, key, parent)
                if parent is not None:
                    parent.children.append(domain)
            members.setdefault(domain_name, []).append(name)
            parent = domain
    for domain_name, names in members.items():
        domains[domain_name].nodes = tuple(names)
    top = Domain(TOP, tiers + 1, "", None,
                 sorted((d for d in domains.values() if d.parent is None), key=lambda d: d.name),
                 tuple(nodes))
    for domain in domains.values():
        if domain.parent is None:
            domain.parent = top
        domain.children.sort(key=lambda d: d.name)
    return Topology(domains, top)
