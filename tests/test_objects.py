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
