"""Victim strategies (`strategies.py`): where each chooses differently from the others,
how a conf names them, and, on generated clusters, how close each comes to the best
choice a brute-force search finds, never taking a protected or too young pod and never
more than the preemptor needs."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import (
    PREEMPT_CONF,
    RECLAIM_CONF,
    load_cache,
    node,
    pod,
    podgroup,
    priority_class,
    queue,
    simulate,
)
from tests.framework.test_eviction import PREEMPT
from vscheduler.conf import ConfError, PluginOption, SchedulerConf, parse_conf
from vscheduler.framework.eviction import evict_for
from vscheduler.framework.session import Session
from vscheduler.framework.strategies import STRATEGIES
from vscheduler.model import TaskStatus
from vscheduler.registry import load_plugin

GPU = "nvidia.com/gpu"
# Volcano's default preemption tiers without drf: its job order (the smaller share
# first) would otherwise come before the creation time in the victim order.
CONF = PREEMPT_CONF.replace("{name: drf, enablePreemptable: false}, ", "")
# Seed 000's priority classes.
CLASSES = [priority_class("production", 1000000), priority_class("high-priority", 100000),
           priority_class("normal", 10000), priority_class("best-effort", 1000),
           priority_class("spot", 100)]


def with_strategy(strategy: str, conf: str = CONF, action: str = "preempt") -> str:
    return conf + f"""configurations:
- name: {action}
  arguments: {{strategy: {strategy}}}
"""


def replica(name: str, gpus: int, priority: str, hour: int, node_name: str = "gpu-0") -> dict:
    """A running one-pod replica of a ReplicaSet: 4 CPUs and 16Gi a GPU, created (and so
    started) at `hour` o'clock."""
    return pod(name, cpu=str(4 * gpus), memory=f"{16 * gpus}Gi", node_name=node_name,
               priority_class=priority, owner_kind="ReplicaSet",
               creation=f"2026-05-01T{hour:02d}:00:00Z", **{GPU: str(gpus)})


def gpu_node(name: str = "gpu-0", gpus: int = 8) -> dict:
    return node(name, cpu="64", memory="512Gi", **{GPU: str(gpus)})


def urgent(gpus: int) -> dict:
    return pod("urgent", cpu="8", memory="32Gi", priority_class="production",
               owner_kind="ReplicaSet", **{GPU: str(gpus)})


# One full 8-GPU node; a production pod needs 2 GPUs. The four strategies take four
# different sets of victims.
ONE_NODE = [*CLASSES, gpu_node(),
            replica("spot-old", 1, "spot", 1), replica("pair", 2, "normal", 4),
            replica("big", 3, "normal", 5), replica("new-2", 1, "normal", 8),
            replica("new-1", 1, "normal", 9), urgent(2)]


def evicted(report: dict) -> list[str]:
    return sorted(e["pod"].split("/")[1] for e in report["evictions"])


def test_lowest_priority_takes_the_lowest_class_then_the_newest():
    """The spot pod goes first (lowest class), one GPU short; then the newest normal
    pod, new-1. Neither the single pod freeing 2 GPUs (pair) nor the fewest pods."""
    report = simulate(ONE_NODE, with_strategy("LowestPriority"))
    assert evicted(report) == ["new-1", "spot-old"]
    assert {e["strategy"] for e in report["evictions"]} == {"LowestPriority"}
    assert report["pipelined"] == {"default/urgent": "gpu-0"}
    # It is the default: no strategy named, the same choice.
    assert evicted(simulate(ONE_NODE, CONF)) == ["new-1", "spot-old"]


def test_newest_first_takes_what_ran_least_whatever_its_class():
    """The two pods started last (09:00 and 08:00) free the 2 GPUs: the old spot pod,
    though of a lower class, keeps running."""
    report = simulate(ONE_NODE, with_strategy("NewestFirst"))
    assert evicted(report) == ["new-1", "new-2"]


def test_minimum_victims_takes_one_pod_when_one_is_enough():
    """The largest pod (3 GPUs) alone makes room: one victim, though it frees a GPU more
    than needed and is of a higher class than the spot pod."""
    report = simulate(ONE_NODE, with_strategy("MinimumVictims"))
    assert evicted(report) == ["big"]


