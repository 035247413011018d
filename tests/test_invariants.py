"""The invariants of ARCHITECTURE.md on generated clusters and confs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests import builders as b
from tests.invariants import run_checked
from vscheduler.conf import DEFAULT_CONF, parse_conf
from vscheduler.framework.eviction import PlanMemo, Plans
from vscheduler.model import TaskStatus as S
from vscheduler.simulate import Simulation

CONFS = {
    "default": DEFAULT_CONF,
    "gang-only": """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
""",
    "no-enqueue-binpack": """
actions: "allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false}, {name: conformance}]
- plugins: [{name: drf, enablePreemptable: false}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack}]
""",
    "reclaim-preempt": """
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false,
            enablePreemptable: false}, {name: conformance}]
- plugins: [{name: drf, enablePreemptable: false}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack}]
""",
    "preempt-no-enqueue": """
actions: "allocate, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: nodeorder}]
""",
    "sla-first": """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: sla, arguments: {sla-waiting-time: 1s}}]
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
""",
    "flags-off": """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority, enableJobOrder: false}, {name: gang, enableJobReady: false},
            {name: conformance}]
- plugins: [{name: overcommit, arguments: {overcommit-factor: 1.0}}, {name: drf},
            {name: predicates}, {name: proportion, enabledOverused: false},
            {name: nodeorder, arguments: {mostrequested.weight: 2}}]
