"""The rules that combine plugins' answers (`hookspecs.Rule`), one combinator each.

A combinator takes one hook's bound methods, tier by tier in conf order, and returns the
one function the session calls. It is built once, at session open, and specialised for
the number of plugins: none gives a constant answer, one is the plugin's own bound
method (no wrapper at all), several a small loop. So the per-task-per-node hooks
(`predicate`, `node_order`) pay nothing per call for being combined: no dispatch on the
rule, no copies; and the two-argument hooks get a two-argument loop, without packing
their arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vscheduler import hookspecs
from vscheduler.hookspecs import ABSTAIN, PERMIT, RULES, Reject, Rule

__all__ = ["COMBINATORS", "Tiers", "combine"]

# One hook's bound methods, per tier, in conf order.
Tiers = list[list[Callable[..., Any]]]
Combinator = Callable[[Tiers, int], Callable[..., Any]]


def _flat(tiers: Tiers) -> list[Callable[..., Any]]:
    return [fn for tier in tiers for fn in tier]


def _none(*args: Any) -> None:
    return None


def _none2(first: Any, second: Any) -> None:
    return None


def _zero(*args: Any) -> int:
    return 0


def _nothing(*args: Any) -> tuple:
    return ()


def _true(*args: Any) -> bool:
    return True


def _false(*args: Any) -> bool:
    return False


def _no_scores(*args: Any) -> dict[str, float]:
    return {}


def every(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.SESSION and Rule.NOTIFY: call each; the last non-empty answer wins."""
    fns = _flat(tiers)
    if len(fns) < 2:  # (a lone plugin's method is bound as it is)
        return fns[0] if fns else _none

    def notify(*args: Any) -> Any:
        last = None
        for fn in fns:
            last = fn(*args) or last
        return last
    return notify


def first_nonzero(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.ORDER: the first non-zero answer, else 0 (the caller's tie-break follows)."""
    fns = _flat(tiers)
    if len(fns) < 2:  # (a lone plugin's method is bound as it is)
        return fns[0] if fns else _zero

    if arity == 2:
        # (job, queue and task order compare two at a time, thousands of times a
        # session: no packing of the arguments)
        def order2(left: Any, right: Any) -> int:
            for fn in fns:
                answer = fn(left, right)
                if answer:
                    return answer
            return 0
        return order2

    def order(*args: Any) -> int:
        for fn in fns:
            answer = fn(*args)
            if answer:
                return answer
        return 0
    return order


def first_refusal(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.FIRST_REFUSAL: the first answer that is not None, else None."""
    fns = _flat(tiers)
    if len(fns) < 2:  # (a lone plugin's method is bound as it is)
        return fns[0] if fns else (_none2 if arity == 2 else _none)
    if arity == 2:
        # `predicate` runs per task per node: no packing of its arguments
        def refusal2(first: Any, second: Any) -> Any:
            for fn in fns:
                answer = fn(first, second)
                if answer is not None:
                    return answer
            return None
        return refusal2

    def refusal(*args: Any) -> Any:
        for fn in fns:
            answer = fn(*args)
            if answer is not None:
                return answer
        return None
    return refusal


def vote(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.VOTE: the first tier not all abstaining decides; a Reject in it wins."""
    voting = [tier for tier in tiers if tier]
    if not voting:
        return lambda *args: PERMIT

    def count(*args: Any) -> int | Reject:
        for tier in voting:
            permitted = False
            for fn in tier:
                answer = fn(*args)
                if isinstance(answer, Reject):
                    return answer
                if answer != ABSTAIN:
                    permitted = True
            if permitted:
                return PERMIT
        return PERMIT
    return count


def victims(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.VICTIMS: intersect within a tier; the first tier with victims decides."""
    offering = [tier for tier in tiers if tier]
    if not offering:
        return lambda actor, candidates: []

    def intersect(actor: Any, candidates: list) -> list:
        for tier in offering:
            chosen: list | None = None
            for fn in tier:
                answer = fn(actor, candidates)
                if answer is None:
                    continue
                if not answer:
                    chosen = None
                    break
                if chosen is None:
                    chosen = list(answer)
                else:
                    keep = {t.uid for t in answer}
                    chosen = [t for t in chosen if t.uid in keep] or None
            if chosen:
                return chosen
        return []
    return intersect


def total(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.SUM: the scores summed (`node_order`, per task per node)."""
    fns = _flat(tiers)
    if len(fns) < 2:  # (a lone plugin's method is bound as it is)
        return fns[0] if fns else lambda first, second: 0.0

    def summed(first: Any, second: Any) -> float:
        return sum(fn(first, second) for fn in fns)
    return summed


def total_by_node(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.SUM_BY_NODE: the scores summed per node name."""
    fns = _flat(tiers)
    if len(fns) < 2:  # (a lone plugin's method is bound as it is)
        return fns[0] if fns else _no_scores

    def summed(*args: Any) -> dict[str, float]:
        scores: dict[str, float] = {}
        for fn in fns:
            for name, score in fn(*args).items():
                scores[name] = scores.get(name, 0.0) + score
        return scores
    return summed


def all_true(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.ALL: true unless some plugin says false."""
    fns = _flat(tiers)
    if not fns:
        return _true

    def agreed(*args: Any) -> bool:
        return all(fn(*args) for fn in fns)
    return agreed


def first_tier(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.FIRST_TIER: the first tier with the hook decides; all of it must agree."""
    deciding = next((tier for tier in tiers if tier), None)
    if deciding is None:
        return _false
    return all_true([deciding], arity)


def collect(tiers: Tiers, arity: int) -> Callable[..., Any]:
    """Rule.SIGNATURE: the answers, as a tuple in conf order."""
    fns = _flat(tiers)
    if not fns:
        return _nothing
    if len(fns) == 1:
        only = fns[0]
        return lambda *args: (only(*args),)
    if arity == 1:
        # (`task_signature` and `job_order_key` are asked per task and per job, tens
        # of thousands of times a session: no packing, no generator)
        return lambda arg: tuple([fn(arg) for fn in fns])
    return lambda *args: tuple([fn(*args) for fn in fns])


COMBINATORS: dict[Rule, Combinator] = {
    Rule.SESSION: every,
    Rule.ORDER: first_nonzero,
    Rule.FIRST_REFUSAL: first_refusal,
    Rule.VOTE: vote,
    Rule.VICTIMS: victims,
    Rule.SUM: total,
    Rule.SUM_BY_NODE: total_by_node,
    Rule.ALL: all_true,
    Rule.FIRST_TIER: first_tier,
    Rule.NOTIFY: every,
    Rule.SIGNATURE: collect,
}

# hook -> how many arguments it takes, read from its hookspec
_ARITY = {hook: getattr(hookspecs, hook).__code__.co_argcount for hook in RULES}


def combine(hook: str, tiers: Tiers) -> Callable[..., Any]:
    """The one function the session calls for `hook`, from its plugins' methods."""
    return COMBINATORS[RULES[hook]](tiers, _ARITY[hook])
