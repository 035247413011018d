"""YAML read by libyaml and by the pure-Python reader (vscheduler/textinput.py): the same
documents, values and messages either way, deep nesting refused on both without a crash,
and the bad-input tests of the YAML path passing on the pure-Python one too."""

from __future__ import annotations

import datetime
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import test_bad_input
from vscheduler import textinput
from vscheduler.textinput import TextError, load_yaml, load_yaml_documents

pytestmark = pytest.mark.skipif(not textinput.LIBYAML, reason="PyYAML without libyaml")

ROOT = Path(__file__).parent.parent


def _outcome(text: str, libyaml: bool, max_depth: int = textinput.MAX_DEPTH) -> list[str]:
    """What reading `text` gives, as reprs (equal NaNs compare equal): each document, a
    TextError in its place, and the TextError raised at the end if one is."""
    saved = textinput.LIBYAML
    textinput.LIBYAML = libyaml
    results: list[str] = []
    try:
        for document in load_yaml_documents(text, max_depth):
            results.append(repr(document))
    except TextError as err:
        results.append(f"raised {err}")
    finally:
        textinput.LIBYAML = saved
    return results


# PyYAML's pure-Python scanner refuses a '?' inside a plain scalar in flow context
# (`{a?b: 1}`), which the YAML spec and libyaml accept: the one difference between the
# two readers this project leaves alone (the wheels of PyYAML carry libyaml).
_FLOW_QUESTION_MARK = re.compile(r"raised line \d+: expected ',' or '[}\]]', but got '\?'")


def _same_both_ways(text: str) -> list[str]:
    fast, slow = _outcome(text, libyaml=True), _outcome(text, libyaml=False)
    if fast != slow and slow and _FLOW_QUESTION_MARK.fullmatch(slow[-1]) \
            and fast[:len(slow) - 1] == slow[:-1]:
        return fast
    assert fast == slow, text[:200]
    return fast


# --------------------------------------------------------------------- generated text

# Scalars YAML 1.1 reads as something other than a string, and strings that only look so.
TRICKY = st.sampled_from([
    "yes", "No", "on", "OFF", "y", "n", "~", "null", "Null", "", "0o17", "017", "0x1F",
    "1_000", "1:20", "190:20:30", ".inf", "-.Inf", ".nan", "1e3", "1.5e-3", "+12", "<<", "=",
    "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "2001-02-30",
    "12:30", "- x", "a: b", "#c", "&a", "*a", "!tag", "|", ">", "'", '"', "%x", "@", "`",
    "a\nb", " lead", "trail ", "é", "\u2028", "\x85", "9" * 30])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), TRICKY,
    st.text(max_size=12), st.dates(),
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())),
    st.binary(max_size=8))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.text(max_size=6), TRICKY,
                                                      st.integers()), inner, max_size=4)),
    max_leaves=20)


@st.composite
def documents(draw: st.DrawFn) -> Any:
    """A value, possibly holding one part twice (the dumper writes an anchor and an
    alias) and possibly wrapped near or past the nesting limit."""
    value = draw(VALUES)
    if draw(st.booleans()):
        shared = draw(st.lists(VALUES, min_size=1, max_size=3))
        value = {"first": shared, "again": shared, "value": value}
    depth = draw(st.sampled_from([0, 0, 1, 97, 98, 99, 100, 101, 130]))
    as_map = draw(st.booleans())
    for _ in range(depth):
        value = {"k": value} if as_map else [value]
    return value


PUT_IN = [*"[]{}:,-&*!|>'\"#?%@` \n\t\\.", "---\n", "...\n", "&a ", "*a", "\x00", "\ufeff",
          "!!int ", "!!bool ", "!!timestamp "]


