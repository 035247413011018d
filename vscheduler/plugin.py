"""What a plugin and an action are: a name, typed arguments, and hooks or an `execute`.

Arguments are declared, with their types and defaults, so that a conf can be checked in
full before any scheduling starts and every mistake names its place::

    class BinpackPlugin(Plugin):
        name = "binpack"
        arguments = (
            Argument("binpack.weight", int, 1, "multiplier of the whole score"),
            Argument("binpack.resources.*", int, 1, "weight of one extra resource"),
        )

A key ending in `.*` accepts any key with that prefix. Keys a plugin does not declare are
warned about, not refused: confs written for Volcano carry keys of features this
scheduler does not have.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from vscheduler.textinput import brief

if TYPE_CHECKING:
    from vscheduler.framework.session import Session
    from vscheduler.hookspecs import SessionView

__all__ = ["Action", "Argument", "ArgumentError", "ChoiceArgument", "LimitArgument", "Plugin",
           "check_arguments"]


class ArgumentError(ValueError):
    """An argument of the wrong type or value."""


# Integers a plugin multiplies scores by or counts with: what a Kubernetes integer
# holds (a weight of 400 digits would end the session converting it to a float).
INT_LIMIT = 2**63  # (an int64 holds -2**63 up to 2**63 - 1)

_TYPE_WORDS = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               dict: "a map", list: "a list"}


def _number(raw: Any) -> float | None:
    """A finite number, written as a YAML number or a string (YAML 1.1 reads `1e3` as
    a string); None otherwise."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str):
        try:
            raw = float(raw)
        except ValueError:
            return None
    if not isinstance(raw, int | float):
        return None
    try:
        number = float(raw)
    except OverflowError:  # an integer of more than 308 digits
        return None
    return number if math.isfinite(number) else None


class Argument:
    """One argument of a plugin or action: its key, type, default and help. A
    `required` one must be given (a conf without it is refused, saying why)."""

    __slots__ = ("default", "help", "key", "required", "type")

    def __init__(self, key: str, type: type, default: Any = None, help: str = "", *,
                 required: bool = False) -> None:
        self.key = key
        self.type = type
        self.default = default
        self.help = help
        self.required = required

    def describe(self) -> str:
        """Its type and default in words, for `vscheduler plugins`: `an integer,
        default 1`."""
        kind = _TYPE_WORDS.get(self.type, self.type.__name__)
        if self.required:
            return f"{kind}, required"
        default = self.default
        if default is None:
            return f"{kind}, unset by default"
        if isinstance(default, bool):
            shown = "true" if default else "false"
        elif isinstance(default, str | dict | list | tuple) and not default:
            shown = {str: '""', dict: "{}"}.get(type(default), "[]")
        elif isinstance(default, float):
            shown = f"{default:g}"
        else:
            shown = str(default)
        return f"{kind}, default {shown}"

    def matches(self, key: str) -> bool:
        if self.key.endswith(".*"):
            return key.startswith(self.key[:-1]) and len(key) > len(self.key) - 1
        return key == self.key

    def convert(self, raw: Any) -> Any:
        """The value as the plugin will see it, or ArgumentError."""
        kind = self.type
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.lower() in ("true", "false"):
                return raw.lower() == "true"
        elif kind is int:
            if isinstance(raw, float) and raw.is_integer():
                raw = int(raw)  # (`10.0`, a whole number as YAML may write it)
            if isinstance(raw, int) and not isinstance(raw, bool):
                if -INT_LIMIT <= raw < INT_LIMIT:
                    return raw
                raise ArgumentError(f"must be an integer of 64 bits, got {brief(raw)}")
        elif kind is float:
            number = _number(raw)
            if number is not None:
                return number
        elif kind is str:
            if isinstance(raw, str):
                return raw
        elif kind is dict:
            if isinstance(raw, Mapping):
                return dict(raw)
        elif kind is list and isinstance(raw, list):
            return raw
        raise ArgumentError(f"must be {_TYPE_WORDS.get(kind, kind.__name__)}, got {brief(raw)}")


class ChoiceArgument(Argument):
    """A string argument that must be one of `choices` (read regardless of case, handed
    on as written in `choices`): a misspelt strategy is refused with the conf."""

    __slots__ = ("choices",)

    def __init__(self, key: str, choices: tuple[str, ...], default: str,
                 help: str = "") -> None:
        super().__init__(key, str, default, f"{help}: {', '.join(choices)}")
        self.choices = choices

    def convert(self, raw: Any) -> Any:
        if isinstance(raw, str):
            for choice in self.choices:
                if raw.lower() == choice.lower():
                    return choice
        raise ArgumentError(f"must be one of {', '.join(self.choices)}, got {brief(raw)}")


class LimitArgument(Argument):
    """A number not below `minimum` (0 unless said: a ratio, a count of seconds);
    `type` is int or float. None is accepted where the default is None (unset)."""

    __slots__ = ("minimum",)

    def __init__(self, key: str, type: type, default: Any = None, help: str = "", *,
                 minimum: float = 0) -> None:
        super().__init__(key, type, default, help)
        self.minimum = minimum

    def convert(self, raw: Any) -> Any:
        if raw is None and self.default is None:
            return None
        value = super().convert(raw)
        if value < self.minimum:
            raise ArgumentError(f"must be at least {self.minimum:g}, got {brief(raw)}")
        return value


def check_arguments(
    declared: tuple[Argument, ...], given: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[str]]:
    """Validate `given` against `declared`: (values with defaults filled in, unknown keys).
    Raises ArgumentError naming the key."""
    values: dict[str, Any] = {a.key: a.default for a in declared if not a.key.endswith(".*")}
    unknown: list[str] = []
    for key, raw in (given or {}).items():
        key = str(key)
        spec = next((a for a in declared if a.matches(key)), None)
        if spec is None:
            unknown.append(key)
            continue
        try:
            values[key] = spec.convert(raw)
        except ArgumentError as err:
            raise ArgumentError(f"argument {key!r} {err}") from None
    for spec in declared:
        if spec.required and spec.key not in (given or {}):
            raise ArgumentError(f"argument {spec.key!r} is required: {spec.help}")
    return values, unknown


class Plugin:
    """Base class of plugins (optional: any class with `name`, `arguments` and hooks
    works). `self.args` holds the validated arguments; `self.session` the session, as
    far as a plugin may read and call it (`hookspecs.SessionView`)."""

    name: ClassVar[str] = ""
    arguments: ClassVar[tuple[Argument, ...]] = ()
    # Volcano's enable flags this plugin reads as a mode (capacity: enableHierarchy),
    # handed to it in `args` as booleans
    mode_flags: ClassVar[tuple[str, ...]] = ()

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        self.session: SessionView


class Action:
    """Base class of actions: `execute` runs once per session, in conf order."""

    name: ClassVar[str] = ""
    arguments: ClassVar[tuple[Argument, ...]] = ()

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args

    def execute(self, session: Session) -> None:
        raise NotImplementedError
