"""volcano-scheduler.conf (vscheduler/conf.py): Volcano confs load, and every mistake is
one ConfError naming its place; the CLI turns it into one line and exit code 2.

Confs here name only priority, gang and conformance (with the enqueue, allocate and
backfill actions), so they do not depend on other plugins being installed; the default
conf test needs every plugin of Volcano's default conf.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vscheduler import cli, registry
from vscheduler.conf import ConfError, PluginOption, SchedulerConf, load_conf, parse_conf
from vscheduler.hookspecs import ENABLE_FLAGS

ROOT = Path(__file__).parent.parent
SOURCE = "volcano-scheduler.conf"

GOOD = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: conformance
"""


def parse(text: str) -> SchedulerConf:
    return parse_conf(text, SOURCE)


def error_of(text: str) -> str:
    with pytest.raises(ConfError) as caught:
        parse(text)
    message = str(caught.value)
    assert "\n" not in message, "a conf error is one line"
    assert message.startswith(f"{SOURCE}:"), "a conf error names the file"
    return message


# --------------------------------------------------------------------------- loading


def test_default_conf_when_no_file() -> None:
    """Needs every plugin of Volcano's default conf (overcommit, drf, predicates,
    proportion, nodeorder) to be installed."""
    conf = load_conf(None)
    assert conf.action_names() == ["enqueue", "allocate", "backfill"]
    assert [[o.name for o in tier] for tier in conf.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]
    assert conf.warnings == []


def test_volcano_conf_loads() -> None:
    text = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
    enableJobStarving: false
    enableHierarchy: true
    enabledVictim: true
    enableBestNode: false
- plugins:
  - name: conformance
    enableJobOrder: true
configurations:
- name: allocate
  arguments:
    predicateErrorCacheEnable: false
metrics:
  type: prometheus
  address: http://prometheus.monitoring:9090
  interval: 30s
"""
    conf = parse(text)
    assert conf.source == SOURCE
    assert conf.action_names() == ["enqueue", "allocate", "backfill"]
    assert conf.plugin_names() == ["priority", "gang", "conformance"]
    assert [len(tier) for tier in conf.tiers] == [2, 1]
    gang = conf.tiers[0][1]
    assert gang.flags == {"enablePreemptable": False, "enableJobStarving": False,
                          "enableHierarchy": True, "enabledVictim": True,
                          "enableBestNode": False}
    assert conf.action_args["allocate"] == {"predicateErrorCacheEnable": False}
    # defaults filled in for an action with no configuration
    assert conf.action_args["backfill"] == {"predicateErrorCacheEnable": True}
    # a mode only capacity has: asked of gang, it is accepted and said to do nothing
    assert conf.warnings == [f"{SOURCE}: tiers[0].plugins[1] (gang): enableHierarchy has "
                             "no effect on gang"]


def test_a_mode_flag_reaches_the_plugin_that_reads_it() -> None:
    """capacity reads enableHierarchy as a mode: it arrives among its arguments, off
    unless asked for."""
    on = parse('actions: "allocate"\ntiers:\n- plugins:\n  - name: capacity\n'
               '    enableHierarchy: true\n')
    off = parse('actions: "allocate"\ntiers:\n- plugins:\n  - name: capacity\n')
    assert on.tiers[0][0].args["enableHierarchy"] is True
    assert off.tiers[0][0].args["enableHierarchy"] is False
    assert on.warnings == off.warnings == []


def test_actions_list_tolerates_spaces_and_keeps_order() -> None:
    conf = parse('actions: "allocate ,enqueue,  backfill"\n'
                 "tiers:\n- plugins:\n  - name: gang\n")
    assert conf.action_names() == ["allocate", "enqueue", "backfill"]
    cls = conf.actions[0][1]
    assert cls.name == "allocate"


def test_bool_argument_accepts_a_bool_string() -> None:
    # Volcano's GetBool parses "false"/"true" strings
    conf = parse(GOOD + 'configurations:\n- name: allocate\n  arguments:\n'
                        '    predicateErrorCacheEnable: "false"\n')
    assert conf.action_args["allocate"]["predicateErrorCacheEnable"] is False


def test_first_configuration_entry_wins_with_a_warning() -> None:
    conf = parse(GOOD + "configurations:\n"
                        "- name: allocate\n  arguments: {predicateErrorCacheEnable: false}\n"
                        "- name: allocate\n  arguments: {predicateErrorCacheEnable: true}\n")
    assert conf.action_args["allocate"]["predicateErrorCacheEnable"] is False
    assert len(conf.warnings) == 1
    assert "configurations[1]" in conf.warnings[0]


def test_unknown_argument_keys_only_warn() -> None:
    conf = parse("""\
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
    arguments:
      gang.someFutureKnob: 3
