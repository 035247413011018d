"""What a user sees with the real `kubectl` (v1.35) while the daemon schedules against the
API server stand-in: events in `kubectl describe`, the node in `kubectl get -o wide`, a
PodGroup's phase through its CRD's printer columns.

kubectl selects a `describe`'s events by the object's uid (a field selector): these
tests fail if the daemon's events do not name it, or if the stand-in serves what the real
server would not.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.apiserver import FakeApiServer, wait_for
from tests.builders import gang, node, pod
from tests.kube.conftest import describe_section


def test_describe_pod_shows_why_a_gang_waits_and_where_a_pod_went(server, daemon, kubectl):
    server.create_all([node("n1", cpu="2"), *gang("train", 3, cpu="1"),
                       pod("solo", cpu="1")])
    wait_for(lambda: any(e["reason"] == "FailedScheduling" for e in server.events()))
    wait_for(lambda: any(e["reason"] == "Scheduled" for e in server.events()))
    waiting = server.get("Pod", "default", "train-2")["status"]["conditions"][0]["message"]

    def events(name: str) -> str:
        return describe_section(kubectl("describe", "pod", name), "Events:")

    pending = wait_for(lambda: "FailedScheduling" in events("train-2") and events("train-2"))
    assert "Warning  FailedScheduling" in pending and "vscheduler" in pending
    assert waiting.split(":")[0] in pending  # the reason text, as the condition has it
    described = kubectl("describe", "pod", "train-2")
    assert "PodScheduled   False" in described
    bound = kubectl("describe", "pod", "solo")
    # (`node/hostIP`: the stand-in has no kubelet to report the host's IP)
    assert [line.split()[1] for line in bound.splitlines() if line.startswith("Node:")] \
        == ["n1/"]
    assert "Normal  Scheduled" in describe_section(bound, "Events:")
    assert "Successfully assigned default/solo to n1" in bound

    wide = kubectl("get", "pods", "-o", "wide").splitlines()
    assert wide[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP",
                                   "NODE"]
    rows = {line.split()[0]: line.split() for line in wide[1:]}
    assert rows["solo"][6] == "n1" and rows["train-0"][6] == "<none>"


def test_describe_podgroup_shows_its_condition_and_events(server, daemon, kubectl):
    server.create_all([node("n1", cpu="2"), *gang("train", 3, cpu="1")])
    wait_for(lambda: any(c.get("type") == "Unschedulable" for c in
                         (server.get("PodGroup", "default", "train").get("status") or {})
                         .get("conditions", [])))
    described = wait_for(lambda: (text := kubectl("describe", "podgroup", "train"))
                         and "Unschedulable" in describe_section(text, "Events:") and text)
    status = describe_section(described, "Status:")
    assert "Type:                  Unschedulable" in status
    assert "Reason:                NotEnoughResources" in status
    assert "Warning  Unschedulable" in describe_section(described, "Events:")
    assert "tasks in gang unschedulable" in describe_section(described, "Events:")


def test_get_podgroup_shows_the_phase_reach_running_through_volcanos_columns(
        server, daemon, kubectl):
    # The stand-in serves the chart's PodGroup CRD, which is Volcano's: no status
    # subresource, so the daemon writes status on the object itself.
    served = json.loads(kubectl("get", "--raw", "/apis/scheduling.volcano.sh/v1beta1"))
    names = {r["name"] for r in served["resources"]}
    assert {"podgroups", "queues", "queues/status"} <= names
    assert "podgroups/status" not in names
    server.create_all([node("n1", cpu="4"), *gang("g", 2, cpu="1")])
    wait_for(lambda: sum(1 for b in server.bindings() if b.code == 201) == 2)
    for i in range(2):  # the kubelet reports the pods running
        server.patch("Pod", "default", f"g-{i}", {"status": {"phase": "Running"}})

    def row() -> list[str]:
        lines = kubectl("get", "podgroup", "g").splitlines()
        assert lines[0].split() == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE"]
        return lines[1].split()

    got = wait_for(lambda: row()[1] == "Running" and row())
    assert got[:4] == ["g", "Running", "2", "2"]
    patches = server.requests("PATCH", r"/podgroups/g")
    assert patches and not [r for r in patches if r.path.endswith("/status")]


def test_describe_queue_shows_a_mended_tree_and_get_shows_the_usage_history(
        server: FakeApiServer, kubectl, tmp_path: Path):
    """A queue naming a parent that does not exist: `kubectl describe queue` shows the
    Warning that says what was assumed; the usage history fairshare keeps is on the
    Queue for `kubectl get -o json` (and for the next leader) to read."""
    from tests.builders import queue
    from tests.kube.conftest import start_daemon
    from vscheduler.plugins.fairshare import HISTORY

    conf = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: fairshare, arguments: {halfLife: 1h}}, {name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: capacity, enableHierarchy: true}, {name: nodeorder}]
"""
    server.create_all([node("n1", cpu="2"), queue("orphan", parent="ghost"),
                       pod("p", cpu="1", queue="orphan")])
    _, stop = start_daemon(server, tmp_path, conf)
    try:
        described = wait_for(lambda: (text := kubectl("describe", "queue", "orphan"))
                             and "InvalidQueueTree" in text and text, timeout=10)
        events = describe_section(described, "Events:")
        assert "Warning  InvalidQueueTree" in events
        assert "parent queue ghost does not exist" in events
        written = wait_for(lambda: json.loads(kubectl("get", "queue", "orphan", "-o", "json"))
                           ["metadata"].get("annotations", {}).get(HISTORY), timeout=10)
        assert set(json.loads(written)) == {"share", "held", "at"}
    finally:
        stop()
