"""`vscheduler run` as a process: its flags, a kubeconfig, SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.apiserver import FakeApiServer, wait_for
from tests.builders import node, pod
from vscheduler.cli import main


def test_bad_leader_election_timings_are_a_usage_error(capsys, tmp_path: Path):
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")
    assert main(["run", "--kubeconfig", str(kubeconfig), "--leader-elect=true",
                 "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"]) == 2
    assert "renew deadline < lease duration" in capsys.readouterr().err


def _kubeconfig(path: Path, url: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": url}}],
        "users": [{"name": "test", "user": {}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}]}))
    return path


@pytest.mark.parametrize("reach", ["kubeconfig", "master"])
def test_run_binds_and_stops_on_sigterm(tmp_path: Path, reach: str):
    """The API server named by the kubeconfig, or by Volcano's --master over a kubeconfig
    that names a port where nothing listens."""
    with FakeApiServer(bookmark_interval=0.1) as server:
        if reach == "kubeconfig":
            where = ["--kubeconfig", str(_kubeconfig(tmp_path / "kubeconfig", server.url))]
        else:
            dead = _kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")
            where = ["--kubeconfig", str(dead), f"--master={server.url}"]
        process = subprocess.Popen(
            [sys.executable, "-m", "vscheduler.cli", "run", *where,
             "--leader-elect=false", "--schedule-period=100ms"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            server.create_all([node("n1", cpu="4"), pod("p", cpu="1")])
            wait_for(lambda: [b for b in server.bindings() if b.code == 201], timeout=15)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=15) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert [b.pod for b in server.bindings() if b.code == 201] == ["p"]
