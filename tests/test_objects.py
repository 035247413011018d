"""Kubernetes objects read into the scheduler's own: what each field becomes."""

from __future__ import annotations

import math

import pytest

from tests.builders import pod, podgroup
from vscheduler import objects
from vscheduler.cache import Cache
from vscheduler.objects import parse_pod, parse_podgroup

# strconv.ParseBool's spellings, which Volcano reads `volcano.sh/preemptable` with
# (pkg/scheduler/api: GetPodPreemptable for pods, extractPreemptable for PodGroups).
TRUE = ["1", "t", "T", "TRUE", "true", "True"]
FALSE = ["0", "f", "F", "FALSE", "false", "False"]
UNREADABLE = ["yes", "no", "tRuE", " true", "", "2"]
PREEMPTABLE = [(text, True) for text in TRUE] + [(text, False) for text in FALSE + UNREADABLE]
KEY = "volcano.sh/preemptable"


def _pod_task(**args: object):
    cache = Cache()
    cache.add_pod(parse_pod(pod("p", **args)))
    return cache.tasks["default/p"]


def _podgroup_job(obj: dict):
    cache = Cache()
    cache.add_podgroup(parse_podgroup(obj))
    return cache.jobs["default/g"]


def _labelled(obj: dict, labels: dict[str, str]) -> dict:
    obj["metadata"]["labels"] = labels
    return obj


@pytest.mark.parametrize(("text", "expected"), PREEMPTABLE)
def test_a_pod_reads_preemptable_as_volcano_does(text: str, expected: bool):
    assert _pod_task(annotations={KEY: text}).preemptable is expected
    assert _pod_task(labels={KEY: text}).preemptable is expected


@pytest.mark.parametrize(("text", "expected"), PREEMPTABLE)
def test_a_podgroup_reads_preemptable_as_a_pod_does(text: str, expected: bool):
    assert _podgroup_job(podgroup("g", annotations={KEY: text})).preemptable is expected
    assert _podgroup_job(_labelled(podgroup("g"), {KEY: text})).preemptable is expected


def test_the_annotation_wins_over_the_label_and_absent_is_each_kinds_default():
    assert _pod_task(annotations={KEY: "false"}, labels={KEY: "true"}).preemptable is False
    assert _podgroup_job(_labelled(podgroup("g", annotations={KEY: "1"}),
                                   {KEY: "0"})).preemptable is True
    # Volcano's defaults: a task may be evicted, a job is not preemptable
    assert _pod_task().preemptable is True
    assert _podgroup_job(podgroup("g")).preemptable is False


def test_a_pod_without_a_group_is_a_job_as_preemptable_as_the_pod():
    cache = Cache()
    cache.add_pod(parse_pod(pod("p", annotations={KEY: "True"})))
    cache.add_pod(parse_pod(pod("q", annotations={KEY: "F"})))
    assert cache.jobs["default/p#pod"].preemptable is True
    assert cache.jobs["default/q#pod"].preemptable is False


def test_times_without_a_zone_are_utc(monkeypatch):
    zoned = pod("a", creation="2024-01-01T00:00:00Z")
    naive = pod("b", creation="2024-01-01T00:00:00")
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    __import__("time").tzset()
    try:
        assert parse_pod(zoned).pod.creation == parse_pod(naive).pod.creation == 1704067200
    finally:
        monkeypatch.delenv("TZ")
        __import__("time").tzset()


def test_a_podgroup_is_read_whole():
    obj = podgroup("g", 3, queue="q", priority_class="high", min_task_member={"ps": 1},
                   min_resources={"cpu": "2"}, creation="2024-01-01T00:00:00Z",
                   phase="Running")
    obj["spec"]["scheduleTimeoutSeconds"] = 60
    obj["status"].update(running=2, succeeded="1", conditions=[
        {"type": "Scheduled", "status": "True", "reason": "r", "lastTransitionTime": "x"}])
    spec = parse_podgroup(obj)
    assert (spec.namespace, spec.name, spec.queue, spec.min_member, dict(spec.min_task_member),
            spec.min_resources.cpu, spec.priority_class_name, spec.creation,
            spec.schedule_timeout, spec.phase, spec.conditions, spec.counts) == (
        "default", "g", "q", 3, {"ps": 1}, 2000, "high", 1704067200, 60, "Running",
        (("Scheduled", "True", "r", ""),), (2, 1, 0))


