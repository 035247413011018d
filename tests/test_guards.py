"""Guards on eviction: protection by annotation on pods and PodGroups, the minimum
runtime before a pod may be a victim, and which victims would break a
PodDisruptionBudget."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import PREEMPT_CONF, gang, node, pod, podgroup, priority_class, queue, simulate
from tests.builders import conf as build_conf
from vscheduler.conf import ConfError
from vscheduler.guards import (
    allowed_disruptions,
    budget_selects,
    min_runtime_of,
    parse_duration,
    split_by_budgets,
    too_young,
)
from vscheduler.model import Task, TaskStatus
from vscheduler.objects import parse_disruption_budget
from vscheduler.resources import Resource
from vscheduler.specs import DisruptionBudget, Pod

RECLAIM = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false},
            {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
# Without enqueue: allocate admits every job, and preempt acts for admitted jobs only.
PREEMPT = PREEMPT_CONF
NOW = "2025-01-01T01:00:00Z"  # the reclaimer's creation: simulate's clock
CLASSES = [priority_class("high", 1000), priority_class("low", 10)]
PROTECTIONS = [{"volcano.sh/preemptable": "false"}, {"elastic.gpu/preemptible": "false"}]


def _with_args(conf_text: str, action: str, args: str) -> str:
    return conf_text + f"configurations:\n- name: {action}\n  arguments: {args}\n"


def _running(name: str, queue_name: str, node_name: str, *, started: str | None = None,
             **args) -> dict:
    obj = pod(name, cpu="1", queue=queue_name, node_name=node_name, **args)
    if started:
        obj["status"]["startTime"] = started
    return obj


def _preemptee(name: str, *, started: str | None = None, **args) -> dict:
    obj = pod(name, cpu="1", node_name="n1", priority_class="low", **args)
    if started:
        obj["status"]["startTime"] = started
    return obj


def _reclaim_scene(victim_args: dict, group: dict | None = None,
                   queue_annotations: dict | None = None) -> list[dict]:
    """Queue a fills a 4-CPU node; queue b's pending pod wants one CPU back."""
    pods = [_running(f"a-{i}", "a", "n1", **victim_args) for i in range(4)]
    if group is not None:
        for obj in pods:
            obj["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "ga"
        pods.insert(0, podgroup("ga", 1, queue="a", annotations=group, phase="Running"))
    return [node("n1", cpu="4"), queue("a", annotations=queue_annotations), queue("b"),
            *pods, pod("b-0", cpu="1", queue="b", creation=NOW)]


# --------------------------------------------------------------------------- protection


@pytest.mark.parametrize("protect", PROTECTIONS)
def test_a_protected_pod_is_never_a_victim(protect: dict):
    assert simulate(_reclaim_scene({"annotations": protect}), RECLAIM)["evictions"] == []
    assert len(simulate(_reclaim_scene({}), RECLAIM)["evictions"]) == 1


@pytest.mark.parametrize("protect", PROTECTIONS)
def test_a_protected_podgroups_pods_are_never_victims(protect: dict):
    assert simulate(_reclaim_scene({}, group=protect), RECLAIM)["evictions"] == []
    assert len(simulate(_reclaim_scene({}, group={}), RECLAIM)["evictions"]) == 1


@pytest.mark.parametrize("protect", PROTECTIONS)
def test_preempt_spares_protected_pods_of_its_own_queue(protect: dict):
    objects = [*CLASSES, node("n1", cpu="2"),
               *(_preemptee(f"low-{i}", annotations=dict(protect)) for i in range(2)),
               pod("high", cpu="1", priority_class="high", creation=NOW)]
    assert simulate(objects, PREEMPT)["evictions"] == []
    for obj in objects[3:5]:
        for key in protect:
            del obj["metadata"]["annotations"][key]
    assert len(simulate(objects, PREEMPT)["evictions"]) == 1


# --------------------------------------------------------------------------- min runtime


def test_a_pod_younger_than_the_minimum_runtime_is_never_a_victim():
    young = _reclaim_scene({"started": "2025-01-01T00:55:00Z"})  # 5 minutes at NOW
    old = _reclaim_scene({"started": "2025-01-01T00:45:00Z"})  # 15 minutes
    ten_minutes = _with_args(RECLAIM, "reclaim", "{minRuntime: 10m}")
    assert simulate(young, ten_minutes)["evictions"] == []
    assert len(simulate(old, ten_minutes)["evictions"]) == 1
    assert len(simulate(young, RECLAIM)["evictions"]) == 1  # 0, the default, guards nothing


def test_a_pod_with_no_start_time_counts_its_age_from_its_creation():
    """No status.startTime (a manifest, a pod bound but not started): it cannot have run
    longer than since its creation, and with no creation time either it is guarded."""
    ten_minutes = _with_args(RECLAIM, "reclaim", "{minRuntime: 10m}")
    young = _reclaim_scene({"creation": "2025-01-01T00:55:00Z"})
    old = _reclaim_scene({"creation": "2025-01-01T00:45:00Z"})
    assert simulate(young, ten_minutes)["evictions"] == []
    assert len(simulate(old, ten_minutes)["evictions"]) == 1


def test_only_the_old_enough_pods_are_victims():
    objects = _reclaim_scene({})
    for i, started in enumerate(("00:59:00", "00:40:00", "00:58:00", "00:57:00")):
        objects[3 + i]["status"]["startTime"] = f"2025-01-01T{started}Z"
    report = simulate(objects, _with_args(RECLAIM, "reclaim", "{minRuntime: 10m}"))
    assert [e["pod"] for e in report["evictions"]] == ["default/a-1"]


def test_a_queue_or_podgroup_annotation_overrides_the_argument():
    young = {"started": "2025-01-01T00:55:00Z"}
    guard = {"volcano.sh/min-runtime": "10m"}
    assert simulate(_reclaim_scene(young, queue_annotations=guard), RECLAIM)["evictions"] == []
    assert simulate(_reclaim_scene(young, group=guard), RECLAIM)["evictions"] == []
    # The PodGroup is more specific than the queue, the queue than the argument.
    lenient = {"volcano.sh/min-runtime": "1m"}
    strict = _with_args(RECLAIM, "reclaim", "{minRuntime: 1h}")
    assert len(simulate(_reclaim_scene(young, group=lenient, queue_annotations=guard),
                        RECLAIM)["evictions"]) == 1
    assert len(simulate(_reclaim_scene(young, queue_annotations=lenient),
                        strict)["evictions"]) == 1
    assert simulate(_reclaim_scene(young), strict)["evictions"] == []


def test_preempt_takes_the_minimum_runtime_too():
    objects = [*CLASSES, node("n1", cpu="1"),
               _preemptee("low", started="2025-01-01T00:59:00Z"),
               pod("high", cpu="1", priority_class="high", creation=NOW)]
    assert simulate(objects, _with_args(PREEMPT, "preempt", "{minRuntime: 5m}"))[
        "evictions"] == []
    assert len(simulate(objects, _with_args(PREEMPT, "preempt", "{minRuntime: 30s}"))[
        "evictions"]) == 1


@pytest.mark.parametrize("bad", ["10", "ten minutes", "-5m", "1d", "", "m"])
def test_a_bad_minimum_runtime_argument_is_refused_with_the_conf(bad: str):
    with pytest.raises(ConfError, match="minRuntime"):
        build_conf(_with_args(RECLAIM, "reclaim", f"{{minRuntime: '{bad}'}}"))


@pytest.mark.parametrize("where", ["queue", "podgroup"])
def test_a_bad_minimum_runtime_annotation_guards_its_pods_and_keeps_its_object(where: str):
    """A typo in a guard neither drops the queue (every pod of it would wait for a queue
    "not found") nor lets its pods go: they are guarded, with a Warning that says why."""
    bad = {"volcano.sh/min-runtime": "soon"}
    objects = (_reclaim_scene({}, queue_annotations=bad) if where == "queue"
               else _reclaim_scene({}, group=bad))
    report = simulate(objects, RECLAIM)
    assert report["evictions"] == []
    assert report["pending"]  # (b-0 waits: nothing may go for it)
    obj = "Queue/a" if where == "queue" else "PodGroup/default/ga"
    [warning] = [e for e in report["events"] if e["reason"] == "InvalidMinRuntime"]
    assert warning["object"] == obj and warning["type"] == "Warning"
    assert "'soon'" in warning["message"] and "not evicted" in warning["message"]
    assert not any(e["reason"] == "BadObject" for e in report["events"])
    # With room for b-0 and one more pod of queue a: the queue is still scheduled.
    objects += [node("n2", cpu="2"), pod("a-new", cpu="1", queue="a", creation=NOW)]
    report = simulate(objects, RECLAIM)
    assert report["binds"] == {"default/a-new": "n2", "default/b-0": "n2"}


def test_a_bad_queue_min_runtime_a_podgroup_overrides_is_not_warned_of():
    """The PodGroup's own (valid) annotation says its pods' minimum runtime: the queue's
    unreadable one does not apply to them, and a Warning that their pods are guarded
    would be false."""
    objects = _reclaim_scene({}, group={"volcano.sh/min-runtime": "0"},
                             queue_annotations={"volcano.sh/min-runtime": "soon"})
    report = simulate(objects, RECLAIM)
    assert len(report["evictions"]) == 1
    assert not any(e["reason"] == "InvalidMinRuntime" for e in report["events"])


@pytest.mark.parametrize(("text", "seconds"), [
    ("0", 0), ("0s", 0), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("1.5h", 5400),
    ("500ms", 0.5), ("2h45m30.5s", 9930.5), (".5m", 30)])
def test_durations_read_as_go_reads_them(text: str, seconds: float):
    assert parse_duration(text) == pytest.approx(seconds)


@given(st.integers(0, 1000), st.integers(0, 59), st.integers(0, 59))
def test_a_composed_duration_is_the_sum_of_its_parts(hours: int, minutes: int, seconds: int):
    text = f"{hours}h{minutes}m{seconds}s"
    assert parse_duration(text) == hours * 3600 + minutes * 60 + seconds


def test_the_most_specific_minimum_runtime_wins_and_an_unknown_start_is_guarded():
    assert min_runtime_of(60, None, None) == 60
    assert min_runtime_of(60, 600, None) == 600
    assert min_runtime_of(60, 600, 0) == 0
    assert too_young(1000.0, 1059.0, 60) and not too_young(1000.0, 1060.0, 60)
    assert too_young(None, 0.0, 60) and not too_young(1000.0, 1001.0, 0)
    assert not too_young(None, 0.0, 0)


# --------------------------------------------------------------------------- budgets


def _task(name: str, labels: dict[str, str], status=TaskStatus.RUNNING,
          namespace: str = "default") -> Task:
    return Task(Pod(name, namespace, name, labels=labels), Resource(), "job", status, "n1")


def _budget(**spec) -> DisruptionBudget:
    return parse_disruption_budget({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                    "metadata": {"name": "b", "namespace": "default"},
                                    **spec})


def test_victims_beyond_a_budgets_allowed_disruptions_violate_it():
    budget = _budget(spec={"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1},
                     status={"disruptionsAllowed": 2})
    web = [_task(f"web-{i}", {"app": "web"}) for i in range(4)]
    other = _task("db", {"app": "db"})
    violating, sparing = split_by_budgets([web[0], other, web[1], web[2]], [budget])
    assert [t.name for t in sparing] == ["web-0", "db", "web-1"]
    assert [t.name for t in violating] == ["web-2"]


def test_a_budget_without_status_counts_its_pods_as_the_controller_does():
    pods = [_task(f"web-{i}", {"app": "web"}) for i in range(4)]
    pods.append(_task("web-4", {"app": "web"}, status=TaskStatus.PENDING))
    at_least_three = _budget(spec={"selector": {"matchLabels": {"app": "web"}},
                                   "minAvailable": 3})
    violating, sparing = split_by_budgets(pods[:3], [at_least_three], pods)
    assert len(sparing) == 1 and len(violating) == 2  # 4 healthy, 3 must stay
    # 50% of 5 expected, rounded up, is 3 down at most; one is down already.
    half = _budget(spec={"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "50%"})
    violating, sparing = split_by_budgets(pods[:4], [half], pods)
    assert len(sparing) == 2 and len(violating) == 2


def test_an_empty_selector_a_pod_already_disrupted_and_another_namespace_cost_nothing():
    empty = _budget(spec={"minAvailable": 10}, status={"disruptionsAllowed": 0})
    web = _task("web-0", {"app": "web"})
    assert split_by_budgets([web], [empty]) == ([], [web])
    disrupted = _budget(spec={"selector": {"matchLabels": {"app": "web"}}},
                        status={"disruptionsAllowed": 0,
                                "disruptedPods": {"web-0": "2025-01-01T00:00:00Z"}})
    assert split_by_budgets([web], [disrupted]) == ([], [web])
    elsewhere = _task("web-0", {"app": "web"}, namespace="other")
    closed = _budget(spec={"selector": {"matchLabels": {"app": "web"}}},
                     status={"disruptionsAllowed": 0})
    assert split_by_budgets([elsewhere, web], [closed]) == ([web], [elsewhere])


def test_match_expressions_select_as_label_selectors_do():
    budget = _budget(spec={"selector": {"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["gpu", "cpu"]},
        {"key": "canary", "operator": "DoesNotExist"}]}})
    assert budget_selects(budget, Pod("a", "default", "a", labels={"tier": "gpu"}))
    assert not budget_selects(budget, Pod("b", "default", "b",
                                          labels={"tier": "gpu", "canary": "1"}))
    assert not budget_selects(budget, Pod("c", "default", "c", labels={"tier": "db"}))


@given(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20))
def test_victims_sparing_a_budget_never_exceed_what_it_allows(healthy: int, pending: int,
                                                               min_available: int):
    pods = [_task(f"p-{i}", {"app": "x"}) for i in range(healthy)]
    pods += [_task(f"q-{i}", {"app": "x"}, status=TaskStatus.PENDING) for i in range(pending)]
    budget = _budget(spec={"selector": {"matchLabels": {"app": "x"}},
                           "minAvailable": min_available})
    violating, sparing = split_by_budgets(pods[:healthy], [budget], pods)
    allowed = allowed_disruptions(budget, healthy, healthy + pending)
    assert len(sparing) == min(healthy, allowed) == max(0, min(healthy,
                                                               healthy - min_available))
    assert len(violating) + len(sparing) == healthy


def test_gang_scenes_keep_their_gangs_under_the_guard():
    # A gang of two, both too young: neither goes, and the gang stays whole.
    objects = [node("n1", cpu="2"), queue("a"), queue("b"),
               *gang("ga", 2, queue="a", node_name="n1"),
               pod("b-0", cpu="1", queue="b", creation=NOW)]
    for obj in objects[4:6]:
        obj["status"]["startTime"] = "2025-01-01T00:59:30Z"
    report = simulate(objects, _with_args(RECLAIM, "reclaim", "{minRuntime: 1m}"))
    assert report["evictions"] == []
    report = simulate(objects, _with_args(RECLAIM, "reclaim", "{minRuntime: 10s}"))
    assert len(report["evictions"]) == 2  # old enough: the gang goes whole
