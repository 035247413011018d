"""gang: a job runs with at least minAvailable tasks, or not at all.

The job is *ready* once minAvailable of its tasks are placed (allocate then commits
them together) and *pipelined* once they are placed or waiting on releasing resources.
A job with fewer valid tasks than minAvailable is not scheduled. Victims are taken only
from a job's tasks beyond its minAvailable. At close, a job that is not ready gets an
`Unschedulable` condition saying how many tasks are missing and why.

scheduleTimeoutSeconds (seed 001): a PodGroup never scheduled (none of its pods ever
bound) and still short of minAvailable that long after its creation is given up. It is
no longer admitted or placed, what a session had placed for it is released, and it goes
back to `Pending`, so it holds no admitted quota; it is marked failed with an
`Unschedulable` condition, reason `ScheduleTimeout`, and one Warning event (Volcano's
PodGroup has no failed phase). Deleting and re-creating the PodGroup starts it over. A
gang that ran once is not timed out when it later falls short (a pod finished, say).
"""

from __future__ import annotations

from vscheduler.hookspecs import ABSTAIN, PERMIT, Reject, SessionView, Vote, hookimpl
from vscheduler.model import (
    PIPELINED_STATUSES,
    READY_STATUSES,
    SCHEDULED_STATUSES,
    VALID_STATUSES,
    Condition,
    Job,
    Task,
    TaskStatus,
)
from vscheduler.plugin import Plugin

S = TaskStatus
TIMEOUT_REASON = "ScheduleTimeout"


class GangPlugin(Plugin):
    name = "gang"

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session

    def _timed_out(self, job: Job) -> str | None:
        """Why the job is given up, if it passed its scheduleTimeoutSeconds before it was
        ever scheduled."""
        timeout = job.schedule_timeout
        if timeout is None or self.session.now - job.creation <= timeout:
            return None
        if job.phase not in ("Pending", "Inqueue", "") or job.count(SCHEDULED_STATUSES):
            return None  # it was scheduled once: what it lacks now is no timeout
        if job.ready_task_num() >= job.min_available:
            return None
        return (f"PodGroup scheduling timed out: fewer than {job.min_available} pods "
                f"scheduled within scheduleTimeoutSeconds {timeout}")

    @hookimpl
    def job_valid(self, job: Job) -> tuple[str, str] | None:
        timed_out = self._timed_out(job)
        if timed_out:
            return (TIMEOUT_REASON, timed_out)
        if not job.check_task_valid():
            return ("NotEnoughPodsOfTask",
                    "Not enough valid pods of each task for gang-scheduling")
        short = job.sub_groups_short(VALID_STATUSES)
        if short is not None:
            policy, have = short
            return ("NotEnoughPodsOfTask",
                    f"Not enough valid subGroups for gang-scheduling: subGroupPolicy "
                    f"{policy.name} has {have} groups of {policy.size} valid pods, "
                    f"min: {policy.min_sub_groups}")
        valid = job.valid_task_num()
        if valid < job.min_available:
            return ("NotEnoughTasks", "Not enough valid tasks for gang-scheduling, "
                    f"valid: {valid}, min: {job.min_available}")
        return None

    def _victims(self, candidates: list[Task]) -> list[Task]:
        jobs = self.session.jobs
        spare: dict[str, int] = {}
        victims = []
        for task in candidates:
            job = jobs.get(task.job_id)
            if job is None:
                continue
            left = spare.setdefault(job.uid, job.live_ready_num())
            if left > job.min_available:
                spare[job.uid] = left - 1
                victims.append(task)
        return victims

    @hookimpl
    def preemptor_signature(self, task: Task) -> None:
        """Nothing: the offers read the candidates' jobs only."""
        return None

    @hookimpl
    def offers_by_signature(self) -> bool:
        """The offers read the candidates' jobs only."""
        return True

    @hookimpl
    def victim_signature(self, job: Job, tasks: list[Task]) -> tuple[int, int]:
        """How many of its tasks are ready where they run, and its minMember."""
        return job.live_ready_num(), job.min_available

    @hookimpl
    def victim_state(self) -> None:
        """Nothing: the offers and the job order read the jobs only."""
        return None

    @hookimpl
    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        return self._victims(candidates)

    @hookimpl
    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        return self._victims(candidates)

    @hookimpl
    def job_order(self, left: Job, right: Job) -> int:
        left_ready, right_ready = left.is_ready(), right.is_ready()
        if left_ready and not right_ready:
            return 1
        if right_ready and not left_ready:
            return -1
        return 0

    @hookimpl
    def job_order_key(self, job: Job) -> bool:
        """Jobs not ready yet come first."""
        return job.is_ready()

    @hookimpl
    def job_ready(self, job: Job) -> bool:
        return (job.check_task_ready() and job.is_ready()
                and job.sub_groups_short(READY_STATUSES) is None)

    @hookimpl
    def job_enqueueable(self, job: Job) -> Vote:
        timed_out = self._timed_out(job)
        return Reject(timed_out) if timed_out else ABSTAIN

    @hookimpl
    def job_pipelined(self, job: Job) -> Vote:
        if job.check_task_pipelined() and job.is_pipelined() \
                and job.sub_groups_short(PIPELINED_STATUSES) is None:
            return PERMIT
        return Reject("not enough tasks placed or waiting for minAvailable")

    @hookimpl
    def job_starving(self, job: Job) -> bool:
        return job.is_starving()

    @hookimpl
    def on_session_close(self, session: SessionView) -> None:
        # Only the jobs whose close may differ from the last session's: the others are
        # ready and have their conditions (see framework.close).
        for uid in session.result.visited_jobs:
            job = session.jobs[uid]
            if not job.tasks or job.bare:
                continue
            timed_out = self._timed_out(job)
            if timed_out:
                job.phase = "Pending"  # not admitted: it holds no queue room
                if not any(c.reason == TIMEOUT_REASON and c.status == "True"
                           for c in job.conditions):
                    session.timed_out(job, timed_out)
                # (set in every session, the same: it is what the gang's events and its
                # pods' reasons say, not that it lacks room; unchanged, it is not
                # written again)
                job.set_condition(Condition("Unschedulable", "True", TIMEOUT_REASON,
                                            timed_out, session.uid))
                continue
            if job.is_ready():
                # Written only when it changes: a job left as it was is not copied anew
                # by the next snapshot.
                scheduled = Condition("Scheduled", "True",
                                      "tasks in gang are ready to be scheduled", "",
                                      session.uid)
                if not any(c.same_as(scheduled) for c in job.conditions):
                    job.set_condition(scheduled)
                # An Unschedulable condition of an earlier session no longer holds
                # (Volcano leaves it True beside Scheduled).
                for c in job.conditions:
                    if c.type == "Unschedulable" and c.status == "True":
                        job.set_condition(Condition(c.type, "False", c.reason, c.message,
                                                    session.uid))
                continue
            releasing = any(t.node_name for t in job.tasks_in(S.RELEASING))
            waiting = job.count(S.PENDING | S.PIPELINED)
            scheduled = job.count(S.RUNNING | S.BOUND | S.SUCCEEDED | S.FAILED | S.RELEASING)
            if releasing and not waiting and scheduled >= job.min_available:
                continue
            almost = sum(1 for t in job.tasks_in(S.PENDING)
                         if t.last_transaction and t.last_transaction[0] == S.ALLOCATED)
            unready = max(job.min_available - (job.ready_task_num() + almost), 0)
            job.set_condition(Condition(
                "Unschedulable", "True", "NotEnoughResources",
                f"{unready}/{len(job.tasks)} tasks in gang unschedulable: {job.fit_error()}",
                session.uid))
