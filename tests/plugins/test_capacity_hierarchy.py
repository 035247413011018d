"""capacity with `enableHierarchy`: queues as a tree by `spec.parent`.

The first two tables port Volcano's own hierarchical cases
(`Test_capacityPlugin_OnSessionOpenWithHierarchy`,
`Test_capacityPlugin_AncestorReclaimScenarios` and
`Test_buildHierarchicalQueueAttrs_nilSafety` in `pkg/scheduler/plugins/capacity/
capacity_test.go`): the same trees, pods and nodes, one session of "enqueue, reclaim,
allocate" with capacity (hierarchy), predicates and gang (and priority where Volcano adds
it), and the same binds, evictions, pipelined pods and PodGroup phases. Where a case
rests on something this scheduler does differently on purpose (a misplaced job or a bad
tree stops only what it touches; root's real capability is the cluster), the case says
so and asserts our outcome. The tests after the tables cover those departures, the
status roll-up and refusals that name the ancestor; the property checks capability at
every level on generated trees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import node, pod, podgroup, queue, simulate
from tests.invariants import run_checked
from vscheduler.conf import parse_conf
from vscheduler.model import TaskStatus
from vscheduler.resources import Resource
from vscheduler.simulate import Simulation

GPU = "nvidia.com/gpu"
A100 = "nvidia.com/a100"
HCA = "rdma/hca"
NS = "ns1"
PLACED = TaskStatus.BOUND | TaskStatus.RUNNING | TaskStatus.BINDING


def hierarchy_conf(level: int = 0, priority: bool = False) -> str:
    """Volcano's test tiers: capacity with hierarchy, predicates, gang (then priority).
    Volcano's tests turn on only the hooks they list: gang answers job starving alone
    (it offers no victims and does not hold a job back), priority orders only."""
    return f"""
actions: "enqueue, reclaim, allocate"
tiers:
- plugins:
  - name: capacity
    enableHierarchy: true
    arguments: {{ancestorReclaimLevel: {level}}}
  - name: predicates
  - name: gang
    enableJobOrder: false
    enableJobReady: false
    enableJobPipelined: false
    enableJobEnqueued: false
    enablePreemptable: false
    enableReclaimable: false
{"  - name: priority" if priority else ""}
"""


CONF = hierarchy_conf()


# --------------------------------------------------------------------------- builders


def q(name: str, parent: str | None = "root", *, deserved: dict[str, str] | None = None,
      capability: dict[str, str] | None = None,
      guarantee: dict[str, str] | None = None) -> dict[str, Any]:
    """A Queue under `parent` (None: no spec.parent at all)."""
    return queue(name, parent=parent, deserved=deserved, capability=capability,
                 guarantee=guarantee)


def cm(cpu: str | None = None, memory: str | None = None) -> dict[str, str]:
    """cpu and memory as Volcano's `BuildResourceList` gives them (None or "": not set)."""
    return res(cpu, memory)


def res(cpu: str | None = None, memory: str | None = None,
        extra: dict[str, str] | None = None) -> dict[str, str]:
    """cpu, memory (None or "": not set) and scalar resources."""
    out = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    out.update(extra or {})
    return out


def pg(name: str, queue_name: str, phase: str, min_member: int = 1,
       min_resources: dict[str, str] | None = None) -> dict[str, Any]:
    return podgroup(name, min_member, namespace=NS, queue=queue_name, phase=phase,
                    min_resources=min_resources)


