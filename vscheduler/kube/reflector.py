"""List-and-watch of one kind, as client-go's reflector does it.

A `Reflector` lists the kind in pages of `page_size` (limit/continue, as client-go: the
50,000 pods of a large cluster are hundreds of megabytes as one response; raw JSON, as
the client's model objects cost many times a plain `json.loads` and the cache keeps its
own objects; the next page asked for while one is handed on), hands every item on as
ADDED, then watches from the list's resourceVersion, with bookmarks. When the API server
says the resourceVersion is too old (410 Gone) it lists again, and hands on DELETED for
what disappeared in between. Errors and a server that is away are retried with
exponential backoff. Events go to `sink(kind, type, object)`, called from the
reflector's thread: the daemon queues them for the scheduling loop, the only writer of
the cache.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from vscheduler.kube.apply import KINDS
from vscheduler.kube.errors import error_fields
from vscheduler.logs import V4, fields

__all__ = ["OPTIONAL_KINDS", "Gone", "Reflector"]

log = logging.getLogger(__name__)

Sink = Callable[[str, str, dict], None]

# Kinds watched only where discovery shows their CRD served, as (kind, (group, version,
# plural, namespaced)): scheduler-plugins' coscheduling PodGroup is read as a PodGroup;
# Volcano's HyperNodes exist only where its topology CRD is installed.
OPTIONAL_KINDS: tuple[tuple[str, tuple[str, str, str, bool]], ...] = (
    ("PodGroup", ("scheduling.x-k8s.io", "v1alpha1", "podgroups", True)),
    ("HyperNode", ("topology.volcano.sh", "v1alpha1", "hypernodes", False)),
)


class Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


def _path(resource: tuple[str, str, str, bool]) -> str:
    group, version, plural, _ = resource
    prefix = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    return f"{prefix}/{plural}"


def _key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


class Reflector:
    def __init__(self, api: ApiClient, kind: str, sink: Sink, stop: threading.Event, *,
                 watch_timeout: int = 300, backoff: tuple[float, float] = (0.2, 30.0),
                 page_size: int = 500,
                 resource: tuple[str, str, str, bool] | None = None,
                 optional: bool = False) -> None:
        self.api = api
        self.kind = kind
        # (group, version, plural, namespaced): KINDS[kind] unless another is given
        self.path = _path(resource or KINDS[kind])
        self.sink = sink
        self.stop = stop
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.page_size = page_size
        # An optional kind the scheduler may not read (RBAC grants it only when asked) is
        # given up at a 403 on its first list, instead of holding start-up and retrying.
        self.optional = optional
        self.known: set[str] = set()  # keys of the objects handed on and not deleted
        self.resource_version = ""
        self.synced = threading.Event()  # set once the first list went through
        self.lists = 0

    def run(self) -> None:
        """List and watch until `stop` is set."""
        delay = self.backoff[0]
        while not self.stop.is_set():
            try:
                self._list()
                while not self.stop.is_set():
                    self._watch()
                    delay = self.backoff[0]
            except Gone:
                log.info("Resource version too old, listing again", extra=fields(
                    kind=self.kind, resource_version=self.resource_version))
                continue
            except ApiException as err:
                if err.status == 410:
                    continue
                if err.status == 403 and self.optional and not self.synced.is_set():
                    log.warning("Not allowed to list an optional kind: not watched", extra=fields(
                        kind=self.kind, path=self.path, **error_fields(err)))
                    self.synced.set()
                    return
                log.warning("List or watch failed", extra=fields(
                    kind=self.kind, path=self.path, retry_in=round(delay, 2),
                    **error_fields(err)))
                self.stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])
            except Exception as err:  # the API server away, a broken stream
                log.warning("List or watch failed", extra=fields(
                    kind=self.kind, path=self.path, retry_in=round(delay, 2),
                    **error_fields(err)))
                self.stop.wait(delay)
                delay = min(delay * 2, self.backoff[1])

    def _request(self, query: list[tuple[str, Any]], timeout: float | None) -> Any:
        return self.api.call_api(
            self.path, "GET", query_params=query, _preload_content=False,
            _request_timeout=timeout, auth_settings=["BearerToken"])

    def _page(self, token: str) -> dict:
        query: list[tuple[str, Any]] = [("limit", self.page_size)]
        if token:
            query.append(("continue", token))
        return json.loads(self._request(query, 60).data)

    def _ask_for_page(self, token: str) -> Future[dict]:
        """The page after `token`, asked for in a thread of its own: a daemon thread, as
        the reflector's, so that a page still on its way never holds up the process's
        exit."""
        page: Future[dict] = Future()

        def fetch() -> None:
            try:
                page.set_result(self._page(token))
            except BaseException as err:  # (handed to whoever waits for the page)
                page.set_exception(err)

        threading.Thread(target=fetch, name=f"list-{self.kind}", daemon=True).start()
        return page

    def _list(self) -> None:
        """List page by page (all pages are one consistent snapshot; a continue token
        that expired is a 410, and the whole list starts over). The next page is asked
        for while this one's items are handed on: the API server answers it meanwhile
        instead of waiting on us (against the test stand-in, its part is a third of
        listing 50,000 pods). A page still on its way when handing on fails is left to
        end alone."""
        seen = set()
        data = self._page("")
        while True:
            meta = data.get("metadata") or {}
            token = str(meta.get("continue") or "")
            following = self._ask_for_page(token) if token else None
            for item in data.get("items") or []:
                seen.add(_key(item))
                self.sink(self.kind, "ADDED", item)
            if following is None:
                break
            data = following.result()
        self.lists += 1
        for gone in sorted(self.known - seen):
            namespace, name = gone.split("/", 1)
            self.sink(self.kind, "DELETED",
                      {"metadata": {"namespace": namespace or None, "name": name}})
        self.known = seen
        self.resource_version = str(meta.get("resourceVersion", ""))
        log.log(V4, "Listed", extra=fields(kind=self.kind, items=len(seen),
                                           resource_version=self.resource_version))
        self.synced.set()

    def _watch(self) -> None:
        query = [("watch", "true"), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", self.watch_timeout)]
        if self.resource_version:
            query.append(("resourceVersion", self.resource_version))
        log.log(V4, "Watching", extra=fields(kind=self.kind,
                                             resource_version=self.resource_version))
        response = self._request(query, self.watch_timeout + 30)
        try:
            for line in iter_resp_lines(response):
                if self.stop.is_set():
                    return
                if line:
                    self._event(json.loads(line))
        finally:
            response.release_conn()

    def _event(self, event: dict) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise RuntimeError(f"watch error: {obj.get('message') or obj}")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)
        if kind == "BOOKMARK":
            return
        key = _key(obj)
        if kind == "DELETED":
            self.known.discard(key)
        else:
            self.known.add(key)
        self.sink(self.kind, str(kind), obj)
