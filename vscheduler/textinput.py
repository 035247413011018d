"""Reading text a user wrote (JSON annotations, YAML manifests, the conf) without letting
its shape crash the scheduler.

Python's parsers recurse once per level of nesting: a few thousand brackets in a 4 KB
annotation (`[[[[...]]]]`) raise `RecursionError`, which no caller expects, at every
session that reads it. So nesting is measured here *before* anything recursive sees the
text: JSON by a scan of its brackets, YAML while its nodes are composed (and again over
the composed graph, since aliases can nest a document more deeply than its text does,
and make a few kilobytes hold billions of values). Text nested far too deeply for any
limit is refused from there on (`MAX_FLOW_LEVEL`).
YAML is read by libyaml when PyYAML has it (a large manifest about six times faster),
with the same results as the pure-Python reader: see the YAML section.
Everything refused is a `TextError` with a message for the user; callers turn it into
their own error (a Warning event, a skipped document, a `ConfError`).

`brief` renders any value for such a message, however deep or long it is.
"""

from __future__ import annotations

import itertools
import json
import re
import reprlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, ClassVar

import yaml
from yaml.composer import ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentEndEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode
from yaml.reader import Reader
from yaml.resolver import Resolver

__all__ = [
    "MAX_CONF_BYTES",
    "MAX_DEPTH",
    "MAX_JSON_BYTES",
    "MAX_MANIFEST_BYTES",
    "TextError",
    "brief",
    "load_json",
    "load_yaml",
    "load_yaml_documents",
    "read_limited",
]

# Kubernetes objects nest about ten levels (a pod's affinity terms are the deepest);
# a hundred leaves room for any real object and keeps the parsers' recursion far below
# Python's limit of 1000 frames.
MAX_DEPTH = 100
# The API server refuses an object whose annotations exceed 256 KiB in all: no single
# annotation a user wrote can be longer.
MAX_JSON_BYTES = 256 * 1024
# A conf is a ConfigMap's value, which holds 1 MiB at most. Manifests: a 150,000-pod
# cluster is about 60 MiB of YAML, and reading 1 GiB of it would take most of an hour;
# past that (`/dev/zero`, an endless pipe) the text is refused, not read into memory.
MAX_CONF_BYTES = 1024 * 1024
MAX_MANIFEST_BYTES = 1024 * 1024 * 1024


class TextError(ValueError):
    """Text that cannot be read; the message says why (and where, when known)."""


