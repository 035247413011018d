"""Nothing a user writes crashes a session: the bad object is skipped with a Warning
event naming it, and the rest is scheduled."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import conf, gang, node, pod, podgroup, priority_class, queue, simulate
from vscheduler.cache import Cache
from vscheduler.cards import CardError, parse_card_counts
from vscheduler.cli import main
from vscheduler.framework.session import Session
from vscheduler.kube.apply import apply_event
from vscheduler.objects import BadObject
from vscheduler.quantity import MAX_MAGNITUDE, QuantityError, parse_quantity
from vscheduler.textinput import TextError, load_json, load_yaml_documents

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
"""


def _simulated(manifest: Path, text: str, capsys: pytest.CaptureFixture[str]) -> dict:
    """`vscheduler simulate` run on `text`, written to `manifest`: its JSON report."""
    manifest.write_text(text)
    assert main(["simulate", str(manifest), "--output", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _warnings(report: dict[str, Any]) -> dict[str, str]:
    return {e["object"]: e["message"] for e in report["events"]
            if e["type"] == "Warning" and e["reason"] == "BadObject"}


def test_bad_quantity_skips_that_pod_only():
    bad = pod("bad", cpu="two")
    report = simulate([node("n1"), bad, pod("good")], CONF)
    assert report["binds"] == {"default/good": "n1"}
    message = _warnings(report)["Pod/default/bad"]
    assert "resource cpu" in message and "'two' is not a quantity" in message


@pytest.mark.parametrize(("phase", "words"), [
    ("pending", "status.phase: 'pending' is not a pod phase"),
    ("Bogus", "status.phase: 'Bogus' is not a pod phase"),
    ("Running", "status.phase: Running, with no spec.nodeName"),
])
def test_a_pod_on_no_node_in_a_phase_no_such_pod_has_is_a_warning(phase, words):
    # Such a pod was neither scheduled nor explained (a typo), or counted against its
    # queue while holding no node (Running nowhere); the good pods are bound.
    report = simulate([node("n1", cpu="2"), pod("odd", phase=phase),
                       pod("good-0"), pod("good-1")], CONF)
    assert report["binds"] == {"default/good-0": "n1", "default/good-1": "n1"}
    assert words in _warnings(report)["Pod/default/odd"]


def test_a_pod_on_a_node_in_a_phase_of_its_own_keeps_its_room_there():
    # (Unknown, as Volcano reads a phase it does not know: a status writer other than a
    # kubelet may set one, and the node must not be filled under it)
    report = simulate([node("n1", cpu="2"), pod("odd", cpu="2", phase="Bogus",
                                                node_name="n1"), pod("good")], CONF)
    assert report["binds"] == {}
    assert "Pod/default/odd" not in _warnings(report)


def test_bad_node_is_skipped_and_others_used():
    broken = node("broken", cpu="lots")
    report = simulate([broken, node("fine"), pod("p")], CONF)
    assert report["binds"] == {"default/p": "fine"}
    assert "Node/broken" in _warnings(report)


def test_a_boolean_written_as_text_is_a_warning_not_true():
    """`"false"` is true to a truth test: a node "not unschedulable" was cordoned, and a
    PriorityClass "not the global default" set every unclassed pod's priority. Both are
    refused with a Warning, as the API server's schema refuses them."""
    cordoned = node("odd")
    cordoned["spec"]["unschedulable"] = "false"
    default = priority_class("not-default", 1000)
    default["globalDefault"] = "false"
    objects = [cordoned, node("n1", cpu="1"), default, priority_class("mid", 500),
               pod("unclassed", creation="2025-01-01T00:00:00Z"),
               pod("mid", priority_class="mid", creation="2025-01-01T00:00:01Z")]
    report = simulate(objects, CONF)
    assert report["binds"] == {"default/mid": "n1"}
    warned = _warnings(report)
    assert "spec.unschedulable: expected true or false, got 'false'" in warned["Node/odd"]
    assert "globalDefault: expected true or false" in warned["PriorityClass/not-default"]


ENQUEUE_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}]
"""


@pytest.mark.parametrize("phase", ["pending", "Bogus"])
def test_a_podgroup_phase_volcano_has_not_is_read_as_pending_with_a_warning(phase: str):
    """A misspelt phase read as admitted skipped enqueue: a gang whose minResources its
    queue cannot hold ran. Read as Pending, it is refused as it would be anyway; the
    Warning says so, once."""
    group = podgroup("g", 2, queue="q", min_resources={"cpu": "100"}, phase=phase)
    objects = [node("n1"), queue("q", capability={"cpu": "4"}), group, *(
        pod(f"g-{i}", group="g", queue="q") for i in range(2)), pod("other")]
    report = simulate(objects, ENQUEUE_CONF, sessions=2)
    assert report["binds"] == {"default/other": "n1"}
    assert report["podGroups"]["default/g"]["phase"] == "Pending"
    [warning] = [e for e in report["events"] if e["reason"] == "InvalidPhase"]
    assert warning["object"] == "PodGroup/default/g" and warning["count"] == 1
    assert f"status.phase: {phase!r} is not a PodGroup phase" in warning["message"]
    group["status"]["phase"] = "Pending"
    assert simulate(objects, ENQUEUE_CONF)["binds"] == {"default/other": "n1"}


def _preferred_node_affinity(weight: int) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}}]}}


@pytest.mark.parametrize(("obj", "name", "words"), [
    ({**priority_class("huge", 0), "value": 3_000_000_000}, "PriorityClass/huge",
     "value: 3000000000 is out of range for a priority (32 bits)"),
    ({**pod("low"), "spec": {**pod("low")["spec"], "priority": -99_999_999_999}},
     "Pod/default/low", "spec.priority: -99999999999 is out of range for a priority"),
    (pod("far", affinity=_preferred_node_affinity(1000)), "Pod/default/far",
     "preferredDuringSchedulingIgnoredDuringExecution[0].weight: 1 to 100, got 1000"),
    (pod("neg", affinity=_preferred_node_affinity(-5)), "Pod/default/neg", "1 to 100, got -5"),
    (pod("tol", tolerations=[{"key": "k", "operator": "Exists", "effect": "Sometimes"}]),
     "Pod/default/tol", "spec.tolerations[0].effect: 'Sometimes' is not NoSchedule"),
    (pod("gated", gates=[""]), "Pod/default/gated", "spec.schedulingGates[].name: missing"),
    (podgroup("names", 1, min_resources={"bad name!": "1"}), "PodGroup/default/names",
     "spec.minResources: 'bad name!' is not a resource name"),
    (podgroup("blank", 1, min_resources={"": "1"}), "PodGroup/default/blank",
     "spec.minResources: '' is not a resource name"),
    (podgroup("long", 1, min_resources={"example.com/" + "x" * 306: "1"}),
     "PodGroup/default/long", "is not a resource name"),
])
def test_values_the_api_server_refuses_are_refused_here_too(obj, name, words):
    """Each was read as written: a priority beyond 32 bits, a preference weight outside
    1-100, a toleration effect no taint has, a gate without a name ("Pod has scheduling
    gates: , "), a resource named "" ("overused , ")."""
    report = simulate([node("n1"), obj, pod("good")], CONF)
    assert report["binds"] == {"default/good": "n1"}
    assert words in _warnings(report)[name]


def test_a_whole_number_written_with_a_point_is_that_integer():
    """kubectl's YAML-to-JSON conversion writes `2.0` as 2, which integer fields take:
    a PodGroup's minMember 2.0, a priority 1000.0, a weight 2.0 are read as integers
    (2.5 is still refused)."""
    group = podgroup("g", 2)
    group["spec"]["minMember"] = 2.0
    objects = [node("n1"), queue("q"), group, *(pod(f"g-{i}", group="g") for i in range(2))]
    objects[1]["spec"]["weight"] = 2.0
    report = simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/g-0", "default/g-1"]
    assert _warnings(report) == {}
    group["spec"]["minMember"] = 2.5
    assert "spec.minMember" in _warnings(simulate(objects, CONF))["PodGroup/default/g"]
    [binpack] = [option for tier in conf(CONF.replace(
        "{name: gang}", "{name: gang}, {name: binpack, arguments: {binpack.weight: 10.0}}"
    )).tiers for option in tier if option.name == "binpack"]
    assert binpack.args["binpack.weight"] == 10


def test_what_kubectl_sends_as_text_or_quantity_is_read():
    """An unquoted date in a label (`build: 2025-01-01`) is text to kubectl's YAML
    reader, and a Queue's `status.allocated` may hold plain numbers (quantities): both
    objects are read, not refused as a number or a date where text belongs."""
    dated = node("n1", labels={"window": "2025-01-01"})
    manifest = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: built\n"
                "  labels: {build: 2025-01-01, at: 2025-01-01T10:00:00Z}\n"
                "spec:\n  schedulerName: vscheduler\n  nodeSelector: {window: '2025-01-01'}\n"
                "  containers: [{name: c}]\n")
    from vscheduler.textinput import load_yaml
    team = queue("team")
    team["status"] = {"allocated": {"cpu": 0, "memory": 0}}
    report = simulate([dated, team, load_yaml(manifest), pod("p", queue="team")], CONF)
    assert report["binds"] == {"default/built": "n1", "default/p": "n1"}
    assert _warnings(report) == {}


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


