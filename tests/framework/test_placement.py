"""placement: placeable tasks, node scores (NaN guard), the best node, the sampling
window, and the nodes worth evicting on."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import gang, node, pod
from tests.framework.test_eviction import open_session, plugin, task
from vscheduler.fit import NodeFitErrors, Unfit
from vscheduler.framework.placement import (
    NodeSampling,
    SamplingWindow,
    best_first,
    eviction_candidates,
    node_scores,
    placeable_tasks,
    predicate_nodes,
    select_best_node,
)
from vscheduler.model import Node, Task

NAN, INF = float("nan"), float("inf")


def scored(table: dict[str, float], batch: dict[str, float] | None = None) -> type:
    """A plugin scoring nodes from `table` (and with `batch_node_order` from `batch`)."""
    hooks: dict[str, Any] = {"node_order": lambda self, task, node: table.get(node.name, 0.0)}
    if batch is not None:
        hooks["batch_node_order"] = lambda self, task, nodes: {
            n.name: batch[n.name] for n in nodes if n.name in batch}
    return plugin("scored", **hooks)


NODES = [node(f"n{i}") for i in range(5)]


def test_placeable_tasks_are_the_pending_ones_without_scheduling_gates() -> None:
    objects = [node("n1"), *gang("g", 3), pod("g-gated", group="g", gates=["wait"]),
               pod("g-running", group="g", node_name="n1")]
    session = open_session(objects)
    job = session.jobs["default/g"]
    assert sorted(t.name for t in placeable_tasks(job)) == ["g-0", "g-1", "g-2"]


def test_node_scores_sum_the_plugins_and_count_nan_or_infinity_as_zero() -> None:
    table = {"n0": 1.0, "n1": NAN, "n2": INF, "n3": -INF, "n4": 2.5}
    session = open_session([*NODES, pod("p")], scored(table, batch={"n0": 1.0, "n4": NAN}))
    p, nodes = task(session, "p"), session.node_list
    assert node_scores(session, p, nodes) == [2.0, 0.0, 0.0, 0.0, 0.0]
    assert node_scores(session, p, nodes, with_batch=False) == [1.0, 0.0, 0.0, 0.0, 2.5]


def test_without_scorers_every_node_scores_zero() -> None:
    session = open_session([*NODES, pod("p")])
    assert node_scores(session, task(session, "p"), session.node_list) == [0.0] * 5


def test_the_best_node_is_the_highest_scored_and_ties_go_to_the_first() -> None:
    session = open_session([*NODES, pod("p")],
                           scored({"n0": NAN, "n1": 3.0, "n2": NAN, "n3": 3.0, "n4": 1.0}))
    p, nodes = task(session, "p"), session.node_list
    assert select_best_node(session, p, nodes).name == "n1"
    assert [n.name for n in best_first(session, p, nodes)] == ["n1", "n3", "n4", "n0", "n2"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([NAN, INF, -INF, -2.0, 0.0, 1.0, 4.0]), min_size=5,
                max_size=5),
       st.permutations(range(5)))
def test_node_order_does_not_depend_on_where_the_nans_fall(scores: list[float],
                                                            order: list[int]) -> None:
    table = {f"n{i}": score for i, score in enumerate(scores)}
    session = open_session([*NODES, pod("p")], scored(table))
    p = task(session, "p")
    nodes = [session.node_list[i] for i in order]
    ranked = [n.name for n in best_first(session, p, nodes)]

    def finite(name: str) -> float:
        return table[name] if math.isfinite(table[name]) else 0.0

    expected = sorted((n.name for n in nodes), key=lambda name: -finite(name))  # stable
    assert ranked == expected
    assert select_best_node(session, p, nodes).name == expected[0]


def test_a_sampled_search_starts_where_the_last_one_stopped() -> None:
    session = open_session([*(node(f"n{i}") for i in range(6)), pod("p")])
    session.node_sampling = NodeSampling(minimum_feasible=2, percentage=50)
    window = SamplingWindow(session, 6)
    assert (window.wanted, window.start) == (3, 0)
    p = task(session, "p")
    seen = []
    for _ in range(3):
        feasible, _ = predicate_nodes(session, p, session.node_list, None, sample=True)
        seen.append([n.name for n in feasible])
    assert seen == [["n0", "n1", "n2"], ["n3", "n4", "n5"], ["n0", "n1", "n2"]]
    assert session.node_offset == 3
    # Unsampled searches try every node and leave the offset alone.
    feasible, _ = predicate_nodes(session, p, session.node_list, None)
    assert len(feasible) == 6 and session.node_offset == 3


def test_a_small_cluster_is_searched_whole_from_its_first_node() -> None:
    session = open_session([*NODES, pod("p")])
    session.node_offset = 4
    window = SamplingWindow(session, 5)  # at most minimum_feasible (100) nodes
    assert (window.wanted, window.start) == (5, 0)
    window.end(5)
    assert session.node_offset == 4


def test_eviction_candidates_leave_out_what_eviction_cannot_resolve() -> None:
    def judge(self: Any, task: Task, node: Node) -> Unfit | None:
        if node.name == "n1":
            return Unfit("node(s) had untolerated taint")
        if node.name == "n2":
            return Unfit("Insufficient cpu", resolvable=True)
        return None

    session = open_session([*NODES, pod("p")], plugin(predicate=judge))
    p = task(session, "p")
    assert [n.name for n in eviction_candidates(session, p)] == ["n0", "n2", "n3", "n4"]
    # Nodes its last search found unresolvable are not asked again.
    errors = NodeFitErrors()
    errors.set("n3", Unfit("node(s) didn't match Pod's node affinity/selector"))
    errors.set("n4", Unfit("Insufficient cpu", resolvable=True))
    session.jobs[p.job_id].fit_errors[p.uid] = errors
    assert [n.name for n in eviction_candidates(session, p)] == ["n0", "n2", "n4"]


def test_a_jobs_fit_error_names_its_first_task_by_key_with_a_fit_error() -> None:
    """The job's reason ends on the fit error of its first task by key (`w-1` before
    `w-2`, whatever order the errors were found in)."""
    session = open_session([node("n1", cpu="1"), *gang("w", 3, cpu="2")])
    job = session.jobs[task(session, "w-0").job_id]
    for name, reason in (("w-2", "late"), ("w-1", "early")):
        job.fit_errors[task(session, name).uid] = NodeFitErrors(reason)
    assert job.fit_error().endswith("Origin reason is w-1: early")
    del job.fit_errors[task(session, "w-1").uid]
    assert job.fit_error().endswith("Origin reason is w-2: late")
