"""Finds actions and plugins through entry points, built-ins and third parties alike."""

from __future__ import annotations

import sys
from functools import cache
from importlib.metadata import entry_points

import pluggy

from vscheduler import hookspecs
from vscheduler.plugin import Action

__all__ = [
    "ACTIONS_GROUP",
    "PLUGINS_GROUP",
    "RegistryError",
    "hooks_of",
    "installed",
    "load_action",
    "load_plugin",
    "summary_of",
]

ACTIONS_GROUP = "vscheduler.actions"
PLUGINS_GROUP = "vscheduler.plugins"


class RegistryError(Exception):
    """A named action or plugin that is not installed or cannot be loaded."""


@cache
def installed(group: str) -> dict[str, object]:
    """name -> entry point, for one group (sorted by name)."""
    return {ep.name: ep for ep in sorted(entry_points(group=group), key=lambda e: e.name)}


def _load(group: str, name: str, kind: str) -> type:
    points = installed(group)
    if name not in points:
        names = ", ".join(points) or "none"
        raise RegistryError(f"unknown {kind} {name!r} (installed: {names})")
    try:
        return points[name].load()  # type: ignore[attr-defined]
    except Exception as err:  # a broken third-party package must not look like a typo
        raise RegistryError(f"{kind} {name!r} failed to load: {err}") from err


@cache
def load_action(name: str) -> type[Action]:
    cls = _load(ACTIONS_GROUP, name, "action")
    if not callable(getattr(cls, "execute", None)):
        raise RegistryError(f"action {name!r} ({cls!r}) has no execute method")
    return cls


@cache
def load_plugin(name: str) -> type:
    """The plugin class, its hooks checked against the hookspecs by pluggy."""
    cls = _load(PLUGINS_GROUP, name, "plugin")
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    try:
        manager.register(cls, name=name)
        manager.check_pending()
    except pluggy.PluginValidationError as err:
        raise RegistryError(f"plugin {name!r}: {err}") from err
    return cls


def summary_of(cls: type, name: str) -> str:
    """What an action or plugin does, in one sentence: the first of its class's
    docstring, else of its module's, without a leading `name:`."""
    doc = cls.__doc__ or getattr(sys.modules.get(cls.__module__), "__doc__", None) or ""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    if paragraph.startswith(f"{name}:"):
        paragraph = paragraph[len(name) + 1:].lstrip()
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[:end + 1]


@cache
def hooks_of(cls: type) -> frozenset[str]:
    """Names of the hooks a plugin class implements."""
    marker = f"{hookspecs.PROJECT}_impl"
    return frozenset(
        attr for attr in dir(cls)
        if not attr.startswith("_") and hasattr(getattr(cls, attr, None), marker)
    )
