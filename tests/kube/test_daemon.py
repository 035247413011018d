"""The daemon against the API server stand-in: watches in, Bindings out."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any

from kubernetes import client

from tests.apiserver import FakeApiServer, wait_for
from tests.builders import gang, node, pod, podgroup, queue
from tests.kube.conftest import CONF, start_daemon
from vscheduler.kube.daemon import Daemon


def _bound(server: FakeApiServer) -> Counter:
    return Counter(b.pod for b in server.bindings() if b.code == 201)


def test_what_is_listed_goes_into_the_cache_while_other_kinds_still_list(
        server: FakeApiServer, tmp_path):
    """Start-up does not wait for every kind before filling the cache: while the Node
    list is refused (and retried), the pods already listed are in the cache; once the
    nodes are listed, they are bound."""
    server.create_all([node("n1", cpu="8"), *(pod(f"p{i}", cpu="1") for i in range(3))])
    server.fail("GET", r"/api/v1/nodes$", 500, times=1_000, watch=False)
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(CONF)
    api = client.ApiClient(client.Configuration(host=server.url))
    daemon = Daemon(api, str(path), period=0.05)
    for reflector in daemon.reflectors:
        reflector.watch_timeout = 5
        reflector.backoff = (0.05, 0.1)
    synced: list[bool] = []
    starting = threading.Thread(target=lambda: synced.append(daemon.start_watches(10)),
                                daemon=True)
    starting.start()
    try:
        wait_for(lambda: {f"default/p{i}" for i in range(3)} <= set(daemon.cache.tasks))
        assert not synced and not daemon.cache.nodes  # (still listing the nodes)
        server.clear_faults()
        starting.join(timeout=10)
        assert synced == [True]
        runner = threading.Thread(target=daemon.run, daemon=True)
        runner.start()
        wait_for(lambda: len(_bound(server)) == 3, timeout=10)
    finally:
        daemon.stop.set()
        starting.join(timeout=10)
        api.close()


def test_pending_pods_are_bound_and_other_schedulers_pods_only_count(server, daemon):
    server.create_all([node("n1", cpu="4"),
                       pod("theirs", cpu="3", scheduler="default-scheduler", node_name="n1"),
                       pod("unplaced", cpu="1", scheduler="default-scheduler"),
                       pod("small", cpu="1"), pod("big", cpu="2")])
    wait_for(lambda: _bound(server)["small"] == 1)
    # 3 of 4 CPUs are the other scheduler's: "big" does not fit and waits, with a reason.
    wait_for(lambda: any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                         for c in (server.get("Pod", "default", "big").get("status") or {})
                         .get("conditions", [])))
    assert "big" not in _bound(server) and "unplaced" not in _bound(server)
    assert server.get("Pod", "default", "unplaced")["spec"].get("nodeName") is None
    wait_for(lambda: any(e["reason"] == "Scheduled" and "default/small" in e["message"]
                         for e in server.events()))


def test_a_gang_that_cannot_fit_gets_a_condition_and_no_bind(server, daemon):
    server.create_all([node("n1", cpu="2"), *gang("train", 3, cpu="1")])
    wait_for(lambda: any(c.get("type") == "Unschedulable"
                         for c in (server.get("PodGroup", "default", "train").get("status")
                                   or {}).get("conditions", [])))
    assert not server.bindings()
    wait_for(lambda: any(e["reason"] == "Unschedulable" for e in server.events()))


def test_a_refused_bind_is_retried_and_no_pod_is_bound_twice(server, daemon):
    server.fail("POST", r"/binding$", 500, times=2)
    server.create_all([node("n1", cpu="8"), *gang("g", 3, cpu="1")])
    wait_for(lambda: len(_bound(server)) == 3, timeout=10)
    assert set(_bound(server).values()) == {1}
    assert any(b.code == 500 for b in server.bindings())


def test_two_daemons_electing_a_leader_bind_each_pod_once(server: FakeApiServer, tmp_path):
    from vscheduler.kube.leader import LeaderElector

    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)
    daemons, threads, apis = [], [], []
    for identity in ("a", "b"):
        api = client.ApiClient(client.Configuration(host=server.url))
        elector = LeaderElector(api, "kube-system", "vscheduler", identity,
                                lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)
        daemon = Daemon(api, str(conf), period=0.05, elector=elector)
        for reflector in daemon.reflectors:
            reflector.watch_timeout = 5
        assert daemon.start_watches(synced_timeout=5)
        thread = threading.Thread(target=daemon.run, daemon=True)
        thread.start()
        daemons.append(daemon)
        threads.append(thread)
        apis.append(api)
    try:
        server.create_all([node("n1", cpu="8"), *gang("g", 4, cpu="1"), pod("solo", cpu="1")])
        wait_for(lambda: len(_bound(server)) == 5, timeout=10)
        leaders = [d.elector.is_leader.is_set() for d in daemons]
        assert sum(leaders) == 1
        # The leader goes away; the other takes over and schedules what comes next.
        old = daemons[leaders.index(True)]
        old.stop.set()
        server.create_all([pod("late", cpu="1")])
        wait_for(lambda: _bound(server)["late"] == 1, timeout=10)
        assert set(_bound(server).values()) == {1}
        assert not [b for b in server.bindings() if b.code == 409]
    finally:
        for daemon, thread, api in zip(daemons, threads, apis, strict=True):
            daemon.stop.set()
            thread.join(timeout=10)
            api.close()


def test_metrics_and_healthz_are_served(server: FakeApiServer, daemon: Daemon):
    import urllib.request

    from vscheduler.kube.metrics import serve

    http = serve(daemon.metrics, "127.0.0.1:0", daemon.period)
    base = f"http://127.0.0.1:{http.server_address[1]}"
    try:
        server.create_all([node("n1", cpu="2"), pod("p", cpu="1"), *gang("big", 3, cpu="1")])
        wait_for(lambda: _bound(server)["p"] == 1)

        def metrics() -> str:
            return urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()

        wait_for(lambda: 'podgroup_waiting_pods{namespace="default",podgroup="big"} 3.0'
                 in metrics())
        text = metrics()
        for name in ("volcano_e2e_scheduling_latency_milliseconds_bucket",
                     'volcano_action_scheduling_latency_milliseconds_count{action="allocate"}',
                     "volcano_pod_bind_total 1.0", "podgroup_scheduling_duration_seconds",
                     "podgroup_scheduling_timeout_total",
                     'volcano_queue_allocated_milli_cpu{queue_name="default"}'):
            assert name in text, name
        health = urllib.request.urlopen(f"{base}/healthz", timeout=5)
        assert health.status == 200 and health.read() == b"ok"
    finally:
        http.shutdown()


def test_a_changed_conf_is_taken_and_a_bad_one_is_not(daemon: Daemon, tmp_path):
    import os

    path = daemon.conf_path
    assert "allocate" in daemon.conf.action_names()
    with open(path, "w") as conf:
        conf.write(CONF.replace('"enqueue, allocate, backfill"', '"enqueue, allocate"'))
    os.utime(path, (1, 1))  # a new modification time, however fast the test
    wait_for(lambda: daemon.scheduler.conf.action_names() == ["enqueue", "allocate"])
    with open(path, "w") as conf:
        conf.write("actions: \"enqueue, allocat\"\ntiers: []\n")
    os.utime(path, (2, 2))
    kept = daemon.scheduler.conf
    wait_for(lambda: daemon._conf_stamp == 2)
    assert daemon.scheduler.conf is kept


def test_the_api_server_away_for_a_while_loses_no_pod(server: FakeApiServer, daemon: Daemon):
    server.create_all([node("n1", cpu="8"), pod("before", cpu="1")])
    wait_for(lambda: _bound(server)["before"] == 1)
    server.go_down()
    import time

    time.sleep(0.5)
    server.come_back()
    server.create_all([pod("after", cpu="1")])
    wait_for(lambda: _bound(server)["after"] == 1, timeout=15)
    assert set(_bound(server).values()) == {1}


RECLAIM = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def test_reclaim_evicts_nominates_and_binds_once_the_victim_is_gone(server, tmp_path):
    from tests.builders import queue

    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(RECLAIM)
    server.create_all([node("n1", cpu="4"), queue("a"), queue("b"),
                       *(pod(f"a-{i}", cpu="1", queue="a", node_name="n1")
                         for i in range(4))])
    api = client.ApiClient(client.Configuration(host=server.url))
    daemon = Daemon(api, str(conf), period=0.05)
    assert daemon.start_watches(synced_timeout=5)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    try:
        server.create_all([pod("b-0", cpu="1", queue="b")])
        deleting = wait_for(lambda: [p for p in server.objects("Pod")
                                     if p["metadata"].get("deletionTimestamp")])
        assert len(deleting) == 1
        wait_for(lambda: (server.get("Pod", "default", "b-0").get("status") or {})
                 .get("nominatedNodeName") == "n1")
        assert not server.bindings()
        victim = deleting[0]["metadata"]["name"]
        # Marked before its deletion as kube-scheduler marks its victims (a Job's
        # podFailurePolicy reads it).
        [marked] = [c for c in deleting[0]["status"].get("conditions", [])
                    if c["type"] == "DisruptionTarget"]
        assert (marked["status"], marked["reason"], marked["message"]) == (
            "True", "PreemptionByScheduler", "vscheduler: reclaim to make room for default/b-0")
        marks = server.requests("PATCH", rf"/pods/{victim}/status$")
        deletes = server.requests("DELETE", rf"/pods/{victim}$")
        assert marks and deletes and marks[0].at <= deletes[0].at
        server.finish_deletion("default", victim)
        wait_for(lambda: _bound(server)["b-0"] == 1, timeout=10)
        assert any((e["reason"] == "Evict" and victim in e["message"]) or
                   e.get("involvedObject", {}).get("name") == victim
                   for e in server.events())
    finally:
        daemon.stop.set()
        thread.join(timeout=10)
        api.close()


def test_room_released_for_a_nominated_pod_is_not_taken_by_a_lower_one(server, tmp_path):
    """b-0 (high) reclaims n1's room and is nominated there (the nomination read back
    from the watch). While the victim terminates, aa-0 (low, of a queue that goes
    first, evicting nobody) fits that room too: it waits, told why, and b-0 is bound
    once the victim is gone."""
    from tests.builders import priority_class

    low = pod("aa-0", cpu="1", queue="aa", priority_class="low")
    low["spec"]["preemptionPolicy"] = "Never"
    server.create_all([priority_class("high", 1000), priority_class("low", 10),
                       node("n1", cpu="4"), queue("a"), queue("aa"), queue("b"),
                       *(pod(f"a-{i}", cpu="1", queue="a", node_name="n1",
                             priority_class="low") for i in range(4))])
    daemon, stop = start_daemon(server, tmp_path, RECLAIM)
    try:
        server.create_all([pod("b-0", cpu="1", queue="b", priority_class="high")])
        deleting = wait_for(lambda: [p for p in server.objects("Pod")
                                     if p["metadata"].get("deletionTimestamp")])
        wait_for(lambda: daemon.cache.tasks["default/b-0"].pod.nominated_node == "n1")
        server.create_all([low])

        def held() -> bool:
            conditions = (server.get("Pod", "default", "aa-0").get("status") or {}).get(
                "conditions") or []
            return any("room held for a nominated pod" in c.get("message", "")
                       for c in conditions)
        wait_for(held, timeout=10)
        server.finish_deletion("default", deleting[0]["metadata"]["name"])
        wait_for(lambda: _bound(server)["b-0"] == 1, timeout=10)
        assert _bound(server)["aa-0"] == 0
        assert [b.node for b in server.bindings() if b.pod == "b-0"] == ["n1"]
        # (and its nomination goes, as a 1.35 API server clears it on binding)
        wait_for(lambda: "nominatedNodeName" not in (
            server.get("Pod", "default", "b-0").get("status") or {}))
    finally:
        stop()


def test_a_gang_on_a_deleted_node_is_reclaimed_from_the_nodes_left(server, tmp_path):
    """A Node deleted under a running gang: its pod stays (the API server's pod garbage
    collector removes it later), and reclaim still takes the gang back from the node
    that is left, without touching that pod or failing the session."""
    from tests.builders import podgroup

    server.create_all([node("n1", cpu="3"), node("n2", cpu="1"), queue("a"), queue("b"),
                       podgroup("train", 4, queue="a", phase="Running"),
                       *(pod(f"train-{i}", cpu="1", queue="a", group="train",
                             node_name="n1" if i < 3 else "n2") for i in range(4))])
    daemon, stop = start_daemon(server, tmp_path, RECLAIM)
    try:
        server.delete("Node", None, "n2")
        # (nodes and pods are watched apart: the pod must come after the deletion)
        wait_for(lambda: "n2" not in daemon.cache.nodes)
        server.create_all([pod("b-0", cpu="1", queue="b")])
        wait_for(lambda: (server.get("Pod", "default", "b-0").get("status") or {})
                 .get("nominatedNodeName") == "n1")
        wait_for(lambda: len(server.requests("DELETE", "/pods/train-")) >= 3)
        assert sorted(p["metadata"]["name"] for p in server.objects("Pod")
                      if p["metadata"].get("deletionTimestamp")) == [
            "train-0", "train-1", "train-2"]
        assert not server.requests("DELETE", "/pods/train-3$")
    finally:
        stop()


def test_a_bind_answered_409_is_not_retried_into_a_double_bind(server, daemon):
    server.fail("POST", r"/binding$", 409, times=1)
    server.create_all([node("n1", cpu="4"), pod("p", cpu="1")])
    wait_for(lambda: _bound(server)["p"] == 1, timeout=10)
    assert [b.code for b in server.bindings()] == [409, 201]


def test_podgroup_status_follows_its_pods(server: FakeApiServer, daemon: Daemon):
    server.create_all([node("n1", cpu="4"), *gang("g", 2, cpu="1")])
    wait_for(lambda: len(_bound(server)) == 2)
    for i in range(2):  # the kubelet reports the pods running
        server.patch("Pod", "default", f"g-{i}", {"status": {"phase": "Running"}})
    wait_for(lambda: (server.get("PodGroup", "default", "g").get("status") or {})
             .get("running") == 2)
    assert server.get("PodGroup", "default", "g")["status"]["phase"] == "Running"


def test_a_gang_past_its_schedule_timeout_is_marked_and_counted(server, daemon):
    group = gang("stuck", 3, cpu="1")
    group[0]["spec"]["scheduleTimeoutSeconds"] = 1
    server.create_all([node("n1", cpu="2"), *group])

    def reasons() -> set[str]:
        status = server.get("PodGroup", "default", "stuck").get("status") or {}
        return {c.get("reason") for c in status.get("conditions", [])}

    wait_for(lambda: "ScheduleTimeout" in reasons(), timeout=10)
    wait_for(lambda: daemon.metrics.registry.get_sample_value(
        "podgroup_scheduling_timeout_total") == 1.0)
    events = [e for e in server.events() if e["reason"] == "ScheduleTimeout"]
    assert len(events) == 1 and events[0]["type"] == "Warning"
    assert not server.bindings()


def test_a_podgroup_timing_out_is_counted_once_even_if_reported_again():
    from vscheduler.framework.results import SessionResult
    from vscheduler.kube.metrics import Metrics

    metrics = Metrics()
    result = SessionResult()
    result.timeouts = ["default/stuck"]
    metrics.cycle({"allocate": 0.001}, result)
    metrics.cycle({"allocate": 0.001}, result)  # (a stale status came back by watch)
    result.timeouts = ["default/other"]
    metrics.cycle({"allocate": 0.001}, result)
    assert metrics.registry.get_sample_value("podgroup_scheduling_timeout_total") == 2.0


def test_events_name_their_object_as_client_go_does_and_repeats_are_counted(
        server: FakeApiServer, tmp_path):
    _, stop = start_daemon(server, tmp_path, event_refresh=0.2)
    try:
        server.create_all([node("n1", cpu="1"), pod("big", cpu="2")])
        stored = server.get("Pod", "default", "big")

        def failed() -> list[dict]:
            return [e for e in server.events() if e["reason"] == "FailedScheduling"]

        wait_for(lambda: failed() and failed()[0].get("count", 1) >= 3, timeout=10)
        [event] = failed()  # one Event, counted: not one per session
        involved = event["involvedObject"]
        assert involved == {"apiVersion": "v1", "kind": "Pod", "namespace": "default",
                            "name": "big", "uid": stored["metadata"]["uid"],
                            "resourceVersion": involved["resourceVersion"]}
        assert int(involved["resourceVersion"]) >= int(stored["metadata"]["resourceVersion"])
        assert event["metadata"]["name"].startswith("big.")
        int(event["metadata"]["name"].split(".", 1)[1], 16)  # <name>.<hex timestamp>
        assert event["source"] == {"component": "vscheduler"}
        assert event["reportingComponent"] == "vscheduler"
        assert event["reportingInstance"].startswith("vscheduler-")
        assert event["lastTimestamp"] >= event["firstTimestamp"]
        assert server.requests("PATCH", r"/events/big\.")
    finally:
        stop()


def test_podgroup_status_goes_through_status_where_the_crd_has_it(tmp_path):
    from tests.apiserver import CHART_CRDS, with_status_subresource

    crds = [with_status_subresource(p) if "podgroups" in str(p) else p for p in CHART_CRDS]
    with FakeApiServer(bookmark_interval=0.1, crds=crds) as server:
        _, stop = start_daemon(server, tmp_path)
        try:
            server.create_all([node("n1", cpu="2"), *gang("train", 3, cpu="1")])
            wait_for(lambda: (server.get("PodGroup", "default", "train").get("status")
                              or {}).get("conditions"))
            assert server.requests("PATCH", r"/podgroups/train/status$")
            assert not server.requests("PATCH", r"/podgroups/train$")
        finally:
            stop()


def test_a_status_subresource_gone_is_found_out_on_its_404(server: FakeApiServer, tmp_path):
    # The daemon believes podgroups/status served (a CRD changed since it asked): the 404
    # sends it to discovery again, and the status goes on the object.
    daemon, stop = start_daemon(server, tmp_path)
    try:
        key = ("scheduling.volcano.sh", "v1beta1")
        daemon.discovery._served[key] = frozenset({"podgroups", "podgroups/status"})
        server.create_all([node("n1", cpu="2"), *gang("train", 3, cpu="1")])
        wait_for(lambda: (server.get("PodGroup", "default", "train").get("status")
                          or {}).get("conditions"))
        codes = [r.code for r in server.requests("PATCH", r"/podgroups/train")]
        assert codes[:2] == [404, 200]
        assert "podgroups/status" not in daemon.discovery.resources(*key)
    finally:
        stop()


def test_coscheduling_podgroups_are_watched_where_their_crd_is_served(tmp_path):
    from tests.apiserver import CHART_CRDS, coscheduling_podgroup_crd

    with FakeApiServer(bookmark_interval=0.1,
                       crds=[*CHART_CRDS, coscheduling_podgroup_crd()]) as server:
        daemon, stop = start_daemon(server, tmp_path)
        try:
            assert [r.path for r in daemon.reflectors if "x-k8s" in r.path] == [
                "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"]
            label = {"scheduling.x-k8s.io/pod-group": "co"}
            server.create_all([
                node("n1", cpu="2"),
                {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                 "metadata": {"name": "co", "namespace": "default"},
                 "spec": {"minMember": 3}},
                *(pod(f"co-{i}", cpu="1", labels=label) for i in range(3))])
            # a gang of 3 on 2 CPUs: none bound, the status written as that CRD allows
            wait_for(lambda: server.requests("PATCH", r"x-k8s.io/.*/podgroups/co/status$"))
            status = server.get("podgroups.scheduling.x-k8s.io", "default", "co")["status"]
            assert status["phase"] == "Pending" and "conditions" not in status
            assert not server.bindings()
        finally:
            stop()

    with FakeApiServer(bookmark_interval=0.1) as plain:  # not served: not watched
        daemon, stop = start_daemon(plain, tmp_path)
        stop()
        assert not [r for r in daemon.reflectors if "x-k8s" in r.path]


def test_repeating_events_stay_counted_however_many_pods_wait(server: FakeApiServer,
                                                               monkeypatch):
    """Every pending pod's FailedScheduling repeats each session. More of them than any
    fixed number of remembered events must still be counted, not written anew each time;
    one not repeated for EVENT_FORGET_SECONDS is forgotten and written again."""
    from vscheduler.framework.session import Event
    from vscheduler.kube import writers
    from vscheduler.kube.writers import KubeWriter, RateLimiter

    api = client.ApiClient(client.Configuration(host=server.url))
    writer = KubeWriter(api, RateLimiter(1e6, 10**6), scheduler_name="vscheduler")
    events = [Event(f"Pod/default/p{i}", "Warning", "FailedScheduling", "no room")
              for i in range(4200)]
    try:
        for session in range(2):
            for event in events:
                writer.emit(event)
            assert len(server.requests("POST", r"/events$")) == len(events), session
        monkeypatch.setattr(writers, "EVENT_FORGET_SECONDS", 0.05)
        time.sleep(0.1)
        writer.emit(events[0])
        assert len(server.requests("POST", r"/events$")) == len(events) + 1
    finally:
        writer.close()
        api.close()


def test_an_optional_kind_it_may_not_read_is_given_up_not_retried(tmp_path):
    """scheduler-plugins' PodGroup CRD served, but RBAC not granted (the chart's default,
    rbac.coschedulingPodGroups false): a 403 on the first list gives that kind up at
    once; start-up does not wait for it, and the other kinds are scheduled."""
    from tests.apiserver import CHART_CRDS, coscheduling_podgroup_crd

    with FakeApiServer(bookmark_interval=0.1,
                       crds=[*CHART_CRDS, coscheduling_podgroup_crd()]) as server:
        server.fail("GET", r"^/apis/scheduling.x-k8s.io/v1alpha1/podgroups$", 403,
                    times=1000, message='podgroups.scheduling.x-k8s.io is forbidden')
        started = time.monotonic()
        daemon, stop = start_daemon(server, tmp_path)
        try:
            assert time.monotonic() - started < 5
            [optional] = [r for r in daemon.reflectors if r.optional and r.kind == "PodGroup"]
            assert optional.synced.is_set() and optional.lists == 0
            server.create_all([node("n1", cpu="2"), pod("p", cpu="1")])
            wait_for(lambda: [b for b in server.bindings() if b.code == 201])
            assert len(server.requests("GET", r"x-k8s.io/v1alpha1/podgroups$")) == 1
        finally:
            stop()


def _evicted_with(server: FakeApiServer, tmp_path, conf: str) -> tuple[Any, dict]:
    """Run reclaim on one full node until a victim is being deleted: the DELETE request
    the daemon sent, and the victim as the server then keeps it."""
    server.create_all([node("n1", cpu="2"), queue("a"), queue("b"),
                       *(pod(f"a-{i}", cpu="1", queue="a", node_name="n1")
                         for i in range(2))])
    _, stop = start_daemon(server, tmp_path, conf)
    try:
        server.create_all([pod("b-0", cpu="1", queue="b")])
        [victim] = wait_for(lambda: [p for p in server.objects("Pod")
                                     if p["metadata"].get("deletionTimestamp")])
    finally:
        stop()
    name = victim["metadata"]["name"]
    [request] = server.requests("DELETE", f"/pods/{name}$")
    return request, victim


def test_victims_are_deleted_with_the_configured_grace_period(server, tmp_path):
    conf = RECLAIM + "configurations:\n- name: reclaim\n  arguments: {gracePeriodSeconds: 5}\n"
    request, victim = _evicted_with(server, tmp_path, conf)
    assert request.body["kind"] == "DeleteOptions"
    assert request.body["gracePeriodSeconds"] == 5
    assert "gracePeriodSeconds" not in request.query
    assert victim["metadata"]["deletionGracePeriodSeconds"] == 5


def test_without_one_victims_get_their_own_grace_period(server, tmp_path):
    request, victim = _evicted_with(server, tmp_path, RECLAIM)
    assert not (request.body or {}).get("gracePeriodSeconds")
    # This pod only: not one created anew under its name since.
    assert request.body["preconditions"] == {"uid": victim["metadata"]["uid"]}
    assert "gracePeriodSeconds" not in request.query
    # the pod's terminationGracePeriodSeconds, 30 when it does not say
    assert victim["metadata"]["deletionGracePeriodSeconds"] == 30


def test_a_victim_that_cannot_be_marked_is_not_deleted(server, tmp_path):
    """The DisruptionTarget mark refused (a 500, once): the pod is not deleted unmarked
    (its Job would count its end as a failure); the eviction is reported refused, and
    a later session evicts with the mark."""
    server.fail("PATCH", r"/pods/a-[01]/status$", 500)
    request, victim = _evicted_with(server, tmp_path, RECLAIM)
    name = victim["metadata"]["name"]
    assert any(c["type"] == "DisruptionTarget"
               for c in victim["status"].get("conditions", []))
    refused = [r for r in server.requests("PATCH", r"/pods/a-[01]/status$") if r.code == 500]
    assert len(refused) == 1
    assert not [r for r in server.requests("DELETE", r"/pods/a-[01]$")
                if r.at < refused[0].at]
    assert any(e["reason"] == "FailedEviction" for e in server.events())
    assert request.at > refused[0].at and name in request.path


FAIRSHARE = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: fairshare, arguments: {halfLife: 2s}}, {name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""


def test_the_usage_history_survives_a_restart_of_the_daemon(server: FakeApiServer, tmp_path):
    """A daemon with fairshare writes queue a's usage history on the Queue while a's pods
    hold two of the node's three slots (a half-life of 2 s, for the test's sake); a
    daemon started afresh (a restart, a new leader) reads it back: with both queues'
    pods waiting for the one free slot, b's goes first (by name, a's would)."""
    from vscheduler.plugins.fairshare import HISTORY

    # (a-big never fits: something waits, so sessions go on and the history moves)
    server.create_all([node("n1", cpu="3"), queue("a"), queue("b"),
                       pod("a-0", cpu="1", queue="a"), pod("a-1", cpu="1", queue="a"),
                       pod("a-big", cpu="10", queue="a")])

    def written() -> float:
        annotations = ((server.get("Queue", None, "a") or {}).get("metadata", {})
                       .get("annotations") or {})
        return json.loads(annotations[HISTORY])["share"] if HISTORY in annotations else 0.0

    _, stop = start_daemon(server, tmp_path, FAIRSHARE)
    try:
        wait_for(lambda: written() > 0.1, timeout=10)
    finally:
        stop()
    server.create_all([pod("b-0", cpu="1", queue="b"), pod("a-2", cpu="1", queue="a")])
    _, stop = start_daemon(server, tmp_path, FAIRSHARE)
    try:
        wait_for(lambda: _bound(server)["b-0"] == 1, timeout=10)
        assert _bound(server)["a-2"] == 0
    finally:
        stop()


def test_a_pod_the_cache_refuses_is_named_by_its_warning(server: FakeApiServer, daemon):
    """A pod of ours whose group annotation has a '#' is read, then refused by the
    cache: its Warning is on the pod itself (by uid, where `kubectl describe` looks),
    and the other pods are scheduled."""
    server.create_all([node("n1", cpu="4"),
                       pod("hashed", cpu="1", annotations={
                           "scheduling.k8s.io/group-name": "bad#name"}),
                       pod("fine", cpu="1")])
    wait_for(lambda: _bound(server)["fine"] == 1)
    stored = server.get("Pod", "default", "hashed")

    def skipped() -> list[dict]:
        return [e for e in server.events() if e["reason"] == "BadObject"]

    wait_for(skipped)
    [event] = skipped()
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "hashed"
    assert event["involvedObject"]["uid"] == stored["metadata"]["uid"]
    assert "'#'" in event["message"]
    assert "hashed" not in _bound(server)


def _condition(server: FakeApiServer, name: str) -> str | None:
    """The message of a pod's PodScheduled=False condition, None without one."""
    for c in (server.get("Pod", "default", name).get("status") or {}).get("conditions", []):
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return c.get("message")
    return None


