"""fairshare: a queue that held the cluster lately yields to one that did not; the usage
history survives a restart through the Queue's annotation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.builders import node, pod, podgroup, queue
from vscheduler.conf import ConfError, parse_conf
from vscheduler.plugins.fairshare import HISTORY, _moved
from vscheduler.simulate import Simulation

GPU = "nvidia.com/gpu"
START = "2026-01-01T00:00:00Z"
START_SECONDS = 1767225600.0


def conf(half_life: str | None = "1h") -> str:
    arguments = f", arguments: {{halfLife: {half_life}}}" if half_life is not None else ""
    return f"""
actions: "enqueue, allocate"
tiers:
- plugins: [{{name: fairshare{arguments}}}, {{name: priority}}, {{name: gang}}]
- plugins: [{{name: predicates}}, {{name: nodeorder}}]
"""


def gang(name: str, queue_name: str, pods: int = 4) -> list[dict[str, Any]]:
    return [podgroup(name, pods, queue=queue_name),
            *(pod(f"{name}-{i}", cpu="1", memory="1Gi", group=name, queue=queue_name,
                  **{GPU: "1"}) for i in range(pods))]


def cluster(history: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return [node("n0", cpu="16", memory="64Gi", **{GPU: "4"}),
            queue("a", annotations={HISTORY: history["a"]} if history else None),
            queue("b")]


def run(objects: list[dict[str, Any]], conf_text: str, sessions: int = 1,
        interval: float = 600.0) -> Simulation:
    simulation = Simulation(parse_conf(conf_text, "test"), now=START_SECONDS,
                            session_seconds=interval)
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    simulation.run(sessions)
    return simulation


def winner(simulation: Simulation) -> str:
    """Which queue's gang got the cluster."""
    queues = {key.split("/")[1][0] for key in simulation.report.binds}
    assert len(queues) == 1, simulation.report.binds
    return queues.pop()


@pytest.mark.parametrize(("given", "words"), [
    (None, "argument 'halfLife' is required"),
    ("0", "must be a duration above zero"),
    ("0s", "must be a duration above zero"),
    ("soon", "must be a duration like")])
def test_a_missing_or_zero_half_life_is_refused_not_quietly_off(given, words):
    with pytest.raises(ConfError, match=words):
        parse_conf(conf(given), "test")


def test_the_queue_that_held_the_cluster_for_the_last_hour_yields():
    """a's gang holds all four GPUs for an hour (six sessions ten minutes apart), then
    finishes; gangs of both queues arrive for the whole cluster. b, equal but idle all
    hour, gets it. Without the history, a (the first by name) would."""
    simulation = run([*cluster(), *gang("old", "a")], conf(), sessions=6)
    for key in list(simulation.cache.tasks):
        simulation.cache.delete_pod(key)
    simulation.load([(f"later#{i}", obj) for i, obj in
                     enumerate([*gang("a1", "a"), *gang("b1", "b")])])
    simulation.report.binds.clear()
    simulation.step()
    assert winner(simulation) == "b"
    without = run([*cluster(), *gang("a1", "a"), *gang("b1", "b")],
                  conf().replace("{name: fairshare, arguments: {halfLife: 1h}}, ", ""))
    assert winner(without) == "a"


def test_the_history_survives_a_restart_through_the_queue_annotation():
    """A first run writes a's history on its Queue; a scheduler started afresh on the
    Queue as written (a restart, a new leader) serves b first from its first session.
    An unreadable annotation is taken as no history, with a Warning."""
    first = run([*cluster(), *gang("old", "a")], conf(), sessions=6)
    written = first.report.as_dict()["queues"]["a"]["annotations"][HISTORY]
    history = json.loads(written)
    # (written by the last session that ran: sessions with nothing to do are skipped,
    # and the history moves on from its time when the next one runs)
    assert 0 < history["share"] < 1 and history["at"] > START
    restarted = run([*cluster({"a": written}), *gang("a1", "a"), *gang("b1", "b")], conf())
    assert winner(restarted) == "b"
    broken = run([*cluster({"a": "{not json"}), *gang("a1", "a"), *gang("b1", "b")], conf())
    assert winner(broken) == "a"
    assert any(e["object"] == "Queue/a" and e["reason"] == "InvalidUsageHistory"
               for e in broken.report.as_dict()["events"])


