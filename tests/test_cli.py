"""The `vscheduler` command as a user meets it: help that states defaults, flag values
checked before anything runs, a bad conf refused before a cluster is looked for."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vscheduler import cli
from vscheduler.cli import main
from vscheduler.registry import ACTIONS_GROUP, PLUGINS_GROUP, installed, summary_of


def _help(capsys, *command: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def _commands(capsys) -> list[str]:
    found = re.search(r"\{([\w,]+)\}", _help(capsys))
    assert found
    return found.group(1).split(",")


def _options(help_text: str) -> dict[str, str]:
    """Each option of a help text (its first spelling) and what is written about it,
    one line however argparse wrapped it."""
    options: dict[str, str] = {}
    section = help_text.split("options:", 1)[1]
    name = None
    for line in section.splitlines():
        entry = re.match(r"^  (-[-\w]+)(.*)$", line)
        if entry:
            name = entry.group(1)
            options[name] = entry.group(2)
        elif name and line.startswith("   "):
            options[name] += " " + line.strip()
    return {k: re.sub(r"\s+", " ", v) for k, v in options.items()}


def test_every_option_that_takes_a_value_states_its_default(capsys):
    commands = _commands(capsys)
    assert {"simulate", "bench", "run", "plugins"} <= set(commands)
    checked = 0
    for command in commands:
        for name, text in _options(_help(capsys, command)).items():
            takes_value = re.match(r"^ ([A-Z]+|\{[\w,]+\})", text) is not None
            if name == "-h" or not takes_value:
                continue  # a switch: absent means off
            assert "default" in text, f"{command} {name}: {text}"
            checked += 1
    assert checked >= 40


BAD_VALUES = [
    (["bench", "--nodes", "0"], "--nodes"),
    (["bench", "--nodes", "many"], "--nodes"),
    (["bench", "--tasks-per-job", "0"], "--tasks-per-job"),
    (["bench", "--gpus-per-node", "0"], "--gpus-per-node"),
    (["bench", "--queues", "0"], "--queues"),
    (["bench", "--sessions", "0"], "--sessions"),
    (["bench", "--running", "-1"], "--running"),
    (["bench", "--churn", "-5"], "--churn"),
    (["bench", "--mig-every", "-1"], "--mig-every"),
    (["bench", "--percentage-nodes-to-find", "101"], "--percentage-nodes-to-find"),
    (["simulate", "x.yaml", "--sessions", "0"], "--sessions"),
    (["simulate", "x.yaml", "--minimum-feasible-nodes", "0"], "--minimum-feasible-nodes"),
    (["run", "--percentage-nodes-to-find", "500"], "--percentage-nodes-to-find"),
    (["run", "--percentage-nodes-to-find", "-1"], "--percentage-nodes-to-find"),
    (["run", "--minimum-percentage-nodes-to-find", "200"],
     "--minimum-percentage-nodes-to-find"),
    (["run", "--schedule-period", "0s"], "--schedule-period"),
    (["run", "--schedule-period", "soon"], "--schedule-period"),
    (["run", "--leader-elect-retry-period", "0ms"], "--leader-elect-retry-period"),
    (["run", "--kube-api-qps", "0"], "--kube-api-qps"),
    (["run", "--kube-api-qps", "nan"], "--kube-api-qps"),
    (["run", "--kube-api-burst", "0"], "--kube-api-burst"),
    (["run", "-v", "11"], "-v/--v"),
    (["run", "--log-format", "yaml"], "--log-format"),
]


@pytest.mark.parametrize(("argv", "flag"), BAD_VALUES, ids=[" ".join(a) for a, _ in BAD_VALUES])
def test_a_bad_value_is_one_error_line_naming_its_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert f"error: argument {flag}: " in errors[0]


def _run_without_cluster(monkeypatch, tmp_path: Path, capsys, *argv: str) -> tuple[int, str]:
    """`vscheduler run` where no cluster can be found: no in-cluster config, no
    kubeconfig file."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path))
    code = main(["run", *argv])
    return code, capsys.readouterr().err


def test_a_bad_conf_is_refused_before_any_cluster_is_looked_for(monkeypatch, tmp_path,
                                                                 capsys):
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text('actions: "enqueue, allocat"\ntiers: []\n')
    code, err = _run_without_cluster(monkeypatch, tmp_path, capsys,
                                     f"--scheduler-conf={conf}")
    assert code == 2
    assert err.startswith(f"vscheduler: bad conf: {conf}")
    assert "allocat" in err and "no cluster" not in err
    code, err = _run_without_cluster(monkeypatch, tmp_path, capsys,
                                     f"--scheduler-conf={tmp_path / 'missing.conf'}")
    assert code == 2 and "bad conf" in err and "cannot read" in err


def test_a_good_conf_and_no_cluster_logs_the_start_up_then_says_so(monkeypatch, tmp_path,
                                                                   capsys):
    code, err = _run_without_cluster(monkeypatch, tmp_path, capsys,
                                     "--schedule-period=1m30s")
    assert code == 2
    assert 'schedule_period="90s"' in err and 'conf="Volcano\'s default"' in err
    assert err.splitlines()[-1].startswith("vscheduler: no cluster to talk to")


@pytest.mark.parametrize(("given", "read"), [("1s", "1s"), ("500ms", "500ms"),
                                             ("1m30s", "90s"), ("1.5h", "5400s")])
def test_durations_read_as_go_writes_them(given, read, monkeypatch, tmp_path, capsys):
    _, err = _run_without_cluster(monkeypatch, tmp_path, capsys, f"--schedule-period={given}")
    assert f'schedule_period="{read}"' in err


