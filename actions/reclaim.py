"""reclaim: a queue takes back resources that other queues' running pods hold.

For each starving job (it has fewer tasks placed than it needs), in queue order then job
order, each pending task looks for a node where evicting running pods of *other* queues
makes it fit: the queue must be allowed to reclaim (`preemptive`), victims must be
offered by plugins (`reclaimable`), be preemptable and belong to a reclaimable queue.
A task first waits on what earlier evictions already release; else the plan wasting
least across nodes goes (ties in node order): victims in eviction order until the task
fits, gangs kept whole, none it does not need (see `vscheduler.framework.eviction`).
The task is not bound: it is pipelined onto what the evictions release, and placed once
the victims are gone; a node whose idle room alone fits it is left to allocate. A job's
evictions are committed only if the job is then pipelined (gang-complete counting what
waits); otherwise nothing of the attempt remains.
"""

from __future__ import annotations

from vscheduler.framework.eviction import (
    ARGUMENTS,
    Scope,
    VictimPolicy,
    evict_for,
    never_preempts,
    policy_arguments,
)
from vscheduler.framework.placement import placeable_tasks
from vscheduler.framework.queue import PriorityQueue
from vscheduler.framework.session import Session
from vscheduler.framework.statement import Statement
from vscheduler.framework.topology_eviction import evict_for_job
from vscheduler.model import Job, Queue, TaskStatus
from vscheduler.plugin import Action

UNPLACED = "reclaim: no node where evicting reclaimable pods of other queues makes room"


class Reclaim(Action):
    name = "reclaim"
    arguments = ARGUMENTS

    def execute(self, session: Session) -> None:
        # Running preemptable pods of other, reclaimable queues, as plugins offer them;
        # nodes in node order; the reclaimer must pass every predicate once they are gone.
        policy = VictimPolicy("reclaim", TaskStatus.RUNNING, Scope.OTHER_QUEUES,
                              offered_by="reclaimable", unplaced=UNPLACED,
                              idle_is_room=False, **policy_arguments(self.args))
        queues: PriorityQueue[Queue] = PriorityQueue(session.queue_less)
        waiting: dict[str, list[Job]] = {}
        seen: set[str] = set()
        for job in session.waiting_jobs:
            if job.is_pending() or session.job_valid(job) is not None:
                continue
            queue = session.queues[job.queue]
            if queue.name not in seen:
                seen.add(queue.name)
                queues.push(queue)
            if session.job_starving(job):
                waiting.setdefault(queue.name, []).append(job)
        starving = {name: session.job_line(jobs) for name, jobs in waiting.items()}
        while queues:
            queue = queues.pop()
            overused = session.overused(queue)
            jobs = starving.get(queue.name)
            if overused or not jobs:
                continue
            job = jobs.pop()
            self._reclaim_for_job(session, policy, queue, job)
            if jobs:
                queues.push(queue)

    @staticmethod
    def _reclaim_for_job(session: Session, policy: VictimPolicy, queue: Queue,
                         job: Job) -> None:
        """Evict for `job`'s pending pods; keep it all only if the job is then
        pipelined. A job that must sit in one topology domain gets the domain where
        that takes fewest evictions (`topology_eviction`)."""

        def attempt(statement: Statement, narrowed: VictimPolicy) -> None:
            Reclaim._reclaim_tasks(session, narrowed, queue, job, statement)

        evict_for_job(session, policy, job, attempt)

    @staticmethod
    def _reclaim_tasks(session: Session, policy: VictimPolicy, queue: Queue, job: Job,
                       statement: Statement) -> None:
        tasks = PriorityQueue(session.task_less, placeable_tasks(job))
        while tasks and session.job_starving(job):
            task = tasks.pop()
            if never_preempts(task):
                continue
            refused = session.preemptive(queue, task)
            if refused:
                session.explain_eviction(task, f"reclaim: {refused}")
                continue
            if session.pre_predicate(task) is not None:
                continue
            evict_for(session, statement, policy, task)  # (it says why if it fails)
