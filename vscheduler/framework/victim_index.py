"""Which nodes hold a pod a gang-safe victim plan could take (`VictimIndex`), so that an
evicting action in a full cluster plans on those, not on every node.

A node is closed to a gang-safe plan when each of its pods is of a job the victim rule
takes nothing from, or of a gang that may give only whole (more than one pod ready, no
more than its minMember) and that may not go whole (`eviction.WholeJobs.closed`). In a
cluster full of gangs that plugins refuse to break or to let go whole, every node is
closed, and finding that out node by node cost a look at every pod of the cluster for
each kind of pending pod, in each evicting action: most of the first session after a
start at 5,000 nodes.

The index sorts the session's jobs with pods on nodes into kinds: their queue, whether
they are protected, whether they give only whole and, for those, their victim signature
(`Session.victim_signature`). Every job of a kind is alike to the victim rule's job part
(`eviction._victim_rule`'s `gives` reads the queue and the protection only, and whether
the job is the preemptor's own), and a signature plugins refused whole is refused for
every gang that has it, whatever its tasks. So the nodes open to a preemptor are
found by asking once per kind, and the nodes of the kinds closed to it are never
looked at. Built once the walks of preemptors sharing refusals have found an eighth of
the nodes closed (`eviction._index_pays`), kept for the session, and brought up to date
from the session's log of changed nodes: a job with a pod on a changed node is sorted
again. (So a kind holds only as long as a victim signature reads the job and its tasks
alone, as `hookspecs.victim_signature` asks.)
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import TYPE_CHECKING

from vscheduler.model import ALLOCATED_STATUSES, Job, Task

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

# (queue, protected, gives only whole, victim signature: None unless it gives only
# whole and plugins judge gangs alike)
Kind = tuple[str, bool, bool, "tuple | None"]


def gives_only_whole(job: Job) -> bool:
    """Whether a gang-safe plan may take `job`'s pods only all together: more than one
    ready, no more than its minMember, so that taking any one would break the gang
    (`eviction._singles` takes none of them one by one; the preemptor's own job aside)."""
    return 1 < job.live_ready_num() <= job.min_available


def placed_tasks(job: Job, nodes: Container[str]) -> list[Task]:
    """The tasks of `job` a whole-gang eviction takes, in key order (the order plugins
    are asked about them in, and that its victim signature reads): those placed on one
    of `nodes`, the session's. A pod whose node was deleted stays in its job until it is
    deleted too, but frees nothing the session could give and has no node to be
    evicted from. Here, beside the kinds that read it, for eviction to share."""
    return sorted((t for t in job.tasks_in(ALLOCATED_STATUSES) if t.node_name in nodes),
                  key=lambda t: t.key)


class VictimIndex:
    """The session's jobs with pods on nodes, by kind (see the module), with the nodes
    each has pods on."""

    __slots__ = ("_kind_of", "_kinds", "_nodes_of", "_on_node", "position", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self._kinds: dict[Kind, dict[str, None]] = {}  # kind -> job uids, in order
        self._kind_of: dict[str, Kind] = {}
        self._nodes_of: dict[str, tuple[str, ...]] = {}  # job uid -> its nodes' names
        # node name -> the uids of the jobs indexed with pods there (a pod taken off a
        # node since is no longer there to say whose it was)
        self._on_node: dict[str, set[str]] = {}
        for job in session.jobs.values():
            self._add(job)
        self.position = len(session.node_changes)

    def _add(self, job: Job) -> None:
        names = tuple({t.node_name: None for t in job.tasks.values() if t.node_name})
        if not names:
            return
        whole_only = gives_only_whole(job)
        session = self.session
        signature = session.victim_signature(job, placed_tasks(job, session.nodes)) \
            if whole_only else None
        kind = (job.queue, job.spec.protected, whole_only, signature)
        self._kinds.setdefault(kind, {})[job.uid] = None
        self._kind_of[job.uid] = kind
        self._nodes_of[job.uid] = names
        on_node = self._on_node
        for name in names:
            on_node.setdefault(name, set()).add(job.uid)

    def _remove(self, uid: str) -> None:
        kind = self._kind_of.pop(uid, None)
        if kind is None:
            return
        uids = self._kinds[kind]
        del uids[uid]
        if not uids:
            del self._kinds[kind]
        for name in self._nodes_of.pop(uid):
            self._on_node[name].discard(uid)

    def _refresh(self) -> None:
        """Sort again the jobs with a pod on a node changed since the last look, or had
        one there then."""
        session = self.session
        # (The log only grows while the index is asked: eviction cuts it back only
        # between a probe's mark and its undo, and nothing asks in between.)
        changes = session.node_changes
        if self.position == len(changes):
            return
        names = set(changes[self.position:])
        self.position = len(changes)
        uids: set[str] = set()
        for name in names:
            uids.update(self._on_node.get(name, ()))
            node = session.nodes.get(name)
            if node is not None:
                uids.update(task.job_id for task, _ in node.tasks.values())
        jobs = session.jobs
        for uid in sorted(uids):
            self._remove(uid)
            job = jobs.get(uid)
            if job is not None:
                self._add(job)

    def open_nodes(self, own_job: str, gives: Callable[[str], bool],
                   whole_job: Callable[[Job], list[Task] | None], refused: set[tuple],
                   budget: int) -> set[str] | None:
        """The names of the nodes open to a gang-safe plan for a preemptor of job
        `own_job`: those with a pod of its own job, if the rule (`gives`) takes from
        it, or of another job the rule takes from that gives pods one by one, or that
        gives only whole and is not refused whole (`whole_job`; `refused`: the victim
        signatures refused for it). A kind of gang is asked about one job at a time
        until one of them answers for its signature. None when the jobs of the kinds
        found open, and those asked about, pass `budget`: then most nodes are open, and
        walking them lazily, as node sampling asks, costs less."""
        self._refresh()
        jobs, nodes_of = self.session.jobs, self._nodes_of
        names: set[str] = set()
        if own_job in nodes_of and gives(own_job):
            names.update(nodes_of[own_job])
        open_kinds: list[dict[str, None]] = []
        for (_, _, whole_only, signature), uids in self._kinds.items():
            first = next((uid for uid in uids if uid != own_job), None)
            if first is None or not gives(first):
                continue
            if not whole_only or signature is None:  # (None: gangs not judged alike)
                budget -= len(uids)
                open_kinds.append(uids)
            elif signature not in refused:
                for uid in uids:
                    budget -= 1
                    if budget < 0:
                        return None
                    if uid == own_job:
                        continue
                    if whole_job(jobs[uid]) is not None:
                        # (approved for its signature: every gang of it may be)
                        budget -= len(uids)
                        open_kinds.append(uids)
                        break
                    if signature in refused:
                        break
            if budget < 0:
                return None
        for uids in open_kinds:
            for uid in uids:
                if uid != own_job:
                    names.update(nodes_of[uid])
        return names


def victim_index(session: Session) -> VictimIndex:
    """The session's index, made on first use."""
    if session.victim_index is None:
        session.victim_index = VictimIndex(session)
    return session.victim_index
