"""List-and-watch against the API server stand-in, with the official client."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from kubernetes import client

from tests.apiserver import FakeApiServer, wait_for
from tests.builders import node, pod, podgroup, queue
from vscheduler.cache import Cache
from vscheduler.kube.apply import apply_event
from vscheduler.kube.reflector import Reflector


class Fed:
    """A cache fed by reflectors (events applied under a lock, as the loop will)."""

    def __init__(self) -> None:
        self.cache = Cache()
        self.lock = threading.Lock()
        self.events: list[tuple[str, str, str]] = []

    def sink(self, kind: str, event_type: str, obj: dict) -> None:
        with self.lock:
            self.events.append((kind, event_type, obj["metadata"]["name"]))
            apply_event(self.cache, kind, event_type, obj)


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval=0.1) as srv:
        yield srv


@pytest.fixture
def fed(server: FakeApiServer) -> Iterator[tuple[Fed, list[Reflector]]]:
    api = client.ApiClient(client.Configuration(host=server.url))
    fed = Fed()
    stop = threading.Event()
    reflectors = [Reflector(api, kind, fed.sink, stop, watch_timeout=5,
                            backoff=(0.05, 0.2))
                  for kind in ("PriorityClass", "Queue", "Node", "PodGroup", "Pod")]
    threads = [threading.Thread(target=r.run, daemon=True) for r in reflectors]
    for thread in threads:
        thread.start()
    yield fed, reflectors
    stop.set()
    for thread in threads:
        thread.join(timeout=5)
    api.close()


def test_lists_then_follows_changes(server: FakeApiServer, fed):
    cache_of, reflectors = fed
    server.create_all([node("n1", cpu="4"), queue("q"), podgroup("g", 1, queue="q")])
    wait_for(lambda: all(r.synced.is_set() for r in reflectors))
    wait_for(lambda: "n1" in cache_of.cache.nodes and "default/g" in cache_of.cache.jobs)
    server.create_all([pod("g-0", cpu="1", group="g")])
    wait_for(lambda: "default/g-0" in cache_of.cache.tasks)
    bound = pod("g-0", cpu="1", group="g", node_name="n1")
    server.update(bound)
    wait_for(lambda: cache_of.cache.tasks["default/g-0"].node_name == "n1")
    assert cache_of.cache.nodes["n1"].idle.cpu == 3000
    server.delete("Pod", "default", "g-0")
    wait_for(lambda: "default/g-0" not in cache_of.cache.tasks)


def test_a_gone_resource_version_lists_again_and_drops_what_vanished(server, fed):
    cache_of, reflectors = fed
    server.create_all([node("n1"), node("n2")])
    wait_for(lambda: {"n1", "n2"} <= set(cache_of.cache.nodes))
    nodes = next(r for r in reflectors if r.kind == "Node")
    lists = nodes.lists
    server.expire_history("Node")
    server.delete("Node", None, "n2")
    wait_for(lambda: nodes.lists > lists and "n2" not in cache_of.cache.nodes)
    assert "n1" in cache_of.cache.nodes


def test_the_api_server_away_for_a_while(server, fed):
    cache_of, _ = fed
    server.create_all([node("n1")])
    wait_for(lambda: "n1" in cache_of.cache.nodes)
    server.go_down()
    server.come_back()
    server.create_all([node("n2")])
    wait_for(lambda: "n2" in cache_of.cache.nodes, timeout=10)


@contextmanager
def pods_listed(server: FakeApiServer, sink: Callable[[str, str, dict], None]
                ) -> Iterator[Reflector]:
    """A Pod reflector listing `server` in pages of 2 into `sink`, once it has synced;
    stopped afterwards."""
    api = client.ApiClient(client.Configuration(host=server.url))
    stop = threading.Event()
    reflector = Reflector(api, "Pod", sink, stop, watch_timeout=5, backoff=(0.05, 0.2),
                          page_size=2)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    try:
        wait_for(reflector.synced.is_set, timeout=10)
        yield reflector
    finally:
        stop.set()
        thread.join(timeout=5)
        api.close()


def test_lists_in_pages_and_starts_over_when_the_list_is_refused(server: FakeApiServer):
    server.create_all([pod(f"p{i}", cpu="1") for i in range(5)])
    server.fail("GET", r"/api/v1/pods$", 410, times=1, watch=False, in_stream=False)
    fed = Fed()
    with pods_listed(server, fed.sink) as reflector:
        assert {f"default/p{i}" for i in range(5)} <= set(fed.cache.tasks)
        lists = server.requests("GET", r"/api/v1/pods$", watch=False)
        # refused once, then 3 pages of at most 2: the 2nd and 3rd continue the 1st
        assert [r.query.get("limit") for r in lists] == ["2"] * 4
        assert [bool(r.query.get("continue")) for r in lists] == [False, False, True, True]
        assert reflector.lists == 1


def test_the_next_page_is_asked_for_while_a_page_is_handed_on(server: FakeApiServer,
                                                              monkeypatch):
    # The sink holds the first item until the server has been asked for the second
    # page: listing one page after another, it would wait for ever.
    server.create_all([pod(f"p{i}", cpu="1") for i in range(5)])
    fed = Fed()
    asked_on: list[bool] = []
    # the thread each later page was asked for from: its own, a daemon (never holding
    # up exit)
    fetching: list[tuple[str, bool]] = []

    def sink(kind: str, event_type: str, obj: dict) -> None:
        if not asked_on:
            try:
                wait_for(lambda: len(server.requests("GET", r"/api/v1/pods$",
                                                     watch=False)) >= 2, timeout=3)
                asked_on.append(True)
            except AssertionError:
                asked_on.append(False)
        fed.sink(kind, event_type, obj)

    page = Reflector._page

    def noted_page(reflector: Reflector, token: str) -> dict:
        if token:
            thread = threading.current_thread()
            fetching.append((thread.name, thread.daemon))
        return page(reflector, token)

    monkeypatch.setattr(Reflector, "_page", noted_page)
    with pods_listed(server, sink) as reflector:
        assert asked_on == [True]
        assert fetching == [("list-Pod", True)] * 2  # (pages 2 and 3)
        assert [e[2] for e in fed.events] == [f"p{i}" for i in range(5)]
        assert reflector.lists == 1


def test_a_page_that_fails_midway_starts_the_list_over(server: FakeApiServer):
    server.create_all([pod(f"p{i}", cpu="1") for i in range(7)])
    fed = Fed()

    def sink(kind: str, event_type: str, obj: dict) -> None:
        if not fed.events:  # a later page of this list fails
            server.fail("GET", r"/api/v1/pods$", 500, times=1, watch=False)
        fed.sink(kind, event_type, obj)

    with pods_listed(server, sink) as reflector:
        lists = server.requests("GET", r"/api/v1/pods$", watch=False)
        assert len(lists) > 4  # (4 pages, one failed, and the list again)
        assert {f"default/p{i}" for i in range(7)} == set(fed.cache.tasks)
        assert reflector.known == {f"default/p{i}" for i in range(7)}
        assert reflector.lists == 1
        assert not [e for e in fed.events if e[1] != "ADDED"]
