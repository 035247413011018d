"""The daemon reads Volcano's HyperNodes from the API server stand-in (serving the chart's
HyperNode CRD), and a user sees them with the real `kubectl` (v1.35): a gang whose
PodGroup asks for a hard network topology is bound within one HyperNode of its tier;
HyperNodes changed or deleted later are seen; `kubectl get hypernodes` shows the CRD's
columns; a tree the scheduler cannot use is a Warning on the HyperNode that `kubectl
describe` shows. Where the CRD is not served, the daemon schedules as before.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections import Counter
from typing import Any

from tests.apiserver import CHART_CRDS, FakeApiServer, wait_for
from tests.builders import gang, hypernode, node, pod
from tests.kube.conftest import describe_section, start_daemon

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder},
            {name: network-topology-aware}]
"""
HARD_TIER_1 = {"mode": "hard", "highestTierAllowed": 1}


def topology_gang(name: str, size: int, cpu: str = "1",
                  topology: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A gang (PodGroup and pods) whose PodGroup has `spec.networkTopology`."""
    objs = gang(name, size, cpu=cpu)
    objs[0]["spec"]["networkTopology"] = dict(topology or HARD_TIER_1)
    return objs


def bound_nodes(server: FakeApiServer, prefix: str) -> Counter:
    """Pods bound per node, of the pods named `<prefix>-<i>`."""
    return Counter(pod["spec"]["nodeName"] for pod in server.objects("Pod")
                   if pod["metadata"]["name"].startswith(f"{prefix}-")
                   and pod["spec"].get("nodeName"))


def waiting_for(server: FakeApiServer, name: str) -> bool:
    """Whether the PodGroup has said why it waits (its Unschedulable condition)."""
    status = server.get("PodGroup", "default", name).get("status") or {}
    return any(c.get("type") == "Unschedulable" for c in status.get("conditions") or [])


def test_a_hard_gang_is_bound_within_one_tier_1_hypernode(server, tmp_path):
    """Two racks of two 2-CPU nodes; n0 is full of another scheduler's pod. A gang of 3
    one-CPU pods limited to tier 1 fits only in rack-b (4 free CPUs; rack-a has 2), and
    is bound there whole, though n1 has room for two of its pods."""
    server.create_all([
        *(node(f"n{i}", cpu="2") for i in range(4)),
        pod("theirs", cpu="2", scheduler="default-scheduler", node_name="n0"),
        hypernode("rack-a", 1, nodes=["n0", "n1"], tier_name="rack"),
        hypernode("rack-b", 1, tier_name="rack", members=[
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^n[23]$"}}}]),
        hypernode("block", 2, children=["rack-a", "rack-b"], tier_name="block"),
        *topology_gang("train", 3)])
    _, stop = start_daemon(server, tmp_path, CONF)
    try:
        placed = wait_for(lambda: sum(bound_nodes(server, "train").values()) == 3
                          and bound_nodes(server, "train"), timeout=10)
        assert set(placed) <= {"n2", "n3"}
    finally:
        stop()


def test_hypernodes_changed_or_deleted_later_are_seen(server, tmp_path):
    """A gang that fits no tier-1 HyperNode waits; its HyperNode grows (a member is added)
    and the gang is bound within it. Then a second parent claims a rack: the tree cannot
    be used and the next gang waits; the second parent is deleted and it is bound."""
    server.create_all([*(node(f"n{i}", cpu="2") for i in range(4)),
                       hypernode("rack-a", 1, nodes=["n0"]),
                       hypernode("rack-b", 1, nodes=["n1"]),
                       *topology_gang("wide", 4)])
    _, stop = start_daemon(server, tmp_path, CONF)
    try:
        wait_for(lambda: waiting_for(server, "wide"), timeout=10)
        assert not bound_nodes(server, "wide")
        server.patch("HyperNode", None, "rack-a", {"spec": {"members": [
            {"type": "Node", "selector": {"exactMatch": {"name": "n0"}}},
            {"type": "Node", "selector": {"exactMatch": {"name": "n2"}}}]}})
        placed = wait_for(lambda: sum(bound_nodes(server, "wide").values()) == 4
                          and bound_nodes(server, "wide"), timeout=10)
        assert placed == Counter({"n0": 2, "n2": 2})

        # rack-b (n1, 2 free CPUs) under two parents: nothing is placed by topology.
        server.create_all([hypernode("block-1", 2, children=["rack-b"]),
                           hypernode("block-2", 2, children=["rack-b"])])
        wait_for(lambda: any(e["reason"] == "InvalidTopology" for e in server.events()),
                 timeout=10)
        server.create_all(topology_gang("late", 2))
        wait_for(lambda: waiting_for(server, "late"), timeout=10)
        assert not bound_nodes(server, "late")
        server.delete("HyperNode", None, "block-2")
        placed = wait_for(lambda: sum(bound_nodes(server, "late").values()) == 2
                          and bound_nodes(server, "late"), timeout=10)
        assert placed == Counter({"n1": 2})
    finally:
        stop()


def test_kubectl_get_hypernodes_shows_the_crds_columns(server, kubectl, tmp_path):
    server.create_all([node("n0"), node("n1"),
                       hypernode("rack-a", 1, nodes=["n0", "n1"], tier_name="rack"),
                       hypernode("block", 2, children=["rack-a"])])
    server.patch("HyperNode", None, "rack-a", {"status": {"nodeCount": 2}})
    lines = kubectl("get", "hypernodes").splitlines()
    assert lines[0].split() == ["NAME", "TIER", "TIERNAME", "NODECOUNT", "AGE"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["rack-a"][1:4] == ["1", "rack", "2"]
    assert rows["block"][1] == "2"  # (no tier name, no node count: empty cells)
    assert kubectl("get", "hn", "-o", "name").split() == ["hypernode.topology.volcano.sh/block",
                                                         "hypernode.topology.volcano.sh/rack-a"]
    # The Table's Tier cell is text, as the real server gives a string column's value.
    request = urllib.request.Request(
        f"{server.url}/apis/topology.volcano.sh/v1alpha1/hypernodes/rack-a",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    with urllib.request.urlopen(request, timeout=5) as answer:
        [row] = json.load(answer)["rows"]
    assert row["cells"][:4] == ["rack-a", "1", "rack", 2]


def test_describe_hypernode_shows_a_second_parent_as_invalid_topology(
        server, kubectl, tmp_path):
    server.create_all([node("n0"), node("n1"),
                       hypernode("rack-a", 1, nodes=["n0", "n1"]),
                       hypernode("block-1", 2, children=["rack-a"]),
                       hypernode("block-2", 2, children=["rack-a"]),
                       *topology_gang("train", 2)])
    _, stop = start_daemon(server, tmp_path, CONF)
    try:
        described = wait_for(lambda: (text := kubectl("describe", "hypernode", "rack-a"))
                             and "InvalidTopology" in text and text, timeout=10)
        events = describe_section(described, "Events:")
        assert "Warning  InvalidTopology" in events
        assert "rack-a already has a parent block-1, and block-2 claims it too" in events
        assert re.search(r"^  Tier: +1$", describe_section(described, "Spec:"), re.MULTILINE)
        # The gang waits for a tree it can use, and says why.
        wait_for(lambda: waiting_for(server, "train"), timeout=10)
        assert not bound_nodes(server, "train")
    finally:
        stop()


def test_without_the_hypernode_crd_the_daemon_schedules_as_before(tmp_path):
    """A cluster without Volcano's topology CRD (the chart's other CRDs only): HyperNodes
    are not watched, and a gang that asks for a network topology is placed as any gang."""
    others = [path for path in CHART_CRDS if path.name != "hypernodes.yaml"]
    assert len(others) == len(CHART_CRDS) - 1
    with FakeApiServer(bookmark_interval=0.1, crds=others) as server:
        server.create_all([node("n0", cpu="2"), node("n1", cpu="2"),
                           *topology_gang("train", 3), pod("solo")])
        daemon, stop = start_daemon(server, tmp_path, CONF)
        try:
            assert "HyperNode" not in {r.kind for r in daemon.reflectors}
            wait_for(lambda: sum(bound_nodes(server, "train").values()) == 3, timeout=10)
            wait_for(lambda: server.get("Pod", "default", "solo")["spec"].get("nodeName"))
            assert not server.requests("GET", r"/apis/topology\.volcano\.sh/v1alpha1/")
        finally:
            stop()


def test_sub_groups_are_bound_one_rack_each(server, kubectl, tmp_path):
    """A PodGroup with a subGroupPolicy, stored through the chart's CRD, keeps its policy
    (the real kubectl reads it back); its two replicas (two 1-CPU pods each, told apart
    by a pod label) are bound one per rack. Another scheduler's pods hold a CPU on n0 and
    on n2, so each rack has room for three pods: without the limit a replica would be
    split over the racks."""
    server.create_all([
        *(node(f"n{i}", cpu="2") for i in range(4)),
        *(pod(f"theirs-{n}", cpu="1", scheduler="default-scheduler", node_name=n)
          for n in ("n0", "n2")),
        hypernode("rack-a", 1, nodes=["n0", "n1"]),
        hypernode("rack-b", 1, nodes=["n2", "n3"]),
        hypernode("block", 2, children=["rack-a", "rack-b"]),
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
         "metadata": {"name": "train", "namespace": "default"},
         "spec": {"minMember": 4, "subGroupPolicy": [{
             "name": "replica", "matchLabelKeys": ["replica"], "subGroupSize": 2,
             "minSubGroups": 2,
             "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]}}])
    kept = json.loads(kubectl("get", "podgroup", "train", "-o", "json"))
    [policy] = kept["spec"]["subGroupPolicy"]
    assert policy["matchLabelKeys"] == ["replica"]
    assert policy["networkTopology"]["highestTierAllowed"] == 1
    server.create_all([pod(f"train-{r}-{i}", cpu="1", group="train",
                           labels={"replica": str(r)}) for r in range(2) for i in range(2)])
    _, stop = start_daemon(server, tmp_path, CONF)
    try:
        wait_for(lambda: sum(bound_nodes(server, "train").values()) == 4, timeout=10)
        racks: dict[str, set[str]] = {}
        for obj in server.objects("Pod"):
            name = obj["metadata"]["name"]
            if name.startswith("train-"):
                racks.setdefault(name.split("-")[1], set()).add(
                    "rack-a" if obj["spec"]["nodeName"] in ("n0", "n1") else "rack-b")
        assert sorted(map(len, racks.values())) == [1, 1], racks
    finally:
        stop()
