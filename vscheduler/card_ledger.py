"""Card accounting for queue card quotas (seed 003): what each queue and each job holds
of each card model, and whether a queue may take more.

`vscheduler.cards` says which card a node offers and parses what users write; this
ledger adds up, per session:
- the cluster's total of cpu, memory and every card, and which resources are cards;
- per queue (`QueueCards`): its capability (cpu and memory from `spec.capability`, as
  `vscheduler.quota` reads it; the card quotas), what it holds (`allocated`), what its
  admitted jobs are still owed (`inqueue`) and what its jobs hold beyond their minimum
  (`elastic`);
- per task (`TaskCards`): the card resource it asks for and how much, the cards it
  accepts (`volcano.sh/card.name`, `A|B` in order of preference);
- per job (`JobCards`): what it holds, could give back and is still owed, and its cards
  placed for good: its part of its queue's sums, which are kept between sessions and
  brought up to date from the jobs that changed (`vscheduler.tally`); and, when asked,
  its minimum (cpu and memory of minResources; cards from its card request while it
  has no pods, else from its first minMember pods);
- the quota checks, each failure an (event reason, message) pair in seed 003's words:
  `Queue <q> has insufficient <CARD> quota: requested <5000>, total would be <5000>,
  but capability is <3000>` (milli units, memory in Mi).

A request for `A|B` is measured against the sum of the quotas of A and B (different
pods may land on different cards). Amounts are milli units (5 cards = 5000). The
capacity-card plugin owns the verdicts and the events; nothing here sends one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

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
from vscheduler.model import (
    ALLOCATED_STATUSES,
    PLACED_FOR_GOOD,
    Job,
    Node,
    Queue,
    Task,
    TaskStatus,
)
from vscheduler.quota import capability_of, holds_admission, owed, passes
from vscheduler.resources import CPU, INF, MEMORY, MIN_RESOURCE, Resource
from vscheduler.tally import Part, Tally

__all__ = ["CARD_NAME_REASON", "CARD_REASON", "CARD_REQUEST_REASON", "CLUSTER_REASON",
           "CPU_REASON", "MEMORY_REASON", "SUMS", "CardLedger", "Failure", "JobCards",
           "NodeCardIndex", "QueueCards", "TaskCards", "quota_message"]

S = TaskStatus
MILLI = 1000.0
MIB = 1024.0 * 1024.0
DONE = S.SUCCEEDED | S.FAILED
PLACING = S.ALLOCATED | S.PIPELINED
# What a queue's reported cards count: pods bound, being bound or running, never a
# gang's allocations that were not committed (they are still pending).

# Event reasons (Kubernetes Event `reason` field) of the failures below.
CPU_REASON = "InsufficientCPUQuota"
MEMORY_REASON = "InsufficientMemoryQuota"
CARD_REASON = "InsufficientScalarQuota"
CARD_NAME_REASON = "InvalidCardName"
CARD_REQUEST_REASON = "InvalidCardRequest"
CLUSTER_REASON = "InsufficientClusterResource"

Failure = tuple[str, str]  # (event reason, message)
_NOTHING: dict[str, str] = {}


# --------------------------------------------------------------------------- messages


def _number(value: float) -> str:
    """A number as the events print it: 4000, 1.5."""
    if not math.isfinite(value):
        return str(value)
    if abs(value - round(value)) < 1e-6:
        return str(round(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def quota_message(queue: str, what: str, requested: float, total: float,
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


def _quota_failure(queue: str, what: str, requested: float, total: float,
                   capability: float) -> Failure:
    reason = CPU_REASON if what == "cpu" else MEMORY_REASON if what == "memory" else CARD_REASON
    return reason, quota_message(queue, what, requested, total, capability)


def _cluster_failure(queue: str, what: str, asked: float, total: float, limit: float,
                     factor: float) -> Failure:
    unit = " Mi" if what == "memory" else ""
    scale = MIB if what == "memory" else 1.0
    name = "CPU" if what == "cpu" else what
    return CLUSTER_REASON, (
        f"Cluster has insufficient <{name}> for queue <{queue}>: requested "
        f"<{_number(asked / scale)}{unit}>, total would be <{_number(total / scale)}{unit}>"
        f", but the cluster holds <{_number(limit / scale)}{unit}> with overCommitFactor "
        f"{_number(factor)}")


# --------------------------------------------------------------------------- sums per key


def _covered(minimum: Resource, held: Resource) -> Resource:
    """`held` as `minimum`'s keys see it: an `A|B` key is covered by A and B together."""
    covered = Resource(held.cpu, held.memory)
    for key in minimum.scalars:
        covered.scalars[key] = sum(held.scalars.get(c, 0.0) for c in key.split(SEPARATOR))
    return covered