def test_a_status_write_that_fails_for_a_passing_reason_is_written_again(server, daemon):
    """A pod's condition, a PodGroup's status and a Queue's status each refused once
    with a 500: every one is written by a later cycle, though no session changes it."""
    server.fail("PATCH", r"/pods/big/status$", 500)
    server.fail("PATCH", r"/podgroups/train(/status)?$", 503)
    server.fail("PATCH", r"/queues/q/status$", 500)
    server.create_all([node("n1", cpu="4"), queue("q"), pod("big", cpu="100"),
                       *gang("train", 2, cpu="1", queue="q")])
    wait_for(lambda: _condition(server, "big") is not None)
    wait_for(lambda: (server.get("PodGroup", "default", "train").get("status") or {})
             .get("phase") == "Running")
    wait_for(lambda: (server.get("Queue", "", "q").get("status") or {})
             .get("allocated", {}).get("cpu") == "2")
    assert server.requests("PATCH", r"/pods/big/status$")[0].code == 500


def test_writes_kept_are_retried_until_one_fails_again(server: FakeApiServer):
    """Three conditions refused (the API server unwell): while it stays so, a cycle's
    retry makes one request, not one per write (each could take its timeout); once it
    is well, the three are written."""
    from vscheduler.cache import Cache
    from vscheduler.kube.apply import apply_event
    from vscheduler.kube.writers import KubeWriter, RateLimiter

    cache = Cache()
    for i in range(3):
        apply_event(cache, "Pod", "ADDED", server.create(pod(f"p{i}", cpu="1")))
    api = client.ApiClient(client.Configuration(host=server.url))
    writer = KubeWriter(api, RateLimiter(1e6, 10**6), scheduler_name="vscheduler")
    try:
        server.fail("PATCH", r"/pods/p\d/status$", 503, times=1_000)
        for i in range(3):
            writer.pending(cache.tasks[f"default/p{i}"], [f"no room for p{i}"])
        assert len(server.requests("PATCH", r"/pods/p\d/status$")) == 3
        writer.retry_unwritten()
        assert len(server.requests("PATCH", r"/pods/p\d/status$")) == 4
        server.clear_faults()
        writer.retry_unwritten()
        assert [_condition(server, f"p{i}") for i in range(3)] == [
            f"no room for p{i}" for i in range(3)]
        writer.retry_unwritten()  # (nothing left)
        assert len(server.requests("PATCH", r"/pods/p\d/status$")) == 7
    finally:
        writer.close()
        api.close()


