"""`vscheduler bench`: real sessions on a generated cluster, timed phase by phase.

The cluster is built from a seed (same flags, same cluster, same decisions): GPU nodes
of several card models (every `--mig-every`th node split into MIG slices), queues with
card quotas, gang jobs already running and gang jobs pending. Objects go through the
same parsing and cache as manifests do, so the figures are those of the real path.

`--churn N` measures the steady state: before every session after the first, N running
pods finish and N new pods arrive, so each session has work but little changed.
"""

from __future__ import annotations

import gc
import json
import random
import resource
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass, field
from typing import Any

from vscheduler.conf import DEFAULT_CONF, SchedulerConf
from vscheduler.framework.placement import NodeSampling
from vscheduler.simulate import Simulation

__all__ = ["BENCH_CONF", "BenchSpec", "churn", "generate", "run_bench"]

# Volcano's default conf with capacity-card (per-card-model quotas) in the second tier.
BENCH_CONF = DEFAULT_CONF.replace("  - name: proportion\n",
                                  "  - name: proportion\n  - name: capacity-card\n")

CARD_MODELS = ("NVIDIA-H200", "NVIDIA-H800", "NVIDIA-GeForce-RTX-4090")
CARD_MEMORY_MIB = {"NVIDIA-H200": 143771, "NVIDIA-H800": 81559,
                   "NVIDIA-GeForce-RTX-4090": 24564}
MIG_PROFILE = "1g.18gb"
SCHEDULER = "vscheduler"


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
    churn: int = 0
    seed: int = 1
    card_models: tuple[str, ...] = field(default=CARD_MODELS)

    def __post_init__(self) -> None:
        # Without nodes there is nothing to place on, and a job of no tasks never fills
        # its share of the running pods: the generator would loop forever.
        for name in ("nodes", "gpus_per_node", "cpu_per_node", "memory_gi_per_node",
                     "pods_per_node", "queues", "tasks_per_job", "sessions"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more, not {getattr(self, name)}")
        for name in ("mig_every", "jobs", "running", "churn"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, not {getattr(self, name)}")
        if not self.card_models:
            raise ValueError("card_models must name at least one card model")


def _node(name: str, model: str, spec: BenchSpec, mig: bool, zone: int) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": model,
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


def _pod(name: str, namespace: str, group: str, queue: str, card: str, resource_name: str,
         cpu: int, memory_gi: int, priority_class: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER, "priorityClassName": priority_class,
        "containers": [{"name": "main", "image": "trainer", "resources": {"requests": {
            "cpu": str(cpu), "memory": f"{memory_gi}Gi", resource_name: "1"}}}]}
    annotations = {"volcano.sh/card.name": card}
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
        objects.append(_node(name, model, spec, mig, i % 3))
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
    for name in queue_names:
        objects.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                        "metadata": {"name": name,
                                     "annotations": {"volcano.sh/card.quota":
                                                     json.dumps(quota, sort_keys=True)}},
                        "spec": {"weight": rng.randint(1, 4)}})
    # Running jobs, tasks_per_job pods each, placed where they fit.
    slots = {name: [spec.gpus_per_node * (7 if "mig" in card else 1), spec.cpu_per_node]
             for name, card, _ in node_cards}
    placed = 0
    job = 0
    cursor = 0
    while placed < spec.running and cursor < len(node_cards):
        queue = rng.choice(queue_names)
        group = f"running-{job:05d}"
        size = min(spec.tasks_per_job, spec.running - placed)
        pods = []
        while len(pods) < size and cursor < len(node_cards):
            node, card, resource_name = node_cards[cursor]
            if slots[node][0] < 1 or slots[node][1] < 2:
                cursor += 1
                continue
            slots[node][0] -= 1
            slots[node][1] -= 2
            pods.append(_pod(f"{group}-{len(pods)}", "bench", group, queue, card,
                             resource_name, 2, 8, "normal", node))
        objects.append(_podgroup(group, "bench", queue, len(pods), "normal", "Running"))
        objects.extend(pods)
        placed += len(pods)
        job += 1
    # Pending gang jobs.
    for j in range(spec.jobs):
        _, card, resource_name = rng.choice(node_cards)
        queue = rng.choice(queue_names)
        priority_class = rng.choice(("high", "normal", "low"))
        group = f"train-{j:05d}"
        objects.append(_podgroup(group, "bench", queue, spec.tasks_per_job, priority_class,
                                 "Pending"))
        objects.extend(_pod(f"{group}-{t}", "bench", group, queue, card, resource_name, 4,
                            16, priority_class) for t in range(spec.tasks_per_job))
    return objects


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
        if number and spec.churn:
            churn(simulation, spec, rng, number)
        started = time.perf_counter()
        result = simulation.step()
        total = time.perf_counter() - started
        timings = dict(simulation.timings)
        allocate = timings.get("allocate", 0.0)
        sessions.append({
            "phases_ms": {k: round(v * 1000, 2) for k, v in timings.items()},
            "session_ms": round(total * 1000, 2),
            "binds": len(result.binds),
            "pipelined": len(result.pipelined),
            "pending": len(result.pending),
            "pods_per_second": round(len(result.binds) / total, 1) if total else 0.0,
            "allocate_pods_per_second": (round(len(result.binds) / allocate, 1)
                                         if allocate else 0.0),
        })
    return {
        "spec": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(spec).items()},
        "pods": pods,
        "generate_ms": round(generated * 1000, 1),
        "load_ms": round(loaded * 1000, 1),
        "cache_bytes_per_pod": round(cache_bytes / pods) if cache_bytes and pods else None,
        "peak_rss_mib": round(_peak_rss_bytes() / 2**20, 1),
        "sessions": sessions,
    }


def churn(simulation: Simulation, spec: BenchSpec, rng: random.Random, number: int) -> None:
    """`spec.churn` running pods finish, and as many new pods (jobs of one) arrive."""
    cache = simulation.cache
    running = sorted(key for key, task in cache.tasks.items() if task.node_name)
    for key in rng.sample(running, min(spec.churn, len(running))):
        cache.delete_pod(key)
    nodes = sorted(cache.nodes)
    arrivals = []
    for i in range(spec.churn):
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


def render(figures: dict[str, Any]) -> str:
    spec = figures["spec"]
    lines = [
        f"cluster: {spec['nodes']} nodes, {figures['pods']} pods "
        f"({spec['running']} running, {spec['jobs']} pending jobs x {spec['tasks_per_job']} "
        f"tasks), {spec['queues']} queues, seed {spec['seed']}"
        + (f", churn {spec['churn']} pods per session" if spec.get("churn") else ""),
        f"load: {figures['load_ms']:.0f} ms; cache: "
        f"{figures['cache_bytes_per_pod'] or '-'} bytes/pod; peak RSS "
        f"{figures['peak_rss_mib']} MiB",
    ]
    phases: list[str] = []
    for session in figures["sessions"]:
        phases += [p for p in session["phases_ms"] if p not in phases]
    header = ["session", *phases, "total ms", "binds", "pods/s", "allocate pods/s"]
    rows = []
    for i, session in enumerate(figures["sessions"], 1):
        rows.append([str(i), *(f"{session['phases_ms'].get(p, 0):.1f}" for p in phases),
                     f"{session['session_ms']:.1f}", str(session["binds"]),
                     f"{session['pods_per_second']:.0f}",
                     f"{session['allocate_pods_per_second']:.0f}"])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines) + "\n"
