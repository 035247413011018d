"""What the daemon's tests share: the API server stand-in and a daemon running on it."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.apiserver import FakeApiServer
from tests.binaries import binary
from vscheduler.kube.daemon import Daemon
from vscheduler.kube.leader import LeaderElector

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def start_daemon(server: FakeApiServer, tmp_path: Path, conf: str = CONF, *,
                 elector: LeaderElector | None = None,
                 **writer: object) -> tuple[Daemon, Callable[[], None]]:
    """A daemon on `server`, its first lists done and its loop running in a thread,
    with short watch timeouts and back-off, electing with `elector` if given; `writer`
    sets attributes of its writer. Returns the daemon and the function that stops it."""
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(conf)
    api = client.ApiClient(client.Configuration(host=server.url))
    daemon = Daemon(api, str(path), period=0.05, elector=elector)
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


@pytest.fixture
def kubectl(server: FakeApiServer, tmp_path: Path) -> Callable[..., str]:
    """Run the real kubectl against the stand-in; its output (stdout), or a failure."""
    config = tmp_path / "kubeconfig"
    config.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: test, cluster: {{server: "{server.url}"}}}}]
users: [{{name: test, user: {{token: test}}}}]
contexts: [{{name: test, context: {{cluster: test, user: test, namespace: default}}}}]
current-context: test
""")
    # (its own HOME: kubectl keeps a discovery cache there, which no test may share)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path),
           "KUBECONFIG": str(config)}

    def run(*args: str) -> str:
        done = subprocess.run([binary("kubectl"), *args], capture_output=True, text=True,
                              env=env, timeout=60)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    return run


def describe_section(text: str, title: str) -> str:
    """A top-level section of `kubectl describe` output (`Events:` ... to the next)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i] and not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start:end])
