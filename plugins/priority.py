"""priority: higher PriorityClass values go first, and may preempt lower ones.

Jobs are ordered by their PodGroup's priorityClassName value, tasks by their pod's
priority. A preemptor may take victims of lower priority only: another job's tasks if
that job's priority is lower, its own job's tasks if the task's priority is lower.
"""

from __future__ import annotations

from vscheduler.hookspecs import SessionView, hookimpl
from vscheduler.model import Job, Task
from vscheduler.plugin import Plugin


def _higher_first(left: int, right: int) -> int:
    return -1 if left > right else (1 if left < right else 0)


class PriorityPlugin(Plugin):
    name = "priority"

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session

    @hookimpl
    def task_order(self, left: Task, right: Task) -> int:
        return _higher_first(left.priority, right.priority)

    @hookimpl
    def job_order(self, left: Job, right: Job) -> int:
        return _higher_first(left.priority, right.priority)

    @hookimpl
    def job_order_key(self, job: Job) -> int:
        """The priority negated: higher first, as `job_order`."""
        return -job.priority

    @hookimpl
    def preemptor_signature(self, task: Task) -> tuple[int | None, int]:
        """Its job's priority and its own (within its job, tasks compare by theirs)."""
        job = self.session.jobs.get(task.job_id)
        return (job.priority if job is not None else None, task.priority)

    @hookimpl
    def offers_by_signature(self) -> bool:
        """Of another job's pods, the offers read the preemptor's job priority only."""
        return True

    @hookimpl
    def victim_signature(self, job: Job, tasks: list[Task]) -> int:
        """Its priority (its tasks' are part of every signature)."""
        return job.priority

    @hookimpl
    def victim_state(self) -> None:
        """Nothing: the offers and orders read the jobs' and tasks' priorities only."""
        return None

    @hookimpl
    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        jobs = self.session.jobs
        preemptor_job = jobs.get(preemptor.job_id)
        if preemptor_job is None:
            return None
        victims = []
        for task in candidates:
            job = jobs.get(task.job_id)
            if job is None:
                continue
            if job is not preemptor_job:
                if job.priority < preemptor_job.priority:
                    victims.append(task)
            elif task.priority < preemptor.priority:
                victims.append(task)
        return victims

    @hookimpl
    def job_starving(self, job: Job) -> bool:
        return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)
