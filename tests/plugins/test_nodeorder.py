"""nodeorder: least/most requested, balanced allocation, preferred affinity, taints."""

from __future__ import annotations

import pytest

from tests.builders import node, open_session, pod, simulate
from vscheduler.conf import ConfError, parse_conf
from vscheduler.framework.session import Session
from vscheduler.model import Task
from vscheduler.plugins.nodeorder import (
    balanced_allocation,
    balanced_score,
    least_requested,
    least_requested_score,
    most_requested,
    most_requested_score,
    normalize,
)

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder%s}]
"""


def conf(**args: object) -> str:
    if not args:
        return CONF % ""
    items = ", ".join(f"{k}: {v}" for k, v in args.items())
    return CONF % f", arguments: {{{items}}}"


ONLY_MOST = {"leastrequested.weight": 0, "mostrequested.weight": 1,
             "balancedresource.weight": 0}


def preferred(*terms: tuple[int, list[dict]]) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": exprs}} for w, exprs in terms]}}


def label_is(key: str, value: str) -> list[dict]:
    return [{"key": key, "operator": "In", "values": [value]}]


def prefer_no_schedule(key: str) -> dict:
    return {"key": key, "value": "x", "effect": "PreferNoSchedule"}


def _task(session: Session, name: str) -> Task:
    key = f"default/{name}"
    for job in session.jobs.values():
        for task in job.tasks.values():
            if task.key == key:
                return task
    raise KeyError(key)


# --------------------------------------------------------------------------- formulas


@pytest.mark.parametrize("requested, capacity, score", [
    (1000, 4000, 75), (0, 4000, 100), (4000, 4000, 0), (1, 3, 66),
    (5000, 4000, 0), (0, 0, 0), (10, 0, 0),
])
def test_least_requested_score(requested: float, capacity: float, score: int) -> None:
    assert least_requested_score(requested, capacity) == score


@pytest.mark.parametrize("requested, capacity, score", [
    (1000, 4000, 25), (0, 4000, 0), (4000, 4000, 100), (2, 3, 66),
    (5000, 4000, 100), (0, 0, 0), (10, 0, 0),
])
def test_most_requested_score(requested: float, capacity: float, score: int) -> None:
    assert most_requested_score(requested, capacity) == score


@pytest.mark.parametrize("fractions, score", [
    ([0.5, 0.5], 100),
    ([0.2, 0.6], 80),
    ([1.5, 0.5], 75),         # an overflow counts as 1
    ([0.0, 1.0, 0.5], 59),    # 1 - sqrt(1/6) = 0.5917
    ([0.3], 100),
    ([], 100),
])
def test_balanced_score(fractions: list[float], score: int) -> None:
    assert balanced_score(fractions) == score


@pytest.mark.parametrize("raw, reverse, scores", [
    ([0, 5, 10], False, [0, 50, 100]),
    ([1, 3], False, [33, 100]),
    ([0, 0], False, [0, 0]),
    ([0, 1, 2], True, [100, 50, 0]),
    ([1, 3], True, [67, 0]),
    ([0, 0], True, [100, 100]),
    ([], False, []),
])
def test_normalize(raw: list[int], reverse: bool, scores: list[int]) -> None:
    assert normalize(raw, reverse) == scores


def test_scorers_count_what_the_node_uses_and_the_pod() -> None:
    objects = [node("n1", cpu="4", memory="8Gi"),
               pod("running", cpu="1", memory="2Gi", node_name="n1"),
               pod("p", cpu="1", memory="2Gi")]
    session = open_session(objects, conf())
    task, n1 = _task(session, "p"), session.nodes["n1"]
    assert least_requested(task, n1) == 50
    assert most_requested(task, n1) == 50
    assert balanced_allocation(task, n1) == 100


def test_balanced_allocation_counts_gpus_only_for_pods_that_ask() -> None:
    objects = [node("n1", cpu="8", memory="16Gi", **{"nvidia.com/gpu": "4"}),
               pod("gpu", cpu="4", memory="8Gi", **{"nvidia.com/gpu": "4"}),
               pod("cpu", cpu="4", memory="8Gi")]
    session = open_session(objects, conf())
    n1 = session.nodes["n1"]
    assert balanced_allocation(_task(session, "cpu"), n1) == 100
    # fractions 0.5, 0.5, 1.0: deviation sqrt(1/18) = 0.2357
    assert balanced_allocation(_task(session, "gpu"), n1) == 76


def test_balanced_allocation_leaves_out_what_the_node_does_not_offer() -> None:
    objects = [node("n1", cpu="8", memory="0"), pod("p", cpu="2", memory="1Gi")]
    session = open_session(objects, conf())
    assert balanced_allocation(_task(session, "p"), session.nodes["n1"]) == 100


# --------------------------------------------------------------------------- placement


def test_least_requested_prefers_the_emptier_node() -> None:
    objects = [node("n1"), node("n2"),
               pod("big", cpu="6", memory="12Gi", node_name="n1"), pod("p")]
    assert simulate(objects, conf())["binds"] == {"default/p": "n2"}


def test_most_requested_prefers_the_fuller_node() -> None:
    objects = [node("n1"), node("n2"),
               pod("big", cpu="6", memory="12Gi", node_name="n2"), pod("p")]
    assert simulate(objects, conf())["binds"] == {"default/p": "n1"}
    assert simulate(objects, conf(**ONLY_MOST))["binds"] == {"default/p": "n2"}


def test_placements_in_the_session_are_scored() -> None:
    pods = [pod(f"p{i}") for i in range(4)]
    report = simulate([node("n1"), node("n2"), *pods], conf())
    assert sorted(report["binds"].values()) == ["n1", "n1", "n2", "n2"]
    packed = simulate([node("n1"), node("n2"), pod("seed", node_name="n2"), *pods],
                      conf(**ONLY_MOST))
    assert set(packed["binds"].values()) == {"n2"}


def test_balanced_allocation_prefers_evenly_used_nodes() -> None:
    objects = [node("n1"), node("n2"),
               pod("memory-hog", cpu=None, memory="8Gi", node_name="n2"),
               pod("p", cpu="4", memory=None)]
    # Least requested alone would pick the emptier n1; balance picks n2 (0.5 / 0.5).
    balanced_only = conf(**{"leastrequested.weight": 0})
    assert simulate(objects, balanced_only)["binds"] == {"default/p": "n2"}
    least_only = conf(**{"balancedresource.weight": 0})
    assert simulate(objects, least_only)["binds"] == {"default/p": "n1"}


def test_preferred_affinity_steers_placement() -> None:
    objects = [node("n1"), node("n2", labels={"zone": "a"}),
               pod("running", cpu="4", memory="4Gi", node_name="n2"),
               pod("p", affinity=preferred((10, label_is("zone", "a"))))]
    assert simulate(objects, conf())["binds"] == {"default/p": "n2"}
    assert simulate(objects, conf(**{"nodeaffinity.weight": 0}))["binds"] == {
        "default/p": "n1"}


def test_preferred_affinity_scores_are_normalised_over_the_candidates() -> None:
    objects = [node("n1", labels={"zone": "a"}),
               node("n2", labels={"zone": "a", "disk": "ssd"}),
               node("n3"),
               pod("p", affinity=preferred((2, label_is("zone", "a")),
                                           (4, label_is("disk", "ssd"))))]
    args = {"tainttoleration.weight": 0}
    session = open_session(objects, conf(**args))
    plugin = session.plugins["nodeorder"]
    scores = plugin.batch_node_order(_task(session, "p"), session.node_list)
    # raw 2, 6, 0 -> 33, 100, 0, times the weight 2
    assert scores == {"n1": 66.0, "n2": 200.0, "n3": 0.0}


def test_untolerated_prefer_no_schedule_taints_are_avoided() -> None:
    objects = [node("n1", taints=[prefer_no_schedule("spot")]), node("n2"), pod("p")]
    assert simulate(objects, conf())["binds"] == {"default/p": "n2"}
    toleration = {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}
    objects[-1] = pod("p", tolerations=[toleration])
    assert simulate(objects, conf())["binds"] == {"default/p": "n1"}


def test_taint_scores_are_inverted_over_the_candidates() -> None:
    objects = [node("n1", taints=[prefer_no_schedule("a"), prefer_no_schedule("b")]),
               node("n2", taints=[prefer_no_schedule("a"),
                                  {"key": "hard", "value": "", "effect": "NoSchedule"}]),
               node("n3"),
               # A NoSchedule toleration does not make a PreferNoSchedule taint welcome.
               pod("p", tolerations=[{"key": "b", "operator": "Exists",
                                      "effect": "NoSchedule"}]),
               pod("q", tolerations=[{"key": "b", "operator": "Exists"}])]
    args = {"nodeaffinity.weight": 0}
    session = open_session(objects, conf(**args))
    plugin = session.plugins["nodeorder"]
    # counts 2, 1, 0 -> 0, 50, 100, times the weight 3
    assert plugin.batch_node_order(_task(session, "p"), session.node_list) == {
        "n1": 0.0, "n2": 150.0, "n3": 300.0}
    # q tolerates b: counts 1, 1, 0
    assert plugin.batch_node_order(_task(session, "q"), session.node_list) == {
        "n1": 0.0, "n2": 0.0, "n3": 300.0}


def test_weights_multiply_and_zero_turns_a_scorer_off() -> None:
    objects = [node("n1", cpu="4", memory="8Gi"),
               pod("running", cpu="1", memory="2Gi", node_name="n1"),
               pod("p", cpu="1", memory="2Gi")]
    for args, expected in [({}, 50 + 100), ({"leastrequested.weight": 3}, 150 + 100),
                           ({"mostrequested.weight": 2}, 50 + 100 + 100),
                           ({"leastrequested.weight": 0, "balancedresource.weight": 0}, 0)]:
        session = open_session(objects, conf(**args))
        plugin = session.plugins["nodeorder"]
        assert plugin.node_order(_task(session, "p"), session.nodes["n1"]) == expected, args


def test_all_weights_zero_scores_nothing() -> None:
    keys = ["leastrequested.weight", "mostrequested.weight", "nodeaffinity.weight",
            "balancedresource.weight", "tainttoleration.weight"]
    objects = [node("n1", labels={"zone": "a"}, taints=[prefer_no_schedule("a")]), node("n2"),
               pod("p", affinity=preferred((5, label_is("zone", "a"))))]
    session = open_session(objects, conf(**dict.fromkeys(keys, 0)))
    plugin, task = session.plugins["nodeorder"], _task(session, "p")
    assert [plugin.node_order(task, n) for n in session.node_list] == [0.0, 0.0]
    assert plugin.batch_node_order(task, session.node_list) == {"n1": 0.0, "n2": 0.0}


def test_decisions_are_deterministic() -> None:
    objects = [node(f"n{i}") for i in range(5)] + [pod(f"p{i}", cpu="3") for i in range(9)]
    first = simulate(objects, conf())
    assert all(simulate(objects, conf()) == first for _ in range(3))
    assert len(first["binds"]) == 9


# --------------------------------------------------------------------------- arguments


def test_defaults_are_volcanos() -> None:
    args = parse_conf(conf()).tiers[1][1].args
    assert args == {"leastrequested.weight": 1, "mostrequested.weight": 0,
                    "nodeaffinity.weight": 2, "podaffinity.weight": 2,
                    "balancedresource.weight": 1, "tainttoleration.weight": 3,
                    "imagelocality.weight": 1, "podtopologyspread.weight": 2}


def test_scorers_without_an_implementation_are_accepted() -> None:
    parsed = parse_conf(conf(**{"podaffinity.weight": 5, "imagelocality.weight": 0,
                                "podtopologyspread.weight": 1}))
    assert parsed.warnings == []


@pytest.mark.parametrize("value", ["high", "1.5", "true", "'2'"])
def test_weight_of_the_wrong_type_is_refused(value: str) -> None:
    with pytest.raises(ConfError, match=r"leastrequested\.weight.*must be an integer"):
        parse_conf(conf(**{"leastrequested.weight": value}))
