"""allocate: place the pending tasks of admitted jobs, a gang at a time.

Queues take turns in queue order (an overused queue sits out the rest of the action),
and within a queue jobs in job order. A job's tasks go into one statement until the job
is ready (enough tasks for minAvailable); then the statement is committed, and the job
goes back in line for its next task, one per turn. A job that cannot get ready keeps
its statement only if it is pipelined (waiting on resources being released); otherwise
the statement is discarded and nothing of the job is bound: gangs are all or nothing.

A task goes on a node's idle resources if they suffice, else it is pipelined onto
resources being released. Best-effort tasks (no requests) are placed here too, with
their job, so a gang counting on them is placed whole (Volcano leaves them to backfill,
and commits the gang before knowing whether backfill will find them a node).
"""

from __future__ import annotations

from collections.abc import Callable

from vscheduler.fit import NodeFitErrors, Unfit
from vscheduler.framework.fit_index import fit_index
from vscheduler.framework.placement import placeable_tasks, predicate_nodes, select_best_node
from vscheduler.framework.queue import PriorityQueue
from vscheduler.framework.search import NodeSearch
from vscheduler.framework.session import Session
from vscheduler.framework.statement import Statement
from vscheduler.framework.sub_group_placement import allocate_sub_groups
from vscheduler.framework.topology_placement import (
    DomainRoom,
    allocate_by_topology,
    domain_errors,
)
from vscheduler.model import Job, Node, Queue, Task, TaskStatus
from vscheduler.plugin import Action, Argument
from vscheduler.topology import Domain

S = TaskStatus


