"""Inter-pod rules through the daemon, against the API server stand-in, seen with the
real `kubectl` (v1.35): replicas kept apart by required anti-affinity are bound one per
node and the one left over says why in `kubectl describe pod`; a pod drawn by a
`namespaceSelector` to pods of namespaces labelled for it waits until a namespace gets
the label (`kubectl label namespace`), which the daemon sees through its Namespace
watch, and is then bound beside them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.apiserver import FakeApiServer, wait_for
from tests.builders import namespace, node, pod
from tests.kube.conftest import describe_section, start_daemon

HOSTNAME = "kubernetes.io/hostname"


def host(name: str, zone: str = "z1") -> dict[str, Any]:
    return node(name, cpu="4", labels={HOSTNAME: name, "topology.kubernetes.io/zone": zone})


def replica(name: str) -> dict[str, Any]:
    """A web replica that wants no other web replica on its node."""
    return pod(name, cpu="1", labels={"app": "web"}, affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOSTNAME}]}})


def bound(server: FakeApiServer, prefix: str) -> Counter:
    return Counter(p["spec"]["nodeName"] for p in server.objects("Pod")
                   if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName"))


def test_replicas_with_anti_affinity_go_one_per_node_and_the_rest_says_why(
        server, kubectl, tmp_path):
    server.create_all([host("n0"), host("n1"), *(replica(f"web-{i}") for i in range(3))])
    _, stop = start_daemon(server, tmp_path)
    try:
        placed = wait_for(lambda: sum(bound(server, "web-").values()) == 2
                          and bound(server, "web-"), timeout=10)
        assert placed == Counter({"n0": 1, "n1": 1})
        described = wait_for(lambda: (text := kubectl("describe", "pod", "web-2"))
                             and "FailedScheduling" in text and text, timeout=10)
        events = describe_section(described, "Events:")
        assert "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules." \
            in " ".join(events.split())
        assert not server.get("Pod", "default", "web-2")["spec"].get("nodeName")
    finally:
        stop()


def test_a_namespace_labelled_later_draws_a_pod_by_namespace_selector(
        server, kubectl, tmp_path):
    """`cache` wants to be on the node (hostname) of an `app: db` pod of a namespace
    labelled `team: data`. The db pod runs on n1 in namespace `store`, not yet labelled:
    no pod is picked, and as `cache` does not pick itself either, it waits. Once
    `store` is labelled, it is bound on n1."""
    server.create_all([
        namespace("store"), namespace("apps"), host("n0"), host("n1"),
        pod("db", namespace="store", cpu="1", labels={"app": "db"}, node_name="n1",
            scheduler="default-scheduler"),
        pod("cache", namespace="apps", cpu="1", labels={"app": "cache"}, affinity={
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app": "db"}},
                "namespaceSelector": {"matchLabels": {"team": "data"}},
                "topologyKey": HOSTNAME}]}})])
    _, stop = start_daemon(server, tmp_path)
    try:
        wait_for(lambda: any(e["reason"] == "FailedScheduling"
                             and e["involvedObject"]["name"] == "cache"
                             for e in server.events()), timeout=10)
        assert not server.get("Pod", "apps", "cache")["spec"].get("nodeName")
        kubectl("label", "namespace", "store", "team=data")
        assert wait_for(lambda: server.get("Pod", "apps", "cache")["spec"].get("nodeName"),
                        timeout=10) == "n1"
    finally:
        stop()
