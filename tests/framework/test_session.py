"""How a session combines plugins' answers, tier by tier (volcano-semantics.md 4.2).

Each test builds tiny plugins (classes with `@hookimpl` methods), puts them in a conf
built directly, and asks the session's dispatchers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.builders import conf, gang, load_cache, node, pod, podgroup, queue
from vscheduler.conf import PluginOption, SchedulerConf
from vscheduler.framework.session import Session
from vscheduler.hookspecs import ABSTAIN, PERMIT, Reject, hookimpl
from vscheduler.model import Job, Queue, Task

# --------------------------------------------------------------------------- helpers


def make_plugin(name: str, **hooks: Callable[..., Any]) -> type:
    """A plugin class named `name` whose hooks are the given functions (each taking
    `self` first), marked `@hookimpl` as a real plugin's methods are."""
    attrs: dict[str, Any] = {"name": name, "arguments": ()}

    def __init__(self: Any, args: dict[str, Any]) -> None:
        self.args = args

    attrs["__init__"] = __init__
    for hook, fn in hooks.items():
        attrs[hook] = hookimpl(fn)
    return type(f"Plugin_{name}", (), attrs)


Tier = list[type | tuple[type, dict[str, bool]]]


def make_conf(*tiers: Tier) -> SchedulerConf:
    """Tiers of plugin classes, each optionally with its enable flags: (cls, flags)."""
    options = []
    for tier in tiers:
        row = []
        for entry in tier:
            cls, flags = entry if isinstance(entry, tuple) else (entry, {})
            row.append(PluginOption(cls.name, cls, {}, flags))
        options.append(row)
    return SchedulerConf(actions=[], tiers=options, source="t", warnings=[])


CLUSTER = [
    node("n1", cpu="8"),
    queue("q1"),
    queue("q2"),
    *gang("a", 2, queue="q1"),
    *gang("b", 2, queue="q1"),
    podgroup("r", 1, queue="q2"),
    *[pod(f"r-{i}", group="r", queue="q2", node_name="n1") for i in range(3)],
]


def open_session(*tiers: Tier, objects: list[dict] | None = None) -> Session:
    cache = load_cache(CLUSTER if objects is None else objects)
    return Session(cache.snapshot(), make_conf(*tiers))


def jobs(session: Session) -> tuple[Job, Job]:
    return session.jobs["default/a"], session.jobs["default/b"]


def running(session: Session) -> list[Task]:
    """The three running tasks of job r, by name."""
    job = session.jobs["default/r"]
    return sorted(job.tasks.values(), key=lambda t: t.name)


def by_name(*names: str) -> Callable[[Any, Task, list[Task]], list[Task]]:
    """A victim hook answering the candidates with these pod names."""
    return lambda self, actor, candidates: [t for t in candidates if t.name in names]


def const(answer: Any) -> Callable[..., Any]:
    return lambda self, *args: answer


def prefers(name: str) -> Callable[[Any, Any, Any], int]:
    """An order hook putting the object named `name` first (no opinion otherwise)."""
    def order(self: Any, left: Any, right: Any) -> int:
        if left.name == right.name:
            return 0
        return -1 if left.name == name else (1 if right.name == name else 0)
    return order


def name_descending(self: Any, left: Any, right: Any) -> int:
    """An order hook: larger names first."""
    return -1 if left.name > right.name else (1 if left.name < right.name else 0)


# --------------------------------------------------------------------------- order hooks


def test_job_order_first_non_zero_across_tiers_wins() -> None:
    a_first = make_plugin("a-first", job_order=prefers("a"))
    b_first = make_plugin("b-first", job_order=prefers("b"))
    no_opinion = make_plugin("none", job_order=const(0))

    session = open_session([no_opinion], [b_first, a_first])
    a, b = jobs(session)
    assert session.job_less(b, a)
    assert not session.job_less(a, b)
    assert session.job_compare(a, b) > 0

    # an earlier tier's non-zero answer wins over a later tier
    session = open_session([a_first], [b_first])
    a, b = jobs(session)
    assert session.job_less(a, b)


