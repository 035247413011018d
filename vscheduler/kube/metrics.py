"""Prometheus metrics and `/healthz`, on the daemon's `--listen-address`.

Names are Volcano's scheduler's (`volcano_...`) where Volcano has the metric, the seeds'
where they ask for one (`podgroup_*`), and `vscheduler_...` for the rest. Units follow
Prometheus' conventions (seconds, bytes, whole devices, `_total` counters) except where a
Volcano name says otherwise (`..._milliseconds`, `..._milli_cpu`): dashboards written for
Volcano then read the same numbers. Every HELP text ends with "Unit: ...", and
`markdown_table()` lists every metric for docs/metrics.md (a test keeps the two equal).

Scalar resources other than pods are milli units inside the scheduler (`resources.py`);
they are exported in whole units (one GPU is 1, not 1000; hugepages and ephemeral storage
in bytes). Volcano exports them in milli units: that is the one place where numbers differ
from Volcano's under the same name.

A pod without a PodGroup is a job of one built in memory (ARCHITECTURE.md, Standalone):
it appears in the totals (`volcano_unschedule_task_count`, `volcano_unschedule_job_count`,
the oldest pending age) but never in `podgroup_*` series, which name real PodGroups only.

The seed's `elastic_gpu_*` metrics (seed 000) count GPUs by queue, beside Volcano's names:

- `elastic_gpu_preemptions_total{queue,strategy,action}`: evictions decided of pods that
  request at least one GPU, by the victim's queue, the eviction strategy that chose the
  victim (`none` when no strategy did) and the action (reclaim, preempt).
- `elastic_gpu_allocations_total{queue}`: binds decided of pods that request at least
  one GPU. Both count decisions, as `volcano_pod_bind_total` does: a bind the API server
  refuses and the next session decides again counts twice. Their ratio over a window is
  the seed's preemption rate.
- `elastic_gpu_used{queue,card}` and `elastic_gpu_quota{queue,card}`: GPUs placed for
  good (pipelined pods and a gang's uncommitted allocations not counted) and the limit
  on them. Where the capacity-card plugin runs, a queue it reports is counted by card
  model (`card` is e.g. `NVIDIA-H200`, the quota its `volcano.sh/card.quota`
  annotation); elsewhere by GPU resource name (`card` is e.g. `nvidia.com/gpu`, the
  quota its `spec.capability` of that resource). The annotation is read only by that
  plugin, so without it a queue's quota is its capability even if it is annotated.
  `used` has a series, 0 if need be, for every card or resource the queue has a quota
  of, so that `used / quota` is defined for every limited queue; a queue with no quota
  of a card has no quota series for it (unbounded, or, where capacity-card reports the
  queue, none of that card: see docs/metrics.md).
- `elastic_gpu_wait_seconds{queue}`: for each GPU pod bound, the seconds from the later
  of its creation and its PodGroup's creation to the session that bound it: the time
  the scheduler could have placed it (a pod created before its PodGroup cannot be
  scheduled until the group exists, and `podgroup_scheduling_duration_seconds` also
  counts from the group). Pods without a creation time are not observed.

`/healthz` answers 200 while scheduling cycles keep running (a loop stuck for ten periods
is unhealthy). prometheus_client's own server answers every path with the metrics, so
both are served by a small handler of our own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from vscheduler.cards import CARD_QUOTA_ANNOTATION, CardError, parse_card_counts
from vscheduler.framework.results import SessionResult
from vscheduler.model import is_bare_job
from vscheduler.resources import PODS, Resource, is_gpu

if TYPE_CHECKING:
    from vscheduler.cache import Cache
    from vscheduler.model import Queue, Task

__all__ = ["MetricInfo", "Metrics", "markdown_table", "serve"]

_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
# A GPU pod's wait: seconds for an idle cluster, hours for a training gang that waits
# for a queue's quota or for a reclaim to finish.
_WAIT = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400)
# The strategy label of an eviction no strategy chose.
NO_STRATEGY = "none"
# Scalar resources are milli units inside the scheduler, pods excepted (resources.py).
_MILLI = 1000.0

Series = dict[tuple[str, ...], float]


class MetricInfo(NamedTuple):
    """What docs/metrics.md says of one metric."""

    name: str
    kind: str  # counter, gauge, histogram
    labels: tuple[str, ...]
    unit: str
    meaning: str


def _whole(resource: str, amount: float) -> float:
    """A scalar resource in whole units (pods already are)."""
    return amount if resource == PODS else amount / _MILLI


class Metrics:
    """Every metric of the daemon, in its own registry (tests build several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.described: list[MetricInfo] = []
        # Labelled gauges that show exactly the current series: what each showed last.
        self._shown: dict[Gauge, set[tuple[str, ...]]] = {}

        # ------------------------------------------------------------ cycles
        self.e2e = self._histogram(
            "volcano_e2e_scheduling_latency_milliseconds", (), "milliseconds",
            "Time of one scheduling session, from the cache snapshot to its close",
            buckets=_MS)
        self.action = self._histogram(
            "volcano_action_scheduling_latency_milliseconds", ("action",), "milliseconds",
            "Time of one action in a session", buckets=_MS)
        self.last_cycle_time = self._gauge(
            "vscheduler_last_cycle_timestamp_seconds", (), "seconds since the Unix epoch",
            "When the leader last ended a scheduling cycle: a session, or the check that "
            "found nothing to decide (0 on a standby)")
        self.period = self._gauge(
            "vscheduler_schedule_period_seconds", (), "seconds",
            "The --schedule-period, the pause between two cycles")
        self.is_leader = self._gauge(
            "vscheduler_is_leader", (), "boolean (1 or 0)",
            "1 while this replica schedules (it holds the Lease, or leader election is "
            "off), 0 on a standby")
        # ------------------------------------------------------------ decisions
        self.binds = self._counter(
            "volcano_pod_bind_total", (), "pods", "Binds decided")
        self.evictions = self._counter(
            "volcano_eviction_total", ("action",), "pods",
            "Evictions decided, by the action that decided them")
        self.api_errors = self._counter(
            "vscheduler_api_errors_total", ("operation",), "requests",
            "Binds and evictions that the API server refused or that failed (operation "
            "bind or evict); the pod waits, or runs, again")
        # ------------------------------------------------------------ waiting
        self.pending = self._gauge(
            "volcano_unschedule_task_count", (), "pods",
            "Pods of ours waiting after the last session")
        self.pending_jobs = self._gauge(
            "volcano_unschedule_job_count", (), "jobs",
            "Jobs with pods waiting after the last session (a pod without a PodGroup is "
            "a job of one)")
        self.oldest_pending = self._gauge(
            "vscheduler_oldest_pending_pod_age_seconds", (), "seconds",
            "Age (since creation) of the oldest pod of ours waiting after the last "
            "session; 0 when none waits")
        self.waiting = self._gauge(
            "podgroup_waiting_pods", ("namespace", "podgroup"), "pods",
            "Pods of a PodGroup waiting after the last session (PodGroups only: pods "
            "without one are counted in volcano_unschedule_task_count)")
        self.scheduled = self._histogram(
            "podgroup_scheduling_duration_seconds", (), "seconds",
            "From a PodGroup's creation to a session binding its pods",
            buckets=(1, 5, 10, 30, 60, 300, 600, 1800, 3600))
        self.timeouts = self._counter(
            "podgroup_scheduling_timeout_total", (), "PodGroups",
            "PodGroups given up after their scheduleTimeoutSeconds")
        # PodGroups counted: a late watch event can bring back a status written before
        # the timeout, and the next session would report it again.
        self._timed_out: set[str] = set()
        # ------------------------------------------------------------ queues
        self.queue_gauges: dict[str, tuple[Gauge, Gauge, Gauge]] = {}
        for figure, source in (("allocated", "what its jobs' placed pods hold"),
                               ("deserved", "its spec.deserved"),
                               ("capacity", "its spec.capability (no series: unlimited)")):
            self.queue_gauges[figure] = (
                self._gauge(f"volcano_queue_{figure}_milli_cpu", ("queue_name",),
                            "millicores (1 core = 1000)", f"CPU of a queue: {source}"),
                self._gauge(f"volcano_queue_{figure}_memory_bytes", ("queue_name",),
                            "bytes", f"Memory of a queue: {source}"),
                self._gauge(f"volcano_queue_{figure}_scalar_resources",
                            ("queue_name", "resource"),
                            "whole units of the resource (devices, pods, bytes)",
                            f"Other resources of a queue: {source}"))
        self.cards = self._gauge(
            "vscheduler_queue_card_allocated", ("queue_name", "card"), "cards",
            "Cards of a model that a queue's placed pods hold (capacity-card plugin; "
            "sub-cards counted as a fraction)")
        self.card_quota = self._gauge(
            "vscheduler_queue_card_quota", ("queue_name", "card"), "cards",
            "A queue's quota of a card model (its volcano.sh/card.quota annotation)")
        # ------------------------------------------------------------ GPUs (seed 000)
        self.gpu_preemptions = self._counter(
            "elastic_gpu_preemptions_total", ("queue", "strategy", "action"), "pods",
            "Evictions decided of pods that request at least one GPU, by the victim's "
            f"queue, the eviction strategy that chose it (\"{NO_STRATEGY}\" when no "
            "strategy did) and the action")
        self.gpu_allocations = self._counter(
            "elastic_gpu_allocations_total", ("queue",), "pods",
            "Binds decided of pods that request at least one GPU, by their queue")
        self.gpu_used = self._gauge(
            "elastic_gpu_used", ("queue", "card"), "GPUs (whole devices)",
            "GPUs a queue's pods placed for good hold: by card model where the "
            "capacity-card plugin reports the queue, else by GPU resource name; 0 for a "
            "card or resource the queue has a quota of and does not use")
        self.gpu_quota = self._gauge(
            "elastic_gpu_quota", ("queue", "card"), "GPUs (whole devices)",
            "A queue's limit of GPUs: its volcano.sh/card.quota per card model where the "
            "capacity-card plugin reports the queue, else its spec.capability of each GPU "
            "resource (no series: unbounded)")
        self.gpu_wait = self._histogram(
            "elastic_gpu_wait_seconds", ("queue",), "seconds",
            "For each pod requesting a GPU that a session binds: from the later of its "
            "creation and its PodGroup's to that session",
            buckets=_WAIT)
        self.last_cycle = time.monotonic()

    # ---------------------------------------------------------------- declaring

    def _note(self, name: str, kind: str, labels: Sequence[str], unit: str,
              meaning: str) -> str:
        self.described.append(MetricInfo(name, kind, tuple(labels), unit, meaning))
        return f"{meaning}. Unit: {unit}."

    def _counter(self, name: str, labels: Sequence[str], unit: str, meaning: str) -> Counter:
        text = self._note(name, "counter", labels, unit, meaning)
        # (prometheus_client adds `_total` itself; the name is given without it)
        return Counter(name.removesuffix("_total"), text, labels, registry=self.registry)

    def _gauge(self, name: str, labels: Sequence[str], unit: str, meaning: str) -> Gauge:
        return Gauge(name, self._note(name, "gauge", labels, unit, meaning), labels,
                     registry=self.registry)

    def _histogram(self, name: str, labels: Sequence[str], unit: str, meaning: str, *,
                   buckets: Sequence[float]) -> Histogram:
        return Histogram(name, self._note(name, "histogram", labels, unit, meaning), labels,
                         buckets=buckets, registry=self.registry)

    def _show(self, gauge: Gauge, series: Series) -> None:
        """Set a labelled gauge to exactly these series. A queue deleted or a PodGroup no
        longer waiting loses its series instead of keeping a stale value; new values are
        set before old series go, so a scrape in between never sees a gap."""
        for labels, value in series.items():
            gauge.labels(*labels).set(value)
        for labels in self._shown.get(gauge, set()) - series.keys():
            gauge.remove(*labels)
        self._shown[gauge] = set(series)

    # ---------------------------------------------------------------- recording

    def cycle(self, timings: dict[str, float], result: SessionResult | None,
              cache: Cache | None = None) -> None:
        """Record one cycle of the leader: its timings, what it decided and what still
        waits. The cache tells which waiting jobs are PodGroups, pods' ages and the
        queues' specs; without it (tests of counting alone) those figures are left out."""
        self.last_cycle = time.monotonic()
        self.last_cycle_time.set(time.time())
        if result is None:  # nothing to do this time
            return
        self.e2e.observe(sum(timings.values()) * 1000)
        for name, seconds in timings.items():
            if name not in ("snapshot", "open", "close"):
                self.action.labels(name).observe(seconds * 1000)
        self.binds.inc(len(result.binds))
        for uid in result.timeouts:
            if uid not in self._timed_out:
                self._timed_out.add(uid)
                self.timeouts.inc()
        for eviction in result.evictions:
            self.evictions.labels(eviction.action).inc()
        self.pending.set(len(result.pending))
        self.pending_jobs.set(len(result.pending_jobs))
        self._queues(result)
        if cache is not None:
            self._from_cache(result, cache)

    def _queues(self, result: SessionResult) -> None:
        cpu, memory, scalars = self.queue_gauges["allocated"]
        self._show(cpu, {(q,): r.cpu for q, r in result.queues.items()})
        self._show(memory, {(q,): r.memory for q, r in result.queues.items()})
        self._show(scalars, _scalar_series(result.queues.items()))
        self._show(self.cards, {(queue, card): count
                                for queue, counts in result.queue_cards.items()
                                for card, count in counts.items()})

    def _from_cache(self, result: SessionResult, cache: Cache) -> None:
        now = time.time()
        # Counted pod by pod from the cache's own record of each pod's job: a pod
        # without a PodGroup is a job of one named after the pod, not a PodGroup.
        waiting: Series = {}
        oldest = 0.0
        for key in result.pending:
            task = cache.tasks.get(key)
            if task is None:
                continue
            if not is_bare_job(task.job_id):
                namespace, _, name = task.job_id.partition("/")
                waiting[namespace, name] = waiting.get((namespace, name), 0) + 1
            if task.pod.creation > 0:  # (0: no creationTimestamp to count from)
                oldest = max(oldest, now - task.pod.creation)
        self._show(self.waiting, waiting)
        self.oldest_pending.set(oldest)
        created: dict[str, float] = {}  # a PodGroup bound in this session, once
        for key in result.binds:
            task = cache.tasks.get(key)
            job = cache.jobs.get(task.job_id) if task is not None else None
            if job is not None and not job.bare and job.creation > 0:
                created[job.uid] = job.creation
        for stamp in created.values():
            self.scheduled.observe(max(now - stamp, 0.0))
        queues = list(cache.queues.values())
        for figure, given in (("deserved", {q.name: q.deserved for q in queues}),
                              ("capacity", {q.name: q.capability for q in queues})):
            specs = {name: r for name, r in given.items() if r is not None}
            cpu, memory, scalars = self.queue_gauges[figure]
            # (0 or missing cpu or memory in a spec says nothing, or no limit: no series)
            self._show(cpu, {(q,): r.cpu for q, r in specs.items() if r.cpu > 0})
            self._show(memory, {(q,): r.memory for q, r in specs.items() if r.memory > 0})
            self._show(scalars, _scalar_series(specs.items()))
        self._show(self.card_quota, {(queue.name, card): amount for queue in queues
                                     for card, amount in _card_quota(queue).items()})
        self._gpus(result, cache, now)

    # ---------------------------------------------------------------- GPUs

    def _gpus(self, result: SessionResult, cache: Cache, now: float) -> None:
        """The seed's elastic_gpu_* figures (module docstring): pods are found in the
        cache, which still holds the victims and the bound pods of the session."""
        for eviction in result.evictions:
            task = cache.tasks.get(eviction.task)
            if task is None or not _asks_gpu(task):
                continue
            queue = eviction.queue or _queue_of(task, cache)
            self.gpu_preemptions.labels(queue, eviction.strategy or NO_STRATEGY,
                                        eviction.action).inc()
        for key in result.binds:
            task = cache.tasks.get(key)
            if task is None or not _asks_gpu(task):
                continue
            queue = _queue_of(task, cache)
            self.gpu_allocations.labels(queue).inc()
            job = cache.jobs.get(task.job_id)
            since = task.pod.creation
            if job is not None and not job.bare:
                since = max(since, job.creation)
            if task.pod.creation > 0:  # (0: no creationTimestamp to count from)
                self.gpu_wait.labels(queue).observe(max(now - since, 0.0))
        used: Series = {}
        quota: Series = {}
        for name, allocated in result.queues.items():
            cards = result.queue_cards.get(name)
            spec = cache.queues.get(name)
            limits = _card_quota(spec) if cards is not None else _gpu_capability(spec)
            if cards is None:
                cards = {resource: amount / _MILLI
                         for resource, amount in allocated.scalars.items()
                         if is_gpu(resource)}
            for card in cards.keys() | limits.keys():
                used[name, card] = cards.get(card, 0.0)
            quota.update({(name, card): amount for card, amount in limits.items()})
        self._show(self.gpu_used, used)
        self._show(self.gpu_quota, quota)

    def healthy(self, period: float) -> bool:
        return time.monotonic() - self.last_cycle < max(10 * period, 10.0)


def _scalar_series(queues: Iterable[tuple[str, Resource]]) -> Series:
    return {(queue, name): _whole(name, amount)
            for queue, resource in queues for name, amount in resource.scalars.items()}


def _asks_gpu(task: Task) -> bool:
    return any(amount > 0 and is_gpu(name) for name, amount in task.resreq.scalars.items())


def _queue_of(task: Task, cache: Cache) -> str:
    """A pod's queue as the scheduler reads it (the default queue filled in)."""
    job = cache.jobs.get(task.job_id)
    return job.queue if job is not None else cache.default_queue


def _card_quota(queue: Queue | None) -> dict[str, float]:
    """A queue's card quota in whole cards; none if it has no annotation or a malformed
    one (the capacity-card plugin's Warning event says so)."""
    text = queue.annotations.get(CARD_QUOTA_ANNOTATION) if queue is not None else None
    if text is None:
        return {}
    try:  # (the plugin reads the same text; its events report a malformed one)
        counts = parse_card_counts(text, f"Queue {queue.name}")
    except CardError:
        return {}
    return {card: amount / _MILLI for card, amount in counts.items()}


def _gpu_capability(queue: Queue | None) -> dict[str, float]:
    """A queue's spec.capability of each GPU resource, in whole GPUs. A scalar resource
    missing from it is unlimited; one given as 0 is a limit of 0 (`quota.capability_of`:
    only cpu and memory read 0 as no limit)."""
    if queue is None or queue.capability is None:
        return {}
    return {name: amount / _MILLI for name, amount in queue.capability.scalars.items()
            if is_gpu(name)}


def markdown_table(metrics: Metrics | None = None) -> str:
    """The table of docs/metrics.md: every metric, its type, labels, unit and meaning."""
    rows = ["| name | type | labels | unit | meaning |", "| --- | --- | --- | --- | --- |"]
    for info in sorted((metrics or Metrics()).described):
        labels = ", ".join(f"`{label}`" for label in info.labels) or "-"
        rows.append(f"| `{info.name}` | {info.kind} | {labels} | {info.unit} | "
                    f"{info.meaning} |")
    return "\n".join(rows) + "\n"


def _address(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    try:
        return host or "0.0.0.0", int(port)
    except ValueError:
        raise ValueError(f"--listen-address {listen!r} is not host:port") from None


def serve(metrics: Metrics, listen: str, period: float, *, enable_metrics: bool = True,
          enable_healthz: bool = True) -> ThreadingHTTPServer:
    """Serve `/metrics` and `/healthz` in a thread; the server (its port, for tests)."""
    metrics.period.set(period)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/metrics" and enable_metrics:
                body, status, kind = generate_latest(metrics.registry), 200, \
                    CONTENT_TYPE_LATEST
            elif self.path.split("?")[0] == "/healthz" and enable_healthz:
                ok = metrics.healthy(period)
                body, status, kind = (b"ok" if ok else b"stalled"), 200 if ok else 500, \
                    "text/plain"
            else:
                body, status, kind = b"not found", 404, "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(_address(listen), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
