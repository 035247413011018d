"""proportion: queues share the cluster by weight, within their capability and guarantee.

Each queue that has jobs in the session gets a *deserved* amount of every resource, by
water-filling: the cluster is handed out in proportion to the queues' weights; a queue
never deserves more than it requests or than its *real capability* (the cluster less the
other queues' guarantees, capped by its own `capability`), and never less than its
`guarantee`; what a queue cannot use goes round again to the others until nothing is
left or nobody can take more. A queue without jobs takes no part.

The verdicts that follow from it:
- queue order: higher `spec.priority` first, then the queue with the lower share
  (allocated / deserved on its dominant resource);
- allocate: a queue is *overused* once its allocation reaches its deserved amount on
  every resource, and a task is *allocatable* only if the queue's allocation plus the
  task stays within deserved on every resource the task asks for;
- enqueue: a PodGroup is admitted only if its minResources, with what the queue holds
  and has already admitted (less what running jobs hold beyond their minimum), fit in
  the queue's real capability;
- reclaim: a queue's tasks are victims only while the queue holds more than it deserves.
A queue that is not Open (`Closed`, `Closing`) takes nothing new. An empty
`status.state` counts as Open: no queue controller runs beside this scheduler.

Quota checks (allocatable, enqueue) are Volcano's: strict, only on the resources asked
for, `pods` aside, and a resource the limit does not list counts as zero there.

Departures from Volcano, on purpose: the real capability keeps every resource of the
cluster as a finite amount (Volcano drops a resource the other queues' guarantees take
whole, and then treats it as unlimited in the water-filling); nothing panics or goes
negative when the cluster shrinks below the guarantees; the water-filling loop is
bounded; and a queue deserves its guarantee even when every queue has weight 0.
"""

from __future__ import annotations

from vscheduler.hookspecs import SessionView, hookimpl
from vscheduler.model import Job, Queue, Task
from vscheduler.plugin import Plugin
from vscheduler.plugins.queue_quota import QueueFigures, QueueUsage, room_refusal
from vscheduler.quota import resource_text
from vscheduler.resources import CPU, MEMORY, Resource

__all__ = ["ProportionPlugin", "WeightedQueueFigures"]

# The water-filling ends well before this in practice (each round a queue is satisfied
# or the cluster is used up); the bound only guards against float noise.
MAX_ROUNDS = 1000


# --------------------------------------------------------------------------- helpers


def _same(left: Resource, right: Resource) -> bool:
    """Exactly equal, not within tolerance: a queue whose deserved amount still grows,
    however little, may take more in the next round (as Volcano's deep equality)."""
    return (left.cpu, left.memory, left.scalars) == (right.cpu, right.memory, right.scalars)


def _diff(new: Resource, old: Resource) -> tuple[Resource, Resource]:
    """(increase, decrease) per dimension from `old` to `new`."""
    increased, decreased = Resource(), Resource()
    for name in (CPU, MEMORY, *sorted(set(new.scalars) | set(old.scalars))):
        delta = new.get(name) - old.get(name)
        if delta > 0:
            increased.set(name, delta)
        elif delta < 0:
            decreased.set(name, -delta)
    return increased, decreased


# --------------------------------------------------------------------------- state


class WeightedQueueFigures(QueueFigures):
    """What proportion knows of one queue: its figures with its weight, by which its
    deserved amount is water-filled."""

    __slots__ = ("room", "weight")

    def __init__(self, queue: Queue, total: Resource, total_guarantee: Resource) -> None:
        super().__init__(queue, total, total_guarantee)
        self.weight = queue.weight
        # Request shape -> (what the queue held when asked, the verdict on its room):
        # see `ProportionPlugin._room_for`.
        self.room: dict[tuple, tuple[tuple, str | None]] = {}


# --------------------------------------------------------------------------- plugin


