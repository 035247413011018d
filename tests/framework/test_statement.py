"""Statements (vscheduler/framework/statement.py) on a real session: every operation
takes effect at once; commit makes decisions of them, discard undoes them exactly,
in reverse order (volcano-semantics.md 4.5)."""

from __future__ import annotations

from typing import Any

from tests.builders import gang, load_cache, node, pod, podgroup
from vscheduler.conf import PluginOption, SchedulerConf
from vscheduler.framework.session import Session
from vscheduler.hookspecs import hookimpl
from vscheduler.model import Job, Node, Task, TaskStatus
from vscheduler.resources import Resource

S = TaskStatus
GiB = 2**30


class Recorder:
    """Logs the event handlers' calls; refuses to allocate pods named in `refuse`."""

    name = "recorder"
    arguments = ()
    log: list[tuple[str, str]]
    refuse: set[str]

    def __init__(self, args: dict[str, Any]) -> None:
        self.log = []
        self.refuse = set()

    @hookimpl
    def allocate_event(self, task: Task) -> str | None:
        self.log.append(("allocate", task.name))
        if task.name in self.refuse:
            return f"{task.name} refused by recorder"
        return None

    @hookimpl
    def deallocate_event(self, task: Task) -> None:
        self.log.append(("deallocate", task.name))


CLUSTER = [
    node("n1", cpu="4", memory="8Gi", pods="10"),
    node("n2", cpu="4", memory="8Gi", pods="10"),
    *gang("a", 3, cpu="1", memory="1Gi"),
    podgroup("r", 1),
    pod("r-0", cpu="2", memory="2Gi", group="r", node_name="n1"),
    pod("r-1", cpu="1", memory="1Gi", group="r", node_name="n2"),
]


def open_session() -> tuple[Session, Recorder]:
    conf = SchedulerConf(actions=[], tiers=[[PluginOption("recorder", Recorder, {}, {})]],
                         source="t", warnings=[])
    session = Session(load_cache(CLUSTER).snapshot(), conf)
    return session, session.plugins["recorder"]


def tasks_of(session: Session, job: str) -> dict[str, Task]:
    return {t.name: t for t in session.jobs[f"default/{job}"].tasks.values()}


def amounts(r: Resource) -> tuple:
    """Every dimension exactly (a scalar at zero is the same as a missing one)."""
    return (r.cpu, r.memory, sorted((k, v) for k, v in r.scalars.items() if v != 0))


def node_state(n: Node) -> tuple:
    return (amounts(n.idle), amounts(n.used), amounts(n.releasing), amounts(n.pipelined),
            {k: s for k, (_, s) in n.tasks.items()})


def job_state(job: Job) -> tuple:
    return (amounts(job.allocated), job.ready_task_num(), job.waiting_task_num(),
            {t.name: (t.status, t.node_name) for t in job.tasks.values()},
            {s: job.count(s) for s in (1 << i for i in range(10))})


def request(cpu: str, memory: str) -> Resource:
    return Resource.from_k8s({"cpu": cpu, "memory": memory, "pods": "1"})


# --------------------------------------------------------------------------- allocate


def test_allocate_takes_effect_at_once() -> None:
    session, _ = open_session()
    a = tasks_of(session, "a")
    n2 = session.nodes["n2"]
    job = session.jobs["default/a"]
    assert session.statement().allocate(a["a-0"], n2) is None
    assert a["a-0"].status == S.ALLOCATED
    assert a["a-0"].node_name == "n2"
    assert n2.idle == Resource.from_k8s({"cpu": "2", "memory": "6Gi", "pods": "8"})
    assert n2.used == request("2", "2Gi").add(Resource(scalars={"pods": 1}))
    assert job.allocated == request("1", "1Gi")
    assert job.ready_task_num() == 1