def test_job_order_fallback_creation_then_uid() -> None:
    objects = [
        node("n1"),
        podgroup("late", creation="2024-06-01T00:00:00Z"),
        podgroup("early", creation="2024-01-01T00:00:00Z"),
        podgroup("same-b", creation="2024-03-01T00:00:00Z"),
        podgroup("same-a", creation="2024-03-01T00:00:00Z"),
        *[pod(f"{g}-0", group=g) for g in ("late", "early", "same-b", "same-a")],
    ]
    no_opinion = make_plugin("none", job_order=const(0))
    session = open_session([no_opinion], objects=objects)
    j = session.jobs
    assert session.job_less(j["default/early"], j["default/late"])
    assert not session.job_less(j["default/late"], j["default/early"])
    assert session.job_less(j["default/same-a"], j["default/same-b"])  # uid
    assert session.job_compare(j["default/same-a"], j["default/same-a"]) == 0


def test_jobs_are_sorted_by_key_only_if_every_plugin_ordering_them_gives_one() -> None:
    """`Session.job_key`: the keys of the plugins that order jobs, in conf order, then
    creation and uid; None when one of them orders jobs without a key. A key without
    an order, or with the order turned off, is not read."""
    def name_key(self: Any, job: Job) -> str:
        return job.name

    keyed = make_plugin("keyed", job_order=const(0), job_order_key=name_key)
    unkeyed = make_plugin("unkeyed", job_order=const(0))
    key_only = make_plugin("key-only", job_order_key=const("never read"))

    session = open_session([keyed], [key_only])
    a, _ = jobs(session)
    assert session.job_key is not None
    assert session.job_key(a) == ("a", a.creation, a.uid)
    assert open_session([keyed], [unkeyed]).job_key is None
    session = open_session([(unkeyed, {"enableJobOrder": False}), keyed])
    assert session.job_key is not None and session.job_key(a)[0] == "a"


def test_queue_order_first_non_zero_then_creation_then_name() -> None:
    by_name_desc = make_plugin("desc", queue_order=name_descending)
    session = open_session([make_plugin("none", queue_order=const(0))], [by_name_desc])
    q1, q2 = session.queues["q1"], session.queues["q2"]
    assert session.queue_less(q2, q1)

    # no opinion: created first goes first, then the smaller name
    session = open_session()
    assert session.queue_less(Queue("zeta", creation=1.0), Queue("alpha", creation=2.0))
    assert session.queue_less(Queue("alpha", creation=5.0), Queue("beta", creation=5.0))
    assert not session.queue_less(Queue("beta", creation=5.0), Queue("alpha", creation=5.0))


@pytest.mark.parametrize(("older", "newer", "first"), [
    # job-w-10 is created before job-w-2, but the index decides: 2 before 10
    ("job-w-10", "job-w-2", "job-w-2"),
    # Volcano parses the index only from names with three '-'-separated parts or more
    # (`<job>-<task>-<index>`): `w-2` and `w-10` are ordered by creation time.
    ("w-10", "w-2", "w-10"),
])
def test_task_order_fallback_by_the_index_ending_a_name_of_three_parts(
        older: str, newer: str, first: str) -> None:
    objects = [
        node("n1"),
        podgroup("job", 2),
        pod(older, group="job", creation="2024-01-01T00:00:00Z"),
        pod(newer, group="job", creation="2024-02-01T00:00:00Z"),
    ]
    session = open_session(objects=objects)
    tasks = {t.name: t for t in session.jobs["default/job"].tasks.values()}
    [second] = {older, newer} - {first}
    assert session.task_less(tasks[first], tasks[second])
    assert not session.task_less(tasks[second], tasks[first])


