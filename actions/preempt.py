"""preempt: within a queue, a starving job takes resources from lower-priority pods.

Two passes per queue, as Volcano: first between jobs (a starving job's pending tasks may
evict other jobs' pods of the same queue), then within each job (a pending task may
evict a lower-priority task of its own job). Victims must be Bound or Running,
preemptable, offered by plugins (`preemptable`: e.g. priority offers only lower
priority), and a best-effort task never evicts one that is not. Nodes are scored and
tried best first; on a node, victims go in eviction order until the task's resources
fit, gangs kept whole (see `vscheduler.framework.eviction`); then the queue's
`allocatable` check and every predicate must pass, or the node is given up (Volcano goes
on evicting until they pass: a host port held by a victim it has not reached yet, say).
The task is pipelined onto what is released; a job's evictions are committed only if
the job is then pipelined.
"""

from __future__ import annotations

from collections.abc import Callable

from vscheduler.framework.eviction import (
    GANG_SAFE,
    evict_and_pipeline,
    plan_on_node,
    whole_job_of,
)
from vscheduler.framework.queue import PriorityQueue
from vscheduler.framework.session import Session
from vscheduler.framework.statement import Statement
from vscheduler.model import PREEMPTABLE_STATUSES, Job, Node, Queue, Task, TaskStatus
from vscheduler.plugin import Action, Argument

S = TaskStatus


class Preempt(Action):
    name = "preempt"
    arguments = (
        GANG_SAFE,
        Argument("predicateErrorCacheEnable", bool, True, "accepted, as for allocate"),
    )

    def execute(self, session: Session) -> None:
        starving: dict[str, PriorityQueue[Job]] = {}
        under_request: dict[str, list[Job]] = {}
        for job in session.jobs.values():
            if job.is_pending() or session.job_valid(job) is not None:
                continue
            if not session.job_starving(job):
                continue
            starving.setdefault(job.queue, PriorityQueue(session.job_less)).push(job)
            under_request.setdefault(job.queue, []).append(job)
        queues: PriorityQueue[Queue] = PriorityQueue(
            session.queue_less, [session.queues[name] for name in starving])
        while queues:
            queue = queues.pop()
            jobs = starving[queue.name]
            while jobs:
                self._between_jobs(session, jobs.pop())
            for job in under_request[queue.name]:
                self._within_job(session, job)

    def _between_jobs(self, session: Session, job: Job) -> None:
        statement = session.statement()
        tasks = PriorityQueue(session.task_less, _pending(job))
        while tasks and session.job_starving(job):
            task = tasks.pop()

            def others(victim: Task, task: Task = task) -> bool:
                other = session.jobs.get(victim.job_id)
                return (other is not None and other.queue == job.queue
                        and victim.job_id != task.job_id)

            if not self._preempt(session, statement, task, others):
                session.explain_task(task, "preempt: no node where evicting lower-priority "
                                           "pods of its queue makes room")
        if session.job_pipelined(job):
            statement.commit()
        else:
            statement.discard()

    def _within_job(self, session: Session, job: Job) -> None:
        tasks = PriorityQueue(session.task_less, _pending(job))
        while tasks:
            task = tasks.pop()
            statement = session.statement()

            def same_job(victim: Task, task: Task = task) -> bool:
                return victim.job_id == task.job_id

            if not self._preempt(session, statement, task, same_job):
                statement.discard()
                return
            statement.commit()

    def _preempt(self, session: Session, statement: Statement, task: Task,
                 belongs: Callable[[Task], bool]) -> bool:
        if task.pod.preemption_policy == "Never" or session.pre_predicate(task) is not None:
            return False
        jobs = session.jobs
        job = jobs[task.job_id]
        queue = session.queues[job.queue]
        gang_safe = self.args.get("gangSafeEviction", True)

        def eligible(victim: Task) -> bool:
            return (bool(victim.status & PREEMPTABLE_STATUSES) and victim.preemptable
                    and not (task.best_effort and not victim.best_effort) and belongs(victim))

        def whole_job(victim_job: Job) -> list[Task] | None:
            return whole_job_of(victim_job, eligible,
                                lambda placed: session.preemptable(task, placed))

        def passes(node: Node) -> Callable[[], bool]:
            # With the victims evicted: the queue has room and every predicate passes.
            return lambda: (session.allocatable(queue, task) is None
                            and session.predicate(task, node) is None)

        for node in self._candidate_nodes(session, job, task):
            plan = plan_on_node(session, task, node, eligible, session.preemptable, gang_safe,
                                whole_job)
            if plan is None:
                continue
            if evict_and_pipeline(session, statement, task, node, plan, "preempt",
                                  check=passes(node)):
                return True
        return False

    @staticmethod
    def _candidate_nodes(session: Session, job: Job, task: Task) -> list[Node]:
        """Nodes where evicting could help, best scored first."""
        errors = job.fit_errors.get(task.uid)
        skip = errors.unresolvable_nodes() if errors is not None else set()
        nodes = []
        for node in session.node_list:
            if node.name in skip:
                continue
            unfit = session.predicate(task, node)
            if unfit is None or unfit.resolvable:
                nodes.append(node)
        if len(nodes) > 1 and session.has_node_order:
            batch = session.batch_node_order(task, nodes) if session.has_batch_node_order \
                else {}
            scores = {n.name: session.node_order(task, n) + batch.get(n.name, 0.0)
                      for n in nodes}
            nodes.sort(key=lambda n: -scores[n.name])  # stable: ties keep node order
        return nodes


def _pending(job: Job) -> list[Task]:
    return [t for t in job.tasks_in(S.PENDING) if not t.scheduling_gated]