def test_a_timeout_without_a_creation_time_to_count_from_is_none():
    obj = podgroup("g")
    obj["spec"]["scheduleTimeoutSeconds"] = 60
    assert parse_podgroup(obj).schedule_timeout is None


@pytest.mark.parametrize(("annotations", "labels", "group"), [
    ({"scheduling.k8s.io/group-name": "vc"}, {}, "vc"),
    ({}, {"scheduling.x-k8s.io/pod-group": "co"}, "co"),
    ({}, {"pod-group.scheduling.sigs.k8s.io": "old"}, "old"),
    ({"scheduling.k8s.io/group-name": "vc"}, {"scheduling.x-k8s.io/pod-group": "co"}, "vc"),
    ({}, {}, ""),
])
def test_a_pods_group_is_volcanos_annotation_else_a_coscheduling_label(
        annotations: dict, labels: dict, group: str):
    assert parse_pod(pod("p", annotations=annotations, labels=labels)).group == group


@pytest.mark.parametrize(("text", "priority"), [("7", 7), ("-3", -3), ("high", None),
                                                ("1.5", None)])
def test_a_task_priority_annotation_counts_only_as_an_integer(text: str, priority):
    parsed = parse_pod(pod("p", annotations={"volcano.sh/task-priority": text}))
    assert parsed.task_priority == priority


def test_a_pods_request_counts_init_containers_sidecars_and_overhead_as_kubernetes():
    obj = pod("p", cpu="1")
    obj["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        {"name": "init", "resources": {"requests": {"cpu": "3"}}}]
    obj["spec"]["overhead"] = {"cpu": "250m"}
    # max(containers + sidecars = 2, init peak 3 + sidecar started before it = 4) + overhead
    assert parse_pod(obj).resreq.cpu == 4250


def test_a_pods_fields_are_read_into_its_spec():
    obj = pod("job-worker-3", namespace="team", node_selector={"zone": "a"},
              tolerations=[{"key": "gpu", "operator": "Exists"}], host_ports=[8080],
              gates=["wait"], priority=5)
    parsed = parse_pod(obj)
    spec = parsed.pod
    assert (spec.key, spec.index, dict(spec.node_selector), spec.tolerations,
            spec.host_ports, spec.scheduling_gates, spec.priority) == (
        "team/job-worker-3", 3, {"zone": "a"}, (("gpu", "Exists", "", ""),),
        (("TCP", "0.0.0.0", 8080),), ("wait",), 5)


def test_seed_protection_reads_like_preemptable_on_pods_and_podgroups():
    from tests.builders import podgroup as group
    seed = "elastic.gpu/preemptible"
    assert _pod_task(annotations={seed: "false"}).preemptable is False
    assert _pod_task(labels={seed: "false"}).preemptable is False
    assert _pod_task(annotations={seed: "true"}).preemptable is True
    # Either one saying false protects.
    assert _pod_task(annotations={seed: "true", KEY: "false"}).preemptable is False
    assert _podgroup_job(group("g", annotations={seed: "false"})).spec.protected is True
    assert _podgroup_job(group("g", annotations={KEY: "0"})).spec.protected is True
    assert _podgroup_job(group("g")).spec.protected is False


def test_a_pods_start_time_and_a_min_runtime_annotation_are_read():
    from tests.builders import podgroup as group
    from tests.builders import queue
    from vscheduler.objects import BadObject, parse_queue
    obj = pod("p", node_name="n1")
    obj["status"]["startTime"] = "2025-01-01T00:00:10Z"
    assert parse_pod(obj).pod.start_time == 1735689610.0
    assert parse_pod(pod("p")).pod.start_time is None
    obj["status"]["startTime"] = "yesterday"
    with pytest.raises(BadObject, match=r"status\.startTime"):
        parse_pod(obj)
    guard = {"volcano.sh/min-runtime": "1h30m"}
    assert parse_podgroup(group("g", annotations=guard)).min_runtime == 5400
    assert parse_queue(queue("q", annotations=guard)).min_runtime == 5400
    assert parse_queue(queue("q")).min_runtime is None
    # (a malformed one guards for ever, and says why: see test_guards)
    spec = parse_podgroup(group("g", annotations={"volcano.sh/min-runtime": "-1m"}))
    assert spec.min_runtime == math.inf
    assert "volcano.sh/min-runtime" in spec.min_runtime_problem
    assert parse_queue(queue("q")).min_runtime_problem is None


def _pdb(spec: dict, status: dict | None = None) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": spec,
            "status": status or {}}


