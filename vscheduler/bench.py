"""`vscheduler bench`: real sessions on a generated cluster, timed phase by phase.

The cluster is built from a seed (same flags, same cluster, same decisions): GPU nodes
of several card models (every `--mig-every`th node split into MIG slices), queues with
card quotas, gang jobs already running and gang jobs pending. Objects go through the
same parsing and cache as manifests do, so the figures are those of the real path.

`--churn N` measures the steady state: before every session after the first, N running
pods finish and N new pods arrive, so each session has work but little changed;
`--depart N` and `--arrive N` set the two apart (pods finishing only frees room, pods
arriving only adds work). `--shape JOBSxTASKS` gives the pending work as JOBS gang jobs
of TASKS pods each (the running jobs keep `--tasks-per-job`).

`--scene` picks the cluster (see `SCENES`): besides the default one, two scenes where
GPUs must be taken back from running work, whose figures (evictions, the time of the
reclaim and preempt phases) are what eviction is judged by:
- `tidal` (seed 002): every node full with one training gang (one one-GPU pod per card),
  and `jobs` one-GPU inference pods pending, under `conf/tidal-reclaim.conf`'s conf. The
  report gives the evictions beside the fewest that free enough with gangs kept whole.
- `volcano-preempt`: Volcano's default conf with capacity-card and reclaim and preempt
  on, every card of the cluster taken by low-priority gangs and `jobs` high-priority
  one-pod jobs pending, so every session weighs victims on every node.
- `hierarchy`: the default cluster with its `queues` as the leaves of a tree of
  departments (`QUEUE_FANOUT` to a parent, under root), capacity's hierarchical mode in
  place of proportion: what open and close cost as queues grow.
- `topology`: nodes of `gpus_per_node` cards under a four-tier tree of HyperNodes
  (`TOPOLOGY_TIERS`: racks, rows, blocks, superblocks), every other running pod on a
  card and the cards taken rack by rack unevenly, so free cards are scattered; the
  pending gangs have a hard network topology at `topology_tier`. The report counts the
  gangs bound and those whose nodes are not within one domain of their tier (violations:
  must be none).

and two sized as the clusters a session's cost is judged on (`SCENE_SIZES`):
- `overload`: the default cluster at 5,000 nodes with 150,000 pods, 60,000 running and
  90,000 pending in gangs of four, far more than the 4,000 cards left free: every
  session tries them all and places few, so what a session costs when little changed
  shows.
- `topology` at 5,000 nodes: 40,000 pods running and 100 gangs of 64 one-card pods
  pending, each to be placed within one rack (or one domain of `--topology-tier`).
- `anti-affinity`: the default cluster at 5,000 nodes with 40,000 pods running, and
  `jobs` (1,000) replicas of one Deployment-like app (one-pod jobs, no PodGroup, label
  `app: web`, a CPU and 2 GiB each) with required pod anti-affinity against `app: web`
  by `kubernetes.io/hostname`: at most one replica a node. The replicas arrive after
  the first session (as `--arrive` adds pods), so session 1 settles the running cluster
  (the cold start that builds the cache's kept sums, whatever is pending) and session 2
  is the one that places them: its figures are the scene's. It runs two sessions unless
  told more. `--zone-spread` gives the replicas a topology spread constraint too
  (`DoNotSchedule`, maxSkew 1 over `topology.kubernetes.io/zone`). The report counts
  the replicas bound and the violations: nodes holding two or more replicas, and (with
  the spread) zones whose replicas differ by more than one; both must be none.

The JSON figures end with a `summary` (medians over the sessions, and over the sessions
after the first, which is the one that places the work already pending) that a script
compares between two commits.
"""

from __future__ import annotations

import gc
import json
import random
import resource
import statistics
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from vscheduler.conf import DEFAULT_CONF, SchedulerConf
from vscheduler.framework.placement import NodeSampling
from vscheduler.simulate import Simulation

__all__ = ["BENCH_CONF", "PREEMPT_CONF", "SCENES", "SCENE_SIZES", "TIDAL_CONF",
           "TOPOLOGY_CONF", "TOPOLOGY_TIERS", "ZONES", "BenchSpec", "anti_affinity_check",
           "churn", "generate", "minimum_tidal_evictions", "replicas", "run_bench",
           "scene_conf", "scene_spec", "summarize", "topology_check", "topology_domains"]

# Volcano's default conf with capacity-card (per-card-model quotas) in the second tier.
BENCH_CONF = DEFAULT_CONF.replace("  - name: proportion\n",
                                  "  - name: proportion\n  - name: capacity-card\n")
# The same with the actions that take resources back, as a cluster that preempts runs it.
PREEMPT_CONF = BENCH_CONF.replace('actions: "enqueue, allocate, backfill"',
                                  'actions: "enqueue, allocate, backfill, reclaim, preempt"')
# conf/tidal-reclaim.conf's conf (a test keeps the two the same): the bench is also run
# from an installed wheel, which carries no conf/ directory.
TIDAL_CONF = """\
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
  - name: conformance
    enableReclaimable: false
- plugins:
  - name: predicates
  - name: capacity-card
    arguments:
      overCommitFactor: 2
      cardUnlimitedCpuMemory: true
      podOwnerReferenceToServiceType:
        ReplicaSet: inference
        Deployment: inference
        Job: training
  - name: nodeorder
"""
# The same with capacity's hierarchical queues in place of proportion.
HIERARCHY_CONF = BENCH_CONF.replace("  - name: proportion\n",
                                    "  - name: capacity\n    enableHierarchy: true\n")