@st.composite
def yaml_texts(draw: st.DrawFn) -> str:
    """Several documents as PyYAML writes them, in block or flow style, sometimes
    broken by a few characters put in or cut out."""
    parts = []
    for value in draw(st.lists(documents(), min_size=1, max_size=4)):
        parts.append(yaml.safe_dump(
            value, default_flow_style=draw(st.sampled_from([False, True, None])),
            allow_unicode=draw(st.booleans()), width=draw(st.sampled_from([20, 80, 10**6])),
            explicit_start=True, sort_keys=False))
    text = "".join(parts)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:at] + text[at + draw(st.integers(1, 4)):]
        else:
            text = text[:at] + draw(st.sampled_from(PUT_IN)) + text[at:]
    return text


@st.composite
def anchor_texts(draw: st.DrawFn) -> str:
    """Lines that anchor values and refer to others: chains that nest through aliases
    (past the limit or not), aliases to nothing or to themselves, anchors used twice."""
    count = draw(st.integers(1, 130))
    lines = []
    for i in range(count):
        refer = draw(st.sampled_from(["prev", "prev", "self", "later", "none", "dup"]))
        if refer == "prev" and i:
            lines.append(f"a{i}: &a{i} [*a{i - 1}]")
        elif refer == "self":
            lines.append(f"a{i}: &a{i} {{k: *a{i}}}")
        elif refer == "later":
            lines.append(f"a{i}: &a{i} [*a{i + 1}]")
        elif refer == "dup" and i:
            lines.append(f"a{i}: &a{i - 1} x")
        else:
            lines.append(f"a{i}: &a{i} [x]")
    split = draw(st.integers(0, count))
    return "\n".join(lines[:split]) + "\n---\n" + "\n".join(lines[split:]) + "\n"


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=yaml_texts())
def test_libyaml_and_python_give_the_same_documents(text):
    _same_both_ways(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=anchor_texts())
def test_libyaml_and_python_agree_on_anchors_and_aliases(text):
    _same_both_ways(text)


# --------------------------------------------------------------------- chosen text


@pytest.mark.parametrize("text", [
    # YAML 1.1 types as the pure-Python reader gives them
    "a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\nc: 2001-12-14 21:59:43.10\nd: yes\n"
    "e: On\nf: 0o17\ng: 017\nh: 1_000\ni: 0x1F\nj: 1:20\nk: .inf\nl: ~\nm: 1e3\n",
    "a: !!binary aGVsbG8=\nb: !!set {x, y}\nc: !!omap [x: 1]\nd: !!str 1\n",
    "<<: {a: 1}\nb: 2\n", "? [a, b]\n: 1\n",
    # values Python cannot hold, and tags no safe constructor knows
    "a: !foo 1\n", "a: !!python/name:os.system\n", "a: !!int x\n", "a: 2001-02-30\n",
    # the non-specific tag alone: an empty string (not null); on a value, as untagged
    "!", "a: !\n", "&x !\n", "- ! &y\n", "! 12\n", "a: ! null\n", "! ''\n",
    "a: !!bool x\n---\nb: 1\n", "a: !!timestamp x\n---\nb: 1\n", "a: !!float [1]\n",
    "a: " + "9" * 5000 + "\n---\nb: 1\n",
    # syntax errors, and where they are
    "kind: Pod\nmetadata: {name: [unclosed\n", "a: 'x\n", "a: b: c\n", "[1, 2]]\n",
    "a: b\n--- c\n... \nd\n", "---\na: 1\n---\n[\n", "a: @x\n", "%YAML 2.0\n---\na: 1\n",
    # aliases
    "a: *x\n", "a: &x 1\nb: &x 2\n", "a: 1\n---\nb: *nope\n---\nc: 3\n", "&a [*a]\n",
    # characters: refused, tabs libyaml alone reads as spaces, line breaks of YAML 1.1
    "a: \x00\n", "x: \ud800\n", "a:\tb\n", "a: [b,\tc]\n", "\ufeffa: 1\n", "a: 1\r\nb: 2\r\n",
    "a: 1\x85b: 2\n", "a: \u2028b\n",
    # empty documents and streams
    "", "# only\n", "---\n...\n---\n", "--- |\n  text\n",
])
def test_chosen_texts_read_the_same_both_ways(text):
    _same_both_ways(text)