def _writer(server: FakeApiServer, cache: Any) -> tuple[Any, Any]:
    from vscheduler.kube.writers import KubeWriter, RateLimiter

    api = client.ApiClient(client.Configuration(host=server.url))
    return KubeWriter(api, RateLimiter(1e6, 10**6), scheduler_name="vscheduler",
                      cache=cache), api


def test_a_kept_write_is_not_made_to_an_object_created_anew_under_its_name(server):
    """A Queue's status and a pod's condition refused (503); then each is deleted and
    created anew under its name. The retry writes neither onto the new object (the
    Queue's /status would take it: it takes no uid precondition)."""
    from vscheduler.cache import Cache
    from vscheduler.kube.apply import apply_event
    from vscheduler.resources import Resource

    cache = Cache()
    apply_event(cache, "Queue", "ADDED", server.create(queue("q")))
    apply_event(cache, "Pod", "ADDED", server.create(pod("p", cpu="1")))
    writer, api = _writer(server, cache)
    try:
        server.fail("PATCH", r"/queues/q/status$|/pods/p/status$", 503, times=2)
        writer.queue("q", Resource.from_k8s({"cpu": "1"}))
        writer.pending(cache.tasks["default/p"], ["no room"])
        for kind, namespace, name, obj in (("Queue", "", "q", queue("q")),
                                           ("Pod", "default", "p", pod("p", cpu="1"))):
            server.delete(kind, namespace, name)
            apply_event(cache, kind, "DELETED", server.get(kind, namespace, name) or obj)
            apply_event(cache, kind, "ADDED", server.create(obj))
        writer.retry_unwritten()
        assert len(server.requests("PATCH", r"/queues/q/status$|/pods/p/status$")) == 2
        assert not (server.get("Queue", "", "q").get("status") or {}).get("allocated")
        # The new pod, waiting for the same reason, is told so all the same.
        writer.pending(cache.tasks["default/p"], ["no room"])
        assert _condition(server, "p") == "no room"
    finally:
        writer.close()
        api.close()


