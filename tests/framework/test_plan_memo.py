"""Victim plans shared between preemptors alike (`eviction.PlanMemo`): the decisions are
those of every preemptor planning for itself, scene by scene where sharing could go
wrong (a node with room the queue could not use yet, a remembered plan gone stale)."""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders as b
from vscheduler.conf import parse_conf
from vscheduler.framework import eviction
from vscheduler.simulate import Simulation

GPU = "nvidia.com/gpu"


def _run(conf: str, objects: list[dict[str, Any]], *, shared: bool) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        if not shared:  # every preemptor plans for itself, on every node
            patch.setattr(eviction.PlanMemo, "plans_for",
                          lambda self, session, policy, signature: eviction.Plans())
        simulation = Simulation(parse_conf(conf, "test"))
        simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
        simulation.run(1)
        return simulation.report.as_dict()


def _decisions(report: dict[str, Any]) -> tuple[Any, ...]:
    return ([(e["pod"], e["node"], e["for"]) for e in report["evictions"]],
            report["binds"], report["pipelined"])


PREEMPT = """
actions: "allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false}, {name: conformance}]
- plugins: [{name: drf, enablePreemptable: false}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
"""


def test_room_the_queue_could_not_use_is_used_once_it_can() -> None:
    """Queue qa is at its capability: P1 must evict (L on v); with L going, qa has room
    for P2, which then takes the free node r. That r offered P1 no victim must not hide
    its room from P2 (sharing once evicted M on u for P2)."""
    objects = [b.priority_class("high", 1000), b.priority_class("low", 10),
               b.queue("qa", 1, capability={"cpu": "5"}), b.queue("qb", 1),
               b.node("v", cpu="3", memory="32Gi", pods="2"),
               b.node("u", cpu="2", memory="32Gi"), b.node("w", cpu="1", memory="32Gi"),
               b.node("r", cpu="1", memory="32Gi"),
               b.pod("L", cpu="2", queue="qa", node_name="v", priority_class="low"),
               b.pod("O", cpu="1", queue="qb", node_name="v", priority_class="high"),
               b.pod("M", cpu="2", queue="qa", node_name="u", priority_class="low"),
               b.pod("H", cpu="1", queue="qa", node_name="w", priority_class="high"),
               *(b.pod(f"P{i}", cpu="1", queue="qa", priority_class="high")
                 for i in (1, 2))]
    shared = _run(PREEMPT, objects, shared=True)
    assert [(e["pod"], e["for"]) for e in shared["evictions"]] == \
        [("default/L", "default/P1")]
    assert shared["pipelined"] == {"default/P1": "v", "default/P2": "r"}
    assert _decisions(shared) == _decisions(_run(PREEMPT, objects, shared=False))