def test_task_order_plugin_answer_beats_the_index() -> None:
    reverse = make_plugin("rev", task_order=name_descending)
    session = open_session([reverse])
    a = session.jobs["default/a"]
    t0, t1 = sorted(a.tasks.values(), key=lambda t: t.name)
    assert session.task_less(t1, t0)


def test_task_order_same_index_falls_back_to_creation_then_uid() -> None:
    objects = [
        node("n1"),
        podgroup("g", 2),
        pod("x-a-1", group="g", creation="2024-02-01T00:00:00Z"),
        pod("x-b-1", group="g", creation="2024-01-01T00:00:00Z"),
        pod("x-c-1", group="g", creation="2024-01-01T00:00:00Z"),
    ]
    session = open_session(objects=objects)
    t = {t.name: t for t in session.jobs["default/g"].tasks.values()}
    assert session.task_less(t["x-b-1"], t["x-a-1"])  # older first
    assert session.task_less(t["x-b-1"], t["x-c-1"])  # then uid


# --------------------------------------------------------------------------- AND / OR


def test_job_ready_is_and_over_all_tiers() -> None:
    yes, no = make_plugin("yes", job_ready=const(True)), make_plugin("no", job_ready=const(False))
    session = open_session([yes], [make_plugin("yes2", job_ready=const(True))])
    assert session.job_ready(session.jobs["default/a"]) is True
    session = open_session([yes], [no])
    assert session.job_ready(session.jobs["default/a"]) is False
    session = open_session()
    assert session.job_ready(session.jobs["default/a"]) is True   # none: ready


def test_overused_is_or() -> None:
    fine = make_plugin("fine", overused=const(None))
    full = make_plugin("full", overused=const("queue q1 is overused"))
    session = open_session([fine], [make_plugin("fine2", overused=const(None))])
    assert session.overused(session.queues["q1"]) is None
    session = open_session([fine], [full])
    assert session.overused(session.queues["q1"]) == "queue q1 is overused"
    assert open_session().overused(Queue("q")) is None


@pytest.mark.parametrize("hook", ["allocatable", "preemptive"])
def test_allocatable_and_preemptive_return_the_first_refusal(hook: str) -> None:
    ok = make_plugin("ok", **{hook: const(None)})
    first = make_plugin("first", **{hook: const("first refusal")})
    second = make_plugin("second", **{hook: const("second refusal")})
    session = open_session([ok, first], [second])
    task = next(iter(session.jobs["default/a"].tasks.values()))
    check = getattr(session, hook)
    assert check(session.queues["q1"], task) == "first refusal"
    session = open_session([ok], [make_plugin("ok2", **{hook: const(None)})])
    assert getattr(session, hook)(session.queues["q1"], task) is None
    assert getattr(open_session(), hook)(session.queues["q1"], task) is None


# --------------------------------------------------------------------------- votes


def vote_plugin(name: str, hook: str, answer: Any) -> type:
    return make_plugin(name, **{hook: const(answer)})


@pytest.mark.parametrize("hook", ["job_enqueueable", "job_pipelined"])
class TestVotes:
    def verdict(self, hook: str, *tiers: list[Any]) -> Any:
        counter = iter(range(100))
        session = open_session(*[[vote_plugin(f"p{next(counter)}", hook, answer)
                                  for answer in tier] for tier in tiers])
        return getattr(session, hook)(session.jobs["default/a"])

    def permitted(self, hook: str, verdict: Any) -> bool:
        if hook == "job_pipelined":
            assert isinstance(verdict, bool)
            return verdict
        return verdict == PERMIT

    def test_reject_after_permit_in_the_same_tier_wins(self, hook: str) -> None:
        verdict = self.verdict(hook, [PERMIT, Reject("queue full")])
        assert not self.permitted(hook, verdict)
        if hook == "job_enqueueable":
            assert isinstance(verdict, Reject) and verdict.reason == "queue full"

    def test_permit_in_an_earlier_tier_wins_over_a_later_reject(self, hook: str) -> None:
        assert self.permitted(hook, self.verdict(hook, [PERMIT], [Reject("no")]))
        assert self.permitted(hook, self.verdict(hook, [ABSTAIN, PERMIT], [Reject("no")]))

    def test_first_tier_that_does_not_abstain_decides(self, hook: str) -> None:
        verdict = self.verdict(hook, [ABSTAIN, ABSTAIN], [Reject("later")], [PERMIT])
        assert not self.permitted(hook, verdict)

    def test_all_abstaining_permits(self, hook: str) -> None:
        assert self.permitted(hook, self.verdict(hook, [ABSTAIN], [ABSTAIN, ABSTAIN]))
        assert self.permitted(hook, self.verdict(hook))

    def test_reject_alone(self, hook: str) -> None:
        assert not self.permitted(hook, self.verdict(hook, [Reject("x")]))


