"""Watch events into the cache."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import PREEMPT_CONF, conf, node, pod, podgroup, priority_class, queue
from vscheduler.cache import Cache
from vscheduler.kube.apply import apply_event
from vscheduler.model import TaskStatus
from vscheduler.objects import BadObject
from vscheduler.scheduler import Scheduler


def test_objects_come_and_go():
    cache = Cache()
    apply_event(cache, "Node", "ADDED", node("n1", cpu="4"))
    apply_event(cache, "Queue", "ADDED", queue("q"))
    apply_event(cache, "PriorityClass", "ADDED", priority_class("high", 10))
    apply_event(cache, "PodGroup", "ADDED", podgroup("g", 1, queue="q"))
    apply_event(cache, "Pod", "ADDED", pod("g-0", cpu="1", group="g"))
    assert cache.jobs["default/g"].queue == "q"
    assert cache.tasks["default/g-0"].status == TaskStatus.PENDING
    apply_event(cache, "Pod", "MODIFIED", pod("g-0", cpu="1", group="g", node_name="n1"))
    assert cache.nodes["n1"].idle.cpu == 3000
    apply_event(cache, "Pod", "DELETED", pod("g-0", cpu="1", group="g", node_name="n1"))
    assert "default/g-0" not in cache.tasks and cache.nodes["n1"].idle.cpu == 4000
    for kind, obj in (("PodGroup", podgroup("g", 1)), ("Queue", queue("q")),
                      ("PriorityClass", priority_class("high", 10)), ("Node", node("n1"))):
        apply_event(cache, kind, "DELETED", obj)
    assert not cache.nodes and not cache.queues and not cache.priority_classes
    assert "default/g" not in cache.podgroups


def test_a_bind_in_flight_is_not_undone_by_an_older_pod_view():
    cache = Cache()
    apply_event(cache, "Node", "ADDED", node("n1", cpu="4"))
    apply_event(cache, "Pod", "ADDED", pod("p", cpu="1"))
    cache.bind("default/p", "n1")
    # The pod's status changes (our own condition, say) before the Binding shows.
    apply_event(cache, "Pod", "MODIFIED", pod("p", cpu="1"))
    assert cache.tasks["default/p"].node_name == "n1"
    assert cache.nodes["n1"].idle.cpu == 3000


def test_malformed_object_raises_and_is_left_out():
    cache = Cache()
    with pytest.raises(BadObject):
        apply_event(cache, "Pod", "ADDED", pod("p", cpu="lots"))
    assert not cache.tasks


def test_an_eviction_in_flight_is_not_undone_by_an_older_pod_view():
    cache = Cache()
    apply_event(cache, "Node", "ADDED", node("n1", cpu="4"))
    apply_event(cache, "Pod", "ADDED", pod("p", cpu="1", node_name="n1"))
    cache.set_releasing("default/p")
    # The kubelet's last status write before the eviction reaches us after it.
    apply_event(cache, "Pod", "MODIFIED", pod("p", cpu="1", node_name="n1"))
    assert cache.tasks["default/p"].status == TaskStatus.RELEASING
    # The API server's view of the eviction, then the pod's end, are taken.
    deleting = pod("p", cpu="1", node_name="n1")
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    apply_event(cache, "Pod", "MODIFIED", deleting)
    assert cache.tasks["default/p"].status == TaskStatus.RELEASING
    apply_event(cache, "Pod", "MODIFIED", pod("p", cpu="1", node_name="n1", phase="Failed"))
    assert cache.tasks["default/p"].status == TaskStatus.FAILED


def test_a_refused_eviction_lets_the_pod_run_on():
    cache = Cache()
    apply_event(cache, "Node", "ADDED", node("n1", cpu="4"))
    apply_event(cache, "Pod", "ADDED", pod("p", cpu="1", node_name="n1"))
    cache.set_releasing("default/p")
    cache.unevict("default/p")
    apply_event(cache, "Pod", "MODIFIED", pod("p", cpu="1", node_name="n1"))
    assert cache.tasks["default/p"].status == TaskStatus.RUNNING


class _Writes:
    """The scheduler's receivers, keeping the evictions and dropping the rest."""

    def __init__(self) -> None:
        self.evicted: list[str] = []

    def evict(self, task: Any, eviction: Any) -> None:
        self.evicted.append(task.key)

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


def test_a_stale_view_of_a_victim_does_not_make_a_second_victim():
    """A high-priority pod preempts one of two low-priority pods on a full node. A view
    of the victim from before its eviction arrives after it: the next session still sees
    the victim's room releasing, pipelines the pod there and evicts no one else."""
    cache = Cache()
    for kind, obj in (("PriorityClass", priority_class("low", 1)),
                      ("PriorityClass", priority_class("high", 100)),
                      ("Node", node("n1", cpu="4")),
                      ("Pod", pod("low-0", cpu="2", node_name="n1", priority_class="low",
                                  creation="2024-01-01T00:00:00Z")),
                      ("Pod", pod("low-1", cpu="2", node_name="n1", priority_class="low",
                                  creation="2024-01-01T00:01:00Z")),
                      ("Pod", pod("high", cpu="2", priority_class="high"))):
        apply_event(cache, kind, "ADDED", obj)
    writes = _Writes()
    scheduler = Scheduler(cache, conf(PREEMPT_CONF), binder=writes, evictor=writes,
                          status=writes, events=writes)
    scheduler.run_once()
    assert len(writes.evicted) == 1
    victim = writes.evicted[0].split("/")[1]
    apply_event(cache, "Pod", "MODIFIED", pod(victim, cpu="2", node_name="n1",
                                              priority_class="low"))
    for _ in range(3):
        scheduler.run_once()
    assert writes.evicted == [f"default/{victim}"]
    assert cache.tasks[f"default/{victim}"].status == TaskStatus.RELEASING


def _with_uid(obj: dict, uid: str) -> dict:
    obj["metadata"]["uid"] = uid
    return obj


def test_a_pod_created_anew_under_the_same_name_is_taken_as_it_is():
    """A pod bound (or being evicted), then deleted and created again under its name
    while the watch was away (a StatefulSet's pod, a relist after 410 Gone): the new
    pod, another uid, is not an older view of the first and is taken as it is."""
    cache = Cache()
    apply_event(cache, "Node", "ADDED", node("n1", cpu="4"))
    apply_event(cache, "Pod", "ADDED", _with_uid(pod("web-0", cpu="2"), "first"))
    cache.bind("default/web-0", "n1")
    apply_event(cache, "Pod", "MODIFIED", _with_uid(pod("web-0", cpu="2"), "second"))
    task = cache.tasks["default/web-0"]
    assert (task.uid, task.status, task.node_name) == ("second", TaskStatus.PENDING, "")
    assert cache.nodes["n1"].idle.cpu == 4000

    apply_event(cache, "Pod", "MODIFIED",
                _with_uid(pod("web-0", cpu="2", node_name="n1"), "second"))
    cache.set_releasing("default/web-0")
    apply_event(cache, "Pod", "MODIFIED",
                _with_uid(pod("web-0", cpu="1", node_name="n1"), "third"))
    task = cache.tasks["default/web-0"]
    assert (task.uid, task.status) == ("third", TaskStatus.RUNNING)
    assert cache.nodes["n1"].idle.cpu == 3000
