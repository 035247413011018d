"""Namespaces' labels reach the daemon's cache from the API server stand-in: listed,
followed as they change, and dropped when deleted."""

from __future__ import annotations

import threading
from collections.abc import Callable

from kubernetes import client

from tests.apiserver import FakeApiServer, wait_for
from tests.builders import namespace
from vscheduler.cache import Cache
from vscheduler.kube.apply import apply_event
from vscheduler.kube.daemon import Daemon
from vscheduler.kube.reflector import Reflector
from vscheduler.matching import NAMESPACE_NAME_LABEL


def test_a_reflector_lists_and_follows_namespaces(server: FakeApiServer):
    cache, lock = Cache(), threading.Lock()

    def sink(kind: str, event_type: str, obj: dict) -> None:
        with lock:
            apply_event(cache, kind, event_type, obj)

    def labels() -> dict[str, dict[str, str]]:
        with lock:
            return {name: dict(found) for name, found in cache.namespaces.items()}

    server.create(namespace("ml", {"team": "ml"}))
    api = client.ApiClient(client.Configuration(host=server.url))
    stop = threading.Event()
    reflector = Reflector(api, "Namespace", sink, stop, watch_timeout=5, backoff=(0.05, 0.2))
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    try:
        wait_for(reflector.synced.is_set)
        # (the label the API server sets: the manifest did not have it)
        assert labels() == {"ml": {"team": "ml", NAMESPACE_NAME_LABEL: "ml"}}
        server.create(namespace("web"))
        server.patch("Namespace", None, "ml", {"metadata": {"labels": {"tier": "gold"}}})
        wait_for(lambda: labels() == {
            "ml": {"team": "ml", "tier": "gold", NAMESPACE_NAME_LABEL: "ml"},
            "web": {NAMESPACE_NAME_LABEL: "web"}})
        server.delete("Namespace", None, "web")
        wait_for(lambda: list(labels()) == ["ml"])
        # Deleted while the watch was away: the next list drops it.
        server.expire_history("Namespace")
        server.delete("Namespace", None, "ml")
        wait_for(lambda: labels() == {})
    finally:
        stop.set()
        thread.join(timeout=5)
        api.close()


def test_the_daemon_watches_namespaces_and_sees_the_labels_kubectl_sets(
        server: FakeApiServer, daemon: Daemon, kubectl: Callable[..., str]):
    assert "Namespace" in [reflector.kind for reflector in daemon.reflectors]
    server.create(namespace("ml"))
    kubectl("label", "namespace", "ml", "team=ml")
    wait_for(lambda: daemon.cache.namespaces.get("ml") == {
        "team": "ml", NAMESPACE_NAME_LABEL: "ml"})
    kubectl("delete", "namespace", "ml")
    wait_for(lambda: "ml" not in daemon.cache.namespaces)