def test_values_are_the_pure_python_readers_but_dates_stay_text():
    """YAML 1.1 as PyYAML reads it (`yes` is true), but an unquoted date or time stays
    the text written, as kubectl's reader keeps it (a label `built: 2025-01-01` is
    text to the API server); only an explicit `!!timestamp` makes a date."""
    text = "a: 2001-12-14\nb: yes\nc: 2001-12-14 21:59:43.10 -5\nd: !!timestamp 2001-12-14\n"
    [document] = _same_both_ways(text)
    value = load_yaml(text)
    assert value == {"a": "2001-12-14", "b": True, "c": "2001-12-14 21:59:43.10 -5",
                     "d": datetime.date(2001, 12, 14)}
    assert document == repr(value)


def test_messages_keep_their_line_numbers():
    assert _same_both_ways("a: 1\n---\nb: *nope\n") == [
        "{'a': 1}", "raised line 3: found undefined alias 'nope'"]
    assert _same_both_ways("a: 1\nb: [\n") == [
        "raised line 3: expected the node content, but found '<stream end>'"]


def test_base_60_numbers_and_a_lone_equals_sign_stay_text():
    """PyYAML read `10:30` as 630 and refused `=` (YAML 1.1's value key); kubectl's
    reader takes both as text, and so does ours, both ways."""
    text = "window: 10:30\nclock: 1:20:30.5\nsign: =\nhex: 0x1F\nnumber: 1_000\n"
    [document] = _same_both_ways(text)
    assert load_yaml(text) == {"window": "10:30", "clock": "1:20:30.5", "sign": "=",
                               "hex": 31, "number": 1000}
    assert document == repr(load_yaml(text))


def test_a_key_given_twice_in_one_mapping_refuses_its_document_only():
    """PyYAML keeps the last of two equal keys unsaid; kubectl refuses such a document.
    Overriding what a merge key brings is what merge keys are for: not refused."""
    assert _same_both_ways("a: 1\nb: 2\na: 3\n---\nc: 4\n") == [
        "TextError(\"line 3: key 'a' is given twice in one mapping (first at line 1)\")",
        "{'c': 4}"]
    assert _same_both_ways("x: {k: 1, k: 1}\n") == [
        "TextError(\"line 1: key 'k' is given twice in one mapping (first at line 1)\")"]
    assert _same_both_ways("spec:\n  a: 1\n  a: 2\n")[0].startswith(
        "TextError(\"line 3: key 'a'")
    assert load_yaml("base: &b {x: 1, y: 2}\nc: {<<: *b, x: 3}\nd: *b\n") == {
        "base": {"x": 1, "y": 2}, "c": {"x": 3, "y": 2}, "d": {"x": 1, "y": 2}}
    assert load_yaml("'1': a\n1: b\n") == {"1": "a", 1: "b"}  # (a string and a number)


def _libyaml_reads(depth: int) -> bool:
    """Whether the installed libyaml reads `depth` nested lists at all (the one in
    PyYAML 6.0.4's wheels refuses more than 1,000 levels itself)."""
    parser = yaml.cyaml.CParser(("[" * depth + "]" * depth).encode())
    try:
        while not isinstance(parser.get_event(), yaml.StreamEndEvent):
            pass
    except yaml.YAMLError:
        return False
    return True


