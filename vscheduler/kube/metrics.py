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
from vscheduler.resources import PODS, Resource

if TYPE_CHECKING:
    from vscheduler.cache import Cache

__all__ = ["MetricInfo", "Metrics", "markdown_table", "serve"]

_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
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
        quotas: Series = {}
        for queue in queues:
            text = queue.annotations.get(CARD_QUOTA_ANNOTATION)
            if text is None:
                continue
            try:  # (a malformed quota is the capacity-card plugin's Warning event)
                counts = parse_card_counts(text, f"Queue {queue.name}")
            except CardError:
                continue
            quotas.update({(queue.name, card): amount / _MILLI
                           for card, amount in counts.items()})
        self._show(self.card_quota, quotas)

    def healthy(self, period: float) -> bool:
        return time.monotonic() - self.last_cycle < max(10 * period, 10.0)


def _scalar_series(queues: Iterable[tuple[str, Resource]]) -> Series:
    return {(queue, name): _whole(name, amount)
            for queue, resource in queues for name, amount in resource.scalars.items()}


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
