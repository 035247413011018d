"""Nothing a user writes crashes a session: the bad object is skipped with a Warning
event naming it, and the rest is scheduled."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import gang, node, pod, podgroup, queue, simulate
from vscheduler.cli import main

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
"""


def _warnings(report: dict[str, Any]) -> dict[str, str]:
    return {e["object"]: e["message"] for e in report["events"]
            if e["type"] == "Warning" and e["reason"] == "BadObject"}


def test_bad_quantity_skips_that_pod_only():
    bad = pod("bad", cpu="two")
    report = simulate([node("n1"), bad, pod("good")], CONF)
    assert report["binds"] == {"default/good": "n1"}
    message = _warnings(report)["Pod/default/bad"]
    assert "resource cpu" in message and "'two' is not a quantity" in message


def test_bad_node_is_skipped_and_others_used():
    broken = node("broken", cpu="lots")
    report = simulate([broken, node("fine"), pod("p")], CONF)
    assert report["binds"] == {"default/p": "fine"}
    assert "Node/broken" in _warnings(report)


def test_malformed_objects_of_every_kind():
    objects = [
        node("n1"),
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "no-spec"}, "spec": "oops"},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": "x"},
        podgroup("negative", -1),
        {**podgroup("weird", 1), "spec": {"minMember": "three"}},
        queue("q-bad", capability={"cpu": "1x"}),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
         "metadata": {"name": "nope"}, "value": "high"},
        pod("affinity", affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}}),
        pod("toleration", tolerations=[{"key": "k", "operator": "Maybe"}]),
        *gang("ok", 2),
    ]
    report = simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/ok-0", "default/ok-1"]
    warned = _warnings(report)
    for name in ("Pod/default/no-spec", "PodGroup/default/negative", "PodGroup/default/weird",
                 "Queue/q-bad", "PriorityClass/nope", "Pod/default/affinity",
                 "Pod/default/toleration"):
        assert name in warned, name
    messages = [e["message"] for e in report["events"] if e["reason"] == "BadObject"]
    assert any("metadata.name: missing" in m for m in messages)
    assert any("metadata: expected a map" in m for m in messages)


def test_a_file_that_is_not_yaml_is_one_line_and_exit_2(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n"
                    "  allocatable: {cpu: '2', memory: 2Gi, pods: '10'}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: [unclosed\n")
    assert main(["simulate", str(good), str(bad), "--output", "json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert f"{bad}: not valid YAML: line 3" in err


def test_a_file_not_in_utf8_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"kind: Node\nmetadata: {name: caf\xe9}\n")
    assert main(["simulate", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert f"{bad}: not UTF-8 text (byte 31)" in err


def test_missing_manifest_file_is_a_usage_error(tmp_path, capsys):
    assert main(["simulate", str(tmp_path / "absent.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


JUNK = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=4),
                 st.just("1Gi"), st.just("-1"), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2))


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            out += _paths(value, (*prefix, i))
    return out


def _replace(obj: Any, path: tuple, value: Any) -> None:
    for step in path[:-1]:
        obj = obj[step]
    obj[path[-1]] = value


BASE = [
    queue("q1", 2, capability={"cpu": "4"}), node("n1", labels={"zone": "a"}),
    node("n2", taints=[{"key": "t", "value": "v", "effect": "NoSchedule"}]),
    *gang("g", 2, queue="q1", node_selector={"zone": "a"},
          tolerations=[{"key": "t", "operator": "Exists"}]),
    pod("solo", annotations={"volcano.sh/preemptable": "false"}, host_ports=[80]),
    pod("running", node_name="n1", scheduler="other"),
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_field_replaced_by_junk_never_crashes(data):
    objects = copy.deepcopy(BASE)
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(objects) - 1))
        paths = _paths(objects[index])
        if not paths:
            continue
        path = data.draw(st.sampled_from(paths))
        _replace(objects[index], path, data.draw(JUNK))
    report = simulate(objects, CONF, sessions=2)
    # Every pod of ours that was read is accounted for.
    for key in report["pending"]:
        assert report["pending"][key]
