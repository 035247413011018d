"""The fit index (framework/fit_index.py): kept across sessions, it names exactly the
nodes with room for each shape, and allocate decides with it as it does judging every
node: the same nodes, the same sampling offset, the same reasons for pods that wait."""

from __future__ import annotations

import json
import random
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vscheduler.actions.allocate as allocate_module
from tests.builders import gang, load_cache, node, pod, queue
from tests.framework.test_eviction import plugin
from tests.invariants import run_checked
from vscheduler.actions.allocate import Allocate
from vscheduler.actions.enqueue import Enqueue
from vscheduler.actions.preempt import Preempt
from vscheduler.actions.reclaim import Reclaim
from vscheduler.bench import BENCH_CONF, PREEMPT_CONF, BenchSpec, churn, generate
from vscheduler.conf import PluginOption, SchedulerConf, parse_conf
from vscheduler.fit import NodeFitErrors, Unfit
from vscheduler.framework.fit_index import FitIndex, fit_index
from vscheduler.framework.placement import NodeSampling, insufficient
from vscheduler.framework.session import Session
from vscheduler.objects import parse_pod
from vscheduler.plugin import check_arguments
from vscheduler.simulate import Simulation

CONFS = {"bench": BENCH_CONF, "preempt": PREEMPT_CONF}


def _simulation(spec: BenchSpec, conf: str, sampling: NodeSampling) -> Simulation:
    simulation = Simulation(parse_conf(CONFS[conf], conf), node_sampling=sampling)
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(generate(spec))])
    return simulation


def _run(spec: BenchSpec, conf: str, sampling: NodeSampling, sessions: int) -> str:
    simulation = _simulation(spec, conf, sampling)
    rng = random.Random(spec.seed)
    for number in range(sessions):
        if number:
            churn(simulation, spec, rng, number)
        # (in both runs, so that both see the same sessions: this one opens one)
        assert_index_recounts(simulation)
        run_checked(simulation, 1)
    return json.dumps(simulation.report.as_dict())


def assert_index_recounts(simulation: Simulation) -> None:
    """Every shape the kept index holds names exactly the nodes with room for it, once
    brought up to date with a new snapshot."""
    session = Session(simulation.cache.snapshot(), simulation.conf, uid="check")
    kept = simulation.cache.kept.get("framework.fit-index")
    if kept is None:
        return  # (a run without the index)
    index = fit_index(session)
    assert index is kept
    for shape in list(index.shapes.values()):
        fitting = set(index.fitting(session, shape.request))
        assert fitting == {node.position for node in session.node_list
                           if node.insufficient_future(shape.request) is None}
        lacking, recounted = index.lacking(session, shape.request), NodeFitErrors()
        for each in session.node_list:
            if each.position not in fitting:
                recounted.set(each.name, insufficient(each.insufficient_future(shape.request)))
        assert dict(lacking.nodes) == dict(recounted.nodes)
        assert lacking.message() == recounted.message()  # (the counts by reason)