def test_minimum_gpu_waste_takes_the_set_that_just_covers_the_need():
    """Exactly 2 GPUs: the pair (one pod) rather than two one-GPU pods (the same GPUs,
    more pods) or the 3-GPU pod (a GPU wasted)."""
    report = simulate(ONE_NODE, with_strategy("MinimumGPUWaste"))
    assert evicted(report) == ["pair"]


def test_minimum_victims_prefers_the_node_with_fewer_victims_to_fewer_gpus():
    """gpu-0 offers one 4-GPU pod, gpu-1 two 1-GPU pods, for a need of 2 GPUs: plans are
    ranked by their count of victims with MinimumVictims, by the GPUs they free
    otherwise."""
    objects = [*CLASSES, gpu_node("gpu-0", 4), gpu_node("gpu-1", 2),
               replica("four", 4, "normal", 3),
               replica("one-a", 1, "normal", 3, "gpu-1"),
               replica("one-b", 1, "normal", 3, "gpu-1"), urgent(2)]
    for strategy, chosen in (("MinimumVictims", ["four"]),
                             ("LowestPriority", ["one-a", "one-b"]),
                             ("NewestFirst", ["one-a", "one-b"]),
                             ("MinimumGPUWaste", ["one-a", "one-b"])):
        assert evicted(simulate(objects, with_strategy(strategy))) == chosen, strategy


def test_the_strategy_applies_to_reclaim_too():
    """Across queues: the training queue's pods are reclaimable; the same one-node scene
    with the victims in it."""
    objects = [queue("training", priority=20000, reclaimable=True),
               queue("inference", priority=80000, reclaimable=False)]
    for obj in ONE_NODE:
        obj = dict(obj, metadata=dict(obj["metadata"]))
        if obj["kind"] == "Pod":
            name = "inference" if obj["metadata"]["name"] == "urgent" else "training"
            obj["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": name}
        objects.append(obj)
    for strategy, chosen in (("MinimumVictims", ["big"]), ("MinimumGPUWaste", ["pair"]),
                             ("NewestFirst", ["new-1", "new-2"])):
        report = simulate(objects, with_strategy(strategy, RECLAIM_CONF, "reclaim"))
        assert evicted(report) == chosen, strategy
        assert {e["action"] for e in report["evictions"]} == {"reclaim"}


# --------------------------------------------------------------------------- ties across nodes

STRATEGY_NAMES = sorted(STRATEGIES)


def _budget_for(app: str) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": 0},
            "status": {"disruptionsAllowed": 0}}


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("gpus_b", [1, 2])
def test_across_nodes_the_plan_breaking_no_budget_goes_first(strategy: str, gpus_b: int):
    """gpu-0's pod is covered by a budget that allows no disruption; gpu-1's by none:
    gpu-1's pod goes, even where it frees more GPUs than gpu-0's (kube-scheduler's
    first rule when it picks a node). Without the budget, gpu-0's, the cheaper or the
    first."""
    objects = [*CLASSES, gpu_node("gpu-0", 1), gpu_node("gpu-1", gpus_b),
               replica("web", 1, "normal", 3), replica("batch", gpus_b, "normal", 3, "gpu-1"),
               urgent(1)]
    objects[len(CLASSES) + 2]["metadata"]["labels"] = {"app": "web"}
    assert evicted(simulate([*objects, _budget_for("web")],
                            with_strategy(strategy))) == ["batch"]
    assert evicted(simulate(objects, with_strategy(strategy))) == ["web"]


