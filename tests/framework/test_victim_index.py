"""The victim index (`victim_index.VictimIndex`): the nodes open to a gang-safe plan,
found by asking once per kind of job, and kept up to date as the session changes
nodes. (That planning only on its open nodes decides as planning on every node is a
property test in `tests/test_invariants.py`.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests import builders as b
from tests.builders import gang, node
from tests.framework.test_eviction import PREEMPT, RECLAIM, open_session, plugin, task
from vscheduler.framework import eviction
from vscheduler.framework.victim_index import VictimIndex, placed_tasks
from vscheduler.hookspecs import hookimpl
from vscheduler.model import Job


def _full() -> list[dict[str, Any]]:
    """Gangs G1 and G2 of two pods at their minMember, alike, on n0 and n1; E, three
    pods with minMember 2 (one may go alone), on n2; n3 empty."""
    return [*(node(f"n{i}", cpu="8") for i in range(4)),
            *gang("G1", 2, node_name="n0", phase="Running"),
            *gang("G2", 2, node_name="n1", phase="Running"),
            *gang("E", 3, 2, node_name="n2", phase="Running")]


def _session(objects: list[dict[str, Any]]) -> Any:
    """A session whose one plugin offers every candidate and says its offers read
    nothing of a gang beyond the framework's part of its signature (`_offerer`)."""
    session = open_session(objects, _offerer())
    assert session.judges_gangs_alike
    return session


def test_gangs_alike_are_asked_about_once_and_their_nodes_are_closed() -> None:
    """G1 refused whole refuses G2 (one kind): only E's node is open."""
    session = _session(_full())
    index = VictimIndex(session)
    refused: set[tuple] = set()
    asked: list[str] = []

    def whole_job(job: Job) -> None:
        asked.append(job.name)
        refused.add(session.victim_signature(job, placed_tasks(job, session.nodes)))

    assert index.open_nodes("", lambda uid: True, whole_job, refused, 100) == {"n2"}
    assert asked == ["G1"]
    # a rule that takes nothing from E's job: no node is open
    e_uid = session.jobs[task(session, "E-0").job_id].uid
    assert index.open_nodes("", lambda uid: uid != e_uid, whole_job, refused, 100) == set()
    # the preemptor's own job gives it pods one by one
    g1_uid = task(session, "G1-0").job_id
    assert index.open_nodes(g1_uid, lambda uid: uid != e_uid, whole_job, refused,
                            100) == {"n0"}


def test_a_gang_approved_whole_opens_the_nodes_of_its_kind() -> None:
    """G1 approved whole: G2, of its kind, may be too (each is planned on)."""
    session = _session(_full())
    index = VictimIndex(session)
    assert index.open_nodes("", lambda uid: True, lambda job: list(job.tasks.values()),
                            set(), 100) == {"n0", "n1", "n2"}


def test_more_open_jobs_than_the_budget_give_no_answer() -> None:
    """G1 asked about, then G1, G2 and E open: four, past a budget of three, and the
    nodes are left to be walked."""
    session = _session(_full())
    index = VictimIndex(session)
    approve = lambda job: list(job.tasks.values())  # noqa: E731
    assert index.open_nodes("", lambda uid: True, approve, set(), 3) is None
    assert index.open_nodes("", lambda uid: True, approve, set(), 4) == {"n0", "n1", "n2"}


def test_a_job_is_sorted_again_once_a_node_with_its_pods_changed() -> None:
    """E losing a pod in the session keeps minMember and no more: it gives only whole
    now, and the refusal closes its node; the eviction discarded, it opens again."""
    session = _session(_full())
    index = VictimIndex(session)
    refuse = lambda job: None  # noqa: E731  (each gang refused on its own, not by kind)
    assert index.open_nodes("", lambda uid: True, refuse, set(), 100) == {"n2"}
    statement = session.statement()
    statement.evict(task(session, "E-0"), "reclaim")
    assert index.open_nodes("", lambda uid: True, refuse, set(), 100) == set()
    statement.discard()
    assert index.open_nodes("", lambda uid: True, refuse, set(), 100) == {"n2"}


# --------------------------------------------------------------------------- decisions
# Scenes where a kind must not be taken as closed: each evicts alike with the index and
# with every node walked (`_open_nodes` turned off).


def _gang_like(self: Any, actor: Any, candidates: list) -> list:
    """Offers as the gang plugin does: a task while its job keeps more than minMember
    ready, or once the job is already below it."""
    jobs, left, out = self.session.jobs, {}, []
    for candidate in candidates:
        job = jobs[candidate.job_id]
        ready = left.setdefault(job.uid, job.live_ready_num())
        if ready != job.min_available:
            left[job.uid] = ready - 1
            out.append(candidate)
    return out


def _offerer(offer: Callable | None = None,
             signature: Callable = lambda self, job, tasks: None) -> type:
    """A plugin that signs its offers, shares refusals by signature, and offers every
    candidate (or as `offer` does)."""
    cls = plugin(preemptor_signature=lambda self, task: None, victim_signature=signature,
                 offers_by_signature=lambda self: True)
    if offer is not None:
        cls.preemptable = cls.reclaimable = hookimpl(offer)  # type: ignore[attr-defined]
    return cls


def _alike(objects: list[dict[str, Any]], steps: Callable[[Any], Any],
           cls: type | None = None) -> Any:
    """What `steps(session)` gives with the victim index, asserted equal to what it
    gives with every node walked."""
    outcomes = []
    for index in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            if not index:
                patch.setattr(eviction, "_open_nodes", lambda *args: None)
            session = open_session(objects, cls or _offerer())
            for one in session.plugins.values():
                one.session = session
            outcomes.append(steps(session))
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