def _admitted(inqueue: Resource, names: list[str], cards: bool) -> float:
    """What admitted jobs hold for any of `names`: cpu or memory as it is; cards per key
    (an `A|B` key counts in full against A and against B: a job admitted for either may
    still take either)."""
    if not cards:
        return sum(inqueue.get(n) for n in names)
    wanted = set(names)
    return sum(amount for key, amount in inqueue.scalars.items()
               if wanted.intersection(key.split(SEPARATOR)))


def _task_rank(task: Task) -> tuple[int, float, str]:
    """The order in which a job's tasks count towards its minimum: higher priority, then
    older, then by name (deterministic; the session's task order is not set up yet when
    plugins open)."""
    return (-task.priority, task.pod.creation, task.key)


# --------------------------------------------------------------------------- records


class QueueCards:
    """What the ledger knows of one queue. `capability` holds cpu and memory (infinite
    when unlimited) and, as scalars, the card quotas."""

    __slots__ = ("allocated", "capability", "elastic", "inqueue", "name", "used_up")

    def __init__(self, queue: Queue, quota: dict[str, float]) -> None:
        self.name = queue.name
        capability = capability_of(queue)
        self.capability = Resource(capability.cpu if capability is not None else INF,
                                   capability.memory if capability is not None else INF,
                                   dict(quota))
        self.allocated = Resource()
        self.inqueue = Resource()
        self.elastic = Resource()
        # card -> the predicate's refusal once this queue's quota of it is used up
        # (built once, on the first refusal)
        self.used_up: dict[str, Unfit] = {}

    def quota(self, card: str) -> float:
        return self.capability.scalars.get(card, 0.0)

    def __repr__(self) -> str:
        return (f"QueueCards({self.name}: allocated {self.allocated}, inqueue "
                f"{self.inqueue}, elastic {self.elastic}, capability {self.capability})")


