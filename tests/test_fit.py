"""Failure explanations (vscheduler/fit.py): the message of a set of node verdicts is what
counting them by hand gives, copies share their verdicts without one's changes reaching
another, and a shared search's failed tasks keep the message of the verdicts they had."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import gang, node, pod, podgroup
from tests.framework.test_close import run_once
from tests.framework.test_eviction import open_session, plugin
from vscheduler.fit import NodeFitErrors, Unfit
from vscheduler.framework.placement import predicate_nodes
from vscheduler.framework.search import NodeSearch
from vscheduler.framework.statement import Statement
from vscheduler.model import Node

REFUSALS = [
    Unfit("node(s) had untolerated taint {gpu: true}"),
    Unfit("node(s) didn't match Pod's node affinity/selector"),
    Unfit("Insufficient nvidia.com/gpu", resolvable=True),
    Unfit("Too many pods", "node(s) didn't have free ports", resolvable=True),
    Unfit("node(s) had untolerated taint {gpu: true}", resolvable=True),
]


def recount(verdicts: Mapping[str, Unfit], total: int | None = None, error: str = "") -> str:
    """The message as Volcano words it, counted the plain way: each reason's nodes, the
    `count reason` texts sorted as text ("10 x" before "2 y")."""
    if error and not verdicts:
        return error
    counts: dict[str, int] = {}
    for unfit in verdicts.values():
        for reason in unfit.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    head = error or f"0/{len(verdicts) if total is None else total} nodes are available"
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    return f"{head}: {', '.join(parts)}." if parts else f"{head}."


def unresolvable(verdicts: Mapping[str, Unfit]) -> set[str]:
    return {name for name, unfit in verdicts.items() if not unfit.resolvable}


def fresh(unfit: Unfit) -> Unfit:
    """An equal refusal that is another object (as a predicate may build each time)."""
    return Unfit(*unfit.reasons, resolvable=unfit.resolvable)


# One step on a row of holders: (kind, holder, node, refusal). Enough nodes that a
# holder's own changes pass the size at which they are merged into a new shared map.
STEP = st.tuples(st.sampled_from(["set", "set", "set", "set", "forget", "copy", "render",
                                  "fill"]),
                 st.integers(0, 3), st.integers(0, 40), st.integers(0, len(REFUSALS) - 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=160), st.sampled_from(["", "pod has no card"]))
def test_every_holder_renders_what_a_recount_of_its_own_verdicts_gives(
        steps: list[tuple[str, int, int, int]], error: str) -> None:
    # Each holder is checked against a plain dict of what it was told: copies taken,
    # changes made to any of them, messages rendered (and cached) in between.
    holders = [NodeFitErrors(error)]
    models: list[dict[str, Unfit]] = [{}]
    for kind, which, n, r in steps:
        i = which % len(holders)
        name = f"n{n}"
        if kind == "set":
            unfit = fresh(REFUSALS[r]) if n % 2 else REFUSALS[r]
            holders[i].set(name, unfit)
            models[i][name] = unfit
        elif kind == "forget":
            holders[i].forget(name)
            models[i].pop(name, None)
        elif kind == "copy":
            holders.append(holders[i].copy())
            models.append(dict(models[i]))
        elif kind == "fill":  # from the holder after it, the node named overridden
            j = (i + 1) % len(holders)
            override = (name, REFUSALS[r])
            holders[i].fill(holders[j], [override])
            filled = dict(models[j])
            filled[name] = REFUSALS[r]
            filled.update(models[i])
            models[i] = filled
        else:
            holders[i].message(20)
            holders[i].unresolvable_nodes()
        for holder, model in zip(holders, models, strict=True):
            assert dict(holder.nodes) == model
            assert holder.message() == recount(model, error=error)
            assert holder.message(20) == recount(model, 20, error)
            assert holder.unresolvable_nodes() == unresolvable(model)


def test_a_holder_changing_shared_verdicts_copies_its_changes_not_every_refusal() -> None:
    # Tasks of one shape fail one after another while the cluster changes in between:
    # each copy then changes a few of thousands of refusals, and shares the rest.
    errors = NodeFitErrors()
    for i in range(5000):
        errors.set(f"n{i}", REFUSALS[2])
    failed = [errors.copy()]
    for i in range(200):
        errors.forget(f"n{i}")  # room again here,
        errors.set(f"n{i + 1}", REFUSALS[0])  # and taken there
        failed.append(errors.copy())
    shared = {id(f._verdicts.base) for f in failed}
    assert len(shared) < 20  # merged now and then, never copied for each
    assert failed[1].message(5000) == ("0/5000 nodes are available: 1 node(s) had "
                                       "untolerated taint {gpu: true}, "
                                       "4998 Insufficient nvidia.com/gpu.")
    assert failed[0].message(5000) == "0/5000 nodes are available: " \
                                      "5000 Insufficient nvidia.com/gpu."
    assert len(failed[-1].nodes) == 4800 and failed[-1].unresolvable_nodes() == {"n200"}


def test_counts_of_ten_and_more_sort_as_text() -> None:
    errors = NodeFitErrors()
    for i in range(10):
        errors.set(f"a{i}", Unfit("Insufficient cpu", resolvable=True))
    errors.set("b", Unfit("node(s) had untolerated taint {gpu: true}"))
    errors.set("c", Unfit("node(s) had untolerated taint {gpu: true}"))
    assert errors.message(15) == ("0/15 nodes are available: 10 Insufficient cpu, "
                                  "2 node(s) had untolerated taint {gpu: true}.")


def test_copies_share_one_rendering_until_one_of_them_changes() -> None:
    errors = NodeFitErrors()
    errors.set("n0", REFUSALS[0])
    errors.set("n1", REFUSALS[2])
    copies = [errors.copy() for _ in range(3)]
    assert all(c.message(4) is errors.message(4) for c in copies)
    assert all(c.unresolvable_nodes() is errors.unresolvable_nodes() for c in copies)
    # The original changes: its copies keep what they had, and still share it.
    errors.set("n1", REFUSALS[1])
    errors.forget("n0")
    assert errors.message(4) == "0/4 nodes are available: 1 node(s) didn't match Pod's " \
                                "node affinity/selector."
    expected = ("0/4 nodes are available: 1 Insufficient nvidia.com/gpu, "
                "1 node(s) had untolerated taint {gpu: true}.")
    assert [c.message(4) for c in copies] == [expected] * 3
    assert copies[1].message(4) is copies[2].message(4)
    # A copy changes: neither the original nor the other copies see it.
    copies[0].set("n2", REFUSALS[1])
    assert copies[1].message(4) == expected
    assert "n2" not in errors.nodes and errors.unresolvable_nodes() == {"n1"}


def test_a_refusal_set_again_to_an_equal_one_keeps_the_set_shared() -> None:
    errors = NodeFitErrors()
    errors.set("n0", REFUSALS[3])
    copy = errors.copy()
    errors.set("n0", fresh(REFUSALS[3]))  # judged again, refused again the same way
    errors.forget("n9")  # never refused
    assert errors.message() is copy.message()
    errors.set("n0", REFUSALS[2])  # now refused otherwise: a set of its own
    assert errors.message() != copy.message()
    assert copy.message() == "0/1 nodes are available: 1 Too many pods, " \
                             "1 node(s) didn't have free ports."


def test_refusals_are_equal_by_reasons_and_resolvability() -> None:
    assert Unfit("a", "b", resolvable=True) == Unfit("a", "b", resolvable=True)
    assert hash(Unfit("a")) == hash(Unfit("a"))
    assert Unfit("a") != Unfit("a", resolvable=True)
    assert Unfit("a", "b") != Unfit("b", "a")
    assert Unfit("a") != "a"


def test_an_error_alone_is_the_message_and_heads_the_histogram_otherwise() -> None:
    alone = NodeFitErrors("Task default/p has already predicated failed, skip")
    assert alone.message(7) == "Task default/p has already predicated failed, skip"
    headed = NodeFitErrors("pre-predicate failed")
    headed.set("n0", REFUSALS[0])
    assert headed.message(7) == \
        "pre-predicate failed: 1 node(s) had untolerated taint {gpu: true}."
    assert NodeFitErrors().message(3) == "0/3 nodes are available."


# ------------------------------------------------------------- on generated clusters

def refusing(table: dict[str, Unfit]) -> type:
    """A plugin refusing nodes as `table` says, whatever the task (so it signs)."""
    return plugin("refusing", predicate=lambda self, task, node: table.get(node.name),
                  task_signature=lambda self, task: None)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2), st.one_of(
           st.none(), st.integers(0, len(REFUSALS) - 1))), min_size=1, max_size=14),
       st.lists(st.one_of(st.just(-1), st.integers(0, 20)), min_size=1, max_size=24))
def test_failed_tasks_of_a_shared_search_keep_the_message_of_their_own_verdicts(
        shape: list[tuple[int, int | None]], steps: list[int]) -> None:
    # Nodes of 1 or 2 CPUs, some refused by a plugin; a gang of 1-CPU pods asks in turn
    # (-1 in `steps`) or a placement is undone (its node has room again), so the
    # verdicts of the search the pods share change between one failure and the next.
    objects: list[dict[str, Any]] = []
    table: dict[str, Unfit] = {}
    for i, (cpu, refusal) in enumerate(shape):
        objects.append(node(f"n{i}", cpu=str(cpu)))
        if refusal is not None:
            table[f"n{i}"] = fresh(REFUSALS[refusal])
    asks = sum(1 for s in steps if s == -1)
    objects += gang("g", asks, cpu="1")
    session = open_session(objects, refusing(table))
    search = NodeSearch(session, Node.insufficient_future, Node.insufficient_now)
    tasks = sorted(session.jobs["default/g"].tasks.values(), key=lambda t: t.name)
    placed: list[Statement] = []
    failed: list[tuple[NodeFitErrors, str, set[str]]] = []
    total = len(session.node_list)
    for step in steps:
        if step >= 0:
            if placed:
                placed.pop(step % len(placed)).discard()
            continue
        task = tasks.pop(0)
        found = search.best(task)
        assert found is not None  # every plugin signs: the search is shared
        chosen, errors = found
        if chosen is None:
            # As a fresh search over every node, counted by hand, would explain it.
            _, own = predicate_nodes(session, task, session.node_list,
                                     Node.insufficient_future)
            assert errors.message(total) == recount(own.nodes, total)
            assert errors.unresolvable_nodes() == unresolvable(own.nodes)
            failed.append((errors, recount(own.nodes, total), unresolvable(own.nodes)))
            continue
        statement = session.statement()
        assert statement.allocate(task, chosen) is None
        placed.append(statement)
    for errors, message, nodes in failed:
        assert errors.message(total) == message
        assert errors.unresolvable_nodes() == nodes


def test_pods_failing_alike_in_a_session_share_one_rendered_reason() -> None:
    # Twelve single-pod jobs of one shape, none fits: every pending pod is told the same
    # reason, rendered once.
    nodes = [node(f"n{i}", cpu="2") for i in range(3)]
    nodes.append(node("t", cpu="8", taints=[{"key": "gpu", "value": "true",
                                               "effect": "NoSchedule"}]))
    pods = []
    for i in range(12):
        pods += [podgroup(f"j{i}"), pod(f"j{i}-0", cpu="4", group=f"j{i}")]
    _, _, result = run_once([*nodes, *pods])
    reasons = [result.pending[f"default/j{i}-0"][0] for i in range(12)]
    assert reasons[0] == ("0/4 nodes are available: 1 node(s) had untolerated taint "
                          "{gpu: true}, 3 Insufficient cpu.")
    assert all(r is reasons[0] for r in reasons)
