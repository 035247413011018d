"""gang: a job runs with at least minAvailable tasks, or not at all.

Its verdicts (job_valid, job_ready, job_pipelined, victims only beyond minAvailable), the
`Unschedulable` condition it writes at close, and scheduleTimeoutSeconds (seed 001): a
PodGroup still short of minAvailable that long after its creation is given up and marked,
once, with an event."""

from __future__ import annotations

from typing import Any

from tests import builders as b
from vscheduler.conf import DEFAULT_CONF, parse_conf
from vscheduler.framework.session import Session
from vscheduler.hookspecs import PERMIT, Reject
from vscheduler.simulate import Simulation

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
"""

CREATED = "2026-05-01T10:00:00Z"


def _group(name: str, size: int, timeout: int | None, *, cpu: str = "1",
           created: str | None = CREATED) -> list[dict[str, Any]]:
    objs = b.gang(name, size, cpu=cpu)
    if created:
        objs[0]["metadata"]["creationTimestamp"] = created
    if timeout is not None:
        objs[0]["spec"]["scheduleTimeoutSeconds"] = timeout
    return objs


def _ran(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The PodGroup and its pods running on n1."""
    objs[0]["status"]["phase"] = "Running"
    for pod in objs[1:]:
        pod["spec"]["nodeName"] = "n1"
        pod["status"]["phase"] = "Running"
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


# --------------------------------------------------------------------------- verdicts


def _session_of_three_jobs() -> Session:
    """"short" has 2 pods for a minMember of 3, "wait" 2 pending pods of 2, "run" 4
    running pods of 2."""
    return b.open_session([
        b.node("n1", cpu="8"), *b.gang("short", 2, min_member=3), *b.gang("wait", 2),
        b.podgroup("run", 2, phase="Running"),
        *(b.pod(f"run-{i}", group="run", node_name="n1") for i in range(4))], CONF)


def test_a_job_with_fewer_valid_tasks_than_min_available_is_not_valid():
    session = _session_of_three_jobs()
    gang = session.plugins["gang"]
    assert gang.job_valid(session.jobs["default/short"]) == (
        "NotEnoughTasks", "Not enough valid tasks for gang-scheduling, valid: 2, min: 3")
    assert gang.job_valid(session.jobs["default/wait"]) is None
    assert gang.job_valid(session.jobs["default/run"]) is None


def test_a_job_is_ready_and_pipelined_only_with_min_available_tasks_placed():
    session = _session_of_three_jobs()
    gang = session.plugins["gang"]
    assert gang.job_ready(session.jobs["default/run"])
    assert gang.job_pipelined(session.jobs["default/run"]) == PERMIT
    for uid in ("default/short", "default/wait"):
        assert not gang.job_ready(session.jobs[uid])
        vote = gang.job_pipelined(session.jobs[uid])
        assert isinstance(vote, Reject)
        assert vote.reason == "not enough tasks placed or waiting for minAvailable"


def test_a_ready_job_goes_after_one_that_is_not():
    session = _session_of_three_jobs()
    gang = session.plugins["gang"]
    run, wait = session.jobs["default/run"], session.jobs["default/wait"]
    assert gang.job_order(run, wait) == 1
    assert gang.job_order(wait, run) == -1
    assert gang.job_order(wait, session.jobs["default/short"]) == 0


def test_victims_are_only_the_tasks_beyond_min_available():
    session = _session_of_three_jobs()
    gang = session.plugins["gang"]
    tasks = sorted(session.jobs["default/run"].tasks.values(), key=lambda t: t.name)
    preemptor = next(iter(session.jobs["default/wait"].tasks.values()))
    # 4 running of a minimum of 2: any 2 may go, in the order offered, and no more.
    assert [t.name for t in gang.preemptable(preemptor, tasks)] == ["run-0", "run-1"]
    assert [t.name for t in gang.reclaimable(preemptor, tasks[::-1])] == ["run-3", "run-2"]
    assert [t.name for t in gang.preemptable(preemptor, tasks[1:2])] == ["run-1"]


