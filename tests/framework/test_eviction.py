"""The eviction API: a victim policy declared as a value, and what `evict_for` and `plan`
derive from it (victims within scope, in victim order, gangs whole, the final checks,
the node order).

Plugins here offer every candidate (or a chosen few), so what is tested is the policy's
own rule, not a plugin's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.builders import gang, load_cache, node, pod, podgroup, queue
from vscheduler.conf import PluginOption, SchedulerConf
from vscheduler.fit import Unfit
from vscheduler.framework.eviction import (
    PlanMemo,
    Plans,
    Scope,
    VictimPolicy,
    WholeJobs,
    _offer,
    _plan_on_node,
    _victim_rule,
    evict_for,
    never_preempts,
    plan,
    victim_order,
)
from vscheduler.framework.session import Session
from vscheduler.hookspecs import hookimpl
from vscheduler.model import PREEMPTABLE_STATUSES, Task, TaskStatus

S = TaskStatus

RECLAIM = VictimPolicy("reclaim", S.RUNNING, Scope.OTHER_QUEUES, offered_by="reclaimable")
# Reclaim's statuses, hook and node order, within the one queue these tests use.
RECLAIM_HERE = dataclasses.replace(RECLAIM, scope=Scope.OWN_QUEUE)
PREEMPT = VictimPolicy("preempt", PREEMPTABLE_STATUSES, Scope.OWN_QUEUE,
                       offered_by="preemptable", best_effort_spares_requests=True,
                       queue_must_fit=True, best_node_first=True)


def plugin(name: str = "offers", **hooks: Callable[..., Any]) -> type:
    """A plugin class offering every candidate as a victim, with `hooks` added."""
    def offer_all(self: Any, actor: Task, candidates: list[Task]) -> list[Task]:
        return candidates

    attrs: dict[str, Any] = {
        "name": name, "arguments": (), "__init__": lambda self, args: None,
        "preemptable": hookimpl(offer_all), "reclaimable": hookimpl(offer_all)}
    attrs.update({hook: hookimpl(fn) for hook, fn in hooks.items()})
    return type(f"Plugin_{name}", (), attrs)


def open_session(objects: list[dict], *plugins: type) -> Session:
    tiers = [[PluginOption(cls.name, cls, {}, {}) for cls in plugins or (plugin(),)]]
    conf = SchedulerConf(actions=[], tiers=tiers, source="test", warnings=[])
    return Session(load_cache(objects).snapshot(), conf)


def task(session: Session, name: str) -> Task:
    [found] = [t for job in session.jobs.values() for t in job.tasks.values()
               if t.name == name]
    return found


def names(tasks: list[Task] | None) -> list[str] | None:
    return None if tasks is None else sorted(t.name for t in tasks)


def running(name: str, queue_name: str = "default", node_name: str = "n1",
            cpu: str = "1", **args: Any) -> dict:
    return pod(name, cpu=cpu, queue=queue_name, node_name=node_name, **args)


# --------------------------------------------------------------------------- the value


def test_a_policy_is_a_frozen_value() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RECLAIM.gang_safe = False  # type: ignore[misc]
    assert dataclasses.replace(PREEMPT, scope=Scope.OWN_JOB).scope is Scope.OWN_JOB
    assert PREEMPT.scope is Scope.OWN_QUEUE


def test_only_the_two_victim_hooks_may_offer() -> None:
    with pytest.raises(ValueError, match="'reclaimable' or 'preemptable'"):
        VictimPolicy("evict", S.RUNNING, Scope.OWN_JOB, offered_by="overused")  # type: ignore[arg-type]


def test_a_pod_with_preemption_policy_never_evicts_no_one() -> None:
    never = pod("p")
    never["spec"]["preemptionPolicy"] = "Never"
    session = open_session([node("n1"), never, pod("q")])
    assert never_preempts(task(session, "p"))
    assert not never_preempts(task(session, "q"))


# --------------------------------------------------------------------------- scope


# n1 has 5 CPUs, 4 held, 1 idle: the preemptor needs 2, so any one victim is enough,
# and the one taken is the only one the scope allows.
CLUSTER = [
    node("n1", cpu="5"),
    queue("a"), queue("b"), queue("kept", reclaimable=False),
    running("a-0", "a"), running("kept-0", "kept"),
    podgroup("own", 1, queue="b"), running("own-0", "b", group="own"),
    running("b-0", "b"),
    pod("preemptor", cpu="2", queue="b", group="own"),
]


@pytest.mark.parametrize(("scope", "victims"), [
    (Scope.OTHER_QUEUES, ["a-0"]),       # not "kept" (its queue is not reclaimable)
    (Scope.OWN_QUEUE, ["b-0"]),          # other jobs of queue b only
    (Scope.OWN_JOB, ["own-0"]),
])
def test_scope_says_whose_tasks_may_go(scope: Scope, victims: list[str]) -> None:
    session = open_session(CLUSTER)
    policy = dataclasses.replace(RECLAIM, scope=scope)
    assert names(plan(session, policy, task(session, "preemptor"),
                      session.nodes["n1"])) == victims


def test_a_best_effort_preemptor_spares_tasks_with_requests_when_the_policy_says() -> None:
    # One pod slot, held by a pod with requests: a best-effort pod needs only the slot.
    objects = [node("n1", cpu="2", pods="1"), running("low", cpu="1"),
               pod("be", cpu=None, memory=None)]
    session = open_session(objects)
    be, n1 = task(session, "be"), session.nodes["n1"]
    assert plan(session, PREEMPT, be, n1) is None
    spares_nothing = dataclasses.replace(PREEMPT, best_effort_spares_requests=False)
    assert names(plan(session, spares_nothing, be, n1)) == ["low"]
    # A best-effort victim may go.
    session = open_session([node("n1", cpu="2", pods="1"),
                            running("free", cpu=None, memory=None),
                            pod("be", cpu=None, memory=None)])
    assert names(plan(session, PREEMPT, task(session, "be"), session.nodes["n1"])) == [
        "free"]


def test_tasks_not_marked_preemptable_and_other_statuses_never_go() -> None:
    objects = [node("n1", cpu="2"),
               running("kept", annotations={"volcano.sh/preemptable": "false"}),
               running("loose"), pod("p", cpu="1")]
    session = open_session(objects)
    p, n1 = task(session, "p"), session.nodes["n1"]
    assert names(plan(session, PREEMPT, p, n1)) == ["loose"]
    assert plan(session, dataclasses.replace(PREEMPT, statuses=S.BOUND), p, n1) is None


def test_only_what_plugins_offer_goes() -> None:
    objects = [node("n1", cpu="2"), running("x"), running("y"), pod("p", cpu="1")]
    offers_y = plugin("y-only", preemptable=lambda self, actor, candidates: [
        t for t in candidates if t.name == "y"])
    session = open_session(objects, offers_y)
    assert names(plan(session, PREEMPT, task(session, "p"), session.nodes["n1"])) == ["y"]
    # The reclaimable hook offers all: a reclaim-hooked policy may take either.
    reclaim_hook = dataclasses.replace(PREEMPT, offered_by="reclaimable")
    assert len(plan(session, reclaim_hook, task(session, "p"), session.nodes["n1"])) == 1


# --------------------------------------------------------------------------- the plan


def test_victims_go_until_the_preemptor_fits_no_more() -> None:
    objects = [node("n1", cpu="4"), *(running(f"v-{i}") for i in range(4)),
               pod("p", cpu="2")]
    session = open_session(objects)
    victims = plan(session, PREEMPT, task(session, "p"), session.nodes["n1"])
    assert victims is not None and len(victims) == 2


def test_a_gang_goes_whole_or_not_at_all() -> None:
    objects = [node("n1", cpu="2"), node("n2", cpu="1"), podgroup("g", 3, phase="Running"),
               running("g-0", group="g"), running("g-1", group="g"),
               running("g-2", node_name="n2", group="g"), pod("p", cpu="1")]
    session = open_session(objects)
    p, n1 = task(session, "p"), session.nodes["n1"]
    # Gang-safe: the whole gang, on every node; else one of its tasks.
    assert names(plan(session, PREEMPT, p, n1)) == ["g-0", "g-1", "g-2"]
    assert len(plan(session, dataclasses.replace(PREEMPT, gang_safe=False), p, n1)) == 1
    # A gang whose task on n2 may not go cannot go whole: nothing goes.
    task(session, "g-2").preemptable = False
    assert plan(session, PREEMPT, p, n1) is None


def test_victims_that_break_no_gang_go_before_a_gang() -> None:
    objects = [node("n1", cpu="3"), podgroup("g", 2, phase="Running"),
               running("g-0", group="g"), running("g-1", group="g"), running("loose"),
               pod("p", cpu="1")]
    session = open_session(objects)
    assert names(plan(session, PREEMPT, task(session, "p"), session.nodes["n1"])) == [
        "loose"]


def test_a_victim_later_ones_made_unnecessary_is_spared() -> None:
    # In victim order the small pod goes first, yet the big one alone makes room: the
    # reprieve drops the small one before anything is evicted.
    objects = [node("n1", cpu="4"), running("big", cpu="3"), running("small", cpu="1"),
               pod("p", cpu="3")]
    session = open_session(objects)
    p = task(session, "p")
    order = victim_order(session, [task(session, "big"), task(session, "small")], p)
    assert [t.name for t in order] == ["small", "big"]
    assert names(plan(session, PREEMPT, p, session.nodes["n1"])) == ["big"]
    assert evict_for(session, session.statement(), PREEMPT, p)
    assert (task(session, "small").status, task(session, "big").status) == (
        S.RUNNING, S.RELEASING)


def test_a_gang_later_ones_made_unnecessary_is_spared() -> None:
    # p needs 5 CPUs of n1's 6. The lone pod goes first (1 CPU), then neither gang alone
    # is enough: the one freeing most here goes (g3), then g2. With both gangs gone
    # the lone pod is not needed any more: it is spared.
    objects = [node("n1", cpu="6"), running("loose", cpu="1", priority=1),
               podgroup("g2", 2, phase="Running"),
               *(running(f"g2-{i}", group="g2", priority=2) for i in range(2)),
               podgroup("g3", 3, phase="Running"),
               *(running(f"g3-{i}", group="g3", priority=2) for i in range(3)),
               pod("p", cpu="5", priority=10)]
    session = open_session(objects)
    assert names(plan(session, PREEMPT, task(session, "p"), session.nodes["n1"])) == [
        "g2-0", "g2-1", "g3-0", "g3-1", "g3-2"]


def _two_gangs() -> list[dict]:
    """An 8-GPU gang fills n1, a 4-GPU gang n2; p asks for 4 GPUs. n1 comes first in
    node order, but the gang on n2 frees exactly enough."""
    gpu = {"nvidia.com/gpu": "1"}
    return [node("n1", cpu="16", **{"nvidia.com/gpu": "8"}),
            node("n2", cpu="16", **{"nvidia.com/gpu": "4"}),
            podgroup("big", 8, phase="Running"),
            *(running(f"big-{i}", group="big", **gpu) for i in range(8)),
            podgroup("small", 4, phase="Running"),
            *(running(f"small-{i}", node_name="n2", group="small", **gpu) for i in range(4)),
            pod("p", cpu="1", **{"nvidia.com/gpu": "4"})]


def test_the_plan_wasting_least_across_nodes_goes() -> None:
    objects = _two_gangs()
    for policy in (RECLAIM_HERE, PREEMPT):
        session = open_session(objects)
        p = task(session, "p")
        assert evict_for(session, session.statement(), policy, p)
        assert p.node_name == "n2"
        assert sorted(t.name for job in session.jobs.values() for t in job.tasks.values()
                      if t.status == S.RELEASING) == [f"small-{i}" for i in range(4)]


def test_plans_are_compared_on_as_many_nodes_as_node_sampling_finds() -> None:
    """On a large cluster, plans are made on candidate nodes in order until node sampling
    has enough of them, as allocate counts feasible nodes: the least wasteful of those
    goes. With sampling off, every node is planned on."""
    from vscheduler.framework.placement import OFF, NodeSampling

    objects = _two_gangs()
    for sampling, chosen in ((NodeSampling(minimum_feasible=1, percentage=50), "n1"),
                             (OFF, "n2")):
        session = open_session(objects)
        session.node_sampling = sampling
        p = task(session, "p")
        assert evict_for(session, session.statement(), RECLAIM_HERE, p)
        assert p.node_name == chosen


def test_a_node_where_earlier_evictions_release_enough_is_used_first() -> None:
    # p1's eviction releases 4 CPUs on n1 (its gang and n2's waste the same: node order
    # decides); p2 waits on what is left of them rather than evicting on n2.
    objects = [node("n1", cpu="4"), node("n2", cpu="4"), podgroup("g", 4, phase="Running"),
               *(running(f"g-{i}", group="g") for i in range(4)),
               podgroup("h", 4, phase="Running"),
               *(running(f"h-{i}", node_name="n2", group="h") for i in range(4)),
               pod("p1", cpu="2", priority=10), pod("p2", cpu="2", priority=10)]
    session = open_session(objects)
    statement = session.statement()
    p1, p2 = task(session, "p1"), task(session, "p2")
    assert evict_for(session, statement, RECLAIM_HERE, p1)
    assert p1.node_name == "n1"
    assert evict_for(session, statement, RECLAIM_HERE, p2)
    assert p2.node_name == "n1"
    assert all(task(session, f"h-{i}").status == S.RUNNING for i in range(4))


# --------------------------------------------------------------------------- evict_for


def test_evict_for_evicts_and_pipelines_in_the_statement() -> None:
    objects = [node("n1", cpu="1"), running("v"), pod("p", cpu="1")]
    session = open_session(objects)
    statement = session.statement()
    p, v = task(session, "p"), task(session, "v")
    assert evict_for(session, statement, PREEMPT, p)
    assert (p.status, p.node_name) == (S.PIPELINED, "n1")
    assert v.status == S.RELEASING
    statement.commit()
    [eviction] = session.result.evictions
    assert (eviction.task, eviction.action, eviction.preemptor) == (v.key, "preempt", p.key)


def test_a_failed_final_check_gives_the_node_up_and_leaves_nothing() -> None:
    objects = [node("n1", cpu="1"), running("v"), pod("p", cpu="1")]
    full = plugin("full", allocatable=lambda self, queue, task: "queue full")
    session = open_session(objects, full)
    statement = session.statement()
    p, v = task(session, "p"), task(session, "v")
    assert not evict_for(session, statement, PREEMPT, p)
    assert (p.status, v.status, statement.operations) == (S.PENDING, S.RUNNING, [])
    # A policy that does not ask the queue passes the same node.
    assert evict_for(session, statement, dataclasses.replace(PREEMPT, queue_must_fit=False),
                     p)


def test_nodes_are_tried_best_scored_first_or_in_node_order() -> None:
    objects = [node("n1", cpu="1"), node("n2", cpu="1"), running("v1"),
               running("v2", node_name="n2"), pod("p", cpu="1")]
    prefers_n2 = plugin(node_order=lambda self, task, node: 5.0 if node.name == "n2"
                        else 1.0)
    for policy, chosen in ((PREEMPT, "n2"),
                           (dataclasses.replace(PREEMPT, best_node_first=False), "n1")):
        session = open_session(objects, prefers_n2)
        p = task(session, "p")
        assert evict_for(session, session.statement(), policy, p)
        assert p.node_name == chosen


def test_a_node_a_predicate_refuses_for_good_is_not_tried() -> None:
    objects = [node("n1", cpu="1"), node("n2", cpu="1"), running("v1"),
               running("v2", node_name="n2"), pod("p", cpu="1")]

    def not_n1(self: Any, task: Task, node: Any) -> Unfit | None:
        return Unfit("n1 is off limits") if node.name == "n1" else None

    session = open_session(objects, plugin(predicate=not_n1))
    p = task(session, "p")
    # Reclaim's statuses, hook and node order, within the queue (all are in "default").
    policy = dataclasses.replace(RECLAIM, scope=Scope.OWN_QUEUE)
    assert evict_for(session, session.statement(), policy, p)
    assert p.node_name == "n2" and task(session, "v1").status == S.RUNNING


@pytest.mark.parametrize("budget_on", [None, "a", "b"])
def test_victims_that_break_no_disruption_budget_go_first(budget_on) -> None:
    """kube-scheduler's rule: of two victims either of which makes room, the one whose
    PodDisruptionBudget allows no disruption is the last choice."""
    objects = [node("n1", cpu="4"),
               running("a", cpu="2", labels={"app": "a"}),
               running("b", cpu="2", labels={"app": "b"}),
               pod("p", cpu="2")]
    if budget_on:
        objects.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": "keep", "namespace": "default"},
                        "spec": {"selector": {"matchLabels": {"app": budget_on}},
                                 "maxUnavailable": 0}})
    session = open_session(objects)
    chosen = names(plan(session, RECLAIM_HERE, task(session, "p"), session.nodes["n1"]))
    assert len(chosen) == 1
    if budget_on:
        assert chosen != [budget_on]


@pytest.mark.parametrize("first", ["j", "k"])
def test_the_reprieve_never_spares_part_of_a_gang_evicted_whole(first) -> None:
    """Gang j (4 pods, minMember 3) can lose one pod alone, then goes whole when more is
    needed: the pod taken alone must go with the rest, or j is left with 1 of 3."""
    objects = [node("n1", cpu="8", memory="64Gi")]
    for i, name in enumerate((first, "k" if first == "j" else "j")):
        objects += gang(name, 4, 3 if name == "j" else 4, node_name="n1",
                        creation=f"2024-01-01T00:00:0{i + 1}Z")
    objects.append(pod("p", cpu="3", creation="2024-01-01T00:00:09Z"))
    session = open_session(objects)
    chosen = names(plan(session, RECLAIM_HERE, task(session, "p"), session.nodes["n1"]))
    assert chosen is not None
    for gang_name, minimum in (("j", 3), ("k", 4)):
        left = 4 - sum(1 for n in chosen if n.startswith(f"{gang_name}-"))
        assert left == 4 or left == 0 or left >= minimum, (gang_name, chosen)


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
def test_a_budget_counts_the_evictions_the_session_already_made(order) -> None:
    """A budget allowing one disruption of app=a: two pods that each evict one victim
    take at most one a pod between them, whichever pods come first."""
    objects = [node("n1", cpu="4")]
    for i, label in enumerate(order):
        objects += [running(f"{label}{j}", cpu="1", labels={"app": label},
                            creation=f"2024-01-01T00:00:0{2 * i + j}Z") for j in range(2)]
    objects += [pod("p1", cpu="1"), pod("p2", cpu="1"),
                {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "keep", "namespace": "default"},
                 "spec": {"selector": {"matchLabels": {"app": "a"}}},
                 "status": {"disruptionsAllowed": 1}}]
    session = open_session(objects)
    statement = session.statement()
    for name in ("p1", "p2"):
        assert evict_for(session, statement, RECLAIM_HERE, task(session, name))
    gone = [t.name for job in session.jobs.values() for t in job.tasks.values()
            if t.status == S.RELEASING]
    assert len(gone) == 2
    assert sum(1 for name in gone if name.startswith("a")) <= 1


def test_a_plan_memo_carried_from_a_session_that_was_not_settled_keeps_no_plan():
    """A session that failed before its end never settled its victim plans: the next
    session takes over only what holds of no plan, not plans naming the old tasks."""
    kept = PlanMemo.__new__(PlanMemo)
    plans = Plans()
    plans.note("n1", ((1.0, 0.0, 0.0), []))
    plans.note("n2", None)
    plans.closed = {"n1": ()}  # (its own: not shared with other plans)
    kept.plans = {("policy",): plans}
    kept.refusals = {}
    kept.alike_refusals = {}
    kept.closed = {}
    session = SimpleNamespace(snapshot=SimpleNamespace(changed_nodes=[], changed_jobs=[]),
                              jobs={}, nodes={})
    memo = PlanMemo.__new__(PlanMemo)
    memo.plans = {}
    memo.carry(session, kept)
    assert memo.plans[("policy",)].by_node == {"n2": None}
    assert memo.plans[("policy",)].closed == {}


# --------------------------------------------------------------------------- closed nodes

GANGS = st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(0, 2),
                           st.sampled_from(["qa", "qb"]), st.booleans(), st.booleans()),
                 min_size=1, max_size=6)


@given(gangs=GANGS, preemptor_queue=st.sampled_from(["qa", "qb"]),
       own=st.integers(0, 2), own_guarded=st.booleans(),
       policy=st.sampled_from([PREEMPT, RECLAIM, RECLAIM_HERE,
                               dataclasses.replace(PREEMPT, scope=Scope.OWN_JOB)]))
@example(gangs=[(1, 1, 0, "qa", False, False)], preemptor_queue="qa", own=2,
         own_guarded=True, policy=dataclasses.replace(PREEMPT, scope=Scope.OWN_JOB))
@settings(max_examples=300, deadline=None)
def test_a_node_closed_per_job_has_no_plan_pod_by_pod(
        gangs: list[tuple[int, int, int, str, bool, bool]], preemptor_queue: str,
        own: int, own_guarded: bool, policy: VictimPolicy) -> None:
    """On generated nodes of gangs (some above their minMember, some with pods not yet
    placed or not preemptable, some whose plugins refuse them; the preemptor's own gang
    with `own` pods running), the per-job shortcut (`WholeJobs.closed`) never changes a
    plan: each node gets the plan that judging it pod by pod gives."""
    objects: list[dict] = [queue("qa", reclaimable=True), queue("qb", reclaimable=True),
                           node("n0", cpu="4"), node("n1", cpu="4"), node("n2", cpu="4")]
    refused: set[str] = set()
    guarded: set[str] = set()
    for g, (size, minimum, unplaced, queue_name, refuse, guard) in enumerate(gangs):
        name = f"g{g}"
        objects.append(podgroup(name, min(minimum, size), queue=queue_name,
                                phase="Running"))
        objects += [running(f"{name}-{t}", queue_name, f"n{(g + t) % 3}", group=name)
                    if t >= unplaced else pod(f"{name}-{t}", queue=queue_name, group=name)
                    for t in range(size)]
        if refuse:
            refused.add(name)
        if guard:
            guarded.add(f"{name}-{size - 1}")
    objects += [podgroup("want", own + 1, queue=preemptor_queue, phase="Running"),
                pod("p", cpu="2", group="want", queue=preemptor_queue),
                *(running(f"want-{t}", preemptor_queue, f"n{t}", group="want")
                  for t in range(own))]
    if own_guarded:
        guarded.add("want-0")

    def offer(self: Any, actor: Task, candidates: list[Task]) -> list[Task]:
        return [t for t in candidates if t.job_id.split("/")[-1] not in refused]

    session = open_session(objects, plugin(preemptable=offer, reclaimable=offer))
    for job in session.jobs.values():
        for t in job.tasks.values():
            t.preemptable = t.name not in guarded
    preemptor = task(session, "p")
    for name in ("n0", "n1", "n2"):
        at = session.nodes[name]
        eligible, gives = _victim_rule(session, policy, preemptor)
        shortcut = WholeJobs(preemptor, session.nodes, eligible, _offer(session, policy), set(),
                             gives)
        planned = plan(session, policy, preemptor, at)
        assert names(_plan_on_node(session, policy, preemptor, at, shortcut)[0]) \
            == names(planned)
        # A node with no pod of a job the rule takes from is not even scored.
        if not any(gives(t.job_id) for t, _ in at.tasks.values()):
            assert planned is None


def test_refusals_by_victim_signature_end_with_their_session():
    """Gangs refused whole by signature (`Plans.refused_alike`) are refused for what
    held in their session only; a memo carried from a session that did not settle
    (a failed one, say), whose plans read the clock and are not carried (so are not
    settled either), starts the next with none."""
    clocked = Plans()
    alike = {("qc", "signature")}
    clocked.refused_alike = alike
    clocked.clocked = True
    kept = PlanMemo.__new__(PlanMemo)
    kept.plans = {("policy", "qa"): clocked}
    kept.refusals = {}
    kept.alike_refusals = {("policy",): alike}
    closed = {"n1": ()}
    clocked.closed = closed
    kept.closed = {("policy",): closed}
    session = SimpleNamespace(snapshot=SimpleNamespace(changed_nodes=[], changed_jobs=[]),
                              jobs={}, nodes={})
    memo = PlanMemo.__new__(PlanMemo)
    memo.plans = {}
    memo.carry(session, kept)
    assert all(not refused for refused in memo.alike_refusals.values())
    assert all(not plans.refused_alike for plans in memo.plans.values())
    assert all(not nodes for nodes in memo.closed.values())  # (not carried either)


def test_refusals_shared_with_plans_that_read_the_clock_are_not_carried():
    """Refused gangs shared by the plans of two queues, one of which passed a pod over
    for its minimum runtime: the refusals may rest on that pod's age, and so may the
    other plans' nodes without a plan (found with those refusals), so neither plans
    are carried into the next session, and new plans share no refusals."""
    refused = {"default/gang"}
    clocked, steady = Plans(), Plans()
    clocked.refused = steady.refused = refused
    clocked.clocked = True
    kept = PlanMemo.__new__(PlanMemo)
    kept.plans = {("policy", "qa"): clocked, ("policy", "qb"): steady}
    kept.refusals = {("policy",): refused}
    kept.alike_refusals = {}
    kept.closed = {}
    session = SimpleNamespace(snapshot=SimpleNamespace(changed_nodes=[], changed_jobs=[]),
                              jobs={}, nodes={})
    memo = PlanMemo.__new__(PlanMemo)
    memo.plans = {}
    memo.carry(session, kept)
    assert memo.plans == {}
    assert memo.refusals == {}