class TaskCards:
    """What the ledger reads of one task, once per session: the card resource it asks
    for and how much (milli), the cards it accepts (`candidates`), its queue, node-order
    scores for `A|B`, and why a malformed card annotation refuses every node."""

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
    what it is still owed of its minimum once admitted (None if not admitted, in the
    queue's and the cluster's view) and its cards placed for good (`cards`, milli units
    as scalars). Its part of the sums the ledger keeps (`part`)."""

    __slots__ = ("cards", "cluster_owed", "elastic", "held", "owed", "used")

    def __init__(self) -> None:
        self.held = Resource()
        self.used = Resource()
        self.elastic = Resource()
        self.owed: Resource | None = None
        self.cluster_owed: Resource | None = None
        self.cards = Resource()

    def part(self) -> tuple[Resource | None, ...]:
        """In the order of `SUMS`."""
        return (self.held, self.used, self.elastic, self.owed, self.cluster_owed, self.cards)


# The sums the ledger keeps per queue, by index in a job's part.
SUMS = ("held", "used", "elastic", "owed", "cluster_owed", "cards")
HELD, USED, ELASTIC, OWED, CLUSTER_OWED, CARDS = range(len(SUMS))
# What opens the kept sums: a session's `tally` with the ledger's name, token and width
# given, taking the function that gives a job's part.
TallyOpener = Callable[[Callable[[Job], Part]], Tally]


# --------------------------------------------------------------------------- ledger


class NodeCardIndex:
    """The nodes' cards: each node's (read once per node: see `Node.memo`), which
    resource names are cards, and the cluster's total. It follows from the nodes' specs
    alone, so sessions share it while those stay the same (`SessionView.keep`)."""

    def __init__(self, nodes: list[Node], memo_key: str) -> None:
        self.node_cards: dict[str, NodeCards | None] = {}
        # node -> its resource -> card map (empty for a node without cards), for the
        # per-task-per-node hooks
        self.node_resources: dict[str, dict[str, str]] = {}
        card_resources: dict[str, set[str]] = {}
        self.total = Resource()
        for node in nodes:
            memo = node.memo
            if memo_key in memo:
                cards = memo[memo_key]
            else:
                cards = memo[memo_key] = node_cards(node.labels, node.allocatable)
            self.node_cards[node.name] = cards
            self.node_resources[node.name] = cards.by_resource if cards else _NOTHING
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


class CardLedger:
    """One session's card accounts. `unlimited`: pods that ask for cards are neither
    limited nor counted on cpu and memory by their queue; `order_step`: the node-order
    score per place in an `A|B` list; `nodes`: the nodes' cards; `open_tally` opens the
    sums kept between sessions."""

    def __init__(self, nodes: NodeCardIndex, queues: Mapping[str, Queue],
                 jobs: Mapping[str, Job], *, unlimited: bool, order_step: float,
                 open_tally: TallyOpener) -> None:
        self.jobs = jobs
        self.unlimited = unlimited
        self.order_step = order_step
        # task uid -> its card facts, read on first use
        self._tasks: dict[str, TaskCards] = {}
        # (queue, card annotation, requests) -> the facts tasks so alike share, read-only:
        # most pods of a cluster repeat a few of them
        self._alike: dict[tuple[Any, ...], TaskCards] = {}
        self._minimums: dict[str, tuple[Resource, str | None]] = {}
        # (read-only: shared with other sessions)
        self.node_cards = nodes.node_cards
        self.node_resources = nodes.node_resources
        self.card_resources = nodes.card_resources
        self.resource_cards = nodes.resource_cards
        self.total = nodes.total
        # (queue, why its quota annotation cannot be used), for the plugin to warn
        self.quota_errors: list[tuple[str, str]] = []
        self.queues = {name: self._read_queue(queue) for name, queue in queues.items()}
        self.kept = open_tally(self._job_part)
        for name, attr in self.queues.items():
            attr.allocated = self.kept.sum(name, HELD)
            attr.elastic = self.kept.sum(name, ELASTIC)
            attr.inqueue = self.kept.sum(name, OWED)
        self.cluster_allocated = Resource()
        self.cluster_inqueue = Resource()
        for name in sorted(self.kept.sums):
            if name in self.queues:
                self.cluster_allocated.add(self.kept.sum(name, USED))
                self.cluster_inqueue.add(self.kept.sum(name, CLUSTER_OWED))

    # ---------------------------------------------------------------- opening

    def _read_queue(self, queue: Queue) -> QueueCards:
        quota: dict[str, float] = {}
        text = queue.annotations.get(CARD_QUOTA_ANNOTATION)
        if text is not None:
            try:
                quota = parse_card_counts(text, CARD_QUOTA_ANNOTATION)
            except CardError as err:
                self.quota_errors.append(
                    (queue.name, f"Queue <{queue.name}>: {err}; the queue gets no cards"))
        return QueueCards(queue, quota)

    def _job_part(self, job: Job) -> Part | None:
        """A job's part of its queue's sums (see `JobCards`); None for one that holds
        nothing and is owed nothing (most jobs of a queue that waits: each costs no
        part, and a queue's sums read the same without it)."""
        if not (job.count(ALLOCATED_STATUSES) or holds_admission(job)):
            return None
        return job.queue, self._job_cards(job).part()

    def _job_cards(self, job: Job) -> JobCards:
        """What `job` counts (`JobCards`), in one pass over its placed tasks: each task's
        charge (`charge`) summed in place, the cards of those placed for good beside
        (`_placed_cards`), and, when every live task is placed, the cards of its
        minimum (`minimum`). Run for every job of the cluster at the first open, so it
        makes no resource per task."""
        facts = JobCards()
        placed = sorted(job.tasks_in(ALLOCATED_STATUSES), key=_task_rank)
        admitted = holds_admission(job)
        if not (placed or admitted):
            return facts  # (holds nothing and is owed nothing: its minimum is not read)
        held, used, elastic = facts.held, facts.used, facts.elastic
        held_cards, used_cards, elastic_cards = held.scalars, used.scalars, elastic.scalars
        placed_cards = facts.cards.scalars
        spare_from = job.min_available
        # When every live task is placed, the minimum's cards (`_minimum_cards`) are
        # those of its first max(minMember, 1) placed tasks in this order: counted
        # here, not in a second sorted pass over the job.
        minimum_cards: dict[str, float] | None = None
        if placed and job.count(~DONE) == len(placed):
            minimum_cards = {}
        minimum_from = max(spare_from, 1)
        for index, task in enumerate(placed):
            cards = self.task(task)
            resreq = task.resreq
            used.cpu += resreq.cpu
            used.memory += resreq.memory
            if self.counts_cpu_memory(cards):
                held.cpu += resreq.cpu
                held.memory += resreq.memory
            card = self.card_on(cards, task.node_name)
            if minimum_cards is not None and index < minimum_from:
                if not task.node_name:
                    # (no node: it counts the cards it accepts, as `_minimum_cards`
                    # reads them)
                    minimum_cards = None
                elif card is not None and cards.error is None:
                    minimum_cards[card] = minimum_cards.get(card, 0.0) + cards.amount
            if card is None:
                continue
            amount = cards.amount
            held_cards[card] = held_cards.get(card, 0.0) + amount
            used_cards[card] = used_cards.get(card, 0.0) + amount
            if index >= spare_from:
                elastic_cards[card] = elastic_cards.get(card, 0.0) + amount
            if task.status & PLACED_FOR_GOOD:
                placed_cards[card] = placed_cards.get(card, 0.0) + amount
        need = self.minimum(job, minimum_cards)[0]
        minimum = self.quota_view(need)
        # What a job holds beyond its minimum could be given back: it does not count
        # against admitting others (cpu and memory: all of it for a job without
        # minResources, as in Volcano; cards: the tasks beyond minMember).
        elastic.cpu = max(held.cpu - minimum.cpu, 0.0)
        elastic.memory = max(held.memory - minimum.memory, 0.0)
        if admitted:
            facts.owed = owed(minimum, _covered(minimum, held))
            facts.cluster_owed = owed(need, _covered(need, used))
        return facts

    # ---------------------------------------------------------------- placed cards

    def queue_cards(self, changed: list[str]) -> dict[str, dict[str, float]]:
        """Each queue's cards placed for good, in whole cards: every card of its quota
        (0 if unused) and every card it uses; queues with neither are left out. The
        kept sums as the session opened, with the jobs this session changed (among
        `changed`) counted again."""
        used: dict[str, Resource] = {}
        for name in self.kept.sums:
            used[name] = self.kept.sum(name, CARDS)
        for uid in changed:
            job = self.jobs.get(uid)
            if job is None or not job.dirty:
                continue
            part = self.kept.parts.get(uid)
            if part is not None:
                used[part[0]].sub(self.kept.amount(uid, CARDS))
            counts = used.setdefault(job.queue, Resource())
            for card, amount in self._placed_cards(job).items():
                counts.scalars[card] = counts.scalars.get(card, 0.0) + amount
        out = {}
        for name, attr in self.queues.items():
            counts = {card: 0.0 for card in attr.capability.scalars}
            placed = used.get(name)
            if placed is not None:
                counts.update((card, amount / MILLI) for card, amount in placed.scalars.items()
                              if amount)
            if counts:
                out[name] = counts
        return out

    def _placed_cards(self, job: Job) -> dict[str, float]:
        """The cards a job's tasks placed for good take, per card, in milli units."""
        placed: dict[str, float] = {}
        for task in job.tasks_in(PLACED_FOR_GOOD):
            cards = self.task(task)
            card = self.card_on(cards, task.node_name)
            if card is not None:
                placed[card] = placed.get(card, 0.0) + cards.amount
        return placed

    # ---------------------------------------------------------------- tasks

    @property
    def task_facts(self) -> dict[str, TaskCards]:
        """Task uid -> card facts read so far, for the per-task-per-node hooks to read
        without a call (a miss is read with `task`)."""
        return self._tasks

    def task(self, task: Task) -> TaskCards:
        """The task's card facts, read once per session (and once for tasks alike, unless
        the annotation is malformed: the error names the pod)."""
        cards = self._tasks.get(task.uid)
        if cards is None:
            job = self.jobs.get(task.job_id)
            key = (job.queue if job is not None else None,
                   task.pod.annotations.get(CARD_NAME_ANNOTATION),
                   tuple(task.resreq.scalars.items()))
            cards = self._alike.get(key)
            if cards is None:
                cards = self._read_task(task)
                if cards.error is None:
                    self._alike[key] = cards
            self._tasks[task.uid] = cards
        return cards

    def _read_task(self, task: Task) -> TaskCards:
        cards = TaskCards()
        job = self.jobs.get(task.job_id)
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
            last = len(accepted) - 1
            cards.scores = {card: self.order_step * (last - i)
                            for i, card in enumerate(accepted)}

    def card_on(self, cards: TaskCards, node_name: str) -> str | None:
        """The card a task with these facts is charged on a node (None: no card)."""
        if cards.resource is None:
            return None
        node = self.node_cards.get(node_name)
        return node.by_resource.get(cards.resource) if node is not None else None

    def counts_cpu_memory(self, cards: TaskCards) -> bool:
        """Whether a task with these facts counts its cpu and memory in its queue's
        allocation (not when card pods are unlimited on them)."""
        return not (self.unlimited and cards.uses_cards)

    def charge(self, task: Task) -> Resource:
        """What a placed task counts in its queue's allocation: its node's card, and its
        cpu and memory unless card pods are unlimited on them."""
        cards = self.task(task)
        charge = Resource()
        if self.counts_cpu_memory(cards):
            charge.cpu, charge.memory = task.resreq.cpu, task.resreq.memory
        card = self.card_on(cards, task.node_name)
        if card is not None:
            charge.scalars[card] = cards.amount
        return charge

    @staticmethod
    def cluster_charge(task: Task, charge: Resource) -> Resource:
        """What a placed task uses of the cluster: its cards, and its cpu and memory
        whatever the queue counts of them."""
        return Resource(task.resreq.cpu, task.resreq.memory, charge.scalars)

    def place(self, task: Task) -> list[Failure]:
        """Count a task placed (or put back) on its node in its queue and the cluster.
        A placement (not the undoing of an eviction) that takes the queue past its
        capability is counted all the same; its failures say why it must be rolled
        back."""
        cards = self.task(task)
        attr = cards.queue
        if attr is None:
            return []
        failures: list[Failure] = []
        if task.status & PLACING:
            card = self.card_on(cards, task.node_name)
            failures = self.task_failures(attr, task, (card,) if card else ())
        charge = self.charge(task)
        attr.allocated.add(charge)
        self.cluster_allocated.add(self.cluster_charge(task, charge))
        return failures

    def unplace(self, task: Task) -> None:
        """Take a task off its queue's and the cluster's allocation."""
        attr = self.task(task).queue
        if attr is None:
            return
        charge = self.charge(task)
        attr.allocated.sub(charge)
        self.cluster_allocated.sub(self.cluster_charge(task, charge))

    def task_failures(self, attr: QueueCards, task: Task,
                      options: tuple[str, ...]) -> list[Failure]:
        """allocated + request(task) must fit the capability on cpu and memory, and on
        one of the cards in `options` (those the task accepts, or the one of its node;
        none when it is charged no card)."""
        cards = self.task(task)
        if cards.error is not None:
            return [(CARD_NAME_REASON, cards.error)]
        failures = []
        if self.counts_cpu_memory(cards):
            for what in ("cpu", "memory"):
                asked = task.resreq.get(what)
                total = attr.allocated.get(what) + asked
                if asked > 0 and passes(total, attr.capability.get(what)):
                    failures.append(_quota_failure(attr.name, what, asked, total,
                                                   attr.capability.get(what)))
        if not cards.uses_cards or not options:
            return failures
        allocated = attr.allocated.scalars
        if not any(not passes(allocated.get(c, 0.0) + cards.amount, attr.quota(c))
                   for c in options):
            for c in options:
                total = allocated.get(c, 0.0) + cards.amount
                failures.append(_quota_failure(attr.name, c, cards.amount, total,
                                               attr.quota(c)))
        return failures

    # ---------------------------------------------------------------- jobs

    def minimum(self, job: Job, cards: dict[str, float] | None = None
                ) -> tuple[Resource, str | None]:
        """What the job minimally needs: cpu and memory of minResources; cards from its
        card request annotation while it has no pods, else from its first minMember
        pods (a pod placed counts its node's card, one not placed the cards it accepts,
        as an `A|B` key). With why the card request cannot be used, if so (then no
        cards are counted). `cards`: those cards, counted by the caller as
        `_minimum_cards` would (not read when the minimum is known already)."""
        known = self._minimums.get(job.uid)
        if known is not None:
            return known
        minimum = Resource()
        if job.min_resources is not None:
            minimum.cpu, minimum.memory = job.min_resources.cpu, job.min_resources.memory
        error = None
        try:
            minimum.scalars = self._minimum_cards(job) if cards is None else cards
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
            cards = self.task(task)
            if not cards.uses_cards or cards.error is not None:
                continue  # a pod that will not be placed needs nothing
            if task.node_name:  # placed: its node's card (none on a node without cards)
                key = self.card_on(cards, task.node_name)
            else:
                key = join_alternatives(cards.candidates)
            if key:
                counts[key] = counts.get(key, 0.0) + cards.amount
        return counts

    def quota_view(self, minimum: Resource) -> Resource:
        """The minimum as the queue counts it: no cpu or memory for a job that asks for
        cards when card pods are unlimited on them."""
        if self.unlimited and any(v >= MIN_RESOURCE for v in minimum.scalars.values()):
            return Resource(0.0, 0.0, minimum.scalars)
        return minimum

    def admit(self, job: Job) -> None:
        """Count a job just admitted: its whole minimum is owed, in its queue and the
        cluster."""
        attr = self.queues.get(job.queue)
        if attr is None:
            return
        minimum = self.minimum(job)[0]
        attr.inqueue.add(self.quota_view(minimum))
        self.cluster_inqueue.add(minimum)

    def enqueue_failures(self, attr: QueueCards, minimum: Resource) -> list[Failure]:
        """minimum + allocated + inqueue - elastic must fit the capability, on cpu,
        memory and every card the job asks for."""
        allocated, inqueue, elastic = attr.allocated, attr.inqueue, attr.elastic

        def held(names: list[str], cards: bool) -> float:
            return (sum(allocated.get(n) - elastic.get(n) for n in names)
                    + _admitted(inqueue, names, cards))

        return [_quota_failure(attr.name, what, asked, total, limit)
                for what, asked, total, limit in _over_limits(
                    minimum, held, lambda names: sum(attr.capability.get(n) for n in names))]

    def cluster_failures(self, queue: str, minimum: Resource,
                         factor: float) -> list[Failure]:
        """What the cluster has allocated and admitted, with the job, must stay within
        its total times `factor` on what the job asks for (the same check as the
        queue's, against the cluster)."""
        used, admitted, cluster = self.cluster_allocated, self.cluster_inqueue, self.total

        def held(names: list[str], cards: bool) -> float:
            return sum(used.get(n) for n in names) + _admitted(admitted, names, cards)

        return [_cluster_failure(queue, what, asked, total, limit, factor)
                for what, asked, total, limit in _over_limits(
                    minimum, held, lambda names: sum(cluster.get(n) for n in names) * factor)]


def _over_limits(minimum: Resource, held: Callable[[list[str], bool], float],
                 limit: Callable[[list[str]], float]
                 ) -> Iterator[tuple[str, float, float, float]]:
    """(what, asked, total, limit) for each dimension `minimum` asks for (cpu, memory,
    then its card keys in order) where what it asks plus what is held passes the limit.
    `held` and `limit` take the names a dimension stands for (A and B for `A|B`) and
    whether they are cards."""
    for what in (CPU, MEMORY):
        asked = minimum.get(what)
        if asked > 0:
            total, cap = asked + held([what], False), limit([what])
            if passes(total, cap):
                yield what, asked, total, cap
    for key in sorted(minimum.scalars):
        asked = minimum.scalars[key]
        if asked >= MIN_RESOURCE:
            names = key.split(SEPARATOR)
            total, cap = asked + held(names, True), limit(names)
            if passes(total, cap):
                yield key, asked, total, cap