def test_a_gang_that_does_not_fit_gets_no_binds_a_condition_and_reasons():
    objects = [b.node("n1", cpu="4"), b.node("n2", cpu="2"), b.node("n3", cpu="1"),
               *b.gang("train", 3, cpu="3")]
    report = b.simulate(objects, CONF)
    assert report["binds"] == {}
    group = report["podGroups"]["default/train"]
    condition = next(c for c in group["conditions"] if c["type"] == "Unschedulable")
    assert condition["status"] == "True"
    assert condition["reason"] == "NotEnoughResources"
    assert condition["message"].startswith("2/3 tasks in gang unschedulable")
    assert set(report["pending"]) == {"default/train-0", "default/train-1", "default/train-2"}
    for reasons in report["pending"].values():
        assert reasons and all(reasons)
    # The task that found no node says why, in kube-scheduler's words.
    assert "0/3 nodes are available: 3 Insufficient cpu." in report["pending"][
        "default/train-1"]
    # The first task had a node until the gang failed: it says where it could go.
    assert any("can possibly be assigned to n1" in r
               for r in report["pending"]["default/train-0"])
    assert any(e["object"] == "PodGroup/default/train" and e["reason"] == "Unschedulable"
               for e in report["events"])


def test_a_podgroups_unschedulable_event_says_what_its_condition_says() -> None:
    """kubectl describe podgroup shows the condition and the events side by side: a gang
    of 3 with room for 2 must not read "1/3" in one and "3/3" in the other."""
    report = b.simulate([b.node("n1", cpu="2"), *b.gang("train", 3, cpu="1")])
    condition = next(c for c in report["podGroups"]["default/train"]["conditions"]
                     if c["type"] == "Unschedulable")
    events = [e for e in report["events"]
              if e["object"] == "PodGroup/default/train" and e["reason"] == "Unschedulable"]
    assert [e["message"] for e in events] == [condition["message"]]


def test_elastic_job_gets_min_then_what_fits():
    objects = [b.node("n1", cpu="3"), *b.gang("e", 5, min_member=2, cpu="1")]
    report = b.simulate(objects, CONF)
    assert sorted(report["binds"]) == ["default/e-0", "default/e-1", "default/e-2"]
    assert set(report["pending"]) == {"default/e-3", "default/e-4"}


def test_minimum_task_members_per_role():
    objects = [b.node("n1", cpu="3"),
               b.podgroup("r", 3, min_task_member={"ps": 1, "worker": 2})]
    for name, role, cpu in (("r-ps-0", "ps", "2"), ("r-worker-0", "worker", "1"),
                            ("r-worker-1", "worker", "1")):
        objects.append(b.pod(name, cpu=cpu, group="r",
                             annotations={"volcano.sh/task-spec": role}))
    report = b.simulate(objects, CONF)
    # 4 CPUs are needed for the minimum of every role and only 3 exist: nothing binds.
    assert report["binds"] == {}


# --------------------------------------------------------------------------- timeout


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
    # Its Unschedulable events in the sessions after say the same, not that it lacks
    # room (which would read as if it were still being tried).
    assert {e["message"] for e in report["events"] if e["reason"] == "Unschedulable"} == {
        condition["message"]}


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
    running = _ran(_group("done", 2, 60))
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
    group = _ran(_group("train", 2, 60))
    simulation = _run([b.node("n1", cpu="8"), *group], "2026-05-01T10:10:00Z")
    # its controller re-creates a pod long after the timeout: it is placed again
    simulation.cache.delete_pod("default/train-1")
    simulation.load([("again", b.gang("train", 2)[2])])
    simulation.run(2)
    report = simulation.report.as_dict()
    assert "default/train-1" in report["binds"]
    assert report["podGroups"]["default/train"]["phase"] == "Running"
    assert not any(e["reason"] == "ScheduleTimeout" for e in report["events"])
