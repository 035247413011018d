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

**Hierarchy** (`enableHierarchy: true` on the plugin, as in Volcano): queues form a tree
by `spec.parent` (`vscheduler/queue_tree.py`; root at the top) and jobs belong in leaf
queues.
- a queue's capability takes from its parent what it leaves unset (cpu, memory, a
  scalar it does not list); deserved is at least the guarantee; the *real capability*
  is the parent's less every child's guarantee, plus its own, capped by its capability
  (root's: the cluster, capped by root's capability);
- what a queue holds, has admitted and could give back counts in each of its ancestors;
- allocate and enqueue check the leaf and every ancestor against its real capability;
  reclaim asks the leaf first and the ancestors as the pod is placed, once its victims
  are gone (Volcano checks the leaf only there: an ancestor could pass its limit);
- a job in a queue with children waits, with a reason naming the queue;
- queue order: a leaf before a parent, and two leaves by the shares of the children of
  their deepest common ancestor on their paths;
- reclaim takes from the closest relatives first (siblings, then cousins); with the
  `ancestorReclaimLevel: N` argument a queue may also reclaim while an ancestor up to N
  levels up is within its deserved, and a victim's ancestors up to N levels up that are
  not the reclaimer's must be over their deserved too (Volcano's rules, with one
  reading of "not the reclaimer's" in trees of uneven depth: by name, not by level).
A tree that cannot be used as written (a missing parent, a cycle, children guaranteed
more than their parent) gives a Warning event on the queue and goes on as
`vscheduler/queue_tree.py` says; Volcano stops scheduling for the whole cluster on it.

Departures from Volcano, on purpose: the real capability keeps every resource of the
cluster as a finite amount (Volcano drops a resource the guarantees take whole and then
treats it as unlimited); nothing panics or goes negative when the cluster shrinks below
the guarantees; and allocatable does not count Volcano's reservations for its
queue-allocation scheduling gate, which this scheduler does not have.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vscheduler.hookspecs import PERMIT, Reject, SessionView, Vote, hookimpl
from vscheduler.model import Job, Queue, Task
from vscheduler.plugin import LimitArgument, Plugin
from vscheduler.plugins.borrowing import (
    BORROW_FROM,
    NO_TERMS,
    BorrowTerms,
    Lending,
    beyond,
    read_terms,
)
from vscheduler.plugins.priority_quota import (
    NO_CLASS_TERMS,
    ClassTerms,
    class_of,
    class_part,
    read_class_terms,
)
from vscheduler.plugins.queue_quota import (
    QueueFigures,
    QueueUsage,
    admission,
    priority_first,
    queue_usage,
    room_refusal,
    total_guarantee,
    warn_guarantees_over_cluster,
)
from vscheduler.queue_tree import ROOT, QueueTree
from vscheduler.quota import (
    amount_text,
    capability_of,
    quota_exceeded,
    real_capability,
    resource_text,
    without_gated,
)
from vscheduler.resources import CPU, INF, MEMORY, MIN_RESOURCE, PODS, Resource

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


NOT_LEAF = ("queue {queue} has child queues: jobs go in its leaf queues "
            "(hierarchy: capacity's enableHierarchy)")


class TreeFigures(WrittenDeservedFigures):
    """A queue's figures in a tree (see the module docstring): set by `_open_tree`."""

    __slots__ = ()

    def __init__(self, queue: Queue, capability: Resource | None, real: Resource) -> None:
        QueueFigures.__init__(self, queue, real, Resource())
        self.capability = capability
        self.real_capability = real
        self.deserved = queue.deserved.clone() if queue.deserved else Resource()
        self.deserved.set_max(self.guarantee)


def _inherit(own: Resource | None, parent: Resource | None) -> Resource | None:
    """A child's capability: its own, taking its parent's cpu or memory where it sets
    none (or 0) and its parent's scalars it does not list."""
    if parent is None:
        return own
    if own is None:
        return parent.clone()
    out = own.clone()
    if out.cpu == INF:
        out.cpu = parent.cpu
    if out.memory == INF:
        out.memory = parent.memory
    for name, amount in parent.scalars.items():
        out.scalars.setdefault(name, amount)
    return out