def p(name: str, group: str, cpu: str | None = "1", memory: str | None = "1Gi", *,
      on: str | None = None, preemptable: bool = True, priority: int | None = None,
      extra: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod of PodGroup `group` in ns1, Running on node `on` or Pending."""
    annotations = {} if preemptable else {"volcano.sh/preemptable": "false"}
    return pod(name, cpu, memory, namespace=NS, group=group, node_name=on,
               annotations=annotations, priority=priority, **(extra or {}))


def n1(cpu: str = "8", memory: str = "8Gi") -> dict[str, Any]:
    return node("n1", cpu=cpu, memory=memory, pods="11")


def n2() -> dict[str, Any]:
    return node("n2", cpu="8", memory="8Gi", pods="10", **{GPU: "8", "hugepages-1Gi": "0"})


def n_gpu() -> dict[str, Any]:
    return node("n-gpu", cpu="8", memory="8Gi", pods="10", **{GPU: "8"})


def n3() -> dict[str, Any]:
    return node("n3", cpu="16", memory="16Gi", pods="11", **{A100: "5", HCA: "1001"})


def a100_node(a100: str, cpu: str = "16", memory: str = "16Gi") -> dict[str, Any]:
    """The n1 of Volcano's ancestor-reclaim cases 1-4."""
    return node("n1", cpu=cpu, memory=memory, pods="11", **{A100: a100, HCA: "1001"})


def a100_pod(name: str, group: str, a100: str = "1", **kwargs: Any) -> dict[str, Any]:
    return p(name, group, "1", "1Gi", extra={A100: a100, HCA: "1"}, **kwargs)


def key(name: str) -> str:
    return f"{NS}/{name}"


def check(report: dict[str, Any], *, binds: dict[str, str] | None = None,
          evicted: dict[str, str] | None = None, pipelined: dict[str, str] | None = None,
          phases: dict[str, str] | None = None) -> None:
    """The report holds exactly these binds (pod -> node), evictions (victim ->
    preemptor) and pipelined pods (pod -> node), and these PodGroup phases."""
    assert report["binds"] == {key(k): v for k, v in (binds or {}).items()}
    assert {e["pod"]: e["for"] for e in report["evictions"]} == {
        key(k): key(v) for k, v in (evicted or {}).items()}
    assert len(report["evictions"]) == len(evicted or {})
    assert report["pipelined"] == {key(k): v for k, v in (pipelined or {}).items()}
    for group, phase in (phases or {}).items():
        assert report["podGroups"][key(group)]["phase"] == phase


def warnings_on(report: dict[str, Any], obj: str) -> list[str]:
    return [e["message"] for e in report["events"]
            if e["object"] == obj and e["type"] == "Warning"]


def reasons(report: dict[str, Any], pod_name: str) -> list[str]:
    return report["pending"].get(key(pod_name), [])


# --------------------------------------------------------------------------- Volcano's
# Test_capacityPlugin_OnSessionOpenWithHierarchy

ROOT = q("root", None)


def tree_q1_q2() -> list[dict[str, Any]]:
    """q1 c4/4 {q11 c1/1, q12 c3/3}, q2 c4/4."""
    return [ROOT, q("q1", capability=cm("4", "4Gi")), q("q2", capability=cm("4", "4Gi")),
            q("q11", "q1", capability=cm("1", "1Gi")),
            q("q12", "q1", capability=cm("3", "3Gi"))]


def q3_tree(with_q4: bool = True, with_q32: bool = True,
            with_q33: bool = False) -> list[dict[str, Any]]:
    """q3 d=c 4/4/pods10 {q31, q32: d2/2 pods2 c4/4 pods4; q33: d0/0 pods2 c4/4 pods4},
    q4 d2/2 pods1 c4/4 pods4."""
    four = res("4", "4Gi", {"pods": "10"})
    objects = [ROOT, q("q3", deserved=four, capability=four),
               q("q31", "q3", deserved=res("2", "2Gi", {"pods": "2"}),
                 capability=res("4", "4Gi", {"pods": "4"}))]
    if with_q32:
        objects.append(q("q32", "q3", deserved=res("2", "2Gi", {"pods": "2"}),
                         capability=res("4", "4Gi", {"pods": "4"})))
    if with_q33:
        objects.append(q("q33", "q3", deserved=res("0", "0Gi", {"pods": "2"}),
                         capability=res("4", "4Gi", {"pods": "4"})))
    if with_q4:
        objects.append(q("q4", deserved=res("2", "2Gi", {"pods": "1"}),
                         capability=res("4", "4Gi", {"pods": "4"})))
    return objects


HIERARCHY_CASES = [
    pytest.param(
        [n1(), *tree_q1_q2(), pg("pg1", "q11", "Inqueue"), p("p1", "pg1")],
        {"binds": {"p1": "n1"}},
        id="case0-leaf-allocatable"),
    # (Ours: p2 waits with a reason naming q1; see test_job_in_a_parent_queue_waits.)
    pytest.param(
        [n1(), *tree_q1_q2(), pg("pg2", "q1", "Pending"), p("p2", "pg2")],
        {"phases": {"pg2": "Pending"}},
        id="case1-non-leaf-queue"),
    pytest.param(
        [n1(), *q3_tree(), pg("pg3", "q31", "Inqueue", min_member=2),
         p("p3", "pg3", "2", "2Gi"), p("p4", "pg3", "2", "2Gi")],
        {"binds": {"p3": "n1", "p4": "n1"}},
        id="case2-within-capability"),
    pytest.param(
        [n1(), *q3_tree(), pg("pg4", "q4", "Running"), pg("pg5", "q31", "Running"),
         pg("pg6", "q32", "Inqueue"),
         p("p5", "pg4", "4", "4Gi", on="n1"),
         p("p6", "pg5", "2", "2Gi", on="n1", preemptable=False),
         p("p7", "pg5", "2", "2Gi", on="n1"), p("p8", "pg6", "2", "2Gi")],
        {"evicted": {"p7": "p8"}, "pipelined": {"p8": "n1"}},
        id="case3-reclaim-sibling-first"),
    pytest.param(
        [n1(), *q3_tree(with_q4=False, with_q33=True),
         pg("pg5", "q31", "Running"), pg("pg7", "q32", "Running"),
         pg("pg8", "q33", "Inqueue"),
         p("p6", "pg5", "2", "2Gi", on="n1", preemptable=False),
         p("p9", "pg7", "2", "2Gi", on="n1"), p("p10", "pg8", "3", "3Gi")],
        {},
        id="case4-ancestor-real-capability"),
    pytest.param(
        [n1(), ROOT, q("q5", capability=cm(memory="4Gi")),
         q("q51", "q5", capability=cm(memory="2Gi")),
         pg("pg9", "q51", "Running"), p("p11", "pg9", "1", None)],
        {"binds": {"p11": "n1"}},
        id="case5-inherit-cpu-capability"),
    pytest.param(
        [n1(), ROOT, q("q6", capability=cm("2", "4Gi")), q("q61", "q6"), q("q62", "q6"),
         pg("pg10", "q61", "Pending", min_resources=cm("2", "4Gi")),
         pg("pg11", "q62", "Pending", min_resources=cm("2", "4Gi"))],
        {"phases": {"pg10": "Inqueue", "pg11": "Pending"}},
        id="case6-enqueue-ancestor-capability"),
    # Σ guarantees (8/6) over q7's capability (6/4). Volcano only checks "no panic";
    # ours also schedules: q71's real capability is its guarantee 4/3 (the positive
    # part of 6/4 - 8/6 is 0), so its 1-cpu pod is bound.
    pytest.param(
        [n1(), ROOT, q("q7", capability=cm("6", "4Gi")),
         q("q71", "q7", capability=cm("6", "4Gi"), guarantee=cm("4", "3Gi")),
         q("q72", "q7", capability=cm("6", "4Gi"), guarantee=cm("4", "3Gi")),
         pg("pg7a", "q71", "Inqueue"), p("p7a", "pg7a")],
        {"binds": {"p7a": "n1"}},
        id="case7-guarantees-over-parent"),
    pytest.param(
        [n_gpu(), ROOT, q("q8", deserved=res("4", "4Gi", {GPU: "8"})),
         q("q81", "q8", deserved=res("2", "2Gi", {GPU: "4"})),
         q("q82", "q8", deserved=res("2", "2Gi", {GPU: "4"})),
         pg("pg12", "q81", "Inqueue"), p("p12", "pg12", "2", "2Gi", extra={GPU: "1"})],
        {"binds": {"p12": "n-gpu"}},
        id="case8-scalar-deserved"),
    pytest.param(
        [n2(), ROOT, q("q9", deserved=res("2", "2Gi", {GPU: "8", "hugepages-1Gi": "0"})),
         q("q91", "q9", deserved=res("2", "2Gi", {GPU: "4", "hugepages-1Gi": "0"})),
         pg("pg13", "q91", "Inqueue"), p("p13", "pg13", "2", "2Gi", extra={GPU: "1"})],
        {"binds": {"p13": "n2"}},
        id="case9-zero-scalar-deserved"),
    # Root's capability (16/16) above the cluster (8/8). Volcano: no panic. Ours: root's
    # real capability is the cluster, q10's min(8/8, 10/4): a 1/1 pod is bound.
    pytest.param(
        [n1(), q("root", None, capability=cm("16", "16Gi")),
         q("q10", capability=cm("10", "4Gi")),
         pg("pg10a", "q10", "Inqueue"), p("p10a", "pg10a")],
        {"binds": {"p10a": "n1"}},
        id="case10-root-capability"),
    pytest.param(
        [n2(), ROOT, q("case11_queue1"),
         q("case11_queue11", "case11_queue1", capability=res("4", "4Gi", {GPU: "4"})),
         q("case11_queue12", "case11_queue1", capability=res("4", "4Gi", {GPU: "4"})),
         pg("pg14", "case11_queue11", "Inqueue"), pg("pg15", "case11_queue12", "Inqueue"),
         p("p14", "pg14", extra={GPU: "4"}), p("p15", "pg15", extra={GPU: "4"})],
        {"binds": {"p14": "n2", "p15": "n2"}},
        id="case11-inherit-scalar-capability"),
    pytest.param(
        [n3(), q("root", None, deserved=res("16", "16Gi", {A100: "4", "rdma": "1000"})),
         q("case12_queue1", deserved={A100: "2"}),
         q("case12_queue11", "case12_queue1", deserved={A100: "2"}),
         q("case12_queue12", "case12_queue1"),
         pg("pg16", "case12_queue11", "Inqueue"), pg("pg17", "case12_queue12", "Running"),
         pg("pg18", "case12_queue12", "Running"),
         a100_pod("p16", "pg16", "2"), a100_pod("p17", "pg17", "2", on="n3"),
         a100_pod("p18", "pg18", "2", on="n3", preemptable=False)],
        {"evicted": {"p17": "p16"}, "pipelined": {"p16": "n3"}},
        id="case12-reclaim-on-a-scalar"),
]


@pytest.mark.parametrize(("objects", "expected"), HIERARCHY_CASES)
def test_volcano_hierarchy_cases(objects: list[dict[str, Any]], expected: dict[str, Any]):
    """Volcano's Test_capacityPlugin_OnSessionOpenWithHierarchy, one session each.

    Cases 3 and 12 reclaim while the cluster is full: with root's real capability the
    cluster (ours), the reclaimer's ancestors up to root are over it *before* the
    victims go; the outcome must still be Volcano's (the victims make the room).
    Cases 7 (ours), 8 and 9 have a queue below its deserved amount and an idle node:
    Volcano's reclaim passes over a node with no running pod of another queue, and
    allocate binds the pod in the same session."""
    report = simulate(objects, CONF)
    assert report["sessions"] == 1
    check(report, **expected)


# --------------------------------------------------------------------------- Volcano's
# Test_capacityPlugin_AncestorReclaimScenarios


def project_tree() -> list[dict[str, Any]]:
    """P1 d a100 1 c2 {P1np d1 c1, P1p}; P2 d a100 3 c4 {P2np d3 c3, P2p}."""
    return [
        q("root", None, deserved=res("16", "16Gi", {A100: "4", "rdma": "1000"})),
        q("project1_root", deserved={A100: "1"}, capability={A100: "2"}),
        q("project1_non-preemptable", "project1_root", deserved={A100: "1"},
          capability={A100: "1"}),
        q("project1_preemptable", "project1_root"),
        q("project2_root", deserved={A100: "3"}, capability={A100: "4"}),
        q("project2_non-preemptable", "project2_root", deserved={A100: "3"},
          capability={A100: "3"}),
        q("project2_preemptable", "project2_root"),
    ]


def level_tree() -> list[dict[str, Any]]:
    """grand-a d2/2 c4/4 -> parent-a d2 c2 -> queue-a d2 c2;
    grand-b d3/3 c4/4 -> parent-b d1 c2 -> queue-b d1 c2."""
    return [
        ROOT,
        q("grand-a", deserved=cm("2", "2Gi"), capability=cm("4", "4Gi")),
        q("parent-a", "grand-a", deserved=cm("2", "2Gi"), capability=cm("2", "2Gi")),
        q("queue-a", "parent-a", deserved=cm("2", "2Gi"), capability=cm("2", "2Gi")),
        q("grand-b", deserved=cm("3", "3Gi"), capability=cm("4", "4Gi")),
        q("parent-b", "grand-b", deserved=cm("1", "1Gi"), capability=cm("2", "2Gi")),
        q("queue-b", "parent-b", deserved=cm("1", "1Gi"), capability=cm("2", "2Gi")),
    ]


def victim_and_reclaimer(victim_queue: str, reclaimer_queue: str, victim: str = "2",
                         reclaimer: str = "2") -> list[dict[str, Any]]:
    """A running 2/2 victim and a pending 2/2 reclaimer on a 2/2 node."""
    return [node("n1", cpu="2", memory="2Gi", pods="10"),
            pg("pg-victim", victim_queue, "Running"),
            pg("pg-reclaimer", reclaimer_queue, "Inqueue"),
            p("p-victim", "pg-victim", victim, f"{victim}Gi", on="n1"),
            p("p-reclaimer", "pg-reclaimer", reclaimer, f"{reclaimer}Gi")]


RECLAIMED = {"evicted": {"p-victim": "p-reclaimer"}, "pipelined": {"p-reclaimer": "n1"}}

ANCESTOR_CASES = [
    pytest.param(
        1, True,
        [a100_node("4"),
         q("root", None, deserved=res("16", "16Gi", {A100: "4", "rdma": "1000"})),
         q("case1_queue1", deserved={A100: "1"}), q("case1_queue11", "case1_queue1"),
         q("case1_queue2"),
         pg("pg1", "case1_queue2", "Running"), pg("pg2", "case1_queue11", "Inqueue"),
         a100_pod("p1", "pg1", "4", on="n1"), a100_pod("p2", "pg2", "1")],
        {"evicted": {"p1": "p2"}, "pipelined": {"p2": "n1"}},
        id="case1-reclaim-on-parent-deserved"),
    pytest.param(
        1, True,
        [a100_node("4"), *project_tree(),
         *[pg(f"pg{i}", "project2_preemptable", "Running") for i in range(1, 5)],
         pg("pg5", "project1_preemptable", "Pending"),
         *[a100_pod(f"p{i}", f"pg{i}", on="n1", priority=2) for i in range(1, 4)],
         a100_pod("p4", "pg4", on="n1", priority=1), a100_pod("p5", "pg5")],
        {"evicted": {"p4": "p5"}, "pipelined": {"p5": "n1"}},
        id="case2-cross-parent-reclaim"),
    pytest.param(
        1, True,
        [a100_node("4"), *project_tree(),
         *[pg(f"pg{i}", "project2_preemptable", "Running") for i in range(1, 4)],
         pg("pg4_reclaimed", "project2_preemptable", "Inqueue"),
         pg("pg5_pipelined", "project1_preemptable", "Running"),
         pg("pg6", "project2_non-preemptable", "Pending"),
         *[a100_pod(f"p{i}", f"pg{i}", on="n1", priority=2) for i in range(1, 4)],
         a100_pod("p4", "pg4_reclaimed"), a100_pod("p5", "pg5_pipelined", on="n1"),
         a100_pod("p6", "pg6")],
        {"evicted": {"p3": "p6"}, "pipelined": {"p6": "n1"}},
        id="case3-sibling-victim-first"),
    pytest.param(
        1, True,
        [a100_node("1", "8", "8Gi"),
         q("root", None, deserved=res("16", "16Gi", {A100: "4", "rdma": "1000"})),
         q("case4_parent1", deserved={A100: "1"}),
         q("case4_child1", "case4_parent1", deserved={A100: "1"}),
         q("case4_child1_sibling", "case4_parent1"),
         q("case4_parent2", deserved={A100: "1"}),
         q("case4_child2", "case4_parent2", deserved={A100: "1"}),
         pg("pg1", "case4_child1", "Running"), pg("pg2", "case4_child2", "Pending"),
         pg("pg3", "case4_child1_sibling", "Running"),
         a100_pod("p1", "pg1", on="n1"), a100_pod("p2", "pg2"),
         a100_pod("p3", "pg3", on="n1", preemptable=False)],
        {},
        id="case4-victim-child-within-deserved"),
    pytest.param(0, False, [*level_tree(), *victim_and_reclaimer("queue-b", "queue-a")],
                 RECLAIMED, id="case5-level0-leaf-checks"),
    pytest.param(1, False, [*level_tree(), *victim_and_reclaimer("queue-b", "queue-a")],
                 RECLAIMED, id="case6-level1-parent-over-deserved"),
    pytest.param(2, False, [*level_tree(), *victim_and_reclaimer("queue-b", "queue-a")],
                 {}, id="case7-level2-grandparent-within-deserved"),
    pytest.param(
        1, False,
        [ROOT, q("parent", deserved=cm("4", "4Gi"), capability=cm("4", "4Gi")),
         q("queue-a", "parent"), q("queue-b", "parent"),
         *victim_and_reclaimer("queue-b", "queue-a")],
        {}, id="case8-sibling-leaf-deserves-nothing"),
    pytest.param(
        2, False,
        [ROOT, q("grand", deserved=cm("2", "2Gi"), capability=cm("2", "2Gi")),
         q("parent-a", "grand"), q("queue-a", "parent-a"),
         q("parent-b", "grand"), q("queue-b", "parent-b"),
         *victim_and_reclaimer("queue-b", "queue-a")],
        {}, id="case9-shared-grandparent"),
    pytest.param(
        2, False,
        [ROOT, q("grand", deserved=cm("1", "1Gi"), capability=cm("2", "2Gi")),
         q("parent-deep", "grand", deserved=cm("1", "1Gi"), capability=cm("2", "2Gi")),
         q("queue-deep", "parent-deep"), q("queue-shallow", "grand"),
         *victim_and_reclaimer("queue-deep", "queue-shallow")],
        {}, id="case10-unbalanced-shared-grandparent"),
    pytest.param(
        2, False,
        [node("n1", cpu="4", memory="4Gi", pods="10", **{A100: "2"}), ROOT,
         q("shallow-parent", deserved={A100: "1"}),
         q("queue-shallow", "shallow-parent", deserved={A100: "1"}),
         q("deep-grand", deserved={A100: "2"}),
         q("deep-parent", "deep-grand", deserved={A100: "1"}),
         q("queue-deep", "deep-parent", deserved={A100: "1"}),
         pg("pg-victim", "queue-deep", "Running"),
         pg("pg-reclaimer", "queue-shallow", "Inqueue"),
         p("p-victim", "pg-victim", extra={A100: "2"}, on="n1"),
         p("p-reclaimer", "pg-reclaimer", extra={A100: "1"})],
        {}, id="case11-unbalanced-depth2-within-deserved"),
]


@pytest.mark.parametrize(("level", "with_priority", "objects", "expected"), ANCESTOR_CASES)
def test_volcano_ancestor_reclaim_cases(level: int, with_priority: bool,
                                        objects: list[dict[str, Any]],
                                        expected: dict[str, Any]):
    """Volcano's Test_capacityPlugin_AncestorReclaimScenarios: `ancestorReclaimLevel`
    widens who may reclaim (an ancestor within its deserved) and narrows the victims
    (their own ancestors must be over theirs; relatives of a leaf that deserves nothing
    are spared). Cases 1, 2, 3, 5 and 6 reclaim on a full cluster: as in the first
    table, root being over its real capability before the eviction must not stop it."""
    report = simulate(objects, hierarchy_conf(level, with_priority))
    check(report, **expected)


@pytest.mark.parametrize(("level", "with_priority", "objects", "expected"),
                         [case for case in ANCESTOR_CASES if case.values[0]])
def test_an_ancestor_level_past_the_tree_is_the_whole_tree(
        level: int, with_priority: bool, objects: list[dict[str, Any]],
        expected: dict[str, Any]):
    """A billion levels up is every ancestor, found at once (it once counted up to the
    argument in every reclaim check, and a session never ended)."""
    whole = simulate(objects, hierarchy_conf(64, with_priority))
    assert simulate(objects, hierarchy_conf(10**9, with_priority)) == whole


# --------------------------------------------------------------------------- Volcano's
# Test_buildHierarchicalQueueAttrs_nilSafety


def test_no_queue_objects_at_all_is_safe():
    """No Queue object (no root): Volcano must not panic and binds nothing (it blocks
    the session). Ours: nothing to do here either, and no crash."""
    report = simulate([node("n1", cpu="4", memory="4Gi", pods="10")], CONF)
    assert report["binds"] == {}
    assert report["evictions"] == []


def test_without_a_root_object_the_implied_root_schedules():
    """DIFFERENCE: without a `root` Queue object Volcano stops every queue; ours implies a
    root with no limits of its own, so a pod of a top-level queue is bound."""
    objects = [node("n1", cpu="4", memory="4Gi", pods="10"),
               q("top", None, capability=cm("2")), q("leaf", "top"),
               pg("pg-a", "leaf", "Inqueue"), p("a-0", "pg-a"), p("a-1", "pg-a"),
               p("a-2", "pg-a")]
    report = simulate(objects, CONF)
    # the leaf inherits top's 2 cpus: two of the three pods
    assert len(report["binds"]) == 2
    assert any("queue" in r and "insufficient cpu" in r
               for pod_key in report["pending"] for r in report["pending"][pod_key])


def test_job_of_a_deleted_queue_is_safe():
    """A job whose queue no longer exists (only root does): no crash, nothing bound."""
    objects = [node("n1", cpu="4", memory="4Gi", pods="10"), ROOT,
               pg("pg-orphan", "deleted-queue", "Inqueue"), p("orphan", "pg-orphan")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert reasons(report, "orphan")


# --------------------------------------------------------------------------- departures


def test_job_in_a_parent_queue_waits_and_others_go_on():
    """DIFFERENCE (item 5): a job in a queue with children waits, its reason naming the
    queue and saying jobs go in leaf queues; Volcano stops scheduling for the whole
    cluster instead. Jobs of leaves, here and under another parent, are bound."""
    objects = [n1(), *tree_q1_q2(), q("q21", "q2"),
               pg("pg-parent", "q1", "Pending"), p("in-parent", "pg-parent"),
               pg("pg-leaf", "q11", "Pending"), p("in-leaf", "pg-leaf"),
               pg("pg-other", "q21", "Pending"), p("in-other", "pg-other"),
               pg("pg-root", "root", "Pending"), p("in-root", "pg-root")]
    report = simulate(objects, CONF)
    assert report["binds"] == {key("in-leaf"): "n1", key("in-other"): "n1"}
    for name, queue_name in (("in-parent", "q1"), ("in-root", "root")):
        assert any(queue_name in r and "leaf" in r.lower() for r in reasons(report, name)), (
            reasons(report, name))
    assert report["podGroups"][key("pg-parent")]["phase"] == "Pending"


def test_missing_parent_is_a_warning_and_the_queue_hangs_off_root():
    """DIFFERENCE (item 6): a parent that does not exist gives a Warning event on the
    Queue; the queue is a child of root (its own capability still holds) and the other
    queues are scheduled as usual."""
    objects = [n1(), ROOT, q("orphan", "ghost", capability=cm("1")), q("fine"),
               pg("pg-o", "orphan", "Inqueue"), p("o-0", "pg-o"), p("o-1", "pg-o"),
               pg("pg-f", "fine", "Inqueue"), p("f-0", "pg-f")]
    report = simulate(objects, CONF)
    messages = warnings_on(report, "Queue/orphan")
    assert messages and any("ghost" in m for m in messages), report["events"]
    assert key("f-0") in report["binds"]
    assert sum(1 for k in report["binds"] if k.startswith(key("o-"))) == 1


def test_parent_cycle_is_a_warning_on_each_queue_and_they_hang_off_root():
    """DIFFERENCE (item 6): a -> b -> a. Volcano links the cycle silently (off the tree,
    no real capability); ours warns on each queue of the cycle and takes both as
    children of root, leaves, so their jobs are scheduled; so are the others'."""
    objects = [n1(), ROOT, q("a", "b"), q("b", "a"), q("c"),
               pg("pg-a", "a", "Inqueue"), p("a-0", "pg-a"),
               pg("pg-b", "b", "Inqueue"), p("b-0", "pg-b"),
               pg("pg-c", "c", "Inqueue"), p("c-0", "pg-c")]
    report = simulate(objects, CONF)
    assert warnings_on(report, "Queue/a"), report["events"]
    assert warnings_on(report, "Queue/b"), report["events"]
    assert not warnings_on(report, "Queue/c")
    assert report["binds"] == {key("a-0"): "n1", key("b-0"): "n1", key("c-0"): "n1"}


def test_oversubscribed_child_guarantees_warn_on_the_parent_and_scheduling_goes_on():
    """DIFFERENCE (item 6): children guaranteed 3 + 3 cpus under a parent capped at 4
    warn on the parent (Volcano: a log line). The formula goes on: each child's real
    capability is max(4 - 6, 0) + 3 = 3, so three of a's four pods are bound, the
    fourth refused by queue a; an unrelated queue is scheduled as usual."""
    objects = [n1(cpu="16", memory="16Gi"), ROOT, q("parent", capability=cm("4")),
               q("a", "parent", guarantee=cm("3")), q("b", "parent", guarantee=cm("3")),
               q("other"),
               pg("pg-a", "a", "Inqueue"), *[p(f"a-{i}", "pg-a", memory="256Mi")
                                             for i in range(4)],
               pg("pg-o", "other", "Inqueue"), p("o-0", "pg-o")]
    report = simulate(objects, CONF)
    assert warnings_on(report, "Queue/parent"), report["events"]
    placed = {**report["binds"], **report["pipelined"]}
    assert sum(1 for k in placed if k.startswith(key("a-"))) == 3
    assert key("o-0") in placed
    assert any("queue a: insufficient cpu" in r for r in reasons(report, "a-3")), (
        reasons(report, "a-3"))


def test_child_capability_over_the_parent_warns_and_the_parent_still_caps():
    """A child written to hold 4 cpus under a parent capped at 2: a Warning on the
    parent, and the child gets no more than the parent's 2."""
    objects = [n1(), ROOT, q("parent", capability=cm("2")),
               q("child", "parent", capability=cm("4")),
               pg("pg-c", "child", "Inqueue"), *[p(f"c-{i}", "pg-c", memory="256Mi")
                                                 for i in range(3)]]
    report = simulate(objects, CONF)
    assert warnings_on(report, "Queue/parent"), report["events"]
    assert len(report["binds"]) == 2


def test_a_child_that_sets_only_some_limits_takes_the_rest_without_a_warning():
    """A child capped on GPUs alone under a parent capped on cpu, memory and GPUs: its
    cpu and memory are the parent's (limits pass down), not beyond them."""
    objects = [n1(), ROOT, q("parent", capability=res("4", "4Gi", {"nvidia.com/gpu": "8"})),
               q("child", "parent", capability=res(None, None, {"nvidia.com/gpu": "4"}))]
    report = simulate(objects, CONF)
    assert not warnings_on(report, "Queue/parent"), report["events"]
    objects[-1] = q("child", "parent", capability=res(None, None, {"nvidia.com/gpu": "9"}))
    assert warnings_on(simulate(objects, CONF), "Queue/parent")


def test_children_deserving_more_than_their_parent_warn_on_it():
    """Two teams deserving 4 cpus each under a department deserving 4: a Warning on the
    department (they can all be within their deserved while it is over its own);
    deserving 2 each, or a department that deserves nothing written, none."""
    objects = [n1(), ROOT, q("dept", deserved=cm("4")),
               q("a", "dept", deserved=cm("4")), q("b", "dept", deserved=cm("4"))]
    [warning] = warnings_on(simulate(objects, CONF), "Queue/dept")
    assert "deserve cpu 8 in all, more than it deserves (cpu 4)" in warning
    objects[3:] = [q("a", "dept", deserved=cm("2")), q("b", "dept", deserved=cm("2"))]
    assert not warnings_on(simulate(objects, CONF), "Queue/dept")
    objects[2] = q("dept")
    assert not warnings_on(simulate(objects, CONF), "Queue/dept")


def test_reclaim_checks_the_reclaimers_ancestors_real_capability():
    """DIFFERENCE (item 7): Volcano lets a leaf reclaim while the leaf is within its real
    capability, even if its parent is at its own. Here parent (capped at 2 cpus) holds
    2 through b (not preemptable); a, below its deserved, may not reclaim from the
    best-effort queue `other` (evicting there frees nothing inside parent). Volcano
    would evict an `other` pod and pipeline a's task past parent's capability."""
    objects = [n1(cpu="4", memory="8Gi"), ROOT, q("parent", capability=cm("2")),
               q("a", "parent", deserved=cm("2", "2Gi")), q("b", "parent"), q("other"),
               pg("pg-b", "b", "Running"),
               p("b-0", "pg-b", on="n1", preemptable=False),
               p("b-1", "pg-b", on="n1", preemptable=False),
               pg("pg-o", "other", "Running"), p("o-0", "pg-o", on="n1"),
               p("o-1", "pg-o", on="n1"),
               pg("pg-a", "a", "Inqueue"), p("a-0", "pg-a")]
    report = simulate(objects, CONF)
    check(report)
    assert any("queue parent" in r and "insufficient cpu" in r
               for r in reasons(report, "a-0")), reasons(report, "a-0")


# --------------------------------------------------------------------------- status


def test_parent_status_sums_its_subtree():
    """Item 8: every level reports what its subtree holds (running pods and this
    session's binds alike), root included."""
    objects = [n1(cpu="16", memory="16Gi"), ROOT, q("g"), q("p", "g"), q("a", "p"),
               q("b", "p"), q("c", "g"), q("d"),
               pg("pg-a", "a", "Running"), p("a-0", "pg-a", "2", "2Gi", on="n1"),
               pg("pg-b", "b", "Running"), p("b-0", "pg-b", "1", "1Gi", on="n1"),
               pg("pg-c", "c", "Inqueue"), p("c-0", "pg-c", "3", "1Gi"),
               pg("pg-d", "d", "Running"), p("d-0", "pg-d", "4", "1Gi", on="n1")]
    report = simulate(objects, CONF)
    assert report["binds"] == {key("c-0"): "n1"}
    cpu = {name: status["allocated"].get("cpu") for name, status in
           report["queues"].items()}
    assert cpu["a"] == "2" and cpu["b"] == "1" and cpu["c"] == "3" and cpu["d"] == "4"
    assert cpu["p"] == "3"
    assert cpu["g"] == "6"
    assert cpu["root"] == "10"
    assert report["queues"]["p"]["allocated"]["memory"] == "3Gi"


# --------------------------------------------------------------------------- 3 levels


def three_levels() -> list[dict[str, Any]]:
    """g (capped at 4 cpus) -> p -> a, and g -> b, b holding 3 cpus."""
    return [n1(cpu="16", memory="16Gi"), ROOT, q("g", capability=cm("4")), q("p", "g"),
            q("a", "p"), q("b", "g"),
            pg("pg-b", "b", "Running", min_resources=cm("3", "3Gi")),
            *[p(f"b-{i}", "pg-b", on="n1") for i in range(3)]]


def test_allocate_refusal_names_the_full_ancestor():
    """Item 3: a and p are within their (inherited) real capability of 4, the
    grandparent g is not: the refusal names g."""
    objects = [*three_levels(), pg("pg-a", "a", "Inqueue"), p("a-0", "pg-a", "2", "1Gi")]
    report = simulate(objects, CONF)
    assert report["binds"] == {}
    assert ("queue g: insufficient cpu (allocated + request 5 > real capability 4)"
            in " | ".join(reasons(report, "a-0"))), reasons(report, "a-0")


def test_allocate_within_every_level_is_bound():
    objects = [*three_levels(), pg("pg-a", "a", "Inqueue"), p("a-0", "pg-a", "1", "1Gi")]
    report = simulate(objects, CONF)
    assert report["binds"] == {key("a-0"): "n1"}
    assert report["queues"]["g"]["allocated"]["cpu"] == "4"


def test_enqueue_checks_every_ancestor():
    """Item 4: minResources + allocated + inqueue - elastic within the real capability
    of the leaf and every ancestor: 2 cpus in a pass a and p but not g (3 held); 1 cpu
    passes everywhere. The refused PodGroup stays Pending."""
    objects = [*three_levels(),
               pg("pg-big", "a", "Pending", min_resources=cm("2", "1Gi")),
               p("big-0", "pg-big", "2", "1Gi"),
               pg("pg-small", "a", "Pending", min_resources=cm("1", "1Gi")),
               p("small-0", "pg-small", "1", "1Gi")]
    report = simulate(objects, CONF)
    assert report["podGroups"][key("pg-big")]["phase"] == "Pending"
    assert report["podGroups"][key("pg-small")]["phase"] != "Pending"
    assert report["binds"] == {key("small-0"): "n1"}
    assert any("insufficient cpu" in r for r in reasons(report, "big-0")), (
        reasons(report, "big-0"))


# --------------------------------------------------------------------------- property


@st.composite
def hierarchies(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, str | None],
                                          dict[str, dict[str, str]]]:
    """Nodes, a tree of queues (depth <= 3 below root, maybe a root object with its own
    capability), capability and guarantee on cpu and GPUs drawn at random (guarantees
    often more than the parent), and jobs in the leaves: running pods placed where they
    fit the nodes and every capability on their path, pending pods anywhere.

    Returns (objects, parent of each queue, spec capability of each queue)."""
    objects: list[dict[str, Any]] = []
    free: list[list[int]] = []  # per node: cpus, gpus left
    for i in range(draw(st.integers(1, 3))):
        cpus, gpus = draw(st.integers(2, 12)), draw(st.integers(0, 4))
        free.append([cpus, gpus])
        objects.append(node(f"n{i}", cpu=str(cpus), memory="64Gi", **{GPU: str(gpus)}))

    def amounts(top_cpu: int, top_gpu: int) -> dict[str, str]:
        out: dict[str, str] = {}
        if draw(st.booleans()):
            out["cpu"] = str(draw(st.integers(1, top_cpu)))
        if draw(st.booleans()):
            out[GPU] = str(draw(st.integers(0, top_gpu)))
        return out

    parents: dict[str, str | None] = {}
    caps: dict[str, dict[str, str]] = {}
    if draw(st.booleans()):
        caps["root"] = amounts(16, 6) if draw(st.booleans()) else {}
        parents["root"] = None
        objects.append(q("root", None, capability=caps["root"] or None))

    def add(name: str, parent: str, depth: int) -> None:
        caps[name] = amounts(10, 4)
        parents[name] = parent
        objects.append(q(name, parent if parent != "root" or draw(st.booleans()) else None,
                         capability=caps[name] or None,
                         guarantee=amounts(4, 2) or None))
        if depth < 3:
            for c in range(draw(st.integers(0, 2))):
                add(f"{name}{c}", name, depth + 1)

    for t in range(draw(st.integers(1, 3))):
        add(f"q{t}", "root", 1)
    leaves = [n for n in parents if n != "root" and not any(v == n for v in parents.values())]

    def path(name: str) -> list[str]:
        out = []
        current: str | None = name
        while current is not None:
            out.append(current)
            current = parents.get(current)
        return out

    held: dict[str, list[int]] = {name: [0, 0] for name in (*parents, "root")}

    def fits_quota(leaf: str, cpu: int, gpu: int) -> bool:
        for member in path(leaf):
            cap = caps.get(member, {})
            if "cpu" in cap and held[member][0] + cpu > int(cap["cpu"]):
                return False
            if GPU in cap and held[member][1] + gpu > int(cap[GPU]):
                return False
        return True

    for leaf in leaves:
        for j in range(draw(st.integers(0, 2))):
            group = f"{leaf}-j{j}"
            size = draw(st.integers(1, 3))
            cpu, gpu = draw(st.integers(1, 3)), draw(st.sampled_from([0, 0, 1]))
            extra = {GPU: str(gpu)} if gpu else {}
            want_running = draw(st.booleans())
            pods = []
            for i in range(size):
                on = None
                if want_running and fits_quota(leaf, cpu, gpu):
                    target = next((n for n, (c, g) in enumerate(free)
                                   if c >= cpu and g >= gpu), None)
                    if target is not None:
                        free[target][0] -= cpu
                        free[target][1] -= gpu
                        for member in path(leaf):
                            held[member][0] += cpu
                            held[member][1] += gpu
                        on = f"n{target}"
                pods.append(p(f"{group}-{i}", group, str(cpu), "1Gi", on=on, extra=extra,
                              preemptable=draw(st.booleans())))
            running = any(obj["spec"].get("nodeName") for obj in pods)
            objects.append(pg(group, leaf, "Running" if running else "Pending",
                              min_member=draw(st.integers(1, size))))
            objects += pods
    return objects, parents, caps


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hierarchies(), st.integers(0, 2))
def test_no_queue_holds_more_than_any_capability_on_its_path(
        generated: tuple[list[dict[str, Any]], dict[str, str | None],
                         dict[str, dict[str, str]]], level: int):
    """After two sessions (the architecture's invariants checked after each), what each
    queue's subtree holds is within the capability of the queue and of every ancestor,
    on every resource those capabilities give."""
    objects, parents, caps = generated
    simulation = Simulation(parse_conf(hierarchy_conf(level), "hierarchy test conf"))
    simulation.load([(f"gen#{i}", obj) for i, obj in enumerate(objects)])
    run_checked(simulation, 2)

    cache = simulation.cache
    subtree: dict[str, Resource] = {name: Resource() for name in parents}
    for task in cache.tasks.values():
        job = cache.jobs.get(task.job_id)
        if job is None or not task.status & PLACED:
            continue
        current: str | None = job.queue
        while current is not None and current in parents:
            subtree[current].add(task.resreq)
            current = parents[current]
    for name, cap in caps.items():
        limit = Resource.from_k8s(cap)
        for resource in cap:
            assert subtree[name].get(resource) <= limit.get(resource) + 1e-6, (
                f"queue {name} holds {subtree[name].get(resource)} {resource} "
                f"> capability {cap[resource]}")


