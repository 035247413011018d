"""capacity-card: queue quotas per card model (seed 003), and the tidal reclaim policy
between inference and training (seed 002).

Card models come from the nodes' labels (`vscheduler.cards`). A queue's quota is its
annotation `volcano.sh/card.quota: '{"NVIDIA-H200": 3, ...}'`; a queue may use only the
cards it names (a card missing from the quota is a quota of 0). CPU and memory are
limited by `spec.capability` (missing, or 0, means unlimited). Other scalar resources
(RDMA devices, ...) are not limited. Quotas may over-commit the cluster; a cluster
smaller than its quotas simply leaves pods pending. Queues are flat (`spec.parent` is
ignored). Amounts are milli units inside (5 cards = 5000), which the events print.

The accounting is `vscheduler.card_ledger` (per session: the cluster total of cpu,
memory and cards; per queue its capability, allocated, inqueue and elastic amounts,
elastic being what the queue's jobs hold beyond what they minimally need; per job its
minimum and its cards; the quota checks and their messages); the tidal policy is
`vscheduler.tidal`. This module holds the plugin's arguments and hooks. A task's card is
the card of the node it lands on: `volcano.sh/card.name` says which cards a pod accepts (`A|B`, in
order of preference, all of one resource name); a pod that asks for a card resource
without it accepts any card of that resource.

Verdicts:
- enqueue: a job is admitted if its minimum (cpu and memory of `minResources`; cards
  from the job's `volcano.sh/card.request` while it has no pods, else from the cards
  its first minMember pods ask for) plus the queue's allocated and inqueue, less its
  elastic, fits the capability. A request for `A|B` is measured against the sum of the
  quotas of A and B (different pods may land on different cards). Refusals are Warning
  events on the PodGroup (on the Pod for a pod without a group). The enqueue action asks
  about every job, so a card request alone is checked;
- allocatable / preemptive: the queue is Open and its allocation plus the task fits its
  capability on cpu, memory and the card (for `A|B`, on one of them at least);
  refusals are Warning events on the Pod, with the numbers;
- allocate and deallocate events: the task's request, with its node's card, is added
  to (taken from) the queue's allocation, pipelined tasks too (the report's cards count
  only pods placed for good, not a gang's uncommitted allocations); a placement that would
  pass the capability, whichever action makes it, is refused and rolled back;
- predicate: a node is refused when its card is not one the pod accepts, or when the
  queue's quota of that card is used up, so that an `A|B` pod lands where quota
  remains (not resolvable by evicting: it is the queue's own quota);
- node order: for `A|B` pods, A's nodes score above B's (`nodeOrderWeight` x 1000 per
  place in the list), enough to outweigh the nodeorder plugin's default scorers;
- queue order: higher `spec.priority` first (inference queues reclaim first, training
  queues are reclaimed first);
- reclaimable (tidal): a training task reclaims from nobody; any other task may take
  training tasks only, never inference ones nor tasks of unknown type. The service
  type is the job's `volcano.sh/service.type` (inference|training), else
  `podOwnerReferenceToServiceType[kind of the pod's first owner]`.

Arguments: `cardUnlimitedCpuMemory` (pods asking for cards are neither limited nor
counted on cpu and memory by their queue), `podOwnerReferenceToServiceType`,
`overCommitFactor` (when > 0, enqueue also refuses a job while what the whole cluster
has allocated and admitted, with the job, would pass the cluster's total times the
factor on a card, cpu or memory the job asks for), `nodeOrderWeight`.

Choices where the seeds are silent: a node whose card labels are malformed has no cards
(pods that name a card never go there; others are placed and charged no card); a queue
whose quota annotation is malformed gets a Warning event and no cards, but keeps its
cpu and memory; a pod whose card annotation is malformed, or mixes resource names, is
refused with the reason (a Warning event); a job whose card request is malformed is
not admitted, with the reason; a task of unknown service type may reclaim (training
tasks only), as the seed's code does.
"""

from __future__ import annotations

from collections.abc import Hashable

from vscheduler.card_ledger import (
    CARD_NAME_REASON,
    CARD_REQUEST_REASON,
    SUMS,
    CardLedger,
    Failure,
    NodeCardIndex,
    QueueCards,
)
from vscheduler.fit import Unfit
from vscheduler.hookspecs import PERMIT, Reject, SessionView, Vote, hookimpl
from vscheduler.model import Job, Node, Queue, Task
from vscheduler.plugin import Argument, Plugin
from vscheduler.plugins.queue_quota import priority_first
from vscheduler.resources import MIN_RESOURCE
from vscheduler.tidal import (
    SERVICE_TYPE_ANNOTATION,
    ServiceTypesArgument,
    may_reclaim,
    service_type,
)

__all__ = ["CapacityCardPlugin"]

NODE_ORDER_STEP = 1000.0

# Event reasons (Kubernetes Event `reason` field) of the plugin's own refusals; the
# quota ones come with the ledger's failures.
CLOSED_REASON = "QueueNotOpen"
CARD_QUOTA_REASON = "InvalidCardQuota"

