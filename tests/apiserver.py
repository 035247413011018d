"""A stand-in for the Kubernetes API server, for tests only (the product never imports it).

It listens on 127.0.0.1 (an ephemeral port) and speaks the real HTTP protocol, JSON over
HTTP/1.1, so the official `kubernetes` Python client talks to it as to a cluster. Objects
are plain dicts in memory; one global, monotonically increasing resourceVersion is stamped
on every write. Watches stream newline-delimited JSON events with chunked transfer
encoding, replay a bounded history from a resourceVersion, answer a too-old one with an
in-stream ERROR 410 "Expired" (as the real server does), send BOOKMARK events when asked,
and end at timeoutSeconds.

Served (see RESOURCES): core pods (with /status, /binding, /eviction), nodes, namespaces,
events, configmaps, the core `bindings` collection; `scheduling.k8s.io/v1`
priorityclasses; `coordination.k8s.io/v1` leases; custom resources as their
CustomResourceDefinitions declare them (`crds=`, by default the chart's: Volcano's
podgroups without and queues with a status subresource; `add_crd` serves one more, e.g.
`coscheduling_podgroup_crd()`); discovery (`/api`, `/api/v1`, `/apis`, `/apis/{g}`,
`/apis/{g}/{v}` listing what is served, `podgroups/status` only where declared, `/version`,
`/healthz`). Verbs: list (label selectors; field selectors on the labels the real server
supports for the kind, others a 400 "field label not supported"; limit/continue), watch,
get, create, update (PUT), patch (JSON, merge, strategic merge), delete. A list or get
that asks for `application/json;as=Table;v=v1;g=meta.k8s.io` (kubectl get) is answered
with a Table: pods and events with the real server's columns, custom resources with NAME
and their CRD's printer columns. kubectl get and describe need no OpenAPI document, and
none is served.

As the real server: errors are `Status` objects; a Binding is answered 201 with a Status
(not the Binding), 409 if the pod is bound or being deleted; a PUT or PATCH of an object
with a status subresource ignores status, one of /status changes only status; a stale
metadata.resourceVersion is 409 Conflict, and so is another metadata.uid in a PUT (a
precondition); a PATCH that would change metadata.uid is 422 (immutable), except to a
custom resource's /status, which takes only the status; a write that changes nothing
is no write (same resourceVersion, no event); an object created through the API must have a DNS-1123
subdomain for its name and gets the server's own uid and creationTimestamp; deleting a pod
on a node with a grace period only sets its deletionTimestamp (finish_deletion() ends
it), one on no node goes at once; a Namespace
written in any way has the label kubernetes.io/metadata.name set to its name; pods created
through the API start Pending with their priority from their PriorityClass; list items of
built-in kinds have no kind/apiVersion; times of built-in kinds must carry a UTC offset
(MicroTimes six fractional digits), which catches naive datetimes.

Tests drive it through a small thread-safe Python API: seed and inspect objects
(`create`, `get`, `update`, `patch`, `delete`, `finish_deletion`, `objects`, `events`,
`lease`; these take objects as given, status included, without validation), read what
clients sent (`requests`, `bindings`), and inject faults (`fail`, `expire_history`,
`close_watches`, `send_bookmarks`, `go_down` / `come_back` / `down_for`).

    with FakeApiServer() as server:
        server.create(node("n1"))                       # tests/builders.py
        core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(
            kubernetes.client.Configuration(host=server.url)))
        core.list_node()
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import copy
import json
import random
import re
import select
import socket
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

__all__ = [
    "CHART_CRDS",
    "RESOURCES",
    "ApiError",
    "BindingRecord",
    "FakeApiServer",
    "Fault",
    "Request",
    "Resource",
    "coscheduling_podgroup_crd",
    "crd_resources",
    "load_crd",
    "wait_for",
    "with_status_subresource",
]

Obj = dict[str, Any]
Matcher = Callable[[Obj], bool]

ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Resource:
    """One kind of object the server keeps: where it is served and how it behaves."""

    kind: str
    plural: str
    group: str
    version: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    custom: bool = False  # a custom resource: no strategic merge, items keep kind/apiVersion
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    # A CRD's additionalPrinterColumns (name, type, jsonPath, priority): its Table's
    # columns after NAME (AGE alone when it declares none, as the real server does).
    printer_columns: tuple[Obj, ...] = ()
    singular: str = ""
    categories: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """`plural.group` (`plural` for the core group): unique, where kinds may not be
        (scheduling.volcano.sh and scheduling.x-k8s.io both serve a PodGroup)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        """`v1` for the core group, `group/version` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        """The path the group/version is served under."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def stored(self) -> bool:
        """False for a create-only resource (bindings) that keeps nothing."""
        return "get" in self.verbs


# The built-in resources; custom resources come from CustomResourceDefinitions (see
# crd_resources; by default the chart's, CHART_CRDS).
RESOURCES: tuple[Resource, ...] = (
    Resource("Namespace", "namespaces", "", "v1", False, ("status",), short_names=("ns",)),
    Resource("Node", "nodes", "", "v1", False, ("status",), short_names=("no",)),
    Resource("Pod", "pods", "", "v1", True, ("status", "binding", "eviction"),
             short_names=("po",)),
    Resource("Event", "events", "", "v1", True, short_names=("ev",)),
    Resource("ConfigMap", "configmaps", "", "v1", True, short_names=("cm",)),
    Resource("Binding", "bindings", "", "v1", True, verbs=("create",)),
    Resource("PriorityClass", "priorityclasses", "scheduling.k8s.io", "v1", False,
             short_names=("pc",)),
    Resource("Lease", "leases", "coordination.k8s.io", "v1", True),
    Resource("PodDisruptionBudget", "poddisruptionbudgets", "policy", "v1", True, ("status",),
             short_names=("pdb",)),
)

CHART_CRDS = tuple(sorted((Path(__file__).resolve().parent.parent / "charts" / "vscheduler"
                           / "templates" / "crds").glob("*.yaml")))
_TEMPLATE_LINE = re.compile(r"^\s*\{\{-?.*-?\}\}\s*$")


def load_crd(source: str | Path | Obj) -> Obj:
    """A CustomResourceDefinition from a dict, or from a YAML file; a Helm template's
    lines that hold only a template action (`{{- if ... }}`, `{{- include ... }}`) are
    dropped, which leaves the chart's CRDs as plain YAML with what the server reads."""
    if isinstance(source, dict):
        return copy.deepcopy(source)
    text = Path(source).read_text()
    plain = "\n".join(line for line in text.splitlines() if not _TEMPLATE_LINE.match(line))
    crd = yaml.safe_load(plain)
    if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
        raise ValueError(f"{source}: not a CustomResourceDefinition")
    return cast(Obj, crd)


def coscheduling_podgroup_crd() -> Obj:
    """The CRD of scheduler-plugins' coscheduling PodGroup (scheduling.x-k8s.io), as far
    as the server reads it: a status subresource and its printer columns (after its
    config/crd/bases/scheduling.x-k8s.io_podgroups.yaml)."""
    columns = [("Phase", "string", ".status.phase"), ("MinMember", "integer", ".spec.minMember"),
               ("Running", "integer", ".status.running"),
               ("Succeeded", "integer", ".status.succeeded"),
               ("Failed", "integer", ".status.failed"),
               ("Age", "date", ".metadata.creationTimestamp")]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
            "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
                     "names": {"kind": "PodGroup", "listKind": "PodGroupList",
                               "plural": "podgroups", "singular": "podgroup",
                               "shortNames": ["pg", "pgs"]},
                     "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "additionalPrinterColumns": [
                                       {"name": n, "type": t, "jsonPath": j}
                                       for n, t, j in columns],
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}}


def with_status_subresource(source: str | Path | Obj) -> Obj:
    """A CRD as given, with a status subresource declared on every version."""
    crd = load_crd(source)
    for version in crd["spec"]["versions"]:
        version["subresources"] = {**(version.get("subresources") or {}), "status": {}}
    return crd


