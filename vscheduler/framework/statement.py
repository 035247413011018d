"""Statements: a job's allocations, pipelines and evictions as one unit.

Every operation takes effect in the session at once (node accounting, job counters,
plugins' event handlers), so later decisions in the session see it. `commit` makes them
decisions (binds, evictions); `discard` undoes them in reverse order. A gang keeps its
all-or-nothing promise because allocate commits a job's statement only when the job is
ready, and discards it otherwise.

A discard puts a job back as it was; if nothing but the statement changed the job, it is
clean again (`Job.mark_restored`), and the next snapshot hands its copy on rather than
copying it anew: a gang tried and not placed in every session costs no copy for that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vscheduler.framework.results import EvictionTerms
from vscheduler.model import Job, Node, Status, Task, TaskStatus, status_label

if TYPE_CHECKING:
    from vscheduler.framework.session import Session

__all__ = ["Statement"]

S = TaskStatus
_EVICT, _PIPELINE, _ALLOCATE = "evict", "pipeline", "allocate"


class Operation:
    __slots__ = ("kind", "node", "preemptor", "previous", "reason", "task", "terms")

    def __init__(self, kind: str, task: Task, node: Node, reason: str = "",
                 preemptor: Task | None = None, previous: Status = S.RUNNING,
                 terms: EvictionTerms | None = None) -> None:
        self.kind = kind
        self.task = task
        self.node = node
        self.reason = reason
        self.preemptor = preemptor
        self.previous = previous  # an evicted task's status before
        self.terms = terms


class _Touch:
    """A job a statement changed: whether it was clean when first touched, its
    `Job.changes` then, and how many of the changes since were the statement's own."""

    __slots__ = ("clean", "job", "own", "start")

    def __init__(self, job: Job) -> None:
        self.job = job
        self.clean = not job.dirty
        self.start = job.changes
        self.own = 0


class Statement:
    __slots__ = ("_touched", "operations", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.operations: list[Operation] = []
        # the jobs it changed, by uid: `discard` leaves clean a job whose only changes
        # were this statement's, all undone (a gang tried and not placed is not copied
        # anew for the next session for that alone)
        self._touched: dict[str, _Touch] = {}

    # ---------------------------------------------------------------- operations

    def allocate(self, task: Task, node: Node) -> str | None:
        """Place `task` on `node`'s idle resources; an error message if refused."""
        return self._place(task, node, S.ALLOCATED, _ALLOCATE)

    def pipeline(self, task: Task, node: Node) -> str | None:
        """Reserve `node`'s releasing resources for `task`; an error message if refused."""
        return self._place(task, node, S.PIPELINED, _PIPELINE)

    def evict(self, task: Task, reason: str, preemptor: Task | None = None,
              terms: EvictionTerms | None = None) -> None:
        """Mark `task` for eviction (`reason` is the action, e.g. "reclaim") in favour of
        `preemptor`, on `terms` (the strategy, grace period, whether it is elastic)."""
        session = self.session
        node = session.nodes[task.node_name]
        previous = task.status
        self._set_status(task, S.RELEASING)
        node.update_task(task)
        session.census.moved(task, node.name, -1, evicted=True)
        session.deallocate_event(task)
        self.operations.append(Operation(_EVICT, task, node, reason, preemptor, previous,
                                         terms))

    def evictions(self) -> list[tuple[Task, Task | None]]:
        """The evictions made so far and not yet committed: (victim, preemptor)."""
        return [(op.task, op.preemptor) for op in self.operations if op.kind == _EVICT]

    def _place(self, task: Task, node: Node, status: Status, kind: str) -> str | None:
        if task.status != S.PENDING:
            return f"task {task.key} is {status_label(task.status)}, not Pending: not placed again"
        session = self.session
        self._set_status(task, status)
        task.node_name = node.name
        node.add_task(task)
        _release_nomination(session, task)
        session.census.moved(task, node.name, 1)
        error = session.allocate_event(task)
        if error:
            self._unplace(task, node)
            return error
        self.operations.append(Operation(kind, task, node))
        return None

    def _unplace(self, task: Task, node: Node) -> None:
        session = self.session
        self._set_status(task, S.PENDING)
        node.remove_task(task)
        _release_nomination(session, task)
        session.census.moved(task, node.name, -1)
        session.deallocate_event(task)
        task.node_name = ""

    def _unevict(self, task: Task, node: Node, previous: Status) -> None:
        session = self.session
        # Back to the status it had (Volcano makes it Running, whatever it was: a Bound
        # pod would then look Running to a later reclaim in the same session).
        self._set_status(task, previous)
        node.update_task(task)
        session.census.moved(task, node.name, 1, evicted=True)
        session.allocate_event(task)

    def _set_status(self, task: Task, status: Status) -> None:
        job = self.session.jobs[task.job_id]
        touched = self._touched.get(job.uid)
        if touched is None:
            touched = self._touched[job.uid] = _Touch(job)
        if task.status != status:
            touched.own += 1  # (`update_task_status` marks the job dirty once)
        job.update_task_status(task, status)

    # ---------------------------------------------------------------- outcome

    def discard(self) -> None:
        for op in reversed(self.operations):
            op.task.last_transaction = (op.task.status, op.node.name)
            if op.kind == _EVICT:
                self._unevict(op.task, op.node, op.previous)
            else:
                self._unplace(op.task, op.node)
        self.operations.clear()
        restored = self.session.snapshot.restored
        for touched in self._touched.values():
            job = touched.job
            if touched.clean and job.changes == touched.start + touched.own:
                job.mark_restored()
                restored.add(job.uid)
        self._touched.clear()

    def commit(self) -> None:
        session = self.session
        for op in self.operations:
            op.task.last_transaction = None
            if op.kind == _EVICT:
                session.record_eviction(op.task, op.reason, op.preemptor, op.terms)
            elif op.kind == _ALLOCATE:
                session.dispatch(op.task)
            # a pipelined task stays pipelined: nothing to send until resources are free
        self.operations.clear()
        self._touched.clear()

    def merge(self, other: Statement) -> None:
        self.operations.extend(other.operations)
        other.operations.clear()
        for uid, touched in other._touched.items():
            mine = self._touched.get(uid)
            if mine is None:
                self._touched[uid] = touched
            else:  # (as from the first touch of either)
                if touched.start < mine.start:
                    mine.clean, mine.start = touched.clean, touched.start
                mine.own += touched.own
        other._touched.clear()


def _release_nomination(session: Session, task: Task) -> None:
    """A nominated pod placed holds no room on its nominated node any more, and holds it
    again once unplaced (framework/nominations.py): that node is logged as changed, so
    that node searches and victim plans judge it again."""
    name = task.pod.nominated_node
    if name and name in session.nominated:
        session.node_changes.append(name)