def test_a_key_given_twice_skips_its_document_and_a_conf_so_written_is_refused(
        tmp_path, capsys):
    """A pod given `spec:` twice was read with the second (another scheduler's: it left
    the report), a `cpu:` twice with the last; a conf with `actions:` twice ran the
    second. kubectl refuses such YAML: here the document is skipped, named, and the
    conf is a bad conf."""
    manifest = tmp_path / "cluster.yaml"
    report = _simulated(manifest, (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '8', memory: 8Gi, pods: '10'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: twice}\n"
        "spec: {schedulerName: vscheduler, containers: [{name: c}]}\n"
        "spec: {schedulerName: other, containers: [{name: c}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: good}\n"
        "spec: {schedulerName: vscheduler, containers: [{name: c}]}\n"), capsys)
    assert report["binds"] == {"default/good": "n1"}
    assert any("cluster.yaml#1: line 10: key 'spec' is given twice in one mapping "
               "(first at line 9)" in e["message"] for e in report["events"])
    conf_file = tmp_path / "twice.conf"
    conf_file.write_text('actions: "enqueue, allocate"\nactions: "enqueue"\ntiers: []\n')
    assert main(["simulate", str(manifest), "--conf", str(conf_file)]) == 2
    assert "key 'actions' is given twice" in capsys.readouterr().err