def test_a_pods_write_meant_for_another_of_its_name_is_refused_by_the_server(server):
    """A write names its pod's uid: the API server refuses it (422, and it is not
    retried) for a pod of the same name created since, which the cache has not seen."""
    from vscheduler.cache import Cache
    from vscheduler.kube.apply import apply_event

    cache = Cache()
    apply_event(cache, "Pod", "ADDED", server.create(pod("p", cpu="1")))
    server.delete("Pod", "default", "p")
    server.create(pod("p", cpu="1"))
    writer, api = _writer(server, cache)
    try:
        writer.pending(cache.tasks["default/p"], ["no room"])
        [request] = server.requests("PATCH", r"/pods/p/status$")
        assert request.code == 422 and _condition(server, "p") is None
        writer.retry_unwritten()
        assert len(server.requests("PATCH", r"/pods/p/status$")) == 1
    finally:
        writer.close()
        api.close()


def test_a_status_write_refused_for_good_is_not_written_again(server, daemon):
    """A 422 (the write itself is wrong) is logged once, not retried every cycle."""
    server.fail("PATCH", r"/pods/big/status$", 422, times=1_000)
    server.create_all([node("n1", cpu="2"), pod("big", cpu="4")])
    wait_for(lambda: server.requests("PATCH", r"/pods/big/status$"))
    time.sleep(0.5)  # (ten cycles)
    assert len(server.requests("PATCH", r"/pods/big/status$")) == 1