def crd_resources(crd: Obj) -> list[Resource]:
    """The resources a CRD serves: one per served version, with the status subresource
    only where the version declares it (the real server serves nothing else)."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        declared = version.get("subresources") or {}
        out.append(Resource(
            names["kind"], names["plural"], spec["group"], version["name"],
            spec.get("scope", "Namespaced") == "Namespaced",
            ("status",) if "status" in declared else (), custom=True,
            short_names=tuple(names.get("shortNames") or ()),
            printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
            singular=names.get("singular") or names["kind"].lower(),
            categories=tuple(names.get("categories") or ())))
    return out

_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
    413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
    429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}

# Strategic merge patch: lists merged by key rather than replaced (an approximation of the
# patchMergeKey tags of the built-in types, by field name).
_MERGE_KEYS = {
    "conditions": "type", "containers": "name", "initContainers": "name",
    "containerStatuses": "name", "initContainerStatuses": "name", "ownerReferences": "uid",
    "volumes": "name", "env": "name", "addresses": "type", "imagePullSecrets": "name",
}

# Fields of the built-in types that are metav1.Time (RFC 3339) or metav1.MicroTime
# (RFC 3339 with exactly six fractional digits): the real server rejects other strings.
_TIME_FIELDS = frozenset({
    "creationTimestamp", "deletionTimestamp", "lastTransitionTime", "lastProbeTime",
    "lastHeartbeatTime", "firstTimestamp", "lastTimestamp", "startTime", "startedAt",
    "finishedAt",
})
_MICROTIME_FIELDS = frozenset({"acquireTime", "renewTime", "eventTime", "lastObservedTime"})
_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
_MICROTIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})")

_BINDING_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/(?:pods/([^/]+)/binding|bindings)$")
_TRUE = frozenset({"1", "t", "T", "true", "True", "TRUE"})
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class ApiError(Exception):
    """A failure answered as a Kubernetes `Status` object."""

    def __init__(self, code: int, message: str, reason: str | None = None,
                 details: Obj | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> Obj:
        """The `Status` object for this error."""
        out: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": self.message, "reason": self.reason,
                    "code": self.code}
        if self.details:
            out["details"] = self.details
        return out


@dataclass
class Request:
    """One HTTP request the server received (faulted and failed ones included)."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str
    watch: bool
    at: float
    code: int | None = None  # the HTTP status answered (200 for a watch stream)
    accept: str = ""  # the Accept header (kubectl asks for a Table)


@dataclass(frozen=True)
class BindingRecord:
    """One Binding request (pods/{name}/binding or the bindings collection)."""

    namespace: str
    pod: str
    node: str
    code: int
    body: Any


@dataclass(eq=False)
class Fault:
    """An injected failure: the next `times` requests matching it fail with `code`."""

    method: str
    path: re.Pattern[str]
    code: int
    times: int
    watch: bool | None
    in_stream: bool
    message: str
    hits: int = 0

    def matches(self, method: str, path: str, watch: bool) -> bool:
        """Whether a request is one this fault is for."""
        return ((self.method in ("*", method)) and self.path.search(path) is not None
                and (self.watch is None or self.watch == watch))


@dataclass(frozen=True)
class _Change:
    rv: int
    type: str
    obj: Obj
    old: Obj | None


@dataclass(eq=False)
class _Watcher:
    resource: Resource
    namespace: str | None
    match: Matcher
    last_rv: int
    bookmarks: bool
    deadline: float
    next_bookmark: float
    initial: list[Obj] = field(default_factory=list)
    error: Obj | None = None  # a Status sent as an ERROR event before the stream ends
    end: str | None = None  # "close": end the stream cleanly; "abort": drop the connection
    want_bookmark: bool = False


@dataclass
class _Reply:
    code: int
    body: Any


# ---------------------------------------------------------------------------------------
# helpers on plain objects


def _now() -> datetime:
    return datetime.now(UTC)


