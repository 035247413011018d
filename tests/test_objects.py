"""Kubernetes objects read into the scheduler's own: what each field becomes."""

from __future__ import annotations

import pytest

from tests.builders import pod, podgroup
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