def test_a_queue_deleted_and_created_again_gets_its_status_back(server, daemon):
    server.create_all([node("n1", cpu="4"), queue("q"), pod("p", cpu="1", queue="q")])
    wait_for(lambda: (server.get("Queue", "", "q").get("status") or {})
             .get("allocated", {}).get("cpu") == "1")
    server.delete("Queue", "", "q")
    wait_for(lambda: "q" not in daemon.cache.queues)
    server.create(queue("q"))
    wait_for(lambda: (server.get("Queue", "", "q").get("status") or {})
             .get("allocated", {}).get("cpu") == "1")


def test_every_pod_waiting_on_a_victims_room_is_nominated_and_told(server, tmp_path):
    """One 4-CPU victim frees room for two 1-CPU pods of the other queue: the one it
    was evicted for and the one that waits on the same release. Both show the node
    (nominatedNodeName, as the cluster autoscaler reads it) and why they are not bound
    (PodScheduled=False), and both are bound once the victim is gone."""
    daemon, stop = start_daemon(server, tmp_path, RECLAIM)
    try:
        server.create_all([node("n1", cpu="4"), queue("a"), queue("b"),
                           pod("a-0", cpu="4", queue="a", node_name="n1")])
        wait_for(lambda: "default/a-0" in daemon.cache.tasks)
        server.create_all([pod("b-0", cpu="1", queue="b"), pod("b-1", cpu="1", queue="b")])
        wait_for(lambda: server.get("Pod", "default", "a-0")["metadata"]
                 .get("deletionTimestamp"))
        for name in ("b-0", "b-1"):
            wait_for(lambda name=name: (server.get("Pod", "default", name).get("status")
                                        or {}).get("nominatedNodeName") == "n1")
            wait_for(lambda name=name: _condition(server, name) == (
                f"Pod default/{name} can possibly be assigned to n1, once resource is "
                "released"))
        assert not server.bindings()
        assert len([p for p in server.objects("Pod")
                    if p["metadata"].get("deletionTimestamp")]) == 1
        server.finish_deletion("default", "a-0")
        wait_for(lambda: _bound(server)["b-0"] == 1 and _bound(server)["b-1"] == 1,
                 timeout=10)
    finally:
        stop()


