"""Reading text a user wrote (JSON annotations, YAML manifests, the conf) without letting
its shape crash the scheduler.

Python's parsers recurse once per level of nesting: a few thousand brackets in a 4 KB
annotation (`[[[[...]]]]`) raise `RecursionError`, which no caller expects, at every
session that reads it. So nesting is measured here *before* anything recursive sees the
text: JSON by a scan of its brackets, YAML while its nodes are composed (and again over
the composed graph, since aliases can nest a document more deeply than its text does).
Everything refused is a `TextError` with a message for the user; callers turn it into
their own error (a Warning event, a skipped document, a `ConfError`).

`brief` renders any value for such a message, however deep or long it is.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Iterator
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode

__all__ = ["MAX_DEPTH", "MAX_JSON_BYTES", "TextError", "brief", "load_json", "load_yaml",
           "load_yaml_documents"]

# Kubernetes objects nest about ten levels (a pod's affinity terms are the deepest);
# a hundred leaves room for any real object and keeps the parsers' recursion far below
# Python's limit of 1000 frames.
MAX_DEPTH = 100
# The API server refuses an object whose annotations exceed 256 KiB in all: no single
# annotation a user wrote can be longer.
MAX_JSON_BYTES = 256 * 1024


class TextError(ValueError):
    """Text that cannot be read; the message says why (and where, when known)."""


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel = 2
_BRIEF.maxstring = 60
_BRIEF.maxother = 60
_BRIEF.maxlong = 40


def brief(value: Any) -> str:
    """A short repr of `value` for an error message: bounded in length and depth (the
    builtin `repr` recurses, and would raise on the values this module refuses)."""
    return _BRIEF.repr(value)


# --------------------------------------------------------------------------- JSON


def _json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than `limit` (a scan, no recursion).
    The text need not be valid JSON: json.loads judges that afterwards."""
    if text.count("[") + text.count("{") <= limit:
        return False  # cannot nest deeper than it has brackets
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def load_json(text: str, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """`text` as JSON; TextError if it is not JSON, longer than `max_bytes` or nested
    deeper than `max_depth`."""
    if not isinstance(text, str):
        raise TextError(f"expected JSON text, got {type(text).__name__}")
    if len(text) > max_bytes:
        raise TextError(f"longer than {max_bytes} characters")
    if _json_depth_exceeds(text, max_depth):
        raise TextError(f"nested more than {max_depth} levels deep")
    try:
        return json.loads(text)
    except ValueError as err:  # JSONDecodeError, or an integer too long to convert
        raise TextError(f"not valid JSON: {err}") from None


# --------------------------------------------------------------------------- YAML


class _Composer(yaml.SafeLoader):
    """PyYAML's reader, scanner, parser and composer, with nesting measured as nodes are
    composed. A node too deep is not composed: its events are consumed in a loop and the
    document is marked (`too_deep`), so the documents after it can still be read. Only
    composition is used; construction is `_construct`'s, one document at a time."""

    def __init__(self, text: str, max_depth: int) -> None:
        super().__init__(text)
        self.max_depth = max_depth
        self.depth = 0
        self.too_deep: str | None = None

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.depth >= self.max_depth and not self.check_event(AliasEvent):
            return self._skip_node()
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def _skip_node(self) -> Node:
        first = self.get_event()
        if self.too_deep is None:
            self.too_deep = (f"line {first.start_mark.line + 1}: nested more than "
                             f"{self.max_depth} levels deep")
        open_collections = 1 if isinstance(first, CollectionStartEvent) else 0
        while open_collections:
            event = self.get_event()
            if isinstance(event, CollectionStartEvent):
                open_collections += 1
            elif isinstance(event, CollectionEndEvent):
                open_collections -= 1
        return ScalarNode("tag:yaml.org,2002:null", "", first.start_mark, first.end_mark)


def _too_deep(root: Node, limit: int) -> bool:
    """Whether the composed graph nests deeper than `limit`, counting through aliases
    (a node reached twice is measured once), or refers to itself. A loop, no recursion."""
    heights: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            height = 1 + max((heights[id(c)] for c in _children(node)), default=0)
            if height > limit:
                return True
            heights[key] = height
            continue
        if key in heights:
            continue
        if key in on_path:
            return True  # an alias to an enclosing node: endless nesting
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in heights)
    return False


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, CollectionNode):
        return list(node.value)
    return []


def _construct(node: Node) -> Any:
    """A composed document as Python values (YAML 1.1 safe types); a fresh constructor
    each time, so a document that fails leaves nothing behind for the next."""
    return SafeConstructor().construct_document(node)


def load_yaml_documents(text: str, max_depth: int = MAX_DEPTH) -> Iterator[Any | TextError]:
    """Each YAML document of `text`, in order: its value, or a TextError for a document
    that is nested too deeply or holds a value Python cannot represent (the documents
    after it are still read). Raises TextError when the text is not YAML at all (a syntax
    error: nothing after it can be trusted)."""
    try:
        composer = _Composer(text, max_depth)
    except yaml.YAMLError as err:  # a character YAML does not allow, found at once
        raise TextError(_yaml_problem(err)) from None
    try:
        while True:
            try:
                if not composer.check_node():
                    return
                node = composer.get_node()
            except yaml.YAMLError as err:
                raise TextError(_yaml_problem(err)) from None
            if composer.too_deep is not None:
                yield TextError(composer.too_deep)
                composer.too_deep = None
                continue
            if node is not None and _too_deep(node, max_depth):
                yield TextError(f"line {node.start_mark.line + 1}: nested more than "
                                f"{max_depth} levels deep (through aliases)")
                continue
            try:
                yield None if node is None else _construct(node)
            except (yaml.YAMLError, ValueError, OverflowError) as err:
                # e.g. an integer of more digits than Python converts, a bad timestamp
                yield TextError(_yaml_problem(err) if isinstance(err, yaml.YAMLError)
                                else f"line {node.start_mark.line + 1}: {err}")
    finally:
        composer.dispose()


def load_yaml(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """One YAML document (none: None); TextError for anything else or a bad document."""
    documents = list(load_yaml_documents(text, max_depth))
    if len(documents) > 1:
        raise TextError("expected a single YAML document, found several")
    data = documents[0] if documents else None
    if isinstance(data, TextError):
        raise data
    return data


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    return f"{where}{problem}"
