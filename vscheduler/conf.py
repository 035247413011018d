"""Volcano's `volcano-scheduler.conf`, read and checked in full before scheduling starts.

Every mistake is one `ConfError` whose message names the place (`tiers[1].plugins[2]
(binpack): argument 'binpack.weight' must be an integer, got 'x'`); the CLI exits with 2,
and the daemon keeps the conf it has. The text is read by `vscheduler.textinput`, so a
conf nested hundreds of levels deep is one more such error, not a crash.
"""

from __future__ import annotations

from typing import Any

from vscheduler.hookspecs import ENABLE_FLAGS
from vscheduler.plugin import ArgumentError, check_arguments
from vscheduler.registry import RegistryError, hooks_of, load_action, load_plugin
from vscheduler.textinput import MAX_CONF_BYTES, TextError, load_yaml, read_limited

__all__ = ["DEFAULT_CONF", "ConfError", "PluginOption", "SchedulerConf", "load_conf",
           "parse_conf"]

DEFAULT_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

# Flags Volcano knows that gate extension points this scheduler does not have; accepted
# so Volcano confs load unchanged.
_OTHER_VOLCANO_FLAGS = {
    "enableBestNode", "enableTargetJob", "enableReservedNodes", "enabledVictim",
    "enabledSubJobReady", "enabledSubJobPipelined",
    "enabledSubJobOrder", "enabledHyperNodeGradient", "enableHierarchy",
    "enabledClusterOrder",
}
# Default-off flags (every other flag is on when absent, as in Volcano).
_OFF_BY_DEFAULT = {"enableHierarchy", "enabledClusterOrder"}
_KNOWN_FLAGS = set(ENABLE_FLAGS.values()) | _OTHER_VOLCANO_FLAGS


class ConfError(Exception):
    """A conf that cannot be used; the message is one line naming the place."""


class PluginOption:
    """One plugin in a tier: its class, validated arguments and enable flags."""

    __slots__ = ("args", "cls", "flags", "name")

    def __init__(self, name: str, cls: type, args: dict[str, Any], flags: dict[str, bool]):
        self.name = name
        self.cls = cls
        self.args = args
        self.flags = flags

    def enabled(self, hook: str) -> bool:
        """Whether the session consults this plugin's `hook`."""
        flag = ENABLE_FLAGS.get(hook)
        return flag is None or self.flags.get(flag, flag not in _OFF_BY_DEFAULT)

    def hooks(self) -> frozenset[str]:
        return hooks_of(self.cls)


class SchedulerConf:
    __slots__ = ("action_args", "actions", "source", "tiers", "warnings")

    def __init__(self, actions: list[tuple[str, type, dict[str, Any]]],
                 tiers: list[list[PluginOption]], source: str, warnings: list[str]) -> None:
        self.actions = actions
        self.tiers = tiers
        self.source = source
        self.warnings = warnings
        self.action_args = {name: args for name, _, args in actions}

    def action_names(self) -> list[str]:
        return [name for name, _, _ in self.actions]

    def plugin_names(self) -> list[str]:
        return [option.name for tier in self.tiers for option in tier]


def load_conf(path: str | None) -> SchedulerConf:
    """The conf in `path`, or Volcano's default conf when no path is given."""
    if path is None:
        return parse_conf(DEFAULT_CONF, "default conf")
    try:
        with open(path, "rb") as handle:
            text = read_limited(handle, MAX_CONF_BYTES, path).decode("utf-8")
    except OSError as err:
        raise ConfError(f"{path}: cannot read: {err.strerror}") from None
    except TextError as err:
        raise ConfError(str(err)) from None
    except UnicodeDecodeError as err:
        raise ConfError(f"{path}: not UTF-8 text (byte {err.start})") from None
    return parse_conf(text, path)