def test_the_defaults_the_help_states_are_the_ones_run_starts_with(monkeypatch, tmp_path,
                                                                   capsys):
    run = _options(_help(capsys, "run"))
    stated = {name: re.search(r"default:? ([^ );]+)\)", run[flag]).group(1) for name, flag in
              (("schedule_period", "--schedule-period"),
               ("default_queue", "--default-queue"),
               ("percentage_nodes_to_find", "--percentage-nodes-to-find"),
               ("lease_duration", "--leader-elect-lease-duration"),
               ("renew_deadline", "--leader-elect-renew-deadline"),
               ("retry_period", "--leader-elect-retry-period"))}
    assert stated["schedule_period"] == "1s"
    _, err = _run_without_cluster(monkeypatch, tmp_path, capsys)
    started = dict(re.findall(r' (\w+)="?([^" ]*)"?', err))
    assert {name: started[name] for name in stated} == stated


@settings(max_examples=30, deadline=None)
@given(st.integers(-1000, 1000))
def test_a_percentage_is_taken_from_0_to_100_and_refused_outside(value):
    argv = ["run", "--percentage-nodes-to-find", str(value),
            "--scheduler-conf", "/nonexistent/volcano-scheduler.conf"]
    try:
        code = main(argv)  # parsed: the conf is read next, and is missing
    except SystemExit as exited:
        code = -int(exited.code or 0)  # argparse refused the value
    assert code == (2 if 0 <= value <= 100 else -2)


@pytest.mark.parametrize("bad", [{"nodes": 0}, {"tasks_per_job": 0}, {"queues": 0},
                                 {"running": -1}, {"card_models": ()}])
def test_a_bench_spec_with_nothing_to_run_on_is_refused(bad):
    from vscheduler.bench import BenchSpec

    with pytest.raises(ValueError, match="must"):
        BenchSpec(**bad)


def test_a_volcano_deployments_arguments_run_unchanged(monkeypatch, tmp_path, capsys):
    """The arguments Volcano's own chart gives its scheduler: those that mean something
    here are taken, the rest are logged as ignored with why, and nothing is refused."""
    code, err = _run_without_cluster(
        monkeypatch, tmp_path, capsys, "--logtostderr", "--enable-healthz=true",
        "--leader-elect=true", "--leader-elect-resource-namespace=volcano-system",
        "--kube-api-qps=2000", "--node-worker-threads=20", "--plugins-dir=/plugins",
        "--enable-pprof=true", "-v=3", "2>&1")
    assert code == 2 and err.splitlines()[-1].startswith("vscheduler: no cluster")
    ignored = re.findall(r'"Volcano flag ignored" flag="([^"]+)"', err)
    assert ignored == ["--logtostderr", "--plugins-dir", "--enable-pprof",
                       "--node-worker-threads"]
    assert 'lease="volcano-system/vscheduler"' in err
    assert '"Argument ignored" argument="2>&1"' in err


def test_volcano_flags_that_would_change_decisions_are_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--node-selector=volcano.sh/role:train"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --node-selector" in capsys.readouterr().err


def test_the_lease_takes_volcanos_resource_name_and_namespace(monkeypatch, tmp_path, capsys):
    _, err = _run_without_cluster(monkeypatch, tmp_path, capsys, "--leader-elect",
                                  "--leader-elect-resource-namespace=ops",
                                  "--leader-elect-resource-name=batch")
    assert 'lease="ops/batch"' in err


def test_plugins_lists_each_with_what_it_does_and_its_arguments(
        capsys: pytest.CaptureFixture[str]):
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    for group in (ACTIONS_GROUP, PLUGINS_GROUP):
        for name, point in installed(group).items():
            cls = point.load()
            assert f"  {name} ({point.value})\n" in out
            assert summary_of(cls, name) in " ".join(out.split())
            for argument in cls.arguments:
                assert f"      {argument.key}: {argument.describe()}\n" in out
    assert "      binpack.weight: an integer, default 1\n" in out
    assert "      maxEvictionRatio: a number, default 2\n" in out
    assert "      gracePeriodSeconds: an integer, unset by default\n" in out
    assert "      podOwnerReferenceToServiceType: a map, default {}\n" in out


def test_plugins_shows_those_named_and_refuses_unknown_names(
        capsys: pytest.CaptureFixture[str]):
    assert main(["plugins", "sla", "enqueue"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "actions:" and "  enqueue (" in out
    assert "  sla (" in out and "  gang (" not in out and "  allocate (" not in out
    assert main(["plugins", "sla", "gnag"]) == 2
    assert capsys.readouterr().err == ("vscheduler: not installed: gnag "
                                       "(`vscheduler plugins` lists what is)\n")


def test_plugins_says_which_cannot_be_loaded_and_lists_the_rest(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    broken = EntryPoint("broken", "no_such_package_here:Plugin", PLUGINS_GROUP)
    listed = {**installed(PLUGINS_GROUP), "broken": broken}
    monkeypatch.setattr(cli, "installed", lambda group: listed if group == PLUGINS_GROUP
                        else installed(group))
    assert main(["plugins"]) == 1
    out = capsys.readouterr().out
    assert "  broken (no_such_package_here:Plugin)\n      fails to load: " in out
    assert "No module named 'no_such_package_here'" in out
    assert "  sla (" in out


def test_a_closed_pipe_ends_the_command_quietly():
    """`vscheduler plugins | true`: the reader is gone before the first write. The
    command ends with 141 (a shell's code for SIGPIPE), not a traceback."""
    run = subprocess.run(
        ["bash", "-c", f"{sys.executable} -c 'from vscheduler.cli import entry; "
                       "raise SystemExit(entry())' plugins | true; echo ${PIPESTATUS[0]}"],
        capture_output=True, text=True, check=True)
    assert (run.stdout, run.stderr) == ("141\n", "")