# conf/topology.conf's conf (a test keeps the two the same): Volcano's default plugins
# and network-topology-aware, which scores domains by how full of cards they would be.
TOPOLOGY_CONF = DEFAULT_CONF + """\
  - name: network-topology-aware
    arguments:
      hypernode.binpack.resources: nvidia.com/gpu
"""
# Each scene's conf when `--conf` is not given.
SCENES = {"default": BENCH_CONF, "tidal": TIDAL_CONF, "volcano-preempt": PREEMPT_CONF,
          "overload": BENCH_CONF, "hierarchy": HIERARCHY_CONF, "topology": TOPOLOGY_CONF,
          "anti-affinity": BENCH_CONF}
# hierarchy: each parent queue holds this many children, level after level.
QUEUE_FANOUT = 10
# The sizes a scene has unless told otherwise (`scene_spec`). overload: 5,000 nodes hold
# 64,000 cards (every tenth node split into 56 MIG slices), 60,000 of them taken.
# topology: the target, 100 gangs of 64 one-card pods beside 40,000 running.
# anti-affinity: the target, 1,000 replicas beside 40,000 running, placed by
# the second session.
SCENE_SIZES: dict[str, dict[str, int]] = {
    "overload": {"nodes": 5000, "running": 60_000, "jobs": 22_500, "tasks_per_job": 4},
    "topology": {"nodes": 5000, "running": 40_000, "jobs": 100, "tasks_per_job": 64},
    "anti-affinity": {"nodes": 5000, "running": 40_000, "jobs": 1000, "sessions": 2}}
# topology: the tiers of its tree, lowest first, each (name, how many of the tier below
# one holds): a rack is 16 nodes (128 cards at 8 a node: a gang of 64 fits one half
# free), a row 4 racks, a block 4 rows, a superblock 5 blocks (1,280 nodes). The last
# of each tier may hold fewer. At 5,000 nodes: 313 racks, 79 rows, 20 blocks and 4
# superblocks.
TOPOLOGY_TIERS = (("rack", 16), ("row", 4), ("block", 4), ("superblock", 5))

CARD_MODELS = ("NVIDIA-H200", "NVIDIA-H800", "NVIDIA-GeForce-RTX-4090")
CARD_MEMORY_MIB = {"NVIDIA-H200": 143771, "NVIDIA-H800": 81559,
                   "NVIDIA-GeForce-RTX-4090": 24564}
MIG_PROFILE = "1g.18gb"
SCHEDULER = "vscheduler"
# Every scene's nodes are spread over this many zones (`topology.kubernetes.io/zone`
# zone-0, zone-1, ...), node i in zone i % ZONES.
ZONES = 3
# anti-affinity: the replicas' app label, and the ReplicaSet that owns them.
REPLICA_LABELS = {"app": "web"}
REPLICA_SET = "web-5d8f7c9b"


@dataclass
class BenchSpec:
    nodes: int = 100
    gpus_per_node: int = 8
    cpu_per_node: int = 128
    memory_gi_per_node: int = 1024
    pods_per_node: int = 110
    mig_every: int = 10
    queues: int = 4
    jobs: int = 20
    tasks_per_job: int = 4
    running: int = 200
    sessions: int = 1
    # Pods finishing and arriving before each session after the first: `churn` of each
    # unless `depart` or `arrive` says otherwise.
    churn: int = 0
    seed: int = 1
    card_models: tuple[str, ...] = field(default=CARD_MODELS)
    scene: str = "default"
    arrive: int | None = None
    depart: int | None = None
    # Pods in each pending job (`--shape`): None for the scene's own (`tasks_per_job`,
    # or one in volcano-preempt).
    pending_tasks: int | None = None
    # topology: the tier (1: rack, ... 4: superblock) the pending gangs are held within.
    topology_tier: int = 1
    # anti-affinity: the replicas are also spread over zones (maxSkew 1, DoNotSchedule).
    zone_spread: bool = False
    # topology: each pending gang in this many sub-groups (0: none), each held to a rack.
    sub_groups: int = 0

    def __post_init__(self) -> None:
        if self.arrive is None:
            self.arrive = self.churn
        if self.depart is None:
            self.depart = self.churn
        # Without nodes there is nothing to place on, and a job of no tasks never fills
        # its share of the running pods: the generator would loop forever.
        for name in ("nodes", "gpus_per_node", "cpu_per_node", "memory_gi_per_node",
                     "pods_per_node", "queues", "tasks_per_job", "sessions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more, not {getattr(self, name)}")
        for name in ("mig_every", "jobs", "running", "churn", "arrive", "depart"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, not {getattr(self, name)}")
        if self.pending_tasks is not None and self.pending_tasks < 1:
            raise ValueError(f"pending_tasks must be 1 or more, not {self.pending_tasks}")
        if not self.card_models:
            raise ValueError("card_models must name at least one card model")
        if self.scene not in SCENES:
            raise ValueError(f"scene must be one of {', '.join(SCENES)}, not {self.scene!r}")
        if not 1 <= self.topology_tier <= len(TOPOLOGY_TIERS):
            raise ValueError(f"topology_tier must be 1 to {len(TOPOLOGY_TIERS)} "
                             f"({', '.join(name for name, _ in TOPOLOGY_TIERS)}), not "
                             f"{self.topology_tier}")
        if self.scene == "tidal" and self.pending_tasks is not None:
            raise ValueError("the tidal scene's pending pods are inference replicas, one "
                             "to a ReplicaSet: it takes no pending_tasks (--shape)")
        if self.scene == "anti-affinity":
            if self.pending_tasks is not None:
                raise ValueError("the anti-affinity scene's pending pods are the replicas "
                                 "of one app, one pod each: it takes no pending_tasks "
                                 "(--shape)")
            if self.sessions < 2:
                raise ValueError("the anti-affinity scene's replicas arrive after the "
                                 "first session: sessions must be 2 or more, not "
                                 f"{self.sessions}")
        elif self.zone_spread:
            raise ValueError("zone_spread (--zone-spread) is the anti-affinity scene's: "
                             f"the {self.scene} scene has no replicas to spread")
        if self.sub_groups and (self.scene != "topology" or self.sub_groups < 0
                                or self.tasks_pending % self.sub_groups):
            raise ValueError("sub_groups (--sub-groups) is the topology scene's, and must "
                             f"divide the pods of a gang ({self.tasks_pending}), not "
                             f"{self.sub_groups}")

    @property
    def tasks_pending(self) -> int:
        """Pods in each pending job."""
        if self.pending_tasks is not None:
            return self.pending_tasks
        return (1 if self.scene in ("tidal", "volcano-preempt", "anti-affinity")
                else self.tasks_per_job)


def scene_spec(scene: str = "default", **given: Any) -> BenchSpec:
    """The spec of a scene: what is `given` (None is not given), else the scene's size
    (`SCENE_SIZES`), else BenchSpec's defaults."""
    chosen = {name: value for name, value in given.items() if value is not None}
    return BenchSpec(**{**SCENE_SIZES.get(scene, {}), **chosen, "scene": scene})


def scene_conf(scene: str) -> str:
    """The conf a scene runs when none is given."""
    return SCENES[scene]


def _node(name: str, model: str, spec: BenchSpec, mig: bool, zone: int) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": model,
              "nvidia.com/gpu.memory": str(CARD_MEMORY_MIB.get(model, 81920)),
              "nvidia.com/gpu.count": str(spec.gpus_per_node),
              "topology.kubernetes.io/zone": f"zone-{zone}"}
    allocatable = {"cpu": str(spec.cpu_per_node), "memory": f"{spec.memory_gi_per_node}Gi",
                   "pods": str(spec.pods_per_node)}
    if mig:
        allocatable[f"nvidia.com/mig-{MIG_PROFILE}"] = str(spec.gpus_per_node * 7)
    else:
        allocatable["nvidia.com/gpu"] = str(spec.gpus_per_node)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": allocatable}}