def test_enable_flag_removes_a_vote() -> None:
    rejecter = vote_plugin("rejecter", "job_enqueueable", Reject("no"))
    session = open_session([(rejecter, {"enableJobEnqueued": False})])
    assert session.job_enqueueable(session.jobs["default/a"]) == PERMIT


# --------------------------------------------------------------------------- starving


def test_job_starving_none_registered_is_false() -> None:
    session = open_session([make_plugin("x", job_ready=const(True))])
    assert session.job_starving(session.jobs["default/a"]) is False


def test_job_starving_first_tier_with_the_hook_decides() -> None:
    ready = make_plugin("ready", job_ready=const(True))
    yes = make_plugin("yes", job_starving=const(True))
    no = make_plugin("no", job_starving=const(False))
    yes2 = make_plugin("yes2", job_starving=const(True))
    job = "default/a"
    # tier 0 has no starving hook: tier 1 decides
    session = open_session([ready], [yes], [no])
    assert session.job_starving(session.jobs[job]) is True
    # within the deciding tier, all must agree
    session = open_session([yes, no], [yes2])
    assert session.job_starving(session.jobs[job]) is False
    session = open_session([yes, yes2], [no])
    assert session.job_starving(session.jobs[job]) is True


def test_job_starving_disabled_hook_leaves_its_tier() -> None:
    no = make_plugin("no", job_starving=const(False))
    yes = make_plugin("yes", job_starving=const(True))
    session = open_session([(no, {"enableJobStarving": False})], [yes])
    assert session.job_starving(session.jobs["default/a"]) is True


# --------------------------------------------------------------------------- victims


@pytest.mark.parametrize(("hook", "flag"), [("preemptable", "enablePreemptable"),
                                             ("reclaimable", "enableReclaimable")])