@pytest.mark.parametrize("depth", [101, 1000])
def test_deep_nesting_is_refused_on_the_libyaml_path_without_composing(depth, monkeypatch):
    # libyaml composes recursively in C, where 100,000 levels end the process: a document
    # too deep never reaches its composer. A libyaml that refuses the nesting itself
    # leaves the text to the pure-Python reader, with the same documents.
    composed = []
    get_node = textinput._CComposer.get_node

    def counted(composer: Any) -> Any:
        composed.append(1)
        return get_node(composer)

    monkeypatch.setattr(textinput._CComposer, "get_node", counted)
    text = "[" * depth + "]" * depth + "\n---\nkind: Node\n---\n" + "{a: " * depth + \
        "x" + "}" * depth + "\n---\n- ok\n"
    documents = _same_both_ways(text)
    assert documents == ["TextError('line 1: nested more than 100 levels deep')",
                         "{'kind': 'Node'}",
                         "TextError('line 5: nested more than 100 levels deep')",
                         "['ok']"]
    assert len(composed) == (2 if _libyaml_reads(depth) else 0)


@pytest.mark.parametrize("depth", [1001, 3000, 60_000])
def test_flow_collections_over_a_thousand_deep_end_the_reading_on_both_paths(depth):
    # libyaml stops there; the pure-Python scanner rechecks every open bracket at each
    # token (60,000 took it minutes): the documents before are given, then one error.
    text = f"a: 1\n---\nb: {'[' * depth}x{']' * depth}\n---\nkind: Node\n"
    assert _same_both_ways(text) == [
        "{'a': 1}", "raised line 3: nested more than 100 levels deep"]


def test_the_limit_is_exact_on_both_paths():
    ok = "[" * 99 + "x" + "]" * 99      # 100 levels: 99 lists and the scalar
    deep = "[" * 100 + "x" + "]" * 100  # 101 levels
    assert _same_both_ways(ok + "\n---\n" + deep + "\n") == [
        repr(load_yaml(ok)), "TextError('line 3: nested more than 100 levels deep')"]


def test_a_limit_above_what_libyaml_may_compose_is_read_by_python(monkeypatch):
    def refuse(text: str, max_depth: int) -> None:
        raise AssertionError("libyaml asked to compose past its limit")

    monkeypatch.setattr(textinput, "_libyaml_documents", refuse)
    assert list(load_yaml_documents("[[x]]", textinput.LIBYAML_MAX_DEPTH + 1)) == [[["x"]]]


def test_every_manifest_and_conf_in_the_repository_reads_the_same_both_ways():
    paths = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("conf/*.conf"),
                    *ROOT.glob("charts/**/values.yaml")])
    assert len(paths) >= 15
    for path in paths:
        documents = _same_both_ways(path.read_text(encoding="utf-8"))
        assert documents and not any(d.startswith(("raised", "TextError")) for d in documents)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deep=test_bad_input.DEEP_VALUES, noise=st.binary(max_size=30))
def test_deep_and_broken_text_reads_the_same_both_ways(deep, noise):
    # test_bad_input's texts of any depth (fewer: the pure-Python reader is the slower)
    text = test_bad_input._dump_json(deep.build())
    junk = noise.decode("latin-1")
    for candidate in (text, "a:\n" + "  - " + text, junk, text + "\n---\n" + junk):
        _same_both_ways(candidate)


# The bad-input tests whose text goes through the YAML reader, run again on the
# pure-Python path (test_bad_input.py runs them on the default one, libyaml).
YAML_TESTS = [
    test_bad_input.test_a_file_that_is_not_yaml_is_one_line_and_exit_2,
    test_bad_input.test_a_nested_manifest_document_is_skipped_and_the_others_load,
    test_bad_input.test_a_manifest_nested_thousands_deep_is_one_line_and_exit_2,
    test_bad_input.test_aliases_cannot_nest_a_document_beyond_the_limit,
    test_bad_input.test_aliases_cannot_expand_a_document_beyond_a_million_values,
    test_bad_input.test_an_integer_python_cannot_convert_skips_its_document_only,
]


@pytest.mark.parametrize("check", YAML_TESTS, ids=lambda check: check.__name__)
def test_bad_yaml_tests_pass_on_the_pure_python_path(check, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(textinput, "LIBYAML", False)
    fixtures = {"tmp_path": tmp_path, "capsys": capsys}
    check(**{name: fixtures[name] for name in inspect.signature(check).parameters})