def _evict_for(session: Any, policy: Any, name: str) -> tuple[bool, list]:
    statement = session.statement()
    done = eviction.evict_for(session, statement, policy, task(session, name))
    evicted = sorted((v.name, by.name if by else None) for v, by in statement.evictions())
    return done, evicted


@pytest.mark.parametrize("first", ["a", "z"])
def test_a_gang_refused_for_its_pods_does_not_close_its_kind(first: str) -> None:
    """Gangs a and z are of one kind; one of the first gang's pods is protected, so
    that gang may not go whole, but its signature is not refused: z still goes."""
    other = "z" if first == "a" else "a"
    objects = [b.queue("qa", reclaimable=True), b.queue("qb", reclaimable=True),
               *(b.node(f"n{i}", cpu="2") for i in range(2)),
               b.podgroup(first, 2, queue="qb", phase="Running"),
               b.pod(f"{first}-0", group=first, queue="qb", node_name="n0",
                     annotations={"volcano.sh/preemptable": "false"}),
               b.pod(f"{first}-1", group=first, queue="qb", node_name="n0"),
               *b.gang(other, 2, queue="qb", node_name="n1", phase="Running"),
               b.pod("want", cpu="2", queue="qa")]
    done, evicted = _alike(objects, lambda s: _evict_for(s, RECLAIM, "want"))
    assert done and evicted == [(f"{other}-0", "want"), (f"{other}-1", "want")]


@pytest.mark.parametrize("protected", ["a", "z"])
def test_a_protected_job_does_not_close_its_queue(protected: str) -> None:
    """A protected PodGroup and an unprotected one of queue qb are of two kinds."""
    free = "z" if protected == "a" else "a"
    objects = [b.queue("qa", reclaimable=True), b.queue("qb", reclaimable=True),
               *(b.node(f"n{i}", cpu="1") for i in range(2)),
               b.podgroup(protected, 1, queue="qb", phase="Running",
                          annotations={"volcano.sh/preemptable": "false"}),
               b.pod(f"{protected}-0", group=protected, queue="qb", node_name="n0"),
               b.podgroup(free, 1, queue="qb", phase="Running"),
               b.pod(f"{free}-0", group=free, queue="qb", node_name="n1"),
               b.pod("want", cpu="1", queue="qa")]
    done, evicted = _alike(objects, lambda s: _evict_for(s, RECLAIM, "want"))
    assert done and evicted == [(f"{free}-0", "want")]


def _two_gangs(big: str) -> list[dict[str, Any]]:
    """Gangs a (on n0) and b or z (on n1) of minMember 3, two pods running each and a
    third of `big` CPU pending."""
    objects = [*(b.node(f"n{i}", cpu="2") for i in range(2))]
    for name, where in (("a", "n0"), ("z", "n1")):
        objects += [b.podgroup(name, 3, phase="Running"),
                    b.pod(f"{name}-0", group=name, node_name=where),
                    b.pod(f"{name}-1", group=name, node_name=where),
                    b.pod(f"{name}-2", cpu=big, group=name)]
    return objects


@pytest.mark.parametrize("own", ["a", "z"])
def test_the_preemptors_own_gang_does_not_answer_for_its_kind(own: str) -> None:
    """The preemptor's own gang is of the other gang's kind, first or second: the
    other still goes whole."""
    done, evicted = _alike(_two_gangs("2"), lambda s: _evict_for(s, PREEMPT, f"{own}-2"))
    other = "z" if own == "a" else "a"
    assert done and evicted == [(f"{other}-0", f"{own}-2"), (f"{other}-1", f"{own}-2")]


def test_the_preemptors_own_gang_is_not_refused_for_the_next_preemptor() -> None:
    """a-2 cannot fit anywhere; its own gang is never asked about as a victim gang, so
    c, sharing its refusals, may still take gang a whole."""
    def steps(session: Any) -> list:
        out = []
        for name in ("a-2", "c"):
            statement = session.statement()
            done = eviction.evict_for(session, statement, PREEMPT, task(session, name))
            out.append((name, done, sorted(v.name for v, _ in statement.evictions())))
            statement.commit() if done else statement.discard()
        return out
    outcome = _alike([*_two_gangs("3"), b.pod("c", cpu="2")], steps)
    assert outcome[0] == ("a-2", False, [])
    assert outcome[1][1]


def test_a_job_placed_on_a_new_node_is_sorted_again() -> None:
    """J, refused whole with K (one kind: ready 2, minMember 2), gets its third pod
    placed in the session: with three ready it gives one pod alone, and the second
    reclaim takes it."""
    objects = [b.queue("qa", reclaimable=True), b.queue("qb", reclaimable=True),
               b.node("n0", cpu="2"), b.node("n1", cpu="2"), b.node("n2", cpu="500m"),
               b.podgroup("J", 2, queue="qb", phase="Running"),
               b.pod("J-0", group="J", queue="qb", node_name="n0"),
               b.pod("J-1", group="J", queue="qb", node_name="n0"),
               b.pod("J-2", cpu="500m", group="J", queue="qb"),
               *b.gang("K", 2, queue="qb", node_name="n1", phase="Running"),
               b.pod("want", cpu="1", queue="qa")]

    def steps(session: Any) -> tuple:
        statement = session.statement()
        first = eviction.evict_for(session, statement, RECLAIM, task(session, "want"))
        statement.discard()
        placing = session.statement()
        assert placing.allocate(task(session, "J-2"), session.nodes["n2"]) is None
        placing.commit()
        return first, _evict_for(session, RECLAIM, "want")

    first, (second, evicted) = _alike(objects, steps, _offerer(
        _gang_like, lambda self, job, tasks: (job.live_ready_num(), job.min_available)))
    assert not first and second and len(evicted) == 1
