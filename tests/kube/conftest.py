"""What the daemon's tests share: the API server stand-in and a daemon running on it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.apiserver import FakeApiServer
from vscheduler.kube.daemon import Daemon

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def start_daemon(server: FakeApiServer, tmp_path: Path, conf: str = CONF,
                 **writer: object) -> tuple[Daemon, Callable[[], None]]:
    """A daemon on `server`, its first lists done and its loop running in a thread,
    with short watch timeouts and back-off; `writer` sets attributes of its writer.
    Returns the daemon and the function that stops it."""
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(conf)
    api = client.ApiClient(client.Configuration(host=server.url))
    daemon = Daemon(api, str(path), period=0.05)
    for name, value in writer.items():
        setattr(daemon.writer, name, value)
    for reflector in daemon.reflectors:
        reflector.watch_timeout = 5
        reflector.backoff = (0.05, 0.2)
    assert daemon.start_watches(synced_timeout=5)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()

    def stop() -> None:
        daemon.stop.set()
        thread.join(timeout=10)
        api.close()

    return daemon, stop


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(bookmark_interval=0.1) as srv:
        yield srv


@pytest.fixture
def daemon(server: FakeApiServer, tmp_path: Path) -> Iterator[Daemon]:
    running, stop = start_daemon(server, tmp_path)
    yield running
    stop()