samplings = st.builds(NodeSampling, minimum_feasible=st.integers(1, 12),
                      minimum_percentage=st.integers(1, 20),
                      percentage=st.sampled_from([0, 0, 10, 30, 100]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.integers(2, 40), fill=st.floats(0.0, 1.0), jobs=st.integers(0, 12),
       tasks=st.integers(1, 4), churn_size=st.integers(1, 12), seed=st.integers(0, 1000),
       conf=st.sampled_from(sorted(CONFS)), sampling=samplings)
def test_allocate_decides_alike_with_and_without_the_index(
        nodes, fill, jobs, tasks, churn_size, seed, conf, sampling):
    # (clusters up to full: 8 cards a node, a card a running pod)
    spec = BenchSpec(nodes=nodes, running=int(nodes * 8 * fill), jobs=jobs,
                     tasks_per_job=tasks, churn=churn_size, seed=seed, mig_every=3)
    assert _run_both(spec, conf, sampling)


def _run_both(spec: BenchSpec, conf: str, sampling: NodeSampling) -> bool:
    with_index = _run(spec, conf, sampling, 4)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(allocate_module, "fit_index", lambda session: None)
        without = _run(spec, conf, sampling, 4)
    return with_index == without


def test_a_pod_that_waits_is_told_of_every_node_the_index_passed_by():
    spec = BenchSpec(nodes=3, running=24, jobs=0, mig_every=0, churn=1, seed=1)
    simulation = _simulation(spec, "bench", NodeSampling())
    simulation.step()
    churn(simulation, spec, random.Random(1), 1)
    result = simulation.step()
    assert result.pending == {"bench/arrival-0001-0000": [
        "0/3 nodes are available: 1 node(s) had card NVIDIA-H200, which the pod does not "
        "accept, 2 Insufficient nvidia.com/gpu."]}
    assert _run_both(spec, "bench", NodeSampling())


def test_a_full_cluster_is_searched_through_the_nodes_with_room_only():
    """Three nodes of 100 have room: a new pod's search judges those, not the 97 full
    ones; its reasons still count every node when it cannot be placed."""
    spec = BenchSpec(nodes=100, running=800, jobs=0, mig_every=0, churn=3)
    simulation = _simulation(spec, "bench", NodeSampling())
    simulation.step()
    churn(simulation, spec, random.Random(1), 1)
    session = Session(simulation.cache.snapshot(), simulation.conf, uid="count")
    judged = []
    session.predicate = lambda task, node, judge=session.predicate: (
        judged.append(node.name) or judge(task, node))
    session.run()
    assert session.result.binds
    assert 0 < len(judged) <= 3 * len(session.result.binds)


def test_the_index_is_dropped_when_nodes_change():
    spec = BenchSpec(nodes=5, running=10, jobs=1, mig_every=0)
    simulation = _simulation(spec, "bench", NodeSampling())
    simulation.step()
    before = simulation.cache.kept["framework.fit-index"]
    assert isinstance(before, FitIndex) and before.shapes
    simulation.cache.delete_node(sorted(simulation.cache.nodes)[0])
    simulation.step()
    after = simulation.cache.kept["framework.fit-index"]
    assert after is not before


def test_a_static_refusal_is_not_asked_again_until_its_node_changes():
    """A plugin refuses n0 statically (for its labels, say) and n1 for a reason of the
    moment. A pod that fits nowhere is searched in two sessions: the second asks the
    plugin about n1 again, not about n0, and gives the same reasons; once n0 changes
    (a pod leaves it), it is asked again."""
    asked: list[str] = []
    labels_refusal = Unfit("node(s) had the wrong labels", static=True)
    moment_refusal = Unfit("node(s) were busy")

    def predicate(self, task, node):
        asked.append(node.name)
        return labels_refusal if node.name == "n0" else moment_refusal

    refusing = plugin("refusing", predicate=predicate,
                      task_signature=lambda self, task: None)
    objects = [node("n0", cpu="4"), node("n1", cpu="4"), pod("r0", cpu="1", node_name="n0"),
               *gang("g", 1, cpu="1")]
    cache = load_cache(objects)
    conf = SchedulerConf(actions=[("allocate", Allocate, {})],
                         tiers=[[PluginOption("refusing", refusing, {}, {})]],
                         source="test", warnings=[])
    reasons = []
    for number in range(3):
        if number == 2:
            cache.delete_pod("default/r0")
        asked.clear()
        session = Session(cache.snapshot(), conf)
        result = session.run()
        reasons.append(result.pending["default/g-0"])
        assert asked == (["n0", "n1"] if number != 1 else ["n1"]), number
    assert reasons[0] == reasons[1] == reasons[2] == [
        "0/2 nodes are available: 1 node(s) had the wrong labels, 1 node(s) were busy."]


def test_a_pod_that_fits_nowhere_is_explained_from_the_index_without_a_verdict_a_node():
    """n0 has room but a plugin refuses it statically; n1 and n2 are full. The pod that
    fits nowhere is told of all three in every session; from the second on, its reasons
    are the index's refusals and the kept static one, taken whole (`fill`): no node is
    judged, nor its verdict written one by one by the search."""
    labels_refusal = Unfit("node(s) had the wrong labels", static=True)
    refusing = plugin("refusing", predicate=lambda self, task, node: (
        labels_refusal if node.name == "n0" else None),
        task_signature=lambda self, task: None)
    objects = [node("n0", cpu="4"), node("n1", cpu="2"), node("n2", cpu="2"),
               pod("r1", cpu="2", node_name="n1"), pod("r2", cpu="2", node_name="n2"),
               *gang("g", 1, cpu="1")]
    cache = load_cache(objects)
    conf = SchedulerConf(actions=[("allocate", Allocate, {})],
                         tiers=[[PluginOption("refusing", refusing, {}, {})]],
                         source="test", warnings=[])
    written: list[tuple[str, str]] = []  # (who wrote the verdict, node)

    def set_verdict(self, name, unfit, set_=NodeFitErrors.set):
        written.append((sys._getframe(1).f_code.co_name, name))
        set_(self, name, unfit)

    reasons = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(NodeFitErrors, "set", set_verdict)
        for _ in range(2):
            written.clear()
            reasons.append(Session(cache.snapshot(), conf).run().pending["default/g-0"])
    assert reasons[0] == reasons[1] == [
        "0/3 nodes are available: 1 node(s) had the wrong labels, 2 Insufficient cpu."]
    assert written == [("fill", "n0")]


def test_evicting_actions_judge_a_statically_refused_node_once_per_signature():
    """Three nodes a plugin refuses statically and one it accepts, all full. Two pods of
    one shape in two queues wait, and reclaim and preempt look for victims for each:
    four preemptors of two preemptor signatures (queue q1, queue q2), one task
    signature. The refused nodes are asked about once each, not once per preemptor
    signature and action; the accepted one as often as a plan is made there. Nothing
    can be evicted (the only pod there is protected), so every look is a full one."""
    asked: list[str] = []
    labels_refusal = Unfit("node(s) had the wrong labels", static=True)

    def predicate(self, task, node):
        asked.append(node.name)
        return None if node.name == "n3" else labels_refusal

    refusing = plugin("refusing", predicate=predicate,
                      task_signature=lambda self, task: None,
                      preemptor_signature=lambda self, task: None,
                      job_starving=lambda self, job: True)
    objects = [queue("q0", reclaimable=True), queue("q1"), queue("q2"),
               *(node(f"n{i}", cpu="2") for i in range(4)),
               *(pod(f"r{i}", cpu="2", queue="q0", node_name=f"n{i}") for i in range(3)),
               pod("r3", cpu="2", queue="q0", node_name="n3",
                   annotations={"volcano.sh/preemptable": "false"}),
               *gang("a", 1, cpu="2", queue="q1"), *gang("b", 1, cpu="2", queue="q2")]
    cache = load_cache(objects)
    conf = SchedulerConf(actions=[(action.name, action, check_arguments(action.arguments, {})[0])
                                  for action in (Enqueue, Allocate, Reclaim, Preempt)],
                         tiers=[[PluginOption("refusing", refusing, {}, {})]],
                         source="test", warnings=[])
    result = Session(cache.snapshot(), conf).run()
    assert not result.evictions and set(result.pending) == {"default/a-0", "default/b-0"}
    # (allocate asks nothing here: the fit index says no node has room, and the pods
    # are explained from it; so every question below is an evicting action's)
    assert sorted(n for n in asked if n != "n3") == ["n0", "n1", "n2"]
    assert asked.count("n3") >= 2  # (once per preemptor signature at least)


def _allocate_only(refusing: type) -> SchedulerConf:
    """A conf of allocate alone with one plugin."""
    return SchedulerConf(actions=[("allocate", Allocate, {})],
                         tiers=[[PluginOption("refusing", refusing, {}, {})]],
                         source="test", warnings=[])


def _by_kind(predicate) -> SchedulerConf:
    """Allocate alone with a plugin answering `predicate`, its signature a pod's kind."""
    return _allocate_only(plugin("refusing", predicate=predicate,
                                 task_signature=lambda self, task: task.pod.labels.get("kind")))


def _a_b_a(n1_cpu: str, b_cpu: str = "1") -> list[dict]:
    """n0 (4 cpu) and n1; one-pod jobs a1, b and a2 of kinds a, b and a, in that order."""
    objects = [node("n0", cpu="4"), node("n1", cpu=n1_cpu)]
    for number, (name, kind, cpu) in enumerate((("a1", "a", "1"), ("b", "b", b_cpu),
                                                ("a2", "a", "1"))):
        objects += gang(name, 1, cpu=cpu, labels={"kind": kind},
                        creation=f"2026-01-01T00:00:0{number}Z")
    return objects


def test_a_static_refusal_is_not_asked_again_when_a_pod_lands_on_its_node():
    """Within a session: n0 refuses pods of kind a for its spec. After a pod of kind b
    is placed on n0, the next pod of kind a is not asked about n0 again (only n1, where
    the first pod of kind a went, is judged again)."""
    asked: list[tuple[str, str]] = []
    refusal = Unfit("node(s) had the wrong labels", static=True)

    def predicate(self, task, node):
        kind = task.pod.labels.get("kind", "")
        asked.append((kind, node.name))
        return refusal if (kind, node.name) == ("a", "n0") else None

    result = Session(load_cache(_a_b_a("4")).snapshot(), _by_kind(predicate)).run()
    assert result.binds == {"default/a1-0": "n1", "default/b-0": "n0", "default/a2-0": "n1"}
    assert asked.count(("a", "n0")) == 1
    assert asked.count(("a", "n1")) == 2  # (judged again once the first pod of a went there)


def test_a_node_refused_statically_that_lost_its_room_is_explained_by_its_room():
    """Resources are judged before plugins: n0, refused statically while it had room,
    is told of as lacking cpu once a pod takes its room, as a search that never knew
    the static refusal would say."""
    refusal = Unfit("node(s) had the wrong labels", static=True)
    refusing = plugin("refusing", task_signature=lambda self, task: None,
                      predicate=lambda self, task, node: (
                          refusal if node.name == "n0" else Unfit("node(s) were busy")))
    cache = load_cache([node("n0", cpu="2"), node("n1", cpu="2"), *gang("g", 1, cpu="2")])
    conf = _allocate_only(refusing)
    reasons = []
    for number in range(2):
        if number == 1:
            cache.add_pod(parse_pod(pod("r0", cpu="1", node_name="n0")))
        reasons.append(Session(cache.snapshot(), conf).run().pending["default/g-0"])
    assert reasons == [
        ["0/2 nodes are available: 1 node(s) had the wrong labels, 1 node(s) were busy."],
        ["0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were busy."]]


def test_a_static_refusal_left_standing_is_judged_again_when_a_pod_fails():
    """Within a session: n0 refuses pods of kind a for its spec, but first says it is
    crowded once it holds a pod (a check on its pods coming before one on its spec, as
    Volcano's pod count comes before taints). A pod of kind b lands on n0; the next pod
    of kind a fits nowhere, and is told what a search of its own would say of n0."""
    asked: list[tuple[str, str]] = []
    labels_refusal = Unfit("node(s) had the wrong labels", static=True)
    crowded = Unfit("node(s) were crowded")

    def predicate(self, task, node):
        kind = task.pod.labels.get("kind", "")
        asked.append((kind, node.name))
        if (kind, node.name) != ("a", "n0"):
            return None
        return crowded if node.tasks else labels_refusal

    result = Session(load_cache(_a_b_a("1")).snapshot(), _by_kind(predicate)).run()
    assert result.binds == {"default/a1-0": "n1", "default/b-0": "n0"}
    assert result.pending["default/a2-0"] == [
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were crowded."]
    assert asked.count(("a", "n0")) == 2  # (for a1, and to explain a2)


def test_a_node_left_refused_that_lost_its_room_in_the_session_is_told_of_by_its_room():
    """Within a session: n0 refuses pods of kind a for its spec; a pod of kind b takes
    all of n0's cpu. The next pod of kind a fits nowhere: n0 is told of as lacking cpu
    (resources are judged first), as a search of its own would say, not by the static
    refusal it was left with."""
    refusal = Unfit("node(s) had the wrong labels", static=True)

    def predicate(self, task, node):
        return refusal if (task.pod.labels.get("kind"), node.name) == ("a", "n0") else None

    result = Session(load_cache(_a_b_a("1", b_cpu="4")).snapshot(),
                     _by_kind(predicate)).run()
    assert result.binds == {"default/a1-0": "n1", "default/b-0": "n0"}
    assert result.pending["default/a2-0"] == [
        "0/2 nodes are available: 2 Insufficient cpu."]