def read_limited(stream: BinaryIO, limit: int, name: str) -> bytes:
    """All of `stream`, or a TextError once it passes `limit` bytes (read no further)."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise TextError(f"{name}: larger than {limit:,} bytes; not read")
    return data


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
# Two readers give the same documents, values and messages. libyaml's (in PyYAML's
# wheels) reads a large manifest about six times faster than the pure-Python one, but
# composes recursively in C, where nesting too deep ends the process (no RecursionError
# to catch): so a first pass over its events, a loop, measures each document before it
# is composed. Whatever libyaml finds wrong, and a tag PyYAML cannot construct (the
# pure-Python scanner refuses some tag forms libyaml takes), is read again by the
# pure-Python reader, whose message the user gets: the same text says the same thing on
# either path.

try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml
    CParser = None

# Whether YAML is read with libyaml (tests turn it off to check the other path).
LIBYAML = CParser is not None
# libyaml composes no deeper than this, whatever a caller allows (deeper limits are the
# pure-Python reader's): 10,000 levels compose on a main thread's stack and 100,000
# overflow it; a thousand stays far from that on any thread.
LIBYAML_MAX_DEPTH = 1000
# Flow collections (`[`, `{`) open at once, past which the text is not read on (the
# libyaml in PyYAML's wheels stops there too): the pure-Python scanner checks every open
# one at each token, so 10,000 brackets cost it 16 s and 60,000 minutes, long before its
# composer could skip them.
MAX_FLOW_LEVEL = 1000
# The nodes a document may hold once its aliases are followed (a node reached twice
# counted twice). Readers of the values follow them, and a few kilobytes of aliases to
# aliases make billions: 300 aliases three deep kept a pod's affinity terms read for
# seconds per session. The largest object the API server stores holds far fewer.
MAX_EXPANDED_NODES = 1_000_000


# YAML 1.1's integers and floats less their base-60 forms (`10:30` is 630 to PyYAML, the
# text "10:30" to kubectl's reader).
_INT = re.compile(r"""^(?:[-+]?0b[0-1_]+
                    |[-+]?0[0-7_]+
                    |[-+]?(?:0|[1-9][0-9_]*)
                    |[-+]?0x[0-9a-fA-F_]+)$""", re.X)
_FLOAT = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X)
_REPLACED = {"tag:yaml.org,2002:int": _INT, "tag:yaml.org,2002:float": _FLOAT}
# An unquoted date or time stays text; `=` (YAML 1.1's "value" key, which no safe
# constructor builds) is the text "=".
_DROPPED = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}


class _Resolver(Resolver):
    """PyYAML's tag resolution, made to read plain values as kubectl's YAML reader does:
    an unquoted date (`2025-01-01`), a base-60 number (`10:30`) or `=` stays the text
    written, as the API server then reads it (a label, an annotation, a
    creationTimestamp are text). PyYAML made a date, a number or an error of them."""

    yaml_implicit_resolvers: ClassVar[dict[Any, list[tuple[str, Any]]]] = {
        first: [(tag, _REPLACED.get(tag, pattern)) for tag, pattern in resolvers
                if tag not in _DROPPED]
        for first, resolvers in Resolver.yaml_implicit_resolvers.items()}


class _Composer(yaml.SafeLoader):
    """PyYAML's reader, scanner, parser and composer, with nesting measured as nodes are
    composed. A node too deep is not composed: its events are consumed in a loop and the
    document is marked (`too_deep`), so the documents after it can still be read. Only
    composition is used; construction is `_construct`'s, one document at a time."""

    yaml_implicit_resolvers = _Resolver.yaml_implicit_resolvers

    def __init__(self, text: str, max_depth: int) -> None:
        super().__init__(text)
        self.max_depth = max_depth
        self.depth = 0
        self.too_deep: str | None = None
        self.aliased = False  # whether the document has aliases (see `_document`)

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            self.aliased = True
        elif self.depth >= self.max_depth:
            return self._skip_node()
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        if self.flow_level >= MAX_FLOW_LEVEL > self.max_depth:
            # Too deep for any caller's limit, and where the document ends cannot be
            # found without scanning on: the rest of the text is refused, as libyaml
            # refuses it.
            raise TextError(self.too_deep or _nested_message(self.line, self.max_depth))
        super().fetch_flow_collection_start(token_class)

    def compose_scalar_node(self, anchor: Any) -> Node:
        event = self.peek_event()
        if event.tag == "!" and event.value == "" and event.style is None:
            # A node with only the non-specific tag, empty (`key: !`): a string, as the
            # YAML spec and libyaml read it; PyYAML's pure-Python parser resolves it as
            # if untagged, to null.
            event.implicit = (False, False)
        return super().compose_scalar_node(anchor)

    def _skip_node(self) -> Node:
        first = self.get_event()
        if self.too_deep is None:
            self.too_deep = _nested_message(first.start_mark.line, self.max_depth)
        _skip_collection(self.get_event, first)
        return ScalarNode("tag:yaml.org,2002:null", "", first.start_mark, first.end_mark)


def _nested_message(line: int, max_depth: int) -> str:
    return f"line {line + 1}: nested more than {max_depth} levels deep"


def _skip_collection(get_event: Callable[[], Event], first: Event) -> None:
    """Consume the events of the node `first` starts (nothing more for a scalar)."""
    open_collections = 1 if isinstance(first, CollectionStartEvent) else 0
    while open_collections:
        event = get_event()
        if isinstance(event, CollectionStartEvent):
            open_collections += 1
        elif isinstance(event, CollectionEndEvent):
            open_collections -= 1