def parse_conf(text: str, source: str = "conf") -> SchedulerConf:
    try:
        data = load_yaml(text)
    except TextError as err:
        raise ConfError(f"{source}: not valid YAML: {err}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfError(f"{source}: expected a map with 'actions' and 'tiers'")
    unknown = sorted(set(map(str, data)) - {"actions", "tiers", "configurations", "metrics"})
    if unknown:
        raise ConfError(f"{source}: unknown key {unknown[0]!r} "
                        "(expected actions, tiers, configurations, metrics)")
    warnings: list[str] = []
    action_args = _configurations(data.get("configurations"), source, warnings)
    actions = _actions(data.get("actions"), source, action_args, warnings)
    listed = {name for name, _, _ in actions}
    warnings.extend(f"{source}: configurations ({name}): {name!r} is not among the actions "
                    "run, so its arguments are not read (nor checked)"
                    for name in action_args if name not in listed)
    tiers = _tiers(data.get("tiers"), source, warnings)
    return SchedulerConf(actions, tiers, source, warnings)


def _actions(
    raw: Any, source: str, args: dict[str, dict[str, Any]], warnings: list[str]
) -> list:
    if not isinstance(raw, str) or not raw.strip():
        raise ConfError(f"{source}: actions: expected a comma-separated string such as "
                        "\"enqueue, allocate, backfill\"")
    actions = []
    for name in (part.strip() for part in raw.split(",")):
        if not name:
            raise ConfError(f"{source}: actions: empty action name in {raw!r}")
        try:
            cls = load_action(name)
        except RegistryError as err:
            raise ConfError(f"{source}: actions: {err}") from None
        if name in (a[0] for a in actions):
            raise ConfError(f"{source}: actions: {name!r} is listed twice")
        try:
            values, unknown = check_arguments(cls.arguments, args.get(name))
        except ArgumentError as err:
            raise ConfError(f"{source}: configurations ({name}): {err}") from None
        warnings.extend(f"{source}: configurations ({name}): unknown argument {key!r}, ignored"
                        for key in unknown)
        actions.append((name, cls, values))
    return actions


def _configurations(raw: Any, source: str, warnings: list[str]) -> dict[str, dict[str, Any]]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ConfError(f"{source}: configurations: expected a list of {{name, arguments}}")
    out: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(raw):
        where = f"{source}: configurations[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfError(f"{where}: expected a map with a 'name'")
        arguments = entry.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ConfError(f"{where} ({entry['name']}): arguments: expected a map")
        # Volcano reads the first entry of a name; later ones are ignored.
        if entry["name"] in out:
            warnings.append(f"{where}: second entry for {entry['name']!r} ignored")
            continue
        out[entry["name"]] = arguments
    return out


def _tiers(raw: Any, source: str, warnings: list[str]) -> list[list[PluginOption]]:
    if not isinstance(raw, list) or not raw:
        raise ConfError(f"{source}: tiers: expected a list of {{plugins: [...]}}")
    tiers = []
    seen: set[str] = set()
    for t, tier in enumerate(raw):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            raise ConfError(f"{source}: tiers[{t}]: expected a map with a 'plugins' list")
        options = []
        for p, entry in enumerate(tier["plugins"]):
            where = f"{source}: tiers[{t}].plugins[{p}]"
            options.append(_plugin_option(entry, where, warnings))
            if options[-1].name in seen:
                raise ConfError(f"{where}: plugin {options[-1].name!r} is listed twice")
            seen.add(options[-1].name)
        tiers.append(options)
    return tiers


def _plugin_option(entry: Any, where: str, warnings: list[str]) -> PluginOption:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise ConfError(f"{where}: expected a map with a 'name'")
    name = entry["name"]
    where = f"{where} ({name})"
    try:
        cls = load_plugin(name)
    except RegistryError as err:
        raise ConfError(f"{where}: {err}") from None
    flags: dict[str, bool] = {}
    for key, value in entry.items():
        if key in ("name", "arguments"):
            continue
        if key not in _KNOWN_FLAGS:
            raise ConfError(f"{where}: unknown key {key!r}")
        if not isinstance(value, bool):
            raise ConfError(f"{where}: {key} must be true or false, got {value!r}")
        flags[key] = value
    arguments = entry.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise ConfError(f"{where}: arguments: expected a map")
    try:
        args, unknown = check_arguments(getattr(cls, "arguments", ()), arguments)
    except ArgumentError as err:
        raise ConfError(f"{where}: {err}") from None
    warnings.extend(f"{where}: unknown argument {key!r}, ignored" for key in unknown)
    # Volcano flags a plugin reads as a mode of its own (capacity's enableHierarchy)
    # reach it among its arguments; elsewhere such a flag asked for is said to do nothing.
    modes = getattr(cls, "mode_flags", ())
    for flag in modes:
        args[flag] = flags.get(flag, flag not in _OFF_BY_DEFAULT)
    warnings.extend(f"{where}: {flag} has no effect on {name}"
                    for flag, value in flags.items()
                    if value and flag in _OFF_BY_DEFAULT and flag not in modes)
    return PluginOption(name, cls, args, flags)