RECLAIM = """
actions: "enqueue, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false}, {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""


def test_a_remembered_plan_is_made_again_before_it_is_carried_out() -> None:
    """Job J (minMember 2) has a pod on each of three nodes. P1 takes J-0, an elastic
    replica: J keeps two. P2's plans were made with P1's, when J had three pods; made
    again, taking J-1 would leave J one pod, so J-1 goes only with J-2."""
    objects = [b.queue("qa", 1, reclaimable=False), b.queue("qb", 1, reclaimable=True),
               *(b.node(f"n{i}", cpu="8", memory="32Gi", **{GPU: "1"}) for i in range(3)),
               b.podgroup("J", 2, queue="qb", phase="Running"),
               *(b.pod(f"J-{i}", group="J", queue="qb", node_name=f"n{i}", **{GPU: "1"})
                 for i in range(3)),
               *(b.pod(f"P{i}", queue="qa", **{GPU: "1"}) for i in (1, 2))]
    shared = _run(RECLAIM, objects, shared=True)
    assert [(e["pod"], e["for"], e["elastic"]) for e in shared["evictions"]] == [
        ("default/J-0", "default/P1", True), ("default/J-1", "default/P2", False),
        ("default/J-2", "default/P2", False)]
    assert _decisions(shared) == _decisions(_run(RECLAIM, objects, shared=False))


def test_plans_are_shared_only_when_every_plugin_offering_victims_signs() -> None:
    """A plugin with a victim hook and no `preemptor_signature` (a third party's, say)
    turns the sharing off: its offers could depend on anything about the preemptor."""
    from vscheduler.conf import PluginOption, SchedulerConf
    from vscheduler.framework.session import Session
    from vscheduler.hookspecs import hookimpl
    from vscheduler.plugin import Plugin

    class Unsigned(Plugin):
        name = "unsigned"

        @hookimpl
        def reclaimable(self, reclaimer: Any, candidates: list) -> list | None:
            return None

    objects = [b.node("n0"), b.pod("p")]
    cache = b.load_cache(objects)
    signed = Session(cache.snapshot(), parse_conf(RECLAIM, "signed"))
    task = next(iter(next(iter(signed.jobs.values())).tasks.values()))
    assert signed.preemptor_signature(task) is not None
    conf = SchedulerConf(actions=[], tiers=[[PluginOption("unsigned", Unsigned, {}, {})]],
                         source="test", warnings=[])
    unsigned = Session(b.load_cache(objects).snapshot(), conf)
    task = next(iter(next(iter(unsigned.jobs.values())).tasks.values()))
    assert unsigned.preemptor_signature(task) is None


def test_a_node_is_planned_again_when_a_gang_there_lost_a_pod_elsewhere():
    """Gang run-1 (minMember 2) has a pod on n0 and two on n1. While whole, its pods on
    n1 cannot go (taking them would leave one of a gang of two); once its pod on n0 is
    evicted for an earlier preemptor, the two on n1 are the whole gang and may go
    together. A plan kept for n1 from before must not hide that: n1 comes before n2 in
    node order, and planning alone takes it."""
    objects: list[dict[str, Any]] = [
        b.priority_class("low", 10), b.priority_class("high", 1000),
        b.queue("qa", reclaimable=True), b.queue("qb", reclaimable=True),
        *(b.node(f"n{i}", cpu="8", memory="32Gi", **{GPU: "4"}) for i in range(5))]
    placed = {"run-0": (1, ["n0", "n0", "n0"]), "run-1": (2, ["n0", "n1", "n1"]),
              "run-2": (4, ["n1", "n1", "n2", "n2"]), "run-3": (1, ["n2", "n2"]),
              "run-4": (1, ["n3"] * 4), "run-5": (1, ["n4"] * 4)}
    for name, (minimum, nodes) in placed.items():
        objects.append(b.podgroup(name, minimum, queue="qa", priority_class="low",
                                  phase="Running"))
        objects += [b.pod(f"{name}-{i}", group=name, queue="qa", node_name=node,
                          priority_class="low", phase="Running", **{GPU: "1"})
                    for i, node in enumerate(nodes)]
    objects += [b.pod(f"want-{i}", queue="qb", priority_class="high", **{GPU: "2"})
                for i in range(3)]
    shared, alone = _run(RECLAIM, objects, shared=True), _run(RECLAIM, objects, shared=False)
    assert _decisions(shared) == _decisions(alone)
    assert ("default/run-1-1", "n1") in [(e["pod"], e["node"]) for e in shared["evictions"]]


CARRY = """
actions: "allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: nodeorder}]
"""


def _full_of_whole_gangs(nodes: int = 4) -> list[dict[str, Any]]:
    """Nodes full of low-priority gangs of two at their minMember (one gang per node),
    and high-priority pods pending: no pod may go, on any node."""
    objects: list[dict[str, Any]] = [
        b.priority_class("low", 10), b.priority_class("high", 1000), b.queue("qa"),
        *(b.node(f"n{i}", cpu="8", memory="32Gi", **{GPU: "2"}) for i in range(nodes))]
    for i in range(nodes):
        objects.append(b.podgroup(f"run-{i}", 2, queue="qa", priority_class="low",
                                  phase="Running"))
        objects += [b.pod(f"run-{i}-{t}", group=f"run-{i}", queue="qa", node_name=f"n{i}",
                          priority_class="low", phase="Running", **{GPU: "1"})
                    for t in range(2)]
    return objects + [b.pod(f"want-{i}", queue="qa", priority_class="high", **{GPU: "1"})
                      for i in range(3)]


def _planned_per_session(simulation: Simulation, changes: list[Any], *,
                         index: bool = False) -> list[list[str]]:
    """The nodes planned on in each session, a change made before each after the first;
    without the victim index unless `index` (it would find every node of these scenes
    closed before any is planned on: the memo is what is tested here)."""
    planned: list[list[str]] = []
    plan_on_node = eviction._plan_on_node

    def counted(session: Any, policy: Any, preemptor: Any, node: Any, *rest: Any) -> Any:
        planned[-1].append(node.name)
        return plan_on_node(session, policy, preemptor, node, *rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(eviction, "_plan_on_node", counted)
        if not index:
            patch.setattr(eviction, "_open_nodes", lambda *args: None)
        for change in [None, *changes]:
            if change is not None:
                change(simulation)
            planned.append([])
            simulation.step()
    return [sorted(set(names)) for names in planned]


def test_nodes_without_a_plan_are_not_planned_on_again_until_they_change() -> None:
    """Session one finds no plan on any node; session two, with nothing changed, plans
    on none; a pod of run-2 finishing makes n2 worth a look again, and only n2. The
    decisions are those of sessions planning afresh."""
    simulation = Simulation(parse_conf(CARRY, "test"))
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(_full_of_whole_gangs())])
    finish = lambda sim: sim.cache.delete_pod("default/run-2-0")  # noqa: E731
    planned = _planned_per_session(simulation, [None, finish])
    assert planned[0] == ["n0", "n1", "n2", "n3"]
    assert planned[1:] == [[], ["n2"]]
    assert simulation.report.as_dict()["evictions"] == []


def test_nodes_full_of_gangs_refused_whole_are_not_planned_on_with_the_victim_index(
        ) -> None:
    """With the victim index, the gangs filling every node are asked about by kind, and
    no node is planned on, in any session; a pod of run-2 finishing makes run-2 give
    its other pod alone, so n2, and only n2, is planned on. The decisions are those of
    planning without the index."""
    def run(index: bool) -> tuple[list[list[str]], list[Any]]:
        simulation = Simulation(parse_conf(CARRY, "test"))
        simulation.load([(f"test#{i}", o) for i, o in enumerate(_full_of_whole_gangs())])
        finish = lambda sim: sim.cache.delete_pod("default/run-2-0")  # noqa: E731
        planned = _planned_per_session(simulation, [None, finish], index=index)
        return planned, _decisions(simulation.report.as_dict())

    (planned, decisions), (_, without) = run(True), run(False)
    assert planned == [[], [], ["n2"]]
    assert decisions == without


def test_the_victim_index_is_asked_once_a_walk_has_found_an_eighth_of_the_nodes_closed(
        ) -> None:
    """Of 24 nodes full of gangs refused whole, the first preemptor's walk finds three
    closed (an eighth), then asks the index, which finds every other node closed: no
    node after them is planned on. The decisions are those of planning without it."""
    def run(index: bool) -> tuple[list[list[str]], Any]:
        simulation = Simulation(parse_conf(CARRY, "test"))
        simulation.load([(f"test#{i}", o) for i, o in enumerate(_full_of_whole_gangs(24))])
        planned = _planned_per_session(simulation, [], index=index)
        return planned, _decisions(simulation.report.as_dict())

    (planned, decisions), (without, alone) = run(True), run(False)
    assert planned == [["n0", "n1", "n2"]]
    assert len(without[0]) == 24
    assert decisions == alone


def test_plans_are_made_again_when_the_victim_state_changes() -> None:
    """What the plugins' offers read beyond the nodes and jobs (`victim_state`: drf's
    cluster total, say) changing between sessions: every node is planned on again."""
    from vscheduler.framework.session import Session

    states = iter(range(100))
    simulation = Simulation(parse_conf(CARRY, "test"))
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(_full_of_whole_gangs())])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Session, "victim_state", lambda self: (next(states),))
        planned = _planned_per_session(simulation, [None])
    assert planned == [["n0", "n1", "n2", "n3"]] * 2


ALONE = """
actions: "allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false}, {name: conformance}]
- plugins: [{name: drf, enablePreemptable: false}, {name: predicates}, {name: nodeorder}]
"""


def _evictions(conf: str, objects: list[dict[str, Any]], changes: list[Any]) -> list[str]:
    """The pods evicted over a session, then one more after each change."""
    simulation = Simulation(parse_conf(conf, "test"))
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    _planned_per_session(simulation, changes)
    return [e["pod"] for e in simulation.report.as_dict()["evictions"]]


def test_a_priority_class_lowered_under_a_running_pod_is_seen_next_session() -> None:
    """`victim` outranks `want` until its PriorityClass is lowered: the job copy handed
    on from the last snapshot is unchanged, but its priority is not, and the node where
    no plan worked is planned on again."""
    objects = [b.priority_class("v", 200), b.priority_class("p", 100), b.queue("qa"),
               b.node("n0", cpu="2", memory="8Gi"),
               b.pod("victim", cpu="2", queue="qa", node_name="n0", priority_class="v"),
               b.pod("want", cpu="1", queue="qa", priority_class="p")]
    lower = lambda sim: sim.load([("pc", b.priority_class("v", 50))])  # noqa: E731
    assert _evictions(ALONE, objects, [None, lower]) == ["default/victim"]


def test_a_disruption_budget_that_changes_plans_again() -> None:
    """Gang G (minMember 2) may give up one pod on n0: by pod priority G-a, which does
    not make room. A budget covering G-a, added later, puts G-b first, which does: the
    budgets are part of what carried plans were made under."""
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "pa", "namespace": "default"},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "a"}}},
              "status": {"disruptionsAllowed": 0}}
    objects = [b.priority_class("low", 10), b.priority_class("high", 1000), b.queue("qa"),
               b.node("n0", cpu="4", memory="32Gi"), b.node("n1", cpu="1", memory="32Gi"),
               b.podgroup("G", 2, queue="qa", priority_class="low", phase="Running"),
               b.pod("G-a", cpu="1", group="G", queue="qa", node_name="n0", priority=5,
                     labels={"app": "a"}),
               b.pod("G-b", cpu="3", group="G", queue="qa", node_name="n0", priority=20),
               b.pod("G-c", cpu="1", group="G", queue="qa", node_name="n1", priority=20,
                     annotations={"volcano.sh/preemptable": "false"}),
               b.pod("want", cpu="3", queue="qa", priority_class="high")]
    add = lambda sim: sim.load([("pdb", budget)])  # noqa: E731
    assert _evictions(ALONE, objects, [None, add]) == ["default/G-b"]


def test_a_new_conf_plans_again() -> None:
    """Gang offering no victim, then, with the conf reloaded, not asked: the pod it
    protected goes in the first session under the new conf."""
    objects = [b.priority_class("v", 50), b.priority_class("p", 100), b.queue("qa"),
               b.node("n0", cpu="2", memory="8Gi"),
               b.pod("victim", cpu="2", queue="qa", node_name="n0", priority_class="v"),
               b.pod("want", cpu="1", queue="qa", priority_class="p")]
    strict = ALONE.replace("{name: gang, enablePreemptable: false}", "{name: gang}")

    def reload(sim: Simulation) -> None:
        sim.conf = sim.scheduler.conf = parse_conf(ALONE, "test")

    assert _evictions(strict, objects, [None, reload]) == ["default/victim"]


def _nodes_full_of_gangs(wanting: list[str]) -> list[dict[str, Any]]:
    """Four nodes of 2 GPUs, each full with a gang of queue qc that may only go whole
    (two pods, minMember 2, all of one shape), and a high-priority pod of one GPU
    waiting in each queue of `wanting`."""
    objects: list[dict[str, Any]] = [
        b.priority_class("low", 10), b.priority_class("high", 1000),
        *(b.queue(name, reclaimable=True) for name in (*wanting, "qc")),
        *(b.node(f"n{i}", cpu="8", memory="32Gi", **{GPU: "2"}) for i in range(4))]
    for i in range(4):
        objects.append(b.podgroup(f"run-{i}", 2, queue="qc", priority_class="low",
                                  phase="Running"))
        objects += [b.pod(f"run-{i}-{t}", group=f"run-{i}", queue="qc",
                          node_name=f"n{i}", priority_class="low", phase="Running",
                          **{GPU: "1"}) for t in range(2)]
    for q in wanting:
        objects += [b.podgroup(f"want-{q}", 1, queue=q, priority_class="high",
                               phase="Inqueue"),
                    b.pod(f"want-{q}", group=f"want-{q}", queue=q, priority_class="high",
                          **{GPU: "1"})]
    return objects


def _refusing(by_signature: bool) -> type:
    """A plugin that signs its offers and offers no pod of a whole gang, saying (or not)
    that its offers read nothing of the reclaimer beyond its signature."""
    from vscheduler.hookspecs import hookimpl
    from vscheduler.plugin import Plugin

    class Refusing(Plugin):
        name = "refusing"

        @hookimpl
        def preemptor_signature(self, task: Any) -> None:
            return None

        @hookimpl
        def victim_state(self) -> None:
            return None

        @hookimpl
        def reclaimable(self, reclaimer: Any, candidates: list) -> list | None:
            return []

    if by_signature:
        Refusing.offers_by_signature = hookimpl(lambda self: True)  # type: ignore[attr-defined]
    return Refusing


@pytest.mark.parametrize("sign", ["nothing", "the job's name", "no hook"])
def test_gangs_alike_are_asked_about_once_per_signature(sign: str) -> None:
    """Four gangs of one shape, each filling a node, that may not go whole: when every
    plugin offering victims says what its answers read of a gang
    (`victim_signature`), the plugins are asked about one gang of each signature in
    the action, not about each gang; a plugin that tells gangs apart (here by name),
    or one without the hook, has each asked about. The decisions are the same."""
    from vscheduler.conf import PluginOption
    from vscheduler.hookspecs import hookimpl

    objects = _nodes_full_of_gangs(["qa"])
    refusing = _refusing(True)
    asked: list[tuple[str, ...]] = []

    def reclaimable(self: Any, reclaimer: Any, candidates: list) -> list:
        asked.append(tuple(t.name for t in candidates))
        return []

    refusing.reclaimable = hookimpl(reclaimable)  # type: ignore[attr-defined]
    if sign == "nothing":
        refusing.victim_signature = hookimpl(  # type: ignore[attr-defined]
            lambda self, job, tasks: None)
    elif sign == "the job's name":
        refusing.victim_signature = hookimpl(  # type: ignore[attr-defined]
            lambda self, job, tasks: job.name)
    conf = parse_conf(RECLAIM, "test")
    conf.tiers[0].append(PluginOption("refusing", refusing, {}, {}))
    simulation = Simulation(conf)
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    simulation.run(1)
    gangs = [names for names in asked if len(names) == 2]
    assert len(gangs) == (1 if sign == "nothing" else 4)
    report = simulation.report.as_dict()
    assert report["evictions"] == [] and not report["pipelined"]


@pytest.mark.parametrize("by_signature", [True, False])
def test_a_node_closed_by_shared_refusals_is_planned_on_once_for_reclaimers_of_every_queue(
        by_signature: bool) -> None:
    """Reclaimers of two queues, nodes full of a third queue's gangs that may not go
    whole: when the reclaimers share refusals (`offers_by_signature`), a node the first
    found closed to a gang-safe plan (`Plans.closed`) is not planned on for the second,
    which takes from the same jobs; without shared refusals, each plans on every node.
    The decisions are the same."""
    from vscheduler.conf import PluginOption

    objects = _nodes_full_of_gangs(["qa", "qb"])
    conf = parse_conf(RECLAIM, "test")
    conf.tiers[0].append(PluginOption("refusing", _refusing(by_signature), {}, {}))
    planned: list[tuple[str, str]] = []
    plan_on_node = eviction._plan_on_node

    def counted(session: Any, policy: Any, preemptor: Any, node: Any, *rest: Any) -> Any:
        planned.append((preemptor.name, node.name))
        return plan_on_node(session, policy, preemptor, node, *rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(eviction, "_plan_on_node", counted)
        simulation = Simulation(conf)
        simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
        simulation.run(1)
    nodes = sorted(f"n{i}" for i in range(4))
    assert sorted(node for who, node in planned if who == "want-qa") == nodes
    assert sorted(node for who, node in planned if who == "want-qb") == (
        [] if by_signature else nodes)
    report = simulation.report.as_dict()
    assert report["evictions"] == [] and not report["pipelined"]


def test_a_node_closed_to_one_queue_by_its_own_gang_stays_open_to_another() -> None:
    """qa's reclaimer finds node n0 closed: it holds only qa's own gang, which qa may not
    reclaim from. qb's reclaimer shares qa's refusals, but may take that gang: n0 is not
    closed to it (`Plans.closed` keeps the jobs the first rule took nothing from), and
    it reclaims the gang there, as qa's reclaimer took qb's gang on n1."""
    objects: list[dict[str, Any]] = [
        b.priority_class("low", 10), b.priority_class("high", 1000),
        b.queue("qa", reclaimable=True), b.queue("qb", reclaimable=True),
        *(b.node(f"n{i}", cpu="8", memory="32Gi", **{GPU: "2"}) for i in range(2))]
    for name, queue, where in (("G", "qa", "n0"), ("H", "qb", "n1")):
        objects.append(b.podgroup(name, 2, queue=queue, priority_class="low",
                                  phase="Running"))
        objects += [b.pod(f"{name}-{t}", group=name, queue=queue, node_name=where,
                          priority_class="low", phase="Running", **{GPU: "1"})
                    for t in range(2)]
    for queue in ("qa", "qb"):
        objects += [b.podgroup(f"want-{queue}", 1, queue=queue, priority_class="high",
                               phase="Inqueue"),
                    b.pod(f"want-{queue}", group=f"want-{queue}", queue=queue,
                          priority_class="high", **{GPU: "2"})]  # (a node's cards)
    simulation = Simulation(parse_conf(RECLAIM, "test"))
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    simulation.run(1)
    report = simulation.report.as_dict()
    assert sorted((e["pod"], e["for"]) for e in report["evictions"]) == [
        ("default/G-0", "default/want-qb"), ("default/G-1", "default/want-qb"),
        ("default/H-0", "default/want-qa"), ("default/H-1", "default/want-qa")]
    assert report["pipelined"] == {"default/want-qa": "n1", "default/want-qb": "n0"}


def test_a_node_found_closed_is_open_again_once_a_job_there_changed_elsewhere() -> None:
    """Gang G (queue qc, minMember 2) has a pod on n0 and one on n1, beside a single
    pod S. A plugin that shares its refusals offers G's pods only once S no longer
    runs. qa's reclaimer finds n0 closed (G refused whole), evicts S and lands on n1:
    that changes G, so n0 is no longer known closed, and qb's reclaimer takes G whole
    and lands on n0."""
    from vscheduler.conf import PluginOption
    from vscheduler.hookspecs import hookimpl
    from vscheduler.model import TaskStatus

    class Guarded(_refusing(True)):  # type: ignore[misc]
        name = "guarded"

        @hookimpl
        def on_session_open(self, session: Any) -> None:
            self.session = session

        @hookimpl
        def reclaimable(self, reclaimer: Any, candidates: list) -> list:
            # (offers grow only where a node holding G changed: the promise holds)
            s_runs = any(t.name == "S" and t.status & (TaskStatus.RUNNING | TaskStatus.BOUND)
                         for t, _ in self.session.nodes["n1"].tasks.values())
            return [t for t in candidates if not (s_runs and t.job_id == "default/G")]

    objects: list[dict[str, Any]] = [
        b.priority_class("low", 10), b.priority_class("high", 1000),
        *(b.queue(q, reclaimable=True) for q in ("qa", "qb", "qc")),
        b.node("n0", cpu="8", memory="32Gi", **{GPU: "1"}),
        b.node("n1", cpu="8", memory="32Gi", **{GPU: "2"}),
        b.podgroup("G", 2, queue="qc", priority_class="low", phase="Running"),
        *(b.pod(f"G-{i}", group="G", queue="qc", node_name=f"n{i}", priority_class="low",
                phase="Running", **{GPU: "1"}) for i in range(2)),
        b.podgroup("S", 1, queue="qc", priority_class="low", phase="Running"),
        b.pod("S", group="S", queue="qc", node_name="n1", priority_class="low",
              phase="Running", **{GPU: "1"})]
    for q in ("qa", "qb"):
        objects += [b.podgroup(f"want-{q}", 1, queue=q, priority_class="high",
                               phase="Inqueue"),
                    b.pod(f"want-{q}", group=f"want-{q}", queue=q, priority_class="high",
                          **{GPU: "1"})]
    conf = parse_conf(RECLAIM, "test")
    conf.tiers[0].append(PluginOption("guarded", Guarded, {}, {}))
    simulation = Simulation(conf)
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    simulation.run(1)
    report = simulation.report.as_dict()
    assert report["pipelined"] == {"default/want-qa": "n1", "default/want-qb": "n0"}


@pytest.mark.parametrize("by_signature", [True, False])
def test_a_gang_refused_whole_is_asked_about_once_for_reclaimers_of_every_queue(
        by_signature: bool) -> None:
    """Reclaimers of two queues, nodes full of a third queue's gangs that may not go
    whole: when every plugin offering victims says its offers read nothing of the
    reclaimer beyond its signature (`offers_by_signature`), each gang is asked about
    once in the action, not once per reclaiming queue; the decisions are the same."""
    from vscheduler.conf import PluginOption

    objects = _nodes_full_of_gangs(["qa", "qb"])
    conf = parse_conf(RECLAIM, "test")
    conf.tiers[0].append(PluginOption("refusing", _refusing(by_signature), {}, {}))
    asked: list[str] = []
    whole_job = eviction._whole_job

    def counted(job: Any, *rest: Any) -> Any:
        asked.append(job.name)
        return whole_job(job, *rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(eviction, "_whole_job", counted)
        simulation = Simulation(conf)
        simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
        simulation.run(1)
    assert sorted(asked) == sorted([f"run-{i}" for i in range(4)] * (1 if by_signature else 2))
    report = simulation.report.as_dict()
    assert report["evictions"] == [] and not report["pipelined"]


def test_plans_sharing_refusals_learnt_from_a_young_pod_are_not_carried() -> None:
    """Gang G (minMember 2, queue qc) may not go whole in session one: G-1 is younger
    than reclaim's minRuntime. qa's reclaimer learns that (and reads the clock); qb's,
    sharing qa's refused gangs, finds no plan on either node without reading it. In
    session two G-1 has come of age: qb's reclaimer must plan again and take G whole,
    not trust the nodes it found without a plan."""
    conf = RECLAIM + """configurations:
