"""Every hook is combined by the rule its hookspec names (`hookspecs.RULES`).

For each hookspec: plugins answering it, drawn for 0, 1 or 2 plugins per tier over up
to three tiers (some with the hook turned off by their enable flag), are put in a
session; what the session answers, and which plugins it asked in what order, must be
what the rule says. The rules are modelled here independently of
`vscheduler.framework.combine`, straight from `Rule`'s prose."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import gang, load_cache, node, pod, podgroup, queue
from vscheduler import hookspecs
from vscheduler.conf import PluginOption, SchedulerConf
from vscheduler.fit import Unfit
from vscheduler.framework.combine import COMBINATORS
from vscheduler.framework.session import Session
from vscheduler.hookspecs import ABSTAIN, ENABLE_FLAGS, PERMIT, RULES, Reject, Rule, hookimpl
from vscheduler.topology import Domain

CLUSTER = [
    node("n1", cpu="8"), node("n2", cpu="8"),
    queue("q1"), queue("q2"),
    *gang("a", 2, queue="q1"), *gang("b", 2, queue="q1"),
    podgroup("r", 1, queue="q2"),
    *[pod(f"r-{i}", group="r", queue="q2", node_name="n1") for i in range(3)],
]
VICTIM_NAMES = ("r-0", "r-1", "r-2")
# A session without plugins, for the tie-breaks and signatures the session adds.
BARE = Session(load_cache(CLUSTER).snapshot(), SchedulerConf([], [], "t", []))


# --------------------------------------------------------------------------- the rules


def model(rule: Rule, tiers: list[list[tuple[int, Any]]]) -> tuple[Any, list[int]]:
    """What `rule` makes of the answers, tier by tier: (answer, plugins asked in order).
    Each plugin is (its index, its answer)."""
    flat = [plugin for tier in tiers for plugin in tier]
    asked: list[int] = []
    if rule in (Rule.SESSION, Rule.NOTIFY):
        asked = [i for i, _ in flat]
        errors = [answer for _, answer in flat if answer]
        return (errors[-1] if errors else None), asked
    if rule in (Rule.SUM, Rule.SUM_BY_NODE, Rule.SIGNATURE):
        asked = [i for i, _ in flat]
        if rule is Rule.SUM:
            return sum(answer for _, answer in flat), asked
        if rule is Rule.SIGNATURE:
            return tuple(answer for _, answer in flat), asked
        scores: dict[str, float] = {}
        for _, answer in flat:
            for name, score in answer.items():
                scores[name] = scores.get(name, 0.0) + score
        return scores, asked
    if rule in (Rule.ORDER, Rule.FIRST_REFUSAL, Rule.ALL):
        for i, answer in flat:
            asked.append(i)
            if rule is Rule.ORDER and answer != 0:
                return answer, asked
            if rule is Rule.FIRST_REFUSAL and answer is not None:
                return answer, asked
            if rule is Rule.ALL and not answer:
                return False, asked
        return {Rule.ORDER: 0, Rule.FIRST_REFUSAL: None, Rule.ALL: True}[rule], asked
    if rule is Rule.FIRST_TIER:
        deciding = next((tier for tier in tiers if tier), None)
        if deciding is None:
            return False, asked
        for i, answer in deciding:
            asked.append(i)
            if not answer:
                return False, asked
        return True, asked
    if rule is Rule.VOTE:
        for tier in tiers:
            permitted = False
            for i, answer in tier:
                asked.append(i)
                if isinstance(answer, Reject):
                    return answer, asked
                permitted = permitted or answer != ABSTAIN
            if permitted:
                return PERMIT, asked
        return PERMIT, asked
    assert rule is Rule.VICTIMS
    for tier in tiers:
        chosen: list[str] | None = None
        for i, answer in tier:
            asked.append(i)
            if answer is None:
                continue
            if not answer:
                chosen = None
                break
            chosen = list(answer) if chosen is None else (
                [name for name in chosen if name in answer] or None)
        if chosen:
            return chosen, asked
    return [], asked


# --------------------------------------------------------------------------- the hooks


@dataclass
class Hook:
    """How to ask the session for one hook, what a plugin may answer, and what the
    session's public method makes of the rule's answer (`finish`)."""

    answers: st.SearchStrategy
    ask: Callable[[Session], Any]
    finish: Callable[[Any, Session, int], Any] = lambda answer, bare, plugins: answer


def job(session: Session, name: str = "a") -> Any:
    return session.jobs[f"default/{name}"]


def task(session: Session) -> Any:
    return min(job(session).tasks.values(), key=lambda t: t.name)


def victims(session: Session) -> list:
    return sorted(job(session, "r").tasks.values(), key=lambda t: t.name)


ORDERS = st.sampled_from([-2, -1, 0, 0, 1, 3])
REFUSALS = st.one_of(st.none(), st.sampled_from(["no room", "closed"]))
UNFITS = st.one_of(st.none(), st.builds(Unfit, st.sampled_from(["taint", "selector"])))
VOTES = st.one_of(st.sampled_from([PERMIT, ABSTAIN]),
                  st.builds(Reject, st.sampled_from(["full", "closed"])))
VICTIM_ANSWERS = st.one_of(
    st.none(), st.lists(st.sampled_from(VICTIM_NAMES), unique=True).map(sorted))
SCORES = st.integers(-5, 5).map(float)

HOOKS: dict[str, Hook] = {
    "on_session_open": Hook(st.none(), lambda s: None),
    "on_session_close": Hook(st.none(), lambda s: s.on_session_close(s)),
    "job_order": Hook(ORDERS, lambda s: s.job_compare(job(s), job(s, "b")),
                      lambda answer, bare, n: answer or bare.job_compare(job(bare),
                                                                         job(bare, "b"))),
    "job_order_key": Hook(st.integers(0, 3), lambda s: s.job_key(job(s)),
                          lambda answer, bare, n: (*answer, *bare.job_key(job(bare)))),
    "queue_order": Hook(ORDERS, lambda s: s.queue_compare(s.queues["q1"], s.queues["q2"]),
                        lambda answer, bare, n: answer or bare.queue_compare(
                            bare.queues["q1"], bare.queues["q2"])),
    "task_order": Hook(ORDERS, lambda s: s.task_compare(*victims(s)[:2]),
                       lambda answer, bare, n: answer or bare.task_compare(*victims(bare)[:2])),
    "victim_queue_order": Hook(
        ORDERS, lambda s: s.victim_queue_less(s.queues["q1"], s.queues["q2"], s.queues["q1"]),
        lambda answer, bare, n: answer < 0 if answer else bare.queue_compare(
            bare.queues["q1"], bare.queues["q2"]) > 0),
    "pre_predicate": Hook(UNFITS, lambda s: s.pre_predicate(task(s))),
    "predicate": Hook(UNFITS, lambda s: s.predicate(task(s), s.nodes["n1"])),
    "node_order": Hook(SCORES, lambda s: s.node_order(task(s), s.nodes["n1"])),
    "domain_order": Hook(SCORES, lambda s: s.domain_order(job(s), Domain("d", 1))),
    "task_signature": Hook(
        st.integers(0, 3), lambda s: s.task_signature(task(s)),
        lambda answer, bare, n: (bare.task_signature(task(bare)), *answer) if n
        else bare.task_signature(task(bare))),
    "preemptor_signature": Hook(
        st.integers(0, 3), lambda s: s.preemptor_signature(task(s)),
        lambda answer, bare, n: (*bare.preemptor_signature(task(bare)), *answer)),
    # (the queues and budgets come first, queues by name here: each session's cache
    # has its own objects)
    "offers_by_signature": Hook(st.booleans(), lambda s: s.offers_by_signature()),
    "victim_signature": Hook(
        st.integers(0, 3), lambda s: s.victim_signature(job(s, "r"), victims(s)),
        lambda answer, bare, n: (*bare.victim_signature(job(bare, "r"), victims(bare)),
                                 *answer)),
    "victim_state": Hook(
        st.integers(0, 3), lambda s: (tuple(s.queues), *s.victim_state()[1:]),
        lambda answer, bare, n: (tuple(bare.queues), bare.snapshot.budgets, *answer)),
    "batch_node_order": Hook(
        st.dictionaries(st.sampled_from(["n1", "n2"]), SCORES),
        lambda s: s.batch_node_order(task(s), s.node_list)),
    "job_valid": Hook(st.one_of(st.none(), st.just(("NotValid", "too few pods"))),
                      lambda s: s.job_valid(job(s))),
    "job_enqueueable": Hook(VOTES, lambda s: s.job_enqueueable(job(s))),
    "job_enqueued": Hook(st.none(), lambda s: s.job_enqueued(job(s))),
    "job_ready": Hook(st.booleans(), lambda s: s.job_ready(job(s))),
    "job_pipelined": Hook(VOTES, lambda s: s.job_pipelined(job(s)),
                          lambda answer, bare, n: not isinstance(answer, Reject)),
    "job_starving": Hook(st.booleans(), lambda s: s.job_starving(job(s))),
    "allocatable": Hook(REFUSALS, lambda s: s.allocatable(s.queues["q1"], task(s))),
    "overused": Hook(REFUSALS, lambda s: s.overused(s.queues["q1"])),
    "preemptive": Hook(REFUSALS, lambda s: s.preemptive(s.queues["q1"], task(s))),
    "preemptable": Hook(VICTIM_ANSWERS, lambda s: [t.name for t in s.preemptable(
        task(s), victims(s))]),
    "reclaimable": Hook(VICTIM_ANSWERS, lambda s: [t.name for t in s.reclaimable(
        task(s), victims(s))]),
    "allocate_event": Hook(REFUSALS, lambda s: s.allocate_event(task(s))),
    "deallocate_event": Hook(st.none(), lambda s: s.deallocate_event(task(s))),
}


def hookspec_names() -> list[str]:
    marker = f"{hookspecs.PROJECT}_spec"
    return sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
                  if hasattr(fn, marker))


def test_every_hookspec_names_a_rule_the_session_has_a_combinator_for() -> None:
    assert sorted(RULES) == hookspec_names()
    assert set(COMBINATORS) == set(Rule)
    assert sorted(HOOKS) == hookspec_names()  # and every hook is checked below


# --------------------------------------------------------------------------- the check


def plugin_class(index: int, hook: str, answer: Any, asked: list[tuple[int, Any]]) -> type:
    """Plugin `p<index>` answering `hook` with `answer`, logging (index, first argument)
    when asked. Plugins that judge nodes for `task_signature` also have a predicate;
    those for `preemptor_signature` offer victims too."""
    def answer_hook(self: Any, *args: Any) -> Any:
        asked.append((index, args[0] if args else None))
        if hook in ("preemptable", "reclaimable") and answer is not None:
            return [t for t in args[1] if t.name in answer]
        return answer

    def __init__(self: Any, args: dict[str, Any]) -> None:
        self.args = args

    attrs: dict[str, Any] = {"name": f"p{index}", "arguments": (), "__init__": __init__}
    attrs[hook] = hookimpl(answer_hook)
    if hook == "task_signature":
        attrs["predicate"] = hookimpl(lambda self, task, node: None)
    if hook == "job_order_key":  # (the key of the plugin's own order)
        attrs["job_order"] = hookimpl(lambda self, left, right: 0)
    if hook == "preemptor_signature":  # (it signs for the plugin's own offers)
        attrs["preemptable"] = hookimpl(lambda self, task, candidates: None)
    if hook in ("victim_signature", "victim_state"):  # (one that offers victims, signed)
        attrs["preemptable"] = hookimpl(lambda self, task, candidates: None)
        attrs["preemptor_signature"] = hookimpl(lambda self, task: None)
    return type(f"P{index}", (), attrs)


def tiers_of(hook: str) -> st.SearchStrategy:
    """Tiers of plugins: (answer, turned off by its enable flag)."""
    flag = st.booleans() if hook in ENABLE_FLAGS else st.just(False)
    plugin = st.tuples(HOOKS[hook].answers, flag)
    return st.lists(st.lists(plugin, max_size=2), max_size=3)


@pytest.mark.parametrize("hook", sorted(HOOKS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_session_combines_a_hook_by_its_rule(hook: str, data: st.DataObject) -> None:
    drawn = data.draw(tiers_of(hook), label="tiers")
    asked: list[tuple[int, Any]] = []
    options, counted = [], []
    index = 0
    for tier in drawn:
        row, counted_tier = [], []
        for answer, off in tier:
            cls = plugin_class(index, hook, answer, asked)
            flags = {ENABLE_FLAGS[hook]: False} if off else {}
            row.append(PluginOption(cls.name, cls, {}, flags))
            if not off:
                counted_tier.append((index, answer))
            index += 1
        options.append(row)
        counted.append(counted_tier)
    session = Session(load_cache(CLUSTER).snapshot(), SchedulerConf([], options, "t", []))
    if hook != "on_session_open":  # (that one was asked as the session opened)
        asked.clear()
    spec = HOOKS[hook]
    answer = spec.ask(session)
    expected, expected_asked = model(RULES[hook], counted)
    plugins = sum(len(tier) for tier in counted)
    assert answer == spec.finish(expected, BARE, plugins)
    assert [i for i, _ in asked] == expected_asked
    if RULES[hook] is Rule.SESSION:
        assert all(argument is session for _, argument in asked)
