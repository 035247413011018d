"""overcommit: admit jobs only while the cluster, somewhat overcommitted, has room.

The cluster's room is its total allocatable times `overcommit-factor` (1.2 by default),
less what pods on the nodes use now. Every admitted job (PodGroup Inqueue) holds its
full minResources against that room until it runs; a running job still owed part of its
minimum holds that part. A PodGroup whose minResources, added to what is held, would
pass the room on any resource it asks for waits Pending, with an event saying which
resources are overused. The factor lets a little more in than fits now, since running
pods finish and admitted jobs rarely start all at once.

Only enqueue is affected: placement is checked against the nodes themselves.
"""

from __future__ import annotations

from vscheduler.hookspecs import PERMIT, Reject, SessionView, Vote, hookimpl
from vscheduler.model import Job
from vscheduler.plugin import Argument, Plugin
from vscheduler.quota import owed_minimum, quota_exceeded, without_gated
from vscheduler.tally import Part

__all__ = ["DEFAULT_FACTOR", "OvercommitPlugin"]

DEFAULT_FACTOR = 1.2


def _held(job: Job) -> Part:
    """What an admitted job holds of the room: all of its minResources while Inqueue
    (what it already has is not deducted, as in Volcano), and what it still lacks of
    them while Running with at least minMember tasks placed."""
    if job.min_resources is None:
        return job.queue, (None,)
    if job.phase == "Inqueue":
        return job.queue, (without_gated(job, job.min_resources),)
    return job.queue, (owed_minimum(job),)


class OvercommitPlugin(Plugin):
    name = "overcommit"
    arguments = (
        Argument("overcommit-factor", float, DEFAULT_FACTOR,
                 "how many times the cluster's allocatable may be admitted; below 1 "
                 f"means the default, {DEFAULT_FACTOR}"),
    )

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        factor = self.args.get("overcommit-factor", DEFAULT_FACTOR)
        # Volcano's rule: a factor that would admit less than the cluster holds is a
        # mistake, and the default is used instead.
        self.factor = factor if factor is not None and factor >= 1 else DEFAULT_FACTOR
        self.idle = session.total_resource.clone().multiply(self.factor).sub(
            session.total_used)
        # (summed over the jobs by a tally kept between sessions)
        self.inqueue = session.tally(self.name, None, 1, _held).total(0)

    @hookimpl
    def job_enqueueable(self, job: Job) -> Vote:
        minimum = job.min_resources
        if minimum is None:
            return PERMIT
        failing = quota_exceeded(self.inqueue.clone().add(minimum), self.idle, minimum)
        if not failing:
            return PERMIT
        reason = "resource in cluster is overused: " + ", ".join(
            f"overused {n}" for n in failing)
        if not job.bare:
            self.session.event(f"PodGroup/{job.uid}", "Normal", "Unschedulable", reason)
        return Reject(reason)

    @hookimpl
    def job_enqueued(self, job: Job) -> None:
        if job.min_resources is not None:
            self.inqueue.add(without_gated(job, job.min_resources))