class ProportionPlugin(QueueUsage, Plugin):
    name = "proportion"

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        self.total = session.total_resource
        self.open_queues(session, WeightedQueueFigures)
        self._divide()


    def _divide(self) -> None:
        """Water-fill the cluster into the queues' deserved amounts."""
        attrs = sorted(self.queue_figures.values(), key=lambda a: a.name)
        remaining = self.total.clone()
        met: set[str] = set()
        for _ in range(MAX_ROUNDS):
            hungry = [a for a in attrs if a.name not in met]
            total_weight = sum(a.weight for a in hungry)
            if total_weight <= 0:
                break
            before = remaining.clone()
            increased, decreased = Resource(), Resource()
            for attr in hungry:
                old = attr.deserved.clone()
                attr.deserved.add(remaining.clone().multiply(attr.weight / total_weight))
                attr.deserved.min_dimension(attr.real_capability, missing_infinite=True)
                attr.deserved.min_dimension(attr.request, missing_infinite=False)
                attr.deserved.set_max(attr.guarantee)
                if attr.request.less_equal(attr.deserved) or _same(attr.deserved, old):
                    met.add(attr.name)
                more, less = _diff(attr.deserved, old)
                increased.add(more)
                decreased.add(less)
            remaining = remaining.add(decreased).exceeded_part(increased)
            if remaining.is_empty() or remaining.equal(before):
                break
        for attr in attrs:
            # A guarantee holds even when no queue has weight (the loop never ran).
            attr.deserved.set_max(attr.guarantee)
            attr.update_share()


    # ---------------------------------------------------------------- order

    @hookimpl
    def queue_order(self, left: Queue, right: Queue) -> int:
        return self.order_by_share(left, right)

    # ---------------------------------------------------------------- allocate

    @hookimpl
    def overused(self, queue: Queue) -> str | None:
        attr = self.figures_of(queue.name)
        if attr is None or not attr.deserved.less_equal(attr.allocated):
            return None
        return (f"queue {queue.name} is overused: allocated {resource_text(attr.allocated)} "
                f"of deserved {resource_text(attr.deserved)}")

    def _room_for(self, queue: Queue, request: Resource) -> str | None:
        """None if `queue` may take `request` more within its deserved amount."""
        closed = queue.closed_reason()
        if closed is not None:
            return closed
        attr = self.figures_of(queue.name)
        if attr is None:
            return None
        # A verdict holds while the queue holds what it held (its deserved amount is
        # set at open): a queue at its share refuses each pending pod of thousands of
        # jobs alike, and writing that refusal cost more than the whole placement.
        held, shape = attr.allocated.key(), request.key()
        known = attr.room.get(shape)
        if known is not None and known[0] == held:
            return known[1]
        refused = room_refusal(queue.name, attr.allocated, request, attr.deserved, "deserved")
        attr.room[shape] = (held, refused)
        return refused

    @hookimpl
    def allocatable(self, queue: Queue, task: Task) -> str | None:
        return self._room_for(queue, task.resreq)

    @hookimpl
    def preemptive(self, queue: Queue, task: Task) -> str | None:
        return self._room_for(queue, task.resreq)

    # ---------------------------------------------------------------- reclaim

    @hookimpl
    def preemptor_signature(self, task: Task) -> None:
        """Nothing: the offers read the candidates' queues only."""
        return None

    @hookimpl
    def offers_by_signature(self) -> bool:
        """The offers read the candidates' queues only."""
        return True

    @hookimpl
    def victim_signature(self, job: Job, tasks: list[Task]) -> None:
        """Nothing: the offers read the job's queue and the tasks' requests only."""
        return None

    @hookimpl
    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        """Candidates of queues holding more than they deserve, taken in the order given
        until each queue is back within its deserved amount."""
        jobs = self.session.jobs
        holding: dict[str, Resource] = {}
        victims = []
        for task in candidates:
            job = jobs.get(task.job_id)
            attr = self.figures_of(job.queue) if job is not None else None
            if attr is None:
                continue
            allocated = holding.get(attr.name)
            if allocated is None:
                allocated = holding[attr.name] = attr.allocated.clone()
            if not allocated.less_equal(attr.deserved):
                allocated.sub(task.resreq)
                victims.append(task)
        return victims
