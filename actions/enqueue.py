"""enqueue: admit Pending jobs (PodGroup phase Pending -> Inqueue) that plugins allow.

Queues take turns in queue order, one job at a time in job order, so one queue's large
job does not hold back the others; a refused job stays Pending and its queue's next job
is tried (no head-of-line blocking). Plugins are asked about every job: Volcano admits a
job without `minResources` without asking, which would let a job whose only request is a
card annotation (`volcano.sh/card.request`) in unchecked; the quota plugins permit a job
without `minResources` themselves.
"""

from __future__ import annotations

from vscheduler.framework.queue import PriorityQueue
from vscheduler.framework.session import Session
from vscheduler.hookspecs import Reject
from vscheduler.model import Job, Queue
from vscheduler.plugin import Action


class Enqueue(Action):
    name = "enqueue"

    def execute(self, session: Session) -> None:
        queues: PriorityQueue[Queue] = PriorityQueue(session.queue_less)
        waiting: dict[str, list[Job]] = {}  # queue -> its jobs not admitted, queued below
        for job in session.waiting_jobs:
            if not job.is_pending() or job.held_only:
                continue
            queue = session.queues[job.queue]
            if queue.name not in waiting:
                waiting[queue.name] = []
                queues.push(queue)
            waiting[queue.name].append(job)
        pending = {name: session.job_line(jobs) for name, jobs in waiting.items()}
        while queues:
            queue = queues.pop()
            jobs = pending[queue.name]
            if not jobs:
                continue
            job = jobs.pop()
            closed = queue.closed_reason()
            if closed:
                session.explain_job(job, closed)
            else:
                vote = session.job_enqueueable(job)
                if isinstance(vote, Reject):
                    session.explain_job(job, vote.reason or "the job is not admitted yet "
                                        "(enqueue)")
                else:
                    self._admit(session, job)
            queues.push(queue)

    @staticmethod
    def _admit(session: Session, job: Job) -> None:
        session.job_enqueued(job)
        job.phase = "Inqueue"
