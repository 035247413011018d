"""NodeSearch: a search shared by tasks of one signature decides as a fresh search would,
as nodes fill up, whatever the scores (NaN included) and with node sampling."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import gang, node, pod, simulate
from tests.framework.test_eviction import open_session, plugin
from vscheduler.framework.placement import (
    NodeSampling,
    predicate_nodes,
    select_best_node,
)
from vscheduler.framework.search import NodeSearch
from vscheduler.framework.session import Session
from vscheduler.model import Node, Task

NAN = float("nan")


def fresh_best(session: Session, task: Task) -> Node | None:
    """Allocate's search of its own: every node, those with the task's resources idle
    now before those where it must wait, then the best scored."""
    feasible, _ = predicate_nodes(session, task, session.node_list, Node.insufficient_future)
    if not feasible:
        return None
    idle_now = [n for n in feasible if n.insufficient_now(task.resreq) is None]
    return select_best_node(session, task, idle_now or feasible)


def scored(table: dict[str, float]) -> type:
    """A plugin scoring nodes from `table`; its answers depend on nothing of the task."""
    return plugin("scored", node_order=lambda self, task, node: table.get(node.name, 0.0),
                  task_signature=lambda self, task: None)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2), st.integers(0, 2),
                          st.sampled_from([NAN, 0.0, 1.0, 2.0, 5.0])),
                min_size=1, max_size=6),
       st.integers(1, 8))
def test_a_shared_search_picks_the_node_a_fresh_search_picks(
        shape: list[tuple[int, int, int, float]], size: int) -> None:
    # Each node: its CPUs, how many 1-CPU pods run there and how many are being deleted
    # (their CPU frees up: a task may wait on it), and its score.
    objects: list[dict[str, Any]] = []
    table = {}
    for i, (cpu, used, leaving, score) in enumerate(shape):
        name = f"n{i}"
        table[name] = score
        objects.append(node(name, cpu=str(cpu)))
        for j in range(min(used + leaving, cpu)):
            objects.append(pod(f"{name}-r{j}", node_name=name))
            if j >= used:
                objects[-1]["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    objects += gang("g", size, cpu="1")
    session = open_session(objects, scored(table))
    search = NodeSearch(session, Node.insufficient_future, Node.insufficient_now)
    statement = session.statement()
    for task in sorted(session.jobs["default/g"].tasks.values(), key=lambda t: t.name):
        expected = fresh_best(session, task)
        found = search.best(task)
        assert found is not None  # every plugin signs: the search is shared
        node_found, errors = found
        assert node_found is expected
        if node_found is None:
            assert set(errors.nodes) == {n.name for n in session.node_list}
            continue
        place = statement.allocate if node_found.insufficient_now(task.resreq) is None \
            else statement.pipeline
        assert place(task, node_found) is None


def test_with_sampling_each_signature_draws_its_sample_from_the_rotating_offset() -> None:
    objects = [*(node(f"n{i}", cpu="1") for i in range(6)), *gang("g", 6, cpu="1")]
    session = open_session(objects, scored({}))
    session.node_sampling = NodeSampling(minimum_feasible=2, percentage=50)
    search = NodeSearch(session, Node.insufficient_future, Node.insufficient_now)
    statement = session.statement()
    placed = []
    for task in sorted(session.jobs["default/g"].tasks.values(), key=lambda t: t.name):
        found = search.best(task)
        assert found is not None and found[0] is not None
        placed.append(found[0].name)
        assert statement.allocate(task, found[0]) is None
    # The first sample is n0..n2; once they are full the next is drawn from n3 on.
    assert placed == ["n0", "n1", "n2", "n3", "n4", "n5"]
    assert session.node_offset == 0  # the second sample stopped after n5


def test_a_shared_search_judges_for_the_task_asking_not_the_one_that_opened_it() -> None:
    """web-a (app=web) and other (app=other) are alike when web-a is placed: no inter-pod
    rule concerns either, and they share a search. Then web-b, with a required
    anti-affinity to app=web by hostname, goes to n1. That rule now concerns web-a's
    labels, not other's: the shared search must judge n1 again for other, which fits
    there (the packing scorer prefers n1 to the empty n2), not for web-a, which does not."""
    hostname = "kubernetes.io/hostname"
    anti_web = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": hostname}]}}
    objects = [node(f"n{i}", cpu="2", labels={hostname: f"n{i}"}) for i in range(3)]
    objects += [
        pod("first", cpu="500m", creation="2026-01-01T00:00:00Z"),
        pod("web-a", cpu="1", labels={"app": "web"}, creation="2026-01-01T00:00:01Z"),
        pod("web-b", cpu="500m", labels={"app": "web"}, affinity=anti_web,
            creation="2026-01-01T00:00:02Z"),
        pod("other", cpu="1", labels={"app": "other"}, creation="2026-01-01T00:00:03Z"),
    ]
    conf = """
actions: "allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: nodeorder, arguments: {
    leastrequested.weight: 0, balancedresource.weight: 0, mostrequested.weight: 1}}]
"""
    binds = simulate(objects, conf)["binds"]
    assert binds == {"default/first": "n0", "default/web-a": "n0", "default/web-b": "n1",
                     "default/other": "n1"}
