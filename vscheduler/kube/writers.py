"""Decisions out to the API server: binds, evictions, statuses and events.

`KubeWriter` is the daemon's binder, evictor, status writer and event sink (the
receivers of `vscheduler.scheduler`). Binds and evictions go through a small pool of
workers within the client-side QPS budget; a bind or eviction the API server refuses is
put on `failures`, which the scheduling loop reads to put the cache back (the pod waits
again, with a Warning event). Statuses are written only when they changed; one
refused for a passing reason (no answer, a 5xx, 429) is written again the next cycle.

Events are written as client-go's recorder writes them, to the core v1 Events API that
`kubectl describe` reads: `involvedObject` names the object's uid (kubectl selects
events by it), the event is named `<object name>.<hex nanoseconds>`, and a repeat of the
same event about the same object is counted on the Event already written (a PATCH of
`count` and `lastTimestamp`, as the recorder's correlator does), at most once a minute
per event: a pod pending for an hour is reported every session.

A PodGroup's status goes where its CRD allows: to `podgroups/{name}/status` when the
CRD has a status subresource, else as a merge patch of `status` on the object itself
(Volcano's own PodGroup CRD has none); discovery says which, and is asked again when a
status write is answered 404.
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from vscheduler.cache import Cache
from vscheduler.framework.results import Event, Eviction
from vscheduler.kube.discovery import ApiDiscovery
from vscheduler.kube.errors import error_fields
from vscheduler.logs import V2, V4, fields
from vscheduler.model import BARE_JOB_SUFFIX, Job, Task, TaskStatus
from vscheduler.resources import Resource

__all__ = ["Failure", "KubeWriter", "RateLimiter"]

log = logging.getLogger(__name__)
S = TaskStatus
EVENT_REFRESH_SECONDS = 60.0
# An event not repeated for this long is forgotten: a later repeat writes a new Event
# (client-go's correlator forgets similar events after ten minutes too). Forgetting by
# age, not by count, keeps every pending pod's repeating event counted however many pods
# wait; a cap by count turned each session's repeats into new Events past the cap.
EVENT_FORGET_SECONDS = 600.0
VOLCANO = "scheduling.volcano.sh/v1beta1"
# Kinds of the objects events are about: (apiVersion, namespaced)
_EVENT_KINDS = {"Pod": ("v1", True), "PodGroup": (VOLCANO, True), "Queue": (VOLCANO, False),
                "Node": ("v1", False), "PriorityClass": ("scheduling.k8s.io/v1", False),
                "HyperNode": ("topology.volcano.sh/v1alpha1", False),
                "Namespace": ("v1", False)}
# Volcano's PodGroup phases as the coscheduling PodGroup's (scheduler-plugins) names them
_COSCHEDULING_PHASES = {"Pending": "Pending", "Inqueue": "Pending", "Running": "Running",
                        "Unknown": "Unknown", "Completed": "Finished"}


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


def _of(uid: str, patch: dict) -> dict:
    """`patch` for the object of `uid` only: the API server refuses it (422: its
    metadata.uid is immutable) for another object of the same name, one created anew
    since (a write kept for a retry, say), except at a custom resource's /status, which
    takes the status alone. Without a uid known, for whatever has the name."""
    if not uid:
        return patch
    return {**patch, "metadata": {**patch.get("metadata", {}), "uid": uid}}


def _uid_of(patch: dict) -> str:
    return str((patch.get("metadata") or {}).get("uid") or "")


def _status_of(err: Exception) -> int | None:
    """The HTTP status of a failed request, None when no answer came."""
    return err.status if isinstance(err, ApiException) else None


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
                 workers: int = 4, dry_run: bool = False, cache: Cache | None = None,
                 discovery: ApiDiscovery | None = None,
                 event_refresh: float = EVENT_REFRESH_SECONDS) -> None:
        self.api = api
        self.limiter = limiter
        self.scheduler_name = scheduler_name
        self.dry_run = dry_run
        # Where events find their objects' uids and PodGroups their CRD (only read here:
        # a dict lookup is safe beside the loop that writes it).
        self.cache = cache
        self.discovery = discovery or ApiDiscovery(api)
        self.event_refresh = event_refresh
        # As kube-scheduler names itself: the component, then the replica
        self.instance = f"{scheduler_name}-{socket.gethostname()}"
        self.failures: queue.Queue[Failure] = queue.Queue()
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="writer")
        # pod key -> (its uid, the message last written): a pod created anew under the
        # name is written to as well
        self._conditions: dict[str, tuple[str, str]] = {}
        # Status writes the API server did not take for a passing reason (no answer, a
        # 5xx, 429), by (path, what of it): written again by `retry_unwritten`, unless a
        # newer write of the same thing takes their place. The scheduler writes a
        # status only when it changes, so a lost write would otherwise stay lost (a pod
        # with no PodScheduled=False is one the cluster autoscaler never sees).
        self._unwritten: dict[tuple[str, str], tuple[str, Callable[[], None]]] = {}
        # (event key, object uid) -> [(namespace, name) once written, count, last written,
        # last seen], least recently seen first
        self._events: OrderedDict[tuple, list[Any]] = OrderedDict()
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
        self.forget_pod(task.key)
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
        terms = {"strategy": eviction.strategy or None, "elastic": eviction.elastic or None,
                 "gracePeriodSeconds": eviction.grace_seconds}
        what = fields(pod=task.key, node=task.node_name, action=eviction.action,
                      preemptor=eviction.preemptor,
                      **{k: v for k, v in terms.items() if v is not None})
        if self.dry_run:
            log.info("Dry run: would evict", extra=what)
            return
        log.log(V2, "Evicting", extra=what)
        condition = {"type": "DisruptionTarget", "status": "True",
                     "reason": "PreemptionByScheduler",
                     "message": f"{self.scheduler_name}: {eviction.action} to make room for "
                                f"{eviction.preemptor}",
                     "lastTransitionTime": _now()[:19] + "Z"}
        self.pool.submit(self._evict, task.namespace, task.name, task.key, task.uid,
                         eviction.grace_seconds, condition)

    def _evict(self, namespace: str, name: str, key: str, uid: str, grace: int | None,
               condition: dict[str, str]) -> None:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        try:
            # Marked first, as kube-scheduler marks its victims: a Job's podFailurePolicy
            # (onPodConditions DisruptionTarget) then does not count the pod's end
            # against its backoffLimit.
            self._call("PATCH", f"{path}/status",
                       _of(uid, {"status": {"conditions": [condition]}}),
                       "application/strategic-merge-patch+json")
            # The pod's own grace period applies unless the action sets one: it may
            # checkpoint before it stops. This pod only, not one of its name since.
            body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if uid:
                body["preconditions"] = {"uid": uid}
            if grace is not None:
                body["gracePeriodSeconds"] = grace
            self._call("DELETE", path, body)
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
        written = self._conditions.get(task.key)
        if written == (task.uid, message):
            return
        self._conditions[task.key] = (task.uid, message)
        if self.dry_run:
            log.info("Dry run: would write pod status", extra=fields(
                pod=task.key, condition="PodScheduled=False", message=message))
            return
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": message}
        if written is None or written[0] != task.uid:
            # (as kube-scheduler's: the time the status last changed, not the message)
            condition["lastTransitionTime"] = _now()[:19] + "Z"
        self._patch(f"/api/v1/namespaces/{task.namespace}/pods/{task.name}/status",
                    _of(task.uid, {"status": {"conditions": [condition]}}),
                    "application/strategic-merge-patch+json", "condition")

    def nominate(self, task: Task, node: str) -> None:
        if self.dry_run:
            log.info("Dry run: would nominate", extra=fields(pod=task.key, node=node))
        else:
            self._patch(f"/api/v1/namespaces/{task.namespace}/pods/{task.name}/status",
                        _of(task.uid, {"status": {"nominatedNodeName": node or None}}),
                        "application/strategic-merge-patch+json", "nominated")

    def forget_pod(self, key: str) -> None:
        """A pod bound or deleted: what was written or kept to write of its waiting
        goes (nothing meant for it is written to a pod created anew under its name)."""
        self._conditions.pop(key, None)
        namespace, _, name = key.partition("/")
        status = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        self._unwritten.pop((status, "condition"), None)
        self._unwritten.pop((status, "nominated"), None)

    def podgroup(self, job: Job) -> None:
        if self.dry_run:
            log.info("Dry run: would write podgroup status", extra=fields(
                podgroup=f"{job.namespace}/{job.name}", phase=job.phase,
                conditions=[c.as_dict() for c in job.conditions]))
            return
        spec = self.cache.podgroups.get(job.uid) if self.cache is not None else None
        api_version = spec.api_version if spec is not None else VOLCANO
        status: dict[str, Any] = {
            "phase": job.phase, "running": job.count(S.RUNNING),
            "succeeded": job.count(S.SUCCEEDED), "failed": job.count(S.FAILED)}
        if api_version.split("/")[0] == "scheduling.volcano.sh":
            status["conditions"] = [{**c.as_dict(), "lastTransitionTime": _now()[:19] + "Z"}
                                    for c in job.conditions]
        else:  # coscheduling's status has no conditions and names its phases its way
            status["phase"] = _COSCHEDULING_PHASES.get(job.phase, job.phase)
        self._write_status(api_version, "podgroups", job.namespace, job.name,
                           _of(spec.uid if spec is not None else "", {"status": status}))

    def _write_status(self, api_version: str, plural: str, namespace: str, name: str,
                      body: dict) -> None:
        """Through the status subresource where the CRD has one, else on the object."""
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{api_version}/namespaces/{namespace}/{plural}/{name}"
        what = (path, "status")
        self._unwritten.pop(what, None)
        for attempt in (1, 2):
            has_status = self.discovery.has_status(group, version, plural)
            target = path if has_status is False else f"{path}/status"
            try:
                self._call("PATCH", target, body, "application/merge-patch+json")
                return
            except Exception as err:
                if _status_of(err) == 404 and attempt == 1:
                    # The object is gone, or the CRD changed: discovery tells which.
                    self.discovery.forget(group, version)
                    if self.discovery.has_status(group, version, plural) == has_status:
                        return
                    continue
                self._failed(what, target, err, _uid_of(body), lambda: self._write_status(
                    api_version, plural, namespace, name, body))
                return

    def queue(self, name: str, allocated: Resource) -> None:
        if self.dry_run:
            log.info("Dry run: would write queue status",
                     extra=fields(queue=name, allocated=allocated.to_k8s()))
        else:
            self._patch(f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}/status",
                        _of(self._queue_uid(name), {"status": {"allocated":
                                                               allocated.to_k8s()}}),
                        "application/merge-patch+json", "status")

    def queue_annotations(self, name: str, annotations: dict[str, str]) -> None:
        if self.dry_run:
            log.info("Dry run: would annotate queue",
                     extra=fields(queue=name, annotations=annotations))
        else:
            self._patch(f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}",
                        _of(self._queue_uid(name), {"metadata": {"annotations": annotations}}),
                        "application/merge-patch+json", "annotations")

    def _queue_uid(self, name: str) -> str:
        queue = self.cache.queues.get(name) if self.cache is not None else None
        return queue.meta_uid if queue is not None else ""

    def _patch(self, path: str, body: dict, content_type: str,
               part: str | None = None) -> None:
        """PATCH the object at `path`. A status write names the `part` it writes: it is
        kept to be written again if the failure may pass (see `_unwritten`, which only
        such writes touch: they are the scheduling thread's). An event's count (written
        by the workers too) is not kept: its next repeat writes it."""
        log.log(V4, "Patching", extra=fields(**_object_of(path), path=path))
        what = (path, part or "")
        if part is not None:
            self._unwritten.pop(what, None)
        try:
            self._call("PATCH", path, body, content_type)
        except Exception as err:
            self._failed(what if part is not None else None, path, err, _uid_of(body),
                         lambda: self._patch(path, body, content_type, part))

    def _failed(self, what: tuple[str, str] | None, path: str, err: Exception, uid: str,
                again: Callable[[], None]) -> None:
        """A write refused: logged; a status write (`what`) is kept to be written again
        unless the API server will refuse it again (the object is gone, or the write
        is wrong)."""
        log.warning("Patch failed", extra=fields(**_object_of(path), **error_fields(err)))
        status = _status_of(err)
        if what is not None and (status is None or status == 429 or status >= 500):
            self._unwritten[what] = (uid, again)

    def retry_unwritten(self) -> None:
        """Write again the status writes that failed for a passing reason, oldest first,
        until one fails again: the API server is still unwell, and the rest wait for
        the next cycle (the daemon calls this once a cycle, while it leads) rather than
        each taking its own timeout in this one."""
        for what, kept in list(self._unwritten.items()):
            if self._unwritten.get(what) is not kept:
                continue  # (written anew since)
            if not self._still_meant(what[0], kept[0]):
                del self._unwritten[what]
                continue
            kept[1]()
            if what in self._unwritten:
                return

    def _still_meant(self, path: str, uid: str) -> bool:
        """Whether a kept write is still for an object the cache has: the same one (by
        uid, not by name: it may have been created anew since) and, for a pod's status,
        one still unbound. (The uid in the write makes the API server refuse it for
        another object, but not a custom resource's /status.)"""
        cache = self.cache
        if cache is None or not uid:
            return True
        where = _object_of(path)
        if where["kind"] == "Pod":
            task = cache.tasks.get(where["object"])
            return task is not None and task.uid == uid and not task.node_name
        if where["kind"] == "Queue":
            queue = cache.queues.get(where["object"])
            return queue is not None and queue.meta_uid == uid
        if where["kind"] == "PodGroup":
            spec = cache.podgroups.get(where["object"])
            return spec is not None and spec.uid == uid
        return True

    # ---------------------------------------------------------------- events

    def emit(self, event: Event, obj: dict | None = None) -> None:
        """Write `event`, or count it on the one already written. `obj`, when given, is
        the object as the API server sent it (one the cache could not take)."""
        key: tuple = event.key()
        now = time.monotonic()
        if self.dry_run:
            with self._events_lock:
                seen = self._seen(key, now)
            if seen is None:  # once, as the real writer creates it once
                log.info("Dry run: would record event", extra=fields(
                    object=event.object, type=event.type, reason=event.reason,
                    message=event.message))
            return
        namespace, involved = self._involved(event, obj)
        key = (key, involved.get("uid", ""))
        where, count = None, 0
        with self._events_lock:  # binder workers emit too
            seen = self._seen(key, now)
            if seen is not None:
                seen[1] += 1
                if seen[0] is not None and now - seen[2] >= self.event_refresh:
                    seen[2] = now
                    where, count = seen[0], seen[1]
        if seen is None:
            self._create_event(event, key, namespace, involved)
        elif where is not None:
            self._patch(f"/api/v1/namespaces/{where[0]}/events/{where[1]}",
                        {"count": count, "lastTimestamp": _now()[:19] + "Z"},
                        "application/strategic-merge-patch+json")

    def _seen(self, key: tuple, now: float) -> list[Any] | None:
        """The record of `key` if it was seen within EVENT_FORGET_SECONDS (marked seen
        now), else None after recording it anew; records not seen for that long go.
        Called with the lock held."""
        events = self._events
        while events:
            oldest = next(iter(events.values()))
            if now - oldest[3] < EVENT_FORGET_SECONDS:
                break
            events.popitem(last=False)
        seen = events.get(key)
        if seen is None:
            events[key] = [None, 1, now, now]
            return None
        seen[3] = now
        events.move_to_end(key)
        return seen

    def _involved(self, event: Event, obj: dict | None) -> tuple[str, dict[str, str]]:
        """The Event's namespace and its involvedObject, as client-go refers to an
        object: apiVersion, kind, namespace, name, uid and resourceVersion."""
        kind, _, rest = event.object.partition("/")
        if kind == "PodGroup" and rest.endswith(BARE_JOB_SUFFIX):
            kind, rest = "Pod", rest[:-len(BARE_JOB_SUFFIX)]  # a pod that is its own job
        api_version, namespaced = _EVENT_KINDS.get(kind, ("", "/" in rest))
        namespace, name = rest.split("/", 1) if namespaced and "/" in rest else ("", rest)
        uid = resource_version = ""
        cache = self.cache
        if obj is not None:
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            api_version = str(obj.get("apiVersion") or api_version)
            uid = str(meta.get("uid") or "")
            resource_version = str(meta.get("resourceVersion") or "")
        elif cache is not None and kind == "Pod":
            task = cache.tasks.get(rest)
            if task is not None and task.pod.uid != rest:  # (a pod read without a uid)
                uid, resource_version = task.pod.uid, task.pod.resource_version
        elif cache is not None and kind == "PodGroup":
            spec = cache.podgroups.get(rest)
            if spec is not None:
                api_version = spec.api_version
                uid, resource_version = spec.uid, spec.resource_version
        elif cache is not None and kind == "Queue":
            found = cache.queues.get(name)
            uid = found.meta_uid if found is not None else ""
        elif cache is not None and kind == "HyperNode":
            hypernode = cache.hypernodes.get(name)
            uid = hypernode.uid if hypernode is not None else ""
        involved = {"apiVersion": api_version, "kind": kind, "namespace": namespace,
                    "name": name, "uid": uid, "resourceVersion": resource_version}
        # Cluster-scoped objects' events live in "default", as client-go puts them.
        return namespace or "default", {k: v for k, v in involved.items() if v}

    def _create_event(self, event: Event, key: tuple, namespace: str,
                      involved: dict[str, str]) -> None:
        stamp = _now()[:19] + "Z"
        event_name = f"{involved.get('name', 'unknown')}.{time.time_ns():x}"
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": event_name, "namespace": namespace},
                "involvedObject": involved,
                "type": event.type, "reason": event.reason, "message": event.message[:1024],
                "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp,
                "source": {"component": self.scheduler_name},
                "reportingComponent": self.scheduler_name,
                "reportingInstance": self.instance}
        try:
            self._call("POST", f"/api/v1/namespaces/{namespace}/events", body)
        except Exception as err:
            log.warning("Event not written", extra=fields(
                kind="Event", object=f"{namespace}/{event_name}", involved=event.object,
                reason=event.reason, **error_fields(err)))
            with self._events_lock:  # a later repeat tries again
                self._events.pop(key, None)
            return
        with self._events_lock:
            seen = self._events.get(key)
            if seen is not None:
                seen[0] = (namespace, event_name)