class Allocate(Action):
    name = "allocate"
    arguments = (
        Argument("predicateErrorCacheEnable", bool, True,
                 "refuse a node again, without asking plugins, for a task whose job and "
                 "role already failed on it"),
    )

    def execute(self, session: Session) -> None:
        self._search = NodeSearch(session, Node.insufficient_future, Node.insufficient_now,
                                  fit_index(session))
        # Searches within topology domains, by domain name, and the domains' free room
        # (for gangs with a network topology: framework/topology_placement.py).
        self._domain_searches: dict[str, NodeSearch] = {}
        self._room = DomainRoom(session, session.topology) if session.topology else None
        queues: PriorityQueue[Queue] = PriorityQueue(session.queue_less)
        waiting: dict[str, list[Job]] = {}  # queue -> its jobs to place, queued below
        tasks_of: dict[str, PriorityQueue[Task]] = {}
        auto_admit = "enqueue" not in session.action_names
        for job in session.waiting_jobs:
            if job.is_pending():
                if not auto_admit:
                    continue
                job.phase = "Inqueue"
            pending = job.count(S.PENDING)
            if not pending:
                continue  # nothing to place (and nothing to explain)
            invalid = session.job_valid(job)
            if invalid is not None:
                session.explain_job(job, invalid[1])
                continue
            queue = session.queues[job.queue]
            closed = queue.closed_reason()
            if closed:
                session.explain_job(job, closed)
                continue
            tasks = placeable_tasks(job)
            if len(tasks) < pending:
                _explain_gates(session, job)
            if not tasks:
                continue
            tasks_of[job.uid] = PriorityQueue(session.task_less, tasks)
            if queue.name not in waiting:
                waiting[queue.name] = []
                queues.push(queue)
            waiting[queue.name].append(job)
        jobs_of = {name: session.job_line(jobs) for name, jobs in waiting.items()}

        while queues:
            queue = queues.pop()
            overused = session.overused(queue)
            if overused:
                for job in _drain(jobs_of[queue.name]):
                    session.explain_job(job, overused)
                continue
            jobs = jobs_of[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            tasks = tasks_of[job.uid]
            if self._room is not None and job.spec.network_topology is not None:
                statement = allocate_by_topology(session, job, queue, tasks,
                                                 self._allocate_tasks, self._room)
            else:
                statement = self._allocate_tasks(session, job, queue, tasks)
            if statement is not None and session.job_ready(job):
                statement.commit()
                if tasks:
                    jobs.push(job)
            # A statement that is only pipelined stays as it is: its tasks keep their
            # places for the rest of the session, and nothing is bound.
            queues.push(queue)

    def _allocate_tasks(self, session: Session, job: Job, queue: Queue,
                        tasks: PriorityQueue[Task], domain: Domain | None = None
                        ) -> Statement | None:
        """Place `job`'s tasks, a gang at a time, on any node or within `domain`'s (a
        job with sub-groups, a group at a time: framework/sub_group_placement.py)."""
        if job.spec.sub_groups:
            return allocate_sub_groups(session, job, queue, tasks, domain,
                                       self._place_until, self._room)
        statement = self._place_until(session, job, queue, tasks, domain,
                                      lambda: session.job_ready(job))
        if session.job_ready(job) or session.job_pipelined(job):
            return statement
        statement.discard()
        return None

    def _place_until(self, session: Session, job: Job, queue: Queue,
                     tasks: PriorityQueue[Task], domain: Domain | None,
                     done: Callable[[], bool]) -> Statement:
        """Place `tasks` in order until `done` says so (or none is left, or the job's
        gang cannot be met any more), into a statement the caller keeps or discards."""
        statement = session.statement()
        use_cache = self.args.get("predicateErrorCacheEnable", True)
        known: dict[str, dict[str, Unfit]] = {}
        while tasks:
            task = tasks.pop()
            refused = session.allocatable(queue, task)
            if refused:
                session.explain_task(task, refused)
                continue
            if job.task_has_fit_errors(task):
                job.fit_errors[task.uid] = NodeFitErrors(
                    f"Task {task.key} with role spec {task.role} has already predicated "
                    "failed, skip")
                continue
            unfit = session.pre_predicate(task)
            if unfit is not None:
                job.fit_errors[task.uid] = NodeFitErrors("; ".join(unfit.reasons))
                if job.need_continue_allocating(task):
                    continue
                break
            if domain is None:
                node, errors = self._find_node(session, task, known if use_cache else None)
            else:
                node, errors = self._find_in_domain(session, task, domain)
            if node is None:
                job.fit_errors[task.uid] = errors
                if job.need_continue_allocating(task):
                    continue
                break
            error = _place(statement, task, node)
            if error:
                session.explain_task(task, error)
            elif done():
                break
        return statement

    def _find_node(self, session: Session, task: Task,
                   known: dict[str, dict[str, Unfit]] | None
                   ) -> tuple[Node | None, NodeFitErrors]:
        """The node for `task`: its nominated node if it fits there now (as
        kube-scheduler tries a nominated node first), else the best of a search shared
        with tasks of its signature, else of a search of its own. A pod that can only
        wait for room keeps waiting on its nominated node rather than on another's
        releasing room; one that fits now elsewhere does not wait at all."""
        nominated = session.nodes.get(task.pod.nominated_node)
        waits_there = False
        if nominated is not None and predicate_nodes(
                session, task, [nominated], Node.insufficient_future)[0]:
            if nominated.insufficient_now(task.resreq) is None:
                return nominated, NodeFitErrors()
            waits_there = True
        found = self._search.best(task)
        if found is None:
            cache = (known.setdefault(task.role, {}) if known is not None and task.role
                     else None)
            feasible, errors = predicate_nodes(session, task, session.node_list,
                                               Node.insufficient_future, cache, sample=True)
            found = (_best_node(session, task, feasible) if feasible else None), errors
        node, errors = found
        if waits_there and (node is None or node.insufficient_now(task.resreq) is not None):
            return nominated, errors
        return node, errors


    def _find_in_domain(self, session: Session, task: Task, domain: Domain
                        ) -> tuple[Node | None, NodeFitErrors]:
        """The node for `task` within `domain`: every node of it judged (no sampling),
        with a search kept per domain for the tasks of its signature."""
        search = self._domain_searches.get(domain.name)
        if search is None:
            within = [session.nodes[name] for name in domain.nodes if name in session.nodes]
            search = self._domain_searches[domain.name] = NodeSearch(
                session, Node.insufficient_future, Node.insufficient_now, within=within)
        found = search.best(task)
        if found is None:
            within = search.within or []
            feasible, errors = predicate_nodes(session, task, within, Node.insufficient_future)
            found = (_best_node(session, task, feasible) if feasible else None), errors
        node, errors = found
        return node, (errors if node is not None else domain_errors(domain, errors))


def _best_node(session: Session, task: Task, feasible: list[Node]) -> Node:
    """Nodes with the task's resources idle now come before those where it must wait."""
    idle_now = [n for n in feasible if n.insufficient_now(task.resreq) is None]
    return select_best_node(session, task, idle_now or feasible)


def _explain_gates(session: Session, job: Job) -> None:
    """Why the job's gated pods wait: for whoever set the gates to remove them."""
    for task in job.tasks_in(S.PENDING):
        if task.scheduling_gated:
            session.explain_task(task, "Pod has scheduling gates: "
                                       + ", ".join(task.pod.scheduling_gates))


def _place(statement: Statement, task: Task, node: Node) -> str | None:
    if node.insufficient_now(task.resreq) is None:
        return statement.allocate(task, node)
    return statement.pipeline(task, node)


def _drain(queue: PriorityQueue[Job]) -> list[Job]:
    jobs = []
    while queue:
        jobs.append(queue.pop())
    return jobs