class TestVictims:
    def victims(self, hook: str, *tiers: Tier) -> list[str]:
        session = open_session(*tiers)
        candidates = running(session)
        actor = next(iter(session.jobs["default/a"].tasks.values()))
        return sorted(t.name for t in getattr(session, hook)(actor, candidates))

    def test_intersection_within_a_tier(self, hook: str, flag: str) -> None:
        a = make_plugin("a", **{hook: by_name("r-0", "r-1")})
        b = make_plugin("b", **{hook: by_name("r-1", "r-2")})
        assert self.victims(hook, [a, b]) == ["r-1"]

    def test_abstaining_plugin_is_skipped(self, hook: str, flag: str) -> None:
        abstain = make_plugin("abstain", **{hook: const(None)})
        b = make_plugin("b", **{hook: by_name("r-2")})
        assert self.victims(hook, [abstain, b]) == ["r-2"]

    def test_empty_answer_makes_the_tier_abstain(self, hook: str, flag: str) -> None:
        empty = make_plugin("empty", **{hook: const([])})
        b = make_plugin("b", **{hook: by_name("r-0")})
        c = make_plugin("c", **{hook: by_name("r-2")})
        # tier 0: `empty` does not veto, it ends tier 0 (b is not consulted); tier 1 decides
        assert self.victims(hook, [empty, b], [c]) == ["r-2"]
        # and with no later tier, there are no victims
        assert self.victims(hook, [empty, b]) == []

    def test_empty_intersection_resets_mid_tier(self, hook: str, flag: str) -> None:
        a = make_plugin("a", **{hook: by_name("r-0")})
        b = make_plugin("b", **{hook: by_name("r-1")})
        c = make_plugin("c", **{hook: by_name("r-1", "r-2")})
        # a ∩ b is empty: the next plugin's list is taken whole (Volcano's quirk)
        assert self.victims(hook, [a, b, c]) == ["r-1", "r-2"]
        # an empty intersection at the end of a tier lets the next tier decide
        d = make_plugin("d", **{hook: by_name("r-2")})
        assert self.victims(hook, [a, b], [d]) == ["r-2"]

    def test_first_tier_with_an_answer_decides(self, hook: str, flag: str) -> None:
        a = make_plugin("a", **{hook: by_name("r-0")})
        b = make_plugin("b", **{hook: by_name("r-1", "r-2")})
        assert self.victims(hook, [a], [b]) == ["r-0"]
        abstain = make_plugin("abstain", **{hook: const(None)})
        assert self.victims(hook, [abstain], [b]) == ["r-1", "r-2"]

    def test_no_plugin_no_victims(self, hook: str, flag: str) -> None:
        assert self.victims(hook) == []
        abstain = make_plugin("abstain", **{hook: const(None)})
        assert self.victims(hook, [abstain]) == []

    def test_enable_flag_turns_the_plugin_off(self, hook: str, flag: str) -> None:
        a = make_plugin("a", **{hook: by_name("r-0")})
        b = make_plugin("b", **{hook: by_name("r-1", "r-2")})
        assert self.victims(hook, [(a, {flag: False}), b]) == ["r-1", "r-2"]


# --------------------------------------------------------------------------- enable flags


def test_enable_flag_turns_off_one_hook_of_one_plugin() -> None:
    calls: list[str] = []

    def order(self: Any, left: Job, right: Job) -> int:
        calls.append(f"{self.name}.job_order")
        return prefers("b")(self, left, right)

    def ready(self: Any, job: Job) -> bool:
        calls.append(f"{self.name}.job_ready")
        return False

    first = make_plugin("first", job_order=order, job_ready=ready)
    second = make_plugin("second", job_order=prefers("a"))
    session = open_session([(first, {"enableJobOrder": False})], [second])
    a, b = jobs(session)
    assert session.job_less(a, b)             # `second` decides: first's job_order is off
    assert session.job_ready(a) is False      # first's job_ready is still consulted
    assert calls == ["first.job_ready"]
    # the same plugin without the flag decides the order
    session = open_session([first], [second])
    assert session.job_less(*reversed(jobs(session)))


def test_plugins_built_per_session_with_their_arguments_and_opened() -> None:
    seen: list[Any] = []
    opener = make_plugin("opener", on_session_open=lambda self, session: seen.append(session),
                         on_session_close=lambda self, session: seen.append("closed"))
    conf = SchedulerConf(actions=[], tiers=[[PluginOption("opener", opener, {"k": 1}, {})]],
                         source="t", warnings=[])
    session = Session(load_cache(CLUSTER).snapshot(), conf)
    assert seen == [session]
    assert session.plugins["opener"].args == {"k": 1}
    session.close()
    assert seen == [session, "closed"]


# --------------------------------------------------------------------------- events


def recorder(name: str, log: list[tuple[str, str, str]]) -> type:
    return make_plugin(
        name,
        allocate_event=lambda self, task: log.append((self.name, "allocate", task.name)),
        deallocate_event=lambda self, task: log.append((self.name, "deallocate", task.name)),
    )