def test_allocate_then_discard_restores_everything() -> None:
    session, _ = open_session()
    a = tasks_of(session, "a")
    job = session.jobs["default/a"]
    n1, n2 = session.nodes["n1"], session.nodes["n2"]
    before = (node_state(n1), node_state(n2), job_state(job))
    stmt = session.statement()
    assert stmt.allocate(a["a-0"], n1) is None
    assert stmt.allocate(a["a-1"], n2) is None
    assert stmt.allocate(a["a-2"], n2) is None
    assert (node_state(n1), node_state(n2), job_state(job)) != before
    stmt.discard()
    assert (node_state(n1), node_state(n2), job_state(job)) == before
    assert all(t.status == S.PENDING and t.node_name == "" for t in a.values())
    assert stmt.operations == []
    # the session remembers what it tried, to explain why the pod is still pending
    assert a["a-0"].last_transaction == (S.ALLOCATED, "n1")


def test_commit_of_allocations_binds() -> None:
    session, _ = open_session()
    a = tasks_of(session, "a")
    n2 = session.nodes["n2"]
    stmt = session.statement()
    stmt.allocate(a["a-0"], n2)
    stmt.allocate(a["a-1"], n2)
    idle_after_allocate = n2.idle.clone()
    stmt.commit()
    assert session.result.binds == {"default/a-0": "n2", "default/a-1": "n2"}
    assert a["a-0"].status == S.BINDING
    assert a["a-1"].status == S.BINDING
    assert n2.tasks["default/a-0"][1] == S.BINDING
    assert n2.idle == idle_after_allocate      # still charged, once
    assert session.jobs["default/a"].ready_task_num() == 2
    assert a["a-2"].status == S.PENDING
    assert stmt.operations == []
    # a committed statement has nothing left to discard
    stmt.discard()
    assert a["a-0"].status == S.BINDING


# --------------------------------------------------------------------------- pipeline


def test_pipeline_uses_pipelined_not_idle() -> None:
    session, _ = open_session()
    a = tasks_of(session, "a")
    n1 = session.nodes["n1"]
    job = session.jobs["default/a"]
    idle, used = n1.idle.clone(), n1.used.clone()
    stmt = session.statement()
    assert stmt.pipeline(a["a-0"], n1) is None
    assert a["a-0"].status == S.PIPELINED
    assert a["a-0"].node_name == "n1"
    assert n1.idle == idle
    assert n1.used == used
    assert n1.pipelined == a["a-0"].resreq
    assert job.waiting_task_num() == 1
    assert job.ready_task_num() == 0
    assert job.allocated == Resource()          # pipelined is not allocated
    stmt.commit()
    assert session.result.binds == {}           # nothing to bind until resources free up
    assert a["a-0"].status == S.PIPELINED


def test_pipeline_then_discard_restores() -> None:
    session, _ = open_session()
    a = tasks_of(session, "a")
    n1 = session.nodes["n1"]
    job = session.jobs["default/a"]
    before = (node_state(n1), job_state(job))
    stmt = session.statement()
    stmt.pipeline(a["a-0"], n1)
    stmt.discard()
    assert (node_state(n1), job_state(job)) == before
    assert a["a-0"].last_transaction == (S.PIPELINED, "n1")


# --------------------------------------------------------------------------- evict


def test_evict_moves_running_to_releasing() -> None:
    session, _ = open_session()
    r = tasks_of(session, "r")
    n1 = session.nodes["n1"]
    job = session.jobs["default/r"]
    idle, used = n1.idle.clone(), n1.used.clone()
    stmt = session.statement()
    stmt.evict(r["r-0"], "reclaim")
    assert r["r-0"].status == S.RELEASING
    assert r["r-0"].node_name == "n1"
    assert n1.releasing == r["r-0"].resreq
    assert n1.idle == idle                      # not free until the pod is gone
    assert n1.used == used
    assert n1.future_idle() == idle.clone().add(r["r-0"].resreq)
    assert job.allocated == request("1", "1Gi")  # only r-1 still counts