def _alias_problem(root: Node, limit: int) -> str | None:
    """What is wrong with a composed graph that has aliases, counting through them (a
    node reached twice is measured once): nesting deeper than `limit`, referring to
    itself, or more than `MAX_EXPANDED_NODES` nodes once followed. A loop, no
    recursion."""
    heights: dict[int, int] = {}
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    deep = f"nested more than {limit} levels deep (through aliases)"
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            children = _children(node)
            height = 1 + max((heights[id(c)] for c in children), default=0)
            if height > limit:
                return deep
            size = 1 + sum(sizes[id(c)] for c in children)
            if size > MAX_EXPANDED_NODES:
                return f"more than {MAX_EXPANDED_NODES:,} values once its aliases are followed"
            heights[key], sizes[key] = height, size
            continue
        if key in heights:
            continue
        if key in on_path:
            return deep  # an alias to an enclosing node: endless nesting
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in heights)
    return None


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, CollectionNode):
        return list(node.value)
    return []


_MERGE = "tag:yaml.org,2002:merge"


def _repeated_key(root: Node, aliased: bool) -> str | None:
    """Where a mapping of the composed document gives one key twice, in words; None if
    none does. PyYAML keeps the last silently, so a second `spec:` replaced the first
    unsaid; kubectl and the API server refuse such a document. Merge keys (`<<`) and
    the keys they bring are not counted: overriding those is what they are for. A loop
    over the nodes, each once (with `aliased`, nodes may be shared), no recursion."""
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if aliased:
            if id(node) in seen_nodes:
                continue
            seen_nodes.add(id(node))
        if isinstance(node, MappingNode):
            keys: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if isinstance(key, ScalarNode) and key.tag != _MERGE:
                    line = key.start_mark.line + 1
                    first = keys.get((key.tag, key.value))
                    if first is not None:
                        return (f"line {line}: key {brief(key.value)} is given twice in one "
                                f"mapping (first at line {first})")
                    keys[(key.tag, key.value)] = line
                stack.append(value)
        elif isinstance(node, CollectionNode):
            stack.extend(node.value)
    return None


def _construct(node: Node) -> Any:
    """A composed document as Python values (YAML 1.1 safe types); a fresh constructor
    each time, so a document that fails leaves nothing behind for the next."""
    return SafeConstructor().construct_document(node)


def _document(node: Node | None, max_depth: int, aliased: bool,
              raise_yaml_errors: bool = False) -> Any | TextError:
    """A composed document's value, or the TextError that replaces it. Only aliases
    can nest a composed document deeper than its composer allowed: the graph of one
    without (`aliased` false) is not measured again. With `raise_yaml_errors`, what
    PyYAML's constructor refuses (a tag it does not know) is raised, for libyaml's
    reading to hand the text to the pure-Python reader (which may refuse the tag
    earlier, as a syntax error)."""
    if node is None:
        return None
    problem = _alias_problem(node, max_depth) if aliased else None
    if problem is not None:
        return TextError(f"line {node.start_mark.line + 1}: {problem}")
    repeated = _repeated_key(node, aliased)
    if repeated is not None:
        return TextError(repeated)
    try:
        return _construct(node)
    except yaml.YAMLError as err:  # e.g. a tag no safe constructor knows
        if raise_yaml_errors:
            raise
        return TextError(_yaml_problem(err))
    except (ValueError, OverflowError) as err:
        # e.g. an integer of more digits than Python converts, a day past the month's end
        return TextError(f"line {node.start_mark.line + 1}: {err}")
    except (KeyError, AttributeError, TypeError):
        # PyYAML's constructors trust a tagged value's form: `!!bool x` is a KeyError,
        # `!!timestamp x` an AttributeError
        return TextError(f"line {node.start_mark.line + 1}: a value tagged with a type "
                         "is not of that type's form")


def load_yaml_documents(text: str, max_depth: int = MAX_DEPTH) -> Iterator[Any | TextError]:
    """Each YAML document of `text`, in order: its value, or a TextError for a document
    that is nested too deeply or holds a value Python cannot represent (the documents
    after it are still read). Raises TextError when the text is not YAML at all (a syntax
    error: nothing after it can be trusted). libyaml reads when it is there (`LIBYAML`),
    with the same results."""
    if LIBYAML and max_depth <= LIBYAML_MAX_DEPTH:
        return _libyaml_documents(text, max_depth)
    return _python_documents(text, max_depth)