# --------------------------------------------------------------------------- review cases


def test_a_close_relative_that_deserves_what_it_holds_too_much_of_gives_it_back():
    """Level 1: qA (no deserved) and qB (deserves 1 cpu, holds 4) under P. A close
    relative is spared only when it deserves none of what it holds; qB deserves cpu and
    holds more than that, so one of its pods goes for qA's (as in Volcano)."""
    conf = """
actions: "enqueue, reclaim, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: capacity, enableHierarchy: true,
            arguments: {ancestorReclaimLevel: 1}}]
"""
    objects = [node("n1", cpu="4", memory="16Gi"), queue("root"),
               queue("P", deserved={"cpu": "8", "memory": "16Gi"}),
               queue("qA", parent="P"), queue("qB", parent="P", deserved={"cpu": "1"})]
    for i in range(4):
        objects += [podgroup(f"b{i}", 1, queue="qB", phase="Running"),
                    pod(f"b{i}", "1", "1Gi", group=f"b{i}", queue="qB", node_name="n1")]
    objects += [podgroup("a", 1, queue="qA", phase="Inqueue"),
                pod("a", "1", "1Gi", group="a", queue="qA")]
    report = simulate(objects, conf)
    assert len(report["evictions"]) == 1
    assert report["pipelined"] == {"default/a": "n1"}