configurations:
- name: allocate
  arguments:
    somethingVolcanoHasAndWeDoNot: 1
""")
    assert conf.plugin_names() == ["priority", "gang"]
    assert len(conf.warnings) == 2
    plugin_warning = next(w for w in conf.warnings if "gang.someFutureKnob" in w)
    assert "tiers[0].plugins[1] (gang)" in plugin_warning
    action_warning = next(w for w in conf.warnings if "somethingVolcanoHasAndWeDoNot" in w)
    assert "allocate" in action_warning
    assert all(w.startswith(SOURCE) for w in conf.warnings)


def test_configurations_of_an_action_not_run_warn() -> None:
    """Arguments for preempt in a conf that runs no preempt (or for an action that does
    not exist) were read by nothing, unsaid: a misspelt strategy there was never
    refused. Now a warning names each."""
    conf = parse("""\
actions: "enqueue, allocate"
tiers:
- plugins: [{name: gang}]
configurations:
- name: preempt
  arguments: {strategy: Bogus}
- name: frob
- name: allocate
  arguments: {predicateErrorCacheEnable: false}
""")
    assert conf.warnings == [
        f"{SOURCE}: configurations (preempt): 'preempt' is not among the actions run, so its "
        "arguments are not read (nor checked)",
        f"{SOURCE}: configurations (frob): 'frob' is not among the actions run, so its "
        "arguments are not read (nor checked)"]


def test_load_conf_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.conf"
    path.write_text(GOOD)
    conf = load_conf(str(path))
    assert conf.source == str(path)
    assert conf.plugin_names() == ["priority", "gang", "conformance"]


def test_load_conf_missing_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.conf"
    with pytest.raises(ConfError, match=r"nope\.conf"):
        load_conf(str(path))


def test_conf_file_not_in_utf8_is_a_conf_error(tmp_path: Path) -> None:
    # a conf saved in Latin-1 (a comment with "café") is a mistake in the conf like any
    # other: one ConfError naming the file, not a UnicodeDecodeError
    path = tmp_path / "latin1.conf"
    path.write_bytes(b'actions: "allocate"\n# caf\xe9\ntiers:\n- plugins:\n  - name: gang\n')
    with pytest.raises(ConfError) as caught:
        load_conf(str(path))
    assert str(path) in str(caught.value)


def test_errors_from_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.conf"
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gnag\n')
    with pytest.raises(ConfError) as caught:
        load_conf(str(path))
    assert str(caught.value).startswith(f"{path}: tiers[0].plugins[0] (gnag)")


# --------------------------------------------------------------------------- mistakes


# Each conf mistake is one ConfError (see error_of) whose message has these words.
MISTAKES = [
    pytest.param('actions: "enqueue, alocate"\ntiers:\n- plugins:\n  - name: gang\n',
                 ["actions", "'alocate'", "enqueue", "allocate", "backfill"],
                 id="unknown action, installed actions listed"),
    pytest.param("""\
actions: "allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: priority
  - name: conformance
  - name: gnag
""", ["tiers[1].plugins[2] (gnag)", "unknown plugin 'gnag'", "priority", "gang",
      "conformance"], id="unknown plugin, its place and installed plugins"),
    pytest.param("""\
actions: "allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: priority
    enableJobOder: false
""", ["tiers[1].plugins[0] (priority)", "'enableJobOder'"],
        id="unknown key in a plugin entry"),
    pytest.param("""\
actions: "allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: binpack
    arguments:
      binpack.weight: heavy
