"""drf: dominant shares, job order by them, preemption victims, shares kept current."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import gang, node, open_session, pod, podgroup, simulate
from vscheduler.framework.session import Session
from vscheduler.model import ALLOCATED_STATUSES, TaskStatus
from vscheduler.plugins.drf import DrfPlugin
from vscheduler.resources import Resource

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: proportion}]
"""

# Same without drf: what the scenarios would do if drf did not order jobs.
CONF_WITHOUT_DRF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: proportion}]
"""

# gang without its job order, so that drf alone orders jobs.
CONF_DRF_ORDER = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: gang, enableJobOrder: false}]
- plugins: [{name: drf}]
"""
CONF_NO_ORDER = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: gang, enableJobOrder: false}]
"""


def open_with(objects: list[dict], conf_text: str = CONF) -> Session:
    """A session opened on the objects with `conf_text` (no action run yet)."""
    return open_session(objects, conf_text)


def drf_of(session: Session) -> DrfPlugin:
    return session.plugins["drf"]


def bound_in(report: dict, prefix: str) -> int:
    return sum(1 for key in report["binds"] if key.startswith(f"default/{prefix}-"))


def running_job(name: str, tasks: int, cpu: str = "1", memory: str = "1Gi",
                node_name: str = "n1", min_member: int = 1) -> list[dict]:
    """A PodGroup already Running with `tasks` pods on `node_name`."""
    return [podgroup(name, min_member, phase="Running"),
            *[pod(f"{name}-{i}", cpu, memory, group=name, node_name=node_name)
              for i in range(tasks)]]


# --------------------------------------------------------------------------- shares


def test_dominant_share_is_the_largest_fraction_of_the_cluster():
    objects = [node("n1", cpu="10", memory="100Gi"),
               *running_job("mem", 1, cpu="2", memory="50Gi"),
               *running_job("cpu", 1, cpu="5", memory="1Gi"),
               *gang("new", 1)]
    plugin = drf_of(open_with(objects))
    assert plugin.job_share("default/mem") == pytest.approx(0.5)
    assert plugin.job_share("default/cpu") == pytest.approx(0.5)
    assert plugin.job_share("default/new") == 0


def test_share_counts_scalars_and_pods():
    objects = [node("n1", cpu="64", memory="256Gi", pods="10", **{"nvidia.com/gpu": "8"}),
               *running_job("gpu", 1, cpu="1", memory="1Gi"),
               podgroup("g2", 1, phase="Running"),
               pod("g2-0", cpu="1", memory="1Gi", group="g2", node_name="n1",
                   **{"nvidia.com/gpu": "6"})]
    plugin = drf_of(open_with(objects))
    assert plugin.job_share("default/gpu") == pytest.approx(0.1)  # 1 of 10 pod slots
    assert plugin.job_share("default/g2") == pytest.approx(0.75)  # 6 of 8 GPUs


def test_empty_cluster_gives_zero_shares():
    objects = [*gang("a", 2)]
    plugin = drf_of(open_with(objects))
    assert plugin.job_share("default/a") == 0
    assert plugin.dominant_share(Resource(1000, 1)) == 0


# --------------------------------------------------------------------------- order


def test_job_order_lower_share_first():
    objects = [node("n1", cpu="8"), *running_job("big", 4), *running_job("small", 1),
               *running_job("twin", 1)]
    session = open_with(objects)
    plugin, jobs = drf_of(session), session.jobs
    assert plugin.job_order(jobs["default/small"], jobs["default/big"]) == -1
    assert plugin.job_order(jobs["default/big"], jobs["default/small"]) == 1
    assert plugin.job_order(jobs["default/small"], jobs["default/twin"]) == 0


def test_shares_a_few_bytes_apart_are_ordered_by_them():
    """Shares are compared exactly, as Volcano's drf does: holdings whose shares differ
    far less than a millionth still order by share, not by age (the running sums hold
    whole bytes, so equal holdings give the very same share)."""
    objects = [node("n1", cpu="8", memory="8Gi"),  # (memory is the dominant share)
               podgroup("older", 1, phase="Running", creation="2026-01-01T00:00:00Z"),
               pod("older-0", "100m", str(2**30 + 4), group="older", node_name="n1"),
               podgroup("newer", 1, phase="Running", creation="2026-01-02T00:00:00Z"),
               pod("newer-0", "100m", str(2**30), group="newer", node_name="n1")]
    session = open_with(objects, CONF_DRF_ORDER)
    plugin, jobs = drf_of(session), session.jobs
    older, newer = jobs["default/older"], jobs["default/newer"]
    assert plugin.job_order(newer, older) == -1
    assert plugin.job_order_key(newer) < plugin.job_order_key(older)
    assert session.job_less(newer, older)


def test_job_with_lower_share_is_placed_first_when_resources_are_short():
    # `big` is older and already holds 2 cpu; one cpu is free and both want it.
    objects = [node("n1", cpu="3"),
               podgroup("big", 3, phase="Running"),
               *[pod(f"big-{i}", group="big", node_name="n1") for i in range(2)],
               pod("big-2", group="big"),
               *gang("small", 1)]
    with_drf = simulate(objects, CONF_DRF_ORDER)
    assert with_drf["binds"] == {"default/small-0": "n1"}
    # without drf the older job goes first
    without = simulate(objects, CONF_NO_ORDER)
    assert without["binds"] == {"default/big-2": "n1"}


def test_elastic_jobs_share_the_cluster_as_they_grow():
    # Both jobs are ready after one task; drf then alternates them, one task per turn,
    # because each placement raises the share of the job that got it.
    objects = [node("n1", cpu="4"), *gang("a", 4, 1), *gang("b", 4, 1)]
    with_drf = simulate(objects, CONF)
    assert (bound_in(with_drf, "a"), bound_in(with_drf, "b")) == (2, 2)
    without = simulate(objects, CONF_WITHOUT_DRF)
    assert (bound_in(without, "a"), bound_in(without, "b")) == (3, 1)


# --------------------------------------------------------------------------- events


def test_allocate_and_deallocate_events_keep_shares_current():
    objects = [node("n1", cpu="4", memory="4Gi"), *gang("a", 2, 2)]
    session = open_with(objects)
    plugin = drf_of(session)
    tasks = sorted(session.jobs["default/a"].tasks.values(), key=lambda t: t.key)
    statement = session.statement()
    assert statement.allocate(tasks[0], session.nodes["n1"]) is None
    assert plugin.job_share("default/a") == pytest.approx(0.25)
    assert statement.pipeline(tasks[1], session.nodes["n1"]) is None
    assert plugin.job_share("default/a") == pytest.approx(0.5)  # pipelined counts too
    statement.discard()
    assert plugin.job_share("default/a") == 0


def test_eviction_lowers_the_share():
    objects = [node("n1", cpu="4", memory="4Gi"), *running_job("r", 2)]
    session = open_with(objects)
    plugin = drf_of(session)
    assert plugin.job_share("default/r") == pytest.approx(0.5)
    task = next(iter(session.jobs["default/r"].tasks.values()))
    statement = session.statement()
    statement.evict(task, "preempt")
    assert plugin.job_share("default/r") == pytest.approx(0.25)
    statement.discard()
    assert plugin.job_share("default/r") == pytest.approx(0.5)


# --------------------------------------------------------------------------- victims


def test_preemptable_takes_victims_while_the_victim_job_keeps_at_least_the_same_share():
    objects = [node("n1", cpu="4", memory="4Gi"), *running_job("rich", 3), *gang("poor", 1)]
    session = open_with(objects)
    plugin = drf_of(session)
    preemptor = next(iter(session.jobs["default/poor"].tasks.values()))
    candidates = sorted(session.jobs["default/rich"].tasks.values(), key=lambda t: t.key)
    # poor would hold 1/4; rich keeps 2/4 after the first, 1/4 (equal) after the second,
    # 0 after the third: the first two are victims.
    victims = plugin.preemptable(preemptor, candidates)
    assert [t.key for t in victims] == ["default/rich-0", "default/rich-1"]


def test_preemptable_gives_nothing_to_a_job_that_already_holds_more():
    objects = [node("n1", cpu="4", memory="4Gi"), *running_job("rich", 3),
               *running_job("poor", 1), pod("poor-9", group="poor")]
    session = open_with(objects)
    plugin = drf_of(session)
    rich = session.jobs["default/rich"]
    preemptor = next(t for t in rich.tasks.values() if t.status == TaskStatus.RUNNING)
    victims = plugin.preemptable(preemptor, list(session.jobs["default/poor"].tasks_in(
        ALLOCATED_STATUSES)))
    assert victims == []


def test_preemptable_abstains_for_an_unknown_preemptor():
    objects = [node("n1", cpu="4"), *running_job("r", 1), *gang("p", 1)]
    session = open_with(objects)
    plugin = drf_of(session)
    preemptor = next(iter(session.jobs["default/p"].tasks.values()))
    del session.jobs["default/p"]  # (a job the session does not hold)
    assert plugin.preemptable(preemptor, list(session.jobs["default/r"].tasks.values())) \
        is None


# --------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3000), st.integers(1, 4)),
                min_size=1, max_size=6),
       st.lists(st.booleans(), min_size=1, max_size=12))
def test_shares_after_events_match_shares_recomputed(jobs: list[tuple[int, int, int]],
                                                     allocate: list[bool]):
    """Whatever a statement allocates and then discards, every job's share is the one
    computed from scratch, and always within [0, 1] while the cluster has room."""
    objects: list[dict] = [node("n1", cpu="64", memory="64Gi")]
    for index, (running, milli, pending) in enumerate(jobs):
        name = f"j{index}"
        objects.append(podgroup(name, 1, phase="Running" if running else "Inqueue"))
        objects += [pod(f"{name}-r{i}", f"{milli}m", "1Gi", group=name, node_name="n1")
                    for i in range(running)]
        objects += [pod(f"{name}-p{i}", f"{milli}m", "1Gi", group=name)
                    for i in range(pending)]
    session = open_with(objects)
    plugin = drf_of(session)
    before = {uid: plugin.job_share(uid) for uid in session.jobs}
    pending_tasks = sorted((t for job in session.jobs.values()
                            for t in job.tasks_in(TaskStatus.PENDING)), key=lambda t: t.key)
    statement = session.statement()
    for task, take in zip(pending_tasks, allocate, strict=False):
        if take:
            assert statement.allocate(task, session.nodes["n1"]) is None
    for uid, job in session.jobs.items():
        held = Resource()
        for task in job.tasks_in(ALLOCATED_STATUSES):
            held.add(task.resreq)
        assert plugin.job_share(uid) == pytest.approx(plugin.dominant_share(held))
        assert 0 <= plugin.job_share(uid) <= 1
    statement.discard()
    assert {uid: plugin.job_share(uid) for uid in session.jobs} == pytest.approx(before)