""",
}

GPU = "nvidia.com/gpu"


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    objects.append(b.priority_class("high", 1000))
    objects.append(b.priority_class("low", 10))
    queue_names = ["default"] + [f"q{i}" for i in range(draw(st.integers(0, 2)))]
    for name in queue_names[1:]:
        capability = draw(st.one_of(st.none(), st.fixed_dictionaries(
            {"cpu": st.sampled_from(["2", "4", "8", "16"])})))
        objects.append(b.queue(name, draw(st.integers(1, 4)), capability=capability,
                               state=draw(st.sampled_from([None, "Open", "Open", "Closed"])),
                               reclaimable=draw(st.sampled_from([None, True, False])),
                               priority=draw(st.sampled_from([None, 1, 100]))))
    node_count = draw(st.integers(1, 6))
    free: list[int] = []  # whole CPUs left per node, for the pods placed below
    for i in range(node_count):
        extra = {GPU: str(draw(st.sampled_from([0, 2, 8])))}
        taints = None
        if draw(st.integers(0, 5)) == 0:
            taints = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
        free.append(draw(st.sampled_from([2, 4, 8])))
        objects.append(b.node(f"n{i}", cpu=str(free[-1]),
                              memory=draw(st.sampled_from(["4Gi", "16Gi"])),
                              pods=str(draw(st.sampled_from([3, 10, 110]))),
                              labels={"zone": draw(st.sampled_from(["a", "b"]))},
                              taints=taints, **extra))
    # Pods of another scheduler already running, some terminating (their resources
    # are being released: tasks may be pipelined onto them).
    for i in range(draw(st.integers(0, 3))):
        other = b.pod(f"other-{i}", cpu="1", memory="1Gi", scheduler="default-scheduler",
                      node_name=f"n{draw(st.integers(0, node_count - 1))}")
        if draw(st.booleans()):
            other["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        objects.append(other)
    # Jobs of ours already running (victims for reclaim and preempt), where they fit.
    for j in range(draw(st.integers(0, 3))):
        size = draw(st.integers(1, 3))
        queue_name = draw(st.sampled_from(queue_names))
        args: dict[str, Any] = {
            "priority_class": draw(st.sampled_from(["high", "low"])), "queue": queue_name}
        if draw(st.integers(0, 3)) == 0:
            args["annotations"] = {"volcano.sh/preemptable": "false"}
        pods = []
        for i in range(size):
            target = next((n for n in range(node_count) if free[n] >= 1), None)
            if target is None:
                break
            free[target] -= 1
            pods.append(b.pod(f"run{j}-{i}", cpu="1", memory="256Mi", group=f"run{j}",
                              node_name=f"n{target}", **args))
        if pods:
            objects.append(b.podgroup(f"run{j}", draw(st.integers(1, len(pods))),
                                      queue=queue_name, phase="Running",
                                      priority_class=args["priority_class"]))
            objects.extend(pods)
    for j in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 4))
        min_member = draw(st.integers(1, size))
        cpu = draw(st.sampled_from(["500m", "1", "2", "3"]))
        pod_args: dict[str, Any] = {
            "queue": draw(st.sampled_from([*queue_names, "missing"])),
            "priority_class": draw(st.sampled_from(["high", "low"])),
        }
        if draw(st.booleans()):
            pod_args[GPU] = draw(st.sampled_from(["1", "2"]))
        if draw(st.integers(0, 4)) == 0:
            pod_args["node_selector"] = {"zone": "a"}
        if draw(st.integers(0, 6)) == 0:
            cpu, pod_args["memory"] = None, None  # best effort
        if draw(st.booleans()):
            group = b.gang(f"job{j}", size, min_member, cpu=cpu or "0", **pod_args)
            if cpu is None:
                for obj in group[1:]:
                    obj["spec"]["containers"][0]["resources"] = {}
            # Roles: a role's tasks that fail predicates stop the others of that role.
            for obj in group[1:]:
                if draw(st.integers(0, 2)) == 0:
                    obj["metadata"]["annotations"]["volcano.sh/task-spec"] = draw(
                        st.sampled_from(["worker", "ps"]))
                if draw(st.integers(0, 5)) == 0:  # one member much bigger than the rest
                    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "64"}}
            if draw(st.booleans()):
                group[0]["spec"]["minResources"] = {"cpu": str(min_member)}
            objects.extend(group)
        else:
            objects.append(b.pod(f"solo{j}", cpu=cpu, **pod_args))
    return objects


def _run(objects: list[dict[str, Any]], conf_name: str, sessions: int,
         confs: dict[str, str] = CONFS, shared: bool = True) -> Simulation:
    """Run `sessions` checked sessions on `objects` with conf `conf_name` of `confs`;
    without `shared`, every task searches the nodes for itself (no signature)."""
    from vscheduler.framework.session import Session

    with pytest.MonkeyPatch.context() as patch:
        if not shared:
            patch.setattr(Session, "task_signature", lambda self, task: None)
        simulation = Simulation(parse_conf(confs[conf_name], conf_name))
        simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
        run_checked(simulation, sessions)
    return simulation


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), conf_name=st.sampled_from(sorted(CONFS)),
       sessions=st.integers(1, 3))
def test_invariants_hold_on_generated_clusters(objects, conf_name, sessions):
    _run(objects, conf_name, sessions)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), conf_name=st.sampled_from(sorted(CONFS)))
def test_same_input_same_decisions(objects, conf_name):
    first = json.dumps(_run(objects, conf_name, 2).report.as_dict())
    second = json.dumps(_run(objects, conf_name, 2).report.as_dict())
    assert first == second


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), conf_name=st.sampled_from(sorted(CONFS)))
def test_jobs_sorted_by_key_decide_as_jobs_compared(objects, conf_name):
    """Waiting jobs sorted by the plugins' keys (`hookspecs.job_order_key`) give the
    decisions and reasons of sorting them by comparing them with `job_order`."""
    from vscheduler.framework.session import Session

    by_key = _run(objects, conf_name, 2).report.as_dict()
    bind = Session._bind_hooks

    def bind_without_keys(self: Session, tiers: Any) -> None:
        bind(self, tiers)
        self.job_key = None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Session, "_bind_hooks", bind_without_keys)
        compared = _run(objects, conf_name, 2).report.as_dict()
    assert json.dumps(by_key) == json.dumps(compared)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), conf_name=st.sampled_from(sorted(CONFS)))
def test_every_built_in_job_order_key_agrees_with_its_job_order(objects, conf_name):
    """The promise behind `job_order_key`, for every built-in plugin that orders jobs:
    of any two jobs, the keys compare as `job_order` answers, once a session has run
    its actions on them (drf's shares moved, gangs got ready), in two sessions."""
    from vscheduler.framework.session import Session

    simulation = Simulation(parse_conf(CONFS[conf_name], conf_name))
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    checked = 0
    for _ in range(2):
        session = Session(simulation.cache.snapshot(reuse=False), simulation.conf)
        assert session.job_key is not None
        session.run()
        jobs = [session.jobs[uid] for uid in sorted(session.jobs)]
        for plugin in session.plugins.values():
            if not hasattr(plugin, "job_order"):
                continue
            for left in jobs:
                for right in jobs:
                    answer = plugin.job_order(left, right)
                    lk, rk = plugin.job_order_key(left), plugin.job_order_key(right)
                    assert (answer < 0, answer == 0) == (lk < rk, lk == rk), (
                        plugin.name, left.uid, right.uid)
                    checked += 1
        simulation.step()
    event(f"pairs checked: {min(checked // 50 * 50, 200)}")


@st.composite
def full_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nodes full of low-priority gangs and single pods of two queues (gangs may span
    nodes; a queue may be at its capability; a node may be free), and pending
    high-priority pods in batches alike (pods of one template, or one-pod jobs of one
    shape), so that reclaim and preempt must evict, and preemptors alike follow one
    another."""
    objects: list[dict[str, Any]] = [b.priority_class("high", 1000),
                                     b.priority_class("low", 10)]
    capability = draw(st.sampled_from([None, "6", "10"]))
    objects.append(b.queue("qa", reclaimable=True,
                           capability={"cpu": capability} if capability else None))
    objects.append(b.queue("qb", reclaimable=True))
    nodes = draw(st.integers(2, 6))
    objects += [b.node(f"n{i}", cpu="8", memory="32Gi", **{GPU: "4"}) for i in range(nodes)]
    if draw(st.booleans()):
        objects.append(b.node("free", cpu="8", memory="32Gi", **{GPU: "1"}))
    slots = [f"n{i}" for i in range(nodes) for _ in range(4)]  # one GPU each, in order
    g = 0
    while slots:
        size = draw(st.integers(1, min(4, len(slots))))
        queue_name = draw(st.sampled_from(["qa", "qb"]))
        group = f"run-{g}"
        objects.append(b.podgroup(group, draw(st.integers(1, size)), queue=queue_name,
                                  phase="Running", priority_class="low"))
        objects += [b.pod(f"{group}-{t}", cpu="1", memory="1Gi", group=group,
                          queue=queue_name, node_name=slots.pop(0), priority_class="low",
                          **{GPU: "1"}) for t in range(size)]
        g += 1
    for k in range(draw(st.integers(1, 4))):
        queue_name = draw(st.sampled_from(["qa", "qb"]))
        gpus = draw(st.sampled_from(["1", "2"]))
        for r in range(draw(st.integers(1, 4))):
            objects.append(b.pod(f"want-{k}-{r}", cpu="1", memory="1Gi", queue=queue_name,
                                 priority_class="high", **{GPU: gpus}))
    return objects


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=full_clusters(), conf_name=st.sampled_from(["reclaim-preempt",
                                                           "preempt-no-enqueue"]))
def test_preemptors_alike_sharing_plans_decide_as_planning_alone(objects, conf_name):
    """Victim plans shared between preemptors alike (eviction.PlanMemo) give the
    decisions each preemptor planning on every node for itself gives."""
    def alone(patch: pytest.MonkeyPatch) -> None:  # nothing remembered, nothing shared
        patch.setattr(PlanMemo, "plans_for", lambda self, session, policy, signature: Plans())

    _decide_alike(objects, conf_name, CONFS, alone)


def _decide_alike(objects: list[dict[str, Any]], conf_name: str, confs: dict[str, str],
                  without: Callable[[pytest.MonkeyPatch], None]) -> None:
    """Two checked sessions on `objects` evict, bind and pipeline alike as they are and
    with `without` patched in (a sharing turned off)."""
    shared = _run(objects, conf_name, 2, confs).report.as_dict()
    with pytest.MonkeyPatch.context() as patch:
        without(patch)
        each = _run(objects, conf_name, 2, confs).report.as_dict()
    event(f"evictions: {min(len(shared['evictions']), 3)}")
    assert (shared["evictions"], shared["binds"], shared["pipelined"]) == \
        (each["evictions"], each["binds"], each["pipelined"])


# (kinds of owner the tidal plugins read as training, inference and unknown)
OWNER_KINDS = st.sampled_from([None, "Job", "Deployment"])


@st.composite
def whole_gang_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nodes of 4 GPUs full of gangs that may only go whole (minMember = size, 2 to 4
    pods of one GPU), of two queues of drawn weights, of priorities drawn for the
    gang and for its pods, some in kube-system, of drawn owner kinds, and pods of both
    queues waiting: many gangs alike, whose verdicts differ by queue, priority,
    namespace and service type."""
    objects: list[dict[str, Any]] = [b.priority_class("high", 1000),
                                     b.priority_class("low", 10), b.priority_class("mid", 100)]
    for name in ("qa", "qb"):
        objects.append(b.queue(name, draw(st.integers(1, 3)), reclaimable=True))
    nodes = draw(st.integers(2, 6))
    objects += [b.node(f"n{i}", cpu="8", memory="32Gi", **{GPU: "4"}) for i in range(nodes)]
    slots = [f"n{i}" for i in range(nodes) for _ in range(4)]
    g = 0
    while len(slots) >= 2:
        size = draw(st.integers(2, min(4, len(slots))))
        queue_name = draw(st.sampled_from(["qa", "qb"]))
        priority = draw(st.sampled_from(["low", "mid"]))  # (its pods')
        namespace = draw(st.sampled_from(["default", "default", "kube-system"]))
        group = f"run-{g}"
        objects.append(b.podgroup(group, size, namespace=namespace, queue=queue_name,
                                  phase="Running",
                                  priority_class=draw(st.sampled_from(["low", "mid"]))))
        objects += [b.pod(f"{group}-{t}", cpu="1", memory="1Gi", namespace=namespace,
                          group=group, queue=queue_name, node_name=slots.pop(0),
                          priority_class=priority, owner_kind=draw(OWNER_KINDS),
                          **{GPU: "1"}) for t in range(size)]
        g += 1
    for k in range(draw(st.integers(1, 4))):
        queue_name = draw(st.sampled_from(["qa", "qb"]))
        objects.append(b.pod(f"want-{k}", cpu="1", memory="1Gi", queue=queue_name,
                             priority_class=draw(st.sampled_from(["high", "mid"])),
                             owner_kind=draw(OWNER_KINDS),
                             **{GPU: draw(st.sampled_from(["1", "2"]))}))
    return objects


# Every built-in plugin that offers victims, its victim hooks on (capacity and
# proportion both divide the queues: one conf each).
EVERY_OFFERER = {
    "proportion": """
actions: "enqueue, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
""",
    "capacity-card": """
actions: "enqueue, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion},
            {name: capacity-card, arguments: {podOwnerReferenceToServiceType:
                                              {Job: training, Deployment: inference}}},
            {name: nodeorder}]
""",
    "capacity": """
actions: "enqueue, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}]
"""}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=st.one_of(full_clusters(), whole_gang_clusters()),
       conf_name=st.sampled_from(["reclaim-preempt", "preempt-no-enqueue",
                                  *sorted(EVERY_OFFERER)]))