def test_event_handlers_fire_on_statement_operations_and_reverse_on_discard() -> None:
    log: list[tuple[str, str, str]] = []
    session = open_session([recorder("one", log)], [recorder("two", log)])
    a = session.jobs["default/a"]
    t0, t1 = sorted(a.tasks.values(), key=lambda t: t.name)
    n1 = session.nodes["n1"]
    stmt = session.statement()
    assert stmt.allocate(t0, n1) is None
    assert stmt.pipeline(t1, n1) is None
    assert log == [("one", "allocate", "a-0"), ("two", "allocate", "a-0"),
                   ("one", "allocate", "a-1"), ("two", "allocate", "a-1")]
    log.clear()
    stmt.discard()
    assert log == [("one", "deallocate", "a-1"), ("two", "deallocate", "a-1"),
                   ("one", "deallocate", "a-0"), ("two", "deallocate", "a-0")]


def test_event_handlers_on_evict_and_its_discard() -> None:
    log: list[tuple[str, str, str]] = []
    session = open_session([recorder("one", log)])
    victim = running(session)[0]
    stmt = session.statement()
    stmt.evict(victim, "reclaim")
    assert log == [("one", "deallocate", "r-0")]
    stmt.discard()
    assert log == [("one", "deallocate", "r-0"), ("one", "allocate", "r-0")]


def test_event_handlers_are_not_gated_by_enable_flags() -> None:
    log: list[tuple[str, str, str]] = []
    every_flag_off = dict.fromkeys(
        ["enableJobOrder", "enableJobReady", "enablePreemptable", "enabledAllocatable"], False)
    session = open_session([(recorder("one", log), every_flag_off)])
    task = next(iter(session.jobs["default/a"].tasks.values()))
    session.statement().allocate(task, session.nodes["n1"])
    assert log == [("one", "allocate", task.name)]


def test_a_refused_allocate_event_is_returned() -> None:
    refuse = make_plugin("refuse", allocate_event=const("quota exceeded"))
    session = open_session([refuse])
    task = next(iter(session.jobs["default/a"].tasks.values()))
    assert session.allocate_event(task) == "quota exceeded"
    assert open_session().allocate_event(task) is None


def test_a_finished_session_is_freed_without_the_cyclic_collector():
    """Plugins keep their session; the scheduler breaks that cycle once a session's
    decisions are applied, so sessions (and their node copies) do not pile up between
    the cyclic collector's rare runs."""
    import gc

    from vscheduler.simulate import Simulation

    simulation = Simulation(conf())
    simulation.load([(f"t#{i}", o) for i, o in enumerate(
        [node("n1", cpu="4"), *gang("train", 2), pod("solo", cpu="1"),
         pod("big", cpu="64")])])  # "big" never fits: every cycle runs a session
    gc.collect()
    before = {id(o) for o in gc.get_objects() if isinstance(o, Session)}  # other tests'
    gc.disable()
    try:
        simulation.run(4)
        alive = [o for o in gc.get_objects() if isinstance(o, Session) and id(o) not in before]
    finally:
        gc.enable()
    assert simulation.report.sessions == 4 and alive == []


# --------------------------------------------------------------------------- the plugins' view


def test_a_session_is_what_its_plugins_may_read_and_call() -> None:
    """`hookspecs.SessionView` lists what a plugin may use of its session: a real
    session has all of it, and the built-in plugins use nothing else."""
    import re
    from pathlib import Path

    from vscheduler.hookspecs import SessionView

    members = {name for name in dir(SessionView) if not name.startswith("_")}
    members |= set(SessionView.__annotations__)
    session = open_session()
    assert {name for name in members if not hasattr(session, name)} == set()
    plugins = Path(__file__).resolve().parents[2] / "plugins"
    used = {name for path in plugins.glob("*.py")
            for name in re.findall(r"\bsession\.([a-z_]+)", path.read_text())}
    assert used - members == set()
