"""The simulated world between sessions, and sessions that have nothing to decide."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from tests.builders import conf, gang, node, pod, podgroup, queue, simulate
from vscheduler.cache import Cache
from vscheduler.cli import main
from vscheduler.kube.apply import KINDS, apply_event
from vscheduler.objects import parse_pod
from vscheduler.simulate import Simulation

# allocate only: a pod that does not fit waits (backfill would place a job's pods even
# when its gang is short)
CONF_NO_BACKFILL = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def _simulation(objects: list[dict]) -> Simulation:
    simulation = Simulation(conf())
    simulation.load([(f"t#{i}", o) for i, o in enumerate(objects)])
    return simulation


OBJECTS = [node("n1", cpu="4"), *gang("g", 2, cpu="1"), pod("solo", cpu="1")]


def test_bound_pods_start_running_and_their_podgroup_follows():
    simulation = _simulation(OBJECTS)
    simulation.step()
    assert simulation.cache.tasks["default/g-0"].node_name == "n1"
    assert simulation.report.as_dict()["podGroups"]["default/g"]["phase"] == "Inqueue"
    simulation.step()
    assert simulation.report.as_dict()["podGroups"]["default/g"]["phase"] == "Running"


def test_a_settled_cluster_with_nothing_pending_is_not_scheduled_again():
    simulation = _simulation(OBJECTS)
    simulation.step()
    simulation.step()  # pods started running: statuses change, a full session
    assert "allocate" in simulation.timings
    simulation.step()
    assert set(simulation.timings) == {"idle"}
    # A new pod is work again.
    simulation.cache.add_pod(parse_pod(pod("late", cpu="1"), 99.0))
    simulation.step()
    assert "allocate" in simulation.timings
    assert simulation.report.binds["default/late"] == "n1"
    # Sessions are numbered as they run (the daemon logs each), idle cycles aside.
    assert simulation.scheduler.sessions == 3


def test_skipping_quiet_sessions_changes_no_decision(monkeypatch: pytest.MonkeyPatch):
    simulation = _simulation(OBJECTS)
    simulation.run(5)
    skipped = json.dumps(simulation.report.as_dict())
    monkeypatch.setattr(Cache, "has_work", lambda self: True)
    simulation = _simulation(OBJECTS)
    simulation.run(5)
    assert json.dumps(simulation.report.as_dict()) == skipped


def test_pending_work_keeps_sessions_running():
    simulation = _simulation([node("n1", cpu="1"), pod("too-big", cpu="2")])
    for _ in range(3):
        simulation.step()
        assert "allocate" in simulation.timings
    assert simulation.report.as_dict()["pending"]["default/too-big"]


# --------------------------------------------------------------------------- messages

NODE_YAML = ("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
             "status: {allocatable: {cpu: '2', memory: 2Gi, pods: '10'}}\n")
POD_YAML = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
            "spec: {schedulerName: vscheduler, containers: [{name: c}]}\n")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_dash_reads_the_manifests_from_stdin(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]):
    stdin = io.TextIOWrapper(io.BytesIO((NODE_YAML + "---\n" + POD_YAML).encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = _run(capsys, "-", "--output", "json")
    assert code == 0 and err == ""
    assert json.loads(out)["binds"] == {"default/p": "n1"}


def test_a_file_with_nothing_to_read_is_said_on_stderr(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(NODE_YAML + "---\n" + POD_YAML)
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n---\n")
    apps = tmp_path / "apps.yaml"
    apps.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n"
                    "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n"
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: e}\n---\n"
                    "apiVersion: example.com/v1\nkind: Queue\nmetadata: {name: q}\n")
    code, out, err = _run(capsys, str(cluster), str(empty), str(apps))
    assert code == 0
    assert "default/p  n1" in out
    assert err.splitlines() == [
        f"vscheduler: {empty}: no Kubernetes objects",
        f"vscheduler: {apps}: ignored 4 objects of kinds Deployment, "
        "Queue ('example.com/v1'), Service "
        "(simulate reads Node, Pod, PodGroup, Queue, PriorityClass, PodDisruptionBudget, "
        "HyperNode, Namespace)",
    ]


def test_a_missing_file_is_one_line_and_exit_2(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(NODE_YAML)
    code, out, err = _run(capsys, str(cluster), str(tmp_path / "absent.yaml"))
    assert code == 2 and out == ""
    assert err == f"vscheduler: cannot read {tmp_path / 'absent.yaml'}: " \
                  "No such file or directory\n"


def test_a_skipped_object_is_named_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(NODE_YAML + "---\napiVersion: v1\nkind: Pod\n"
                       "metadata: {name: bad, namespace: team}\nspec: oops\n")
    _, out, _ = _run(capsys, str(cluster), "--output", "json")
    [event] = [e for e in json.loads(out)["events"] if e["reason"] == "BadObject"]
    assert event["object"] == "Pod/team/bad"
    assert event["message"] == f"{cluster}#1: skipped: spec: expected a map, got str"
    _, text, _ = _run(capsys, str(cluster))
    assert f"  Pod/team/bad: {cluster}#1: skipped: spec: expected a map, got str" in text
    assert text.count("bad") == 1


def test_an_object_given_twice_is_read_as_last_given_with_a_warning():
    """The same pod twice (as two files applied one after the other would give it): the
    later one is read, and the report says the first was replaced."""
    objects = [node("n1", cpu="4"), pod("p", cpu="8"), pod("p", cpu="1"),
               queue("q"), queue("q", weight=3)]
    report = simulate(objects)
    assert report["binds"] == {"default/p": "n1"}
    repeats = [(e["object"], e["message"]) for e in report["events"]
               if e["reason"] == "DuplicateObject"]
    assert repeats == [("Queue/q", "test#4: given again (first at test#3); the later one "
                        "is read"),
                       ("Pod/default/p", "test#2: given again (first at test#1); the later "
                        "one is read")]
    assert all(e["type"] == "Warning" for e in report["events"]
               if e["reason"] == "DuplicateObject")
    # A pod of the same name in another namespace is another pod.
    report = simulate([node("n1", cpu="4"), pod("p"), pod("p", namespace="other")])
    assert not [e for e in report["events"] if e["reason"] == "DuplicateObject"]
    assert len(report["binds"]) == 2


def test_simulate_and_the_daemon_read_the_same_objects():
    """One ingest path: a Queue of another API group is not Volcano's in either."""
    foreign = {**queue("q-foreign"), "apiVersion": "example.com/v1"}
    objects = [node("n1"), queue("q1"), foreign, podgroup("g", 1, queue="q1"),
               pod("g-0", group="g"), {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "metadata": {"name": "d"}}]
    simulated = _simulation(objects).cache
    watched = Cache()
    for obj in objects:
        kind = obj["kind"]
        if kind in KINDS:
            apply_event(watched, kind, "ADDED", obj)
    assert sorted(simulated.queues) == sorted(watched.queues)
    assert "q1" in watched.queues and "q-foreign" not in watched.queues
    assert sorted(simulated.tasks) == sorted(watched.tasks) == ["default/g-0"]
    assert sorted(simulated.nodes) == sorted(watched.nodes) == ["n1"]