def test_evict_then_discard_puts_it_back_to_running() -> None:
    session, _ = open_session()
    r = tasks_of(session, "r")
    n1 = session.nodes["n1"]
    job = session.jobs["default/r"]
    before = (node_state(n1), job_state(job))
    stmt = session.statement()
    stmt.evict(r["r-0"], "preempt")
    stmt.discard()
    assert r["r-0"].status == S.RUNNING
    assert (node_state(n1), job_state(job)) == before


def test_commit_of_an_eviction_records_it() -> None:
    session, _ = open_session()
    r, a = tasks_of(session, "r"), tasks_of(session, "a")
    stmt = session.statement()
    stmt.evict(r["r-0"], "reclaim", preemptor=a["a-0"])
    stmt.commit()
    [eviction] = session.result.evictions
    assert (eviction.task, eviction.node, eviction.action, eviction.preemptor) == (
        "default/r-0", "n1", "reclaim", "default/a-0")
    assert any(e.object == "Pod/default/r-0" and e.reason == "Evict"
               for e in session.result.events)
    assert r["r-0"].status == S.RELEASING
    assert session.result.binds == {}


# --------------------------------------------------------------------------- reverse order


def test_discard_runs_in_reverse_order() -> None:
    session, recorder = open_session()
    r, a = tasks_of(session, "r"), tasks_of(session, "a")
    n1 = session.nodes["n1"]
    before = (node_state(n1), job_state(session.jobs["default/a"]),
              job_state(session.jobs["default/r"]))
    stmt = session.statement()
    stmt.evict(r["r-0"], "preempt", a["a-0"])
    stmt.pipeline(a["a-0"], n1)
    stmt.allocate(a["a-1"], n1)
    recorder.log.clear()
    stmt.discard()
    assert recorder.log == [("deallocate", "a-1"), ("deallocate", "a-0"),
                            ("allocate", "r-0")]
    assert (node_state(n1), job_state(session.jobs["default/a"]),
            job_state(session.jobs["default/r"])) == before


def test_merge_moves_operations() -> None:
    session, _ = open_session()
    a = tasks_of(session, "a")
    first, second = session.statement(), session.statement()
    first.allocate(a["a-0"], session.nodes["n1"])
    second.allocate(a["a-1"], session.nodes["n2"])
    first.merge(second)
    assert second.operations == []
    first.discard()
    assert a["a-0"].status == a["a-1"].status == S.PENDING


def test_refused_allocate_event_rolls_the_placement_back() -> None:
    session, recorder = open_session()
    recorder.refuse.add("a-1")
    a = tasks_of(session, "a")
    n2 = session.nodes["n2"]
    job = session.jobs["default/a"]
    stmt = session.statement()
    assert stmt.allocate(a["a-0"], n2) is None
    after_first = (node_state(n2), job_state(job))
    error = stmt.allocate(a["a-1"], n2)
    assert error == "a-1 refused by recorder"
    assert a["a-1"].status == S.PENDING
    assert a["a-1"].node_name == ""
    assert (node_state(n2), job_state(job)) == after_first
    assert [op.task.name for op in stmt.operations] == ["a-0"]
    # the refused placement's accounting is undone for the plugins too
    assert recorder.log[-2:] == [("allocate", "a-1"), ("deallocate", "a-1")]
    stmt.commit()
    assert session.result.binds == {"default/a-0": "n2"}


def test_refused_pipeline_rolls_back() -> None:
    session, recorder = open_session()
    recorder.refuse.add("a-0")
    a = tasks_of(session, "a")
    n1 = session.nodes["n1"]
    before = node_state(n1)
    stmt = session.statement()
    assert stmt.pipeline(a["a-0"], n1) == "a-0 refused by recorder"
    assert a["a-0"].status == S.PENDING
    assert node_state(n1) == before
    assert stmt.operations == []