@pytest.mark.parametrize("strategy", ["LowestPriority", "MinimumVictims", "MinimumGPUWaste"])
def test_across_nodes_plans_alike_in_waste_take_the_lower_priority(strategy: str):
    """A normal pod on gpu-0, a spot pod of the same size on gpu-1: the spot pod goes,
    though gpu-0 comes first in node order."""
    objects = [*CLASSES, gpu_node("gpu-0", 1), gpu_node("gpu-1", 1),
               replica("normal", 1, "normal", 3), replica("spot", 1, "spot", 3, "gpu-1"),
               urgent(1)]
    assert evicted(simulate(objects, with_strategy(strategy))) == ["spot"]


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_a_lower_priority_gang_goes_before_an_elastic_job_alike_in_waste(strategy: str):
    """One 8-GPU node: an elastic job (minMember 2, four one-GPU replicas, normal) and a
    spot gang of four; 3 GPUs are needed. The elastic job gives two replicas and must go
    whole for a third; the gang goes whole: 4 GPUs and 4 pods either way. The spot gang
    goes, the lower priority, whatever the strategy (the elastic job's replicas taken
    first once made its whole cost look smaller)."""
    objects = [*CLASSES, gpu_node(),
               podgroup("elastic", 2, phase="Running", priority_class="normal"),
               podgroup("spot", 4, phase="Running", priority_class="spot")]
    for group, priority in (("elastic", "normal"), ("spot", "spot")):
        objects += [pod(f"{group}-{i}", cpu="4", memory="16Gi", node_name="gpu-0",
                        priority_class=priority, group=group,
                        creation="2026-05-01T00:00:00Z", **{GPU: "1"}) for i in range(4)]
    objects.append(urgent(3))
    assert evicted(simulate(objects, with_strategy(strategy))) == [
        f"spot-{i}" for i in range(4)]


# --------------------------------------------------------------------------- the report


def test_each_eviction_says_its_queue_strategy_and_grace_period():
    conf = CONF + """configurations:
- name: preempt
  arguments: {strategy: MinimumGPUWaste, gracePeriodSeconds: 120}
"""
    [entry] = simulate(ONE_NODE, conf)["evictions"]
    assert entry == {"pod": "default/pair", "node": "gpu-0", "action": "preempt",
                     "for": "default/urgent", "queue": "default", "elastic": False,
                     "strategy": "MinimumGPUWaste", "gracePeriodSeconds": 120}
    # No grace period configured: none in the report (each pod's own applies).
    for entry in simulate(ONE_NODE, CONF)["evictions"]:
        assert "gracePeriodSeconds" not in entry
        assert entry["strategy"] == "LowestPriority"


# --------------------------------------------------------------------------- the conf


def _conf_error(arguments: str) -> str:
    with pytest.raises(ConfError) as caught:
        parse_conf(CONF + "configurations:\n- name: preempt\n  arguments: " + arguments,
                   "sched.conf")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("sched.conf:")
    return message


@pytest.mark.parametrize(("arguments", "words"), [
    ("{strategy: MinimumGpuWastage}", ["preempt", "strategy", "MinimumGpuWastage",
                                       "LowestPriority", "NewestFirst", "MinimumVictims",
                                       "MinimumGPUWaste"]),
    ("{strategy: 3}", ["strategy", "3"]),
    ("{maxEvictionRatio: -1}", ["maxEvictionRatio", "at least 0", "-1"]),
    ("{maxEvictionRatio: lots}", ["maxEvictionRatio", "lots"]),
    ("{gracePeriodSeconds: -30}", ["gracePeriodSeconds", "at least 1", "-30"]),
    # 0 would delete at once (a force delete) while the GPUs may still be held
    ("{gracePeriodSeconds: 0}", ["gracePeriodSeconds", "at least 1", "0"]),
    ("{gracePeriodSeconds: soon}", ["gracePeriodSeconds", "soon"]),
])
def test_a_bad_strategy_ratio_or_grace_is_one_conf_error(arguments: str, words: list[str]):
    message = _conf_error(arguments)
    for word in words:
        assert word in message, word


def test_a_strategy_is_read_regardless_of_case_and_handed_on_as_named():
    text = with_strategy("minimumgpuwaste", CONF.replace("preempt", "preempt, reclaim"))
    conf = parse_conf(text + "- name: reclaim\n  arguments: {strategy: NEWESTFIRST, "
                      "maxEvictionRatio: 0, gracePeriodSeconds: 1}\n", "sched.conf")
    args = {name: arguments for name, _, arguments in conf.actions}
    assert args["preempt"]["strategy"] == "MinimumGPUWaste"
    assert (args["reclaim"]["strategy"], args["reclaim"]["maxEvictionRatio"],
            args["reclaim"]["gracePeriodSeconds"]) == ("NewestFirst", 0.0, 1)
    assert args["preempt"]["maxEvictionRatio"] == 2.0
    assert args["preempt"]["gracePeriodSeconds"] is None


