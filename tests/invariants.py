"""The invariants of ARCHITECTURE.md, checked after every session of a simulation.

`run_checked(simulation, sessions)` steps a Simulation and raises AssertionError naming
the invariant, the session and the object whenever one does not hold. The checks
recompute everything from the cache's tasks, not from the accounting they check.
"""

from __future__ import annotations

from vscheduler.model import Task, TaskStatus
from vscheduler.resources import CPU, MEMORY, Resource
from vscheduler.simulate import Simulation
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
            staying = job.count(PLACED | S.SUCCEEDED)
            assert staying == 0 or staying >= job.min_available or (
                before_placed.get(job_id, 0) < job.min_available), (
                f"session {number}: gang {job_id} left with {staying} of minMember "
                f"{job.min_available} after evictions")

    # 7. No protected pod is evicted (its own annotation or its PodGroup's); the
    # generated clusters set no minimum runtime (tests/framework/test_strategies.py
    # checks it on clusters of their own).
    for eviction in result.evictions:
        task = cache.tasks[eviction.task]
        job = cache.jobs.get(task.job_id)
        assert task.preemptable and not (job is not None and job.spec.protected), (
            f"session {number}: protected pod {eviction.task} evicted")

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
    """8. A job with a hard network topology limit (a tier, or a tier name its HyperNodes
    know) that got pods placed this session has all its placed pods (bound, running,
    binding, allocated, pipelined) within one HyperNode of that tier or lower. (The tree
    is built by vscheduler.topology, tested on its own in tests/test_topology.py.)"""
    cache, result = simulation.cache, simulation.report.last
    if not cache.hypernodes or result is None:
        return
    topology = from_hypernodes(tuple(cache.hypernodes[n] for n in sorted(cache.hypernodes)),
                               {name: node.labels for name, node in cache.nodes.items()})
    moved = {cache.tasks[key].job_id for key in (*result.binds, *result.pipelined)}
    for job_id in sorted(moved):
        job = cache.jobs[job_id]
        wanted = job.spec.network_topology
        limit = topology.limit(wanted) if wanted is not None and wanted.mode == "hard" else None
        if limit is None:
            continue
        nodes = {t.node_name for t in job.tasks.values()
                 if t.node_name and t.status & (PLACED | S.ALLOCATED | S.PIPELINED)}
        nodes.update(result.pipelined[t.key] for t in job.tasks.values()
                     if t.key in result.pipelined)
        held = topology.holding(sorted(nodes))
        assert held is not None and held.tier <= limit, (
            f"session {simulation.report.sessions}: job {job_id} (hard, tier {limit}) "
            f"spans {held.name if held else '?'} of tier {held.tier if held else '?'}: "
            f"{sorted(nodes)}")


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
        simulation.step()
        check_session(simulation, before_pending, before_queue, before_placed, before_over)
        check_topology(simulation)