def test_a_clock_past_the_last_year_a_date_holds_stamps_its_last_second():
    """Sessions a year apart from the end of 9999 (`--now`, `--session-interval`): the
    history is written at datetime's last second, not a crash at year 10000; a
    scheduler started later reads it back, and the queue that held the cluster yields."""
    simulation = Simulation(parse_conf(conf(), "test"), now=253402300000.0,
                            session_seconds=365 * 86400.0)
    simulation.load([(f"test#{i}", obj) for i, obj in
                     enumerate([*cluster(), *gang("old", "a")])])
    simulation.run(3)
    written = simulation.report.as_dict()["queues"]["a"]["annotations"][HISTORY]
    assert json.loads(written)["at"] == "9999-12-31T23:59:59Z"
    again = Simulation(parse_conf(conf(), "test"), now=253402300000.0 + 3 * 365 * 86400.0)
    again.load([(f"test#{i}", obj) for i, obj in
                enumerate([*cluster({"a": written}), *gang("a1", "a"), *gang("b1", "b")])])
    again.run(1)
    assert winner(again) == "b"


def test_a_clock_before_the_year_1000_writes_a_history_that_reads_back():
    """Four digits of year, as RFC 3339 has them (strftime wrote `500-01-01...`, which
    read back as an unreadable history)."""
    early = -46388678400.0  # 0500-01-01T00:00:00Z
    first = Simulation(parse_conf(conf(), "test"), now=early, session_seconds=600.0)
    first.load([(f"test#{i}", obj) for i, obj in enumerate([*cluster(), *gang("old", "a")])])
    first.run(6)
    written = first.report.as_dict()["queues"]["a"]["annotations"][HISTORY]
    assert json.loads(written)["at"].startswith("0500-01-01T")
    again = run([*cluster({"a": written}), *gang("a1", "a"), *gang("b1", "b")], conf())
    assert winner(again) == "b"
    assert not any(e["reason"] == "InvalidUsageHistory"
                   for e in again.report.as_dict()["events"])


def test_the_history_moves_toward_what_is_held_by_half_each_half_life():
    assert _moved(0.0, 3600.0, 3600.0, 1.0) == pytest.approx(0.5)
    assert _moved(1.0, 7200.0, 3600.0, 0.0) == pytest.approx(0.25)
    assert _moved(0.3, 0.0, 3600.0, 1.0) == 0.3


def test_hours_with_no_session_count_what_the_queue_held_all_along():
    """a's gang holds the cluster for ten hours in which nothing changes (sessions
    have nothing to do and are skipped); then it finishes. Its history says it held
    nearly all of the cluster, not that it was idle."""
    simulation = run([*cluster(), *gang("old", "a")], conf(), sessions=11,
                     interval=3600.0)
    for key in list(simulation.cache.tasks):
        simulation.cache.delete_pod(key)
    simulation.step()
    written = simulation.report.as_dict()["queues"]["a"]["annotations"][HISTORY]
    assert json.loads(written)["share"] > 0.99


def test_a_restart_moves_the_history_on_with_what_the_queue_held():
    """Read back ten hours after it was written, with the queue holding the whole
    cluster then: the history moves on as if a scheduler had watched all along."""
    history = json.dumps({"share": 0.1, "held": 1.0, "at": START})
    simulation = Simulation(parse_conf(conf(), "test"), now=START_SECONDS + 36000.0)
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(
        [*cluster({"a": history}), *gang("b1", "b")])])
    simulation.step()
    written = simulation.report.as_dict()["queues"]["a"]["annotations"][HISTORY]
    assert json.loads(written)["share"] > 0.99


@pytest.mark.parametrize(("raw", "words"), [
    ('{"share": 1' + "0" * 400 + ', "at": "2026-01-01T00:00:00Z"}',
     "'share' must be a number from 0 to 1, got 1000"),
    ('{"share": 0.5, "at": "not a time"}', "'at' must be a time with a zone, like "),
    ('{"share": 0.5, "at": "2026-01-01T00:00:00"}', "'at' must be a time with a zone"),
    ('{"share": 0.5, "at": "2026-01-01T00:00:00+25:00"}', "'at' must be a time with a zone"),
    ("[1, 2]", "expected a JSON object like {"), ("null", "expected a JSON object like {"),
    ('{"share": 0.5}', "'at' must be a time like 2026-05-01T10:00:00Z, got None"),
    ('{"at": "2026-01-01T00:00:00Z"}', "'share' is missing"),
    ('{"share": true, "at": "2026-01-01T00:00:00Z"}', "'share' must be a number"),
    ("{" * 200, "nested more than"), ('{"share": -1, "at": 5}', "'share' must be a number")])
def test_an_unreadable_history_is_a_warning_that_says_why_and_no_crash(raw, words):
    simulation = run([*cluster({"a": raw}), *gang("a1", "a"), *gang("b1", "b")], conf())
    assert simulation.report.binds
    [message] = [e["message"] for e in simulation.report.as_dict()["events"]
                 if e["object"] == "Queue/a" and e["reason"] == "InvalidUsageHistory"]
    assert message.startswith(f"{HISTORY}: ") and words in message, message
    assert message.endswith("; taken as no history")
