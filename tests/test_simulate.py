"""The simulated world between sessions, and sessions that have nothing to decide."""

from __future__ import annotations

import json

import pytest

from tests.builders import conf, gang, node, pod
from vscheduler.cache import Cache
from vscheduler.objects import parse_pod
from vscheduler.simulate import Simulation


def _simulation(objects: list[dict]) -> Simulation:
    simulation = Simulation(conf())
    simulation.load([(f"t#{i}", o) for i, o in enumerate(objects)])
    return simulation


OBJECTS = [node("n1", cpu="4"), *gang("g", 2, cpu="1"), pod("solo", cpu="1")]


def test_bound_pods_start_running_and_their_podgroup_follows():
    simulation = _simulation(OBJECTS)
    simulation.step()
    assert simulation.cache.tasks["default/g-0"].node_name == "n1"
    assert simulation.report.as_dict()["podGroups"]["default/g"]["phase"] == "Inqueue"
    simulation.step()
    assert simulation.report.as_dict()["podGroups"]["default/g"]["phase"] == "Running"


def test_a_settled_cluster_with_nothing_pending_is_not_scheduled_again():
    simulation = _simulation(OBJECTS)
    simulation.step()
    simulation.step()  # pods started running: statuses change, a full session
    assert "allocate" in simulation.timings
    simulation.step()
    assert set(simulation.timings) == {"idle"}
    # A new pod is work again.
    simulation.cache.add_pod(parse_pod(pod("late", cpu="1"), 99.0))
    simulation.step()
    assert "allocate" in simulation.timings
    assert simulation.report.binds["default/late"] == "n1"


def test_skipping_quiet_sessions_changes_no_decision(monkeypatch: pytest.MonkeyPatch):
    simulation = _simulation(OBJECTS)
    simulation.run(5)
    skipped = json.dumps(simulation.report.as_dict())
    monkeypatch.setattr(Cache, "has_work", lambda self: True)
    simulation = _simulation(OBJECTS)
    simulation.run(5)
    assert json.dumps(simulation.report.as_dict()) == skipped


def test_pending_work_keeps_sessions_running():
    simulation = _simulation([node("n1", cpu="1"), pod("too-big", cpu="2")])
    for _ in range(3):
        simulation.step()
        assert "allocate" in simulation.timings
    assert simulation.report.as_dict()["pending"]["default/too-big"]
