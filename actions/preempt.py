"""preempt: within a queue, a starving job takes resources from lower-priority pods.

Two passes per queue, as Volcano: first between jobs (a starving job's pending tasks may
evict other jobs' pods of the same queue), then within each job (a pending task may
evict a lower-priority task of its own job). Victims must be Bound or Running,
preemptable, offered by plugins (`preemptable`: e.g. priority offers only lower
priority), and a best-effort task never evicts one that is not. A task first waits on
what earlier evictions already release; else the plan wasting least across nodes goes
(ties best scored first). On a node, victims go in eviction order until the task fits,
its queue is `allocatable` and every predicate passes (Volcano's preempt: a queue at its
capability evicts its own low-priority pods even where the node has room), gangs kept
whole, none it does not need (see `vscheduler.framework.eviction`).
`evictUntilQueueHasRoom: false` stops at the node's fit and gives the node up if the
queue is still full. The task is pipelined onto what is released; a job's evictions
are committed only if the job is then pipelined.
"""

from __future__ import annotations

from dataclasses import replace

from vscheduler.framework.eviction import (
    ARGUMENTS,
    UNTIL_QUEUE_HAS_ROOM,
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
from vscheduler.framework.topology_placement import confined
from vscheduler.model import PREEMPTABLE_STATUSES, Job, Queue
from vscheduler.plugin import Action

UNPLACED = "preempt: no node where evicting lower-priority pods of its queue makes room"


class Preempt(Action):
    name = "preempt"
    arguments = (*ARGUMENTS, UNTIL_QUEUE_HAS_ROOM)

    def execute(self, session: Session) -> None:
        # Bound or running preemptable pods of the queue's other jobs, as plugins offer
        # them, a best-effort pod evicting only best-effort ones; nodes best scored
        # first; the queue's room and every predicate checked once they are gone.
        between_jobs = VictimPolicy(
            "preempt", PREEMPTABLE_STATUSES, Scope.OWN_QUEUE, offered_by="preemptable",
            **policy_arguments(self.args),
            best_effort_spares_requests=True, queue_must_fit=True,
            until_queue_has_room=self.args.get("evictUntilQueueHasRoom", True),
            best_node_first=True, unplaced=UNPLACED)
        within_job = replace(between_jobs, scope=Scope.OWN_JOB, unplaced="")
        under_request: dict[str, list[Job]] = {}
        for job in session.waiting_jobs:
            if job.is_pending() or session.job_valid(job) is not None:
                continue
            if not session.job_starving(job):
                continue
            under_request.setdefault(job.queue, []).append(job)
        starving = {name: session.job_line(jobs) for name, jobs in under_request.items()}
        queues: PriorityQueue[Queue] = PriorityQueue(
            session.queue_less, [session.queues[name] for name in starving])
        while queues:
            queue = queues.pop()
            jobs = starving[queue.name]
            while jobs:
                self._between_jobs(session, between_jobs, jobs.pop())
            for job in [j for j in under_request[queue.name] if not confined(session, j)]:
                self._within_job(session, within_job, job)

    @staticmethod
    def _between_jobs(session: Session, policy: VictimPolicy, job: Job) -> None:
        """Evict for `job`'s pending pods; keep it all only if the job is then
        pipelined. A job that must sit in one topology domain gets the domain where
        that takes fewest evictions (`topology_eviction`)."""

        def attempt(statement: Statement, narrowed: VictimPolicy) -> None:
            tasks = PriorityQueue(session.task_less, placeable_tasks(job))
            while tasks and session.job_starving(job):
                task = tasks.pop()
                if never_preempts(task) or session.pre_predicate(task) is not None:
                    session.explain_eviction(task, UNPLACED)
                else:
                    evict_for(session, statement, narrowed, task)  # (it says why)

        evict_for_job(session, policy, job, attempt)

    @staticmethod
    def _within_job(session: Session, policy: VictimPolicy, job: Job) -> None:
        tasks = PriorityQueue(session.task_less, placeable_tasks(job))
        while tasks:
            task = tasks.pop()
            statement = session.statement()
            if (never_preempts(task) or session.pre_predicate(task) is not None
                    or not evict_for(session, statement, policy, task)):
                statement.discard()
                return
            statement.commit()
