"""What `vscheduler run` logs, read from the process's stderr against the API server
stand-in, and the API errors, lease changes and conf reloads the daemon's parts log."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes import client

from tests.apiserver import FakeApiServer, wait_for
from tests.builders import gang, node, pod, queue
from tests.kube.conftest import CONF
from tests.kube.test_run import _kubeconfig
from vscheduler import __version__
from vscheduler.kube.leader import LeaderElector

RECLAIM = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""
# klog's line: level letter, MMDD hh:mm:ss.micro, logger], the quoted message, fields.
TEXT_LINE = re.compile(r'^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} [\w.]+\] "[^"]+"( \w+=\S.*)?$')


class Lines:
    """The stderr lines of a running process, gathered by a thread."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def having(self, text: str) -> list[str]:
        return [line for line in list(self.lines) if text in line]

    def wait(self, text: str, timeout: float = 15) -> list[str]:
        return wait_for(lambda: self.having(text), timeout=timeout)


@contextmanager
def daemon_process(server: FakeApiServer, tmp_path: Path, *flags: str,
                   conf: str = CONF) -> Iterator[Lines]:
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", server.url)
    conf_path = tmp_path / "volcano-scheduler.conf"
    conf_path.write_text(conf)
    process = subprocess.Popen(
        [sys.executable, "-m", "vscheduler", "run", "--kubeconfig", str(kubeconfig),
         "--scheduler-conf", str(conf_path), "--schedule-period=100ms", *flags],
        stderr=subprocess.PIPE, text=True)
    lines = Lines(process.stderr)
    try:
        yield lines
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
        lines._thread.join(timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _fields(line: str) -> dict[str, str]:
    """The key=value pairs of a text line, values as written."""
    return dict(re.findall(r' (\w+)=("(?:[^"\\]|\\.)*"|\[[^\]]*\]|\S+)', line))


def test_sigterm_during_start_up_ends_the_process_at_once(tmp_path):
    # No API server answers: the reflectors retry their first list until stopped.
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")
    process = subprocess.Popen(
        [sys.executable, "-m", "vscheduler", "run", "--kubeconfig", str(kubeconfig)],
        stderr=subprocess.PIPE, text=True)
    lines = Lines(process.stderr)
    try:
        lines.wait('"List or watch failed"')
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    failed = _fields(lines.having('"List or watch failed"')[0])
    assert failed["status"] == "null" and failed["error"]
    assert lines.having('"Not every kind listed in time')


def test_start_up_lines_say_what_runs_and_how(server, tmp_path):
    with daemon_process(server, tmp_path, "--scheduler-name=batch",
                        "--default-queue=research") as lines:
        start = _fields(lines.wait('"Starting vscheduler"')[0])
        election = _fields(lines.wait('"Leader election"')[0])
        endpoints = _fields(lines.wait('"Metrics and health endpoints"')[0])
        lines.wait('"Watches synced"')
    assert start["version"] == json.dumps(__version__)
    assert start["conf"] == json.dumps(str(tmp_path / "volcano-scheduler.conf"))
    assert json.loads(start["actions"]) == ["enqueue", "allocate", "backfill"]
    assert "gang" in json.loads(start["plugins"])
    assert json.loads(start["scheduler_names"]) == ["batch"]
    assert start["default_queue"] == '"research"'
    assert start["schedule_period"] == '"100ms"'
    assert start["dry_run"] == "false"
    assert election["enabled"] == "false" and election["lease_duration"] == '"15s"'
    assert endpoints["metrics"] == "false"
    assert all(TEXT_LINE.match(line) for line in lines.lines), lines.lines


def test_leader_election_settings_are_in_the_start_up_lines(server, tmp_path):
    with daemon_process(server, tmp_path, "--leader-elect=true",
                        "--lock-object-namespace=kube-system") as lines:
        election = _fields(lines.wait('"Leader election"')[0])
        acquired = _fields(lines.wait('"Lease acquired"')[0])
    assert election["enabled"] == "true"
    assert election["lease"] == '"kube-system/vscheduler"'
    assert election["identity"] == acquired["identity"]
    assert (election["renew_deadline"], election["retry_period"]) == ('"10s"', '"2s"')


def test_a_session_is_one_line_and_binds_show_from_v2(server, tmp_path):
    server.create_all([node("n1", cpu="4"), pod("p", cpu="1"), *gang("g", 3, cpu="2")])
    with daemon_process(server, tmp_path) as quiet:
        session = _fields(quiet.wait('"Session done"')[0])
        wait_for(lambda: server.bindings())
    assert session["binds"] == "1" and session["pending_pods"] == "3"
    assert session["pending_jobs"] == "1" and session["evictions"] == "0"
    assert float(session["duration_ms"]) >= 0
    assert not quiet.having('"Binding"') and not quiet.having('"Listed"')

    server.create_all([pod("q", cpu="1")])
    with daemon_process(server, tmp_path, "-v", "2") as verbose:
        bind = _fields(verbose.wait('"Binding"')[0])
    assert (bind["pod"], bind["node"]) == ('"default/q"', '"n1"')
    assert not verbose.having('"Listed"')

    with daemon_process(server, tmp_path, "--v=4") as detailed:
        detailed.wait('"Watches synced"')
        listed = {_fields(line)["kind"] for line in detailed.having('"Listed"')}
    assert {'"Node"', '"Pod"', '"PodGroup"', '"Queue"'} <= listed


def test_json_lines_parse_with_their_fields(server, tmp_path):
    server.create_all([node("n1", cpu="4"), pod("p", cpu="1")])
    with daemon_process(server, tmp_path, "--log-format=json", "-v", "2") as lines:
        lines.wait('"Session done"')
        lines.wait('"Binding"')
    records = [json.loads(line) for line in lines.lines]
    assert all({"ts", "level", "logger", "msg"} <= r.keys() for r in records)
    bind = next(r for r in records if r["msg"] == "Binding")
    assert (bind["pod"], bind["node"], bind["level"], bind["v"]) == \
        ("default/p", "n1", "info", 2)
    start = next(r for r in records if r["msg"] == "Starting vscheduler")
    assert start["actions"] == ["enqueue", "allocate", "backfill"]
    assert start["dry_run"] is False
    session = next(r for r in records if r["msg"] == "Session done")
    assert session["binds"] == 1 and session["v"] == 0


def test_dry_run_logs_every_decision_and_writes_none(server, tmp_path):
    server.create_all([node("n1", cpu="4"), pod("p", cpu="1"), *gang("g", 3, cpu="2")])
    with daemon_process(server, tmp_path, "--dry-run", "--leader-elect",
                        "--log-format=json") as lines:
        lines.wait('"Session done"')
        lines.wait('"Dry run: would record event"')
    records = [json.loads(line) for line in lines.lines]
    said = {(r["msg"], r.get("pod") or r.get("podgroup") or r.get("object")) for r in records}
    assert ("Dry run: would bind", "default/p") in said
    assert ("Dry run: would write podgroup status", "default/g") in said
    assert ("Dry run: would write pod status", "default/g-1") in said
    assert ("Dry run: would record event", "PodGroup/default/g") in said
    assert all(r["level"] == "info" for r in records if r["msg"].startswith("Dry run"))
    # Each decision once, as the real writer would write it once.
    binds = [r for r in records if r["msg"] == "Dry run: would bind"]
    assert len(binds) == 1 and binds[0]["node"] == "n1"
    assert not server.bindings() and not server.events()
    assert not (server.get("PodGroup", "default", "g").get("status") or {}).get("conditions")
    # Nor a Lease: a dry run must not keep the replicas that schedule standing by.
    assert ("Dry run: no leader election", None) in said
    assert not server.objects("Lease")


def test_an_eviction_shows_at_v2_with_its_action_and_preemptor(server, tmp_path):
    server.create_all([node("n1", cpu="4"), queue("a"), queue("b"),
                       *(pod(f"a-{i}", cpu="1", queue="a", node_name="n1")
                         for i in range(4))])
    with daemon_process(server, tmp_path, "-v", "2", conf=RECLAIM) as lines:
        lines.wait('"Watches synced"')
        server.create_all([pod("b-0", cpu="1", queue="b")])
        evicting = _fields(lines.wait('"Evicting"')[0])
    assert evicting["node"] == '"n1"' and evicting["action"] == '"reclaim"'
    assert evicting["preemptor"] == '"default/b-0"'
    assert re.fullmatch(r'"default/a-\d"', evicting["pod"])


# ------------------------------------------------------------------ in-process parts


def _records(caplog, message: str) -> list[dict]:
    return [{"level": r.levelno, **getattr(r, "fields", {})} for r in list(caplog.records)
            if r.getMessage() == message]


def test_a_refused_bind_is_logged_with_its_pod_status_and_message(server, daemon, caplog):
    caplog.set_level(logging.INFO)
    server.fail("POST", r"/binding$", 500, times=1, message="etcd is sulking")
    server.create_all([node("n1", cpu="4"), pod("p", cpu="1")])
    failed = wait_for(lambda: _records(caplog, "Bind failed"))[0]
    assert failed["kind"] == "Pod" and failed["object"] == "default/p"
    assert failed["node"] == "n1" and failed["status"] == 500
    assert "etcd is sulking" in failed["error"]
    assert failed["level"] == logging.WARNING


def test_a_refused_status_patch_and_list_are_logged_with_their_object(server, daemon,
                                                                      caplog):
    caplog.set_level(logging.INFO)
    server.fail("PATCH", r"/pods/big/status$", 422, times=1, message="bad condition")
    server.create_all([node("n1", cpu="1"), pod("big", cpu="2")])
    patch = wait_for(lambda: _records(caplog, "Patch failed"))[0]
    assert (patch["kind"], patch["object"], patch["status"]) == ("Pod", "default/big", 422)
    assert "bad condition" in patch["error"]

    server.fail("GET", r"^/api/v1/nodes$", 403, times=1, watch=False,
                message="nodes is forbidden")
    server.expire_history()
    server.close_watches()
    refused = wait_for(lambda: _records(caplog, "List or watch failed"), timeout=10)[0]
    assert (refused["kind"], refused["status"]) == ("Node", 403)
    assert "forbidden" in refused["error"]


def test_a_changed_conf_is_logged_and_a_bad_one_is_an_error(daemon, caplog):
    caplog.set_level(logging.INFO)
    path = daemon.conf_path
    Path(path).write_text(CONF.replace('"enqueue, allocate, backfill"', '"allocate"'))
    os.utime(path, (1, 1))
    reloaded = wait_for(lambda: _records(caplog, "Conf reloaded"))[0]
    assert reloaded["actions"] == ["allocate"] and reloaded["conf"] == path
    Path(path).write_text('actions: "enqueue, allocat"\ntiers: []\n')
    os.utime(path, (2, 2))
    refused = wait_for(lambda: _records(caplog, "Conf not reloaded, keeping the last "
                                                "good one"))[0]
    assert refused["level"] == logging.ERROR and "allocat" in refused["error"]


def test_lease_acquired_and_lost_are_logged(server, caplog):
    caplog.set_level(logging.INFO)
    api = client.ApiClient(client.Configuration(host=server.url))
    elector = LeaderElector(api, "kube-system", "vscheduler", "me", lease_duration=1.0,
                            renew_deadline=0.6, retry_period=0.1)
    stop = threading.Event()
    thread = threading.Thread(target=elector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        acquired = wait_for(lambda: _records(caplog, "Lease acquired"))[0]
        assert (acquired["lease"], acquired["identity"]) == ("kube-system/vscheduler", "me")
        server.go_down()
        wait_for(elector.lost.is_set, timeout=5)
        failed = _records(caplog, "Lease not read or renewed")
        assert failed and failed[0]["status"] is None and failed[0]["leader"] is True
        lost = _records(caplog, "Leadership lost: lease not renewed within the renew "
                                "deadline")
        assert lost[0]["level"] == logging.ERROR and lost[0]["renew_deadline"] == 0.6
    finally:
        stop.set()
        thread.join(timeout=5)
        server.come_back()
        api.close()