def test_endless_or_huge_input_is_refused_not_read_into_memory(tmp_path, capsys,
                                                               monkeypatch):
    """`--conf /dev/zero` or `simulate /dev/zero` grew without end: past its limit, the
    text is one line and exit code 2 (the manifest limit made small here)."""
    quickstart = str(Path(__file__).parent.parent / "examples" / "quickstart.yaml")
    assert main(["simulate", quickstart, "--conf", "/dev/zero"]) == 2
    assert "/dev/zero: larger than 1,048,576 bytes; not read" in capsys.readouterr().err
    from vscheduler import simulate as simulate_module
    monkeypatch.setattr(simulate_module, "MAX_MANIFEST_BYTES", 1000)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * 2000 + "\n")
    assert main(["simulate", str(big)]) == 2
    assert "big.yaml: larger than 1,000 bytes; not read" in capsys.readouterr().err
    assert main(["simulate", "/dev/zero"]) == 2
    assert "/dev/zero: larger than 1,000 bytes" in capsys.readouterr().err


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


# --------------------------------------------------------------------------- nesting

CARD_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: capacity-card}, {name: nodeorder}]
"""
DEEP = 5000


def _nested_list_text(depth: int) -> str:
    return "[" * depth + "]" * depth


def _nested_map_text(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _nested_value(depth: int, as_map: bool = False) -> Any:
    """A value nested `depth` levels, built in a loop (no recursion to build it)."""
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value} if as_map else [value]
    return value


@pytest.mark.parametrize("text", [_nested_list_text(DEEP), _nested_map_text(DEEP)],
                         ids=["brackets", "maps"])
def test_a_nested_card_quota_is_a_warning_and_the_session_runs(text: str):
    objects = [node("n1"), queue("q1", annotations={"volcano.sh/card.quota": text}),
               pod("p", queue="q1"), pod("elsewhere")]
    report = simulate(objects, CARD_CONF)
    assert report["binds"] == {"default/p": "n1", "default/elsewhere": "n1"}
    warnings = [e for e in report["events"] if e["object"] == "Queue/q1"]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
    assert "volcano.sh/card.quota" in warnings[0]["message"]
    assert "nested more than 100 levels deep" in warnings[0]["message"]
    assert "the queue gets no cards" in warnings[0]["message"]


def test_a_nested_card_request_refuses_that_job_only():
    bad = podgroup("bad", 1)
    bad["metadata"]["annotations"] = {"volcano.sh/card.request": _nested_map_text(DEEP)}
    objects = [node("n1"), bad, *gang("good", 2)]
    report = simulate(objects, CARD_CONF)
    assert sorted(report["binds"]) == ["default/good-0", "default/good-1"]
    messages = [e["message"] for e in report["events"] if e["object"] == "PodGroup/default/bad"]
    assert any("volcano.sh/card.request" in m and "nested more than" in m for m in messages)


def test_a_kind_the_scheduler_reads_under_an_api_version_it_does_not_is_a_warning():
    """A Pod of `core/v1`, or a kind or apiVersion that is no text, vanished from the
    report unsaid; now each is named, and so is a Queue of another group (not read). A
    kind the scheduler never reads (a Deployment) is passed over silently, as before."""
    typo = {**pod("typo"), "apiVersion": "core/v1"}
    listed = {**pod("listed"), "apiVersion": ["v1"]}
    kind = {**pod("kind"), "kind": ["Pod"]}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    theirs = {**queue("theirs"), "apiVersion": "example.com/v1"}
    report = simulate([node("n1"), typo, listed, kind, deployment, theirs, pod("good")],
                      CONF)
    assert report["binds"] == {"default/good": "n1"}
    warned = _warnings(report)
    assert "apiVersion 'core/v1': a Pod is read as v1 only" in warned["Pod/default/typo"]
    assert "apiVersion: expected a string, got ['v1']" in warned["Pod/default/listed"]
    assert "kind: expected a string, got ['Pod']" in warned["?/default/kind"]
    assert "Queue/theirs" in warned  # (a Queue is read as scheduling.volcano.sh/...)
    assert not any("Deployment" in name for name in warned)


def test_list_items_are_read_and_what_is_no_object_is_a_warning(tmp_path, capsys):
    # `kubectl get -o yaml` writes a List; one inside another is read too (it was
    # dropped whole), and an item or document that is no object is named, not dropped
    # unsaid.
    manifest = tmp_path / "cluster.yaml"
    report = _simulated(manifest, (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: n1},"
        " status: {allocatable: {cpu: '8', memory: 8Gi, pods: '10'}}}\n"
        "- not an object\n"
        "- {apiVersion: v1, kind: PodList, items: [{apiVersion: v1, kind: Pod,"
        " metadata: {name: inner}, spec: {schedulerName: vscheduler, containers: [{name: c}]}},"
        " 7]}\n"
        "- {apiVersion: v1, kind: Pod, metadata: {name: after},"
        " spec: {schedulerName: vscheduler, containers: [{name: c}]}}\n"
        "---\n- a list is no object either\n"), capsys)
    assert sorted(report["binds"]) == ["default/after", "default/inner"]
    warned = [e["message"] for e in report["events"] if e["reason"] == "BadManifest"]
    assert sorted(warned) == sorted(
        f"{manifest}#{where}: not a Kubernetes object, skipped"
        for where in ("0.items[1]", "0.items[2].items[1]", "1"))


def test_a_nested_manifest_document_is_skipped_and_the_others_load(tmp_path, capsys):
    manifest = tmp_path / "cluster.yaml"
    report = _simulated(manifest, (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '2', memory: 2Gi, pods: '10'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: deep}\nspec: "
        + _nested_list_text(500) + "\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {schedulerName: vscheduler, containers: [{name: c}]}\n"), capsys)
    assert report["binds"] == {"default/p": "n1"}
    [warning] = [e for e in report["events"] if e["reason"] == "BadManifest"]
    assert warning["object"] == f"File/{manifest}"
    assert warning["message"] == (f"{manifest}#1: line 9: nested more than 100 levels deep; "
                                  "document skipped")


def test_a_manifest_nested_thousands_deep_is_one_line_and_exit_2(tmp_path, capsys):
    # Past a thousand levels neither YAML reader goes on (see textinput.MAX_FLOW_LEVEL).
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\nspec: "
                        + _nested_list_text(DEEP) + "\n")
    assert main(["simulate", str(manifest)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"vscheduler: {manifest}: not valid YAML: line 5: nested "
                                 "more than 100 levels deep\n")


def test_aliases_cannot_nest_a_document_beyond_the_limit():
    # Each line nests the one before: 120 levels from 120 short lines, no deep brackets.
    lines = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 120)]
    text = "\n".join(lines) + "\n---\nkind: Node\n---\nloop: &l [*l]\n"
    documents = list(load_yaml_documents(text))
    assert isinstance(documents[0], TextError) and "through aliases" in str(documents[0])
    assert documents[1] == {"kind": "Node"}
    assert isinstance(documents[2], TextError)  # a list that contains itself


def test_aliases_cannot_expand_a_document_beyond_a_million_values():
    # 1,001 values, then a thousand aliases to them: a million and more once followed,
    # from a few kilobytes (readers of pod specs follow every one).
    values = "[" + ", ".join(["x"] * 1001) + "]"
    many = "[" + ", ".join(["*v"] * 1000) + "]"
    text = f"v: &v {values}\nmany: {many}\n---\nkind: Node\n---\nv: &v {values}\nfew: [*v, *v]\n"
    first, second, third = load_yaml_documents(text)
    assert isinstance(first, TextError)
    assert str(first) == "line 1: more than 1,000,000 values once its aliases are followed"
    assert second == {"kind": "Node"}
    assert third["few"] == [["x"] * 1001] * 2


def test_an_integer_python_cannot_convert_skips_its_document_only():
    text = "a: " + "9" * 5000 + "\n---\nb: 1\n"
    first, second = load_yaml_documents(text)
    assert isinstance(first, TextError) and "line 1" in str(first)
    assert second == {"b": 1}


def test_a_nested_value_in_an_object_from_the_api_is_a_bad_object():
    cache = Cache()
    broken = pod("p")
    broken["spec"]["priority"] = _nested_value(DEEP)
    with pytest.raises(BadObject, match=r"spec\.priority: expected an integer"):
        apply_event(cache, "Pod", "ADDED", broken)
    assert "default/p" not in cache.tasks


def test_the_longest_messages_are_kept_short():
    cache = Cache()
    broken = node("n1")
    broken["status"]["allocatable"]["cpu"] = "9" * 100_000
    with pytest.raises(BadObject) as err:
        apply_event(cache, "Node", "ADDED", broken)
    assert len(str(err.value)) < 300 and "too long to be a quantity" in str(err.value)


# --------------------------------------------------------------------------- properties

NESTED = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=20)


class Deep:
    """A value of random shape under `depth` levels of lists or maps, built on demand
    (Hypothesis would print a value thousands of levels deep with a recursive printer)."""

    def __init__(self, inner: Any, wrappers: list[bool], depth: int, as_map: bool) -> None:
        self.inner, self.wrappers, self.depth, self.as_map = inner, wrappers, depth, as_map

    def build(self) -> Any:
        value = self.inner
        for as_map in self.wrappers:
            value = {"k": value} if as_map else [value]
        return _wrap(value, self.depth, self.as_map)

    def __repr__(self) -> str:
        return (f"Deep({self.inner!r} in {len(self.wrappers)} + {self.depth} "
                f"{'maps' if self.as_map else 'lists'})")


DEEP_VALUES = st.builds(Deep, NESTED, st.lists(st.booleans(), max_size=20),
                        st.sampled_from([0, 1, 50, 99, 100, 101, 999, 1000, 3000]),
                        st.booleans())


def _wrap(value: Any, depth: int, as_map: bool) -> Any:
    for _ in range(depth):
        value = {"a": value} if as_map else [value]
    return value


def _dump_json(value: Any) -> str:
    """JSON text of `value` in a loop (json.dumps recurses, as json.loads does)."""
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            parts.append(item.text)
        elif isinstance(item, list):
            stack.append(_Raw("]"))
            for i, element in enumerate(reversed(item)):
                if i:
                    stack.append(_Raw(","))
                stack.append(element)
            parts.append("[")
        elif isinstance(item, dict):
            stack.append(_Raw("}"))
            for i, (key, element) in enumerate(reversed(list(item.items()))):
                if i:
                    stack.append(_Raw(","))
                stack.append(element)
                stack.append(_Raw(json.dumps(str(key)) + ":"))
            parts.append("{")
        else:
            parts.append(json.dumps(item))
    return "".join(parts)


class _Raw:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


QUANTITIES = st.one_of(
    st.just("1e999999999"), st.just("9" * 5000), st.just("-" + "9" * 40),
    st.just(10**400), st.just(1e308), st.just(float("inf")),
    st.text(alphabet="0123456789.eEkKmMGiI+-", max_size=80),
    st.integers(), st.floats())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deep=DEEP_VALUES, noise=st.binary(max_size=30))
def test_any_json_text_is_a_value_or_a_text_error(deep, noise):
    text = _dump_json(deep.build())
    for candidate in (text, text[: len(text) // 2], noise.decode("latin-1"),
                      text + noise.decode("latin-1")):
        with contextlib.suppress(TextError):
            load_json(candidate)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deep=DEEP_VALUES, noise=st.binary(max_size=30))
def test_any_yaml_text_is_documents_or_a_text_error(deep, noise):
    text = _dump_json(deep.build())  # JSON is YAML, in flow style
    for candidate in (text, "a:\n" + "  - " + text, noise.decode("latin-1"),
                      text + "\n---\n" + noise.decode("latin-1")):
        try:
            for document in load_yaml_documents(candidate):
                assert document is None or isinstance(document, TextError) or repr(document)
        except TextError:
            pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deep=DEEP_VALUES, data=st.data())
def test_a_card_annotation_of_any_shape_never_crashes(deep, data):
    value = deep.build()
    text = data.draw(st.sampled_from([_dump_json(value), _dump_json({"H100": value})]))
    with contextlib.suppress(CardError):
        parse_card_counts(text, "volcano.sh/card.quota")


@settings(max_examples=100, deadline=None)
@given(text=QUANTITIES)
def test_huge_quantities_are_quantity_errors(text):
    try:
        parsed = parse_quantity(text)
    except QuantityError:
        return
    assert abs(parsed) <= MAX_MAGNITUDE


WATCHED = [("Node", node("n1", labels={"zone": "a"})), ("Queue", queue("q1")),
           ("PodGroup", podgroup("g", 2)), ("PriorityClass", priority_class("high", 10)),
           ("Pod", pod("p", group="g", tolerations=[{"key": "t", "operator": "Exists"}],
                       node_selector={"zone": "a"}, host_ports=[80]))]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_daemon_path_never_crashes_on_nested_or_huge_values(data):
    cache = Cache()
    for kind, base in WATCHED:
        obj = copy.deepcopy(base)
        path = data.draw(st.sampled_from(_paths(obj)))
        junk = data.draw(st.one_of(DEEP_VALUES, QUANTITIES))
        _replace(obj, path, junk.build() if isinstance(junk, Deep) else junk)
        try:
            apply_event(cache, kind, data.draw(st.sampled_from(["ADDED", "MODIFIED"])), obj)
        except BadObject as err:
            assert len(str(err)) < 2000
    # What was read is scheduled as usual.
    Session(cache.snapshot(), conf(CARD_CONF)).run()
