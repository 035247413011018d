"""priority: jobs by their PodGroup's PriorityClass value, tasks by their pod's priority;
a preemptor may take only lower-priority victims (another job's tasks if that job ranks
lower, its own job's tasks if the task ranks lower)."""

from __future__ import annotations

from tests.builders import (
    PREEMPT_CONF,
    gang,
    node,
    open_session,
    pod,
    podgroup,
    priority_class,
    simulate,
)
from vscheduler.framework.session import Session

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
"""
# Without enqueue, allocate admits every job (see tests/actions/test_preempt.py).
PREEMPT_CONF = PREEMPT_CONF
# overcommit alone decides admission: cluster 10 CPUs x 1.0.
ENQUEUE_CONF = """
actions: "enqueue"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: overcommit, arguments: {overcommit-factor: 1.0}}]
"""

CLASSES = [priority_class("high", 1000), priority_class("low", 10)]


def running(name: str, node_name: str = "n1", cpu: str = "1", **args) -> dict:
    return pod(name, cpu=cpu, node_name=node_name, **args)


def _session() -> Session:
    """Jobs "lo" (2 running pods, class low), "hi" (1 pending, class high) and "mix"
    (class high; pods of priority 5 and 500 running, 50 pending)."""
    return open_session([
        *CLASSES, node("n1", cpu="8"),
        *gang("lo", 2, priority_class="low", node_name="n1"),
        *gang("hi", 1, priority_class="high"),
        podgroup("mix", 3, priority_class="high"),
        running("mix-a", group="mix", priority=5),
        pod("mix-b", group="mix", priority=50),
        running("mix-c", group="mix", priority=500)], CONF)


def _tasks(session: Session, uid: str) -> list:
    return sorted(session.jobs[uid].tasks.values(), key=lambda t: t.name)


# --------------------------------------------------------------------------- verdicts


def test_jobs_are_ordered_by_their_podgroups_priority_higher_first():
    session = _session()
    plugin = session.plugins["priority"]
    hi, lo, mix = (session.jobs[f"default/{name}"] for name in ("hi", "lo", "mix"))
    assert (hi.priority, lo.priority) == (1000, 10)
    assert plugin.job_order(hi, lo) == -1
    assert plugin.job_order(lo, hi) == 1
    assert plugin.job_order(hi, mix) == 0


def test_tasks_are_ordered_by_their_pods_priority_higher_first():
    session = _session()
    plugin = session.plugins["priority"]
    a, b, c = _tasks(session, "default/mix")
    assert [t.priority for t in (a, b, c)] == [5, 50, 500]
    assert plugin.task_order(c, b) == -1
    assert plugin.task_order(a, b) == 1
    assert plugin.task_order(b, b) == 0


def test_only_lower_priority_may_be_preempted():
    session = _session()
    plugin = session.plugins["priority"]
    lo = _tasks(session, "default/lo")
    mix_a, mix_b, mix_c = _tasks(session, "default/mix")
    [hi] = _tasks(session, "default/hi")
    # Another job's tasks go if that job ranks lower, whatever the tasks' own priority.
    assert plugin.preemptable(hi, [*lo, mix_a, mix_c]) == lo
    # Within its own job, tasks of lower priority than the preemptor.
    assert plugin.preemptable(mix_b, [*lo, mix_a, mix_c]) == [*lo, mix_a]
    # A job of lower priority takes nothing from a higher one.
    assert plugin.preemptable(lo[0], [hi, mix_a, mix_c, lo[1]]) == []


# --------------------------------------------------------------------------- in actions


def test_higher_priority_job_goes_first():
    objects = [*CLASSES, node("n1", cpu="2"),
               *gang("low", 1, cpu="2", priority_class="low"),
               *gang("high", 1, cpu="2", priority_class="high")]
    report = simulate(objects, CONF)
    assert report["binds"] == {"default/high-0": "n1"}


def test_higher_priority_job_is_admitted_first_within_a_queue():
    objects = [priority_class("urgent", 1000), node("n1", cpu="10"),
               podgroup("routine", 1, min_resources={"cpu": "6"}),
               podgroup("urgent", 1, min_resources={"cpu": "6"}, priority_class="urgent")]
    report = simulate(objects, ENQUEUE_CONF)
    phases = {uid: group["phase"] for uid, group in report["podGroups"].items()}
    assert phases == {"default/routine": "Pending", "default/urgent": "Inqueue"}


def test_equal_or_higher_priority_is_never_preempted():
    objects = [*CLASSES, node("n1", cpu="2"),
               running("a", priority_class="high"), running("b", priority_class="high"),
               pod("urgent", cpu="1", priority_class="high")]
    assert simulate(objects, PREEMPT_CONF)["evictions"] == []


def test_within_a_job_a_higher_priority_task_preempts_a_lower_one():
    # A starving job (2 of its minimum 3 running) whose pending task outranks a
    # running one of its own: they trade places.
    objects = [*CLASSES, node("n1", cpu="2"), podgroup("j", 3, phase="Running"),
               running("j-a", group="j", priority_class="low"),
               running("j-b", group="j", priority_class="high"),
               pod("j-c", cpu="1", group="j", priority_class="high")]
    report = simulate(objects, PREEMPT_CONF)
    assert [(e["pod"], e["for"]) for e in report["evictions"]] == [("default/j-a",
                                                                     "default/j-c")]
    assert report["pipelined"] == {"default/j-c": "n1"}
