"""Kubernetes objects as dicts, and one-call ways to run sessions on them, for tests.

    report = simulate([node("n1", cpu="4"), pod("p", cpu="1")], conf=CONF)
    session = open_session([...], conf=CONF)   # a Session to poke at directly
"""

from __future__ import annotations

from typing import Any

from vscheduler.cache import Cache
from vscheduler.conf import SchedulerConf, parse_conf
from vscheduler.framework.session import Session
from vscheduler.simulate import Simulation

SCHEDULER = "vscheduler"
# Preemption as Volcano's default tiers allow it: priority decides the victims.
# Reclaim between queues, with no plugin offering victims but gang's (disabled here)
# and none limiting queues: every pod of a reclaimable queue may go.
RECLAIM_CONF = """
actions: "allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false}, {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""

# capacity deciding who gives in reclaim: gang and conformance offer no victims (as in
# conf/tidal-reclaim.conf), and enqueue admits by capacity's rules
CAPACITY_RECLAIM_CONF = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false,
            enableReclaimable: false}, {name: conformance, enableReclaimable: false}]
- plugins: [{name: predicates}, {name: capacity}, {name: nodeorder}]
"""

PREEMPT_CONF = """
actions: "allocate, backfill, preempt"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false},
            {name: conformance}]
- plugins: [{name: drf, enablePreemptable: false}, {name: predicates},
            {name: proportion}, {name: nodeorder}]
"""


def node(name: str, cpu: str = "8", memory: str = "16Gi", pods: str = "110", *,
         labels: dict[str, str] | None = None, taints: list[dict] | None = None,
         unschedulable: bool = False, **extra: str) -> dict[str, Any]:
    """A Node; `extra` adds allocatable resources, e.g. `**{"nvidia.com/gpu": "8"}`."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **extra}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": spec, "status": {"allocatable": allocatable, "capacity": allocatable}}


def pod(name: str, cpu: str | None = "1", memory: str | None = "1Gi", *,
        namespace: str = "default", group: str | None = None, queue: str | None = None,
        node_name: str | None = None, phase: str | None = None,
        scheduler: str = SCHEDULER, priority_class: str | None = None,
        priority: int | None = None, annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, node_selector: dict[str, str] | None = None,
        affinity: dict | None = None, tolerations: list[dict] | None = None,
        host_ports: list[int] | None = None, gates: list[str] | None = None,
        owner_kind: str | None = None, creation: str | None = None,
        **extra: str) -> dict[str, Any]:
    """A Pod; `extra` adds requests, e.g. `**{"nvidia.com/gpu": "1"}`."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra)
    container: dict[str, Any] = {"name": "main", "image": "busybox",
                                 "resources": {"requests": requests}}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in host_ports]
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "annotations": dict(annotations or {}), "labels": labels or {}}
    if group:
        meta["annotations"]["scheduling.k8s.io/group-name"] = group
    if queue:
        meta["annotations"]["scheduling.volcano.sh/queue-name"] = queue
    if owner_kind:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind,
                                    "name": f"{name}-owner", "uid": f"{name}-owner-uid",
                                    "controller": True}]
    if creation:
        meta["creationTimestamp"] = creation
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    status = {"phase": phase or ("Running" if node_name else "Pending")}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": status}


def podgroup(name: str, min_member: int = 1, *, namespace: str = "default",
             queue: str | None = None, min_resources: dict[str, str] | None = None,
             priority_class: str | None = None, phase: str | None = None,
             min_task_member: dict[str, int] | None = None,
             annotations: dict[str, str] | None = None,
             creation: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if queue:
        spec["queue"] = queue
    if min_resources:
        spec["minResources"] = min_resources
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_task_member:
        spec["minTaskMember"] = min_task_member
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "annotations": annotations or {}}
    if creation:
        meta["creationTimestamp"] = creation
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": meta, "spec": spec, "status": {"phase": phase or "Pending"}}


def queue(name: str, weight: int = 1, *, capability: dict[str, str] | None = None,
          deserved: dict[str, str] | None = None, guarantee: dict[str, str] | None = None,
          reclaimable: bool | None = None, priority: int | None = None,
          state: str | None = None, annotations: dict[str, str] | None = None,
          parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight}
    if parent is not None:
        spec["parent"] = parent
    if capability:
        spec["capability"] = capability
    if deserved:
        spec["deserved"] = deserved
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    if priority is not None:
        spec["priority"] = priority
    status = {"state": state} if state else {}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": spec, "status": status}


def priority_class(name: str, value: int, global_default: bool = False) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "globalDefault": global_default}


def gang(name: str, size: int, min_member: int | None = None, cpu: str = "1",
         memory: str = "1Gi", **pod_args: Any) -> list[dict[str, Any]]:
    """A PodGroup and its `size` pods named `<name>-0` ... (queue and namespace apply to
    both; other keyword arguments to the pods)."""
    group_args = {k: pod_args[k] for k in ("namespace", "queue") if k in pod_args}
    if "priority_class" in pod_args:
        group_args["priority_class"] = pod_args["priority_class"]
    objs = [podgroup(name, size if min_member is None else min_member, **group_args)]
    objs += [pod(f"{name}-{i}", cpu, memory, group=name, **pod_args) for i in range(size)]
    return objs


def conf(text: str | None = None) -> SchedulerConf:
    """A conf from YAML text; Volcano's default conf when None."""
    from vscheduler.conf import DEFAULT_CONF as default_text
    return parse_conf(text if text is not None else default_text, "test conf")


def simulate(objects: list[dict[str, Any]], conf_text: str | None = None, sessions: int = 1,
             scheduler_names: tuple[str, ...] = (SCHEDULER,)) -> dict[str, Any]:
    """Run sessions on the objects; the JSON report as a dict."""
    simulation = Simulation(conf(conf_text), scheduler_names)
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    return simulation.run(sessions).as_dict()


def load_cache(objects: list[dict[str, Any]],
               scheduler_names: tuple[str, ...] = (SCHEDULER,),
               conf_text: str | None = None) -> Cache:
    simulation = Simulation(conf(conf_text), scheduler_names)
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    return simulation.cache


def open_session(objects: list[dict[str, Any]], conf_text: str | None = None) -> Session:
    """A session opened on the objects (plugins opened, no action run yet)."""
    return Session(load_cache(objects, conf_text=conf_text).snapshot(), conf(conf_text))


def hypernode(name: str, tier: int | None, *, nodes: list[str] | tuple[str, ...] = (),
              children: list[str] | tuple[str, ...] = (), tier_name: str | None = None,
              members: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A `topology.volcano.sh/v1alpha1` HyperNode manifest: `nodes` and `children` are
    exact-name members; `members` adds raw ones (regexMatch, labelMatch, ...)."""
    listed = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    listed += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}}
               for c in children]
    listed += members or []
    spec: dict[str, Any] = {"members": listed}
    if tier is not None:
        spec["tier"] = tier
    if tier_name is not None:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name}, "spec": spec}


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A core v1 Namespace manifest (without the kubernetes.io/metadata.name label the
    API server adds: as a file would give it)."""
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