class CapacityPlugin(QueueUsage, Plugin):
    name = "capacity"
    arguments = (
        LimitArgument("ancestorReclaimLevel", int, 0,
                      "with enableHierarchy: how many levels up a queue's ancestors "
                      "count in reclaim (0: the leaf queues alone)"),
    )
    mode_flags = ("enableHierarchy",)

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        self.tree: QueueTree | None = None
        self.level: int = self.args["ancestorReclaimLevel"]
        if self.args.get("enableHierarchy"):
            self._open_tree(session)
        else:
            self.open_queues(session, WrittenDeservedFigures)
            for attr in self.queue_figures.values():
                attr.update_share()
        self._open_lending(session)
        self._open_classes(session)
        self._say_over_limits(session)

    def _over_capability(self, name: str) -> bool:
        """Whether queue `name` holds more than its real capability of something."""
        attr = self.figures_of(name)
        if attr is None:
            return False
        held = attr.allocated
        return any(held.get(n) - attr.real_capability.get(n) >= MIN_RESOURCE
                   for n in _requested(held))

    def _say_over_limits(self, session: SessionView) -> None:
        """A queue holding more than its real capability (its capability or a guarantee
        was lowered under running pods, or the cluster shrank): a Warning event says so.
        Nothing is evicted for it: what is beyond is what other queues' reclaim takes
        first from it, in victim order (lowest priority, then newest, first)."""
        for name, attr in self.queue_figures.items():
            if name not in session.queues:
                continue  # (an implied root)
            held = attr.allocated
            over = [n for n in _requested(held)
                    if held.get(n) - attr.real_capability.get(n) >= MIN_RESOURCE]
            if over:
                session.event(
                    f"Queue/{name}", "Warning", "OverCapability",
                    f"queue {name} holds more than its real capability: "
                    + "; ".join(f"{n} {amount_text(n, held.get(n))} > "
                                f"{amount_text(n, attr.real_capability.get(n))}"
                                for n in over)
                    + "; what is beyond may be reclaimed, lowest priority and newest first")

    def _open_classes(self, session: SessionView) -> None:
        """Each queue's quotas per priority class and allowed classes
        (`priority_quota.py`; a Warning event for an annotation that cannot be used),
        and what each queue's jobs of each class hold (kept between sessions)."""
        self.class_terms: dict[str, ClassTerms] = _queue_terms(
            session, read_class_terms, NO_CLASS_TERMS, "InvalidPriorityQuota")
        self.class_held: dict[str, Resource] = {}
        self._class_tally = None
        if any(terms.quotas for terms in self.class_terms.values()):
            self._class_tally = session.tally("priority-class-usage", None, 1, class_part)

    def _class_key(self, job: Job) -> str | None:
        """The key of what `job`'s queue holds of its priority class, if the queue
        has quotas per class."""
        terms = self.class_terms.get(job.queue)
        if terms is None or not terms.quotas or self._class_tally is None:
            return None
        key = f"{job.queue}\0{class_of(job)}"
        if key not in self.class_held:
            self.class_held[key] = self._class_tally.sum(key, 0)
        return key

    def _class_refusal(self, job: Job, request: Resource) -> str | None:
        """Why `job`'s queue may not take `request` more for it: its class is not
        allowed there, or its class's quota would be passed."""
        terms = self.class_terms.get(job.queue)
        if terms is None:
            return None
        refused = terms.refusal(job.queue, class_of(job))
        if refused is None and (key := self._class_key(job)) is not None:
            refused = terms.over(job.queue, class_of(job), self.class_held[key], request)
        return refused

    def _open_lending(self, session: SessionView) -> None:
        """Each queue's borrowing terms (`borrowing.py`; a Warning event for an
        annotation that cannot be used), and who lends what to whom."""
        self.terms: dict[str, BorrowTerms] = _queue_terms(session, read_terms, NO_TERMS,
                                                          "InvalidBorrowing")
        for name, terms in self.terms.items():
            for lender in terms.lenders:
                missing = "the queue itself" if lender == name else (
                    None if lender in session.queues else f"queue {lender}, which does not exist")
                if missing is not None:
                    session.event(f"Queue/{name}", "Warning", "InvalidBorrowing",
                                  f"{BORROW_FROM}: names {missing}; it lends nothing")
        self.lending: Lending | None = None
        if not self.terms:
            return
        guarantees = total_guarantee(session)
        for terms in self.terms.values():  # (a lender with no jobs lends all it deserves)
            for lender in terms.lenders:
                queue = session.queues.get(lender)
                if queue is not None and lender not in self.queue_figures:
                    attr = WrittenDeservedFigures(queue, session.total_resource,
                                                  guarantees)
                    attr.update_share()
                    self.queue_figures[lender] = attr
        self.lending = Lending(self.terms, self.queue_figures)

    def _open_tree(self, session: SessionView) -> None:
        """Every queue's figures, from the root down; what the leaves' jobs hold summed
        into every ancestor."""
        queues = dict(session.queues)
        if ROOT not in queues:
            queues[ROOT] = Queue(ROOT)  # (implied: no limits of its own)
        self.queues = queues
        tree = self.tree = QueueTree(queues)
        for name, message in tree.problems:
            session.event(f"Queue/{name}", "Warning", "InvalidQueueTree", message)
        total = session.total_resource
        figures: dict[str, TreeFigures] = {}
        guaranteed: dict[str, Resource] = {}  # parent -> its children's guarantees
        for name in tree.top_down():
            queue, parent = queues[name], tree.parent[name]
            own = capability_of(queue)
            if parent is None:
                attr = TreeFigures(queue, own, real_capability(total, Resource(), Resource(),
                                                               own))
            else:
                up = figures[parent]
                capability = _inherit(own, up.capability)
                attr = TreeFigures(queue, capability, Resource())
                if parent not in guaranteed:
                    guaranteed[parent] = self._children_guarantees(parent, queues)
                attr.real_capability = real_capability(up.real_capability,
                                                       guaranteed[parent], attr.guarantee,
                                                       capability)
            figures[name] = attr
        usage = queue_usage(session)
        for name in sorted(usage.sums):
            if name not in figures:
                continue
            allocated, request, inqueue, elastic = usage.sums[name]
            for member in (name, *tree.ancestors[name]):
                attr = figures[member]
                attr.allocated.add(allocated)
                attr.request.add(request)
                attr.inqueue.add(inqueue)
                attr.elastic.add(elastic)
        for attr in figures.values():
            attr.update_share()
        self.queue_figures = figures

    def _children_guarantees(self, parent: str, queues: dict[str, Queue]) -> Resource:
        """The sum of `parent`'s children's guarantees; a Warning when it passes the
        parent's own guarantee (root's is theirs), when their deserved passes the
        parent's, or a child's capability the parent's."""
        tree = self.tree
        assert tree is not None
        total = Resource()
        for child in tree.children[parent]:
            guarantee = queues[child].guarantee
            if guarantee is not None:
                total.add(guarantee)
        own = queues[parent].guarantee or Resource()
        if parent == ROOT:
            warn_guarantees_over_cluster(self.session, total, [
                child for child in tree.children[parent] if queues[child].guarantee])
        elif not total.less_equal(own):
            self.session.event(
                f"Queue/{parent}", "Warning", "InvalidQueueTree",
                f"its child queues are guaranteed {resource_text(total)} in all, more "
                f"than its own guarantee ({resource_text(own)}); each child keeps its "
                "own guarantee of what is left")
        deserved = queues[parent].deserved
        if parent != ROOT and deserved is not None:
            wanted = Resource()
            for child in tree.children[parent]:
                if queues[child].deserved is not None:
                    wanted.add(queues[child].deserved)
            if not wanted.less_equal(deserved, missing_infinite=True):
                self.session.event(
                    f"Queue/{parent}", "Warning", "InvalidQueueTree",
                    f"its child queues deserve {resource_text(wanted)} in all, more than it "
                    f"deserves ({resource_text(deserved)}); they can all be within their "
                    "deserved while it is over its own, and reclaim finds none of them to "
                    "take from")
        mine = capability_of(queues[parent])
        if parent != ROOT and mine is not None:
            for child in tree.children[parent]:
                theirs = capability_of(queues[child])
                if theirs is None:
                    continue
                # (what the child does not set it takes from its parent: not beyond it)
                written = queues[child].capability
                if written is not None and written.cpu <= 0:
                    theirs.cpu = mine.cpu
                if written is not None and written.memory <= 0:
                    theirs.memory = mine.memory
                if not theirs.less_equal(mine, missing_infinite=True):
                    self.session.event(
                        f"Queue/{parent}", "Warning", "InvalidQueueTree",
                        f"child queue {child} has a capability ({resource_text(theirs)}) "
                        f"beyond its own ({resource_text(mine)}); {child} is held to "
                        f"{parent}'s")
        return total

    # ---------------------------------------------------------------- tree helpers

    def _path_up(self, name: str) -> tuple[str, ...]:
        """`name` and its ancestors, the leaf first (root last)."""
        tree = self.tree
        assert tree is not None
        return (name, *reversed(tree.ancestors.get(name, ())))

    def _near(self, name: str) -> list[str]:
        """`name`'s ancestors from its parent up, at most `ancestorReclaimLevel` of them,
        never root. (Sliced, not counted up to the argument: a conf may ask for a
        billion levels of a tree a few deep.)"""
        assert self.tree is not None
        ancestors = self.tree.ancestors.get(name, ())
        near = ancestors[max(len(ancestors) - self.level, 0):]
        return [a for a in reversed(near) if a != ROOT]

    # ---------------------------------------------------------------- order

    @hookimpl
    def queue_order(self, left: Queue, right: Queue) -> int:
        first = priority_first(left, right)
        if first:
            return first
        tree = self.tree
        lname, rname = left.name, right.name
        if tree is not None and lname in tree.parent and rname in tree.parent:
            left_leaf, right_leaf = tree.is_leaf(lname), tree.is_leaf(rname)
            if left_leaf != right_leaf:
                return -1 if left_leaf else 1
            if left_leaf:  # by the branches where their paths part
                depth = tree.common_depth(lname, rname) + 1
                lname, rname = tree.branch(lname, depth), tree.branch(rname, depth)
        return self._by_share(lname, rname)

    def _by_share(self, lname: str, rname: str) -> int:
        """The lower share first; on equal shares a queue with a deserved amount before
        a best-effort queue (which always has share 1)."""
        la, ra = self.figures_of(lname), self.figures_of(rname)
        if la is None or ra is None:
            return 0
        if la.share != ra.share:
            return -1 if la.share < ra.share else 1
        left_deserves, right_deserves = not la.deserved.is_empty(), not ra.deserved.is_empty()
        if left_deserves != right_deserves:
            return -1 if left_deserves else 1
        return 0

    @hookimpl
    def victim_queue_order(self, left: Queue, right: Queue, preemptor_queue: Queue) -> int:
        """Queues holding more than their real capability give first (a quota lowered
        under them); then those that borrow from the preemptor's queue; then, with
        hierarchy, its closest relatives: siblings, then cousins (0 otherwise)."""
        lo, ro = self._over_capability(left.name), self._over_capability(right.name)
        if lo != ro:  # (a lowered quota: what is beyond goes first)
            return -1 if lo else 1
        lending = self.lending
        if lending is not None:
            lb = lending.borrows_from(left.name, preemptor_queue.name)
            rb = lending.borrows_from(right.name, preemptor_queue.name)
            if lb != rb:
                return -1 if lb else 1
        tree = self.tree
        if tree is None or not {left.name, right.name, preemptor_queue.name} <= tree.parent.keys():
            return 0
        ld = tree.common_depth(left.name, preemptor_queue.name)
        rd = tree.common_depth(right.name, preemptor_queue.name)
        return -1 if ld > rd else (1 if ld < rd else 0)

    # ---------------------------------------------------------------- enqueue

    @hookimpl
    def job_enqueueable(self, job: Job) -> Vote:
        queue = self.session.queues.get(job.queue)
        terms = self.class_terms.get(job.queue)
        refused = terms.refusal(job.queue, class_of(job)) if terms is not None else None
        if refused is not None:
            return Reject(refused)
        tree = self.tree
        if tree is None or queue is None:
            return admission(self.session, job, queue, self.figures_of(job.queue))
        if not tree.is_leaf(job.queue):
            return Reject(NOT_LEAF.format(queue=job.queue))
        vote = admission(self.session, job, queue, self.figures_of(job.queue))
        if isinstance(vote, Reject) or job.min_resources is None:
            return vote
        minimum = job.min_resources
        for name in tree.ancestors[job.queue][::-1]:
            attr = self.queue_figures[name]
            needed = (minimum.clone().add(attr.allocated).add(attr.inqueue)
                      .sub(attr.elastic))
            failing = quota_exceeded(needed, attr.real_capability, minimum)
            if failing:
                reason = (f"queue resource quota insufficient in queue {name}, an ancestor "
                          f"of {job.queue}: " + ", ".join(f"insufficient {n}"
                                                          for n in failing))
                if not job.bare:
                    self.session.event(f"PodGroup/{job.uid}", "Normal", "Unschedulable",
                                       reason)
                return Reject(reason)
        return PERMIT

    @hookimpl
    def job_enqueued(self, job: Job) -> None:
        if job.min_resources is None:
            return
        amount = without_gated(job, job.min_resources)
        names = self._path_up(job.queue) if self.tree is not None else (job.queue,)
        for name in names:
            figures = self.figures_of(name)
            if figures is not None:
                figures.inqueue.add(amount)

    # ---------------------------------------------------------------- allocate

    @hookimpl
    def allocatable(self, queue: Queue, task: Task) -> str | None:
        closed = queue.closed_reason()
        if closed is not None:
            return closed
        tree = self.tree
        if tree is not None and queue.name in tree.parent:
            if not tree.is_leaf(queue.name):
                return NOT_LEAF.format(queue=queue.name)
            for name in self._path_up(queue.name):
                attr = self.queue_figures[name]
                refused = room_refusal(name, attr.allocated, task.resreq,
                                       attr.real_capability, "real capability")
                if refused:
                    return refused
            return (self._borrow_refusal(queue.name, task.resreq)
                    or self._task_class_refusal(task))
        attr = self.figures_of(queue.name)
        if attr is None:
            return self._task_class_refusal(task)
        return (room_refusal(queue.name, attr.allocated, task.resreq, attr.real_capability,
                             "real capability")
                or self._borrow_refusal(queue.name, task.resreq)
                or self._task_class_refusal(task))

    def _task_class_refusal(self, task: Task) -> str | None:
        job = self.session.jobs.get(task.job_id)
        return self._class_refusal(job, task.resreq) if job is not None else None

    def _borrow_refusal(self, name: str, request: Resource) -> str | None:
        """Why queue `name` may not take `request` more beyond its deserved amount, by
        its borrowing terms: past its max-borrow, or more than its lenders have unused."""
        terms = self.terms.get(name) if self.lending is not None else None
        attr = self.figures_of(name)
        if terms is None or not terms.limits_borrowing or attr is None:
            return None
        before = beyond(attr.allocated, attr.deserved)
        after = beyond(attr.allocated.clone().add(request), attr.deserved)
        asked = _requested(request)
        limit = terms.max_borrow
        if limit is not None:  # (on the resources it lists)
            listed = set(limit.names()) | set(limit.scalars)
            over = [n for n in asked
                    if n in listed and after.get(n) - limit.get(n) >= MIN_RESOURCE]
            if over:
                return (f"queue {name} may borrow at most "
                        f"{', '.join(f'{n} {amount_text(n, limit.get(n))}' for n in over)} "
                        "beyond its deserved amount (elastic.gpu/max-borrow)")
        if terms.lenders:
            assert self.lending is not None
            available = self.lending.available(name)
            short = [n for n in asked
                     if after.get(n) - before.get(n) - available.get(n) >= MIN_RESOURCE]
            if short:
                return (f"queue {name} has its deserved amount of "
                        f"{', '.join(short)} and its lenders "
                        f"({', '.join(terms.lenders)}) have none of it unused to lend")
        return None

    @hookimpl
    def allocate_event(self, task: Task) -> str | None:
        """Count the task in its queue (and every ancestor's). A placement that takes
        its queue past its borrowing terms, or with hierarchy a queue on its path past
        its real capability, is refused (it is rolled back): reclaim asks only the leaf
        before choosing victims, since evictions within a subtree leave its ancestors
        no fuller, and evictions may free what a lender lends, so these are judged
        here, once the victims are gone."""
        job = self.session.jobs.get(task.job_id)
        # (reclaim pipelines without asking allocatable: its borrowing terms and class
        # quotas hold too)
        refused = None
        if job is not None:
            refused = (self._borrow_refusal(job.queue, task.resreq)
                       or self._class_refusal(job, task.resreq))
            key = self._class_key(job)
            if key is not None:
                self.class_held[key].add(task.resreq)
        self._lend(task, borrow=True)
        for attr in self._charged(task):
            attr.allocated.add(task.resreq)
            attr.update_share()
            if self.tree is not None and refused is None and quota_exceeded(
                    attr.allocated, attr.real_capability, task.resreq):
                refused = room_refusal(attr.name, attr.allocated.clone().sub(task.resreq),
                                       task.resreq, attr.real_capability,
                                       "real capability")
        return refused

    @hookimpl
    def deallocate_event(self, task: Task) -> None:
        job = self.session.jobs.get(task.job_id)
        key = self._class_key(job) if job is not None else None
        if key is not None:
            self.class_held[key].sub(task.resreq)
        self._lend(task, borrow=False)
        for attr in self._charged(task):
            attr.allocated.sub(task.resreq)
            attr.update_share()

    def _lend(self, task: Task, borrow: bool) -> None:
        """Book what placing (or taking away) `task` borrows from (or gives back to) its
        queue's lenders, before its queue's allocation changes."""
        lending = self.lending
        if lending is None:
            return
        job = self.session.jobs.get(task.job_id)
        terms = self.terms.get(job.queue) if job is not None else None
        attr = self.figures_of(job.queue) if terms is not None and terms.lenders else None
        if attr is None:
            return
        now = beyond(attr.allocated, attr.deserved)
        if borrow:
            lending.take(attr.name, beyond(attr.allocated.clone().add(task.resreq),
                                            attr.deserved).sub(now))
        else:
            lending.give_back(attr.name, now.sub(beyond(
                attr.allocated.clone().sub(task.resreq), attr.deserved)))

    def _charged(self, task: Task) -> list[QueueFigures]:
        """The figures a task's allocation counts in: its queue's, and with hierarchy
        every ancestor's."""
        job = self.session.jobs.get(task.job_id)
        if job is None:
            return []
        names = self._path_up(job.queue) if self.tree is not None else (job.queue,)
        return [f for f in (self.figures_of(n) for n in names) if f is not None]

    # ---------------------------------------------------------------- reclaim

    @hookimpl
    def preemptive(self, queue: Queue, task: Task) -> str | None:
        """May `queue` reclaim from other queues for `task`? Only within its real
        capability (its ancestors': see `allocate_event`), and only while it is still
        within its deserved amount on some resource the task asks for (or, with
        `ancestorReclaimLevel`, one of its ancestors that many levels up is): a queue
        that already has what it deserves of everything the task needs must wait for
        idle resources instead."""
        closed = queue.closed_reason()
        if closed is not None:
            return closed
        tree = self.tree
        if tree is not None and queue.name in tree.parent and not tree.is_leaf(queue.name):
            return NOT_LEAF.format(queue=queue.name)
        attr = self.figures_of(queue.name)
        if attr is None:
            return None
        # (the leaf's real capability: evictions never make room in the reclaimer's own
        # queue; its ancestors are judged as the task is placed, see `allocate_event`)
        refused = room_refusal(queue.name, attr.allocated, task.resreq,
                               attr.real_capability, "real capability")
        if refused:
            return refused
        over = _over_on_every_resource(attr, task.resreq)
        if over is None:
            return None
        if self.tree is not None:
            for ancestor in self._near(queue.name):
                if _over_on_every_resource(self.queue_figures[ancestor], task.resreq) is None:
                    return None
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
    def victim_signature(self, job: Job, tasks: list[Task]) -> None:
        """Nothing: the offers read the job's queue and the tasks' requests only."""
        return None

    @hookimpl
    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        """Candidates, in the order given, of queues that hold more than they deserve of
        a resource the candidate uses, until each such queue is back within its deserved
        amount; never one whose eviction takes its queue below its guarantee. With
        hierarchy and `ancestorReclaimLevel` N, also: the victim's ancestors up to N
        levels up that are not the reclaimer's hold more than they deserve too; and a
        close relative (an ancestor in common within N levels, root aside) is spared
        while the reclaimer's own queue deserves nothing of what it asks."""
        jobs = self.session.jobs
        home = self.task_figures(reclaimer)
        if home is None:
            return []
        wanted = _dimensions(reclaimer.resreq)
        holding: dict[str, Resource] = {}
        victims = []
        near = self._near_ancestors(home.name)
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
            if not self._kept(attr).less_equal(allocated.clone().sub(task.resreq)):
                continue  # the queue would fall below its guarantee or protected part
            if self._lent_for_good(attr.name, home.name):
                continue  # borrowed from the reclaimer, which may not take it back
            if (near and not uses & _dimensions(attr.deserved)
                    and near & self._near_ancestors(attr.name)
                    and not wanted & _dimensions(home.deserved)):
                continue  # a close relative deserving none of it, nor the reclaimer
            if not self._gives(attr, allocated, task.resreq):
                continue
            gates = self._ancestor_gates(attr.name, home.name)
            held = []
            for name in gates:
                ancestor = self.queue_figures[name]
                amount = holding.get(name)
                if amount is None:
                    amount = holding[name] = ancestor.allocated.clone()
                if not self._gives(ancestor, amount, task.resreq):
                    break
                held.append(amount)
            else:
                allocated.sub(task.resreq)
                for amount in held:
                    amount.sub(task.resreq)
                victims.append(task)
        return victims

    def _kept(self, attr: QueueFigures) -> Resource:
        """What reclaim never takes from a queue: its guarantee, or more if its
        `elastic.gpu/protected` annotation says so."""
        terms = self.terms.get(attr.name)
        if terms is None or terms.protected is None:
            return attr.guarantee
        return attr.guarantee.clone().set_max(terms.protected)

    def _lent_for_good(self, borrower: str, reclaimer: str) -> bool:
        """Whether `borrower` borrows from `reclaimer` on terms that keep it."""
        terms = self.terms.get(borrower)
        return (terms is not None and not terms.borrowed_preemption
                and self.lending is not None
                and self.lending.borrows_from(borrower, reclaimer))

    def _gives(self, attr: QueueFigures, allocated: Resource, request: Resource) -> bool:
        """Whether a queue holding `allocated` gives up a task asking `request`: it
        deserves none of what the task uses, or holds more than it deserves of it."""
        if not _dimensions(request) & _dimensions(attr.deserved):
            return True
        return self._over_deserved(allocated, attr.deserved, request)

    def _near_ancestors(self, name: str) -> set[str]:
        """With hierarchy and `ancestorReclaimLevel` N, `name`'s ancestors up to N levels
        up, root aside; else nothing."""
        if self.tree is None or not self.level:
            return set()
        return set(self._near(name))

    def _ancestor_gates(self, victim: str, reclaimer: str) -> list[str]:
        """The victim queue's ancestors up to N levels up (`ancestorReclaimLevel`) that
        are not also the reclaimer's, root aside: each must give up the victim too."""
        if self.tree is None or not self.level:
            return []
        theirs = set(self.tree.ancestors.get(reclaimer, ()))
        return [a for a in self._near(victim) if a not in theirs]

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