def _python_documents(text: str, max_depth: int) -> Iterator[Any | TextError]:
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
            too_deep, aliased = composer.too_deep, composer.aliased
            composer.too_deep, composer.aliased = None, False
            yield TextError(too_deep) if too_deep else _document(node, max_depth, aliased)
    finally:
        composer.dispose()


if CParser is not None:
    class _CComposer(CParser, _Resolver):  # type: ignore[misc, valid-type]
        """libyaml's parser and composer with the resolver `_Composer` uses: nodes as
        `_Composer` makes them, tags resolved by the same rules."""

        def __init__(self, data: bytes) -> None:
            CParser.__init__(self, data)
            _Resolver.__init__(self)


_END = object()


def _libyaml_documents(text: str, max_depth: int) -> Iterator[Any | TextError]:
    """`_python_documents`' results, read by libyaml. Two parsers go through the text:
    the first measures a document's events (`_measure`), then the second composes it in
    C, or skips it when it is too deep. Neither is ever asked whether a document follows
    (`check_node`): each takes a document whole, by `get_node` or by its events, so one
    way of reading never finds an event the other left half read."""
    if "\t" in text or text.find("\ufeff", 1) >= 0 or Reader.NON_PRINTABLE.search(text):
        # Characters the two read differently: the pure-Python reader refuses a tab
        # between tokens, which libyaml reads as a space, and takes a byte order mark
        # after the first character as text, where libyaml drops it; a character both
        # refuse, the pure-Python reader names with its place.
        yield from _python_documents(text, max_depth)
        return
    data = text.encode("utf-8")
    scout, composer = CParser(data), _CComposer(data)
    read = 0
    try:
        scout.get_event()  # StreamStartEvent
        composer.get_event()
    except yaml.YAMLError:
        yield from _python_documents(text, max_depth)
        return
    while True:
        try:
            document = _next_document(scout, composer, max_depth)
        except yaml.YAMLError:
            # Not YAML, or not YAML to libyaml: what the pure-Python reader makes of the
            # rest (the documents already given are not given again).
            yield from itertools.islice(_python_documents(text, max_depth), read, None)
            return
        if document is _END:
            return
        yield document
        read += 1


def _next_document(scout: Any, composer: Any, max_depth: int) -> Any:
    """The next document's value or TextError (`_END` after the last one)."""
    if scout.check_event(StreamEndEvent):
        return _END
    too_deep, aliased = _measure(scout, max_depth)
    if too_deep is None:
        return _document(composer.get_node(), max_depth, aliased, raise_yaml_errors=True)
    while not isinstance(composer.get_event(), DocumentEndEvent):
        pass
    return TextError(too_deep)


_STEP = {SequenceStartEvent: 1, MappingStartEvent: 1, ScalarEvent: 0,
         SequenceEndEvent: -1, MappingEndEvent: -1}


def _measure(parser: Any, max_depth: int) -> tuple[str | None, bool]:
    """Read one document's events from `parser` as `_Composer` composes them (a node
    deeper than `max_depth` skipped, an alias checked against the anchors before it):
    the too-deep message (None when libyaml may compose it), and whether it has
    aliases. An alias to no anchor, or a second anchor of one name, is a ComposerError,
    for the pure-Python reader to describe."""
    get = parser.get_event
    get()  # DocumentStartEvent
    anchors: set[str] = set()
    depth = 0
    too_deep = None
    aliased = False
    while True:
        event = get()
        kind = type(event)
        step = _STEP.get(kind)
        if step is None:
            if kind is DocumentEndEvent:
                return too_deep, aliased
            if event.anchor not in anchors:  # AliasEvent
                raise ComposerError(None, None, "found undefined alias", event.start_mark)
            aliased = True
        elif step < 0:
            depth -= 1
        elif depth >= max_depth:
            if too_deep is None:
                too_deep = _nested_message(event.start_mark.line, max_depth)
            _skip_collection(get, event)
        else:
            anchor = event.anchor
            if anchor is not None:
                if anchor in anchors:
                    raise ComposerError(None, None, "found duplicate anchor",
                                        event.start_mark)
                anchors.add(anchor)
            depth += step


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
