"""The invariants of ARCHITECTURE.md, checked after every session of a simulation.

`run_checked(simulation, sessions)` steps a Simulation and raises AssertionError naming
the invariant, the session and the object whenever one does not hold. The checks
recompute everything from the cache's tasks, not from the accounting they check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vscheduler.framework.results import SessionResult
from vscheduler.matching import (
    HARD_EFFECTS,
    first_untolerated_taint,
    required_affinity_matches,
    selector_matches,
)
from vscheduler.model import Node, Task, TaskStatus
from vscheduler.resources import CPU, MEMORY, Resource
from vscheduler.simulate import Simulation
from vscheduler.specs import NetworkTopology, Pod, PodAffinityTerm, SpreadConstraint
from vscheduler.tally import Tally
from vscheduler.topology import from_hypernodes

S = TaskStatus
PLACED = S.BOUND | S.RUNNING | S.BINDING
QUOTA_PLUGINS = {"proportion", "capacity", "capacity-card"}
NOT_CARDS = ("ephemeral-storage", "hugepages-", "attachable-volumes-")


def _placed_by_node(simulation: Simulation) -> dict[str, tuple[Resource, Resource]]:
    """node -> (Σ placed incl. releasing, Σ placed excl. releasing)."""
    out: dict[str, tuple[Resource, Resource]] = {n: (Resource(), Resource())
                                                 for n in simulation.cache.nodes}
    for task in simulation.cache.tasks.values():
        if task.node_name in out and task.status & (PLACED | S.RELEASING):
            out[task.node_name][0].add(task.resreq)
            if not task.status & S.RELEASING:
                out[task.node_name][1].add(task.resreq)
    return out


def _cards_unlimited(simulation: Simulation) -> bool:
    return any(option.name == "capacity-card" and option.args.get("cardUnlimitedCpuMemory")
               for tier in simulation.conf.tiers for option in tier)


def _asks_cards(task: Task) -> bool:
    return any(amount > 0 and name != "pods" and not name.startswith(NOT_CARDS)
               for name, amount in task.resreq.scalars.items())


def _queue_allocated(simulation: Simulation) -> dict[str, Resource]:
    """Per queue, what its placed pods take (card pods' cpu and memory left out where
    capacity-card's cardUnlimitedCpuMemory says queues do not count them)."""
    cache = simulation.cache
    unlimited = _cards_unlimited(simulation)
    out: dict[str, Resource] = {}
    for job in cache.jobs.values():
        total = out.setdefault(job.queue, Resource())
        for task in job.tasks.values():
            if task.status & PLACED:
                if unlimited and _asks_cards(task):
                    total.add(Resource(0, 0, dict(task.resreq.scalars)))
                else:
                    total.add(task.resreq)
    return out


def _over(amount: Resource, limit: Resource, names: set[str]) -> list[str]:
    """Dimensions in `names` where amount passes limit (limits missing = unlimited;
    cpu/memory <= 0 = unlimited, as Volcano reads a capability)."""
    failing = []
    for name in names:
        cap = limit.get(name) if name in (CPU, MEMORY) or name in limit.scalars else None
        if cap is None or (name in (CPU, MEMORY) and cap <= 0):
            continue
        if amount.get(name) - cap >= 0.1:
            failing.append(name)
    return failing


def _gang_decides(simulation: Simulation) -> bool:
    return any(option.name == "gang" and option.enabled("job_ready")
               for tier in simulation.conf.tiers for option in tier)


def _gang_safe(simulation: Simulation) -> bool:
    actions = simulation.conf.action_args
    return all(actions[name].get("gangSafeEviction", True)
               for name in ("reclaim", "preempt") if name in actions)


def check_session(simulation: Simulation, before_pending: set[str],
                  before_queue: dict[str, Resource], before_placed: dict[str, int],
                  before_over: dict[str, set[str]]) -> None:
    """Check the invariants on the state just after `simulation.step()`."""
    cache = simulation.cache
    result = simulation.report.last
    assert result is not None
    number = simulation.report.sessions

    # 1. No node holds more than its allocatable. (A node the input already overloaded,
    # with pods of other schedulers, may stay so; the scheduler must add nothing to
    # the overloaded dimensions.)
    pipelined: dict[str, Resource] = {}
    bound: dict[str, set[str]] = {}  # node -> resources binds added
    waiting: dict[str, set[str]] = {}  # node -> resources pipelined tasks will take
    for key, node_name in result.pipelined.items():
        pipelined.setdefault(node_name, Resource()).add(cache.tasks[key].resreq)
        waiting.setdefault(node_name, set()).update(cache.tasks[key].resreq.names())
    for key, node_name in result.binds.items():
        bound.setdefault(node_name, set()).update(cache.tasks[key].resreq.names())
    for name, (with_releasing, staying) in _placed_by_node(simulation).items():
        allocatable = cache.nodes[name].allocatable
        future = staying.clone().add(pipelined.get(name, Resource()))
        added_now = bound.get(name, set())
        added_later = added_now | waiting.get(name, set())
        for what, amount, added in (("", with_releasing, added_now),
                                    ("pipelined ", future, added_later)):
            over = set(amount.insufficient(allocatable))
            excused = before_over.get(name, set()) - added
            assert not over - excused, (
                f"session {number}: node {name} {what}over {sorted(over - excused)}")

    # 2. Gangs: all of a job's session allocations or none (the gang plugin's promise:
    # a conf that turns its readiness check off asks for something else).
    new_by_job: dict[str, int] = {}
    for key in result.binds:
        job_id = cache.tasks[key].job_id
        new_by_job[job_id] = new_by_job.get(job_id, 0) + 1
    for job_id, new in new_by_job.items() if _gang_decides(simulation) else ():
        job = cache.jobs[job_id]
        placed = before_placed.get(job_id, 0) + new
        assert placed >= job.min_available, (
            f"session {number}: gang {job_id} bound {new} new task(s), "
            f"{placed} placed < minMember {job.min_available}")

    # 2b. Gangs under eviction: a job that loses pods keeps its minimum or loses all
    # (the default gang-safe eviction), unless it is the preemptor's own job.
    if _gang_safe(simulation):
        lost: dict[str, int] = {}
        for eviction in result.evictions:
            task = cache.tasks[eviction.task]
            if task.job_id != cache.tasks[eviction.preemptor].job_id:
                lost[task.job_id] = lost.get(task.job_id, 0) + 1
        for job_id in lost:
            job = cache.jobs[job_id]
            # (a pod whose node was deleted is not running anywhere: not counted)
            staying = job.count(S.SUCCEEDED) + sum(
                1 for t in job.tasks_in(PLACED) if t.node_name in cache.nodes)
            assert staying == 0 or staying >= job.min_available or (
                before_placed.get(job_id, 0) < job.min_available), (
                f"session {number}: gang {job_id} left with {staying} of minMember "
                f"{job.min_available} after evictions")

    # 7. No protected pod is evicted (its own annotation or its PodGroup's), nor a pod
    # whose node is gone; the generated clusters set no minimum runtime
    # (tests/framework/test_strategies.py checks it on clusters of their own).
    for eviction in result.evictions:
        task = cache.tasks[eviction.task]
        job = cache.jobs.get(task.job_id)
        assert task.preemptable and not (job is not None and job.spec.protected), (
            f"session {number}: protected pod {eviction.task} evicted")
        assert task.node_name in cache.nodes, (
            f"session {number}: pod {eviction.task} evicted from a node that is gone")

    # 3. Queue capability (when a quota plugin is configured).
    if QUOTA_PLUGINS & set(simulation.conf.plugin_names()):
        after = _queue_allocated(simulation)
        requested: dict[str, set[str]] = {}
        for key in result.binds:
            task = cache.tasks[key]
            names = set(task.resreq.names())
            if _cards_unlimited(simulation) and _asks_cards(task):
                names -= {"cpu", "memory"}
            requested.setdefault(cache.jobs[task.job_id].queue, set()).update(names)
        for queue_name, names in requested.items():
            queue = cache.queues.get(queue_name)
            if queue is None or queue.capability is None:
                continue
            over = _over(after[queue_name], queue.capability, names)
            already = set(_over(before_queue.get(queue_name, Resource()), queue.capability,
                                names))
            assert not set(over) - already, (
                f"session {number}: queue {queue_name} over its capability on {over}")

    # 4. No pod lost.
    evicted = {e.task for e in result.evictions}
    for key in before_pending:
        if key in result.binds or key in result.pipelined or key in evicted:
            continue
        reasons = result.pending.get(key)
        assert reasons, f"session {number}: pending pod {key} has no outcome and no reason"
        assert all(isinstance(r, str) and r for r in reasons), (key, reasons)


def check_topology(simulation: Simulation) -> None:
    """9. A job with a hard network topology limit (a tier, or a tier name its HyperNodes
    know) that got pods placed this session has all its placed pods (bound, running,
    binding, allocated, pipelined) within one HyperNode of that tier or lower; and so
    has each of its sub-groups whose policy has a hard limit and that got pods placed.
    (The tree is built by vscheduler.topology, tested on its own in
    tests/test_topology.py.)"""
    cache, result = simulation.cache, simulation.report.last
    if not cache.hypernodes or result is None:
        return
    topology = from_hypernodes(tuple(cache.hypernodes[n] for n in sorted(cache.hypernodes)),
                               {name: node.labels for name, node in cache.nodes.items()})
    moved = {cache.tasks[key].job_id for key in (*result.binds, *result.pipelined)}

    def where(task: Task) -> str | None:
        if task.key in result.pipelined:
            return result.pipelined[task.key]
        if task.node_name and task.status & (PLACED | S.ALLOCATED | S.PIPELINED):
            return task.node_name
        return None

    def check(what: str, wanted: NetworkTopology | None, tasks: Iterable[Task]) -> None:
        limit = topology.limit(wanted) if wanted is not None and wanted.mode == "hard" else None
        if limit is None:
            return
        nodes = {node for node in map(where, tasks) if node}
        held = topology.holding(sorted(nodes))
        assert held is None or held.tier <= limit, (
            f"session {simulation.report.sessions}: {what} (hard, tier {limit}) "
            f"spans {held.name} of tier {held.tier}: {sorted(nodes)}")

    for job_id in sorted(moved):
        job = cache.jobs[job_id]
        check(f"job {job_id}", job.spec.network_topology, job.tasks.values())
        for key, group in sorted(job.sub_groups().items()):
            if any(t.key in result.binds or t.key in result.pipelined for t in group.tasks):
                check(f"sub-group {key} of job {job_id}", group.policy.network_topology,
                      group.tasks)


# --------------------------------------------------------------------------- 10. inter-pod

# what a pod sees of the cluster: every pod on a node, with its node's name
View = list[tuple[Task, str]]
NAME_LABEL = "kubernetes.io/metadata.name"


def _placed_in(result: SessionResult) -> dict[str, str]:
    """Pod key -> node of the pods `result`'s session placed: bound, pipelined, and
    left allocated beside pipelined ones (a gang kept because it is pipelined, bound with
    none of its pods). The session judged every later pod with all of them where they
    are, as Volcano's does; the checks take the session's view."""
    placed = {**result.binds, **result.pipelined}
    placed.update((task.key, task.node_name) for job in result.podgroup_jobs.values()
                  for task in job.tasks_in(S.ALLOCATED) if task.node_name)
    return placed


def _pods_on_nodes(simulation: Simulation, result: SessionResult | None = None) -> View:
    """The pods on the nodes (what inter-pod rules read), after `result`: those it
    placed where it placed them (`_placed_in`), those it evicted gone; any status but
    finished."""
    cache = simulation.cache
    evicted = {e.task for e in result.evictions} if result is not None else set()
    placed = _placed_in(result) if result is not None else {}
    view = [(task, task.node_name) for key, task in cache.tasks.items()
            if task.node_name and task.node_name in cache.nodes and key not in evicted
            and key not in placed and not task.status & (S.SUCCEEDED | S.FAILED)]
    view += [(cache.tasks[key], name) for key, name in placed.items()]
    return view


def _requirement(requirement: tuple[str, str, tuple[str, ...]],
                 labels: Mapping[str, str]) -> bool:
    key, operator, values = requirement
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    return key not in labels  # DoesNotExist


def _picks(term: PodAffinityTerm, pod: Pod, namespaces: Mapping[str, Mapping[str, str]],
           ) -> bool:
    """Whether `term` picks `pod`, worked out here from the Kubernetes docs' words (a
    namespace listed or chosen by the namespace selector, {} choosing all; a missing
    label selector choosing no pod), not with the matching code under test."""
    chooser = term.namespace_selector
    namespace_ok = pod.namespace in term.namespaces or (chooser is not None and all(
        _requirement(r, namespaces.get(pod.namespace, {NAME_LABEL: pod.namespace}))
        for r in chooser))
    return namespace_ok and term.selector is not None and all(
        _requirement(r, pod.labels) for r in term.selector)


def _anti_affinity_broken(simulation: Simulation, placed: dict[str, str], view: View,
                          number: int) -> None:
    cache = simulation.cache
    namespaces = cache.namespaces
    labels = {name: node.labels for name, node in cache.nodes.items()}
    for key, node_name in placed.items():
        task = cache.tasks[key]
        for other, other_node in view:
            if other.key == key:
                continue
            pairs = []
            if task.pod.inter_pod is not None:
                pairs += [(term, task, other) for term in task.pod.inter_pod.anti_affinity]
            if other.pod.inter_pod is not None:
                pairs += [(term, other, task) for term in other.pod.inter_pod.anti_affinity]
            for term, owner, picked in pairs:
                value = labels[node_name].get(term.topology_key)
                assert not (value is not None
                            and labels[other_node].get(term.topology_key) == value
                            and _picks(term, picked.pod, namespaces)), (
                    f"session {number}: {owner.key}'s required anti-affinity "
                    f"({term.topology_key}={value}) picks {picked.key}, placed together")


def _affinity_unmet(simulation: Simulation, placed: dict[str, str], view: View,
                    number: int) -> None:
    cache = simulation.cache
    namespaces = cache.namespaces
    labels = {name: node.labels for name, node in cache.nodes.items()}
    for key, node_name in placed.items():
        task = cache.tasks[key]
        terms = task.pod.inter_pod.affinity if task.pod.inter_pod is not None else ()
        if not terms:
            continue
        near = [(other, other_node) for other, other_node in view
                if all(_picks(term, other.pod, namespaces) for term in terms)]
        for term in terms:
            value = labels[node_name].get(term.topology_key)
            assert value is not None and any(
                labels[other_node].get(term.topology_key) == value for _, other_node in near), (
                f"session {number}: {key} placed on {node_name} with no pod its required "
                f"affinity picks in {term.topology_key}={value}")


def spread_skews(simulation: Simulation, task: Task, view: View) -> list[int | None]:
    """For each DoNotSchedule constraint of `task`'s pod: the matching pods' skew over
    its domains (largest count less the smallest, the smallest 0 with fewer domains
    than minDomains), as kube-scheduler counts them: nodes with every constraint's key
    that pass the pod's node affinity (policy Honor) and taints (Honor); pods of its
    namespace, not terminating; None when no node is such a domain."""
    rules = task.pod.inter_pod
    hard = [c for c in (rules.spread if rules is not None else ()) if c.hard]
    keys = {c.term.topology_key for c in hard}
    nodes = simulation.cache.nodes
    out: list[int | None] = []
    for constraint in hard:
        domains = {name: node.labels[constraint.term.topology_key]
                   for name, node in nodes.items()
                   if keys <= node.labels.keys() and _counts_here(task.pod, constraint, node)}
        counts = dict.fromkeys(domains.values(), 0)
        if constraint.term.selector:  # (an empty selector counts no pod)
            for other, node_name in view:
                if (node_name in domains and other.status != S.RELEASING
                        and other.pod.namespace == task.pod.namespace
                        and _picks(constraint.term, other.pod, simulation.cache.namespaces)):
                    counts[domains[node_name]] += 1
        if not counts:
            out.append(None)
            continue
        lowest = 0 if len(counts) < (constraint.min_domains or 1) else min(counts.values())
        out.append(max(counts.values()) - lowest)
    return out


def _counts_here(pod: Pod, constraint: SpreadConstraint, node: Node) -> bool:
    """Whether `node`'s pods count for `constraint` of `pod` (its inclusion policies)."""
    labels = node.labels
    if constraint.honor_affinity and not (
            selector_matches(pod.node_selector, labels)
            and (pod.required_affinity is None
                 or required_affinity_matches(pod.required_affinity, labels, node.name))):
        return False
    return not (constraint.honor_taints and first_untolerated_taint(
        (t for t in node.taints if t[2] in HARD_EFFECTS), pod.tolerations))


def check_inter_pod(simulation: Simulation, before: dict[str, list[int | None]]) -> None:
    """10. Inter-pod rules hold for the pods the session placed (bound, pipelined, or
    left allocated beside pipelined ones: `_placed_in`), among every pod on the nodes
    (those already running, terminating ones too; not those it evicted): (a) no required
    anti-affinity, the placed pod's or another's, picks a pod in the same domain; (b)
    each term of a placed pod's required affinity has, in the node's domain, a pod
    (itself, for the first of a group) that all its terms pick (unless the session
    evicted pods: one it counted on may be gone); (c) a DoNotSchedule spread constraint
    of a placed pod ends with a skew of at most its maxSkew, or of what it was before
    the session if that was more (`before`: the skews of each pending pod,
    `spread_skews`), unless the session evicted pods or placed a pod the constraint
    counts that does not carry it."""
    result = simulation.report.last
    if result is None:
        return
    cache = simulation.cache
    placed = _placed_in(result)
    if not placed or all(t.pod.inter_pod is None for t in cache.tasks.values()):
        return
    number = simulation.report.sessions
    view = _pods_on_nodes(simulation, result)
    _anti_affinity_broken(simulation, placed, view, number)
    if result.evictions:
        return
    _affinity_unmet(simulation, placed, view, number)
    for key in placed:
        task = cache.tasks[key]
        rules = task.pod.inter_pod
        hard = [c for c in rules.spread if c.hard] if rules is not None else []
        if not hard:
            continue
        for constraint, was, now in zip(hard, before.get(key) or [None] * len(hard),
                                        spread_skews(simulation, task, view), strict=True):
            if any(_unbound_by(constraint, cache.tasks[other], cache.namespaces)
                   for other in placed):
                continue  # (a pod it counts, placed without it, may skew it at will)
            assert now is not None and now <= max(constraint.max_skew, was or 0), (
                f"session {number}: {key} placed; its spread over "
                f"{constraint.term.topology_key} now skews {now} (maxSkew "
                f"{constraint.max_skew}, {was} before)")


def _unbound_by(constraint: SpreadConstraint, task: Task,
                namespaces: Mapping[str, Mapping[str, str]]) -> bool:
    """`task` counts for `constraint` but is not held by it (not among its own)."""
    rules = task.pod.inter_pod
    return (task.pod.namespace in constraint.term.namespaces
            and _picks(constraint.term, task.pod, namespaces)
            and (rules is None or constraint not in rules.spread))


def _spread_before(simulation: Simulation) -> dict[str, list[int | None]]:
    tasks = [t for t in simulation.cache.tasks.values() if t.status == S.PENDING
             and t.pod.inter_pod is not None and any(c.hard for c in t.pod.inter_pod.spread)]
    if not tasks:
        return {}
    view = _pods_on_nodes(simulation)
    return {t.key: spread_skews(simulation, t, view) for t in tasks}


def run_checked(simulation: Simulation, sessions: int) -> None:
    for _ in range(sessions):
        cache = simulation.cache
        # What is pending at the start of the step (after time moved on).
        simulation._advance()
        before_pending = {k for k, t in cache.tasks.items()
                          if t.job_id and t.status == S.PENDING}
        before_queue = _queue_allocated(simulation)
        before_placed = {uid: job.count(PLACED | S.SUCCEEDED)
                         for uid, job in cache.jobs.items()}
        before_over = {
            name: set(placed.insufficient(cache.nodes[name].allocatable))
            for name, (placed, _) in _placed_by_node(simulation).items()}
        before_spread = _spread_before(simulation)
        simulation.step()
        check_session(simulation, before_pending, before_queue, before_placed, before_over)
        check_topology(simulation)
        check_inter_pod(simulation, before_spread)
        # The cache's list of nominated pods (what a session reads instead of visiting
        # every pending pod) is what a recount of its pods finds.
        assert cache._nominated == {
            key: (task.job_id, task.uid, task.pod.nominated_node)
            for key, task in cache.tasks.items() if task.job_id and task.pod.nominated_node}
        # (the empty amount every tally hands out for a job without a part is shared)
        empty = Tally("jobs", None, 1, lambda job: None).amount("none", 0)
        assert not (empty.cpu or empty.memory or empty.scalars)