def test_root_reports_everything_below_it_without_any_parent_named():
    base = [node("n1", cpu="8"), queue("root"), queue("a"), podgroup("g", 1, queue="a"),
            pod("p", "2", "1Gi", group="g", queue="a")]
    report = simulate(base, CONF, sessions=2)
    assert report["queues"]["root"]["allocated"]["cpu"] == "2"


def test_a_chain_deeper_than_the_limit_is_mended_with_a_warning():
    from vscheduler.queue_tree import MAX_DEPTH

    chain = [queue("q0")] + [queue(f"q{i}", parent=f"q{i - 1}")
                             for i in range(1, MAX_DEPTH + 3)]
    leaf = f"q{MAX_DEPTH + 2}"
    objects = [node("n1", cpu="8"), queue("root", parent="elsewhere"), *chain,
               podgroup("g", 1, queue=leaf), pod("p", "1", "1Gi", group="g", queue=leaf)]
    report = simulate(objects, CONF)
    assert report["binds"] == {"default/p": "n1"}
    assert warnings_on(report, f"Queue/q{MAX_DEPTH}")
    assert any("root has no parent" in m for m in warnings_on(report, "Queue/root"))


def test_the_shipped_hierarchy_conf_reclaims_from_the_sibling_over_its_deserved():
    """conf/hierarchy.conf leaves reclaim's victims to capacity: x1 (under dx) takes back
    a GPU from its sibling x2, which holds 4 against a deserved 2, not from the cousin
    y1, at its deserved 4 (gang and conformance in the first tier would offer any
    elastic job's extra pods, y1's too, and decide first)."""
    shipped = (Path(__file__).parents[2] / "conf" / "hierarchy.conf").read_text()
    gpus = {GPU: "4"}
    objects = [node("n0", cpu="8", memory="8Gi", **gpus), node("n1", cpu="8", memory="8Gi", **gpus),
               q("root"), q("dx", deserved={GPU: "4"}), q("dy", deserved={GPU: "4"}),
               q("x1", "dx", deserved={GPU: "2"}), q("x2", "dx", deserved={GPU: "2"}),
               q("y1", "dy", deserved={GPU: "4"}),
               pg("el", "y1", "Running"), pg("s", "x2", "Running"), pg("want", "x1", "Inqueue"),
               *(p(f"el-{i}", "el", on="n1", extra={GPU: "1"}) for i in range(4)),
               *(p(f"s-{i}", "s", on="n0", extra={GPU: "2"}) for i in range(2)),
               p("want-0", "want", extra={GPU: "1"})]
    report = simulate(objects, shipped)
    assert [(e["pod"], e["for"]) for e in report["evictions"]] == [
        (f"{NS}/s-1", f"{NS}/want-0")]


def test_root_children_guaranteed_beyond_the_cluster_warn():
    """Under root, two departments guaranteed 6 CPUs each on an 8-CPU cluster: a
    Warning on each (the tree's check of guarantees against a parent covers root too,
    whose own is the cluster)."""
    objects = [n1(), ROOT, q("a", guarantee=cm("6")), q("b", guarantee=cm("6")), q("c")]
    report = simulate(objects, CONF)
    for name in ("a", "b"):
        [message] = [e["message"] for e in report["events"]
                     if e["object"] == f"Queue/{name}" and e["reason"] == "GuaranteeOverCluster"]
        assert "(cpu 12 > 8)" in message
    objects[2] = q("a", guarantee=cm("2"))
    assert not any(e["reason"] == "GuaranteeOverCluster"
                   for e in simulate(objects, CONF)["events"])