- name: reclaim
  arguments: {minRuntime: 10m}
"""
    created = "2025-01-01T00:00:00Z"

    def started(obj: dict[str, Any], at: str) -> dict[str, Any]:
        obj["status"]["startTime"] = at
        return obj

    objects: list[dict[str, Any]] = [
        b.priority_class("low", 10), b.priority_class("high", 1000),
        *(b.queue(name, reclaimable=True) for name in ("qa", "qb", "qc")),
        *(b.node(f"n{i}", cpu="8", memory="32Gi", **{GPU: "1"}) for i in range(2)),
        b.podgroup("G", 2, queue="qc", priority_class="low", phase="Running"),
        started(b.pod("G-0", group="G", queue="qc", node_name="n0", priority_class="low",
                      creation=created, **{GPU: "1"}), created),
        # 9m59s before the clock of session one, past 10m in session two
        started(b.pod("G-1", group="G", queue="qc", node_name="n1", priority_class="low",
                      creation=created, **{GPU: "1"}), "2025-01-01T00:50:01Z")]
    for q in ("qa", "qb"):
        objects += [b.podgroup(f"want-{q}", 1, queue=q, priority_class="high",
                               phase="Inqueue", creation="2025-01-01T01:00:00Z"),
                    b.pod(f"want-{q}", group=f"want-{q}", queue=q, priority_class="high",
                          creation="2025-01-01T01:00:00Z", **{GPU: "1"})]
    simulation = Simulation(parse_conf(conf, "test"))
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    simulation.step()
    assert simulation.report.as_dict()["evictions"] == []
    simulation.cache.delete_pod("default/want-qa")
    simulation.step()
    report = simulation.report.as_dict()
    assert sorted(e["pod"] for e in report["evictions"]) == ["default/G-0", "default/G-1"]
    assert report["pipelined"] == {"default/want-qb": "n0"}