def test_gangs_judged_by_signature_decide_as_gangs_asked_about_one_by_one(objects,
                                                                          conf_name):
    """Whole-gang verdicts shared by gangs that agree on their victim signature
    (`eviction.Alike`) give the decisions of asking the plugins about every gang, with
    every built-in plugin that offers victims."""
    from vscheduler.framework.session import Session

    def one_by_one(patch: pytest.MonkeyPatch) -> None:
        patch.setattr(Session, "victim_signature", lambda self, job, tasks: None)

    _decide_alike(objects, conf_name, {**CONFS, **EVERY_OFFERER}, one_by_one)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=st.one_of(full_clusters(), whole_gang_clusters()),
       conf_name=st.sampled_from(sorted(EVERY_OFFERER)))
def test_nodes_found_closed_for_preemptors_sharing_refusals_decide_as_judged_by_each(
        objects, conf_name):
    """Nodes one preemptor found closed to a gang-safe plan, taken as closed by the
    others sharing its refusals (`Plans.closed`), give the decisions of every
    preemptor judging every node itself, with every built-in plugin that offers
    victims."""
    from vscheduler.framework.eviction import WholeJobs

    init = WholeJobs.__init__

    def not_noting(self: WholeJobs, preemptor: Any, nodes: Any, eligible: Any, offer: Any,
                   refused: set[str], gives: Any = None, alike: Any = None,
                   closed_nodes: Any = None) -> None:
        init(self, preemptor, nodes, eligible, offer, refused, gives, alike)  # (none shared)

    def each_judging(patch: pytest.MonkeyPatch) -> None:
        patch.setattr(WholeJobs, "__init__", not_noting)

    _decide_alike(objects, conf_name, {**CONFS, **EVERY_OFFERER}, each_judging)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=st.one_of(full_clusters(), whole_gang_clusters()),
       conf_name=st.sampled_from(["reclaim-preempt", "preempt-no-enqueue",
                                  *sorted(EVERY_OFFERER)]))