""", ["tiers[1].plugins[0] (binpack)", "binpack.weight", "heavy"],
        id="plugin argument of the wrong type (binpack: typed arguments)"),
    pytest.param(GOOD + """\
configurations:
- name: allocate
  arguments:
    predicateErrorCacheEnable: "yes-please"
""", ["configurations", "allocate", "predicateErrorCacheEnable", "yes-please"],
        id="action argument of the wrong type"),
    pytest.param("""\
actions: "allocate"
tiers:
- plugins:
  - name: gang
   - name: priority
""", ["line 5", "YAML"], id="bad YAML gives the line"),
    pytest.param('actions: "allocate"\ntiers: [\n', ["YAML", "line "],
                 id="unclosed flow YAML"),
    pytest.param("tiers:\n- plugins:\n  - name: gang\n", ["actions"], id="missing actions"),
    pytest.param('actions: "allocate,,backfill"\ntiers:\n- plugins:\n  - name: gang\n',
                 ["actions"], id="empty action name"),
    pytest.param('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
                 "- name: priority\n", ["tiers[1]", "plugins"],
                 id="tier without a plugins list"),
    pytest.param('actions: "allocate"\ntiers:\n- plugins:\n  - gang\n',
                 ["tiers[0].plugins[0]", "name"], id="plugin entry without a name"),
    pytest.param("""\
actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: conformance
  - name: gang
""", ["tiers[1].plugins[1]", "'gang'", "twice"], id="plugin listed twice"),
    pytest.param('actions: "enqueue, allocate, backfill, allocate"\n'
                 "tiers:\n- plugins:\n  - name: gang\n",
                 ["actions", "'allocate'", "twice"], id="action listed twice"),
    pytest.param('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
                 "    arguments: [1, 2]\n", ["tiers[0].plugins[0] (gang)", "arguments"],
                 id="plugin arguments not a map"),
    pytest.param('actions: "allocate"\ntier:\n- plugins:\n  - name: gang\n', ["'tier'"],
                 id="unknown top-level key"),
    pytest.param("- actions\n- tiers\n", [], id="top level not a map"),
]


@pytest.mark.parametrize(("text", "words"), MISTAKES)
def test_a_mistake_is_one_error_that_says_what_and_where(text: str, words: list[str]) -> None:
    message = error_of(text)
    for word in words:
        assert word in message, word


@pytest.mark.parametrize("flag_value", ['"no"', "0", "1", '"false"', "null", "[true]"])
def test_enable_flag_must_be_a_bool(flag_value: str) -> None:
    message = error_of(f"""\
actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
    enableJobOrder: {flag_value}
""")
    assert "tiers[0].plugins[1] (gang)" in message
    assert "enableJobOrder" in message


def test_plugin_arguments_validated_and_defaulted() -> None:
    conf = parse("""\
