"""The victim index (`victim_index.VictimIndex`): the nodes open to a gang-safe plan,
found by asking once per kind of job, and kept up to date as the session changes
nodes. (That planning only on its open nodes decides as planning on every node is a
property test in `tests/test_invariants.py`.)"""

from __future__ import annotations

from typing import Any

from tests.builders import gang, node
from tests.framework.test_eviction import open_session, plugin, task
from vscheduler.framework.victim_index import VictimIndex, placed_tasks
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
    nothing of a gang beyond the framework's part of its signature."""
    signing = plugin(preemptor_signature=lambda self, task: None,
                     victim_signature=lambda self, job, tasks: None)
    session = open_session(objects, signing)
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
        refused.add(session.victim_signature(job, placed_tasks(job)))

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