def test_pods_of_a_podgroup_refused_say_why_and_run_once_it_is_fixed(server, daemon):
    bad = podgroup("neg", 1)
    bad["spec"]["minMember"] = -2
    server.create_all([node("n1", cpu="4"), bad, pod("p", cpu="1", group="neg")])
    wait_for(lambda: _condition(server, "p") == (
        "PodGroup default/neg cannot be read (spec.minMember: must be 0 or more, got -2): "
        "the pod waits for it to be fixed"))
    assert any(e["reason"] == "FailedScheduling" and "cannot be read" in e["message"]
               and e["involvedObject"]["name"] == "p" for e in server.events())
    server.patch("PodGroup", "default", "neg", {"spec": {"minMember": 1}})
    wait_for(lambda: _bound(server)["p"] == 1, timeout=10)


def test_a_pod_waiting_on_no_node_is_nominated_to_none(server, daemon):
    """A pod nominated to a node it can no longer wait on (its victims' room went to
    nothing: the node is gone, say) loses the nomination: the cluster autoscaler would
    count it there."""
    stale = pod("big", cpu="8")
    stale["status"]["nominatedNodeName"] = "n1"
    server.create_all([node("n1", cpu="2"), stale])
    wait_for(lambda: _condition(server, "big") is not None)
    wait_for(lambda: "nominatedNodeName" not in server.get("Pod", "default", "big")["status"])