# The topology scene's sub-groups: the pod label that numbers a pod's part of its gang.
SUB_GROUP_LABEL = "bench.vscheduler/part"


def _pod(name: str, namespace: str, group: str, queue: str, card: str, resource_name: str,
         cpu: int, memory_gi: int, priority_class: str, node: str = "") -> dict[str, Any]:
    """A pod asking one `resource_name` (none if "") of card `card` (unnamed if "")."""
    requests = {"cpu": str(cpu), "memory": f"{memory_gi}Gi"}
    if resource_name:
        requests[resource_name] = "1"
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER, "priorityClassName": priority_class,
        "containers": [{"name": "main", "image": "trainer",
                        "resources": {"requests": requests}}]}
    annotations = {"volcano.sh/card.name": card} if card else {}
    if group:
        annotations["scheduling.k8s.io/group-name"] = group
    else:
        annotations["scheduling.volcano.sh/queue-name"] = queue
    status = {"phase": "Pending"}
    if node:
        spec["nodeName"] = node
        status["phase"] = "Running"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": namespace, "annotations": annotations},
        "spec": spec, "status": status}


def _podgroup(name: str, namespace: str, queue: str, members: int, priority_class: str,
              phase: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": members, "queue": queue, "priorityClassName": priority_class},
            "status": {"phase": phase}}


def generate(spec: BenchSpec) -> list[dict[str, Any]]:
    """The cluster as Kubernetes objects, the same for the same spec."""
    if spec.scene == "tidal":
        return _tidal(spec)
    if spec.scene == "topology":
        return _topology(spec)
    if spec.scene == "anti-affinity":
        # the default cluster, running pods only: the replicas come later (`replicas`)
        return generate(replace(spec, scene="default", jobs=0, sessions=1, zone_spread=False))
    # volcano-preempt: every card taken by low-priority gangs, the pending jobs of one
    # high-priority pod each, so preempt (same queue) and reclaim (other queues) have
    # victims on every node.
    full = spec.scene == "volcano-preempt"
    rng = random.Random(spec.seed)
    objects: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": value}
        for name, value in (("high", 100000), ("normal", 10000), ("low", 1000))]
    models = list(spec.card_models)
    node_cards: list[tuple[str, str, str]] = []  # (node, card name, resource name)
    for i in range(spec.nodes):
        name = f"node-{i:05d}"
        model = models[i % len(models)]
        mig = spec.mig_every > 0 and i % spec.mig_every == spec.mig_every - 1
        objects.append(_node(name, model, spec, mig, i % ZONES))
        if mig:
            node_cards.append((name, f"{model}/mig-{MIG_PROFILE}-mixed",
                               f"nvidia.com/mig-{MIG_PROFILE}"))
        else:
            node_cards.append((name, model, "nvidia.com/gpu"))
    # Card quotas: every queue may use every card, generously (the bench measures
    # speed, not refusals).
    total_cards = spec.nodes * spec.gpus_per_node * 7
    quota = {card: total_cards for _, card, _ in node_cards}
    queue_names = [f"queue-{q}" for q in range(max(spec.queues, 1))]
    parents = _queue_tree(queue_names) if spec.scene == "hierarchy" else {}
    for name in queue_names:
        queue_spec: dict[str, Any] = {"weight": rng.randint(1, 4)}
        if name in parents:
            queue_spec["parent"] = parents[name]
        objects.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                        "metadata": {"name": name,
                                     "annotations": {"volcano.sh/card.quota":
                                                     json.dumps(quota, sort_keys=True)}},
                        "spec": queue_spec})
    for name in sorted(set(parents.values()) - {"root"}):
        objects.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                        "metadata": {"name": name},
                        "spec": {"parent": parents[name]} if name in parents else {}})
    # Running jobs, tasks_per_job pods each, placed where they fit.
    slots = {name: [spec.gpus_per_node * (7 if "mig" in card else 1), spec.cpu_per_node]
             for name, card, _ in node_cards}
    placed = 0
    job = 0
    cursor = 0
    running = sum(gpus for gpus, _ in slots.values()) if full else spec.running
    running_class = "low" if full else "normal"
    while placed < running and cursor < len(node_cards):
        queue = rng.choice(queue_names)
        group = f"running-{job:05d}"
        size = min(spec.tasks_per_job, running - placed)
        pods = []
        while len(pods) < size and cursor < len(node_cards):
            node, card, resource_name = node_cards[cursor]
            if slots[node][0] < 1 or slots[node][1] < 2:
                cursor += 1
                continue
            slots[node][0] -= 1
            slots[node][1] -= 2
            pods.append(_pod(f"{group}-{len(pods)}", "bench", group, queue, card,
                             resource_name, 2, 8, running_class, node))
        objects.append(_podgroup(group, "bench", queue, len(pods), running_class, "Running"))
        objects.extend(pods)
        placed += len(pods)
        job += 1
    # Pending gang jobs.
    tasks = spec.tasks_pending
    for j in range(spec.jobs):
        _, card, resource_name = rng.choice(node_cards)
        queue = rng.choice(queue_names)
        priority_class = "high" if full else rng.choice(("high", "normal", "low"))
        group = f"train-{j:05d}"
        objects.append(_podgroup(group, "bench", queue, tasks, priority_class, "Pending"))
        objects.extend(_pod(f"{group}-{t}", "bench", group, queue, card, resource_name, 4,
                            16, priority_class) for t in range(tasks))
    return objects


