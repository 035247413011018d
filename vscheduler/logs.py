"""The command's logs: one setup, klog-like text or JSON lines, Volcano's `--v` levels.

Operators read a Kubernetes component's logs with the habits klog gave them: a line
starts with a level letter and the time, then the message and `key=value` pairs, and
`--v N` adds detail. Modules log through plain `logging` loggers and pass their
structured fields with `extra=fields(pod=..., node=...)`, so the JSON format has them
as keys rather than inside prose.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import Any, TextIO

__all__ = ["FORMATS", "LEVELS", "MAX_VERBOSITY", "V2", "V4", "fields", "level_of",
           "setup"]

# `--v N` as Python logging levels: each step one below the last, from INFO down to
# DEBUG (where libraries such as urllib3 log their requests).
LEVELS: dict[int, int] = {
    0: logging.INFO,      # start-up, leadership, one line per session, warnings, errors
    1: logging.INFO - 1,
    2: logging.INFO - 2,  # each bind and eviction
    3: logging.INFO - 3,
    4: logging.INFO - 4,  # reflector lists and watches, status writes
    5: logging.INFO - 5,
    6: logging.INFO - 6,
    7: logging.INFO - 7,
    8: logging.INFO - 8,
    9: logging.INFO - 9,
    10: logging.DEBUG,    # the HTTP client's own debug lines
}
MAX_VERBOSITY = max(LEVELS)
V2 = LEVELS[2]
V4 = LEVELS[4]
FORMATS = ("text", "json")

for _v, _level in LEVELS.items():
    if 0 < _v < MAX_VERBOSITY:
        logging.addLevelName(_level, f"V{_v}")


def fields(**values: Any) -> dict[str, Any]:
    """Structured fields for a log call: `log.info("Bound", extra=fields(pod=key))`."""
    return {"fields": values}


def level_of(verbosity: int) -> int:
    """The Python level that `--v verbosity` shows."""
    return LEVELS[max(0, min(verbosity, MAX_VERBOSITY))]


def _verbosity(record: logging.LogRecord) -> int:
    return max(0, logging.INFO - record.levelno)


def _text_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, default=str)
    return json.dumps(str(value))


class TextFormatter(logging.Formatter):
    """klog's line: `I0102 15:04:05.123456 logger] "message" key="value" n=3`."""

    def format(self, record: logging.LogRecord) -> str:
        letter = ("F" if record.levelno >= logging.CRITICAL else
                  "E" if record.levelno >= logging.ERROR else
                  "W" if record.levelno >= logging.WARNING else "I")
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%m%d %H:%M:%S.%f")
        parts = [f"{letter}{stamp} {record.name}]", json.dumps(record.getMessage())]
        for key, value in (getattr(record, "fields", None) or {}).items():
            parts.append(f"{key}={_text_value(value)}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts, level, v, logger, msg, then the fields as keys."""

    def format(self, record: logging.LogRecord) -> str:
        level = ("error" if record.levelno >= logging.ERROR else
                 "warning" if record.levelno >= logging.WARNING else "info")
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC)
            .strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": level, "v": _verbosity(record), "logger": record.name,
            "msg": record.getMessage()}
        for key, value in (getattr(record, "fields", None) or {}).items():
            line.setdefault(key, value)  # a field never hides the line's own keys
        if record.exc_info:
            line["exception"] = "".join(traceback.format_exception(*record.exc_info))
        return json.dumps(line, default=str)


class _Handler(logging.Handler):
    """The handler `setup` installs, told apart from handlers others (pytest) add. With
    no stream given it writes to whatever `sys.stderr` is at the time of each line."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__()
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self.stream if self.stream is not None else sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def setup(verbosity: int = 0, log_format: str = "text",
          stream: TextIO | None = None) -> None:
    """Send every logger's lines at `--v verbosity` to `stream` (stderr, as Kubernetes
    components log) in `log_format`. Called again, it replaces its own handler only."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(handler)
    handler = _Handler(stream)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    if verbosity < MAX_VERBOSITY:
        handler.addFilter(_quiet_http_client)
    root.addHandler(handler)
    root.setLevel(level_of(verbosity))


def _quiet_http_client(record: logging.LogRecord) -> bool:
    """Below --v 10, the HTTP client's lines other than errors are left out: urllib3
    warns of each retry and each connection it drops, which an outage of the API server
    turns into hundreds of lines beside the reflectors' own one per failure. (A filter
    on the handler: the kubernetes client sets urllib3's logger level itself whenever a
    Configuration is made.)"""
    return record.levelno >= logging.ERROR or not record.name.startswith("urllib3")