def test_refused_double_booking_leaves_the_first_placement_intact() -> None:
    # Allocating a task that is already on the node is refused (Node.add_task raises);
    # the refusal must not undo the placement that is already there.
    session, _ = open_session()
    a = tasks_of(session, "a")
    n1 = session.nodes["n1"]
    job = session.jobs["default/a"]
    stmt = session.statement()
    assert stmt.allocate(a["a-0"], n1) is None
    placed = (node_state(n1), job_state(job))
    assert stmt.allocate(a["a-0"], n1) is not None
    assert a["a-0"].status == S.ALLOCATED
    assert a["a-0"].node_name == "n1"
    assert (node_state(n1), job_state(job)) == placed
    stmt.commit()
    assert session.result.binds == {"default/a-0": "n1"}


# --------------------------------------------------------------------------- restored


def test_a_discard_leaves_a_job_it_alone_changed_clean_and_noted() -> None:
    # A gang tried and not placed is handed on to the next session as it was, not
    # copied anew (the snapshot settles it: test_snapshot.py).
    session, _ = open_session()
    a = tasks_of(session, "a")
    job = session.jobs["default/a"]
    assert not job.dirty
    stmt = session.statement()
    stmt.allocate(a["a-0"], session.nodes["n1"])
    stmt.pipeline(a["a-1"], session.nodes["n2"])
    assert job.dirty
    stmt.discard()
    assert not job.dirty
    assert session.snapshot.restored == {"default/a"}


def test_a_discard_leaves_dirty_a_job_changed_otherwise_too() -> None:
    session, _ = open_session()
    a = tasks_of(session, "a")
    job = session.jobs["default/a"]
    stmt = session.statement()
    stmt.allocate(a["a-0"], session.nodes["n1"])
    job.dirty = True  # (a plugin that set a field of its own, as hookspecs asks)
    stmt.discard()
    assert job.dirty
    assert session.snapshot.restored == set()


def test_a_discard_leaves_dirty_a_job_that_was_dirty_before() -> None:
    session, _ = open_session()
    a = tasks_of(session, "a")
    committed = session.statement()
    committed.allocate(a["a-0"], session.nodes["n1"])
    committed.commit()
    stmt = session.statement()
    stmt.allocate(a["a-1"], session.nodes["n1"])
    stmt.discard()
    assert session.jobs["default/a"].dirty
    assert session.snapshot.restored == set()


def test_a_committed_statement_leaves_its_jobs_dirty() -> None:
    session, _ = open_session()
    a, r = tasks_of(session, "a"), tasks_of(session, "r")
    stmt = session.statement()
    stmt.evict(r["r-0"], "preempt", a["a-0"])
    stmt.pipeline(a["a-0"], session.nodes["n1"])
    stmt.commit()
    stmt.discard()  # (nothing left to undo)
    assert session.jobs["default/a"].dirty and session.jobs["default/r"].dirty
    assert session.snapshot.restored == set()


def test_an_eviction_discarded_leaves_the_victims_job_clean() -> None:
    session, _ = open_session()
    a, r = tasks_of(session, "a"), tasks_of(session, "r")
    stmt = session.statement()
    stmt.evict(r["r-0"], "preempt", a["a-0"])
    stmt.pipeline(a["a-0"], session.nodes["n1"])
    stmt.discard()
    assert not session.jobs["default/a"].dirty and not session.jobs["default/r"].dirty
    assert session.snapshot.restored == {"default/a", "default/r"}


def test_a_merged_statement_restores_from_the_first_touch_of_either() -> None:
    session, _ = open_session()
    a = tasks_of(session, "a")
    job = session.jobs["default/a"]
    first, second = session.statement(), session.statement()
    first.allocate(a["a-0"], session.nodes["n1"])
    second.allocate(a["a-1"], session.nodes["n2"])
    first.merge(second)
    first.discard()
    assert not job.dirty

    first, second = session.statement(), session.statement()
    first.allocate(a["a-0"], session.nodes["n1"])
    job.dirty = True  # changed otherwise between the two statements' changes
    second.allocate(a["a-1"], session.nodes["n2"])
    second.merge(first)
    second.discard()
    assert job.dirty
