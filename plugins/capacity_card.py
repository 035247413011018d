"""capacity-card: queue quotas per card model (seed 003), and the tidal reclaim policy
between inference and training (seed 002).

Card models come from the nodes' labels (`vscheduler.cards`). A queue's quota is its
annotation `volcano.sh/card.quota: '{"NVIDIA-H200": 3, ...}'`; a queue may use only the
cards it names (a card missing from the quota is a quota of 0). CPU and memory are
limited by `spec.capability` (missing, or 0, means unlimited). Other scalar resources
(RDMA devices, ...) are not limited. Quotas may over-commit the cluster; a cluster
smaller than its quotas simply leaves pods pending. Queues are flat (`spec.parent` is
ignored). Amounts are milli units inside (5 cards = 5000), which the events print.

Per session the plugin keeps the cluster total (cpu, memory, cards) and, per queue, its
capability, guarantee, allocated, inqueue and elastic amounts (elastic: what the
queue's jobs hold beyond what they minimally need). A task's card is the card of the
node it lands on: `volcano.sh/card.name` says which cards a pod accepts (`A|B`, in
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
  to (taken from) the queue's allocation, pipelined tasks too; a placement that would
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

import math
from collections.abc import Hashable

from vscheduler.cards import (
    CARD_NAME_ANNOTATION,
    CARD_QUOTA_ANNOTATION,
    CARD_REQUEST_ANNOTATION,
    SEPARATOR,
    CardError,
    NodeCards,
    alternatives_conflict,
    join_alternatives,
    node_cards,
    parse_alternatives,
    parse_card_counts,
)
from vscheduler.fit import Unfit
from vscheduler.framework.session import Session
from vscheduler.hookspecs import PERMIT, Reject, Vote, hookimpl
from vscheduler.model import ALLOCATED_STATUSES, Job, Node, Queue, Task, TaskStatus
from vscheduler.plugin import Argument, Plugin
from vscheduler.resources import INF, MIN_RESOURCE, Resource

__all__ = ["SERVICE_TYPE_ANNOTATION", "CapacityCardPlugin", "QueueCards", "TaskCards"]

S = TaskStatus
SERVICE_TYPE_ANNOTATION = "volcano.sh/service.type"
INFERENCE, TRAINING, UNKNOWN = "inference", "training", "unknown"
MILLI = 1000.0
MIB = 1024.0 * 1024.0
NODE_ORDER_STEP = 1000.0
DONE = S.SUCCEEDED | S.FAILED
PLACING = S.ALLOCATED | S.PIPELINED

# Event reasons (Kubernetes Event `reason` field).
CPU_REASON = "InsufficientCPUQuota"
MEMORY_REASON = "InsufficientMemoryQuota"
CARD_REASON = "InsufficientScalarQuota"
CLOSED_REASON = "QueueNotOpen"
CARD_NAME_REASON = "InvalidCardName"
CARD_REQUEST_REASON = "InvalidCardRequest"
CARD_QUOTA_REASON = "InvalidCardQuota"
CLUSTER_REASON = "InsufficientClusterResource"

_NO_CARD = Unfit("node(s) had no card model the pod accepts")
_NOTHING: dict[str, str] = {}


# --------------------------------------------------------------------------- messages


def _number(value: float) -> str:
    """A number as the events print it: 4000, 1.5."""
    if not math.isfinite(value):
        return str(value)
    if abs(value - round(value)) < 1e-6:
        return str(round(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _quota_message(queue: str, what: str, requested: float, total: float,
                  capability: float) -> str:
    """Seed 003's words for a quota refusal; `what` is `cpu`, `memory` or a card. CPU
    and cards in milli units, memory in Mi."""
    if what == "cpu":
        return (f"Queue <{queue}> has insufficient CPU quota: requested <{_number(requested)}>"
                f", total would be <{_number(total)}>, but capability is "
                f"<{_number(capability)}>")
    if what == "memory":
        return (f"Queue <{queue}> has insufficient memory quota: requested "
                f"<{_number(requested / MIB)} Mi>, total would be <{_number(total / MIB)} Mi>"
                f", but capability is <{_number(capability / MIB)} Mi>")
    return (f"Queue <{queue}> has insufficient <{what}> quota: requested "
            f"<{_number(requested)}>, total would be <{_number(total)}>, but capability is "
            f"<{_number(capability)}>")


def _reason_for(what: str) -> str:
    return CPU_REASON if what == "cpu" else MEMORY_REASON if what == "memory" else CARD_REASON


def _over(total: float, limit: float) -> bool:
    """`total` passes `limit` (tolerant by MIN_RESOURCE, as every resource comparison)."""
    return total - limit >= MIN_RESOURCE


def _task_rank(task: Task) -> tuple[int, float, str]:
    """The order in which a job's tasks count towards its minimum: higher priority, then
    older, then by name (deterministic; the session's task order is not set up yet when
    plugins open)."""
    return (-task.priority, task.pod.creation, task.key)


# --------------------------------------------------------------------------- state


class QueueCards:
    """What capacity-card knows of one queue in this session. `capability` holds cpu and
    memory (infinite when unlimited) and, as scalars, the card quotas."""

    __slots__ = ("allocated", "capability", "elastic", "guarantee", "inqueue", "name",
                 "quota_unfit")

    def __init__(self, queue: Queue, quota: dict[str, float]) -> None:
        self.name = queue.name
        capability = queue.capability
        cpu = capability.cpu if capability is not None and capability.cpu > 0 else INF
        memory = capability.memory if capability is not None and capability.memory > 0 else INF
        self.capability = Resource(cpu, memory, dict(quota))
        guarantee = queue.guarantee
        self.guarantee = Resource(guarantee.cpu, guarantee.memory) if guarantee else Resource()
        self.allocated = Resource()
        self.inqueue = Resource()
        self.elastic = Resource()
        # card -> the predicate's refusal when this queue's quota of it is used up
        self.quota_unfit: dict[str, Unfit] = {}

    def quota(self, card: str) -> float:
        return self.capability.scalars.get(card, 0.0)

    def __repr__(self) -> str:
        return (f"QueueCards({self.name}: allocated {self.allocated}, inqueue "
                f"{self.inqueue}, elastic {self.elastic}, capability {self.capability})")


class TaskCards:
    """What capacity-card reads of one task, once per session: the card resource it asks
    for and how much (milli), the cards it accepts (`candidates`), its queue, node-order
    scores for `A|B`, and the refusal of a malformed card annotation."""

    __slots__ = ("accepted", "amount", "candidates", "error", "queue", "resource", "scores",
                 "unfit", "uses_cards")

    def __init__(self) -> None:
        self.accepted: tuple[str, ...] | None = None   # from the annotation; None = any
        self.candidates: tuple[str, ...] = ()
        self.resource: str | None = None
        self.amount = 0.0
        self.uses_cards = False
        self.queue: QueueCards | None = None
        self.scores: dict[str, float] | None = None
        self.error: str | None = None
        self.unfit: Unfit | None = None


class JobCards:
    """What a job counts, as the session opened: its queue's share of what it holds
    (`held`), its use of the cluster (`used`), what it could give back (`elastic`),
    its minimum with why its card request cannot be used, what it is still owed of that
    minimum once admitted (None if not admitted), and its placed cards per card in whole
    cards. Kept in `Job.memo` with what it depends on beyond the job (the nodes' specs
    and the plugin's arguments), for the next session to reuse."""

    __slots__ = ("args", "cards", "cluster_owed", "elastic", "held", "minimum",
                 "node_specs", "owed", "used")

    def __init__(self, node_specs: int, args: dict) -> None:
        self.node_specs = node_specs
        self.args = args
        self.held = Resource()
        self.used = Resource()
        self.elastic = Resource()
        self.minimum: tuple[Resource, str | None] = (Resource(), None)
        self.owed: Resource | None = None
        self.cluster_owed: Resource | None = None
        self.cards: dict[str, float] = {}


# --------------------------------------------------------------------------- plugin


class CapacityCardPlugin(Plugin):
    name = "capacity-card"
    arguments = (
        Argument("cardUnlimitedCpuMemory", bool, False,
                 "pods that ask for cards are not limited (nor counted) on cpu and memory "
                 "by their queue"),
        Argument("podOwnerReferenceToServiceType", dict, {},
                 "owner kind -> service type (inference|training), for jobs without "
                 "volcano.sh/service.type"),
        Argument("overCommitFactor", float, 0.0,
                 "when > 0, a job is admitted only while the cluster's allocated and "
                 "admitted amounts stay within its total times this factor"),
        Argument("nodeOrderWeight", float, 1.0,
                 "weight of the preference for the first cards of an A|B list"),
    )

    # ================================================================ session

    @hookimpl
    def on_session_open(self, session: Session) -> None:
        self.session = session
        self.unlimited = bool(self.args.get("cardUnlimitedCpuMemory", False))
        owners = self.args.get("podOwnerReferenceToServiceType") or {}
        self.owner_types = {str(k): str(v).strip().lower() for k, v in owners.items()}
        self.overcommit = float(self.args.get("overCommitFactor") or 0.0)
        self.order_weight = float(self.args.get("nodeOrderWeight", 1.0))
        self._warned: set[tuple[str, str]] = set()
        self._tasks: dict[str, TaskCards] = {}
        self._minimums: dict[str, tuple[Resource, str | None]] = {}
        self._unlisted_unfit: dict[str, Unfit] = {}
        self._read_nodes(session.node_list)
        self.queues = {name: self._read_queue(queue) for name, queue in session.queues.items()}
        self.cluster_allocated = Resource()
        self.cluster_inqueue = Resource()
        for job in session.jobs.values():
            self._count_job(job)

    def _read_nodes(self, nodes: list[Node]) -> None:
        """Each node's cards (read once per node: see `Node.memo`), which resource names
        are cards, and the cluster total."""
        self.node_cards: dict[str, NodeCards | None] = {}
        # node -> its resource -> card map (empty for a node without cards), for the
        # per-task-per-node hooks
        self._node_resources: dict[str, dict[str, str]] = {}
        card_resources: dict[str, set[str]] = {}
        self.total = Resource()
        for node in nodes:
            memo = node.memo
            if self.name in memo:
                cards = memo[self.name]
            else:
                cards = memo[self.name] = node_cards(node.labels, node.allocatable)
            self.node_cards[node.name] = cards
            self._node_resources[node.name] = cards.by_resource if cards else _NOTHING
            self.total.cpu += node.allocatable.cpu
            self.total.memory += node.allocatable.memory
            if cards is None:
                continue
            for resource, card in cards.by_resource.items():
                card_resources.setdefault(card, set()).add(resource)
            for card, amount in cards.amounts.items():
                self.total.scalars[card] = self.total.scalars.get(card, 0.0) + amount
        self.card_resources = card_resources
        by_resource: dict[str, list[str]] = {}
        for card in sorted(card_resources):
            for resource in card_resources[card]:
                by_resource.setdefault(resource, []).append(card)
        self.resource_cards = {r: tuple(cards) for r, cards in by_resource.items()}

    def _read_queue(self, queue: Queue) -> QueueCards:
        quota: dict[str, float] = {}
        text = queue.annotations.get(CARD_QUOTA_ANNOTATION)
        if text is not None:
            try:
                quota = parse_card_counts(text, CARD_QUOTA_ANNOTATION)
            except CardError as err:
                self._warn(f"Queue/{queue.name}", CARD_QUOTA_REASON,
                           f"Queue <{queue.name}>: {err}; the queue gets no cards")
        return QueueCards(queue, quota)

    def _count_job(self, job: Job) -> None:
        """Add what a job holds to its queue's allocated and elastic amounts, and what
        it was admitted for and does not hold yet to inqueue (and the same, cpu and
        memory always counted, to the cluster's figures)."""
        attr = self.queues.get(job.queue)
        if attr is None:
            return
        facts = self._known_cards(job)
        if facts is None:
            facts = job.memo[self.name] = self._job_cards(job)
        self._minimums[job.uid] = facts.minimum
        attr.allocated.add(facts.held)
        self.cluster_allocated.add(facts.used)
        attr.elastic.add(facts.elastic)
        if facts.owed is not None:
            attr.inqueue.add(facts.owed)
            self.cluster_inqueue.add(facts.cluster_owed)

    def _known_cards(self, job: Job) -> JobCards | None:
        """What an earlier reading of this job copy found, if it still holds: read under
        the same node specs and arguments (the copy itself is the same job, unchanged)."""
        facts = job.memo.get(self.name)
        if (facts is None or facts.node_specs != self.session.node_specs
                or facts.args is not self.args):
            return None
        return facts

    def _job_cards(self, job: Job) -> JobCards:
        facts = JobCards(self.session.node_specs, self.args)
        held, used, elastic = facts.held, facts.used, facts.elastic
        placed = sorted(job.tasks_in(ALLOCATED_STATUSES), key=_task_rank)
        for index, task in enumerate(placed):
            charge = self._charge(task)
            held.add(charge)
            used.add(self._cluster_charge(task, charge))
            if index >= job.min_available:
                elastic.add(Resource(0.0, 0.0, charge.scalars))
        facts.cards = self._placed_cards(job)
        facts.minimum = self._minimum(job)
        need = facts.minimum[0]
        minimum = self._quota_view(need)
        # What a job holds beyond its minimum could be given back: it does not count
        # against admitting others (cpu and memory: all of it for a job without
        # minResources, as in Volcano; cards: the tasks beyond minMember).
        elastic.cpu = max(held.cpu - minimum.cpu, 0.0)
        elastic.memory = max(held.memory - minimum.memory, 0.0)
        admitted = job.phase == "Inqueue" or (
            job.phase == "Running" and job.count(ALLOCATED_STATUSES) >= job.min_available)
        if admitted:
            facts.owed = _owed(minimum, held)
            facts.cluster_owed = _owed(need, used)
        return facts

    @hookimpl
    def on_session_close(self, session: Session) -> None:
        """Each queue's allocated cards, in whole cards, for the report (every queue
        with a card quota or using cards)."""
        used: dict[str, dict[str, float]] = {}
        for job in session.jobs.values():
            facts = None if job.dirty else self._known_cards(job)
            # (a job changed in this session is counted again)
            placed = facts.cards if facts is not None else self._placed_cards(job)
            if placed:
                counts = used.setdefault(job.queue, {})
                for card, count in placed.items():
                    counts[card] = counts.get(card, 0.0) + count
        for name, attr in self.queues.items():
            counts = {card: 0.0 for card in attr.capability.scalars}
            counts.update(used.get(name, {}))
            if counts:
                session.result.queue_cards[name] = counts

    def _placed_cards(self, job: Job) -> dict[str, float]:
        """The cards a job's placed tasks take, per card, in whole cards."""
        placed: dict[str, float] = {}
        for task in job.tasks_in(ALLOCATED_STATUSES):
            cards = self._task(task)
            card = self._card_on(cards, task.node_name)
            if card is not None:
                placed[card] = placed.get(card, 0.0) + cards.amount / MILLI
        return placed

    # ================================================================ reading tasks

    def _task(self, task: Task) -> TaskCards:
        """The task's card facts, read once per session."""
        cards = self._tasks.get(task.uid)
        if cards is None:
            cards = self._tasks[task.uid] = self._read_task(task)
        return cards

    def _read_task(self, task: Task) -> TaskCards:
        cards = TaskCards()
        job = self.session.jobs.get(task.job_id)
        cards.queue = self.queues.get(job.queue) if job is not None else None
        requested = [name for name in sorted(task.resreq.scalars)
                     if name in self.resource_cards and task.resreq.scalars[name] >= MIN_RESOURCE]
        cards.resource = requested[0] if requested else None
        raw = task.pod.annotations.get(CARD_NAME_ANNOTATION)
        if raw is not None and raw.strip():
            self._read_accepted(task, cards, raw, requested)
        if cards.resource is not None:
            cards.amount = task.resreq.scalars[cards.resource]
            cards.uses_cards = True
            if cards.accepted is None:
                cards.candidates = self.resource_cards.get(cards.resource, ())
        if cards.error is not None:
            cards.unfit = Unfit(cards.error)
        return cards

    def _read_accepted(self, task: Task, cards: TaskCards, raw: str,
                       requested: list[str]) -> None:
        """The cards the pod's annotation accepts, the resource they stand for, and
        why the annotation cannot be used, if so."""
        try:
            accepted = parse_alternatives(raw)
        except CardError as err:
            cards.error = f"Pod {task.key}: {CARD_NAME_ANNOTATION}: {err}"
            return
        cards.accepted = cards.candidates = accepted
        conflict = alternatives_conflict(accepted, self.card_resources)
        if conflict is not None:
            cards.error = f"Pod {task.key}: {CARD_NAME_ANNOTATION}: {conflict}"
            return
        known = {r for card in accepted for r in self.card_resources.get(card, ())}
        if len(known) == 1 and requested:
            resource = next(iter(known))
            if resource in requested:
                cards.resource = resource
            else:
                cards.error = (f"Pod {task.key}: {CARD_NAME_ANNOTATION}: card(s) {raw} are "
                               f"resource {resource}, but the pod asks for {requested[0]}")
        elif not known and not requested:
            # No node offers the cards it names: its card is then the extended resource
            # it asks for, so that no node without those cards takes it.
            scalars = task.resreq.scalars
            extended = [n for n in sorted(scalars) if "/" in n and scalars[n] >= MIN_RESOURCE]
            cards.resource = extended[0] if extended else None
        if len(accepted) > 1:
            step = NODE_ORDER_STEP * self.order_weight
            last = len(accepted) - 1
            cards.scores = {card: step * (last - i) for i, card in enumerate(accepted)}

    def _card_on(self, cards: TaskCards, node_name: str) -> str | None:
        """The card a task with these facts is charged on a node (None: no card)."""
        if cards.resource is None:
            return None
        node = self.node_cards.get(node_name)
        return node.by_resource.get(cards.resource) if node is not None else None

    def _charge(self, task: Task) -> Resource:
        """What a placed task counts in its queue's allocation: its node's card, and its
        cpu and memory unless card pods are unlimited on them."""
        cards = self._task(task)
        charge = Resource()
        if not (self.unlimited and cards.uses_cards):
            charge.cpu, charge.memory = task.resreq.cpu, task.resreq.memory
        card = self._card_on(cards, task.node_name)
        if card is not None:
            charge.scalars[card] = cards.amount
        return charge

    @staticmethod
    def _cluster_charge(task: Task, charge: Resource) -> Resource:
        """What a placed task uses of the cluster: its cards, and its cpu and memory
        whatever the queue counts of them."""
        return Resource(task.resreq.cpu, task.resreq.memory, charge.scalars)

    # ================================================================ job minimum

    def _minimum(self, job: Job) -> tuple[Resource, str | None]:
        """What the job minimally needs: cpu and memory of minResources; cards from its
        card request annotation while it has no pods, else from its first minMember
        pods (a pod placed counts its node's card, one not placed the cards it accepts,
        as an `A|B` key). With why the card request cannot be used, if so (then no
        cards are counted)."""
        known = self._minimums.get(job.uid)
        if known is not None:
            return known
        minimum = Resource()
        if job.min_resources is not None:
            minimum.cpu, minimum.memory = job.min_resources.cpu, job.min_resources.memory
        error = None
        try:
            minimum.scalars = self._minimum_cards(job)
        except CardError as err:
            error = f"Job {job.uid}: {err}"
        known = self._minimums[job.uid] = (minimum, error)
        return known

    def _minimum_cards(self, job: Job) -> dict[str, float]:
        live = [t for t in job.tasks.values() if not t.status & DONE]
        if not live:
            text = job.annotations.get(CARD_REQUEST_ANNOTATION)
            if text is None:
                return {}
            counts = parse_card_counts(text, CARD_REQUEST_ANNOTATION, alternatives=True)
            for key in counts:
                conflict = alternatives_conflict(parse_alternatives(key), self.card_resources)
                if conflict is not None:
                    raise CardError(f"{CARD_REQUEST_ANNOTATION}: {conflict}")
            return counts
        counts: dict[str, float] = {}
        for task in sorted(live, key=_task_rank)[:max(job.min_available, 1)]:
            cards = self._task(task)
            if not cards.uses_cards or cards.error is not None:
                continue  # a pod that will not be placed needs nothing
            if task.node_name:  # placed: its node's card (none on a node without cards)
                key = self._card_on(cards, task.node_name)
            else:
                key = join_alternatives(cards.candidates)
            if key:
                counts[key] = counts.get(key, 0.0) + cards.amount
        return counts

    def _quota_view(self, minimum: Resource) -> Resource:
        """The minimum as the queue counts it: no cpu or memory for a job that asks for
        cards when card pods are unlimited on them."""
        if self.unlimited and any(v >= MIN_RESOURCE for v in minimum.scalars.values()):
            return Resource(0.0, 0.0, minimum.scalars)
        return minimum

    # ================================================================ enqueue

    @hookimpl
    def job_enqueueable(self, job: Job) -> Vote:
        queue = self.session.queues.get(job.queue)
        attr = self.queues.get(job.queue)
        if queue is None or attr is None:
            return Reject(f"queue {job.queue} not found")
        where = self._job_object(job)
        if not queue.is_open():
            return Reject(self._warn(where, CLOSED_REASON, f"Queue <{queue.name}> is "
                                     f"{queue.state}: it admits no new jobs"))
        if job.bare:
            # A pod without a group is admitted here or never: say what is wrong with
            # its card name now (a group's pods are refused one by one at allocate).
            for task in job.tasks.values():
                error = self._task(task).error
                if error is not None:
                    return Reject(self._warn(where, CARD_NAME_REASON, error))
        minimum, error = self._minimum(job)
        if error is not None:
            return Reject(self._warn(where, CARD_REQUEST_REASON, error))
        failures = self._enqueue_failures(attr, self._quota_view(minimum))
        if self.overcommit > 0:
            failures += self._overcommit_failures(queue.name, minimum)
        if not failures:
            return PERMIT
        return Reject("; ".join(self._warn(where, reason, message)
                                for reason, message in failures))

    @hookimpl
    def job_enqueued(self, job: Job) -> None:
        attr = self.queues.get(job.queue)
        if attr is None:
            return
        minimum = self._minimum(job)[0]
        attr.inqueue.add(self._quota_view(minimum))
        self.cluster_inqueue.add(minimum)

    def _enqueue_failures(self, attr: QueueCards, minimum: Resource) -> list[tuple[str, str]]:
        """minimum + allocated + inqueue - elastic must fit the capability, on cpu,
        memory and every card the job asks for; (event reason, message) per failure."""
        failures = []
        cap = attr.capability
        for what in ("cpu", "memory"):
            asked = minimum.get(what)
            total = asked + attr.allocated.get(what) + attr.inqueue.get(what) \
                - attr.elastic.get(what)
            if asked > 0 and _over(total, cap.get(what)):
                failures.append((_reason_for(what), _quota_message(
                    attr.name, what, asked, total, cap.get(what))))
        for key in sorted(minimum.scalars):
            asked = minimum.scalars[key]
            if asked < MIN_RESOURCE:
                continue
            cards = key.split(SEPARATOR)
            held = sum(attr.allocated.scalars.get(c, 0.0) - attr.elastic.scalars.get(c, 0.0)
                       for c in cards)
            total = asked + held + _admitted(attr.inqueue, cards)
            limit = sum(attr.quota(c) for c in cards)
            if _over(total, limit):
                failures.append((CARD_REASON, _quota_message(attr.name, key, asked, total,
                                                            limit)))
        return failures

    def _overcommit_failures(self, queue: str, minimum: Resource) -> list[tuple[str, str]]:
        """What the cluster has allocated and admitted, with the job, must stay within
        its total times overCommitFactor on what the job asks for."""
        failures = []
        factor = self.overcommit
        used, admitted = self.cluster_allocated, self.cluster_inqueue
        for what in ("cpu", "memory"):
            asked = minimum.get(what)
            total = asked + used.get(what) + admitted.get(what)
            limit = self.total.get(what) * factor
            if asked > 0 and _over(total, limit):
                failures.append((CLUSTER_REASON, _cluster_message(queue, what, asked, total,
                                                                  limit, factor)))
        for key in sorted(minimum.scalars):
            asked = minimum.scalars[key]
            cards = key.split(SEPARATOR)
            total = asked + sum(used.scalars.get(c, 0.0) for c in cards) \
                + _admitted(admitted, cards)
            limit = sum(self.total.scalars.get(c, 0.0) for c in cards) * factor
            if asked >= MIN_RESOURCE and _over(total, limit):
                failures.append((CLUSTER_REASON, _cluster_message(queue, key, asked, total,
                                                                  limit, factor)))
        return failures

    def _job_object(self, job: Job) -> str:
        """Where a job's events go: its PodGroup, or the pod of a job without one."""
        if job.bare and job.tasks:
            return f"Pod/{next(iter(job.tasks.values())).key}"
        return f"PodGroup/{job.uid}"

    # ================================================================ allocate

    @hookimpl
    def queue_order(self, left: Queue, right: Queue) -> int:
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        return 0

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
        if not queue.is_open():
            return self._warn(where, CLOSED_REASON, f"Queue <{queue.name}> is {queue.state}:"
                              f" it takes nothing new for {task.key}")
        attr = self.queues.get(queue.name)
        if attr is None:
            return None
        failures = self._task_failures(attr, task, self._task(task).candidates)
        if not failures:
            return None
        return "; ".join(self._warn(where, reason, message) for reason, message in failures)

    def _task_failures(self, attr: QueueCards, task: Task,
                       options: tuple[str, ...]) -> list[tuple[str, str]]:
        """allocated + request(task) must fit the capability on cpu and memory, and on
        one of the cards in `options` (those the task accepts, or the one of its node;
        none when it is charged no card)."""
        cards = self._task(task)
        if cards.error is not None:
            return [(CARD_NAME_REASON, cards.error)]
        failures = []
        if not (self.unlimited and cards.uses_cards):
            for what in ("cpu", "memory"):
                asked = task.resreq.get(what)
                total = attr.allocated.get(what) + asked
                if asked > 0 and _over(total, attr.capability.get(what)):
                    failures.append((_reason_for(what), _quota_message(
                        attr.name, what, asked, total, attr.capability.get(what))))
        if not cards.uses_cards or not options:
            return failures
        if not any(not _over(attr.allocated.scalars.get(c, 0.0) + cards.amount, attr.quota(c))
                   for c in options):
            for c in options:
                total = attr.allocated.scalars.get(c, 0.0) + cards.amount
                failures.append((CARD_REASON, _quota_message(
                    attr.name, c, cards.amount, total, attr.quota(c))))
        return failures

    # ================================================================ nodes

    @hookimpl
    def predicate(self, task: Task, node: Node) -> Unfit | None:
        cards = self._tasks.get(task.uid) or self._task(task)
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
        cards = self._tasks.get(task.uid) or self._task(task)
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
        """The refusal of a node whose card the pod does not accept (built once)."""
        unfit = self._unlisted_unfit.get(card)
        if unfit is None:
            unfit = self._unlisted_unfit[card] = Unfit(
                f"node(s) had card {card}, which the pod does not accept")
        return unfit

    @staticmethod
    def _quota_used_up(attr: QueueCards, card: str) -> Unfit:
        """The refusal of a node whose card the queue has no quota left for (built once
        per queue and card)."""
        unfit = attr.quota_unfit.get(card)
        if unfit is None:
            unfit = attr.quota_unfit[card] = Unfit(
                f"node(s) had card {card}, whose quota in the pod's queue is used up")
        return unfit

    @hookimpl
    def node_order(self, task: Task, node: Node) -> float:
        cards = self._tasks.get(task.uid) or self._task(task)
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
        attr = self._task(task).queue
        if attr is None:
            return None
        failures: list[tuple[str, str]] = []
        if task.status & PLACING:
            card = self._card_on(self._task(task), task.node_name)
            failures = self._task_failures(attr, task, (card,) if card else ())
        charge = self._charge(task)
        attr.allocated.add(charge)
        self.cluster_allocated.add(self._cluster_charge(task, charge))
        if not failures:
            return None
        return "; ".join(self._warn(f"Pod/{task.key}", reason, message)
                         for reason, message in failures)

    @hookimpl
    def deallocate_event(self, task: Task) -> None:
        attr = self._task(task).queue
        if attr is None:
            return
        charge = self._charge(task)
        attr.allocated.sub(charge)
        self.cluster_allocated.sub(self._cluster_charge(task, charge))

    # ================================================================ tidal reclaim

    def service_type(self, task: Task) -> str:
        """inference, training or unknown: the job's `volcano.sh/service.type`, else the
        type the conf maps the pod's owner kind to."""
        job = self.session.jobs.get(task.job_id)
        declared = job.annotations.get(SERVICE_TYPE_ANNOTATION) if job is not None else None
        if declared is not None and declared.strip():
            kind = declared.strip().lower()
        else:
            kind = self.owner_types.get(task.pod.owner_kind, "")
        return kind if kind in (INFERENCE, TRAINING) else UNKNOWN

    @hookimpl
    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        """Training reclaims from nobody; others take training tasks only."""
        if self.service_type(reclaimer) == TRAINING:
            return []
        return [task for task in candidates if self.service_type(task) == TRAINING]

    # ================================================================ helpers

    def _warn(self, obj: str, reason: str, message: str) -> str:
        """Record a Warning event (once per session) and return its message."""
        if (obj, message) not in self._warned:
            self._warned.add((obj, message))
            self.session.event(obj, "Warning", reason, message)
        return message


def _owed(minimum: Resource, held: Resource) -> Resource:
    """What an admitted job still has to claim of its minimum: per dimension, the part
    its placed tasks do not cover (an `A|B` key is covered by A and B)."""
    owed = Resource(max(minimum.cpu - held.cpu, 0.0), max(minimum.memory - held.memory, 0.0))
    for key, amount in minimum.scalars.items():
        covered = sum(held.scalars.get(c, 0.0) for c in key.split(SEPARATOR))
        if amount - covered > 0:
            owed.scalars[key] = amount - covered
    return owed


def _admitted(inqueue: Resource, cards: list[str]) -> float:
    """What admitted jobs hold for any of `cards` (an `A|B` key counts in full against
    A and against B: a job admitted for either may still take either)."""
    wanted = set(cards)
    return sum(amount for key, amount in inqueue.scalars.items()
               if wanted.intersection(key.split(SEPARATOR)))


def _cluster_message(queue: str, what: str, asked: float, total: float, limit: float,
                     factor: float) -> str:
    unit = " Mi" if what == "memory" else ""
    scale = MIB if what == "memory" else 1.0
    name = "CPU" if what == "cpu" else what
    return (f"Cluster has insufficient <{name}> for queue <{queue}>: requested "
            f"<{_number(asked / scale)}{unit}>, total would be <{_number(total / scale)}{unit}>"
            f", but the cluster holds <{_number(limit / scale)}{unit}> with overCommitFactor "
            f"{_number(factor)}")