# --------------------------------------------------------------------------- generated


@dataclass(frozen=True)
class Unit:
    """What goes together: one pod, or a gang's pods (minMember = its size)."""

    name: str
    node: int
    gpus: tuple[int, ...]  # per pod
    priority: str  # a class of CLASSES
    protected: bool = False
    young: bool = False

    @property
    def gang(self) -> bool:
        return len(self.gpus) > 1

    @property
    def pods(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(len(self.gpus))] if self.gang \
            else [self.name]

    @property
    def total(self) -> int:
        return sum(self.gpus)


NODE_GPUS = 8
MIN_RUNTIME = 600.0
NOW = 1777636800.0  # 2026-05-01T12:00:00Z, a minute after the young pods started


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[int], list[Unit], int]:
    """1-3 nodes of 8 GPUs, each filled (up to an idle GPU or two) with one-pod jobs of
    1-8 GPUs and gangs of 2-3 pods of 1-3 GPUs each, some protected, some too young; a
    preemptor asking 1-8 GPUs. (idle GPUs per node, units, GPUs asked)"""
    units: list[Unit] = []
    idle = []
    for n in range(draw(st.integers(1, 3))):
        reserved = draw(st.integers(0, 2))
        free = NODE_GPUS - reserved
        while free > 0:
            if draw(st.booleans()) and free >= 2:
                size = draw(st.integers(2, min(3, free)))
                per = draw(st.integers(1, max(1, min(3, free // size))))
                gpus = (per,) * size
            else:
                gpus = (draw(st.integers(1, free)),)
            flags = draw(st.sampled_from(["", "", "", "", "protected", "young"]))
            units.append(Unit(f"n{n}-u{len(units)}", n, gpus,
                              draw(st.sampled_from(["spot", "best-effort", "normal"])),
                              flags == "protected", flags == "young"))
            free -= sum(gpus)
        idle.append(reserved)
    return idle, units, draw(st.integers(1, NODE_GPUS))


def _objects(units: list[Unit], nodes: int, need: int) -> list[dict]:
    objects: list[dict] = [*CLASSES, *(gpu_node(f"n{n}") for n in range(nodes))]
    for index, unit in enumerate(units):
        created = "2026-05-01T11:59:00Z" if unit.young else \
            f"2026-05-01T{index // 60:02d}:{index % 60:02d}:00Z"
        extra = {"annotations": {"volcano.sh/preemptable": "false"}} if unit.protected \
            else {}
        if unit.gang:
            objects.append(podgroup(unit.name, len(unit.gpus), phase="Running",
                                    priority_class=unit.priority))
        for name, gpus in zip(unit.pods, unit.gpus, strict=True):
            objects.append(pod(name, cpu=str(4 * gpus), memory=f"{16 * gpus}Gi",
                               node_name=f"n{unit.node}", priority_class=unit.priority,
                               group=unit.name if unit.gang else None,
                               creation=created, **{GPU: str(gpus)}, **extra))
    objects.append(pod("p", cpu="1", memory="1Gi", priority_class="production",
                       **{GPU: str(need)}))
    return objects


def _run(units: list[Unit], nodes: int, need: int,
         strategy: str) -> tuple[bool, str | None, list[str]]:
    """Whether `evict_for` made room for the preemptor, on which node, evicting whom."""
    objects = _objects(units, nodes, need)
    tiers = [[PluginOption("priority", load_plugin("priority"), {}, {})]]
    conf = SchedulerConf(actions=[], tiers=tiers, source="test", warnings=[])
    session = Session(load_cache(objects).snapshot(), conf, now=NOW)
    policy = dataclasses.replace(PREEMPT, strategy=STRATEGIES[strategy],
                                 min_runtime=MIN_RUNTIME)
    [preemptor] = [t for j in session.jobs.values() for t in j.tasks.values()
                   if t.name == "p"]
    done = evict_for(session, session.statement(), policy, preemptor)
    gone = sorted(t.name for j in session.jobs.values() for t in j.tasks.values()
                  if t.status == TaskStatus.RELEASING)
    return done, preemptor.node_name if done else None, gone


def _best(units: list[Unit], idle: list[int], need: int,
          cost: str) -> int | None:
    """Brute force, as the strategies' rules read: on each node, the cheapest set of
    units (`cost`: "pods" or "gpus") freeing enough GPUs there, among one-pod jobs alone
    when they can (victims that break no gang go first), else among gangs too; the
    cheapest over the nodes. None if no node can make room."""
    best = None
    for n, free in enumerate(idle):
        if free >= need:
            return 0
        here = [u for u in units if u.node == n and not u.protected and not u.young]
        for among in ([u for u in here if not u.gang], here):
            found = None
            for size in range(1, len(among) + 1):
                for chosen in itertools.combinations(among, size):
                    if free + sum(u.total for u in chosen) < need:
                        continue
                    value = sum(len(u.gpus) if cost == "pods" else u.total
                                for u in chosen)
                    found = value if found is None else min(found, value)
            if found is not None:
                best = found if best is None else min(best, found)
                break
    return best


def _units_of(units: list[Unit], gone: list[str]) -> list[Unit]:
    """The units evicted; each whole (a gang partly evicted fails the test)."""
    taken = []
    for unit in units:
        count = sum(1 for name in unit.pods if name in gone)
        assert count in (0, len(unit.pods)), f"{unit.name} evicted in part: {gone}"
        if count:
            taken.append(unit)
    return taken


@settings(max_examples=150, deadline=None)
@given(clusters(), st.sampled_from(sorted(STRATEGIES)))
def test_every_strategy_spares_the_protected_and_evicts_nothing_it_does_not_need(
        case, strategy):
    idle, units, need = case
    done, node_name, gone = _run(units, len(idle), need, strategy)
    assert done == (_best(units, idle, need, "pods") is not None)
    taken = _units_of(units, gone)
    assert not [u for u in taken if u.protected or u.young]
    if not done:
        assert gone == []
        return
    n = int(node_name[1:])
    assert all(u.node == n for u in taken)  # (gangs here are on one node)
    freed = sum(u.total for u in taken)
    assert idle[n] + freed >= need
    for unit in taken:  # no victim unit could have been spared
        assert idle[n] + freed - unit.total < need, (unit, taken)


def _rounding(units: list[Unit], cost: str) -> int:
    """What whole gangs may cost beyond the best: less than the largest gang."""
    gangs = [len(u.gpus) if cost == "pods" else u.total for u in units if u.gang]
    return max(gangs) - 1 if gangs else 0


def test_a_gang_that_frees_enough_alone_goes_rather_than_singles_and_a_small_gang():
    """n1 is full: two one-GPU pods, a gang of 2x2 GPUs and a gang of 2x1; 4 GPUs are
    needed there. The two singles free too little, and with them the small gang frees
    just enough (4 pods evicted), but the large gang frees enough alone and the singles
    are then spared (2 pods, 4 GPUs either way): every strategy takes the large gang,
    the gangs being weighed by the plan each leaves after the reprieve, not by their
    own waste."""
    units = [Unit("n0-u0", 0, (2, 2), "spot", protected=True), Unit("n0-u1", 0, (1,), "spot"),
             Unit("n0-u2", 0, (1,), "spot", protected=True), Unit("n1-u3", 1, (1,), "spot"),
             Unit("n1-u4", 1, (2, 2), "spot"), Unit("n1-u5", 1, (1, 1), "spot"),
             Unit("n1-u6", 1, (1,), "spot")]
    for strategy in sorted(STRATEGIES):
        assert _run(units, 2, 4, strategy) == (True, "n1", ["n1-u4-0", "n1-u4-1"]), strategy


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_minimum_victims_evicts_at_most_the_fewest_plus_the_gang_rounding(case):
    idle, units, need = case
    done, _, gone = _run(units, len(idle), need, "MinimumVictims")
    fewest = _best(units, idle, need, "pods")
    if fewest is not None:
        assert done and len(gone) <= fewest + _rounding(units, "pods")


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_minimum_gpu_waste_frees_at_most_the_least_plus_the_gang_rounding(case):
    idle, units, need = case
    done, _, gone = _run(units, len(idle), need, "MinimumGPUWaste")
    least = _best(units, idle, need, "gpus")
    if least is not None:
        assert done
        freed = sum(u.total for u in _units_of(units, gone))
        assert freed <= least + _rounding(units, "gpus")
