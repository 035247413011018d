"""Decisions out to the API server: binds, evictions, statuses and events.

`KubeWriter` is the daemon's binder, evictor, status writer and event sink (the
receivers of `vscheduler.scheduler`). Binds and evictions go through a small pool of
workers within the client-side QPS budget; a bind or eviction the API server refuses is
put on `failures`, which the scheduling loop reads to put the cache back (the pod waits
again, with a Warning event). Statuses are written only when they changed; events with
the same object, reason and message are counted rather than written again, and their
count is brought up to date at most once a minute.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from vscheduler.framework.session import Event, Eviction
from vscheduler.kube.errors import error_fields
from vscheduler.logs import V2, V4, fields
from vscheduler.model import Job, Task, TaskStatus
from vscheduler.resources import Resource

__all__ = ["Failure", "KubeWriter", "RateLimiter"]

log = logging.getLogger(__name__)
S = TaskStatus
EVENT_REFRESH_SECONDS = 60.0


class RateLimiter:
    """A token bucket: `qps` requests a second on average, `burst` at once."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = max(qps, 0.001)
        self.capacity = max(burst, 1)
        self.tokens = float(self.capacity)
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def acquire(self) -> None:
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.qps)
                self.stamp = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                wait = (1 - self.tokens) / self.qps
            time.sleep(wait)


class Failure:
    """A decision the API server refused: `action` is "bind" or "evict"."""

    __slots__ = ("action", "key", "message")

    def __init__(self, action: str, key: str, message: str) -> None:
        self.action = action
        self.key = key
        self.message = message


def _now() -> str:
    # Exactly six fractional digits, as the API server wants for MicroTime.
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _error(err: Exception) -> str:
    return str(error_fields(err)["error"])


_KINDS = {"pods": "Pod", "podgroups": "PodGroup", "queues": "Queue", "events": "Event"}


def _object_of(path: str) -> dict[str, str]:
    """The kind and namespace/name a request path writes, as log fields."""
    parts = [p for p in path.split("/") if p]
    if parts[-1] in ("status", "binding"):
        parts.pop()
    namespace = parts[parts.index("namespaces") + 1] if "namespaces" in parts else ""
    name = f"{namespace}/{parts[-1]}" if namespace else parts[-1]
    return {"kind": _KINDS.get(parts[-2], parts[-2]), "object": name}


