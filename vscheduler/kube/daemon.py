"""The daemon's loop: watches feed the cache, sessions decide, writers tell the cluster.

Reflector threads put watch events on a queue; the loop is the only writer of the cache:
every cycle it applies what arrived (a malformed object becomes a Warning event), puts
back what the API server refused (a failed bind: the pod waits again), picks up a
changed conf file (a bad one is reported and the last good one kept), and runs one
scheduling cycle. Cycles do not overlap; the period counts from the end of one to the
start of the next, as Volcano's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

from kubernetes.client import ApiClient

from vscheduler.cache import Cache
from vscheduler.conf import ConfError, SchedulerConf, load_conf
from vscheduler.framework.placement import NodeSampling
from vscheduler.framework.results import Event, SessionResult
from vscheduler.ingest import refused
from vscheduler.kube.apply import KINDS, apply_event, read_event
from vscheduler.kube.discovery import ApiDiscovery
from vscheduler.kube.leader import LeaderElector
from vscheduler.kube.metrics import Metrics
from vscheduler.kube.reflector import OPTIONAL_KINDS, Reflector
from vscheduler.kube.writers import KubeWriter, RateLimiter
from vscheduler.logs import fields
from vscheduler.objects import BadObject, ParsedPod, metadata
from vscheduler.scheduler import Scheduler

__all__ = ["Daemon"]

log = logging.getLogger(__name__)


def release_free_memory() -> None:
    """Ask the C allocator to hand freed memory back to the system (glibc's
    `malloc_trim`); nothing where there is no such call."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is not None:
        trim(0)


