"""binpack: pods go to the node they fill most; an overflowing node scores 0."""

from __future__ import annotations

import pytest

from tests.builders import node, open_session, pod, simulate
from vscheduler.conf import ConfError, parse_conf
from vscheduler.framework.session import Session
from vscheduler.model import Node, Task
from vscheduler.plugins.binpack import binpack_score, resource_weights, weighted_request
from vscheduler.resources import Resource

GI = 1024**3
GPU = "nvidia.com/gpu"

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, %s{name: binpack%s}]
"""


def conf(nodeorder: bool = False, **args: object) -> str:
    items = ", ".join(f"{k}: {v}" for k, v in args.items())
    return CONF % ("{name: nodeorder}, " if nodeorder else "",
                   f", arguments: {{{items}}}" if args else "")


def _task(session: Session, name: str) -> Task:
    key = f"default/{name}"
    for job in session.jobs.values():
        for task in job.tasks.values():
            if task.key == key:
                return task
    raise KeyError(key)


def _node(allocatable: Resource, used: Resource) -> Node:
    n = Node("n", allocatable)
    n.used = used
    return n


# --------------------------------------------------------------------------- formula


def test_weights_from_arguments() -> None:
    args = {"binpack.cpu": 2, "binpack.memory": -3,
            "binpack.resources": " nvidia.com/gpu, ,example.com/fpga ",
            "binpack.resources.nvidia.com/gpu": 5, "binpack.resources.example.com/fpga": -1,
            "binpack.resources.not-listed": 7}
    assert resource_weights(args) == {"cpu": 2, "memory": 1, GPU: 5, "example.com/fpga": 1}


def test_default_weights() -> None:
    assert resource_weights({}) == {"cpu": 1, "memory": 1}
    assert resource_weights({"binpack.resources": "cpu", "binpack.resources.cpu": 4}) == {
        "cpu": 4, "memory": 1}


def test_only_requested_weighted_resources_count() -> None:
    request = Resource(1000, 0, {GPU: 2000, "pods": 1, "example.com/other": 1000})
    assert weighted_request(request, {"cpu": 1, "memory": 1, GPU: 3}) == (
        ("cpu", 1000, 1), (GPU, 2000, 3))


def test_score_is_the_weighted_fill() -> None:
    n = _node(Resource(4000, 8 * GI), Resource(1000, 2 * GI))
    assert binpack_score((("cpu", 1000, 1), ("memory", 2 * GI, 1)), n) == 0.5
    # cpu fill 0.5 weighted 3, memory fill 0.5 weighted 1
    assert binpack_score((("cpu", 1000, 3), ("memory", 2 * GI, 1)), n) == 0.5
    # cpu 3000/4000 weighted 1, memory 4Gi/8Gi weighted 3: (0.75 + 1.5) / 4
    assert binpack_score((("cpu", 2000, 1), ("memory", 2 * GI, 3)), n) == pytest.approx(0.5625)


def test_overflow_scores_zero() -> None:
    n = _node(Resource(4000, 8 * GI), Resource(3500, 2 * GI))
    assert binpack_score((("cpu", 1000, 1), ("memory", 1 * GI, 1)), n) == 0.0
    # exactly full is not an overflow
    assert binpack_score((("cpu", 500, 1),), n) == 1.0


def test_missing_resource_and_zero_weight_add_nothing() -> None:
    n = _node(Resource(4000, 8 * GI), Resource(1000, 2 * GI))
    # the node offers no GPU: weight 2 goes to the divisor only
    assert binpack_score((("cpu", 1000, 1), ("memory", 2 * GI, 1), (GPU, 1000, 2)), n) == 0.25
    # weight 0 on cpu: its overflow does not zero the node
    assert binpack_score((("cpu", 9000, 0), ("memory", 2 * GI, 1)), n) == 0.5


def test_nothing_weighted_requested_scores_zero() -> None:
    n = _node(Resource(4000, 8 * GI), Resource(1000, 2 * GI))
    assert binpack_score((), n) == 0.0


# --------------------------------------------------------------------------- placement


def test_pod_goes_to_the_fullest_node() -> None:
    objects = [node("n1"), node("n2"), node("n3"),
               pod("a", cpu="2", memory="2Gi", node_name="n2"),
               pod("b", cpu="5", memory="5Gi", node_name="n3"),
               pod("p")]
    assert simulate(objects, conf())["binds"] == {"default/p": "n3"}


def test_pods_are_packed_in_the_session() -> None:
    objects = [node("n1"), node("n2"), pod("seed", node_name="n2"),
               *(pod(f"p{i}", cpu="2", memory="2Gi") for i in range(4))]
    report = simulate(objects, conf())
    binds = report["binds"]
    # n2 takes three (1 + 3*2 = 7 of 8 cpus), the fourth overflows there and goes to n1
    assert [binds[f"default/p{i}"] for i in range(4)] == ["n2", "n2", "n2", "n1"]


def test_overflowing_node_scores_zero() -> None:
    objects = [node("n1", cpu="4"), pod("running", cpu="3", node_name="n1"),
               pod("fits", cpu="1", memory="4Gi"), pod("overflows", cpu="2")]
    session = open_session(objects, conf())
    plugin, n1 = session.plugins["binpack"], session.nodes["n1"]
    # cpu 4/4, memory 5Gi/16Gi: (1 + 0.3125) / 2 * 100
    assert plugin.node_order(_task(session, "fits"), n1) == pytest.approx(65.625)
    assert plugin.node_order(_task(session, "overflows"), n1) == 0.0


def test_binpack_weight_scales_and_zero_turns_it_off() -> None:
    objects = [node("n1", cpu="4", memory="8Gi"),
               pod("running", cpu="1", memory="2Gi", node_name="n1"),
               pod("p", cpu="1", memory="2Gi")]
    for weight, expected in [(1, 50.0), (4, 200.0), (0, 0.0), (-1, -50.0)]:
        session = open_session(objects, conf(**{"binpack.weight": weight}))
        score = session.plugins["binpack"].node_order(_task(session, "p"), session.nodes["n1"])
        assert score == expected, weight


def test_binpack_weight_zero_leaves_the_choice_to_others() -> None:
    objects = [node("n1"), node("n2"), pod("running", cpu="4", node_name="n2"), pod("p")]
    assert simulate(objects, conf(nodeorder=True))["binds"] == {"default/p": "n1"}
    assert simulate(objects, conf(nodeorder=True, **{"binpack.weight": 10}))["binds"] == {
        "default/p": "n2"}
    assert simulate(objects, conf(**{"binpack.weight": 0}))["binds"] == {"default/p": "n1"}


def test_extra_resources_are_packed_by_their_weight() -> None:
    gpu = {GPU: "8"}
    objects = [node("n1", **gpu), node("n2", **gpu),
               pod("cpu-heavy", cpu="6", node_name="n1"),
               pod("gpu-heavy", cpu="1", node_name="n2", **{GPU: "6"}),
               pod("p", cpu="1", **{GPU: "1"})]
    # cpu and memory only: n1 is the fuller node
    assert simulate(objects, conf())["binds"] == {"default/p": "n1"}
    args = {"binpack.resources": GPU, f"binpack.resources.{GPU}": 10}
    assert simulate(objects, conf(**args))["binds"] == {"default/p": "n2"}


# --------------------------------------------------------------------------- arguments


def test_arguments_load_without_warnings() -> None:
    parsed = parse_conf(conf(**{"binpack.weight": 2, "binpack.cpu": 1, "binpack.memory": 3,
                                "binpack.resources": f"'{GPU}, example.com/fpga'",
                                f"binpack.resources.{GPU}": 4,
                                "binpack.resources.example.com/fpga": 2}))
    assert parsed.warnings == []
    args = parsed.tiers[1][1].args
    assert args[f"binpack.resources.{GPU}"] == 4


@pytest.mark.parametrize("key, value, words", [
    ("binpack.weight", "x", "an integer"),
    ("binpack.cpu", "1.5", "an integer"),
    ("binpack.memory", "true", "an integer"),
    ("binpack.resources", "5", "a string"),
    (f"binpack.resources.{GPU}", "heavy", "an integer"),
])
def test_argument_of_the_wrong_type_is_refused(key: str, value: str, words: str) -> None:
    with pytest.raises(ConfError, match=f"binpack.*must be {words}"):
        parse_conf(conf(**{key: value}))
