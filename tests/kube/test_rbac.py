"""The chart's RBAC grants every request the daemon makes: the stand-in has no RBAC, so
the requests of real runs (placement, reclaim, fairshare's history, leader election,
events) are read from its log and each is checked against the rendered roles, as the
API server's authorizer would check it."""

from __future__ import annotations

import re
from pathlib import Path

import helm_python as helm
import yaml
from kubernetes import client

from tests.apiserver import FakeApiServer, wait_for
from tests.builders import node, pod, queue
from tests.kube.conftest import start_daemon
from vscheduler.kube.leader import LeaderElector

CHART = Path(__file__).resolve().parents[2] / "charts" / "vscheduler"
NAMESPACE = "volcano-system"

# Reclaim (evictions, nominations, conditions), fairshare (its history, an annotation
# on the Queue), gang (PodGroup status) and the rest of the default plugins.
CONF = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - {name: fairshare, arguments: {halfLife: 1h}}
  - {name: priority}
  - {name: gang, enableReclaimable: false}
  - {name: conformance}
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def _rendered_grants(values: dict) -> set[tuple[str, str, str, str]]:
    """(namespace, API group, resource, verb) the chart's roles grant; "" for a
    ClusterRole's (any namespace)."""
    with helm.Chart.load(CHART) as chart:
        texts = chart.render(values, name="vscheduler", namespace=NAMESPACE)
    granted = set()
    for path, text in texts.items():
        if not path.endswith(".yaml"):
            continue
        for obj in yaml.safe_load_all(text):
            if not obj or obj["kind"] not in ("ClusterRole", "Role"):
                continue
            where = obj["metadata"].get("namespace", "") if obj["kind"] == "Role" else ""
            for rule in obj["rules"]:
                granted.update((where, group, resource, verb)
                               for group in rule["apiGroups"]
                               for resource in rule["resources"] for verb in rule["verbs"])
    return granted


_PATH = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                   r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<resource>[^/]+)"
                   r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$")
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _authorized(method: str, path: str, watch: bool) -> tuple[str, str, str, str] | None:
    """What the authorizer would check for a request: (namespace, group, resource,
    verb); None for discovery, which every authenticated client may read."""
    match = _PATH.match(path)
    if match is None or (match["core"] is None and match["group"] is None):
        return None
    resource = match["resource"]
    if match["sub"]:
        resource = f"{resource}/{match['sub']}"
    if method == "GET":
        verb = "watch" if watch else ("get" if match["name"] else "list")
    else:
        verb = _VERBS[method]
    return match["namespace"] or "", match["group"] or "", resource, verb


def test_every_request_of_the_daemon_is_granted_by_the_chart(tmp_path: Path):
    with FakeApiServer(bookmark_interval=0.1) as server:
        api = client.ApiClient(client.Configuration(host=server.url))
        elector = LeaderElector(api, NAMESPACE, "vscheduler", "a", lease_duration=1.0,
                                renew_deadline=0.6, retry_period=0.1)
        _, stop = start_daemon(server, tmp_path, CONF, elector=elector)
        try:
            server.create_all([node("n1", cpu="4"), queue("a"), queue("b"),
                               *(pod(f"a-{i}", cpu="1", queue="a", node_name="n1")
                                 for i in range(4))])
            server.create_all([pod("b-0", cpu="1", queue="b"), pod("big", cpu="64")])
            victim = wait_for(lambda: [p for p in server.objects("Pod")
                                       if p["metadata"].get("deletionTimestamp")])[0]
            server.finish_deletion("default", victim["metadata"]["name"])
            wait_for(lambda: any(b.pod == "b-0" and b.code == 201
                                 for b in server.bindings()), timeout=10)
            wait_for(lambda: server.requests("PATCH", r"/queues/[ab]$"))  # (the history)
        finally:
            stop()
            api.close()
        requests = server.requests()
    granted = _rendered_grants({"leaderElect": True})
    asked = {_authorized(r.method, r.path, r.watch) for r in requests} - {None}
    assert ("", "scheduling.volcano.sh", "queues", "patch") in asked
    refused = sorted(a for a in asked
                     if (a[0], *a[1:]) not in granted and ("", *a[1:]) not in granted)
    assert refused == []