class KubeWriter:
    def __init__(self, api: ApiClient, limiter: RateLimiter, *, scheduler_name: str,
                 workers: int = 4, dry_run: bool = False) -> None:
        self.api = api
        self.limiter = limiter
        self.scheduler_name = scheduler_name
        self.dry_run = dry_run
        self.failures: queue.Queue[Failure] = queue.Queue()
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="writer")
        self._conditions: dict[str, str] = {}  # pod key -> message last written
        self._events: dict[tuple[str, str, str, str], list[Any]] = {}
        self._events_lock = threading.Lock()

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    # ---------------------------------------------------------------- requests

    def _call(self, method: str, path: str, body: Any = None,
              content_type: str = "application/json") -> Any:
        self.limiter.acquire()
        response = self.api.call_api(
            path, method, body=body, header_params={"Content-Type": content_type},
            _preload_content=False, _request_timeout=30, auth_settings=["BearerToken"])
        return json.loads(response.data or b"{}")

    # ---------------------------------------------------------------- binder / evictor

    def bind(self, task: Task, node: str) -> None:
        self._conditions.pop(task.key, None)
        if self.dry_run:
            log.info("Dry run: would bind", extra=fields(pod=task.key, node=node))
            return
        log.log(V2, "Binding", extra=fields(pod=task.key, node=node))
        self.pool.submit(self._bind, task.namespace, task.name, task.uid, node, task.key)

    def _bind(self, namespace: str, name: str, uid: str, node: str, key: str) -> None:
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            self._call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body)
        except Exception as err:
            log.warning("Bind failed", extra=fields(kind="Pod", object=key, node=node,
                                                    **error_fields(err)))
            self.failures.put(Failure("bind", key, f"failed to bind to node {node}: "
                                                   f"{_error(err)}"))
            return
        self.emit(Event(f"Pod/{key}", "Normal", "Scheduled",
                        f"Successfully assigned {key} to {node}"))

    def evict(self, task: Task, eviction: Eviction) -> None:
        what = fields(pod=task.key, node=task.node_name, action=eviction.action,
                      preemptor=eviction.preemptor)
        if self.dry_run:
            log.info("Dry run: would evict", extra=what)
            return
        log.log(V2, "Evicting", extra=what)
        self.pool.submit(self._evict, task.namespace, task.name, task.key)

    def _evict(self, namespace: str, name: str, key: str) -> None:
        try:
            # The pod's own grace period applies: it may checkpoint before it stops.
            self._call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", {})
        except ApiException as err:
            if err.status != 404:  # gone already: what the eviction wanted
                log.warning("Eviction failed", extra=fields(kind="Pod", object=key,
                                                            **error_fields(err)))
                self.failures.put(Failure("evict", key, _error(err)))
        except Exception as err:
            log.warning("Eviction failed", extra=fields(kind="Pod", object=key,
                                                        **error_fields(err)))
            self.failures.put(Failure("evict", key, _error(err)))

    # ---------------------------------------------------------------- statuses

    def pending(self, task: Task, reasons: list[str]) -> None:
        message = reasons[0] if reasons else "waiting"
        if self._conditions.get(task.key) == message:
            return
        self._conditions[task.key] = message
        if self.dry_run:
            log.info("Dry run: would write pod status", extra=fields(
                pod=task.key, condition="PodScheduled=False", message=message))
            return
        body = {"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message, "lastTransitionTime": _now()[:19] + "Z"}]}}
        self._patch(f"/api/v1/namespaces/{task.namespace}/pods/{task.name}/status", body,
                    "application/strategic-merge-patch+json")

    def nominate(self, task: Task, node: str) -> None:
        if self.dry_run:
            log.info("Dry run: would nominate", extra=fields(pod=task.key, node=node))
        else:
            self._patch(f"/api/v1/namespaces/{task.namespace}/pods/{task.name}/status",
                        {"status": {"nominatedNodeName": node}},
                        "application/strategic-merge-patch+json")

    def podgroup(self, job: Job) -> None:
        if self.dry_run:
            log.info("Dry run: would write podgroup status", extra=fields(
                podgroup=f"{job.namespace}/{job.name}", phase=job.phase,
                conditions=[c.as_dict() for c in job.conditions]))
            return
        body = {"status": {
            "phase": job.phase,
            "conditions": [{**c.as_dict(), "lastTransitionTime": _now()[:19] + "Z"}
                           for c in job.conditions],
            "running": job.count(S.RUNNING), "succeeded": job.count(S.SUCCEEDED),
            "failed": job.count(S.FAILED)}}
        self._patch(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{job.namespace}/"
                    f"podgroups/{job.name}/status", body, "application/merge-patch+json")

    def queue(self, name: str, allocated: Resource) -> None:
        if self.dry_run:
            log.info("Dry run: would write queue status",
                     extra=fields(queue=name, allocated=allocated.to_k8s()))
        else:
            self._patch(f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}/status",
                        {"status": {"allocated": allocated.to_k8s()}},
                        "application/merge-patch+json")

    def _patch(self, path: str, body: dict, content_type: str) -> None:
        log.log(V4, "Patching", extra=fields(**_object_of(path), path=path))
        try:
            self._call("PATCH", path, body, content_type)
        except Exception as err:  # the next session writes it again if still needed
            log.warning("Patch failed", extra=fields(**_object_of(path), **error_fields(err)))

    # ---------------------------------------------------------------- events

    def emit(self, event: Event) -> None:
        key = event.key()
        if self.dry_run:
            if key not in self._events:  # once, as the real writer creates it once
                self._events[key] = [None, 1, 0.0]
                log.info("Dry run: would record event", extra=fields(
                    object=event.object, type=event.type, reason=event.reason,
                    message=event.message))
            return
        now = time.monotonic()
        with self._events_lock:  # binder workers emit too
            seen = self._events.get(key)
            if seen is None:
                seen = self._events[key] = [None, 1, now]
                first = True
            else:
                first = False
                seen[1] += 1
                refresh = now - seen[2] >= EVENT_REFRESH_SECONDS and seen[0] is not None
                if refresh:
                    seen[2] = now
        if first:
            self._create_event(event, key)
            return
        if refresh:
            namespace, name = seen[0]
            self._patch(f"/api/v1/namespaces/{namespace}/events/{name}",
                        {"count": seen[1], "lastTimestamp": _now()[:19] + "Z"},
                        "application/merge-patch+json")

    def _create_event(self, event: Event, key: tuple[str, str, str, str]) -> None:
        kind, _, rest = event.object.partition("/")
        namespace, _, name = rest.partition("/") if kind in ("Pod", "PodGroup") \
            else ("default", "", rest)
        api_version = "v1" if kind == "Pod" else "scheduling.volcano.sh/v1beta1"
        stamp = _now()[:19] + "Z"
        event_name = f"{name}.{time.time_ns():x}"
        body = {"metadata": {"name": event_name, "namespace": namespace},
                "involvedObject": {"kind": kind, "namespace": namespace, "name": name,
                                   "apiVersion": api_version},
                "type": event.type, "reason": event.reason, "message": event.message[:1024],
                "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp,
                "source": {"component": self.scheduler_name},
                "reportingComponent": self.scheduler_name}
        try:
            self._call("POST", f"/api/v1/namespaces/{namespace}/events", body)
            self._events[key][0] = (namespace, event_name)
        except Exception as err:
            log.warning("Event not written", extra=fields(
                kind="Event", object=f"{namespace}/{event_name}", involved=event.object,
                reason=event.reason, **error_fields(err)))