class Daemon:
    def __init__(self, api: ApiClient, conf_path: str | None, *,
                 scheduler_names: Sequence[str] = ("vscheduler",),
                 default_queue: str = "default", period: float = 1.0, qps: float = 50.0,
                 burst: int = 100, dry_run: bool = False,
                 node_sampling: NodeSampling | None = None,
                 elector: LeaderElector | None = None,
                 conf: SchedulerConf | None = None) -> None:
        self.api = api
        self.elector = elector
        self.conf_path = conf_path
        self.period = period
        # (a bad conf at start is the caller's error; the command loads it first)
        self.conf = conf if conf is not None else load_conf(conf_path)
        self._conf_stamp = self._stamp()
        self.cache = Cache(tuple(scheduler_names), default_queue)
        # Asked once here (and again by the writer when a status write meets a 404):
        # which optional kinds are served, which CRDs have a status subresource.
        self.discovery = ApiDiscovery(api)
        self.writer = KubeWriter(api, RateLimiter(qps, burst),
                                 scheduler_name=scheduler_names[0], dry_run=dry_run,
                                 cache=self.cache, discovery=self.discovery)
        self.scheduler = Scheduler(self.cache, self.conf, binder=self.writer,
                                   evictor=self.writer, status=self.writer,
                                   events=self.writer, default_queue=default_queue,
                                   node_sampling=node_sampling)
        self.metrics = Metrics()
        # (kind, event type, object, what was read of it or the BadObject error): read
        # in the watch threads, beside the scheduling (a start lists every object); the
        # object itself is kept only where it is still needed (DELETED, an error). A
        # SimpleQueue: put and get take no lock and condition of their own, and at a
        # start 150,000 pods go through it while the watch threads and this one share
        # the interpreter.
        self.incoming: queue.SimpleQueue[tuple[str, str, dict | None, Any]] = \
            queue.SimpleQueue()
        self.stop = threading.Event()
        self.reflectors = [Reflector(api, kind, self._receive, self.stop) for kind in KINDS]
        self.reflectors += [Reflector(api, kind, self._receive, self.stop, resource=resource,
                                      optional=True)
                            for kind, resource in OPTIONAL_KINDS
                            if self.discovery.serves(*resource[:3])]
        self._threads: list[threading.Thread] = []

    # ---------------------------------------------------------------- feeding

    def _receive(self, kind: str, event_type: str, obj: dict) -> None:
        try:
            read: Any = read_event(kind, event_type, obj)
        except BadObject as err:
            read = err
        keep = event_type == "DELETED" or isinstance(read, BadObject)
        self.incoming.put((kind, event_type, obj if keep else None, read))

    def start_watches(self, synced_timeout: float = 60.0) -> bool:
        """Start the reflectors; whether every kind was listed within the timeout. A stop
        (SIGTERM) ends the wait: a reflector stopped before its first list never syncs.
        While they list, what they have read goes into the cache (`_drain`), as between
        sessions: this thread would otherwise wait, and at 150,000 pods filling the cache
        once all is read took 1.5 s after the listing."""
        for reflector in self.reflectors:
            thread = threading.Thread(target=reflector.run, name=f"watch-{reflector.kind}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        deadline = time.monotonic() + synced_timeout
        for reflector in self.reflectors:
            while not reflector.synced.wait(0.05):
                if self.stop.is_set() or time.monotonic() >= deadline:
                    return False
                self._drain()
        self._settle_listing()
        return True

    def _settle_listing(self) -> None:
        """Once every kind is listed: the objects read go into the cache, and what
        listing left behind (pages, parse temporaries) is collected and handed back to
        the system before the first session copies the cache: at 150,000 pods that
        keeps the peak a few MiB lower."""
        self._drain()
        gc.collect()
        release_free_memory()

    def _drain(self) -> None:
        while True:
            try:
                kind, event_type, obj, read = self.incoming.get_nowait()
            except queue.Empty:
                break
            try:
                if isinstance(read, BadObject):
                    raise read
                apply_event(self.cache, kind, event_type, obj, read)
                if kind == "Pod" and event_type == "DELETED":
                    namespace, name, _ = metadata(obj or {})
                    self.writer.forget_pod(f"{namespace}/{name}")
            except BadObject as err:
                obj = obj or _named(kind, read)
                event = refused(self.cache, obj, err, kind)
                self.writer.emit(event, obj)
                log.warning("Object skipped", extra=fields(object=event.object, error=str(err)))
        while True:
            try:
                failure = self.writer.failures.get_nowait()
            except queue.Empty:
                break
            self.metrics.api_errors.labels(failure.action).inc()
            if failure.action == "bind":
                self.cache.unbind(failure.key)
                self.writer.emit(Event(f"Pod/{failure.key}", "Warning", "FailedScheduling",
                                       failure.message))
            else:
                self.cache.unevict(failure.key)
                self.writer.emit(Event(f"Pod/{failure.key}", "Warning", "FailedEviction",
                                       failure.message))

    # ---------------------------------------------------------------- conf

    def _stamp(self) -> float | None:
        try:
            return os.stat(self.conf_path).st_mtime if self.conf_path else None
        except OSError:
            return None

    def _reload(self) -> None:
        stamp = self._stamp()
        if stamp == self._conf_stamp:
            return
        self._conf_stamp = stamp
        try:
            conf: SchedulerConf = load_conf(self.conf_path)
        except ConfError as err:
            log.error("Conf not reloaded, keeping the last good one",
                      extra=fields(conf=self.conf_path, error=str(err)))
            return
        self.conf = self.scheduler.conf = conf
        log.info("Conf reloaded", extra=fields(conf=self.conf_path,
                                               actions=conf.action_names(),
                                               plugins=conf.plugin_names()))
        for warning in conf.warnings:
            log.warning("Conf warning", extra=fields(conf=self.conf_path, warning=warning))

    # ---------------------------------------------------------------- cycles

    def run_once(self) -> None:
        """Keep the cache current; schedule if this replica leads (or no one elects)."""
        self._drain()
        self._reload()
        leading = self.elector is None or self.elector.leading()
        self.metrics.is_leader.set(leading)
        if leading:
            self.writer.retry_unwritten()
            result = self.scheduler.run_once()
            self.metrics.cycle(self.scheduler.timings, result, self.cache)
            if result is not None:
                self._log_session(result)
        else:
            self.metrics.last_cycle = time.monotonic()  # a standby is healthy too

    def _log_session(self, result: SessionResult) -> None:
        timings = self.scheduler.timings
        log.info("Session done", extra=fields(
            session=self.scheduler.sessions,
            duration_ms=round(sum(timings.values()) * 1000, 2),
            binds=len(result.binds), evictions=len(result.evictions),
            pipelined=len(result.pipelined), pending_pods=len(result.pending),
            pending_jobs=len(result.pending_jobs), timeouts=len(result.timeouts)))

    def run(self) -> int:
        """Cycle until `stop` is set (SIGTERM sets it); 1 if leadership was lost."""
        if self.elector is not None:
            threading.Thread(target=self.elector.run, args=(self.stop,), name="leader",
                             daemon=True).start()
        while not self.stop.is_set():
            if self.elector is not None and self.elector.lost.is_set():
                self.stop.set()
                break
            try:
                self.run_once()
            except Exception:  # a bug must not stop scheduling for good
                log.exception("Scheduling cycle failed")
            self.stop.wait(self.period)
        self.writer.close()
        if self.elector is not None and not self.elector.lost.is_set():
            self.elector.release()  # (after the writes in flight; waits out a renewal)
        return 1 if self.elector is not None and self.elector.lost.is_set() else 0


def _named(kind: str, read: Any) -> dict:
    """The identity of an object the cache refused once read (the watch keeps only what
    was read of it): its Warning names it, and `kubectl describe` finds it by uid."""
    if isinstance(read, tuple) and read and isinstance(read[1], ParsedPod):
        pod = read[1].pod
        return {"apiVersion": "v1", "kind": kind, "metadata": {
            "name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
            "resourceVersion": pod.resource_version}}
    return {}