def test_nodes_the_victim_index_finds_closed_decide_as_planned_on_one_by_one(objects,
                                                                           conf_name):
    """Planning only on the nodes the victim index finds open (`VictimIndex`), kept up
    to date as evictions and pipelines change jobs in the session, gives the decisions
    of planning on every node, with every built-in plugin that offers victims."""
    _decide_alike(objects, conf_name, {**CONFS, **EVERY_OFFERER}, _every_node_walked)


def _every_node_walked(patch: pytest.MonkeyPatch) -> None:
    """The victim index turned off: every node is walked."""
    from vscheduler.framework import eviction

    patch.setattr(eviction, "_open_nodes", lambda *args: None)


# Evicting actions with others between them (the victim index follows what allocate
# and the other evicting action change in the session).
INTERLEAVED = {
    name: EVERY_OFFERER["proportion"].replace('"enqueue, reclaim, preempt"', f'"{actions}"')
    for name, actions in (("reclaim-allocate-preempt",
                           "enqueue, reclaim, allocate, preempt, backfill"),
                          ("preempt-allocate-reclaim", "enqueue, preempt, allocate, reclaim"))}


@st.composite
def varied_gang_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Up to 40 nodes of 4 GPUs, nearly full of gangs of two queues (reclaimable or
    not), some with pods still pending, spread over nodes or not, some protected or
    with a minimum runtime, some pods that may not be preempted; pods and gangs of
    both queues waiting. Enough nodes for node sampling, and for the victim index to
    be asked in the middle of a walk (`eviction._index_pays`)."""
    objects: list[dict[str, Any]] = [b.priority_class("high", 1000),
                                     b.priority_class("mid", 100), b.priority_class("low", 10)]
    for name in ("qa", "qb"):
        objects.append(b.queue(name, draw(st.integers(1, 3)),
                               reclaimable=draw(st.sampled_from([True, True, False]))))
    nodes = draw(st.integers(2, 40))
    objects += [b.node(f"n{i}", cpu="8", memory="32Gi", **{GPU: "4"}) for i in range(nodes)]
    slots = [f"n{i}" for i in range(nodes) for _ in range(4)]
    if draw(st.booleans()):
        slots = slots[:-draw(st.integers(1, 4))]  # (a little room somewhere)
    g = 0
    while slots:
        size, pending = draw(st.integers(1, min(4, len(slots)))), draw(
            st.sampled_from([0, 0, 0, 1, 2]))
        group, queue_name = f"run-{g}", draw(st.sampled_from(["qa", "qb"]))
        guard = draw(st.sampled_from([{}] * 8 + [{"volcano.sh/preemptable": "false"},
                                                 {"volcano.sh/min-runtime": "1000h"}]))
        objects.append(b.podgroup(group, draw(st.integers(1, size + pending)),
                                  queue=queue_name, phase="Running", annotations=guard,
                                  priority_class=draw(st.sampled_from(["low", "mid"]))))
        priority, spread = draw(st.sampled_from(["low", "mid"])), draw(st.booleans())
        for t in range(size):
            where = slots.pop(draw(st.integers(0, len(slots) - 1)) if spread else 0)
            kept = draw(st.integers(0, 12)) == 0
            objects.append(b.pod(f"{group}-{t}", cpu="1", memory="1Gi", group=group,
                                 queue=queue_name, node_name=where, priority_class=priority,
                                 annotations={"volcano.sh/preemptable": "false"}
                                 if kept else None, **{GPU: "1"}))
        objects += [b.pod(f"{group}-{t}", cpu="1", memory="1Gi", group=group,
                          queue=queue_name, priority_class="high",
                          **{GPU: draw(st.sampled_from(["1", "2"]))})
                    for t in range(size, size + pending)]
        g += 1
    for k in range(draw(st.integers(1, 4))):
        queue_name, count = draw(st.sampled_from(["qa", "qb"])), draw(st.integers(1, 3))
        group = f"want-{k}" if draw(st.booleans()) else None
        if group:
            objects.append(b.podgroup(group, count, queue=queue_name, priority_class="high"))
        objects += [b.pod(f"want-{k}-{r}", cpu="1", memory="1Gi", queue=queue_name,
                          group=group, priority_class=draw(st.sampled_from(["high", "mid"])),
                          **{GPU: draw(st.sampled_from(["1", "2"]))}) for r in range(count)]
    return objects


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=varied_gang_clusters(),
       conf_name=st.sampled_from(["reclaim-preempt", "preempt-no-enqueue",
                                  *sorted(EVERY_OFFERER), *sorted(INTERLEAVED)]))
def test_the_victim_index_decides_as_a_walk_on_larger_varied_clusters(objects, conf_name):
    """As the test above, on clusters of up to 40 nodes with protected gangs, pods that
    may not be preempted, gangs part pending, and actions between the evicting ones."""
    _decide_alike(objects, conf_name, {**CONFS, **EVERY_OFFERER, **INTERLEAVED},
                  _every_node_walked)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=st.one_of(full_clusters(), whole_gang_clusters()),
       conf_name=st.sampled_from(sorted(EVERY_OFFERER)))
def test_gangs_of_one_victim_signature_get_alike_answers(objects, conf_name):
    """The promise behind `victim_signature`, for every built-in plugin that offers
    victims: of two gangs that agree on the signature, every waiting pod is offered
    the tasks at the same places of each, by each plugin's `preemptable` and
    `reclaimable` (each on its own: in the session's answer, one plugin's refusal
    would hide another's mistake)."""
    from vscheduler.framework.session import Session
    from vscheduler.model import ALLOCATED_STATUSES

    simulation = Simulation(parse_conf(EVERY_OFFERER[conf_name], conf_name))
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    session = Session(simulation.cache.snapshot(), simulation.conf)
    assert session.judges_gangs_alike
    by_signature: dict[Any, list[list[Any]]] = {}
    for uid in sorted(session.jobs):
        placed = sorted(session.jobs[uid].tasks_in(ALLOCATED_STATUSES), key=lambda t: t.key)
        if placed:
            signature = session.victim_signature(session.jobs[uid], placed)
            by_signature.setdefault(signature, []).append(placed)
    waiting = [t for job in session.jobs.values() for t in job.tasks.values()
               if not t.node_name]
    alike = [gangs for gangs in by_signature.values() if len(gangs) > 1]
    event(f"signatures shared by several gangs: {min(len(alike), 3)}")
    offers = [getattr(plugin, hook) for plugin in session.plugins.values()
              for hook in ("preemptable", "reclaimable") if hasattr(plugin, hook)]
    for preemptor in waiting:
        for gangs in alike:
            for offer in offers:
                answers = {tuple(gang.index(t) for t in offer(preemptor, gang) or ())
                           for gang in gangs}
                assert len(answers) == 1, (offer, preemptor.key,
                                           [g[0].job_id for g in gangs])


START = "2026-01-01T00:00:00Z"
START_SECONDS = 1767225600.0  # START in seconds since the epoch


def _churned_run(objects: list[dict[str, Any]], conf: str, churn: list[tuple[int, int]],
                 *, carried: bool) -> dict[str, Any]:
    """Sessions with a change before each after the first: a running pod finishes (0),
    a pod arrives (1), or a running gang may shrink to one pod (2: its minMember
    lowered); with `carried` off, no plan outlives its session."""
    from vscheduler.framework.session import Session

    with pytest.MonkeyPatch.context() as patch:
        if not carried:
            patch.setattr(Session, "victim_state", lambda self: None)
        simulation = Simulation(parse_conf(conf, "test"), now=START_SECONDS)
        simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
        groups = [obj for obj in objects if obj["kind"] == "PodGroup"]
        simulation.step()
        for number, (change, pick) in enumerate(churn):
            cache = simulation.cache
            running = sorted(k for k, t in cache.tasks.items() if t.node_name)
            if change == 0 and running:
                cache.delete_pod(running[pick % len(running)])
            elif change == 2 and groups:
                group = json.loads(json.dumps(groups[pick % len(groups)]))
                group["spec"]["minMember"] = 1
                simulation.load([(f"churn#{number}", group)])
            else:
                simulation.load([(f"churn#{number}", b.pod(
                    f"late-{number}", cpu="1", memory="1Gi", queue=("qa", "qb")[pick % 2],
                    priority_class="high", **{GPU: "1"}))])
            simulation.step()
        return simulation.report.as_dict()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=st.one_of(full_clusters(), whole_gang_clusters()),
       conf_name=st.sampled_from(["reclaim-preempt", "preempt-no-enqueue",
                                  *sorted(EVERY_OFFERER)]),
       data=st.data())
