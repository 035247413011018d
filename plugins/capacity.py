"""capacity: queues get what their spec says they deserve, up to a hard limit.

Where proportion divides the cluster by weight, capacity takes each queue's share as
written: `spec.deserved` is what the queue should hold when the cluster is contended,
`spec.capability` the most it may ever hold, `spec.guarantee` what no other queue may
take from it. For each queue that has jobs in the session:

- *real capability*: the cluster less the guarantees of every queue (with jobs or
  not), plus the queue's own guarantee, capped by its capability (a capability of zero
  or no cpu or memory leaves that resource unlimited);
- *deserved*: `spec.deserved`, no more than the real capability, no less than the
  guarantee;
- *share*: allocated / deserved on the resource where that is largest; a queue that
  deserves nothing has share 1 (it is served after every queue below its deserved).

The verdicts that follow from it:
- queue order: higher `spec.priority` first, then the lower share; on equal shares a
  queue that deserves something before one that deserves nothing;
- allocate: a task is *allocatable* while the queue's allocation plus the task stays
  within the real capability on every resource the task asks for. Capacity admits up
  to the hard limit, not to deserved: a queue borrows idle resources beyond its
  deserved amount, and reclaim takes them back when others need them. There is no
  *overused* verdict (as in Volcano);
- enqueue: a PodGroup is admitted only if its minResources, with what the queue holds
  and has already admitted (less what running jobs hold beyond their minimum), fit in
  the real capability;
- reclaim: a queue may reclaim for a task (*preemptive*) only while, with the task, it
  stays within its real capability and is still within its deserved amount on some
  resource the task asks for; a task of another queue is a victim only if that queue
  holds more than it deserves of a resource the task uses (or deserves none of what the
  task uses), never if evicting it would take the queue below its guarantee.
A queue that is not Open (`Closed`, `Closing`) takes nothing new. An empty
`status.state` counts as Open: no queue controller runs beside this scheduler.

Quota checks are Volcano's: strict, only on the resources asked for, `pods` aside, and
a resource the limit does not list counts as zero there. The reclaim checks leave `pods`
aside too: every pod asks for one, so it would make every task look relevant.

Queues are flat. Volcano's hierarchical mode (`enableHierarchy`, `spec.parent`,
`ancestorReclaimLevel`) is not implemented: `spec.parent` is ignored and every queue is
judged on its own; nothing is refused because a conf or a queue asks for hierarchy.

Departures from Volcano, on purpose: the real capability keeps every resource of the
cluster as a finite amount (Volcano drops a resource the guarantees take whole and then
treats it as unlimited); nothing panics or goes negative when the cluster shrinks below
the guarantees; and allocatable does not count Volcano's reservations for its
queue-allocation scheduling gate, which this scheduler does not have.
"""

from __future__ import annotations

from vscheduler.hookspecs import SessionView, hookimpl
from vscheduler.model import Queue, Task
from vscheduler.plugin import Plugin
from vscheduler.plugins.queue_quota import QueueFigures, QueueUsage, room_refusal
from vscheduler.quota import amount_text
from vscheduler.resources import CPU, MEMORY, MIN_RESOURCE, PODS, Resource

__all__ = ["CapacityPlugin", "WrittenDeservedFigures"]


# --------------------------------------------------------------------------- helpers


def _dimensions(resource: Resource) -> set[str]:
    """The resources `resource` holds something of (at least `MIN_RESOURCE`), `pods`
    aside."""
    return {n for n in resource.names() if n != PODS}


def _requested(request: Resource) -> list[str]:
    """The resources a request asks for at all, `pods` aside, cpu and memory first."""
    names = [n for n in (CPU, MEMORY) if request.get(n) > 0]
    names += sorted(n for n, v in request.scalars.items() if v > 0 and n != PODS)
    return names


# --------------------------------------------------------------------------- state


class WrittenDeservedFigures(QueueFigures):
    """What capacity knows of one queue: its figures with deserved as its spec writes
    it, but never more than the queue could ever get, nor less than what it is
    guaranteed."""

    __slots__ = ()

    def __init__(self, queue: Queue, total: Resource, total_guarantee: Resource) -> None:
        super().__init__(queue, total, total_guarantee)
        self.deserved = queue.deserved.clone() if queue.deserved else Resource()
        self.deserved.min_dimension(self.real_capability, missing_infinite=True)
        self.deserved.set_max(self.guarantee)

    def update_share(self) -> None:
        """As a quota plugin's, but 1 for a queue that deserves nothing, so that it comes
        after every queue below its deserved."""
        if self.deserved.is_empty():
            self.share = 1.0
        else:
            super().update_share()