actions: "allocate"
tiers:
- plugins:
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.resources.nvidia.com/gpu: 2
""")
    args = conf.tiers[0][0].args
    assert args["binpack.weight"] == 10
    assert args["binpack.resources.nvidia.com/gpu"] == 2   # a `.*` key
    assert args["binpack.cpu"] == 1                        # default filled in
    assert conf.warnings == []


@pytest.mark.parametrize("actions", ["[enqueue, allocate]", "3", '""', "null", "{a: b}"])
def test_actions_must_be_a_string(actions: str) -> None:
    message = error_of(f"actions: {actions}\ntiers:\n- plugins:\n  - name: gang\n")
    assert "actions" in message


@pytest.mark.parametrize("tiers", ["tiers: []", "tiers: null", "", "tiers: {plugins: []}"])
def test_tiers_must_be_a_non_empty_list(tiers: str) -> None:
    message = error_of(f'actions: "allocate"\n{tiers}\n')
    assert "tiers" in message


# --------------------------------------------------------------------------- enable flags


def option(flags: dict[str, bool]) -> PluginOption:
    return PluginOption("p", object, {}, flags)


def test_every_hook_enabled_by_default() -> None:
    plugin = option({})
    for hook in [*ENABLE_FLAGS, "job_valid", "victim_queue_order", "allocate_event",
                 "deallocate_event"]:
        assert plugin.enabled(hook), hook


@pytest.mark.parametrize(
    ("flag", "hooks"),
    [
        ("enableJobOrder", ["job_order", "job_order_key"]),
        ("enableQueueOrder", ["queue_order"]),
        ("enableTaskOrder", ["task_order"]),
        ("enablePredicate", ["predicate", "pre_predicate"]),
        ("enableNodeOrder", ["node_order", "batch_node_order"]),
        ("enableJobReady", ["job_ready"]),
        ("enableJobPipelined", ["job_pipelined"]),
        ("enableJobEnqueued", ["job_enqueueable", "job_enqueued"]),
        ("enableJobStarving", ["job_starving"]),
        ("enabledAllocatable", ["allocatable"]),
        ("enabledOverused", ["overused"]),
        ("enablePreemptive", ["preemptive"]),
        ("enablePreemptable", ["preemptable"]),
        ("enableReclaimable", ["reclaimable"]),
    ],
)
def test_flag_false_turns_off_exactly_its_hooks(flag: str, hooks: list[str]) -> None:
    plugin = option({flag: False})
    for hook in ENABLE_FLAGS:
        assert plugin.enabled(hook) == (hook not in hooks), hook
    assert option({flag: True}).enabled(hooks[0])


def test_flags_read_from_a_conf() -> None:
    conf = parse("""\
actions: "allocate"
tiers:
- plugins:
  - name: priority
    enableJobOrder: false
  - name: gang
    enableJobReady: false
    enableJobPipelined: true
""")
    priority, gang = conf.tiers[0]
    assert not priority.enabled("job_order")
    assert priority.enabled("task_order")
    assert not gang.enabled("job_ready")
    assert gang.enabled("job_pipelined")
    assert gang.enabled("job_order")


def test_plugin_option_hooks_are_the_plugin_class_hooks() -> None:
    conf = parse(GOOD)
    gang = conf.tiers[0][1]
    assert {"job_ready", "job_pipelined", "job_valid"} <= gang.hooks()
    assert "predicate" not in gang.hooks()


# --------------------------------------------------------------------------- CLI


MANIFEST = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default}
spec:
  schedulerName: vscheduler
  containers:
  - name: main
    image: busybox
    resources: {requests: {cpu: "1", memory: 1Gi}}
"""


def run_cli(tmp_path: Path, conf_text: str, capsys: pytest.CaptureFixture[str]
            ) -> tuple[int, str, str, Path]:
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(MANIFEST)
    conf_path = tmp_path / "scheduler.conf"
    conf_path.write_text(conf_text)
    code = cli.main(["simulate", str(manifest), "--conf", str(conf_path)])
    out, err = capsys.readouterr()
    return code, out, err, conf_path


