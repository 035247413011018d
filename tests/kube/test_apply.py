"""Watch events into the cache."""

from __future__ import annotations

import pytest

from tests.builders import node, pod, podgroup, priority_class, queue
from vscheduler.cache import Cache
from vscheduler.kube.apply import apply_event
from vscheduler.model import TaskStatus
from vscheduler.objects import BadObject


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