def _queue_tree(leaves: list[str]) -> dict[str, str]:
    """Queue -> its parent: the leaves grouped `QUEUE_FANOUT` to a department, the
    departments likewise, until few enough are left to hang off root."""
    parents: dict[str, str] = {}
    level, members = 0, leaves
    while len(members) > QUEUE_FANOUT:
        level += 1
        groups = [members[i:i + QUEUE_FANOUT] for i in range(0, len(members), QUEUE_FANOUT)]
        above = [f"dept-{level}-{g}" for g in range(len(groups))]
        for group, parent in zip(groups, above, strict=True):
            parents.update((member, parent) for member in group)
        members = above
    parents.update((member, "root") for member in members)
    return parents


TIDAL_CARD = "NVIDIA-GeForce-RTX-4090"


def _owner(kind: str, api_version: str, name: str) -> list[dict[str, Any]]:
    return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": f"{name}-uid",
             "controller": True}]


def _tidal(spec: BenchSpec) -> list[dict[str, Any]]:
    """Seed 002's cluster at scale: `nodes` nodes of `gpus_per_node` cards, each full
    with one training gang of `gpus_per_node` one-GPU pods (Job owners, PodGroup of
    service type training, in `queues` training queues of priority 20000, reclaimable),
    and `jobs` one-GPU inference pods pending (ReplicaSet owners, one inference queue of
    priority 80000, not reclaimable). The same for the same spec."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": name}, "value": value}
        for name, value in (("pc-high", 80000), ("pc-lowest", 20000))]
    gpus = spec.gpus_per_node
    training = [f"queue-training-{q}" for q in range(spec.queues)]
    # Each training queue's quota is what its gangs use; inference may take every card.
    gangs_per_queue = [len(range(q, spec.nodes, spec.queues)) for q in range(spec.queues)]
    for name, gangs in zip(training, gangs_per_queue, strict=True):
        objects.append(_tidal_queue(name, 20000, True, gangs * gpus))
    objects.append(_tidal_queue("queue-inference", 80000, False, spec.nodes * gpus))
    for i in range(spec.nodes):
        node = f"node-{i:05d}"
        objects.append(_node(node, TIDAL_CARD, replace(spec, mig_every=0), False, i % ZONES))
        group = f"train-{i:05d}"
        queue = training[i % spec.queues]
        objects.append({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": group, "namespace": "training",
                         "annotations": {"volcano.sh/service.type": "training"}},
            "spec": {"minMember": gpus, "queue": queue, "priorityClassName": "pc-lowest"},
            "status": {"phase": "Running"}})
        for t in range(gpus):
            pod = _pod(f"{group}-worker-{t}", "training", group, queue, TIDAL_CARD,
                       "nvidia.com/gpu", 8, 32, "pc-lowest", node)
            pod["metadata"]["ownerReferences"] = _owner("Job", "batch.volcano.sh/v1alpha1",
                                                        f"{group}-worker")
            objects.append(pod)
    # Inference replicas, ten to a ReplicaSet as a serving deployment scales out.
    for j in range(spec.jobs):
        replica_set = f"chat-{j // 10:04d}"
        pod = _pod(f"{replica_set}-{j % 10}", "inference", "", "queue-inference", TIDAL_CARD,
                   "nvidia.com/gpu", 4, 16, "pc-high")
        pod["metadata"]["ownerReferences"] = _owner("ReplicaSet", "apps/v1", replica_set)
        objects.append(pod)
    return objects


def _tidal_queue(name: str, priority: int, reclaimable: bool, cards: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "annotations": {
                "volcano.sh/card.quota": json.dumps({TIDAL_CARD: cards})}},
            "spec": {"weight": 1, "priority": priority, "reclaimable": reclaimable}}


def minimum_tidal_evictions(spec: BenchSpec) -> int:
    """The fewest evictions that free a card for every pending inference pod in the
    tidal scene with gangs kept whole: whole gangs of `gpus_per_node` pods, as many as
    the pending pods need cards (never more gangs than there are)."""
    gangs = min(-(-spec.jobs // spec.gpus_per_node), spec.nodes)
    return gangs * spec.gpus_per_node


def _node_name(index: int) -> str:
    return f"node-{index:05d}"


def topology_domains(spec: BenchSpec) -> list[tuple[int, ...]]:
    """Node i -> the number of its domain at each tier of `TOPOLOGY_TIERS`, lowest first
    (rack, row, block, superblock): the tree the topology scene's HyperNodes describe."""
    paths = []
    for i in range(spec.nodes):
        path, index = [], i
        for _, size in TOPOLOGY_TIERS:
            index //= size
            path.append(index)
        paths.append(tuple(path))
    return paths