@pytest.mark.parametrize(
    ("conf_text", "place"),
    [
        ('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: gnag\n',
         "tiers[0].plugins[1] (gnag)"),
        ('actions: "alocate"\ntiers:\n- plugins:\n  - name: gang\n', "actions"),
        ('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: 3\n',
         "enableJobOrder"),
        (GOOD + "configurations:\n- name: allocate\n  arguments:\n"
                "    predicateErrorCacheEnable: yes-please\n",
         "predicateErrorCacheEnable"),
        ('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n   - name: priority\n',
         "line 5"),
    ],
)
def test_cli_bad_conf_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], conf_text: str, place: str
) -> None:
    code, out, err, conf_path = run_cli(tmp_path, conf_text, capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(conf_path) in lines[0]
    assert place in lines[0]


def test_cli_missing_conf_file_exits_2(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(MANIFEST)
    code = cli.main(["simulate", str(manifest), "--conf", str(tmp_path / "none.conf")])
    _, err = capsys.readouterr()
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "none.conf" in err


def test_cli_conf_not_in_utf8_exits_2(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(MANIFEST)
    conf_path = tmp_path / "latin1.conf"
    conf_path.write_bytes(b'actions: "allocate"\n# caf\xe9\ntiers:\n- plugins:\n'
                          b"  - name: gang\n")
    code = cli.main(["simulate", str(manifest), "--conf", str(conf_path)])
    _, err = capsys.readouterr()
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert str(conf_path) in err


def test_cli_good_conf_with_unknown_argument_warns_and_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf_text = GOOD + "configurations:\n- name: allocate\n  arguments: {futureKnob: 1}\n"
    code, out, err, _ = run_cli(tmp_path, conf_text, capsys)
    assert code == 0
    assert "futureKnob" in err
    assert "warning" in err
    assert "p1" in out


@pytest.mark.parametrize("nested", ["[" * 5000 + "]" * 5000,
                                    "{a: " * 5000 + "1" + "}" * 5000,
                                    "\n  " + "- " * 3000 + "x"],
                         ids=["flow lists", "flow maps", "block lists"])
def test_a_conf_nested_hundreds_of_levels_is_one_conf_error(nested: str) -> None:
    message = error_of(f'actions: "allocate"\ntiers: {nested}\n')
    assert "nested more than 100 levels deep" in message


def test_cli_nested_conf_exits_2_with_one_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, conf_path = run_cli(tmp_path, "tiers: " + "[" * 3000 + "]" * 3000,
                                        capsys)
    assert code == 2 and out == ""
    assert err == (f"vscheduler: bad conf: {conf_path}: not valid YAML: line 1: nested more "
                   "than 100 levels deep\n")


def _numeric_arguments() -> list[tuple[str, str, str, type]]:
    """(plugins or actions, name, a key, int or float) for every numeric argument of
    every installed plugin and action (a `.*` key as one key it accepts)."""
    found = []
    for group, load in ((registry.PLUGINS_GROUP, registry.load_plugin),
                        (registry.ACTIONS_GROUP, registry.load_action)):
        for name in registry.installed(group):
            for argument in getattr(load(name), "arguments", ()):
                if argument.type in (int, float):
                    key = argument.key.replace(".*", ".nvidia.com/gpu")
                    found.append((group.rsplit(".", 1)[1], name, key, argument.type))
    return found


def _conf_with(kind: str, name: str, key: str, value: str) -> str:
    """A conf with every action, and `value` for `key` of plugin or action `name`."""
    plugins = ["gang", "predicates", "proportion"]
    # (capacity reads its ancestor level only with hierarchy on)
    flag = "enableHierarchy: true, " if name == "capacity" else ""
    entry = f"{{name: {name}, {flag}arguments: {{{key!r}: {value}}}}}" \
        if kind == "plugins" else None
    tier = [f"{{name: {p}}}" for p in plugins if p != name] + ([entry] if entry else [])
    text = ('actions: "enqueue, allocate, backfill, reclaim, preempt"\n'
            f"tiers:\n- plugins: [{', '.join(tier)}]\n")
    if kind == "actions":
        text += f"configurations:\n- {{name: {name}, arguments: {{{key!r}: {value}}}}}\n"
    return text


@pytest.mark.parametrize(("kind", "name", "key", "kind_of_number"), _numeric_arguments(),
                         ids=lambda value: getattr(value, "__name__", str(value)))
def test_a_numeric_argument_of_any_size_is_refused_or_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, name: str, key: str,
        kind_of_number: type) -> None:
    """A weight or factor of 400 digits once ended the session (a float conversion that
    overflowed) or the conf's reading; a level of a billion kept reclaim looping. Past
    what a number of its type holds, it is a bad conf; up to that, the sessions run."""
    example = "topology" if name == "network-topology-aware" else "tidal"
    manifest = ROOT / "examples" / f"{example}.yaml"
    conf_path = tmp_path / "scheduler.conf"
    conf_path.write_text(_conf_with(kind, name, key, "1" + "0" * 400))
    assert cli.main(["simulate", str(manifest), "--conf", str(conf_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and key in err, err
    largest = "9223372036854775807" if kind_of_number is int else "1.0e+308"
    conf_path.write_text(_conf_with(kind, name, key, largest))
    assert cli.main(["simulate", str(manifest), "--conf", str(conf_path),
                     "--sessions", "2"]) == 0
