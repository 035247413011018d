"""fairshare: queues that held less of the cluster lately are served first.

Each queue has a usage history: the share of the cluster it held, averaged over time
with a half-life (what it held an hour ago counts half as much, with `halfLife: 1h`),
so a value between 0 and 1 (its dominant share: the largest fraction of any resource
of the cluster its pods hold). As a session opens, the history moves on from where
the last one left it to now: `value = held * (1 - d) + value * d`, `d = 2^(-t /
halfLife)`, `t` the time since and `held` what the queue held then, which it held all
along (what a queue holds changes only by what a session decides or the cluster tells,
and either makes a session run: hours with no session are hours of the same holding);
then `held` becomes what it holds now. Queue order puts
the lower value first; put the plugin before the quota plugins (`proportion`,
`capacity`) for it to split what is beyond the deserved shares, after `priority` only
if queue priorities are to come first.

Turned on by listing the plugin; `halfLife` is required, above zero: a history with a
half-life of 0 would be no history, and is refused rather than quietly off.

The history is kept across restarts and leader changes in an annotation on each
Queue, `elastic.gpu/usage-history: {"share": 0.25, "held": 1.0, "at":
"2026-05-01T10:15:00Z"}`, written when the share or what the queue holds moves by a
hundredth or more (or when a queue has none), and read back by a scheduler that has
none of its own yet, which moves it on from `at` with `held`. An annotation that
cannot be read is taken as no history, with a Warning event on the Queue.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import lru_cache

from vscheduler.guards import DurationArgument
from vscheduler.hookspecs import SessionView, hookimpl
from vscheduler.model import Queue
from vscheduler.plugin import Plugin
from vscheduler.plugins.queue_quota import queue_usage
from vscheduler.resources import Resource, share
from vscheduler.textinput import TextError, brief, load_json

__all__ = ["HISTORY", "FairSharePlugin", "History"]

HISTORY = "elastic.gpu/usage-history"
KEPT = "fairshare.history"
# The history is written again once it moves by this much (a share of the cluster).
WRITE_STEP = 0.01
# The times a history stamp can name: datetime's first and last seconds.
_EARLIEST = datetime.min.replace(tzinfo=UTC).timestamp()
_LATEST = datetime.max.replace(microsecond=0, tzinfo=UTC).timestamp()


class History:
    """Each queue's (value, held, at): its averaged share, the share it held then, and
    the time it was brought to; kept between sessions (`session.keep`) while the
    half-life is the same."""

    __slots__ = ("half_life", "values")

    def __init__(self, half_life: float) -> None:
        self.half_life = half_life
        self.values: dict[str, tuple[float, float, float]] = {}


class FairSharePlugin(Plugin):
    name = "fairshare"
    arguments = (
        DurationArgument("halfLife", str, None,
                         "how fast past usage fades: what a queue held this long ago counts "
                         "half (a duration above zero, like 1h or 7d as 168h)",
                         positive=True, required=True),
    )

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        half_life: float = self.args["halfLife"]
        history: History = session.keep(KEPT, half_life, lambda: History(half_life))
        now, total = session.now, session.total_resource
        held = queue_usage(session)
        self.values: dict[str, float] = {}
        for name in [n for n in history.values if n not in session.queues]:
            del history.values[name]  # (a queue gone: one made again starts afresh)
        for name, queue in session.queues.items():
            entry = history.values.get(name)
            if entry is None:
                entry = self._read(queue, now)
            value, was_held, at = entry
            allocated = held.sum(name, 0) if name in held.sums else Resource()
            value = _moved(value, now - at, half_life, was_held)
            holding = _dominant(allocated, total)
            history.values[name] = (value, holding, now)
            self.values[name] = value
            self._write(queue, value, holding, now)

    def _read(self, queue: Queue, now: float) -> tuple[float, float, float]:
        """The history a Queue's annotation holds (none, or one that cannot be read:
        0, as of now; a Warning event says why)."""
        raw = (queue.annotations or {}).get(HISTORY)
        parsed = _parsed(raw) if raw is not None else None
        if isinstance(parsed, str):
            self.session.event(f"Queue/{queue.name}", "Warning", "InvalidUsageHistory",
                               f"{HISTORY}: {parsed}; taken as no history")
            parsed = None
        if parsed is None:
            return 0.0, 0.0, now
        value, held, at = parsed
        return value, held, min(at, now)

    def _write(self, queue: Queue, value: float, held: float, now: float) -> None:
        """Ask for the history to be written on the Queue when the share or what the
        queue holds moved enough since the annotation was written (or there is none):
        a scheduler that reads it back moves it on from there."""
        raw = (queue.annotations or {}).get(HISTORY)
        written = _parsed(raw) if raw is not None else None
        if isinstance(written, tuple) and abs(written[0] - value) < WRITE_STEP \
                and abs(written[1] - held) < WRITE_STEP:
            return
        # (a clock past datetime's last year, from a `--now` near it or a long
        # `--session-interval`, writes that year's last second)
        at = min(max(now, _EARLIEST), _LATEST)
        # (isoformat: strftime's %Y writes the years before 1000 with fewer digits)
        stamp = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
        stamp = stamp.removesuffix("+00:00") + "Z"
        self.session.result.queue_annotations.setdefault(queue.name, {})[HISTORY] = \
            json.dumps({"share": round(value, 6), "held": round(held, 6), "at": stamp},
                       sort_keys=True)

    @hookimpl
    def queue_order(self, left: Queue, right: Queue) -> int:
        lv, rv = self.values.get(left.name, 0.0), self.values.get(right.name, 0.0)
        if abs(lv - rv) < 1e-9:
            return 0
        return -1 if lv < rv else 1

    @hookimpl
    def victim_state(self) -> tuple:
        """The histories the queue order reads (they move with the clock: victim plans
        are then made afresh each session)."""
        return tuple(sorted(self.values.items()))


_FORM = '{"share": 0.25, "held": 1.0, "at": "2026-05-01T10:00:00Z"}'


@lru_cache(maxsize=4096)
def _parsed(raw: str) -> tuple[float, float, float] | str:
    """(share, held, at) as an annotation writes them, or why it cannot be read, in
    words. Read once per text: every session compares each queue's annotation with its
    history."""
    try:
        parsed = load_json(raw)
    except TextError as err:
        return str(err)[:120]
    if not isinstance(parsed, dict):
        return f"expected a JSON object like {_FORM}, got {brief(parsed)}"
    figures = []
    for key, default in (("share", None), ("held", 0.0)):
        value = parsed.get(key, default)
        if value is None:
            return f"{key!r} is missing (expected {_FORM})"
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0.0 <= value <= 1.0:
            return f"{key!r} must be a number from 0 to 1, got {brief(value)}"
        figures.append(float(value))
    at = parsed.get("at")
    if not isinstance(at, str):
        return f"'at' must be a time like 2026-05-01T10:00:00Z, got {brief(at)}"
    try:
        when = datetime.fromisoformat(at.replace("Z", "+00:00"))
        stamp = when.timestamp()
    except (ValueError, OverflowError, OSError):
        when = None
    if when is None or when.tzinfo is None:
        return f"'at' must be a time with a zone, like 2026-05-01T10:00:00Z, got {brief(at)}"
    return figures[0], figures[1], stamp


def _dominant(allocated: Resource, total: Resource) -> float:
    """The largest fraction of any resource of the cluster `allocated` holds."""
    return max((share(allocated.get(n), total.get(n)) for n in allocated.names()
                if total.get(n) > 0), default=0.0)


def _moved(value: float, elapsed: float, half_life: float, held: float) -> float:
    """The history `elapsed` seconds on, the queue holding `held` meanwhile."""
    if elapsed <= 0:
        return value
    decay = 2.0 ** (-elapsed / half_life)
    return held * (1.0 - decay) + value * decay