def _timestamp(when: datetime | None = None) -> str:
    return (when or _now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_string_maps(res: Resource, obj: Obj) -> None:
    """Labels and annotations are maps of strings: the API server's decoding refuses any
    other value (a number YAML made of `1.10`) before anything else, with a 400."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    for part in ("labels", "annotations"):
        values = meta.get(part) if isinstance(meta, dict) else None
        if not isinstance(values, dict):
            continue
        for value in values.values():
            if value is not None and not isinstance(value, str):
                kind = "number" if isinstance(value, int | float) and not isinstance(
                    value, bool) else "bool" if isinstance(value, bool) else "object"
                raise ApiError(400, f'{res.kind} in version "{res.version}" cannot be handled '
                               f"as a {res.kind}: json: cannot unmarshal {kind} into Go struct "
                               f"field ObjectMeta.metadata.{part} of type string", "BadRequest")


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _label_namespace(meta: Obj) -> None:
    """As the real server does on every create and update of a Namespace (since 1.21):
    the label `kubernetes.io/metadata.name` holds its name, whatever the client sent, so
    a namespaceSelector can always pick a namespace by name."""
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = meta["labels"] = {}
    labels["kubernetes.io/metadata.name"] = str(meta.get("name") or "")


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _details(res: Resource, name: str) -> Obj:
    details: Obj = {"name": name, "group": res.group, "kind": res.plural}
    if not res.group:
        del details["group"]  # omitted when empty, as the real server does
    return details


def _field(obj: Any, path: str) -> str:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return ""
        obj = obj.get(part)
    if obj is None:
        return ""
    if isinstance(obj, bool):
        return "true" if obj else "false"
    return str(obj)


def _strip_dollar(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_dollar(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_dollar(v) for v in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (a new value; `target` is not changed)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge patch: a merge patch whose known lists merge by key (see
    _MERGE_KEYS), with `$patch: replace|delete` honoured and other directives dropped."""
    if not isinstance(patch, dict):
        return copy.deepcopy(_strip_dollar(patch))
    if patch.get("$patch") == "replace":
        return _strip_dollar(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, list) and k in _MERGE_KEYS and isinstance(result.get(k), list):
            result[k] = _merge_list(result[k], v, _MERGE_KEYS[k])
        elif isinstance(v, dict) and v.get("$patch") == "delete":
            result.pop(k, None)
        else:
            result[k] = strategic_merge_patch(result.get(k), v)
    return result


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            out.append(_strip_dollar(item))
            continue
        at = next((i for i, old in enumerate(out)
                   if isinstance(old, dict) and old.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del out[at]
        elif at is None:
            out.append(_strip_dollar(item))
        else:
            out[at] = strategic_merge_patch(out[at], item)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list) and token.isdigit() and int(token) < len(doc):
            doc = doc[int(token)]
        else:
            raise ApiError(422, f"path /{'/'.join(tokens)} not found")
    return doc


def _json_patch_op(doc: Any, op: Obj) -> Any:
    kind = op.get("op")
    tokens = _pointer(str(op.get("path", "")))
    if kind == "test":
        if _resolve(doc, tokens) != op.get("value"):
            raise ApiError(422, f"testing value {op.get('path')} failed")
        return doc
    if kind in ("move", "copy"):
        value = copy.deepcopy(_resolve(doc, _pointer(str(op.get("from", "")))))
        if kind == "move":
            doc = _json_patch_op(doc, {"op": "remove", "path": op.get("from", "")})
        return _json_patch_op(doc, {"op": "add", "path": op.get("path", ""), "value": value})
    if not tokens:
        if kind in ("add", "replace"):
            return copy.deepcopy(op.get("value"))
        raise ApiError(422, "cannot remove the whole document")
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if kind == "remove" or kind == "replace":
        _resolve(parent, [last])
    if isinstance(parent, dict):
        if kind == "remove":
            del parent[last]
        elif kind in ("add", "replace"):
            parent[last] = copy.deepcopy(op.get("value"))
        else:
            raise ApiError(422, f"unknown JSON patch operation {kind!r}")
    elif isinstance(parent, list):
        index = len(parent) if last == "-" and kind == "add" else int(last)
        if kind == "remove":
            del parent[index]
        elif kind == "replace":
            parent[index] = copy.deepcopy(op.get("value"))
        elif kind == "add":
            if index > len(parent):
                raise ApiError(422, f"index {index} out of range")
            parent.insert(index, copy.deepcopy(op.get("value")))
        else:
            raise ApiError(422, f"unknown JSON patch operation {kind!r}")
    else:
        raise ApiError(422, f"path {op.get('path')} not found")
    return doc


def json_patch(doc: Any, ops: list[Any]) -> Any:
    """RFC 6902 JSON patch (a new value; `doc` is not changed)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict):
            raise ApiError(400, "a JSON patch is a list of operation objects")
        try:
            doc = _json_patch_op(doc, op)
        except (ValueError, IndexError, KeyError) as exc:
            raise ApiError(422, f"JSON patch failed: {exc}") from exc
    return doc


def _check_times(value: Any, where: str = "") -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            path = f"{where}.{k}" if where else k
            if isinstance(v, str):
                if k in _MICROTIME_FIELDS and not _MICROTIME_RE.fullmatch(v):
                    raise ApiError(400, f'{path}: parsing time "{v}" as '
                                   '"2006-01-02T15:04:05.000000Z07:00": not a MicroTime')
                if k in _TIME_FIELDS and not _TIME_RE.fullmatch(v):
                    raise ApiError(400, f'{path}: parsing time "{v}" as '
                                   '"2006-01-02T15:04:05Z07:00": not an RFC 3339 time')
            else:
                _check_times(v, path)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_times(v, f"{where}[{i}]")


def _split_selector(text: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms if t.strip()]


_SET_TERM = re.compile(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)")
_LABEL_KEY = re.compile(r"[\w./-]+")


def label_matcher(selector: str) -> Matcher:
    """A matcher for a label selector (=, ==, !=, in, notin, exists, !exists)."""
    checks: list[Callable[[dict[str, str]], bool]] = []
    for term in _split_selector(selector):
        m = _SET_TERM.fullmatch(term)
        if m:
            key, op = m.group(1), m.group(2)
            values = {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                checks.append(lambda ls, k=key, vs=values: ls.get(k) in vs)
            else:
                checks.append(lambda ls, k=key, vs=values: ls.get(k) not in vs)
        elif "=" in term:
            op = "!=" if "!=" in term else "=="
            key, value = (s.strip() for s in term.replace(op, "=", 1).split("=", 1))
            if not _LABEL_KEY.fullmatch(key):
                raise ApiError(400, f"unable to parse requirement: {term!r}")
            if op == "!=":
                checks.append(lambda ls, k=key, v=value: ls.get(k) != v)
            else:
                checks.append(lambda ls, k=key, v=value: ls.get(k) == v)
        elif term.startswith("!") and _LABEL_KEY.fullmatch(term[1:].strip()):
            absent = term[1:].strip()
            checks.append(lambda ls, k=absent: k not in ls)
        elif _LABEL_KEY.fullmatch(term):
            checks.append(lambda ls, k=term: k in ls)
        else:
            raise ApiError(400, f"unable to parse requirement: {term!r}")

    def match(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(check(labels) for check in checks)

    return match


# The field labels the real server selects on, by resource (besides metadata.name, and
# metadata.namespace for namespaced ones), with the path each reads where it differs.
_FIELD_LABELS: dict[str, dict[str, str]] = {
    "pods": {f: f for f in ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                            "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                            "status.podIP", "status.nominatedNodeName")},
    "events": {**{f"involvedObject.{f}": f"involvedObject.{f}" for f in (
        "kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
        "reason": "reason", "reportingComponent": "reportingComponent", "type": "type",
        "source": "source.component"},
    "nodes": {"spec.unschedulable": "spec.unschedulable"},
    "namespaces": {"status.phase": "status.phase"},
}


def field_labels(res: Resource) -> dict[str, str]:
    """Field label -> the object path it reads, for `res` (as the real server has them)."""
    labels = {"metadata.name": "metadata.name"}
    if res.namespaced:
        labels["metadata.namespace"] = "metadata.namespace"
    labels.update(_FIELD_LABELS.get(res.id, {}))
    return labels


def field_matcher(selector: str, labels: dict[str, str] | None = None) -> Matcher:
    """A matcher for a field selector: `label=value`, `label==value`, `label!=value` terms
    (a missing field reads as the empty string). With `labels` (see field_labels), a
    label not among them is a 400, as the real server answers; without, any dotted path."""
    checks: list[Callable[[Obj], bool]] = []
    for term in _split_selector(selector):
        op = "!=" if "!=" in term else "=="
        path, _, value = (s.strip() for s in term.replace(op, "=", 1).partition("="))
        if not path or "=" not in term:
            raise ApiError(400, f"invalid selector: {term!r}; can't understand it")
        if labels is not None:
            if path not in labels:
                raise ApiError(400, f"field label not supported: {path}")
            path = labels[path]
        if op == "!=":
            checks.append(lambda o, p=path, v=value: _field(o, p) != v)
        else:
            checks.append(lambda o, p=path, v=value: _field(o, p) == v)
    return lambda obj: all(check(obj) for check in checks)


# ---------------------------------------------------------------------------------------
# Tables: what the server prints for `kubectl get` (Accept: ...;as=Table;g=meta.k8s.io)


def table_version(accept: str) -> str | None:
    """The meta.k8s.io version of Table an Accept header asks for first, or None."""
    for media in accept.split(","):
        params = dict(p.strip().partition("=")[::2] for p in media.split(";")[1:])
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" \
                and params.get("v") in ("v1", "v1beta1"):
            return params["v"]
    return None


def human_duration(seconds: float) -> str:
    """An age as the API server prints it (apimachinery's HumanDuration)."""
    if seconds < -1:
        return "<invalid>"
    s = max(int(seconds), 0)
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if years < 8:
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{years}y"


def _age(stamp: Any) -> str:
    if not isinstance(stamp, str) or not _TIME_RE.fullmatch(stamp):
        return "<unknown>"
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return human_duration((_now() - when).total_seconds())


def _column(name: str, kind: str = "string", priority: int = 0, fmt: str = "") -> Obj:
    return {"name": name, "type": kind, "format": fmt, "description": "",
            "priority": priority}


def _none(value: Any) -> Any:
    return "<none>" if value in (None, "") else value


_POD_COLUMNS = (_column("Name", fmt="name"), _column("Ready"), _column("Status"),
                _column("Restarts"), _column("Age"), _column("IP", priority=1),
                _column("Node", priority=1), _column("Nominated Node", priority=1),
                _column("Readiness Gates", priority=1))


def _pod_cells(pod: Obj) -> list[Any]:
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod["metadata"]
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    reason = status.get("reason") or status.get("phase") or "Pending"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    for st in statuses:
        state = st.get("state") or {}
        detail = (state.get("waiting") or {}).get("reason") \
            or (state.get("terminated") or {}).get("reason")
        if detail:
            reason = detail
    if meta.get("deletionTimestamp"):
        reason = "Terminating"
    ready = sum(1 for st in statuses if st.get("ready"))
    restarts = sum(int(st.get("restartCount") or 0) for st in statuses)
    gates = spec.get("readinessGates") or []
    gates_cell = f"0/{len(gates)}" if gates else "<none>"
    return [meta.get("name"), f"{ready}/{len(containers)}", reason, str(restarts),
            _age(meta.get("creationTimestamp")), _none(status.get("podIP")),
            _none(spec.get("nodeName")), _none(status.get("nominatedNodeName")), gates_cell]


_EVENT_COLUMNS = (_column("Last Seen"), _column("Type"), _column("Reason"),
                  _column("Object"), _column("Subobject", priority=1),
                  _column("Source", priority=1), _column("Message"),
                  _column("First Seen", priority=1), _column("Count", "integer", 1),
                  _column("Name", priority=1, fmt="name"))


def _event_cells(event: Obj) -> list[Any]:
    involved = event.get("involvedObject") or {}
    source = event.get("source") or {}
    origin = source.get("component") or event.get("reportingComponent") or ""
    if source.get("host"):
        origin += f", {source['host']}"
    last = event.get("lastTimestamp") or event.get("eventTime")
    return [_age(last), event.get("type", ""), event.get("reason", ""),
            f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            involved.get("fieldPath", ""), origin, event.get("message", ""),
            _age(event.get("firstTimestamp") or last), int(event.get("count") or 1),
            event["metadata"].get("name")]


def _json_path(obj: Any, path: str) -> Any:
    """A printer column's simple JSONPath (`.status.phase`, `.spec.items[0].name`)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            index = int(part[1:-1])
            obj = obj[index] if isinstance(obj, list) and index < len(obj) else None
        else:
            obj = obj.get(part) if isinstance(obj, dict) else None
        if obj is None:
            return None
    return obj


def _custom_columns(res: Resource) -> tuple[list[Obj], list[Obj]]:
    """(column definitions, printer columns) of a custom resource: NAME, then its CRD's
    columns, or AGE when it declares none (as apiextensions-apiserver serves them)."""
    printer = list(res.printer_columns) or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    columns = [_column("Name", fmt="name")]
    for col in printer:
        kind = col.get("type", "string")
        columns.append({"name": col["name"], "type": "string" if kind == "date" else kind,
                        "format": col.get("format", ""),
                        "description": col.get("description", ""),
                        "priority": int(col.get("priority", 0))})
    return columns, printer


def _custom_cells(obj: Obj, printer: list[Obj]) -> list[Any]:
    cells: list[Any] = [obj["metadata"].get("name")]
    for col in printer:
        value = _json_path(obj, col["jsonPath"])
        if value is not None and col.get("type") == "date":
            value = _age(value)
        elif isinstance(value, (dict, list)):
            value = json.dumps(value)
        elif isinstance(value, (bool, int, float)) and col.get("type", "string") == "string":
            # A string column gives a value's text (Volcano's Tier column holds an integer).
            value = json.dumps(value)
        cells.append(value)
    return cells


def to_table(res: Resource, items: list[Obj], meta: Obj, version: str,
             include: str) -> Obj:
    """`items` of `res` as the Table the real server answers `kubectl get` with; each
    row's object is per `includeObject` (None, Metadata, the default, or Object)."""
    if res.custom:
        columns, printer = _custom_columns(res)
        cells: Callable[[Obj], list[Any]] = lambda o: _custom_cells(o, printer)  # noqa: E731
    elif res.kind == "Pod":
        columns, cells = list(_POD_COLUMNS), _pod_cells
    elif res.kind == "Event":
        columns, cells = list(_EVENT_COLUMNS), _event_cells
    else:
        columns = [_column("Name", fmt="name"), _column("Created At", "date")]
        cells = lambda o: [o["metadata"].get("name"),  # noqa: E731
                           o["metadata"].get("creationTimestamp")]
    rows = []
    for obj in items:
        row: Obj = {"cells": cells(obj)}
        if include == "Object":
            row["object"] = {"kind": res.kind, "apiVersion": res.api_version, **obj}
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata",
                             "apiVersion": f"meta.k8s.io/{version}",
                             "metadata": obj["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}", "metadata": meta,
            "columnDefinitions": columns, "rows": rows}


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01,
             message: str = "condition") -> Any:
    """Poll `predicate` until it returns something truthy (returned), at most `timeout`
    seconds; then AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


# ---------------------------------------------------------------------------------------
# HTTP plumbing


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], api: FakeApiServer) -> None:
        self.api = api
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection the client (or an outage) dropped is no error worth printing."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "vscheduler-test-apiserver"
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms stalls

    @property
    def api(self) -> FakeApiServer:
        return cast(_HTTPServer, self.server).api

    def setup(self) -> None:
        super().setup()
        self.api._track(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.api._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `FakeApiServer.requests()` instead."""

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        raw = self._read_body()
        body: Any = None
        bad_body = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body, bad_body = raw.decode("utf-8", "replace"), True
        request = self.api._record(self.command, split.path, query, body,
                                   self.headers.get("Content-Type", ""),
                                   self.headers.get("Accept", ""))
        try:
            if bad_body:
                raise ApiError(400, "the body of the request is not valid JSON")
            outcome = self.api._handle(request)
        except ApiError as exc:
            outcome = _Reply(exc.code, exc.status())
        except Exception:
            self.api._internal_error(traceback.format_exc())
            outcome = _Reply(500, ApiError(500, "internal error in the test API server")
                             .status())
        try:
            if isinstance(outcome, _Watcher):
                request.code = 200
                self._stream(outcome)
            else:
                request.code = outcome.code
                self._send(outcome.code, outcome.body)
        except OSError:
            self.close_connection = True

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, events: list[Obj]) -> None:
        for event in events:
            line = json.dumps(event).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _stream(self, watcher: _Watcher) -> None:
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if watcher.initial:
                self._chunk(watcher.initial)
            while True:
                events, done = self.api._next_events(watcher)
                if done == "abort":
                    return
                if events:
                    self._chunk(events)
                if done == "close":
                    break
                if self._client_gone():
                    return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        finally:
            self.api._unregister(watcher)


# ---------------------------------------------------------------------------------------
# the server


class FakeApiServer:
    """An in-memory Kubernetes API server on 127.0.0.1, for tests (see the module doc).

    `history_limit` bounds the watch history kept per resource (older resourceVersions get
    410 Expired); `bookmark_interval` is how often a watch that allows bookmarks gets one;
    `watch_timeout` ends a watch that gave no timeoutSeconds. Every public method is
    thread-safe.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, history_limit: int = 1000,
                 bookmark_interval: float = 1.0, watch_timeout: float = 300.0,
                 strict_times: bool = True,
                 crds: tuple[str | Path | Obj, ...] | list[str | Path | Obj] = CHART_CRDS
                 ) -> None:
        self.history_limit = history_limit
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.strict_times = strict_times
        self._host = host
        self._port = port
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._rv = 100
        self._sorted_keys: dict[Any, tuple[int, list[tuple[str, str]]]] = {}
        self.resources: tuple[Resource, ...] = ()
        self._store: dict[str, dict[tuple[str, str], Obj]] = {}
        self._history: dict[str, deque[_Change]] = {}
        self._floor: dict[str, int] = {}
        self._serve(RESOURCES)
        for crd in crds:
            self.add_crd(crd)
        self._faults: list[Fault] = []
        self._requests: list[Request] = []
        self._bindings: list[BindingRecord] = []
        self._watchers: set[_Watcher] = set()
        self._conns: set[socket.socket] = set()
        self._errors: list[str] = []
        self._httpd: _HTTPServer | None = None
        self._serving: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._started = False
        self._stopped = False

    # -- lifecycle -------------------------------------------------------------------------

    def add_crd(self, crd: str | Path | Obj) -> list[Resource]:
        """Serve what a CustomResourceDefinition (a dict or a YAML file) defines, as the
        real server does once the CRD is established: its resources, in discovery too."""
        added = crd_resources(load_crd(crd))
        with self._lock:
            known = {r.id + "/" + r.version for r in self.resources}
            self._serve([r for r in added if r.id + "/" + r.version not in known])
        return added

    def _serve(self, resources: Any) -> None:
        for res in resources:
            self.resources += (res,)
            self._store.setdefault(res.id, {})
            self._history.setdefault(res.id, deque())
            self._floor.setdefault(res.id, self._rv)

    def start(self) -> FakeApiServer:
        """Listen (on an ephemeral port unless one was given) and serve in a thread."""
        with self._lock:
            if self._started:
                raise RuntimeError("already started")
            self._started = True
        self._listen()
        return self

    def stop(self) -> None:
        """Stop for good: drop every connection and watch, close the port."""
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self._unlisten()
        deadline = time.monotonic() + 2.0
        with self._cond:
            while self._watchers and time.monotonic() < deadline:
                self._cond.wait(0.05)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port (kept across go_down/come_back)."""
        return self._port

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`, for `kubernetes.client.Configuration(host=...)`."""
        return f"http://{self._host}:{self._port}"

    @property
    def resource_version(self) -> str:
        """The current (latest) resourceVersion."""
        with self._lock:
            return str(self._rv)

    @property
    def is_up(self) -> bool:
        """Whether the server is accepting connections."""
        with self._lock:
            return self._httpd is not None

    def errors(self) -> list[str]:
        """Tracebacks of unexpected exceptions in the server (answered 500): a test can
        assert there were none."""
        with self._lock:
            return list(self._errors)

    def _listen(self) -> None:
        deadline = time.monotonic() + 3.0
        while True:
            try:
                httpd = _HTTPServer((self._host, self._port), self)
                break
            except OSError:
                if self._port == 0 or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
        self._port = httpd.server_address[1]
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                  name=f"fake-apiserver-{self._port}", daemon=True)
        with self._lock:
            self._httpd, self._serving = httpd, thread
        thread.start()

    def _unlisten(self) -> None:
        with self._cond:
            httpd, thread = self._httpd, self._serving
            self._httpd = self._serving = None
            for watcher in self._watchers:
                watcher.end = "abort"
            self._cond.notify_all()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(2.0)
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def go_down(self) -> None:
        """Become unreachable: close the port and drop every open connection (watches
        break mid-stream). The stored objects are kept."""
        with self._lock:
            if self._stopped or self._httpd is None:
                return
        self._unlisten()

    def come_back(self) -> None:
        """Listen again on the same port after go_down()."""
        with self._lock:
            if self._stopped or self._httpd is not None:
                return
            self._timer = None
        self._listen()

    def down_for(self, seconds: float) -> threading.Timer:
        """go_down() now and come_back() after `seconds` (in a timer thread)."""
        self.go_down()
        timer = threading.Timer(seconds, self.come_back)
        timer.daemon = True
        with self._lock:
            self._timer = timer
        timer.start()
        return timer

    def _track(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.add(conn)

    def _untrack(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)

    def _internal_error(self, text: str) -> None:
        with self._lock:
            self._errors.append(text)

    # -- faults and records ------------------------------------------------------------------

    def fail(self, method: str, path: str, code: int = 500, times: int = 1, *,
             watch: bool | None = None, in_stream: bool | None = None,
             message: str | None = None) -> Fault:
        """Fail the next `times` requests whose method is `method` ("*" for any) and whose
        path matches the regex `path` (re.search, without the query) with `code`.

        `watch` narrows to watch requests (True) or to the others (False). A failed watch
        is answered with that HTTP status, except when `in_stream` (by default: code 410 on
        a watch), when it is a 200 stream carrying one ERROR event with the Status, as the
        real server answers an expired resourceVersion.
        """
        fault = Fault(method.upper(), re.compile(path), code, times, watch,
                      code == 410 if in_stream is None else in_stream,
                      message or f"injected failure ({code})")
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Forget every fault not used up yet."""
        with self._lock:
            self._faults.clear()

    def _take_fault(self, method: str, path: str, watch: bool) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and fault.matches(method, path, watch):
                    fault.times -= 1
                    fault.hits += 1
                    if fault.times == 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def _record(self, method: str, path: str, query: dict[str, str], body: Any,
                content_type: str, accept: str = "") -> Request:
        request = Request(method, path, query, body, content_type,
                          query.get("watch", "") in _TRUE, time.time(), accept=accept)
        with self._lock:
            self._requests.append(request)
        return request

    def requests(self, method: str | None = None, path: str | None = None, *,
                 watch: bool | None = None) -> list[Request]:
        """The requests received, oldest first; narrowed by method, path regex, watch."""
        with self._lock:
            found = list(self._requests)
        return [r for r in found
                if (method is None or r.method == method.upper())
                and (path is None or re.search(path, r.path))
                and (watch is None or r.watch == watch)]

    def clear_requests(self) -> None:
        """Forget the requests (and bindings) recorded so far."""
        with self._lock:
            self._requests.clear()
            self._bindings.clear()

    def bindings(self) -> list[BindingRecord]:
        """Every Binding request received, in order, with the code it was answered."""
        with self._lock:
            return list(self._bindings)

    # -- watches -----------------------------------------------------------------------------

    def expire_history(self, kind: str | None = None) -> None:
        """Forget the watch history (of one kind, or all): the resourceVersion moves on, a
        watch from any earlier one gets ERROR 410 Expired, and so do the open watches of
        that kind, at once. A list made after this gives a resourceVersion that works."""
        with self._cond:
            self._rv += 1
            for res in self._kinds(kind):
                self._history[res.id].clear()
                self._floor[res.id] = self._rv
            self._cond.notify_all()

    def close_watches(self, kind: str | None = None) -> None:
        """End the open watches (of one kind, or all) cleanly, as at their timeout."""
        plurals = {r.id for r in self._kinds(kind)}
        with self._cond:
            for watcher in self._watchers:
                if watcher.resource.id in plurals:
                    watcher.end = watcher.end or "close"
            self._cond.notify_all()

    def send_bookmarks(self, kind: str | None = None) -> None:
        """Send a BOOKMARK now on the open watches that allow them."""
        plurals = {r.id for r in self._kinds(kind)}
        with self._cond:
            for watcher in self._watchers:
                if watcher.resource.id in plurals and watcher.bookmarks:
                    watcher.want_bookmark = True
            self._cond.notify_all()

    def watchers(self, kind: str | None = None) -> int:
        """How many watches are open (of one kind, or all)."""
        plurals = {r.id for r in self._kinds(kind)}
        with self._lock:
            return sum(1 for w in self._watchers if w.resource.id in plurals)

    def _unregister(self, watcher: _Watcher) -> None:
        with self._cond:
            self._watchers.discard(watcher)
            self._cond.notify_all()

    def _translate(self, watcher: _Watcher, change: _Change) -> Obj | None:
        obj = change.obj
        if watcher.namespace is not None and _key(obj)[0] != watcher.namespace:
            return None
        if change.type != "MODIFIED":
            return {"type": change.type, "object": obj} if watcher.match(obj) else None
        now = watcher.match(obj)
        before = change.old is not None and watcher.match(change.old)
        if now:
            return {"type": "MODIFIED" if before else "ADDED", "object": obj}
        if before and change.old is not None:
            old = copy.deepcopy(change.old)
            _meta(old)["resourceVersion"] = str(change.rv)
            return {"type": "DELETED", "object": old}
        return None

    def _changes_since(self, watcher: _Watcher, rv: int) -> list[Obj]:
        found: list[_Change] = []
        for change in reversed(self._history[watcher.resource.id]):
            if change.rv <= rv:
                break
            found.append(change)
        events = [self._translate(watcher, c) for c in reversed(found)]
        return [e for e in events if e is not None]

    def _bookmark(self, watcher: _Watcher, annotations: dict[str, str] | None = None) -> Obj:
        meta: Obj = {"resourceVersion": str(watcher.last_rv)}
        if annotations:
            meta["annotations"] = annotations
        return {"type": "BOOKMARK", "object": {"kind": watcher.resource.kind,
                                               "apiVersion": watcher.resource.api_version,
                                               "metadata": meta}}

    def _expired(self, rv: int, floor: int) -> Obj:
        return {"type": "ERROR", "object": ApiError(
            410, f"too old resource version: {rv} ({floor})", "Expired").status()}

    def _next_events(self, watcher: _Watcher) -> tuple[list[Obj], str | None]:
        """What to send next on a watch, waiting a little for it; and whether to end."""
        plural = watcher.resource.id
        with self._cond:
            if watcher.error is not None:
                return [{"type": "ERROR", "object": watcher.error}], "close"
            now = time.monotonic()
            history = self._history[plural]
            news = ((history and history[-1].rv > watcher.last_rv)
                    or self._floor[plural] > watcher.last_rv)
            bookmark_due = watcher.bookmarks and (watcher.want_bookmark
                                                  or now >= watcher.next_bookmark)
            if watcher.end is None and not news and not bookmark_due and now < watcher.deadline:
                wait = min(0.25, watcher.deadline - now)
                if watcher.bookmarks:
                    wait = min(wait, max(watcher.next_bookmark - now, 0.0))
                self._cond.wait(wait)
            if watcher.end == "abort" or self._stopped:
                return [], "abort"
            if self._floor[plural] > watcher.last_rv:
                return [self._expired(watcher.last_rv, self._floor[plural])], "close"
            events = self._changes_since(watcher, watcher.last_rv)
            watcher.last_rv = max(watcher.last_rv, self._rv)
            now = time.monotonic()
            if watcher.bookmarks and (watcher.want_bookmark or now >= watcher.next_bookmark):
                events.append(self._bookmark(watcher))
                watcher.next_bookmark = now + self.bookmark_interval
            watcher.want_bookmark = False
            if watcher.end == "close" or now >= watcher.deadline:
                return events, "close"
            return events, None

    def _watch(self, res: Resource, ns: str | None, query: dict[str, str],
               fault: Fault | None) -> _Watcher:
        match = self._matcher(res, query)
        timeout = query.get("timeoutSeconds", "")
        try:
            seconds = float(timeout) if timeout else 0.0
        except ValueError as exc:
            raise ApiError(400, f"invalid timeoutSeconds {timeout!r}") from exc
        now = time.monotonic()
        bookmarks = query.get("allowWatchBookmarks", "") in _TRUE
        rv_text = query.get("resourceVersion", "")
        with self._cond:
            watcher = _Watcher(res, ns, match, self._rv, bookmarks,
                               now + (seconds if seconds > 0 else self.watch_timeout),
                               now + self.bookmark_interval)
            if fault is not None:
                watcher.error = ApiError(fault.code, fault.message).status()
            elif rv_text in ("", "0") or query.get("sendInitialEvents", "") in _TRUE:
                items = sorted(self._store[res.id].items())
                watcher.initial = [{"type": "ADDED", "object": obj} for key, obj in items
                                   if (ns is None or key[0] == ns) and match(obj)]
                if bookmarks and query.get("sendInitialEvents", "") in _TRUE:
                    watcher.initial.append(self._bookmark(
                        watcher, {"k8s.io/initial-events-end": "true"}))
            else:
                try:
                    rv = int(rv_text)
                except ValueError as exc:
                    raise ApiError(400, f"invalid resource version {rv_text!r}") from exc
                floor = self._floor[res.id]
                if rv < floor:
                    watcher.error = self._expired(rv, floor)["object"]
                else:
                    watcher.initial = self._changes_since(watcher, rv)
                    watcher.last_rv = max(rv, self._rv)
            self._watchers.add(watcher)
        return watcher

    # -- the test-side object API --------------------------------------------------------------

    def _kinds(self, kind: str | None) -> list[Resource]:
        return [r for r in self.resources if r.stored] if kind is None \
            else [self._resource(kind)]

    def _resource(self, kind: str, api_version: str | None = None) -> Resource:
        """The resource `kind` names (kind, plural, `plural.group` or a short name); of
        several (a PodGroup of two groups), the one of `api_version`, else the first."""
        for res in self.resources:
            if ((kind in (res.kind, res.plural, res.kind.lower(), res.id)
                 or kind in res.short_names)
                    and api_version in (None, res.api_version)):
                return res
        if api_version is not None:
            return self._resource(kind)
        raise KeyError(f"unknown kind {kind!r}")

    def create(self, obj: Obj) -> Obj:
        """Store a new object as given, status included (the `kind` says which resource);
        defaults and stamps it as the server would. Returns what is stored."""
        res = self._resource(str(obj.get("kind", "")), obj.get("apiVersion"))
        namespace = _key(obj)[0] or ("default" if res.namespaced else "")
        with self._cond:
            return copy.deepcopy(self._create(res, copy.deepcopy(obj), namespace, False))

    def create_all(self, objs: list[Obj]) -> list[Obj]:
        """create() each object, in order."""
        return [self.create(obj) for obj in objs]

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        """A copy of the stored object, or None."""
        res = self._resource(kind)
        with self._lock:
            found = self._store[res.id].get((namespace or "", name))
            return copy.deepcopy(found) if found is not None else None

    def objects(self, kind: str, namespace: str | None = None) -> list[Obj]:
        """Copies of the stored objects of a kind (in one namespace), oldest first."""
        res = self._resource(kind)
        with self._lock:
            return [copy.deepcopy(o) for k, o in self._store[res.id].items()
                    if namespace is None or k[0] == namespace]

    def update(self, obj: Obj) -> Obj:
        """Replace a stored object as a whole (status included, no resourceVersion check),
        e.g. as a kubelet would report a pod Running. Returns what is stored."""
        res = self._resource(str(obj.get("kind", "")), obj.get("apiVersion"))
        namespace, name = _key(obj)
        if res.namespaced and not namespace:
            namespace = "default"
        with self._cond:
            old = self._stored(res, (namespace if res.namespaced else "", name))
            new = copy.deepcopy(obj)
            meta = _meta(new)
            if res.namespaced:
                meta["namespace"] = namespace
            for field_name in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
                if field_name in old["metadata"]:
                    meta.setdefault(field_name, old["metadata"][field_name])
            new.setdefault("apiVersion", res.api_version)
            return copy.deepcopy(self._commit(res, "MODIFIED", new, old))

    def patch(self, kind: str, namespace: str | None, name: str, patch: Obj) -> Obj:
        """Apply a JSON merge patch to a stored object (status included)."""
        res = self._resource(kind)
        with self._cond:
            old = self._stored(res, (namespace or "", name))
            new = merge_patch(old, patch)
            return copy.deepcopy(self._commit(res, "MODIFIED", new, old))

    def delete(self, kind: str, namespace: str | None, name: str, grace: int = 0) -> Obj:
        """Delete at once (DELETED event); a pod with `grace` > 0 only gets its
        deletionTimestamp, until finish_deletion(). Returns the last state."""
        res = self._resource(kind)
        with self._cond:
            old = self._stored(res, (namespace or "", name))
            if res.kind == "Pod" and grace > 0:
                return copy.deepcopy(self._mark_deleting(res, old, grace))
            return copy.deepcopy(self._remove(res, old))

    def finish_deletion(self, namespace: str, name: str) -> Obj:
        """Remove a pod (gracefully deleting or not), as its kubelet would once its
        containers stopped: DELETED event."""
        res = self._resource("Pod")
        with self._cond:
            return copy.deepcopy(self._remove(res, self._stored(res, (namespace, name))))

    def events(self, namespace: str | None = None) -> list[Obj]:
        """The core v1 Events stored, oldest first."""
        return self.objects("Event", namespace)

    def lease(self, namespace: str, name: str) -> Obj | None:
        """The Lease, or None."""
        return self.get("Lease", namespace, name)

    # -- storage (callers hold the lock) -------------------------------------------------------

    def _stored(self, res: Resource, key: tuple[str, str]) -> Obj:
        found = self._store[res.id].get(key)
        if found is None:
            raise ApiError(404, f'{self._qualified(res)} "{key[1]}" not found', "NotFound",
                           _details(res, key[1]))
        return found

    @staticmethod
    def _qualified(res: Resource) -> str:
        return f"{res.plural}.{res.group}" if res.group else res.plural

    def _commit(self, res: Resource, kind: str, new: Obj, old: Obj | None) -> Obj:
        """Stamp a new resourceVersion on `new` (a fresh dict, never mutated afterwards),
        store or remove it, and append the change to the watch history. An update that
        changes nothing is no write at all: `old` is returned."""
        meta = _meta(new)
        if kind != "DELETED" and res.id == "namespaces":
            _label_namespace(meta)
        if old is not None and kind == "MODIFIED":
            if res.custom:
                # Every change but metadata's moves the generation on; status's too where
                # it is no subresource of its own (as the real server counts).
                kept = {"metadata", "kind", "apiVersion"}
                if "status" in res.subresources:
                    kept.add("status")
                changed = any(new.get(k) != old.get(k) for k in set(new) | set(old)
                              if k not in kept)
                meta["generation"] = int(old["metadata"].get("generation", 1)) + changed
            meta["resourceVersion"] = old["metadata"].get("resourceVersion")
            if new == old:
                return old  # a no-op write: no new resourceVersion, no event (as for real)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        store = self._store[res.id]
        if kind == "DELETED":
            store.pop(_key(new), None)
        else:
            store[_key(new)] = new
        history = self._history[res.id]
        history.append(_Change(self._rv, kind, new, old))
        while len(history) > max(self.history_limit, 1):
            self._floor[res.id] = max(self._floor[res.id], history.popleft().rv)
        self._cond.notify_all()
        return new

    def _create(self, res: Resource, obj: Obj, namespace: str, from_api: bool) -> Obj:
        meta = _meta(obj)
        if res.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if meta.get("generateName"):
                suffix = "".join(random.choice(_NAME_CHARS) for _ in range(5))
                meta["name"] = f"{meta['generateName']}{suffix}"
            else:
                raise ApiError(422, f"{res.kind} is invalid: metadata.name: Required value: "
                               "name or generateName is required", "Invalid")
        if from_api:
            _check_string_maps(res, obj)
        if from_api and not _SUBDOMAIN.fullmatch(meta["name"]):
            # (the real server's check for most kinds: a DNS-1123 subdomain)
            raise ApiError(422, f'{res.kind} "{meta["name"]}" is invalid: metadata.name: '
                           "Invalid value: a lowercase RFC 1123 subdomain must consist of "
                           "lower case alphanumeric characters, '-' or '.', and must start "
                           "and end with an alphanumeric character", "Invalid")
        key = _key(obj)
        if key in self._store[res.id]:
            raise ApiError(409, f'{self._qualified(res)} "{key[1]}" already exists',
                           "AlreadyExists",
                           _details(res, key[1]))
        obj["kind"] = res.kind
        obj.setdefault("apiVersion", res.api_version)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _timestamp())
        if from_api:
            meta["uid"] = str(uuid.uuid4())  # (the server's own, whatever was sent)
            meta["creationTimestamp"] = _timestamp()
            for transient in ("resourceVersion", "deletionTimestamp",
                              "deletionGracePeriodSeconds"):
                meta.pop(transient, None)
        if res.custom:
            meta.setdefault("generation", 1)
            if from_api and "status" in res.subresources:
                obj.pop("status", None)
        if res.kind == "Pod":
            self._default_pod(obj, from_api)
        return self._commit(res, "ADDED", obj, None)

    def _default_pod(self, pod: Obj, from_api: bool) -> None:
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            spec = pod["spec"] = {}
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        if from_api or not isinstance(pod.get("status"), dict):
            pod["status"] = {"phase": "Pending"}
        else:
            pod["status"].setdefault("phase", "Pending")
        if "priority" in spec:
            return
        classes = self._store["priorityclasses.scheduling.k8s.io"]
        name = spec.get("priorityClassName")
        if name:
            found = classes.get(("", name))
            if found is not None:
                spec["priority"] = int(found.get("value", 0))
            elif from_api:
                raise ApiError(403, f'pods "{_key(pod)[1]}" is forbidden: no PriorityClass '
                               f"with name {name} was found", "Forbidden")
            return
        default = next((c for c in classes.values() if c.get("globalDefault")), None)
        if default is not None:
            spec["priorityClassName"] = default["metadata"]["name"]
            spec["priority"] = int(default.get("value", 0))
        else:
            spec["priority"] = 0

    def _remove(self, res: Resource, old: Obj) -> Obj:
        return self._commit(res, "DELETED", copy.deepcopy(old), old)

    def _mark_deleting(self, res: Resource, old: Obj, grace: int) -> Obj:
        if old["metadata"].get("deletionTimestamp"):
            return old
        new = copy.deepcopy(old)
        new["metadata"]["deletionTimestamp"] = _timestamp(_now() + timedelta(seconds=grace))
        new["metadata"]["deletionGracePeriodSeconds"] = grace
        return self._commit(res, "MODIFIED", new, old)

    # -- HTTP request handling -------------------------------------------------------------------

    def _handle(self, request: Request) -> _Reply | _Watcher:
        fault = self._take_fault(request.method, request.path, request.watch)
        if fault is not None and not (request.watch and fault.in_stream):
            binding = _BINDING_PATH.search(request.path)
            if binding is not None and request.method == "POST":
                body = request.body if isinstance(request.body, dict) else {}
                name = binding.group(2) or (body.get("metadata") or {}).get("name", "")
                node = (body.get("target") or {}).get("name", "")
                with self._lock:
                    self._bindings.append(BindingRecord(binding.group(1), str(name),
                                                        str(node), fault.code, request.body))
            raise ApiError(fault.code, fault.message)
        parts = [unquote(p) for p in request.path.split("/") if p]
        discovery = self._discovery(parts)
        if discovery is not None:
            if request.method != "GET":
                raise ApiError(405, f"{request.method} is not supported on {request.path}")
            return _Reply(200, discovery)
        res, ns, name, sub = self._route(parts)
        method, query, body = request.method, request.query, request.body
        verb = {"GET": "get" if name else ("watch" if request.watch else "list"),
                "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}.get(method, "")
        if sub is not None and sub not in res.subresources:
            # e.g. podgroups/{name}/status where the CRD declares no status subresource
            raise ApiError(404, "the server could not find the requested resource",
                           "NotFound")
        if not self._allowed(res, verb, name, sub):
            raise ApiError(405, f"the server does not allow this method on the requested "
                           f"resource ({method} {request.path})", "MethodNotAllowed")
        if verb == "watch":
            return self._watch(res, ns, query, fault)
        table = table_version(request.accept) if verb in ("list", "get") else None
        include = query.get("includeObject") or "Metadata"
        if verb == "list":
            listed = self._list(res, ns, query)
            if table:
                return _Reply(200, to_table(res, listed["items"], listed["metadata"], table,
                                            include))
            return _Reply(200, listed)
        if verb == "get":
            with self._lock:
                found = copy.deepcopy(self._stored(res, (ns or "", str(name))))
            if table:
                rv = {"resourceVersion": found["metadata"].get("resourceVersion", "")}
                return _Reply(200, to_table(res, [found], rv, table, include))
            return _Reply(200, found)
        if verb == "create":
            if res.plural == "bindings":
                meta = (body.get("metadata") if isinstance(body, dict) else None) or {}
                return self._bind(str(ns), str(meta.get("name") or ""), body)
            if sub == "binding":
                return self._bind(str(ns), str(name), body)
            if sub == "eviction":
                return self._evict(res, str(ns), str(name), body)
            return self._api_create(res, ns, body)
        if verb == "update":
            return self._api_update(res, ns or "", str(name), sub, body)
        if verb == "patch":
            return self._api_patch(res, ns or "", str(name), sub, body, request.content_type)
        return self._api_delete(res, ns or "", str(name), query, body)

    @staticmethod
    def _allowed(res: Resource, verb: str, name: str | None, sub: str | None) -> bool:
        if verb not in res.verbs or (sub is not None and sub not in res.subresources):
            return False
        if sub in ("binding", "eviction"):  # POST-only subresources
            return verb == "create"
        if verb == "create":
            return name is None
        if verb in ("update", "patch"):
            return name is not None
        if verb == "delete":
            return name is not None and sub is None
        return True

    def _discovery(self, parts: list[str]) -> Obj | None:
        if not parts:
            return {"paths": sorted({"/api", "/api/v1", "/apis", "/version", "/healthz"}
                                    | {r.prefix for r in self.resources})}
        if parts in (["healthz"], ["readyz"], ["livez"]):
            return {"status": "ok"}
        if parts == ["version"]:
            return {"major": "1", "minor": "31", "gitVersion": "v1.31.0-vscheduler-test",
                    "gitCommit": "0" * 40, "gitTreeState": "clean",
                    "buildDate": "2024-08-13T00:00:00Z", "goVersion": "go1.22.5",
                    "compiler": "gc", "platform": "linux/amd64"}
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self._host}:{self._port}"}]}
        groups: dict[str, list[str]] = {}
        for res in self.resources:
            if res.group:
                versions = groups.setdefault(res.group, [])
                if res.version not in versions:
                    versions.append(res.version)

        def group_doc(name: str) -> Obj:
            versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in groups[name]]
            return {"name": name, "versions": versions, "preferredVersion": versions[0]}

        if parts == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [group_doc(g) for g in groups]}
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
            return {"kind": "APIGroup", "apiVersion": "v1", **group_doc(parts[1])}
        if parts == ["api", "v1"]:
            return self._resource_list("", "v1")
        if len(parts) == 3 and parts[0] == "apis" and parts[2] in groups.get(parts[1], []):
            return self._resource_list(parts[1], parts[2])
        return None

    def _resource_list(self, group: str, version: str) -> Obj:
        entries: list[Obj] = []
        for res in self.resources:
            if res.group != group or res.version != version:
                continue
            entry: Obj = {"name": res.plural, "singularName": res.singular or res.kind.lower(),
                          "namespaced": res.namespaced, "kind": res.kind,
                          "verbs": list(res.verbs)}
            if res.short_names:
                entry["shortNames"] = list(res.short_names)
            if res.categories:
                entry["categories"] = list(res.categories)
            entries.append(entry)
            for sub in res.subresources:
                kind, verbs = res.kind, ["get", "patch", "update"]
                if sub == "binding":
                    kind, verbs = "Binding", ["create"]
                elif sub == "eviction":
                    kind, verbs = "Eviction", ["create"]
                entries.append({"name": f"{res.plural}/{sub}", "singularName": "",
                                "namespaced": res.namespaced, "kind": kind, "verbs": verbs})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version,
                "resources": entries}

    def _route(self, parts: list[str]) -> tuple[Resource, str | None, str | None, str | None]:
        if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        served = {r.plural: r for r in self.resources
                  if r.group == group and r.version == version}
        ns: str | None = None
        if (len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in served
                and served[rest[2]].namespaced):
            ns, rest = rest[1], rest[2:]
        if not rest or rest[0] not in served or len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        res = served[rest[0]]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if res.namespaced and ns is None and name is not None:
            raise ApiError(404, "the server could not find the requested resource")
        return res, ns, name, sub

    @staticmethod
    def _matcher(res: Resource, query: dict[str, str]) -> Matcher:
        checks: list[Matcher] = []
        if query.get("labelSelector"):
            checks.append(label_matcher(query["labelSelector"]))
        if query.get("fieldSelector"):
            checks.append(field_matcher(query["fieldSelector"], field_labels(res)))
        return lambda obj: all(check(obj) for check in checks)

    def _list(self, res: Resource, ns: str | None, query: dict[str, str]) -> Obj:
        match = self._matcher(res, query)
        after: list[str] | None = None
        token = query.get("continue", "")
        with self._lock:
            rv = self._rv
            if token:
                try:
                    state = json.loads(base64.urlsafe_b64decode(token.encode()))
                    rv, after = int(state["rv"]), list(state["after"])
                except (ValueError, KeyError, TypeError, binascii.Error) as exc:
                    raise ApiError(400, "continue key is not valid") from exc
            try:
                limit = int(query.get("limit") or 0)
            except ValueError as exc:
                raise ApiError(400, f"invalid limit {query.get('limit')!r}") from exc
            store = self._store[res.id]
            # (sorted once per kind and resourceVersion: every write moves the version on)
            cached = self._sorted_keys.get(res.id)
            if cached is None or cached[0] != self._rv:
                cached = self._sorted_keys[res.id] = (self._rv, sorted(store))
            keys = cached[1]
            # A page starts after the last key of the one before (found by bisection,
            # so that listing many objects in pages is not quadratic).
            start = bisect.bisect_right(keys, tuple(after)) if after is not None else 0
            items: list[tuple[tuple[str, str], Obj]] = []
            remaining = 0  # from the first object past the page
            for index in range(start, len(keys)):
                key = keys[index]
                if (ns is None or key[0] == ns) and match(store[key]):
                    if 0 < limit <= len(items):
                        remaining = len(keys) - index
                        break
                    items.append((key, store[key]))
            more = remaining > 0
            # (counted, as the real server does, only when nothing is filtered)
            unfiltered = ns is None and not query.get("labelSelector") \
                and not query.get("fieldSelector")
        meta: Obj = {"resourceVersion": str(rv)}
        if more:
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"rv": rv, "after": list(items[-1][0])}).encode()).decode()
            if unfiltered:
                meta["remainingItemCount"] = remaining
        # Stored objects are never changed once committed (`_commit`) and the reply is
        # written out at once: the items are shared, only their top level copied (a deep
        # copy of each made the stand-in, not the client, set the pace of a long list).
        drop = () if res.custom else ("kind", "apiVersion")
        out = [{k: v for k, v in obj.items() if k not in drop} for _, obj in items]
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta,
                "items": out}

    def _check_body(self, res: Resource, body: Any, kind: str | None = None) -> Obj:
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request must be a JSON object")
        expected = kind or res.kind
        if res.custom and (not body.get("kind") or not body.get("apiVersion")):
            raise ApiError(400, f"Object 'Kind' is missing in '{json.dumps(body)[:200]}'")
        if body.get("kind") and body["kind"] != expected:
            raise ApiError(400, f"the kind of the body ({body['kind']}) is not {expected}")
        if not res.custom and self.strict_times:
            _check_times(body)
        return copy.deepcopy(body)

    def _api_create(self, res: Resource, ns: str | None, body: Any) -> _Reply:
        obj = self._check_body(res, body)
        meta = _meta(obj)
        if res.namespaced and meta.get("namespace") and meta["namespace"] != ns:
            raise ApiError(400, "the namespace of the provided object does not match the "
                           "namespace sent on the request")
        if res.namespaced and not ns:
            raise ApiError(404, "the server could not find the requested resource")
        containers = (obj.get("spec") or {}).get("containers")
        if res.kind == "Pod" and not (isinstance(containers, list) and containers):
            raise ApiError(422, f'Pod "{meta.get("name", "")}" is invalid: '
                           "spec.containers: Required value", "Invalid")
        with self._cond:
            return _Reply(201, self._create(res, obj, ns or "", True))

    def _check_rv(self, res: Resource, new: Obj, old: Obj) -> None:
        wanted = (new.get("metadata") or {}).get("resourceVersion")
        if wanted and str(wanted) != old["metadata"].get("resourceVersion"):
            name = old["metadata"]["name"]
            raise ApiError(409, f'Operation cannot be fulfilled on {self._qualified(res)} '
                           f'"{name}": the object has been modified; please apply your '
                           "changes to the latest version and try again", "Conflict",
                           _details(res, name))

    def _updated(self, res: Resource, sub: str | None, old: Obj, body: Obj) -> Obj:
        """The object after a PUT or PATCH gave `body` as its new content."""
        _check_string_maps(res, body)
        if sub == "status":
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = copy.deepcopy(body["status"])
            else:
                new.pop("status", None)
            return new
        new = copy.deepcopy(body)
        new["kind"], new["apiVersion"] = old["kind"], old.get("apiVersion", res.api_version)
        meta, old_meta = _meta(new), old["metadata"]
        for name in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp",
                     "deletionGracePeriodSeconds", "generation"):
            if name in old_meta:
                meta[name] = old_meta[name]
            else:
                meta.pop(name, None)
        if "status" in res.subresources:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        return new

    def _api_update(self, res: Resource, ns: str, name: str, sub: str | None,
                    body: Any) -> _Reply:
        obj = self._check_body(res, body)
        meta = _meta(obj)
        if meta.get("name") and meta["name"] != name:
            raise ApiError(400, "the name of the object does not match the name on the URL")
        if res.namespaced and meta.get("namespace") and meta["namespace"] != ns:
            raise ApiError(400, "the namespace of the provided object does not match the "
                           "namespace sent on the request")
        with self._cond:
            old = self._stored(res, (ns, name))
            uid = meta.get("uid")
            if uid and uid != old["metadata"].get("uid"):
                raise ApiError(409, f"Precondition failed: UID in precondition: {uid}, UID "
                               f"in object meta: {old['metadata'].get('uid')}", "Conflict")
            self._check_rv(res, obj, old)
            new = self._updated(res, sub, old, obj)
            return _Reply(200, self._commit(res, "MODIFIED", new, old))

    def _api_patch(self, res: Resource, ns: str, name: str, sub: str | None, body: Any,
                   content_type: str) -> _Reply:
        media = content_type.split(";")[0].strip().lower()
        strategic = media == "application/strategic-merge-patch+json"
        if media not in ("application/json-patch+json", "application/merge-patch+json") \
                and not (strategic and not res.custom):
            accepted = ["application/json-patch+json", "application/merge-patch+json"]
            if not res.custom:
                accepted.append("application/strategic-merge-patch+json")
            raise ApiError(415, f"the body of the request was in an unknown format - "
                           f"accepted media types include: {', '.join(accepted)}")
        if media == "application/json-patch+json" and not isinstance(body, list):
            raise ApiError(400, "a JSON patch must be a list of operations")
        if media != "application/json-patch+json" and not isinstance(body, dict):
            raise ApiError(400, "a merge patch must be a JSON object")
        with self._cond:
            old = self._stored(res, (ns, name))
            if isinstance(body, list):
                patched = json_patch(old, body)
            elif strategic:
                patched = strategic_merge_patch(old, body)
            else:
                patched = merge_patch(old, body)
            if not isinstance(patched, dict):
                raise ApiError(422, "the patch did not give an object")
            if not res.custom and self.strict_times:
                _check_times(patched)
            if isinstance(body, dict):
                self._check_rv(res, body, old)
            else:
                self._check_rv(res, patched, old)
            uid = (patched.get("metadata") or {}).get("uid")
            if uid and uid != old["metadata"].get("uid") \
                    and not (res.custom and sub == "status"):
                raise ApiError(422, f'{res.kind} "{name}" is invalid: metadata.uid: Invalid '
                               f'value: "{uid}": field is immutable', "Invalid")
            new = self._updated(res, sub, old, patched)
            return _Reply(200, self._commit(res, "MODIFIED", new, old))

    def _api_delete(self, res: Resource, ns: str, name: str, query: dict[str, str],
                    body: Any) -> _Reply:
        options = body if isinstance(body, dict) else {}
        grace_text = query.get("gracePeriodSeconds")
        grace: int | None = options.get("gracePeriodSeconds")
        if grace_text not in (None, ""):
            try:
                grace = int(str(grace_text))
            except ValueError as exc:
                raise ApiError(400, f"invalid gracePeriodSeconds {grace_text!r}") from exc
        with self._cond:
            old = self._stored(res, (ns, name))
            pre = options.get("preconditions") or {}
            for field_name in ("uid", "resourceVersion"):
                want = pre.get(field_name)
                if want and want != old["metadata"].get(field_name):
                    raise ApiError(409, f"Precondition failed: {field_name} in precondition: "
                                   f"{want}, {field_name} in object meta: "
                                   f"{old['metadata'].get(field_name)}", "Conflict")
            if res.kind != "Pod":
                self._remove(res, old)
                details = {**_details(res, name), "uid": old["metadata"].get("uid")}
                return _Reply(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Success", "details": details})
            return _Reply(200, self._delete_pod(res, old, grace))

    def _delete_pod(self, res: Resource, old: Obj, grace: int | None) -> Obj:
        spec, status = old.get("spec") or {}, old.get("status") or {}
        if grace is None:
            grace = int(spec.get("terminationGracePeriodSeconds", 30))
        # As the real pod strategy: a pod on no node, or finished, goes at once.
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            grace = 0
        if grace > 0:
            return self._mark_deleting(res, old, grace)
        return self._remove(res, old)

    def _bind(self, ns: str, name: str, body: Any) -> _Reply:
        target = (body.get("target") if isinstance(body, dict) else None) or {}
        node = str(target.get("name") or "")
        code = 500
        try:
            reply = self._do_bind(ns, name, body, target, node)
            code = reply.code
            return reply
        except ApiError as exc:
            code = exc.code
            raise
        finally:
            with self._lock:
                self._bindings.append(BindingRecord(ns, name, node, code, body))

    def _do_bind(self, ns: str, name: str, body: Any, target: Obj, node: str) -> _Reply:
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request must be a Binding object")
        meta = body.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise ApiError(400, "name in URL does not match name in Binding object")
        if not name:
            raise ApiError(422, "Binding is invalid: metadata.name: Required value", "Invalid")
        if not node:
            raise ApiError(422, "Binding is invalid: target.name: Required value", "Invalid")
        if target.get("kind") not in (None, "", "Node"):
            raise ApiError(422, "Binding is invalid: target.kind: must be empty or 'Node'",
                           "Invalid")
        res = self._resource("Pod")
        with self._cond:
            old = self._stored(res, (ns, name))
            conflict = f'Operation cannot be fulfilled on pods/binding "{name}": '
            details = {"name": name, "kind": "pods/binding"}
            if meta.get("uid") and meta["uid"] != old["metadata"].get("uid"):
                raise ApiError(409, f"{conflict}Precondition failed: UID in precondition: "
                               f"{meta['uid']}, UID in object meta: "
                               f"{old['metadata'].get('uid')}", "Conflict", details)
            if old["metadata"].get("deletionTimestamp"):
                raise ApiError(409, f"{conflict}pod {name} is being deleted, cannot be "
                               "assigned to a host", "Conflict", details)
            bound = (old.get("spec") or {}).get("nodeName")
            if bound:
                raise ApiError(409, f'{conflict}pod {name} is already assigned to node '
                               f'"{bound}"', "Conflict", details)
            new = copy.deepcopy(old)
            new.setdefault("spec", {})["nodeName"] = node
            if meta.get("annotations"):
                _meta(new).setdefault("annotations", {}).update(meta["annotations"])
            status = new.setdefault("status", {})
            # (Kubernetes 1.35's API server clears a bound pod's nomination: the
            # ClearingNominatedNodeNameAfterBinding feature, beta and on by default)
            status.pop("nominatedNodeName", None)
            conditions = [c for c in status.get("conditions") or []
                          if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True",
                               "lastProbeTime": None, "lastTransitionTime": _timestamp()})
            status["conditions"] = conditions
            self._commit(res, "MODIFIED", new, old)
        # The real server answers a Status, not the Binding (hence _preload_content=False).
        return _Reply(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Success", "code": 201})

    def _evict(self, res: Resource, ns: str, name: str, body: Any) -> _Reply:
        options = (body.get("deleteOptions") if isinstance(body, dict) else None) or {}
        with self._cond:
            old = self._stored(res, (ns, name))
            self._delete_pod(res, old, options.get("gracePeriodSeconds"))
        return _Reply(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Success", "code": 201})