def test_without_nodes_the_reason_is_that_there_are_none():
    report = simulate([*gang("g", 2), pod("solo"), queue("q1")], None)
    assert report["pending"]
    for reasons in report["pending"].values():
        assert reasons == ["0/0 nodes are available: the cluster has no nodes."]
    assert not any("overused" in e["message"] for e in report["events"])


def test_no_hint_for_a_node_this_session_filled():
    # The gang is tried first and does not fit whole; the solo pod then takes n1.
    report = simulate([node("n1", cpu="2"), *gang("a", 3, cpu="1"), pod("b", cpu="2")])
    assert report["binds"] == {"default/b": "n1"}
    for key in ("default/a-0", "default/a-1"):
        assert not any("can possibly be assigned" in r for r in report["pending"][key])


def test_the_hint_stays_for_a_node_that_still_has_room():
    report = simulate([node("n1", cpu="2"), *gang("a", 3, cpu="1"), pod("b", cpu="1")],
                      CONF_NO_BACKFILL)
    assert "default/a-0" in report["pending"]
    assert report["pending"]["default/a-0"][0] == (
        "Pod default/a-0 can possibly be assigned to n1, once minAvailable is satisfied")


def test_the_clock_moves_between_sessions_when_no_file_gives_a_time():
    """No creationTimestamp and no --now: the objects are taken as created a second
    apart in the order given, the clock starts at the last, and it moves a session
    interval each session all the same (fairshare's history takes its time)."""
    history_conf = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: fairshare, arguments: {halfLife: 1h}}, {name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""
    simulation = Simulation(conf(history_conf), session_seconds=600)
    simulation.load([(f"t#{i}", o) for i, o in enumerate(
        [node("n1", cpu="4"), queue("q"), pod("p", cpu="2", queue="q")])])
    simulation.run(6)
    history = json.loads(simulation.report.as_dict()["queues"]["q"]["annotations"][
        "elastic.gpu/usage-history"])
    assert history["at"] == "1970-01-01T00:50:02Z" and history["share"] > 0