# --------------------------------------------------------------------------- plugin


class CapacityPlugin(QueueUsage, Plugin):
    name = "capacity"

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        self.open_queues(session, WrittenDeservedFigures)
        for attr in self.queue_figures.values():
            attr.update_share()


    # ---------------------------------------------------------------- order

    @hookimpl
    def queue_order(self, left: Queue, right: Queue) -> int:
        first = self.order_by_share(left, right)
        if first:
            return first
        la, ra = self.figures_of(left.name), self.figures_of(right.name)
        if la is None or ra is None:
            return 0
        # Equal shares: a queue with a deserved amount is served before a best-effort
        # queue (which always has share 1).
        left_deserves, right_deserves = not la.deserved.is_empty(), not ra.deserved.is_empty()
        if left_deserves != right_deserves:
            return -1 if left_deserves else 1
        return 0

    # ---------------------------------------------------------------- allocate

    @hookimpl
    def allocatable(self, queue: Queue, task: Task) -> str | None:
        closed = queue.closed_reason()
        if closed is not None:
            return closed
        attr = self.figures_of(queue.name)
        if attr is None:
            return None
        return room_refusal(queue.name, attr.allocated, task.resreq, attr.real_capability,
                            "real capability")

    # ---------------------------------------------------------------- reclaim

    @hookimpl
    def preemptive(self, queue: Queue, task: Task) -> str | None:
        """May `queue` reclaim from other queues for `task`? Only within its real
        capability, and only while it is still within its deserved amount on some
        resource the task asks for: a queue that already has what it deserves of
        everything the task needs must wait for idle resources instead."""
        refused = self.allocatable(queue, task)  # (open, and within real capability)
        if refused:
            return refused
        attr = self.figures_of(queue.name)
        if attr is None:
            return None
        request = task.resreq
        future = attr.allocated.clone().add(request)
        deserved = attr.deserved
        over = []
        for name in _requested(request):
            used, due = future.get(name), deserved.get(name)
            if used < MIN_RESOURCE and due < MIN_RESOURCE:
                continue  # nothing used, nothing deserved: says nothing either way
            if used - due < MIN_RESOURCE:
                return None  # still within deserved here (tolerant)
            over.append(f"{name} allocated + request {amount_text(name, used)} > "
                        f"deserved {amount_text(name, due)}")
        if not over:
            return f"queue {queue.name} may not reclaim: the task asks for no resources"
        return (f"queue {queue.name} may not reclaim: it would pass its deserved amount "
                f"on every resource the task asks for ({'; '.join(over)})")

    @hookimpl
    def preemptor_signature(self, task: Task) -> bool:
        """Whether the task's queue is known here (its requests and queue are part of
        every signature)."""
        return self.task_figures(task) is not None

    @hookimpl
    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        """Candidates, in the order given, of queues that hold more than they deserve of
        a resource the candidate uses, until each such queue is back within its deserved
        amount; never one whose eviction takes its queue below its guarantee."""
        jobs = self.session.jobs
        if self.task_figures(reclaimer) is None:
            return []
        wanted = _dimensions(reclaimer.resreq)
        holding: dict[str, Resource] = {}
        victims = []
        for task in candidates:
            job = jobs.get(task.job_id)
            attr = self.figures_of(job.queue) if job is not None else None
            if attr is None:
                continue
            uses = _dimensions(task.resreq)
            if not uses & wanted:
                continue  # evicting it frees nothing the reclaimer asks for
            allocated = holding.get(attr.name)
            if allocated is None:
                allocated = holding[attr.name] = attr.allocated.clone()
            if not attr.guarantee.less_equal(allocated.clone().sub(task.resreq)):
                continue  # the queue would fall below its guarantee
            if uses & _dimensions(attr.deserved) and not self._over_deserved(
                    allocated, attr.deserved, task.resreq):
                continue
            allocated.sub(task.resreq)
            victims.append(task)
        return victims

    @staticmethod
    def _over_deserved(allocated: Resource, deserved: Resource, request: Resource) -> bool:
        """Does `allocated` pass `deserved` strictly on a resource `request` asks for and
        `deserved` defines (cpu and memory when deserved holds some; another resource
        when deserved names it, even at zero)?"""
        for name in _requested(request):
            if name in (CPU, MEMORY):
                if deserved.get(name) < MIN_RESOURCE:
                    continue
            elif name not in deserved.scalars:
                continue
            if allocated.get(name) > deserved.get(name):
                return True
        return False
