"""network-topology-aware: which topology domain a gang goes to, and where in it.

Allocate tries a gang limited by its PodGroup's `networkTopology` in the domains its tier
allows (`vscheduler.framework.topology_placement`); this plugin scores them
(`domain_order`) and the nodes within (`node_order`), with Volcano's arguments:

- A domain scores how full it would be with the gang's pending pods in it, binpack at
  the HyperNode level: for each weighted resource (cpu, memory, and the extra ones named
  in `hypernode.binpack.resources`) `(used + requested) / allocatable * weight`, summed,
  divided by the sum of the weights, times 100 and `weight`; 0 if one would overflow.
  Full domains fill up first, and whole ones stay free for the next large gang.
  (Volcano counts a job's running pods in the request too, on top of their place in
  `used`: here only the pods still to place are.)
- A node scores how close it is to where the job already is: 100 in the same lowest
  domain, less for each tier their lowest common domain stands higher, 0 at the top:
  `(top tier - tier of the common domain) / (top tier - lowest tier) * 100 * weight`.
  A job with nothing placed yet gets no node scores from here.

Clusters without HyperNode objects can give a topology by node labels:
`topology.labels` lists the keys, widest first (`example.com/block, example.com/rack`);
each is a tier, the last tier 1, and a PodGroup names one in `highestTierName`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from vscheduler.hookspecs import SessionView, hookimpl
from vscheduler.model import ALLOCATED_STATUSES, Job, Node, Task, TaskStatus
from vscheduler.plugin import Argument, ArgumentError, LimitArgument, Plugin
from vscheduler.resources import CPU, MEMORY, Resource
from vscheduler.topology import Domain, Topology, from_labels

__all__ = ["NetworkTopologyPlugin"]

MAX_SCORE = 100
RESOURCES_KEY = "hypernode.binpack.resources"
LABELS_KEY = "topology.labels"
_PLACED = ALLOCATED_STATUSES | TaskStatus.PIPELINED


class LabelKeys(Argument):
    """Node label keys, as a YAML list or one comma-separated string, each once."""

    def convert(self, raw: Any) -> Any:
        if isinstance(raw, str):
            items: list[Any] = raw.split(",")
        elif isinstance(raw, list) and all(isinstance(item, str) for item in raw):
            items = raw
        else:
            raise ArgumentError(f"must be a list of label keys or a comma-separated string, "
                                f"got {raw!r}")
        keys = tuple(item.strip() for item in items if item.strip())
        if len(set(keys)) != len(keys):
            raise ArgumentError(f"names a label twice: {raw!r}")
        return keys


class NetworkTopologyPlugin(Plugin):
    name = "network-topology-aware"
    arguments = (
        LimitArgument("weight", int, 1, "multiplier of the domain and node scores"),
        LimitArgument("hypernode.binpack.cpu", int, 1, "weight of cpu in a domain's score"),
        LimitArgument("hypernode.binpack.memory", int, 1,
                      "weight of memory in a domain's score"),
        Argument(RESOURCES_KEY, str, "", "extra resources a domain is scored on, comma "
                                         "separated"),
        LimitArgument(f"{RESOURCES_KEY}.*", int, 1, "weight of one extra resource"),
        LabelKeys(LABELS_KEY, list, (), "node label keys, widest first, that make the "
                                        "topology where no HyperNode exists"),
    )

    def __init__(self, args: dict[str, Any]) -> None:
        super().__init__(args)
        self.labels: tuple[str, ...] = tuple(args.get(LABELS_KEY) or ())
        self.weight = args.get("weight", 1)
        weights = {CPU: args.get("hypernode.binpack.cpu", 1),
                   MEMORY: args.get("hypernode.binpack.memory", 1)}
        for name in str(args.get(RESOURCES_KEY) or "").split(","):
            name = name.strip()
            if name:
                weights[name] = args.get(f"{RESOURCES_KEY}.{name}", 1)
        self.weights = weights
        self.topology: Topology | None = None

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        if session.topology is None and self.labels:
            nodes = {node.name: node.labels for node in session.node_list}
            session.topology = session.keep(
                f"{self.name}.labels", (session.node_specs, self.labels),
                lambda: from_labels(self.labels, nodes))
        self.topology = session.topology
        # domain -> what its nodes use, counted when first asked, then moved by events
        self.used: dict[str, Resource] = {}
        # job uid -> (the session's change count, where its placed pods are; what its
        # pending pods ask)
        self._placed_in: dict[str, tuple[int, Domain | None]] = {}
        self._requests: dict[str, tuple[int, Resource]] = {}

    # ---------------------------------------------------------------- domains

    def _used(self, domain: Domain) -> Resource:
        used = self.used.get(domain.name)
        if used is None:
            used = self.used[domain.name] = Topology.summed(
                domain, self.session.nodes, lambda node: node.used)
        return used

    def _allocatable(self, domain: Domain) -> Resource:
        """What the domain's nodes offer, summed (kept with the tree: a change to the
        nodes' specs builds another)."""
        assert self.topology is not None
        sums = self.topology.memo.setdefault(f"{self.name}.allocatable", {})
        total = sums.get(domain.name)
        if total is None:
            total = sums[domain.name] = Topology.summed(
                domain, self.session.nodes, lambda node: node.allocatable)
        return total

    def _request(self, job: Job) -> Resource:
        """What the job's pending pods ask, summed once per job while no node changes
        (allocate scores every candidate domain for the same gang)."""
        changes = len(self.session.node_changes)
        known = self._requests.get(job.uid)
        if known is not None and known[0] == changes:
            return known[1]
        request = Resource()
        for task in job.tasks_in(TaskStatus.PENDING):
            request.add(task.resreq)
        self._requests[job.uid] = (changes, request)
        return request

    @hookimpl
    def domain_order(self, job: Job, domain: Domain) -> float:
        request = self._request(job)
        used, allocatable = self._used(domain), self._allocatable(domain)
        score, weights = 0.0, 0
        for name, weight in self.weights.items():
            amount = request.get(name)
            if amount <= 0:
                continue
            capacity = allocatable.get(name)
            total = used.get(name) + amount
            if total > capacity:
                return 0.0  # (the gang would overflow it: it holds no room for it)
            if weight:
                score += weight * total / capacity
            weights += weight
        return (score / weights if weights else 0.0) * MAX_SCORE * self.weight

    @hookimpl
    def allocate_event(self, task: Task) -> str | None:
        self._move(task, 1.0)
        return None

    @hookimpl
    def deallocate_event(self, task: Task) -> None:
        self._move(task, -1.0)

    def _move(self, task: Task, sign: float) -> None:
        topology = self.topology
        if topology is None or not self.used or not task.node_name:
            return
        for domain in (*topology.containing.get(task.node_name, ()), topology.top):
            used = self.used.get(domain.name)
            if used is not None:
                if sign > 0:
                    used.add(task.resreq)
                else:
                    used.sub(task.resreq)

    # ---------------------------------------------------------------- nodes

    def _where(self, job: Job) -> Domain | None:
        """The lowest domain holding the job's placed pods (None: none placed), worked
        out again only after nodes changed."""
        topology = self.topology
        if topology is None:
            return None
        changes = len(self.session.node_changes)
        known = self._placed_in.get(job.uid)
        if known is not None and known[0] == changes:
            return known[1]
        where = topology.holding(t.node_name for t in job.tasks_in(_PLACED) if t.node_name)
        self._placed_in[job.uid] = (changes, where)
        return where

    def _job_of(self, task: Task) -> Job | None:
        job = self.session.jobs.get(task.job_id)
        if job is None or job.spec.network_topology is None:
            return None
        return job

    @hookimpl
    def task_signature(self, task: Task) -> Hashable:
        """Where the task's job already is: node scores follow from it."""
        job = self._job_of(task)
        if job is None:
            return None
        where = self._where(job)
        return where.name if where is not None else None

    @hookimpl
    def node_order(self, task: Task, node: Node) -> float:
        topology = self.topology
        job = self._job_of(task) if topology is not None else None
        if job is None or topology is None:
            return 0.0
        where = self._where(job)
        if where is None:
            return 0.0
        common = topology.lowest_common(where, topology.leaf_of(node.name))
        span = topology.max_tier - topology.min_tier
        closeness = 1.0 if span <= 0 else (topology.max_tier - common.tier) / span
        return closeness * MAX_SCORE * self.weight