def test_pods_on_deleted_nodes_are_never_victims(objects, conf_name, data):
    """Nodes deleted under running pods after a session (the pods stay until they are
    deleted too): the later sessions keep the invariants, gangs counted where their
    pods run, and no eviction names a pod whose node is gone."""
    nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    gone = set(data.draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=2,
                                  unique=True)))
    simulation = Simulation(parse_conf({**CONFS, **EVERY_OFFERER}[conf_name], conf_name))
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    run_checked(simulation, data.draw(st.integers(0, 1)))
    on_gone = {t.key for t in simulation.cache.tasks.values() if t.node_name in gone}
    evicted_before = len(simulation.report.evictions)
    for name in sorted(gone):
        simulation.cache.delete_node(name)
    run_checked(simulation, 2)
    evicted = {e["pod"] for e in simulation.report.as_dict()["evictions"][evicted_before:]}
    event(f"evictions: {min(len(evicted), 3)}")
    assert not evicted & on_gone


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=full_clusters(), conf_name=st.sampled_from(["reclaim-preempt",
                                                           "preempt-no-enqueue"]),
       churn=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 99)), min_size=1,
                      max_size=5),
       min_runtime=st.booleans(), whole=st.booleans())
def test_plans_carried_into_the_next_session_decide_as_plans_made_afresh(
        objects, conf_name, churn, min_runtime, whole):
    """Nodes without a victim plan are carried into the next session while they, their
    jobs and the plugins' victim state stay the same (eviction.PlanMemo.carry): with
    pods finishing and arriving between sessions, pods that come of age (a minimum
    runtime of 2 s, one second passing each session), gangs whose minMember is lowered
    (all at it at first, or not), the decisions are those of sessions that plan
    afresh."""
    conf = CONFS[conf_name]
    if whole:  # every gang at its minMember: nothing may go until one is lowered
        sizes: dict[str, int] = {}
        for obj in objects:
            group = obj["metadata"].get("annotations", {}).get(
                "scheduling.k8s.io/group-name")
            if obj["kind"] == "Pod" and group:
                sizes[group] = sizes.get(group, 0) + 1
        for obj in objects:
            if obj["kind"] == "PodGroup":
                obj["spec"]["minMember"] = sizes.get(obj["metadata"]["name"], 1)
    if min_runtime:
        for obj in objects:
            if obj["kind"] == "Pod" and obj["spec"].get("nodeName"):
                obj.setdefault("status", {})["startTime"] = START
        action = "reclaim" if "reclaim" in conf_name else "preempt"
        conf += f"configurations:\n- name: {action}\n  arguments: {{minRuntime: 2s}}\n"
    carried = _churned_run(objects, conf, churn, carried=True)
    afresh = _churned_run(objects, conf, churn, carried=False)
    event(f"evictions: {min(len(carried['evictions']), 3)}")
    assert (carried["evictions"], carried["binds"], carried["pipelined"]) == \
        (afresh["evictions"], afresh["binds"], afresh["pipelined"])