def _domain_name(tier: int, index: int) -> str:
    return f"{TOPOLOGY_TIERS[tier - 1][0]}-{index:04d}"


def _hypernode(tier: int, index: int, kind: str, members: list[str]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": _domain_name(tier, index)},
            "spec": {"tier": tier, "tierName": TOPOLOGY_TIERS[tier - 1][0],
                     "members": [{"type": kind, "selector": {"exactMatch": {"name": name}}}
                                 for name in members]}}


def _topology(spec: BenchSpec) -> list[dict[str, Any]]:
    """The topology scene (see the module): the same for the same spec."""
    rng = random.Random(spec.seed)
    objects: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "normal"}, "value": 10000}]
    queue_names = [f"queue-{q}" for q in range(spec.queues)]
    objects += [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                 "metadata": {"name": name}, "spec": {"weight": rng.randint(1, 4)}}
                for name in queue_names]
    models = list(spec.card_models)
    whole = replace(spec, mig_every=0)
    objects += [_node(_node_name(i), models[i % len(models)], whole, False, i % ZONES)
                for i in range(spec.nodes)]
    # The tree, tier by tier: racks hold nodes, every tier above the domains below.
    paths = topology_domains(spec)
    members: list[dict[int, list[str]]] = [{} for _ in TOPOLOGY_TIERS]
    for i, path in enumerate(paths):
        members[0].setdefault(path[0], []).append(_node_name(i))
        for tier in range(2, len(TOPOLOGY_TIERS) + 1):
            below = _domain_name(tier - 1, path[tier - 2])
            held = members[tier - 1].setdefault(path[tier - 1], [])
            if not held or held[-1] != below:
                held.append(below)
    for tier, domains in enumerate(members, 1):
        objects += [_hypernode(tier, index, "Node" if tier == 1 else "HyperNode", names)
                    for index, names in sorted(domains.items())]
    # Running pods: every other one on a card (8 CPUs, 64 GiB), the rest on CPU alone
    # (2 CPUs, 8 GiB), as many as fit. Cards are taken rack by rack unevenly (each rack
    # drawn with a weight of its own, squared so that few racks are busy and many
    # quiet), on nodes drawn at random within the rack, so free cards are scattered
    # over nodes and racks.
    racks = sorted(members[0])
    with_card = {rack: [i for i, p in enumerate(paths) if p[0] == rack] for rack in racks}
    cards = [spec.gpus_per_node] * spec.nodes
    cpus = [spec.cpu_per_node] * spec.nodes
    slots = [spec.pods_per_node] * spec.nodes
    memory = [spec.memory_gi_per_node] * spec.nodes
    draws = rng.choices(range(len(racks)), weights=[rng.random() ** 2 for _ in racks],
                        k=(spec.running + 1) // 2)

    def take(node: int, on_card: bool) -> bool:
        cpu, gib = (8, 64) if on_card else (2, 8)
        if cpus[node] < cpu or memory[node] < gib or not slots[node] or \
                (on_card and not cards[node]):
            return False
        cpus[node] -= cpu
        memory[node] -= gib
        slots[node] -= 1
        cards[node] -= on_card
        return True

    placed: list[tuple[int, bool]] = []  # (node, on a card) of each running pod
    for k in range(spec.running):
        if k % 2 == 0:  # on a card: a node of the drawn rack, or of the next with one
            for step in range(len(racks)):
                room = with_card[racks[(draws[k // 2] + step) % len(racks)]]
                while room:
                    at = rng.randrange(len(room))
                    node = room[at]
                    if take(node, True):
                        placed.append((node, True))
                        break
                    room[at] = room[-1]  # (no card, or no room for the pod, left)
                    room.pop()
                else:
                    continue
                break
            else:
                break  # no card left: the rest would not fit either
        else:  # on CPU alone: a node drawn at random, or the next with room
            start = rng.randrange(spec.nodes)
            node = next((n % spec.nodes for n in range(start, start + spec.nodes)
                         if take(n % spec.nodes, False)), None)
            if node is None:
                break
            placed.append((node, False))
    for job, start in enumerate(range(0, len(placed), spec.tasks_per_job)):
        group, queue = f"running-{job:05d}", rng.choice(queue_names)
        chunk = placed[start:start + spec.tasks_per_job]
        objects.append(_podgroup(group, "bench", queue, len(chunk), "normal", "Running"))
        objects += [_pod(f"{group}-{t}", "bench", group, queue, "",
                         "nvidia.com/gpu" if on_card else "", 8 if on_card else 2,
                         64 if on_card else 8, "normal", _node_name(node))
                    for t, (node, on_card) in enumerate(chunk)]
    # Pending gangs of one-card pods, each held within one domain of topology_tier.
    tasks = spec.tasks_pending
    for j in range(spec.jobs):
        group, queue = f"train-{j:05d}", rng.choice(queue_names)
        podgroup = _podgroup(group, "bench", queue, tasks, "normal", "Pending")
        podgroup["spec"]["networkTopology"] = {"mode": "hard",
                                               "highestTierAllowed": spec.topology_tier}
        size = tasks // spec.sub_groups if spec.sub_groups else 0
        if size:
            podgroup["spec"]["subGroupPolicy"] = [{
                "name": "part", "matchLabelKeys": [SUB_GROUP_LABEL], "subGroupSize": size,
                "minSubGroups": spec.sub_groups,
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]
        objects.append(podgroup)
        for t in range(tasks):
            pod = _pod(f"{group}-{t}", "bench", group, queue, "", "nvidia.com/gpu", 8, 64,
                       "normal")
            if size:
                pod["metadata"]["labels"] = {SUB_GROUP_LABEL: str(t // size)}
            objects.append(pod)
    return objects


def topology_check(spec: BenchSpec, binds: dict[str, str]) -> dict[str, Any]:
    """The topology scene's pending gangs after the sessions, judged from the tree the
    scene drew (not from the scheduler's): how many are bound whole, how many in part
    (the gang rule allows none), and how many have pods in more than one domain of
    their tier (violations: the topology rule allows none)."""
    paths = {_node_name(i): path for i, path in enumerate(topology_domains(spec))}
    domains: dict[str, set[int]] = {}
    racks: dict[tuple[str, int], set[int]] = {}  # (gang, sub-group) -> its racks
    bound: dict[str, int] = {}
    size = spec.tasks_pending // spec.sub_groups if spec.sub_groups else 0
    for key, node in binds.items():
        namespace, name = key.split("/", 1)
        if namespace != "bench" or not name.startswith("train-"):
            continue
        group, index = name.rsplit("-", 1)
        bound[group] = bound.get(group, 0) + 1
        domains.setdefault(group, set()).add(paths[node][spec.topology_tier - 1])
        if size:
            racks.setdefault((group, int(index) // size), set()).add(paths[node][0])
    whole = sum(1 for count in bound.values() if count >= spec.tasks_pending)
    return {"tier": spec.topology_tier, "tier_name": TOPOLOGY_TIERS[spec.topology_tier - 1][0],
            "domains": [len({p[t] for p in paths.values()}) for t in range(len(TOPOLOGY_TIERS))],
            "gangs": spec.jobs, "bound_whole": whole, "bound_in_part": len(bound) - whole,
            "violations": sum(1 for found in domains.values() if len(found) > 1)
            + sum(1 for found in racks.values() if len(found) > 1),
            "sub_groups": spec.sub_groups}


def replicas(spec: BenchSpec) -> list[dict[str, Any]]:
    """The anti-affinity scene's pending work: `spec.jobs` replicas of one app, as a
    Deployment's ReplicaSet makes them (one pod each, no PodGroup, in queue-0), a CPU
    and 2 GiB each, each refusing a node that holds another (required anti-affinity by
    hostname), and with `spec.zone_spread` spread evenly over the zones."""
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": dict(REPLICA_LABELS)},
         "topologyKey": "kubernetes.io/hostname"}]}}
    pods = []
    for i in range(spec.jobs):
        pod = _pod(f"{REPLICA_SET}-{i:05d}", "bench", "", "queue-0", "", "", 1, 2, "normal")
        pod["metadata"]["labels"] = dict(REPLICA_LABELS)
        pod["metadata"]["ownerReferences"] = _owner("ReplicaSet", "apps/v1", REPLICA_SET)
        pod["spec"]["affinity"] = affinity
        if spec.zone_spread:
            pod["spec"]["topologySpreadConstraints"] = [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                 "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": dict(REPLICA_LABELS)}}]
        pods.append(pod)
    return pods


def anti_affinity_check(spec: BenchSpec, binds: dict[str, str]) -> dict[str, Any]:
    """The anti-affinity scene's replicas after the sessions, judged from the names the
    scene gave its nodes (node i in zone i % ZONES), not from the scheduler's view: how
    many are bound, the nodes holding more than one (the anti-affinity allows none),
    the replicas in each zone, and with `zone_spread` whether two zones differ by more
    than one (the spread allows no more). `violations` adds the two up."""
    prefix = f"bench/{REPLICA_SET}-"
    on_node: dict[str, int] = {}
    for key, node in binds.items():
        if key.startswith(prefix):
            on_node[node] = on_node.get(node, 0) + 1
    zones = [0] * min(ZONES, spec.nodes)
    for node, count in on_node.items():
        zones[int(node.rsplit("-", 1)[1]) % ZONES] += count
    bound = sum(on_node.values())
    shared = sum(1 for count in on_node.values() if count > 1)
    skew = max(zones) - min(zones)
    uneven = int(spec.zone_spread and skew > 1)
    return {"replicas": spec.jobs, "bound": bound, "pending": spec.jobs - bound,
            "zone_spread": spec.zone_spread, "nodes_shared": shared, "zones": zones,
            "zone_skew": skew, "violations": shared + uneven}


def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def run_bench(spec: BenchSpec, conf: SchedulerConf, measure_memory: bool = True,
              node_sampling: NodeSampling | None = None) -> dict[str, Any]:
    """Build the cluster, run the sessions; figures as a dict."""
    started = time.perf_counter()
    objects = generate(spec)
    generated = time.perf_counter() - started
    pods = sum(1 for o in objects if o["kind"] == "Pod")
    simulation = Simulation(conf, (SCHEDULER,), node_sampling=node_sampling)
    listed = [(f"bench#{i}", o) for i, o in enumerate(objects)]
    del objects
    gc.collect()
    cache_bytes = None
    if measure_memory:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    simulation.load(listed)
    loaded = time.perf_counter() - started
    if measure_memory:
        cache_bytes = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    del listed
    gc.collect()
    sessions = []
    rng = random.Random(spec.seed)
    for number in range(spec.sessions):
        if number and (spec.arrive or spec.depart):
            churn(simulation, spec, rng, number)
        if number == 1 and spec.scene == "anti-affinity":
            simulation.load([(f"replica#{i}", pod) for i, pod in enumerate(replicas(spec))])
        evicted_before = len(simulation.report.evictions)
        started = time.perf_counter()
        result = simulation.step()
        total = time.perf_counter() - started
        timings = dict(simulation.timings)
        allocate = timings.get("allocate", 0.0)
        sessions.append({
            "phases_ms": {k: round(v * 1000, 2) for k, v in timings.items()},
            "session_ms": round(total * 1000, 2),
            "binds": len(result.binds),
            "evictions": len(simulation.report.evictions) - evicted_before,
            "pipelined": len(result.pipelined),
            "pending": len(result.pending),
            "pods_per_second": round(len(result.binds) / total, 1) if total else 0.0,
            "allocate_pods_per_second": (round(len(result.binds) / allocate, 1)
                                         if allocate else 0.0),
        })
    evictions = len(simulation.report.evictions)
    session_bytes = _session_bytes(simulation) if measure_memory else None
    figures: dict[str, Any] = {
        "spec": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(spec).items()},
        "scene": spec.scene,
        "pods": pods,
        "evictions": evictions,
        "generate_ms": round(generated * 1000, 1),
        "load_ms": round(loaded * 1000, 1),
        "cache_bytes_per_pod": round(cache_bytes / pods) if cache_bytes and pods else None,
        "peak_rss_mib": round(_peak_rss_bytes() / 2**20, 1),
        # (taken after the peak RSS: tracing costs memory of its own)
        "session_bytes_per_pending_pod": session_bytes,
        "sessions": sessions,
    }
    if spec.scene == "tidal":
        minimum = minimum_tidal_evictions(spec)
        figures["minimum_evictions"] = minimum
        figures["evictions_ratio"] = round(evictions / minimum, 3) if minimum else None
    if spec.scene == "topology":
        figures["topology"] = topology_check(spec, simulation.report.binds)
    if spec.scene == "anti-affinity":
        figures["anti_affinity"] = anti_affinity_check(spec, simulation.report.binds)
    figures["summary"] = summarize(figures)
    return figures


def _session_bytes(simulation: Simulation) -> int | None:
    """What one more session, over what the timed ones left, holds at its peak beyond
    the cache, per pod pending at its start (None with nothing pending): its copies,
    plugins' state and explanations. Traced apart from the timed sessions, which
    tracing would slow."""
    pending = sum(1 for task in simulation.cache.tasks.values()
                  if task.job_id and not task.node_name)
    if not pending:
        return None
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    simulation.step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return round((peak - before) / pending)


def summarize(figures: dict[str, Any]) -> dict[str, Any]:
    """What two runs are compared on, one level deep: the cost of loading, then of the
    sessions as medians, over all of them and over those after the first (the first
    places what was pending at the start; the later ones are the steady state, and
    None with one session). A phase a session did not run counts 0 ms in it."""
    sessions = figures["sessions"]
    later = sessions[1:]
    phases: list[str] = []
    for session in sessions:
        phases += [p for p in session["phases_ms"] if p not in phases]

    def median(values: list[float]) -> float | None:
        return round(statistics.median(values), 2) if values else None

    def phase_medians(chosen: list[dict[str, Any]]) -> dict[str, float | None] | None:
        if not chosen:
            return None
        return {p: median([s["phases_ms"].get(p, 0.0) for s in chosen]) for p in phases}

    return {
        "pods": figures["pods"],
        "sessions": len(sessions),
        "generate_ms": figures["generate_ms"],
        "load_ms": figures["load_ms"],
        "cache_bytes_per_pod": figures["cache_bytes_per_pod"],
        "session_bytes_per_pending_pod": figures["session_bytes_per_pending_pod"],
        "peak_rss_mib": figures["peak_rss_mib"],
        "first_session_ms": sessions[0]["session_ms"],
        "median_session_ms": median([s["session_ms"] for s in sessions]),
        "median_later_session_ms": median([s["session_ms"] for s in later]),
        "median_phases_ms": phase_medians(sessions),
        "median_later_phases_ms": phase_medians(later),
        "binds": sum(s["binds"] for s in sessions),
        "evictions": figures["evictions"],
        "pending_after_last": sessions[-1]["pending"],
        **({"topology_gangs_bound": figures["topology"]["bound_whole"],
            "topology_violations": figures["topology"]["violations"]}
           if "topology" in figures else {}),
        **({"anti_affinity_bound": figures["anti_affinity"]["bound"],
            "anti_affinity_violations": figures["anti_affinity"]["violations"]}
           if "anti_affinity" in figures else {}),
    }


def churn(simulation: Simulation, spec: BenchSpec, rng: random.Random, number: int) -> None:
    """`spec.depart` running pods finish, and `spec.arrive` new pods (jobs of one)
    arrive, each asking for a card of a node chosen at random."""
    cache = simulation.cache
    running = sorted(key for key, task in cache.tasks.items() if task.node_name)
    for key in rng.sample(running, min(spec.depart or 0, len(running))):
        cache.delete_pod(key)
    nodes = sorted(cache.nodes)
    arrivals = []
    for i in range(spec.arrive or 0):
        node = cache.nodes[rng.choice(nodes)]
        card, resource_name = _card_of(node.labels, node.allocatable.scalars)
        arrivals.append((f"churn#{number}.{i}", _pod(
            f"arrival-{number:04d}-{i:04d}", "bench", "", f"queue-{i % max(spec.queues, 1)}",
            card, resource_name, 2, 8, "normal")))
    simulation.load(arrivals)


def _card_of(labels: dict[str, str], allocatable: dict[str, float]) -> tuple[str, str]:
    """The card name and resource a pod asks for to land on a node like this one."""
    model = labels.get("nvidia.com/gpu.product", CARD_MODELS[0])
    mig = f"nvidia.com/mig-{MIG_PROFILE}"
    if mig in allocatable:
        return f"{model}/mig-{MIG_PROFILE}-mixed", mig
    return model, "nvidia.com/gpu"


def _cluster_line(figures: dict[str, Any]) -> str:
    spec = figures["spec"]
    arrive, depart = spec.get("arrive") or 0, spec.get("depart") or 0
    if arrive == depart:
        churned = f", churn {arrive} pods per session" if arrive else ""
    else:
        churned = f", {depart} pods finishing and {arrive} arriving per session"
    scene = spec.get("scene", "default")
    if scene == "tidal":
        return (f"cluster (tidal): {spec['nodes']} nodes of {spec['gpus_per_node']} GPUs, each "
                f"full with one training gang; {spec['jobs']} inference pods pending; "
                f"{spec['queues']} training queues{churned}")
    if scene == "volcano-preempt":
        return (f"cluster (volcano-preempt): {spec['nodes']} nodes, {figures['pods']} pods, "
                f"every card taken by low-priority gangs of {spec['tasks_per_job']}; "
                f"{spec['jobs']} high-priority jobs of {spec.get('pending_tasks') or 1} pods "
                f"pending; {spec['queues']} queues, seed "
                f"{spec['seed']}{churned}")
    tasks = spec.get("pending_tasks") or spec["tasks_per_job"]
    if scene == "topology":
        shape = ", ".join(f"{count} {name}{'s' if count != 1 else ''}" for (name, _), count in
                          zip(TOPOLOGY_TIERS, figures["topology"]["domains"], strict=True))
        return (f"cluster (topology): {spec['nodes']} nodes of {spec['gpus_per_node']} GPUs "
                f"in {shape}; {spec['running']} pods running; {spec['jobs']} gangs x "
                f"{tasks} one-GPU pods pending, each within one "
                f"{figures['topology']['tier_name']} (tier {spec['topology_tier']})"
                + (f" in {spec['sub_groups']} sub-groups of one rack each"
                   if spec.get("sub_groups") else "")
                + f"; seed {spec['seed']}{churned}")
    if scene == "anti-affinity":
        spread = (f", spread over {ZONES} zones (maxSkew 1)" if spec.get("zone_spread")
                  else "")
        return (f"cluster (anti-affinity): {spec['nodes']} nodes, {figures['pods']} pods "
                f"running; {spec['jobs']} replicas of one app arriving after session 1, "
                f"one a node (required anti-affinity by hostname){spread}; seed "
                f"{spec['seed']}{churned}")
    named = f" ({scene})" if scene in ("overload", "hierarchy") else ""
    return (f"cluster{named}: {spec['nodes']} "
            f"nodes, {figures['pods']} pods ({spec['running']} running, {spec['jobs']} "
            f"pending jobs x {tasks} tasks), {spec['queues']} queues, seed {spec['seed']}"
            + churned)


def render(figures: dict[str, Any]) -> str:
    lines = [
        _cluster_line(figures),
        f"load: {figures['load_ms']:.0f} ms; cache: "
        f"{figures['cache_bytes_per_pod'] or '-'} bytes/pod; a session: "
        f"{figures['session_bytes_per_pending_pod'] or '-'} bytes/pending pod; peak RSS "
        f"{figures['peak_rss_mib']} MiB",
    ]
    if "minimum_evictions" in figures:
        ratio = figures["evictions_ratio"]
        lines.append(f"evictions: {figures['evictions']}; fewest with gangs whole: "
                     f"{figures['minimum_evictions']}; ratio "
                     f"{'-' if ratio is None else f'{ratio:.2f}'}")
    else:
        lines.append(f"evictions: {figures['evictions']}")
    if "topology" in figures:
        check = figures["topology"]
        lines.append(f"topology: {check['bound_whole']} of {check['gangs']} gangs bound whole, "
                     f"{check['bound_in_part']} in part; {check['violations']} across more "
                     f"than one {check['tier_name']}"
                     + (" or sub-groups across racks" if check.get("sub_groups") else "")
                     + " (violations)")
    if "anti_affinity" in figures:
        check = figures["anti_affinity"]
        zones = "/".join(str(count) for count in check["zones"])
        lines.append(f"anti-affinity: {check['bound']} of {check['replicas']} replicas bound "
                     f"({zones} by zone), {check['pending']} pending; {check['nodes_shared']} "
                     f"node(s) with two or more"
                     + (f", zone skew {check['zone_skew']}" if check["zone_spread"] else "")
                     + f" ({check['violations']} violations)")
    phases: list[str] = []
    for session in figures["sessions"]:
        phases += [p for p in session["phases_ms"] if p not in phases]
    header = ["session", *phases, "total ms", "binds", "evictions", "pods/s",
              "allocate pods/s"]
    rows = []
    for i, session in enumerate(figures["sessions"], 1):
        rows.append([str(i), *(f"{session['phases_ms'].get(p, 0):.1f}" for p in phases),
                     f"{session['session_ms']:.1f}", str(session["binds"]),
                     str(session["evictions"]),
                     f"{session['pods_per_second']:.0f}",
                     f"{session['allocate_pods_per_second']:.0f}"])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    summary = figures["summary"]
    later = summary["median_later_session_ms"]
    lines.append(f"median session: {summary['median_session_ms']:.1f} ms"
                 + ("" if later is None else f"; after the first: {later:.1f} ms"))
    return "\n".join(lines) + "\n"
