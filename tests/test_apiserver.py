"""The test API server (tests/apiserver.py) against the official `kubernetes` client, used
the way the daemon uses it: typed APIs, `_preload_content=False` lists, `Watch().stream`
with resourceVersions and bookmarks, the Binding subresource, status writes, custom
objects, Lease optimistic concurrency, Events, and a server that goes away for a while.

Every watch here passes `timeout_seconds` (or is stopped) and every retry loop has a
deadline, so nothing can hang; each server stops itself when its test ends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from tests.apiserver import FakeApiServer, merge_patch, strategic_merge_patch, wait_for
from tests.builders import node, pod, podgroup, priority_class, queue

NS = "team-a"
VOLCANO = ("scheduling.volcano.sh", "v1beta1")


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval=0.1) as srv:
        yield srv
        assert srv.errors() == []


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[client.ApiClient]:
    api_client = client.ApiClient(client.Configuration(host=server.url))
    yield api_client
    api_client.close()


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def _json(resp: Any) -> Any:
    return json.loads(resp.data)


def _binding(name: str, node_name: str) -> client.V1Binding:
    return client.V1Binding(metadata=client.V1ObjectMeta(name=name),
                            target=client.V1ObjectReference(api_version="v1", kind="Node",
                                                            name=node_name))


def _names(body: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in body["items"]]


def _watch(func: Callable[..., Any], *args: Any, count: int, timeout: int = 5,
           **kwargs: Any) -> list[dict[str, Any]]:
    """The first `count` events of a watch (fewer if it ends first: at `timeout`)."""
    events: list[dict[str, Any]] = []
    w = watch.Watch()
    for event in w.stream(func, *args, timeout_seconds=timeout, **kwargs):
        events.append(event)
        if len(events) >= count:
            w.stop()
    return events


def _later(seconds: float, action: Callable[[], Any]) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
    return timer


# -- lists -----------------------------------------------------------------------------------


def test_list_pods_unparsed_gives_items_and_resource_version(
        server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.create_all([pod("a", namespace=NS), pod("b", namespace="other", node_name="n1")])
    resp = core.list_pod_for_all_namespaces(_preload_content=False)
    assert resp.status == 200
    body = _json(resp)
    assert (body["kind"], body["apiVersion"]) == ("PodList", "v1")
    assert body["metadata"]["resourceVersion"] == server.resource_version
    assert _names(body) == ["b", "a"]  # in key order: namespace, then name
    for item in body["items"]:
        assert "kind" not in item and "apiVersion" not in item  # as the real server
        assert item["metadata"]["uid"] and item["metadata"]["creationTimestamp"]
        assert int(item["metadata"]["resourceVersion"]) <= int(server.resource_version)
    pending = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=",
                                               _preload_content=False)
    assert _names(_json(pending)) == ["a"]
    mine = core.list_pod_for_all_namespaces(
        field_selector="spec.schedulerName=vscheduler,status.phase!=Failed",
        _preload_content=False)
    assert _names(_json(mine)) == ["b", "a"]
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["a"]


def test_list_pages_with_limit_and_continue(server: FakeApiServer,
                                            core: client.CoreV1Api) -> None:
    server.create_all([node(f"n{i}", labels={"pool": "gpu" if i % 2 else "cpu"})
                       for i in range(5)])
    first = core.list_node(limit=2)
    assert [n.metadata.name for n in first.items] == ["n0", "n1"]
    assert first.metadata.remaining_item_count == 3
    rest = core.list_node(limit=10, _continue=first.metadata._continue)
    assert [n.metadata.name for n in rest.items] == ["n2", "n3", "n4"]
    assert rest.metadata._continue is None
    gpu = core.list_node(label_selector="pool in (gpu),!tainted")
    assert [n.metadata.name for n in gpu.items] == ["n1", "n3"]


# -- watches ---------------------------------------------------------------------------------


def test_watch_from_a_resource_version_sees_changes_in_order(
        server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.create(node("n1"))
    listed = _json(core.list_pod_for_all_namespaces(_preload_content=False))
    rv = listed["metadata"]["resourceVersion"]
    server.create(pod("p", namespace=NS))
    core.create_namespaced_pod_binding("p", NS, _binding("p", "n1"), _preload_content=False)
    core.delete_namespaced_pod("p", NS, grace_period_seconds=0)
    timer = _later(0.2, lambda: server.create(pod("q", namespace=NS)))  # while watching
    w = watch.Watch()
    seen = []
    for event in w.stream(core.list_pod_for_all_namespaces, resource_version=rv,
                          timeout_seconds=5):
        obj = event["object"]  # a V1Pod
        seen.append((event["type"], obj.metadata.name, obj.spec.node_name,
                     int(obj.metadata.resource_version)))
        if len(seen) == 4:
            w.stop()
    timer.join()
    assert [s[:3] for s in seen] == [("ADDED", "p", None), ("MODIFIED", "p", "n1"),
                                     ("DELETED", "p", "n1"), ("ADDED", "q", None)]
    versions = [s[3] for s in seen]
    assert versions == sorted(versions) and versions[0] > int(rv)
    assert w.resource_version == server.resource_version


def test_watch_without_resource_version_starts_with_what_exists(
        server: FakeApiServer, api: client.ApiClient) -> None:
    scheduling = client.SchedulingV1Api(api)
    server.create(priority_class("high", 1000))
    scheduling.create_priority_class(client.V1PriorityClass(
        metadata=client.V1ObjectMeta(name="low"), value=10))
    listed = scheduling.list_priority_class()
    assert [(c.metadata.name, c.value) for c in listed.items] == [("high", 1000), ("low", 10)]
    events = _watch(scheduling.list_priority_class, count=2)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "high"), ("ADDED", "low")]


def test_bookmarks_when_allowed_and_only_then(server: FakeApiServer,
                                              core: client.CoreV1Api) -> None:
    rv = server.resource_version
    server.create(node("n1"))  # moves the resourceVersion without a pod event
    w = watch.Watch()
    events = []
    for event in w.stream(core.list_namespaced_pod, NS, resource_version=rv,
                          allow_watch_bookmarks=True, timeout_seconds=5):
        events.append(event)
        w.stop()
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert events[0]["raw_object"]["kind"] == "Pod"
    assert events[0]["raw_object"]["metadata"]["resourceVersion"] == server.resource_version
    assert w.resource_version == server.resource_version  # the helper resumes from there
    # Not asked for: none, though the server sends them every 0.1 s to who asks.
    timer = _later(0.4, lambda: server.create(pod("p", namespace=NS)))
    events = _watch(core.list_namespaced_pod, NS, count=1, resource_version=rv)
    timer.join()
    assert [e["type"] for e in events] == ["ADDED"]


def test_watch_field_selector_sees_a_pod_leave_it(server: FakeApiServer,
                                                  core: client.CoreV1Api) -> None:
    rv = server.resource_version
    server.create_all([node("n1"), pod("p", namespace=NS)])
    core.create_namespaced_pod_binding("p", NS, _binding("p", "n1"), _preload_content=False)
    events = _watch(core.list_pod_for_all_namespaces, count=2, resource_version=rv,
                    field_selector="spec.nodeName=")
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "p"), ("DELETED", "p")]


def test_too_old_resource_version_ends_in_410(server: FakeApiServer,
                                              core: client.CoreV1Api) -> None:
    rv = server.resource_version
    server.create(pod("p", namespace=NS))
    server.expire_history("Pod")
    # Without timeout_seconds the helper retries once from the same resourceVersion, then
    # raises the 410 it read from the ERROR event.
    with pytest.raises(ApiException) as info:
        for _ in watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=rv):
            pass
    assert info.value.status == 410
    assert "Expired" in str(info.value.reason)
    assert [r.code for r in server.requests("GET", "/pods$", watch=True)] == [200, 200]
    # With timeout_seconds it does not retry.
    server.clear_requests()
    with pytest.raises(ApiException) as info:
        _watch(core.list_pod_for_all_namespaces, count=1, resource_version=rv)
    assert info.value.status == 410
    assert len(server.requests("GET", "/pods$", watch=True)) == 1
    # A fresh list gives a resourceVersion that works.
    listed = _json(core.list_pod_for_all_namespaces(_preload_content=False))
    timer = _later(0.1, lambda: server.create(pod("q", namespace=NS)))
    events = _watch(core.list_pod_for_all_namespaces, count=1,
                    resource_version=listed["metadata"]["resourceVersion"])
    timer.join()
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "q")]


def test_bounded_history_and_an_open_watch_expired(server: FakeApiServer,
                                                   core: client.CoreV1Api) -> None:
    server.history_limit = 2
    before = server.resource_version
    server.create_all([pod(f"p{i}", namespace=NS) for i in range(2)])
    middle = server.resource_version
    server.create_all([pod(f"p{i}", namespace=NS) for i in range(2, 4)])
    with pytest.raises(ApiException) as info:
        _watch(core.list_namespaced_pod, NS, count=1, resource_version=before)
    assert info.value.status == 410
    events = _watch(core.list_namespaced_pod, NS, count=2, resource_version=middle)
    assert [e["object"].metadata.name for e in events] == ["p2", "p3"]
    # An open watch gets the 410 as soon as its history goes.
    timer = _later(0.2, lambda: server.expire_history("Pod"))
    with pytest.raises(ApiException) as info:
        _watch(core.list_namespaced_pod, NS, count=1, resource_version=server.resource_version)
    timer.join()
    assert info.value.status == 410


def test_injected_watch_failures(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.fail("GET", r"/pods$", 500, watch=True)
    with pytest.raises(ApiException) as info:
        _watch(core.list_pod_for_all_namespaces, count=1, resource_version="0")
    assert info.value.status == 500
    server.fail("GET", r"/pods$", 410, watch=True)  # in the stream, as the real server
    with pytest.raises(ApiException) as info:
        _watch(core.list_pod_for_all_namespaces, count=1, resource_version="0")
    assert info.value.status == 410
    assert [r.code for r in server.requests(watch=True)] == [500, 200]
    # Closed by the server (as at its timeout): the stream just ends.
    timer = _later(0.2, server.close_watches)
    started = time.monotonic()
    assert _watch(core.list_pod_for_all_namespaces, count=1, resource_version="0") == []
    timer.join()
    assert time.monotonic() - started < 3


# -- binding, status, delete ---------------------------------------------------------------


def test_binding_then_a_second_binding_conflicts(server: FakeApiServer,
                                                 core: client.CoreV1Api) -> None:
    server.create_all([node("n1"), node("n2"), pod("p", namespace=NS)])
    resp = core.create_namespaced_pod_binding("p", NS, _binding("p", "n1"),
                                              _preload_content=False)
    assert resp.status == 201
    assert _json(resp)["status"] == "Success"
    bound = server.get("Pod", NS, "p")
    assert bound is not None and bound["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= \
        bound["status"]["conditions"][-1].items()
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_binding("p", NS, _binding("p", "n2"),
                                           _preload_content=False)
    assert info.value.status == 409
    status = json.loads(info.value.body)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Conflict", 409)
    assert "already assigned to node" in status["message"]
    assert [(b.namespace, b.pod, b.node, b.code) for b in server.bindings()] == [
        (NS, "p", "n1", 201), (NS, "p", "n2", 409)]


def test_binding_clears_the_nomination_as_kubernetes_1_35_does(
        server: FakeApiServer, core: client.CoreV1Api) -> None:
    nominated = pod("p", namespace=NS)
    nominated["status"]["nominatedNodeName"] = "n1"
    server.create_all([node("n1"), nominated])
    core.create_namespaced_pod_binding("p", NS, _binding("p", "n1"), _preload_content=False)
    assert "nominatedNodeName" not in server.get("Pod", NS, "p")["status"]


@pytest.mark.parametrize("labels", [{"n": 5}, {"driver": 1.1}, {"on": True}])
def test_a_label_that_is_no_string_is_refused_at_decoding(
        server: FakeApiServer, core: client.CoreV1Api, labels: dict) -> None:
    """The API server decodes labels and annotations as maps of strings: a number or a
    boolean (what YAML makes of an unquoted `5`, `1.10`, `on`) is a 400 before any
    validation, on create and on patch alike."""
    body = pod("p", namespace=NS)
    body["metadata"]["labels"] = labels
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(NS, body)
    assert info.value.status == 400
    assert "cannot unmarshal" in json.loads(info.value.body)["message"]
    server.create_all([pod("q", namespace=NS)])
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_pod("q", NS, {"metadata": {"annotations": labels}})
    assert info.value.status == 400


def test_binding_reply_is_a_status_the_typed_client_cannot_read(
        server: FakeApiServer, core: client.CoreV1Api) -> None:
    """The real server answers a Binding with a Status; the V1Binding model wants a
    `target`, so without _preload_content=False the client raises though the pod is bound."""
    server.create_all([node("n1"), pod("p", namespace=NS), pod("q", namespace=NS)])
    with pytest.raises(ValueError, match="target"):
        core.create_namespaced_pod_binding("p", NS, _binding("p", "n1"))
    assert server.get("Pod", NS, "p")["spec"]["nodeName"] == "n1"  # type: ignore[index]
    # The older bindings collection works the same way.
    resp = core.create_namespaced_binding(NS, _binding("q", "n1"), _preload_content=False)
    assert resp.status == 201
    assert server.get("Pod", NS, "q")["spec"]["nodeName"] == "n1"  # type: ignore[index]


def test_injected_binding_failure(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.create_all([node("n1"), pod("p", namespace=NS)])
    fault = server.fail("POST", r"/pods/p/binding$", 500)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_binding("p", NS, _binding("p", "n1"),
                                           _preload_content=False)
    assert info.value.status == 500
    assert json.loads(info.value.body)["reason"] == "InternalError"
    assert "nodeName" not in server.get("Pod", NS, "p")["spec"]  # type: ignore[index]
    assert (fault.hits, fault.times) == (1, 0)
    resp = core.create_namespaced_pod_binding("p", NS, _binding("p", "n1"),
                                              _preload_content=False)
    assert resp.status == 201
    assert [b.code for b in server.bindings()] == [500, 201]


def test_pod_status_replace_and_patch(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.create(pod("p", namespace=NS))
    current = core.read_namespaced_pod_status("p", NS)
    current.status.conditions = [client.V1PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable",
        message="0/1 nodes are available", last_transition_time=datetime.now(UTC))]
    current.metadata.labels = {"ignored": "yes"}  # a status write changes only status
    updated = core.replace_namespaced_pod_status("p", NS, current)
    assert updated.status.conditions[0].reason == "Unschedulable"
    assert updated.metadata.labels == {}
    with pytest.raises(ApiException) as info:  # `current` carries a stale resourceVersion
        core.replace_namespaced_pod_status("p", NS, current)
    assert info.value.status == 409
    # A dict body goes as a strategic merge patch: conditions merge by type.
    core.patch_namespaced_pod_status("p", NS, {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}})
    assert server.requests("PATCH")[-1].content_type == "application/strategic-merge-patch+json"
    core.patch_namespaced_pod_status("p", NS, {"status": {"conditions": [
        {"type": "PodScheduled", "status": "True"}]}, "spec": {"nodeName": "ignored"}})
    stored = server.get("Pod", NS, "p")
    assert stored is not None and "nodeName" not in stored["spec"]
    assert {c["type"]: c["status"] for c in stored["status"]["conditions"]} == {
        "PodScheduled": "True", "Ready": "False"}
    # A list body goes as a JSON patch; the pod itself does not take status.
    core.patch_namespaced_pod("p", NS, [
        {"op": "add", "path": "/metadata/annotations/touched", "value": "1"},
        {"op": "replace", "path": "/status/phase", "value": "Running"}])
    stored = server.get("Pod", NS, "p")
    assert stored is not None and stored["metadata"]["annotations"]["touched"] == "1"
    assert stored["status"]["phase"] == "Pending"


def test_delete_with_grace_waits_for_finish_deletion(server: FakeApiServer,
                                                     core: client.CoreV1Api) -> None:
    server.create_all([pod("bound", namespace=NS, node_name="n1"),
                       pod("pending", namespace=NS)])
    rv = server.resource_version
    deleting = core.delete_namespaced_pod(
        "bound", NS, body=client.V1DeleteOptions(grace_period_seconds=30))
    assert deleting.metadata.deletion_timestamp is not None
    assert server.get("Pod", NS, "bound")["metadata"]["deletionTimestamp"]  # type: ignore[index]
    core.delete_namespaced_pod("pending", NS, grace_period_seconds=30)
    assert server.get("Pod", NS, "pending") is None  # on no node: gone at once, as for real
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_binding("bound", NS, _binding("bound", "n2"),
                                           _preload_content=False)
    assert info.value.status == 409
    server.finish_deletion(NS, "bound")
    assert server.objects("Pod") == []
    events = _watch(core.list_namespaced_pod, NS, count=3, resource_version=rv)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("MODIFIED", "bound"), ("DELETED", "pending"), ("DELETED", "bound")]


def test_errors_are_status_objects(server: FakeApiServer, core: client.CoreV1Api,
                                   api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as info:
        core.read_namespaced_pod("missing", NS)
    assert info.value.status == 404
    status = json.loads(info.value.body)
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Failure", "reason": "NotFound", "code": 404,
                      "message": 'pods "missing" not found',
                      "details": {"name": "missing", "kind": "pods"}}
    with pytest.raises(ApiException) as info:  # the real server validates pods too
        core.create_namespaced_pod(NS, {"metadata": {"name": "x"}, "spec": {}})
    assert info.value.status == 422
    with pytest.raises(ApiException) as info:
        api.call_api("/apis/example.com/v1/widgets", "GET", _preload_content=False)
    assert info.value.status == 404


# -- custom objects, priority, leases, events ---------------------------------------------------


def test_podgroups_and_queues_through_custom_objects(server: FakeApiServer,
                                                     custom: client.CustomObjectsApi) -> None:
    server.create_all([queue("q1", weight=2), podgroup("pg", 2, namespace=NS, queue="q1"),
                       podgroup("other", namespace="elsewhere")])
    listed = custom.list_namespaced_custom_object(*VOLCANO, NS, "podgroups")
    assert (listed["kind"], _names(listed)) == ("PodGroupList", ["pg"])
    assert listed["items"][0]["kind"] == "PodGroup"  # custom resources keep kind in lists
    assert _names(custom.list_cluster_custom_object(*VOLCANO, "podgroups")) == [
        "other", "pg"]
    assert _names(custom.list_cluster_custom_object(*VOLCANO, "queues")) == ["q1"]
    got = custom.get_namespaced_custom_object(*VOLCANO, NS, "podgroups", "pg")
    assert (got["spec"]["minMember"], got["metadata"]["generation"]) == (2, 1)
    rv = listed["metadata"]["resourceVersion"]

    # The chart's PodGroup CRD, as Volcano's, has no status subresource: /status is not
    # served, and status is written with the object (a change of generation, too).
    with pytest.raises(ApiException) as info:
        custom.patch_namespaced_custom_object_status(*VOLCANO, NS, "podgroups", "pg",
                                                     {"status": {"phase": "Inqueue"}})
    assert info.value.status == 404
    patched = custom.patch_namespaced_custom_object(
        *VOLCANO, NS, "podgroups", "pg", {"status": {"phase": "Inqueue"}})
    assert patched["status"]["phase"] == "Inqueue"
    assert (patched["spec"]["minMember"], patched["metadata"]["generation"]) == (2, 2)
    assert server.requests("PATCH")[-1].content_type == "application/merge-patch+json"
    again = custom.patch_namespaced_custom_object(  # a no-op: no write, no event
        *VOLCANO, NS, "podgroups", "pg", {"status": {"phase": "Inqueue"}})
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]

    q1 = custom.get_cluster_custom_object(*VOLCANO, "queues", "q1")
    q1["status"] = {"state": "Open", "allocated": {"cpu": "1"}}
    q1["spec"]["weight"] = 9
    replaced = custom.replace_cluster_custom_object_status(*VOLCANO, "queues", "q1", q1)
    assert replaced["status"] == {"state": "Open", "allocated": {"cpu": "1"}}
    assert replaced["spec"]["weight"] == 2
    with pytest.raises(ApiException) as info:  # q1 is now stale
        custom.replace_cluster_custom_object_status(*VOLCANO, "queues", "q1", q1)
    assert info.value.status == 409

    groups = _watch(custom.list_namespaced_custom_object, *VOLCANO, NS, "podgroups",
                    count=1, resource_version=rv)
    assert [(e["type"], e["object"]["status"]["phase"]) for e in groups] == [
        ("MODIFIED", "Inqueue")]
    queues = _watch(custom.list_cluster_custom_object, *VOLCANO, "queues", count=1,
                    resource_version=rv)
    assert [(e["type"], e["object"]["status"]["state"]) for e in queues] == [
        ("MODIFIED", "Open")]
    with pytest.raises(ApiException) as info:  # custom resources take no strategic merge
        custom.patch_cluster_custom_object_status(
            *VOLCANO, "queues", "q1", {"status": {}},
            _content_type="application/strategic-merge-patch+json")
    assert info.value.status == 415


def test_pods_created_through_the_api_get_their_priority(server: FakeApiServer,
                                                         core: client.CoreV1Api) -> None:
    server.create(priority_class("high", 1000))
    body = pod("p", namespace=NS, priority_class="high", phase="Running")
    created = core.create_namespaced_pod(NS, body)
    assert (created.spec.priority, created.status.phase) == (1000, "Pending")
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(NS, pod("q", namespace=NS, priority_class="missing"))
    assert info.value.status == 403


def test_lease_create_read_replace_and_conflicts(server: FakeApiServer,
                                                 api: client.ApiClient) -> None:
    coordination = client.CoordinationV1Api(api)
    # Six fractional digits, as a MicroTime must have (isoformat drops them at 0 µs).
    now = datetime.now(UTC).replace(microsecond=123456)
    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="vscheduler", namespace="kube-system"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15,
                                acquire_time=now, renew_time=now, lease_transitions=0))
    coordination.create_namespaced_lease("kube-system", lease)
    with pytest.raises(ApiException) as info:
        coordination.create_namespaced_lease("kube-system", lease)
    assert (info.value.status, json.loads(info.value.body)["reason"]) == (409, "AlreadyExists")

    held = coordination.read_namespaced_lease("vscheduler", "kube-system")
    assert (held.spec.holder_identity, held.spec.renew_time) == ("a", now)
    held.spec.renew_time = now + timedelta(seconds=5)
    renewed = coordination.replace_namespaced_lease("vscheduler", "kube-system", held)
    assert int(renewed.metadata.resource_version) > int(held.metadata.resource_version)

    held.spec.holder_identity = "b"  # a rival with the copy read before the renewal
    with pytest.raises(ApiException) as info:
        coordination.replace_namespaced_lease("vscheduler", "kube-system", held)
    assert (info.value.status, json.loads(info.value.body)["reason"]) == (409, "Conflict")
    stored = server.lease("kube-system", "vscheduler")
    assert stored is not None and stored["spec"]["holderIdentity"] == "a"

    renewed.spec.renew_time = datetime.now()  # naive: no offset, which the server refuses
    with pytest.raises(ApiException) as info:
        coordination.replace_namespaced_lease("vscheduler", "kube-system", renewed)
    assert info.value.status == 400


def test_events_create_and_aggregate(server: FakeApiServer, core: client.CoreV1Api) -> None:
    first = datetime.now(UTC)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="p.", namespace=NS),
        involved_object=client.V1ObjectReference(api_version="v1", kind="Pod", name="p",
                                                 namespace=NS),
        reason="FailedScheduling", message="0/1 nodes are available", type="Warning",
        count=1, first_timestamp=first, last_timestamp=first,
        source=client.V1EventSource(component="vscheduler"))
    created = core.create_namespaced_event(NS, event)
    assert created.metadata.name.startswith("p.")
    later = (first + timedelta(seconds=30)).isoformat()
    core.patch_namespaced_event(created.metadata.name, NS,
                                {"count": 2, "lastTimestamp": later})
    [stored] = server.events(NS)
    assert (stored["reason"], stored["count"], stored["lastTimestamp"]) == (
        "FailedScheduling", 2, later)


def test_discovery_as_the_dynamic_client_uses_it(server: FakeApiServer, api: client.ApiClient,
                                                 tmp_path: Path) -> None:
    server.create(podgroup("pg", namespace=NS))
    dynamic = DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    podgroups = dynamic.resources.get(api_version="scheduling.volcano.sh/v1beta1",
                                      kind="PodGroup")
    assert podgroups.namespaced
    assert [g.metadata.name for g in podgroups.get(namespace=NS).items] == ["pg"]
    assert client.VersionApi(api).get_code().major == "1"
    paths = {r.path for r in server.requests("GET")}
    assert {"/apis", "/apis/scheduling.volcano.sh/v1beta1", "/version/"} <= paths


# -- faults and outages ----------------------------------------------------------------------


def test_injected_failures_are_counted_and_recorded(server: FakeApiServer,
                                                    core: client.CoreV1Api) -> None:
    server.create(node("n1"))
    fault = server.fail("GET", r"^/api/v1/nodes$", 503, times=2, watch=False)
    for _ in range(2):
        with pytest.raises(ApiException) as info:
            core.list_node()
        assert info.value.status == 503
    assert [n.metadata.name for n in core.list_node().items] == ["n1"]
    assert fault.hits == 2
    recorded = server.requests("GET", r"/nodes$")
    assert [(r.method, r.code) for r in recorded] == [("GET", 503)] * 2 + [("GET", 200)]


def test_server_gone_for_a_while(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.create(node("n1"))
    assert len(core.list_node().items) == 1
    server.go_down()
    assert not server.is_up
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_node()
    server.come_back()
    assert len(core.list_node().items) == 1

    server.down_for(0.3)
    failures, deadline = 0, time.monotonic() + 5
    while True:
        try:
            core.list_node()
            break
        except urllib3.exceptions.MaxRetryError:
            failures += 1
            assert time.monotonic() < deadline, "the server did not come back"
            time.sleep(0.05)
    assert failures >= 1


def test_a_watch_breaks_when_the_server_goes_and_resumes_after(
        server: FakeApiServer, core: client.CoreV1Api) -> None:
    rv = server.resource_version
    w = watch.Watch()
    timer = _later(0.2, server.go_down)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for _ in w.stream(core.list_pod_for_all_namespaces, resource_version=rv,
                          timeout_seconds=5):
            pass
    timer.join()
    server.create(pod("p", namespace=NS))  # while it is down
    server.come_back()
    events = _watch(core.list_pod_for_all_namespaces, count=1, resource_version=rv)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "p")]
    # The watch the client stopped is noticed and closed on the server side too.
    wait_for(lambda: server.watchers() == 0, timeout=2, message="watches closed")


# -- the patch helpers -----------------------------------------------------------------------


def test_merge_and_strategic_merge_patch() -> None:
    target = {"a": {"b": 1, "c": [1, 2]}, "status": {"conditions": [
        {"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}}
    assert merge_patch(target, {"a": {"b": None, "c": [3]}}) == {
        "a": {"c": [3]}, "status": target["status"]}
    patched = strategic_merge_patch(target, {"status": {"conditions": [
        {"type": "Ready", "status": "True"}, {"type": "Extra", "status": "True"},
        {"type": "PodScheduled", "$patch": "delete"}]},
        "$setElementOrder/conditions": []})
    assert patched["status"]["conditions"] == [
        {"type": "Ready", "status": "True"}, {"type": "Extra", "status": "True"}]
    assert target["status"]["conditions"][0]["status"] == "False"  # untouched


# -- what kubectl relies on: field selectors, Tables, CRDs as declared --------------------------

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _get(api: client.ApiClient, path: str, accept: str = "application/json",
         **query: Any) -> Any:
    response = api.call_api(path, "GET", query_params=list(query.items()),
                            header_params={"Accept": accept}, _preload_content=False)
    return json.loads(response.data)


def test_field_selectors_are_the_ones_the_real_server_supports(
        server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.create_all([node("n1"), pod("a", namespace=NS, node_name="n1"),
                       pod("b", namespace=NS)])
    uid = server.get("Pod", NS, "a")["metadata"]["uid"]
    for name, about in (("a.1", uid), ("a.2", "an-older-pod-of-the-same-name")):
        server.create({"kind": "Event", "metadata": {"name": name, "namespace": NS},
                       "involvedObject": {"kind": "Pod", "namespace": NS, "name": "a",
                                          "uid": about},
                       "reason": "Scheduled", "type": "Normal",
                       "source": {"component": "vscheduler"}})
    # kubectl describe's selector: the events of this pod, not of one before it
    selected = core.list_namespaced_event(
        NS, field_selector=f"involvedObject.uid={uid},involvedObject.name=a,"
                           f"involvedObject.namespace={NS}")
    assert [e.metadata.name for e in selected.items] == ["a.1"]
    assert [e.metadata.name for e in core.list_namespaced_event(
        NS, field_selector="source=vscheduler,type=Normal").items] == ["a.1", "a.2"]
    assert [p.metadata.name for p in core.list_namespaced_pod(
        NS, field_selector="spec.nodeName=n1,status.phase=Running").items] == ["a"]
    assert [p.metadata.name for p in core.list_namespaced_pod(
        NS, field_selector="metadata.name!=a").items] == ["b"]
    for plural, label in (("pods", "spec.containers"), ("events", "message")):
        with pytest.raises(ApiException) as info:
            _get(core.api_client, f"/api/v1/namespaces/{NS}/{plural}",
                 fieldSelector=f"{label}=x")
        assert info.value.status == 400
        assert json.loads(info.value.body)["message"] == f"field label not supported: {label}"


def test_tables_as_kubectl_get_asks_for_them(server: FakeApiServer,
                                             api: client.ApiClient) -> None:
    server.create_all([node("n1"), pod("a", namespace=NS, node_name="n1"),
                       podgroup("pg", 3, namespace=NS, queue="q1", phase="Running")])
    table = _get(api, f"/api/v1/namespaces/{NS}/pods", TABLE)
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0),
                       ("Age", 0), ("IP", 1), ("Node", 1), ("Nominated Node", 1),
                       ("Readiness Gates", 1)]
    [row] = table["rows"]
    assert row["cells"][:3] == ["a", "0/1", "Running"] and row["cells"][6] == "n1"
    assert row["object"]["kind"] == "PartialObjectMetadata"  # includeObject=Metadata
    full = _get(api, f"/api/v1/namespaces/{NS}/pods/a", TABLE, includeObject="Object")
    assert full["rows"][0]["object"]["spec"]["nodeName"] == "n1"
    # A custom resource: NAME, then its CRD's printer columns (Volcano's, for PodGroup)
    groups = _get(api, f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups",
                  TABLE)
    assert [(c["name"], c["priority"]) for c in groups["columnDefinitions"]] == [
        ("Name", 0), ("STATUS", 0), ("minMember", 0), ("RUNNINGS", 0), ("AGE", 0),
        ("QUEUE", 1)]
    cells = groups["rows"][0]["cells"]
    assert cells[:4] == ["pg", "Running", 3, None] and cells[5] == "q1"
    assert cells[4].endswith("s")  # an age, as the server prints it
    # Without the Table media type: the plain list, as before
    assert _get(api, f"/api/v1/namespaces/{NS}/pods")["kind"] == "PodList"


def test_custom_resources_are_served_as_their_crds_declare(
        server: FakeApiServer, api: client.ApiClient,
        custom: client.CustomObjectsApi) -> None:
    from tests.apiserver import coscheduling_podgroup_crd

    volcano = {r["name"] for r in _get(api, "/apis/scheduling.volcano.sh/v1beta1")[
        "resources"]}
    assert {"podgroups", "queues", "queues/status"} <= volcano
    assert "podgroups/status" not in volcano
    with pytest.raises(ApiException) as info:  # not served before its CRD is
        _get(api, "/apis/scheduling.x-k8s.io/v1alpha1")
    assert info.value.status == 404

    server.add_crd(coscheduling_podgroup_crd())
    served = _get(api, "/apis/scheduling.x-k8s.io/v1alpha1")["resources"]
    assert {r["name"] for r in served} == {"podgroups", "podgroups/status"}
    assert "scheduling.x-k8s.io" in {g["name"] for g in _get(api, "/apis")["groups"]}
    both = ("scheduling.x-k8s.io", "v1alpha1")
    custom.create_namespaced_custom_object(*both, NS, "podgroups", {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "pg"}, "spec": {"minMember": 2}})
    patched = custom.patch_namespaced_custom_object_status(
        *both, NS, "podgroups", "pg", {"status": {"phase": "Running"}})
    assert patched["status"]["phase"] == "Running"
    # the two PodGroup kinds are kept apart
    assert custom.list_namespaced_custom_object(*VOLCANO, NS, "podgroups")["items"] == []
    assert server.get("podgroups.scheduling.x-k8s.io", NS, "pg")["spec"]["minMember"] == 2


def test_namespaces_carry_their_name_as_a_label(server: FakeApiServer,
                                                core: client.CoreV1Api) -> None:
    """As the real server since 1.21: every write of a Namespace sets the label
    kubernetes.io/metadata.name to its name (a generated one too), whatever was sent."""
    name_label = "kubernetes.io/metadata.name"
    made = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name="ml", labels={"team": "ml", name_label: "other"})))
    assert made.metadata.labels == {"team": "ml", name_label: "ml"}
    generated = core.create_namespace(client.V1Namespace(
        metadata=client.V1ObjectMeta(generate_name="tmp-")))
    assert generated.metadata.name.startswith("tmp-")
    assert generated.metadata.labels == {name_label: generated.metadata.name}
    # A replace without labels, and a patch that removes the label, keep it.
    replaced = core.replace_namespace("ml", client.V1Namespace(
        metadata=client.V1ObjectMeta(name="ml")))
    assert replaced.metadata.labels == {name_label: "ml"}
    patched = core.patch_namespace("ml", {"metadata": {"labels": {name_label: None,
                                                                  "tier": "gold"}}})
    assert patched.metadata.labels == {name_label: "ml", "tier": "gold"}
    # So does an object seeded through the test API.
    server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "seeded"}})
    assert server.get("Namespace", None, "seeded")["metadata"]["labels"] == {
        name_label: "seeded"}
    listed = {ns.metadata.name: ns.metadata.labels for ns in core.list_namespace().items}
    assert listed["seeded"] == {name_label: "seeded"}
