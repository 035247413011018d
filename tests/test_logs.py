"""The log setup: klog-like text lines, JSON lines, and `--v` choosing what shows."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vscheduler import logs
from vscheduler.logs import V2, fields


@pytest.fixture
def out() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    stream = io.StringIO()
    yield stream
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


def _lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_text_lines_read_as_klog_writes_them(out):
    logs.setup(0, "text", out)
    log = logging.getLogger("vscheduler.test")
    log.info("Bound", extra=fields(pod="ns/p", node="n1", tries=2, ok=True, gone=None,
                                   kinds=["Pod", "Node"]))
    log.warning("Odd")
    log.error("Bad %s", "thing")
    info, warning, error = _lines(out)
    assert re.fullmatch(r'I\d{4} \d\d:\d\d:\d\d\.\d{6} vscheduler\.test\] "Bound" pod="ns/p" '
                        r'node="n1" tries=2 ok=true gone=null kinds=\["Pod", "Node"\]', info)
    assert warning.startswith("W") and warning.endswith('vscheduler.test] "Odd"')
    assert error.startswith("E") and error.endswith('] "Bad thing"')


def test_json_lines_carry_the_fields_as_keys(out):
    logs.setup(2, "json", out)
    log = logging.getLogger("vscheduler.test")
    log.log(V2, "Binding", extra=fields(pod="ns/p", node="n1"))
    log.warning("Patch failed", extra=fields(kind="Pod", status=422, msg="not mine"))
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("Cycle failed")
    bind, patch, failed = (json.loads(line) for line in _lines(out)
                           if line.startswith("{"))
    assert bind["level"] == "info" and bind["v"] == 2 and bind["logger"] == "vscheduler.test"
    assert (bind["msg"], bind["pod"], bind["node"]) == ("Binding", "ns/p", "n1")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", bind["ts"])
    # A field named like the line's own keys does not hide them.
    assert (patch["level"], patch["msg"], patch["status"]) == ("warning", "Patch failed", 422)
    assert failed["level"] == "error" and "ValueError: boom" in failed["exception"]


@given(st.integers(0, logs.MAX_VERBOSITY), st.integers(0, logs.MAX_VERBOSITY))
def test_a_line_at_v_shows_exactly_when_v_is_at_most_the_verbosity(verbosity, v):
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    try:
        logs.setup(verbosity, "json", stream)
        logging.getLogger("vscheduler.test").log(logs.LEVELS[v], "line")
        shown = [json.loads(line) for line in _lines(stream)]
        assert bool(shown) == (v <= verbosity)
        assert all(line["v"] == v for line in shown)
    finally:
        logs.setup(0, "text", io.StringIO())
        root.setLevel(level)


def test_the_levels_step_down_from_info_to_debug():
    levels = [logs.LEVELS[v] for v in range(logs.MAX_VERBOSITY + 1)]
    assert levels[0] == logging.INFO and levels[-1] == logging.DEBUG
    assert levels == sorted(levels, reverse=True) and len(set(levels)) == len(levels)
    assert logs.level_of(99) == logging.DEBUG and logs.level_of(-3) == logging.INFO


def test_setup_again_replaces_its_own_handler_and_keeps_others(out):
    other = logging.StreamHandler(io.StringIO())
    root = logging.getLogger()
    root.addHandler(other)
    try:
        logs.setup(0, "text", io.StringIO())
        logs.setup(0, "json", out)
        logging.getLogger("vscheduler.test").info("once")
        assert len(_lines(out)) == 1 and json.loads(_lines(out)[0])["msg"] == "once"
        assert other in root.handlers
    finally:
        root.removeHandler(other)


@pytest.mark.parametrize("verbosity", [0, 4, 9, 10])
def test_the_http_clients_warnings_show_only_at_v_10(out, verbosity):
    """urllib3's retry and pool warnings (hundreds in an API server outage) are the
    HTTP client's own lines, shown from --v 10; its errors always show."""
    from kubernetes import client

    urllib3 = logging.getLogger("urllib3.connectionpool")
    try:
        logs.setup(verbosity, "text", out)
        client.Configuration()  # (which sets urllib3's logger level its own way)
        urllib3.warning("Retrying (Retry(total=2)) after connection broken")
        urllib3.error("something the operator must see")
        ours = logging.getLogger("vscheduler.kube.reflector")
        ours.warning("List or watch failed")
        lines = _lines(out)
        assert any("List or watch failed" in line for line in lines)
        assert any("something the operator must see" in line for line in lines)
        assert any("Retrying" in line for line in lines) == (verbosity >= 10)
    finally:
        logs.setup(0, "text", io.StringIO())
