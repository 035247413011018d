"""reclaim: a queue takes back resources that other queues' running pods hold.

For each starving job (it has fewer tasks placed than it needs), in queue order then job
order, each pending task looks for a node where evicting running pods of *other* queues
makes it fit: the queue must be allowed to reclaim (`preemptive`), victims must be
offered by plugins (`reclaimable`), be preemptable and belong to a reclaimable queue.
Nodes are tried in order, the first that works is used; victims go in eviction order
until the task fits, gangs kept whole (see `vscheduler.framework.eviction`). The task is
not bound: it is pipelined onto what the evictions release, and placed once the
victims are gone. A job's evictions are committed only if the job is then pipelined
(gang-complete counting what waits); otherwise nothing of the attempt remains.
"""

from __future__ import annotations

from vscheduler.framework.eviction import (
    GANG_SAFE,
    evict_and_pipeline,
    plan_on_node,
    whole_job_of,
)
from vscheduler.framework.queue import PriorityQueue
from vscheduler.framework.session import Session
from vscheduler.framework.statement import Statement
from vscheduler.model import Job, Queue, Task, TaskStatus
from vscheduler.plugin import Action, Argument

S = TaskStatus


class Reclaim(Action):
    name = "reclaim"
    arguments = (
        GANG_SAFE,
        Argument("predicateErrorCacheEnable", bool, True, "accepted, as for allocate"),
    )

    def execute(self, session: Session) -> None:
        queues: PriorityQueue[Queue] = PriorityQueue(session.queue_less)
        starving: dict[str, PriorityQueue[Job]] = {}
        seen: set[str] = set()
        for job in session.jobs.values():
            if job.is_pending() or session.job_valid(job) is not None:
                continue
            queue = session.queues[job.queue]
            if queue.name not in seen:
                seen.add(queue.name)
                queues.push(queue)
            if session.job_starving(job):
                starving.setdefault(queue.name, PriorityQueue(session.job_less)).push(job)
        while queues:
            queue = queues.pop()
            overused = session.overused(queue)
            jobs = starving.get(queue.name)
            if overused or not jobs:
                continue
            job = jobs.pop()
            self._reclaim_for_job(session, queue, job)
            if jobs:
                queues.push(queue)

    def _reclaim_for_job(self, session: Session, queue: Queue, job: Job) -> None:
        statement = session.statement()
        tasks = PriorityQueue(session.task_less, [
            t for t in job.tasks_in(S.PENDING) if not t.scheduling_gated])
        while tasks and session.job_starving(job):
            task = tasks.pop()
            if task.pod.preemption_policy == "Never":
                continue
            refused = session.preemptive(queue, task)
            if refused:
                session.explain_task(task, f"reclaim: {refused}")
                continue
            if session.pre_predicate(task) is not None:
                continue
            if not self._reclaim_for_task(session, statement, job, task):
                session.explain_task(task, "reclaim: no node where evicting reclaimable "
                                           "pods of other queues makes room")
        if session.job_pipelined(job):
            statement.commit()
        else:
            statement.discard()

    def _reclaim_for_task(self, session: Session, statement: Statement, job: Job,
                          task: Task) -> bool:
        jobs, queues = session.jobs, session.queues
        gang_safe = self.args.get("gangSafeEviction", True)
        unresolvable = job.fit_errors.get(task.uid)
        skip = unresolvable.unresolvable_nodes() if unresolvable is not None else set()

        def eligible(victim: Task) -> bool:
            other = jobs.get(victim.job_id)
            return (victim.status == S.RUNNING and victim.preemptable and other is not None
                    and other.queue != job.queue and queues[other.queue].reclaimable)

        def whole_job(victim_job: Job) -> list[Task] | None:
            return whole_job_of(victim_job, eligible, lambda placed: session.reclaimable(
                task, placed))

        for node in session.node_list:
            if node.name in skip:
                continue
            unfit = session.predicate(task, node)
            if unfit is not None and not unfit.resolvable:
                continue
            plan = plan_on_node(session, task, node, eligible, session.reclaimable, gang_safe,
                                whole_job)
            if plan is None:
                continue
            if evict_and_pipeline(session, statement, task, node, plan, "reclaim",
                                  check=lambda node=node: session.predicate(task, node)
                                  is None):
                return True
        return False