TOPOLOGY_CONFS = {
    "allocate": """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder}, {name: network-topology-aware}]
""",
    "preempt": """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: nodeorder},
            {name: network-topology-aware}]
""",
}
TIER_NAMES = ("leaf", "spine", "core")


def _hypernode(name: str, tier: int, kind: str, members: list[str]) -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": tier, "tierName": TIER_NAMES[tier - 1], "members": [
                {"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]}}


@st.composite
def topology_trees(draw: st.DrawFn, nodes: list[str]) -> list[dict[str, Any]]:
    """2 or 3 levels of HyperNodes over `nodes`: each node in one leaf or none, each
    HyperNode in one parent or none (hanging under the virtual top)."""
    levels = draw(st.integers(2, 3))
    below = [f"t1-{i}" for i in range(draw(st.integers(1, 4)))]
    members: dict[str, list[str]] = {name: [] for name in below}
    for node_name in nodes:
        leaf = draw(st.sampled_from([*below, None, *below]))
        if leaf is not None:
            members[leaf].append(node_name)
    objects = [_hypernode(name, 1, "Node", m) for name, m in members.items() if m]
    below = [name for name, m in members.items() if m]
    for tier in range(2, levels + 1):
        above = [f"t{tier}-{i}" for i in range(draw(st.integers(1, 2)))]
        children: dict[str, list[str]] = {name: [] for name in above}
        for child in below:
            parent = draw(st.sampled_from([*above, *above, None]))
            if parent is not None:
                children[parent].append(child)
        objects += [_hypernode(name, tier, "HyperNode", c) for name, c in children.items()
                    if c]
        below = [name for name, c in children.items() if c]
    return objects


def _topology_gang(draw: st.DrawFn, name: str, nodes: list[str], free: dict[str, int],
                   running: bool) -> list[dict[str, Any]]:
    size = draw(st.integers(1, 4))
    group = b.podgroup(name, draw(st.integers(1, size)),
                       priority_class=draw(st.sampled_from(["high", "low"])))
    shape = draw(st.sampled_from(["tier", "tier", "name", "soft", "none"]))
    if shape == "tier":
        group["spec"]["networkTopology"] = {"highestTierAllowed": draw(st.integers(1, 3))}
    elif shape == "name":
        group["spec"]["networkTopology"] = {
            "mode": "hard", "highestTierName": draw(st.sampled_from([*TIER_NAMES, "x"]))}
    elif shape == "soft":
        group["spec"]["networkTopology"] = {"mode": "soft"}
    parts = 0
    if draw(st.booleans()):  # sub-groups: the pods split by their label `part`
        parts = draw(st.integers(1, 2))
        policy: dict[str, Any] = {
            "name": "part", "matchLabelKeys": ["part"],
            "subGroupSize": draw(st.integers(1, 2)),
            "minSubGroups": draw(st.integers(0, parts))}
        limit = draw(st.sampled_from(["tier", "soft", "none"]))
        if limit == "tier":
            policy["networkTopology"] = {"highestTierAllowed": draw(st.integers(1, 2))}
        elif limit == "soft":
            policy["networkTopology"] = {"mode": "soft"}
        group["spec"]["subGroupPolicy"] = [policy]
    cpu = draw(st.sampled_from(["1", "2", "3"]))
    pods = []
    for i in range(size):
        target = None
        if running and i < size // 2 + 1:  # some of it already running, where it fits
            target = draw(st.sampled_from(nodes))
            if free[target] < int(cpu):
                target = None
            else:
                free[target] -= int(cpu)
        labels = {"part": str(i % parts)} if parts else None
        pods.append(b.pod(f"{name}-{i}", cpu=cpu, memory="1Gi", group=name, labels=labels,
                          node_name=target, priority_class=group["spec"]["priorityClassName"]))
    if any(p["spec"].get("nodeName") for p in pods):
        group["status"]["phase"] = "Running"
    return [group, *pods]


@st.composite
def topology_clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    nodes = [f"n{i}" for i in range(draw(st.integers(2, 8)))]
    free = {n: draw(st.sampled_from([2, 4, 8])) for n in nodes}
    objects: list[dict[str, Any]] = [b.priority_class("high", 1000),
                                     b.priority_class("low", 10)]
    objects += [b.node(n, cpu=str(free[n]), memory="32Gi") for n in nodes]
    objects += draw(topology_trees(nodes))
    for j in range(draw(st.integers(1, 5))):
        objects += _topology_gang(draw, f"job{j}", nodes, free, draw(st.booleans()))
    return objects, nodes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=topology_clusters(), conf_name=st.sampled_from(sorted(TOPOLOGY_CONFS)),
       churn=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 99)), max_size=3),
       data=st.data())
def test_hard_topology_gangs_stay_within_their_tier(cluster, conf_name, churn, data):
    """Generated HyperNode trees (2-3 levels over the nodes, some nodes and HyperNodes
    in none), gangs with hard limits by tier or tier name, soft and none, some already
    running; between sessions a pod finishes (0), a gang arrives (1) or the tree is
    rebuilt with nodes moved (2). After every session, the invariants of ARCHITECTURE.md
    hold and every job a session placed pods of lies within one HyperNode of its tier,
    as does each of its sub-groups with a hard limit (tests/invariants.py,
    check_topology)."""
    objects, nodes = cluster
    simulation = Simulation(parse_conf(TOPOLOGY_CONFS[conf_name], "test"))
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    run_checked(simulation, 1)
    for number, (change, pick) in enumerate(churn):
        cache = simulation.cache
        running = sorted(k for k, t in cache.tasks.items() if t.node_name)
        if change == 0 and running:
            cache.delete_pod(running[pick % len(running)])
        elif change == 1:
            free = {n: 8 for n in nodes}  # (pending pods only: nothing placed here)
            simulation.load([(f"churn#{number}", obj) for obj in _topology_gang(
                data.draw, f"late{number}", nodes, free, False)])
        else:
            for name in list(cache.hypernodes):
                cache.delete_hypernode(name)
            simulation.load([(f"churn#{number}", obj)
                             for obj in data.draw(topology_trees(nodes))])
        run_checked(simulation, 1)
    hard = [job for job in simulation.cache.jobs.values()
            if job.spec.network_topology is not None
            and job.spec.network_topology.mode == "hard"
            and any(t.node_name for t in job.tasks.values())]
    event(f"hard-limited jobs with pods placed: {min(len(hard), 3)}")
    grouped = [job for job in simulation.cache.jobs.values()
               if any(p.network_topology for p in job.spec.sub_groups)
               and any(t.node_name for t in job.tasks.values())]
    event(f"jobs with limited sub-groups placed: {min(len(grouped), 3)}")