_NO_CARD = Unfit("node(s) had no card model the pod accepts", static=True)
_UNLISTED = "node(s) had card {card}, which the pod does not accept"
_USED_UP = "node(s) had card {card}, whose quota in the pod's queue is used up"
_NOTHING: dict[str, str] = {}


def _refusal(built: dict[str, Unfit], card: str, words: str, static: bool = False) -> Unfit:
    """A predicate refusal naming `card`, built once per `built` cache and card (the
    predicate runs per task per node)."""
    unfit = built.get(card)
    if unfit is None:
        unfit = built[card] = Unfit(words.format(card=card), static=static)
    return unfit


class CapacityCardPlugin(Plugin):
    name = "capacity-card"
    arguments = (
        Argument("cardUnlimitedCpuMemory", bool, False,
                 "pods that ask for cards are not limited (nor counted) on cpu and memory "
                 "by their queue"),
        ServiceTypesArgument("podOwnerReferenceToServiceType", dict, {},
                             "owner kind -> service type (inference|training), for jobs "
                             "without volcano.sh/service.type"),
        Argument("overCommitFactor", float, 0.0,
                 "when > 0, a job is admitted only while the cluster's allocated and "
                 "admitted amounts stay within its total times this factor"),
        Argument("nodeOrderWeight", float, 1.0,
                 "weight of the preference for the first cards of an A|B list"),
    )

    # ================================================================ session

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        self.unlimited = bool(self.args.get("cardUnlimitedCpuMemory", False))
        self.owner_types = self.args.get("podOwnerReferenceToServiceType") or {}
        self.overcommit = float(self.args.get("overCommitFactor") or 0.0)
        self._warned: set[tuple[str, str]] = set()
        self._unlisted_unfit: dict[str, Unfit] = {}
        nodes = session.keep(f"{self.name}.nodes", session.node_specs,
                             lambda: NodeCardIndex(session.node_list, self.name))
        self.ledger = ledger = CardLedger(
            nodes, session.queues, session.jobs,
            unlimited=self.unlimited,
            order_step=NODE_ORDER_STEP * float(self.args.get("nodeOrderWeight", 1.0)),
            open_tally=lambda count: session.tally(
                self.name, (session.node_specs, self.args), len(SUMS), count))
        for queue, message in ledger.quota_errors:
            self._warn(f"Queue/{queue}", CARD_QUOTA_REASON, message)
        # read directly by the per-task-per-node hooks
        self._tasks = ledger.task_facts
        self._node_resources = ledger.node_resources

    @hookimpl
    def on_session_close(self, session: SessionView) -> None:
        """Each queue's cards placed for good, in whole cards, for the report (every
        queue with a card quota or using cards)."""
        session.result.queue_cards.update(
            self.ledger.queue_cards(session.result.visited_jobs))

    # ================================================================ enqueue

    @hookimpl
    def job_enqueueable(self, job: Job) -> Vote:
        queue = self.session.queues.get(job.queue)
        attr = self.ledger.queues.get(job.queue)
        if queue is None or attr is None:
            return Reject(f"queue {job.queue} not found")
        where = self._job_object(job)
        closed = queue.closed_reason()
        if closed is not None:
            return Reject(self._warn(where, CLOSED_REASON, closed))
        if job.bare:
            # A pod without a group is admitted here or never: say what is wrong with
            # its card name now (a group's pods are refused one by one at allocate).
            for task in job.tasks.values():
                error = self.ledger.task(task).error
                if error is not None:
                    return Reject(self._warn(where, CARD_NAME_REASON, error))
        minimum, error = self.ledger.minimum(job)
        if error is not None:
            return Reject(self._warn(where, CARD_REQUEST_REASON, error))
        failures = self.ledger.enqueue_failures(attr, self.ledger.quota_view(minimum))
        if self.overcommit > 0:
            failures += self.ledger.cluster_failures(queue.name, minimum, self.overcommit)
        if not failures:
            return PERMIT
        return Reject(self._warn_all(where, failures))

    @hookimpl
    def job_enqueued(self, job: Job) -> None:
        self.ledger.admit(job)

    def _job_object(self, job: Job) -> str:
        """Where a job's events go: its PodGroup, or the pod of a job without one."""
        if job.bare and job.tasks:
            return f"Pod/{next(iter(job.tasks.values())).key}"
        return f"PodGroup/{job.uid}"

    # ================================================================ allocate

    @hookimpl
    def queue_order(self, left: Queue, right: Queue) -> int:
        return priority_first(left, right)

    @hookimpl
    def allocatable(self, queue: Queue, task: Task) -> str | None:
        return self._may_take(queue, task)

    @hookimpl
    def preemptive(self, queue: Queue, task: Task) -> str | None:
        return self._may_take(queue, task)

    def _may_take(self, queue: Queue, task: Task) -> str | None:
        """None if `queue` may take `task` now, else why not (each reason also a
        Warning event on the Pod)."""
        where = f"Pod/{task.key}"
        closed = queue.closed_reason()
        if closed is not None:
            return self._warn(where, CLOSED_REASON, closed)
        attr = self.ledger.queues.get(queue.name)
        if attr is None:
            return None
        failures = self.ledger.task_failures(attr, task, self.ledger.task(task).candidates)
        return self._warn_all(where, failures) if failures else None

    # ================================================================ nodes

    @hookimpl
    def predicate(self, task: Task, node: Node) -> Unfit | None:
        cards = self._tasks.get(task.uid) or self.ledger.task(task)
        resource = cards.resource
        if resource is None or cards.unfit is not None:
            return cards.unfit
        card = self._node_resources.get(node.name, _NOTHING).get(resource)
        if card is None:
            return _NO_CARD if cards.accepted is not None else None
        if cards.accepted is not None and card not in cards.accepted:
            return self._unlisted(card)
        attr = cards.queue
        if attr is not None and (attr.allocated.scalars.get(card, 0.0) + cards.amount
                                 - attr.capability.scalars.get(card, 0.0) >= MIN_RESOURCE):
            return self._quota_used_up(attr, card)
        return None

    @hookimpl
    def task_signature(self, task: Task) -> Hashable:
        """What `predicate` and `node_order` read besides the node: the card resource
        and the cards the pod accepts, and which of its candidate cards its queue still
        has room for (that changes as the queue's tasks are placed). Not the queue
        itself: pods of queues with the same room share searches (the refusals say "the
        pod's queue"; the pod's own event names it)."""
        cards = self._tasks.get(task.uid) or self.ledger.task(task)
        if cards.resource is None or cards.unfit is not None:
            return (cards.resource, cards.unfit)
        attr = cards.queue
        if attr is None:
            return (cards.resource, cards.accepted)
        allocated, capability = attr.allocated.scalars, attr.capability.scalars
        options = cards.accepted if cards.accepted is not None else tuple(capability)
        room = tuple(card for card in options
                     if allocated.get(card, 0.0) + cards.amount - capability.get(card, 0.0)
                     < MIN_RESOURCE)
        return (cards.resource, cards.accepted, cards.amount, room)

    def _unlisted(self, card: str) -> Unfit:
        """The refusal of a node whose card the pod does not accept."""
        return _refusal(self._unlisted_unfit, card, _UNLISTED, static=True)

    @staticmethod
    def _quota_used_up(attr: QueueCards, card: str) -> Unfit:
        """The refusal of a node whose card the queue has no quota left for."""
        return _refusal(attr.used_up, card, _USED_UP)

    @hookimpl
    def node_order(self, task: Task, node: Node) -> float:
        cards = self._tasks.get(task.uid) or self.ledger.task(task)
        scores = cards.scores
        if scores is None or cards.resource is None:
            return 0.0
        card = self._node_resources.get(node.name, _NOTHING).get(cards.resource)
        return scores.get(card, 0.0) if card is not None else 0.0

    # ================================================================ events

    @hookimpl
    def allocate_event(self, task: Task) -> str | None:
        """Count the task, with its node's card, in its queue. A placement (not the
        undoing of an eviction) that takes the queue past its capability is refused,
        and rolled back, whichever action made it: the quota holds on every path."""
        failures = self.ledger.place(task)
        return self._warn_all(f"Pod/{task.key}", failures) if failures else None

    @hookimpl
    def deallocate_event(self, task: Task) -> None:
        self.ledger.unplace(task)

    # ================================================================ tidal reclaim

    def service_type(self, task: Task) -> str:
        """inference, training or unknown (`vscheduler.tidal`)."""
        job = self.session.jobs.get(task.job_id)
        declared = job.annotations.get(SERVICE_TYPE_ANNOTATION) if job is not None else None
        return service_type(declared, task.pod.owner_kind, self.owner_types)

    @hookimpl
    def preemptor_signature(self, task: Task) -> str:
        """Its service type: training reclaims from nobody."""
        return self.service_type(task)

    @hookimpl
    def offers_by_signature(self) -> bool:
        """The offers read the reclaimer's service type only."""
        return True

    @hookimpl
    def victim_signature(self, job: Job, tasks: list[Task]) -> tuple:
        """What the tasks' service types follow from: the job's annotation and their
        owners' kinds."""
        return job.annotations.get(SERVICE_TYPE_ANNOTATION), tuple([t.pod.owner_kind
                                                                     for t in tasks])

    @hookimpl
    def victim_state(self) -> None:
        """Nothing: the offers read the pods' service types, the queue order the
        queues' priorities."""
        return None

    @hookimpl
    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        """Training reclaims from nobody; others take training tasks only."""
        kind = self.service_type(reclaimer)
        return [task for task in candidates if may_reclaim(kind, self.service_type(task))]

    # ================================================================ warnings

    def _warn(self, obj: str, reason: str, message: str) -> str:
        """Record a Warning event (once per session) and return its message."""
        if (obj, message) not in self._warned:
            self._warned.add((obj, message))
            self.session.event(obj, "Warning", reason, message)
        return message

    def _warn_all(self, obj: str, failures: list[Failure]) -> str:
        """A Warning event per failure; their messages joined, as the refusal."""
        return "; ".join(self._warn(obj, reason, message) for reason, message in failures)

