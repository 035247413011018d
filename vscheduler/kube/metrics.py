"""Prometheus metrics and `/healthz`, on the daemon's `--listen-address`.

Metric names are Volcano's scheduler's (`volcano_...`, durations in milliseconds) where
Volcano has one, and the seeds' for what they ask (`podgroup_*`). `/healthz` answers
200 while scheduling cycles keep running (a loop stuck for ten periods is unhealthy).
prometheus_client's own server answers every path with the metrics, so both are
served by a small handler of our own.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from vscheduler.framework.session import SessionResult
from vscheduler.resources import CPU, MEMORY

__all__ = ["Metrics", "serve"]

_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.e2e = Histogram("volcano_e2e_scheduling_latency_milliseconds",
                             "Time of one scheduling cycle (open to close)", buckets=_MS,
                             registry=r)
        self.action = Histogram("volcano_action_scheduling_latency_milliseconds",
                                "Time of one action in a cycle", ["action"], buckets=_MS,
                                registry=r)
        self.binds = Counter("volcano_pod_bind_total", "Binds decided", registry=r)
        self.evictions = Counter("volcano_eviction_total", "Evictions decided", ["action"],
                                 registry=r)
        self.pending = Gauge("volcano_unschedule_task_count",
                             "Pods of ours waiting after the last cycle", registry=r)
        self.waiting = Gauge("podgroup_waiting_pods",
                             "Pods of a PodGroup waiting after the last cycle",
                             ["namespace", "podgroup"], registry=r)
        self.scheduled = Histogram("podgroup_scheduling_duration_seconds",
                                   "From a PodGroup's creation to its pods being bound",
                                   buckets=(1, 5, 10, 30, 60, 300, 600, 1800, 3600),
                                   registry=r)
        self.timeouts = Counter("podgroup_scheduling_timeout_total",
                                "PodGroups that passed scheduleTimeoutSeconds", registry=r)
        # PodGroups counted: a late watch event can bring back a status written before
        # the timeout, and the next session would report it again.
        self._timed_out: set[str] = set()
        self.queue_cpu = Gauge("volcano_queue_allocated_milli_cpu",
                               "CPU allocated to a queue", ["queue_name"], registry=r)
        self.queue_memory = Gauge("volcano_queue_allocated_memory_bytes",
                                  "Memory allocated to a queue", ["queue_name"], registry=r)
        self.queue_scalar = Gauge("volcano_queue_allocated_scalar_resources",
                                  "Other resources allocated to a queue (milli units)",
                                  ["queue_name", "resource"], registry=r)
        self.last_cycle = time.monotonic()

    def cycle(self, timings: dict[str, float], result: SessionResult | None,
              created: dict[str, float] | None = None) -> None:
        """Record one cycle: its timings, what it decided and what still waits."""
        self.last_cycle = time.monotonic()
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
        self.waiting.clear()
        for job, (_, pods) in result.pending_jobs.items():
            namespace, _, name = job.partition("/")
            self.waiting.labels(namespace, name).set(len(pods))
        now = time.time()
        for stamp in (created or {}).values():
            self.scheduled.observe(max(now - stamp, 0.0))
        for queue, allocated in result.queues.items():
            self.queue_cpu.labels(queue).set(allocated.get(CPU))
            self.queue_memory.labels(queue).set(allocated.get(MEMORY))
            for name, amount in allocated.scalars.items():
                self.queue_scalar.labels(queue, name).set(amount)

    def healthy(self, period: float) -> bool:
        return time.monotonic() - self.last_cycle < max(10 * period, 10.0)


def _address(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    try:
        return host or "0.0.0.0", int(port)
    except ValueError:
        raise ValueError(f"--listen-address {listen!r} is not host:port") from None


def serve(metrics: Metrics, listen: str, period: float, *, enable_metrics: bool = True,
          enable_healthz: bool = True) -> ThreadingHTTPServer:
    """Serve `/metrics` and `/healthz` in a thread; the server (its port, for tests)."""

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
