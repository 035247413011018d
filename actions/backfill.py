"""backfill: place best-effort tasks (pods without requests) wherever predicates allow.

They need no queue room, only a pod slot and the plugins' predicates; they are bound as
soon as their job is ready. Queues, jobs and tasks are taken in the session's orders.
"""

from __future__ import annotations

from functools import cmp_to_key

from vscheduler.fit import NodeFitErrors
from vscheduler.framework.placement import predicate_nodes, select_best_node
from vscheduler.framework.session import Session
from vscheduler.model import Node, Task, TaskStatus
from vscheduler.plugin import Action, Argument

S = TaskStatus


class Backfill(Action):
    name = "backfill"
    arguments = (Argument("predicateErrorCacheEnable", bool, True, "as for allocate"),)

    def execute(self, session: Session) -> None:
        candidates: list[Task] = []
        for job in session.jobs.values():
            if job.is_pending() or session.job_valid(job) is not None:
                continue
            candidates.extend(t for t in job.tasks_in(S.PENDING)
                              if t.best_effort and not t.scheduling_gated)
        jobs, queues = session.jobs, session.queues

        def order(left: Task, right: Task) -> int:
            lj, rj = jobs[left.job_id], jobs[right.job_id]
            if lj.queue != rj.queue:
                return session.queue_compare(queues[lj.queue], queues[rj.queue])
            if lj is not rj:
                return session.job_compare(lj, rj)
            return session.task_compare(left, right)

        for task in sorted(candidates, key=cmp_to_key(order)):
            unfit = session.pre_predicate(task)
            job = jobs[task.job_id]
            if unfit is not None:
                job.fit_errors[task.uid] = NodeFitErrors("; ".join(unfit.reasons))
                continue
            # The pod slot is the one resource a best-effort task asks for.
            feasible, errors = predicate_nodes(session, task, session.node_list,
                                               Node.insufficient_now)
            if not feasible:
                job.fit_errors[task.uid] = errors
                continue
            error = session.allocate(task, select_best_node(session, task, feasible))
            if error:
                session.explain_task(task, error)
