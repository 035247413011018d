"""scheduleTimeoutSeconds (seed 001): a PodGroup still short of minAvailable that long
after its creation is given up and marked, once, with an event."""

from __future__ import annotations

from typing import Any

from tests import builders as b
from vscheduler.conf import DEFAULT_CONF, parse_conf
from vscheduler.simulate import Simulation

CREATED = "2026-05-01T10:00:00Z"


def _group(name: str, size: int, timeout: int | None, *, cpu: str = "1",
           created: str | None = CREATED) -> list[dict[str, Any]]:
    objs = b.gang(name, size, cpu=cpu)
    if created:
        objs[0]["metadata"]["creationTimestamp"] = created
    if timeout is not None:
        objs[0]["spec"]["scheduleTimeoutSeconds"] = timeout
    return objs


def _run(objects: list[dict[str, Any]], now: str | None, sessions: int = 1) -> Simulation:
    from vscheduler.objects import timestamp_of
    start = timestamp_of({"metadata": {"creationTimestamp": now}}) if now else None
    simulation = Simulation(parse_conf(DEFAULT_CONF), now=start)
    simulation.load([(f"t#{i}", o) for i, o in enumerate(objects)])
    simulation.run(sessions)
    return simulation


def _conditions(simulation: Simulation, uid: str) -> list[dict[str, str]]:
    return simulation.report.as_dict()["podGroups"][uid]["conditions"]


def test_a_gang_past_its_timeout_is_given_up_once_with_an_event():
    # 3 pods that fit only once a 4th CPU exists; 10 minutes have passed.
    simulation = _run([b.node("n1", cpu="2"), *_group("train", 3, 300)],
                      "2026-05-01T10:10:00Z", sessions=3)
    report = simulation.report.as_dict()
    assert report["binds"] == {}
    reasons = report["pending"]["default/train-0"]
    assert any("scheduleTimeoutSeconds 300" in r for r in reasons), reasons
    [condition] = [c for c in _conditions(simulation, "default/train")
                   if c["type"] == "Unschedulable"]
    assert condition["status"] == "True" and condition["reason"] == "ScheduleTimeout"
    timeouts = [e for e in report["events"] if e["reason"] == "ScheduleTimeout"]
    assert [(e["object"], e["count"]) for e in timeouts] == [("PodGroup/default/train", 1)]


def test_a_timed_out_gang_is_not_placed_even_when_room_appears():
    simulation = _run([b.node("n1", cpu="2"), *_group("train", 3, 300)],
                      "2026-05-01T10:10:00Z")
    simulation.load([("later", b.node("n2", cpu="8"))])
    simulation.run(2)
    assert simulation.report.binds == {}


def test_before_its_timeout_a_gang_is_placed_as_usual():
    simulation = _run([b.node("n1", cpu="4"), *_group("train", 3, 600)],
                      "2026-05-01T10:05:00Z")
    assert len(simulation.report.binds) == 3
    assert not any(e[2] == "ScheduleTimeout" for e in simulation.report.events)


def test_the_clock_runs_from_the_newest_timestamp_in_the_files_one_second_a_session():
    # The newest object (a pod of another job) was created 2 s after the gang, whose
    # timeout is 3 s: sessions 1 and 2 are within it, the 3rd is not. The gang never fits.
    later = b.pod("solo", cpu="1")
    later["metadata"]["creationTimestamp"] = "2026-05-01T10:00:02Z"
    simulation = Simulation(parse_conf(DEFAULT_CONF))
    simulation.load([(f"t#{i}", o) for i, o in enumerate(
        [b.node("n1", cpu="2"), *_group("train", 3, 3), later])])
    simulation.run(2)
    assert not any(e[2] == "ScheduleTimeout" for e in simulation.report.events)
    simulation.run(1)
    assert any(e[2] == "ScheduleTimeout" for e in simulation.report.events)


def test_a_running_gang_or_one_without_a_creation_time_never_times_out():
    running = _group("done", 2, 60)
    running[0]["status"]["phase"] = "Running"
    for pod in running[1:]:
        pod["spec"]["nodeName"] = "n1"
        pod["status"]["phase"] = "Running"
    unstamped = _group("fresh", 2, 60, created=None)
    simulation = _run([b.node("n1", cpu="8"), *running, *unstamped],
                      "2026-05-02T00:00:00Z")
    assert sorted(simulation.report.binds) == ["default/fresh-0", "default/fresh-1"]
    assert not any(e[2] == "ScheduleTimeout" for e in simulation.report.events)


def test_a_gang_not_yet_admitted_is_not_admitted_after_its_timeout():
    # The queue is full: the job waits in enqueue, then times out there.
    objects = [b.node("n1", cpu="4"), b.queue("q", capability={"cpu": "1"}),
               *_group("train", 2, 30)]
    for obj in objects[2:]:
        if obj["kind"] == "PodGroup":
            obj["spec"]["queue"] = "q"
    simulation = _run(objects, "2026-05-01T10:01:00Z")
    podgroup = simulation.report.as_dict()["podGroups"]["default/train"]
    assert podgroup["phase"] == "Pending"
    assert any(c["reason"] == "ScheduleTimeout" for c in podgroup["conditions"])


def test_a_gang_given_up_after_admission_holds_no_queue_room():
    # "big" was admitted (Inqueue, minResources 3 of the queue's 4 CPUs) but can never
    # fit; once given up it goes back to Pending and "small" gets the queue's room.
    big = b.podgroup("big", 3, queue="q", min_resources={"cpu": "3"}, phase="Inqueue",
                     creation=CREATED)
    big["spec"]["scheduleTimeoutSeconds"] = 60
    small = b.podgroup("small", 1, queue="q", min_resources={"cpu": "2"},
                       creation="2026-05-01T10:09:00Z")
    objects = [b.queue("q", capability={"cpu": "4"}), b.node("n1", cpu="8"),
               big, *(b.pod(f"big-{i}", cpu="3", group="big", queue="q") for i in range(3)),
               small, b.pod("small-0", cpu="2", group="small", queue="q")]
    simulation = _run(objects, "2026-05-01T10:10:00Z", sessions=3)
    report = simulation.report.as_dict()
    assert report["podGroups"]["default/big"]["phase"] == "Pending"
    assert "default/small-0" in report["binds"]


def test_a_gang_that_ran_is_not_given_up_when_it_later_falls_short():
    group = _group("train", 2, 60)
    group[0]["status"]["phase"] = "Running"
    for pod in group[1:]:
        pod["spec"]["nodeName"] = "n1"
        pod["status"]["phase"] = "Running"
    simulation = _run([b.node("n1", cpu="8"), *group], "2026-05-01T10:10:00Z")
    # its controller re-creates a pod long after the timeout: it is placed again
    simulation.cache.delete_pod("default/train-1")
    simulation.load([("again", b.gang("train", 2)[2])])
    simulation.run(2)
    report = simulation.report.as_dict()
    assert "default/train-1" in report["binds"]
    assert report["podGroups"]["default/train"]["phase"] == "Running"
    assert not any(e["reason"] == "ScheduleTimeout" for e in report["events"])