INTER_POD_CONFS = {
    "default": DEFAULT_CONF,
    "reclaim-preempt": CONFS["reclaim-preempt"],
    "preempt-packing": """
actions: "allocate, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: nodeorder, arguments: {
    leastrequested.weight: 0, balancedresource.weight: 0, mostrequested.weight: 1}}]
""",
}
HOSTNAME = "kubernetes.io/hostname"


def _own_app(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


@st.composite
def inter_pod_rules(draw: st.DrawFn, app: str) -> tuple[dict | None, list | None]:
    """A group's spec.affinity (pod rules only) and topologySpreadConstraints: required
    anti-affinity against its own app by hostname or zone, a zone spread (maxSkew 1,
    DoNotSchedule), both, required affinity to itself or to running pods, preferred
    anti-affinity, or none."""
    shape = draw(st.sampled_from(["anti-host", "anti-zone", "spread", "spread+anti", "near",
                                  "near-db", "away", "none"]))
    affinity: dict | None = None
    spread: list | None = None
    key = HOSTNAME if shape == "anti-host" or draw(st.booleans()) else "zone"
    if shape in ("anti-host", "anti-zone", "spread+anti"):
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            _own_app(app, key if shape != "anti-zone" else "zone")]}}
    if shape in ("spread", "spread+anti"):
        spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                   "labelSelector": {"matchLabels": {"app": app}}}]
    if shape in ("near", "near-db"):
        affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            _own_app(app if shape == "near" else "db", "zone")]}}
    if shape == "away":
        affinity = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": _own_app(app, HOSTNAME)}]}}
    return affinity, spread


