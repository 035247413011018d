"""sla: a job that has waited longer than its service level is admitted and served first.

Volcano's plugin. A job's waiting time is its PodGroup's `volcano.sh/sla-waiting-time`
annotation, else its `sla-waiting-time` annotation, else the plugin's `sla-waiting-time`
argument; each a Go duration (`30m`, `1h30m`). A job without one has no service level.

- Job order: jobs with a waiting time come before jobs without one, the one whose
  deadline (creation + waiting time) comes first first.
- Once a job has waited that long, enqueue may admit it (`job_enqueueable`: PERMIT) and
  allocate may keep what it placed for it even when that is not yet enough to run
  (`job_pipelined`: PERMIT), so that what is freed is held for it rather than handed
  to jobs behind it. Votes combine by tier: a permit decides over the plugins of later
  tiers (overcommit, proportion, capacity when sla is in the first), and a refusal in
  the same tier or an earlier one still wins (gang's, of a job not ready, if gang sits
  beside it).

Volcano ignores a waiting time it cannot read. So does this plugin, for an annotation
(a Warning event on the PodGroup says which, once a session); a malformed or
non-positive argument is a conf error instead, refused before any scheduling (Volcano
logs it and goes on without a waiting time for every job).
"""

from __future__ import annotations

from functools import lru_cache

from vscheduler.guards import DurationArgument, parse_duration
from vscheduler.hookspecs import ABSTAIN, PERMIT, SessionView, Vote, hookimpl
from vscheduler.model import Job
from vscheduler.plugin import Plugin

__all__ = ["SLA_ANNOTATIONS", "SlaPlugin"]

# The PodGroup annotations that give a job its waiting time, the first present wins.
SLA_ANNOTATIONS = ("volcano.sh/sla-waiting-time", "sla-waiting-time")


@lru_cache(maxsize=256)
def _read(raw: str) -> tuple[float | None, str | None]:
    """A waiting time as written, in seconds, or why it cannot be used."""
    try:
        seconds = parse_duration(raw)
    except ValueError as err:
        return None, str(err)
    if seconds <= 0:
        return None, f"must be above zero, got {raw!r}"
    return seconds, None


class SlaPlugin(Plugin):
    name = "sla"
    arguments = (
        DurationArgument("sla-waiting-time", str, None,
                         "how long a job may wait before it is admitted and served first, "
                         "for jobs whose PodGroup does not say (a Go duration: 30m); "
                         "unset, only those that say have a service level",
                         positive=True),
    )

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        self.default: float | None = self.args["sla-waiting-time"]
        # job uid -> its deadline (seconds since the epoch), None for no service level
        self._deadlines: dict[str, float | None] = {}

    def deadline(self, job: Job) -> float | None:
        """When the job's waiting time runs out (None: it has none)."""
        uid = job.uid
        if uid in self._deadlines:
            return self._deadlines[uid]
        waiting = self.default
        for key in SLA_ANNOTATIONS:
            raw = job.spec.annotations.get(key)
            if raw is None:
                continue
            seconds, error = _read(raw)
            if error is None:
                waiting = seconds
                break
            self._warn(job, f"metadata.annotations.{key}: {error}; ignored")
        deadline = self._deadlines[uid] = None if waiting is None else job.creation + waiting
        return deadline

    def _warn(self, job: Job, message: str) -> None:
        if job.bare:
            task = next(iter(job.tasks.values()), None)
            obj = f"Pod/{task.key}" if task is not None else f"PodGroup/{job.uid}"
        else:
            obj = f"PodGroup/{job.uid}"
        self.session.event(obj, "Warning", "InvalidSLAWaitingTime", message)

    @hookimpl
    def job_order(self, left: Job, right: Job) -> int:
        ld, rd = self.deadline(left), self.deadline(right)
        if ld is None:
            return 0 if rd is None else 1
        if rd is None:
            return -1
        return -1 if ld < rd else (1 if ld > rd else 0)

    @hookimpl
    def job_order_key(self, job: Job) -> tuple[bool, float]:
        """The earliest deadline first, jobs without one last."""
        deadline = self.deadline(job)
        return (True, 0.0) if deadline is None else (False, deadline)

    def _overdue(self, job: Job) -> Vote:
        deadline = self.deadline(job)
        return PERMIT if deadline is not None and self.session.now >= deadline else ABSTAIN

    @hookimpl
    def job_enqueueable(self, job: Job) -> Vote:
        return self._overdue(job)

    @hookimpl
    def job_pipelined(self, job: Job) -> Vote:
        return self._overdue(job)