def _queue_terms(session: SessionView, read: Callable[[Queue], tuple[Any, list[str]]],
                 none: Any, reason: str) -> dict[str, Any]:
    """What `read` makes of each queue's annotations, for the queues that say something;
    each problem a Warning event with `reason` on its Queue (the annotation ignored)."""
    found = {}
    for name, queue in session.queues.items():
        terms, problems = read(queue)
        for problem in problems:
            session.event(f"Queue/{name}", "Warning", reason, problem)
        if terms is not none:
            found[name] = terms
    return found


def _over_on_every_resource(attr: QueueFigures, request: Resource) -> list[str] | None:
    """None if a queue, with `request` more, is still within its deserved amount on some
    resource the request asks for (tolerant); else how it passes it on each (empty:
    the request asks for nothing)."""
    future = attr.allocated.clone().add(request)
    deserved = attr.deserved
    over = []
    for name in _requested(request):
        used, due = future.get(name), deserved.get(name)
        if used < MIN_RESOURCE and due < MIN_RESOURCE:
            continue  # nothing used, nothing deserved: says nothing either way
        if used - due < MIN_RESOURCE:
            return None  # still within deserved here
        over.append(f"{name} allocated + request {amount_text(name, used)} > "
                    f"deserved {amount_text(name, due)}")
    return over