@st.composite
def inter_pod_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nodes with hostname and zone labels (a few without a zone), pods running on them
    (of apps web and db, some with required anti-affinity against their app, some
    terminating, some of another scheduler), and pending groups (Deployment-like
    replicas or gangs) with the rules of `inter_pod_rules`."""
    objects: list[dict[str, Any]] = [b.priority_class("high", 1000),
                                     b.priority_class("low", 10)]
    nodes = [f"n{i}" for i in range(draw(st.integers(2, 7)))]
    free = {}
    for name in nodes:
        labels = {HOSTNAME: name}
        zone = draw(st.sampled_from(["a", "b", "c", "a", "b", None]))
        if zone is not None:
            labels["zone"] = zone
        free[name] = draw(st.sampled_from([2, 4, 8]))
        objects.append(b.node(name, cpu=str(free[name]), memory="32Gi",
                              pods=str(draw(st.sampled_from([3, 110]))), labels=labels))
    for i in range(draw(st.integers(0, 5))):
        target = draw(st.sampled_from(nodes))
        if free[target] < 1:
            continue
        free[target] -= 1
        app = draw(st.sampled_from(["web", "db"]))
        args: dict[str, Any] = {"labels": {"app": app}, "node_name": target,
                                "priority_class": draw(st.sampled_from(["high", "low"]))}
        if draw(st.integers(0, 2)) == 0:
            args["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    _own_app(draw(st.sampled_from(["web", "db", "g0"])),
                             draw(st.sampled_from([HOSTNAME, "zone"])))]}}
        if draw(st.integers(0, 4)) == 0:
            args["scheduler"] = "default-scheduler"
        running = b.pod(f"run-{i}", cpu="1", memory="1Gi", **args)
        if draw(st.integers(0, 4)) == 0:
            running["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        objects.append(running)
    for j in range(draw(st.integers(1, 4))):
        app = draw(st.sampled_from([f"g{j}", f"g{j}", "web"]))
        affinity, spread = draw(inter_pod_rules(app))
        size = draw(st.integers(1, 5))
        args = {"labels": {"app": app}, "affinity": affinity,
                "priority_class": draw(st.sampled_from(["high", "low"]))}
        cpu = draw(st.sampled_from(["500m", "1", "2"]))
        if draw(st.booleans()):
            pods = b.gang(f"job{j}", size, draw(st.integers(1, size)), cpu=cpu, **args)
        else:
            pods = [b.pod(f"rs{j}-{i}", cpu=cpu, owner_kind="ReplicaSet", **args)
                    for i in range(size)]
        for obj in pods:
            if spread and obj["kind"] == "Pod":
                obj["spec"]["topologySpreadConstraints"] = spread
        objects.extend(pods)
    return objects


def _inter_pod_run(objects: list[dict[str, Any]], conf_name: str, sessions: int,
                   shared: bool = True) -> Simulation:
    return _run(objects, conf_name, sessions, INTER_POD_CONFS, shared)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=inter_pod_clusters(), conf_name=st.sampled_from(sorted(INTER_POD_CONFS)),
       sessions=st.integers(1, 3))
def test_inter_pod_rules_hold_on_generated_clusters(objects, conf_name, sessions):
    """Invariant 10 (tests/invariants.py, check_inter_pod) with the others, after every
    session: required anti-affinity never broken by a placed pod, required affinity met,
    a DoNotSchedule spread never made to skew past its maxSkew."""
    simulation = _inter_pod_run(objects, conf_name, sessions)
    report = simulation.report.as_dict()
    event(f"binds: {min(len(report['binds']), 5)}")
    running = any(o["spec"].get("nodeName") for o in objects if o["kind"] == "Pod")
    event(f"started empty: {not running}")
    reasons = ' '.join(r for rs in report['pending'].values() for r in rs)
    event(f"pending for inter-pod rules: {'pod' in reasons}")


def test_a_gang_kept_pipelined_is_checked_with_its_pods_left_allocated():
    """A gang kept because it is pipelined has pods allocated beside those pipelined:
    its spread over zones was judged with all of them, so the check counts them too
    (counting only the pipelined ones, zone a holds 2 of the gang and zone b none)."""
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "g"}}}]
    leaving = b.pod("leaving", cpu="1", node_name="na")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    objects = [b.node("na", cpu="1", labels={HOSTNAME: "na", "zone": "a"}),
               b.node("nb", cpu="500m", labels={HOSTNAME: "nb", "zone": "b"}),
               leaving, *b.gang("job", 3, 2, cpu="500m", labels={"app": "g"})]
    for obj in objects[3:]:
        if obj["kind"] == "Pod":
            obj["spec"]["topologySpreadConstraints"] = spread
    result = _inter_pod_run(objects, "default", 1).report.last
    assert result.pipelined == {"default/job-1": "na", "default/job-2": "na"}
    assert [t.node_name for t in result.podgroup_jobs["default/job"].tasks.values()
            if t.key == "default/job-0"] == ["nb"]


def test_a_pod_left_allocated_that_a_spread_counts_but_does_not_carry_may_skew_it():
    """A gang's pod left allocated (the gang kept as pipelined) counts for another pod's
    spread without carrying it, as a bound one may: placed after that pod, it may skew
    the spread (zone a holds both pods that count, zone b none) and breaks no rule."""
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "x"}}}]
    leaving = b.pod("leaving", cpu="500m", node_name="n3")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    first = b.gang("a", 1, 1, cpu="500m", labels={"app": "x"}, priority_class="high")
    first[1]["spec"]["topologySpreadConstraints"] = spread
    objects = [b.priority_class("high", 1000), b.priority_class("low", 10),
               b.node("n1", cpu="1", labels={HOSTNAME: "n1", "zone": "a"}),
               b.node("n2", cpu="100m", labels={HOSTNAME: "n2", "zone": "b"}),
               b.node("n3", cpu="500m", labels={HOSTNAME: "n3"}), leaving, *first,
               b.podgroup("g", 2, priority_class="low"),
               b.pod("g-0", cpu="500m", group="g", labels={"app": "x"}, priority_class="low"),
               b.pod("g-1", cpu="500m", group="g", priority_class="low")]
    result = _inter_pod_run(objects, "default", 1).report.last
    assert (result.binds, result.pipelined) == ({"default/a-0": "n1"}, {"default/g-1": "n3"})
    assert {t.name: t.node_name for t in result.podgroup_jobs["default/g"].tasks.values()
            if t.status == S.ALLOCATED} == {"g-0": "n1"}


def test_a_pod_bound_beside_a_pod_left_allocated_may_count_on_it_for_its_affinity():
    """The session's view, as Volcano's (ARCHITECTURE.md, invariant 10): a gang kept as
    pipelined leaves a pod allocated on n1, and a later pod whose required affinity
    only that pod meets is bound there."""
    leaving = b.pod("leaving", cpu="600m", node_name="n2")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    near = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "y"}}, "topologyKey": HOSTNAME}]}}
    objects = [b.priority_class("high", 1000), b.priority_class("low", 10),
               b.node("n1", cpu="1100m", labels={HOSTNAME: "n1"}),
               b.node("n2", cpu="600m", labels={HOSTNAME: "n2"}), leaving,
               b.podgroup("c", 2, priority_class="high"),
               b.pod("c-0", cpu="600m", group="c", labels={"app": "y"}, priority_class="high"),
               b.pod("c-1", cpu="600m", group="c", priority_class="high"),
               *b.gang("d", 1, 1, cpu="500m", affinity=near, priority_class="low")]
    result = _inter_pod_run(objects, "default", 1).report.last
    assert (result.binds, result.pipelined) == ({"default/d-0": "n1"}, {"default/c-1": "n2"})
    assert {t.name: t.node_name for t in result.podgroup_jobs["default/c"].tasks.values()
            if t.status == S.ALLOCATED} == {"c-0": "n1"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=inter_pod_clusters(), conf_name=st.sampled_from(sorted(INTER_POD_CONFS)))
def test_inter_pod_same_input_same_decisions(objects, conf_name):
    first = json.dumps(_inter_pod_run(objects, conf_name, 2).report.as_dict())
    second = json.dumps(_inter_pod_run(objects, conf_name, 2).report.as_dict())
    assert first == second


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=inter_pod_clusters(), conf_name=st.sampled_from(sorted(INTER_POD_CONFS)))
def test_inter_pod_decisions_with_shared_searches_equal_those_without(objects, conf_name):
    """Tasks alike share node searches (`Session.task_signature`); a placement changes
    what the rules say about every node of its domain, and the census logs those nodes
    as changed so that shared searches judge them again. With no sharing at all, every
    decision is the same."""
    shared = _inter_pod_run(objects, conf_name, 2).report.as_dict()
    alone = _inter_pod_run(objects, conf_name, 2, shared=False).report.as_dict()
    assert (shared["binds"], shared["pipelined"], shared["evictions"], shared["pending"]) == \
        (alone["binds"], alone["pipelined"], alone["evictions"], alone["pending"])