def test_a_disruption_budget_is_read_whole():
    from vscheduler.objects import parse_disruption_budget
    budget = parse_disruption_budget(_pdb(
        {"selector": {"matchLabels": {"app": "web"},
                      "matchExpressions": [{"key": "tier", "operator": "NotIn",
                                            "values": ["canary"]}]},
         "maxUnavailable": "25%"},
        {"disruptionsAllowed": 2, "disruptedPods": {"web-1": "2025-01-01T00:00:00Z"}}))
    assert budget.key == "shop/web"
    assert dict(budget.match_labels) == {"app": "web"}
    assert budget.match_expressions == (("tier", "NotIn", ("canary",)),)
    assert budget.max_unavailable == "25%" and budget.min_available is None
    assert budget.disruptions_allowed == 2 and budget.disrupted_pods == {"web-1"}
    plain = parse_disruption_budget(_pdb({"minAvailable": 3}))
    assert plain.min_available == 3 and plain.disruptions_allowed is None
    assert plain.selector_empty


@pytest.mark.parametrize(("spec", "words"), [
    ({"minAvailable": 1, "maxUnavailable": 1}, "cannot both"),
    ({"minAvailable": "150%"}, "at most 100%"),
    ({"minAvailable": -1}, "0 or more"),
    ({"maxUnavailable": "half"}, "integer or a percent"),
    ({"selector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}},
     "In, NotIn, Exists or DoesNotExist"),
    ({"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}, "need values"),
])
def test_a_bad_disruption_budget_is_refused_naming_the_field(spec: dict, words: str):
    from vscheduler.objects import BadObject, parse_disruption_budget
    with pytest.raises(BadObject, match=words):
        parse_disruption_budget(_pdb(spec))


def test_pods_that_read_the_same_labels_and_annotations_share_them(monkeypatch):
    # The pods of one job carry the same maps: read once, kept once (never changed).
    monkeypatch.setattr(objects, "_RECENT_STRINGS", {})  # (none kept by earlier tests)
    first = parse_pod(pod("g-0", group="g", labels={"app": "x"}, annotations={"a": "1"}))
    second = parse_pod(pod("g-1", group="g", labels={"app": "x"}, annotations={"a": "1"}))
    other = parse_pod(pod("h-0", group="h", labels={"app": "y"}, annotations={"a": "1"}))
    assert second.pod.annotations is first.pod.annotations
    assert second.pod.labels is first.pod.labels
    assert other.pod.labels is not first.pod.labels
    assert other.pod.labels == {"app": "y"} and first.pod.labels == {"app": "x"}
    assert other.pod.annotations is not first.pod.annotations  # (the group differs)
    assert first.group == "g" and other.group == "h"


def test_maps_read_after_many_others_are_still_read_right():
    # Past the number kept, what is kept is dropped; every pod still reads its own.
    read = [parse_pod(pod(f"p{i}", labels={"n": str(i % 5000)})) for i in range(10_000)]
    assert [p.pod.labels["n"] for p in read] == [str(i % 5000) for i in range(10_000)]


def test_a_large_map_is_read_but_not_kept(monkeypatch):
    monkeypatch.setattr(objects, "_RECENT_STRINGS", {})
    big = {"note": "x" * 10_000}
    first = parse_pod(pod("a", annotations=big))
    second = parse_pod(pod("b", annotations=big))
    assert first.pod.annotations == second.pod.annotations == big
    assert first.pod.annotations is not second.pod.annotations
    assert not objects._RECENT_STRINGS.get(tuple(big.items()))
