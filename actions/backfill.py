"""backfill: place best-effort tasks (pods without requests) that allocate left.

They need no queue room (allocate skips the tasks of an overused queue; backfill does
not ask), only an open queue, a pod slot and the plugins' predicates. Jobs are taken in queue order
then job order, a job's tasks in task order, all of a job's tasks in one statement:
committed if the job is then ready, so a gang of best-effort pods is placed whole too.
A job with sub-groups is left to allocate, which places each group whole (placing pod by
pod here could leave a group in part), as is one held to a topology domain.
"""

from __future__ import annotations

from functools import cmp_to_key

from vscheduler.fit import NodeFitErrors
from vscheduler.framework.placement import placeable_tasks, predicate_nodes, select_best_node
from vscheduler.framework.session import Session
from vscheduler.framework.topology_placement import confined
from vscheduler.model import Job, Node, TaskStatus
from vscheduler.plugin import Action, Argument

S = TaskStatus


class Backfill(Action):
    name = "backfill"
    arguments = (Argument("predicateErrorCacheEnable", bool, True, "as for allocate"),)

    def execute(self, session: Session) -> None:
        queues = session.queues
        # A job allocate left only pipelined holds allocations it has not committed:
        # its readiness is allocate's to decide, not backfill's.
        jobs = [job for job in session.waiting_jobs
                if job.count(S.PENDING) and not job.is_pending()
                and queues[job.queue].is_open() and not job.count(S.ALLOCATED)
                and any(t.best_effort for t in placeable_tasks(job))
                and session.job_valid(job) is None and not confined(session, job)
                and not job.spec.sub_groups]

        def order(left: Job, right: Job) -> int:
            if left.queue != right.queue:
                return session.queue_compare(queues[left.queue], queues[right.queue])
            return session.job_compare(left, right)

        for job in sorted(jobs, key=cmp_to_key(order)):
            self._backfill_job(session, job)

    @staticmethod
    def _backfill_job(session: Session, job: Job) -> None:
        statement = session.statement()
        tasks = sorted((t for t in placeable_tasks(job) if t.best_effort),
                       key=cmp_to_key(session.task_compare))
        for task in tasks:
            unfit = session.pre_predicate(task)
            if unfit is not None:
                job.fit_errors[task.uid] = NodeFitErrors("; ".join(unfit.reasons))
                continue
            # The pod slot is the one resource a best-effort task asks for.
            feasible, errors = predicate_nodes(session, task, session.node_list,
                                               Node.insufficient_now, sample=True)
            if not feasible:
                job.fit_errors[task.uid] = errors
                continue
            error = statement.allocate(task, select_best_node(session, task, feasible))
            if error:
                session.explain_task(task, error)
        if session.job_ready(job):
            statement.commit()
        else:
            statement.discard()
