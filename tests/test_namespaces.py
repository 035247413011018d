"""Namespaces' labels, from a manifest or a watch to the session: what a pod affinity
term's namespaceSelector will match."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import conf, namespace, node, pod
from vscheduler.cache import Cache
from vscheduler.cli import main
from vscheduler.framework.session import Session
from vscheduler.ingest import add_object, describe, read_kind
from vscheduler.kube.apply import apply_event
from vscheduler.matching import NAMESPACE_NAME_LABEL, namespace_labels
from vscheduler.objects import BadObject, parse_namespace
from vscheduler.simulate import Simulation, load_manifests

# --------------------------------------------------------------------------- parsing


def test_a_namespace_is_its_name_and_labels_with_the_name_label():
    assert parse_namespace(namespace("ml", {"team": "ml", "tier": "gold"})) == (
        "ml", {"team": "ml", "tier": "gold", NAMESPACE_NAME_LABEL: "ml"})
    assert parse_namespace(namespace("bare")) == ("bare", {NAMESPACE_NAME_LABEL: "bare"})


def test_the_name_label_is_the_name_whatever_the_manifest_says():
    # (the API server overwrites it: a selector on it can only ever pick the namespace
    # of that name)
    assert parse_namespace(namespace("ml", {NAMESPACE_NAME_LABEL: "other"})) == (
        "ml", {NAMESPACE_NAME_LABEL: "ml"})


@pytest.mark.parametrize("value", [1, True, 1.1])
def test_label_values_yaml_made_numbers_or_booleans_are_refused(value):
    """An unquoted `no`, `1.10` or `010` is no string to YAML, and its text is lost
    (`False`, `1.1`, `8`): read as that, a selector written the same way would not match.
    The API server refuses such a value; so does the scheduler, saying to quote it."""
    with pytest.raises(BadObject, match=r"metadata\.labels\.rank: expected a string, got "
                                        r".*quote it"):
        parse_namespace(namespace("ml", {"rank": value}))  # type: ignore[dict-item]


def test_parsing_never_changes_the_object_read():
    obj = namespace("ml", {"team": "ml"})
    parse_namespace(obj)
    assert obj == namespace("ml", {"team": "ml"})


@pytest.mark.parametrize(("obj", "message"), [
    ({"apiVersion": "v1", "kind": "Namespace"}, "metadata.name: missing"),
    ({"apiVersion": "v1", "kind": "Namespace", "metadata": "ml"},
     "metadata: expected a map, got str"),
    ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ["ml"]}},
     "metadata.name: missing"),
    ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": ["a"]}},
     "metadata.labels: expected a map, got list"),
    ({"apiVersion": "v1", "kind": "Namespace",
      "metadata": {"name": "ml", "labels": {"team": {"a": "b"}}}},
     "metadata.labels.team: expected a string, got dict"),
    ({"apiVersion": "v1", "kind": "Namespace",
      "metadata": {"name": "ml", "labels": {"team": "x" * 64}}},
     "metadata.labels.team: a label value is at most 63 characters, got 64"),
])
def test_a_bad_namespace_is_a_bad_object(obj: dict, message: str):
    with pytest.raises(BadObject) as info:
        parse_namespace(obj)
    assert str(info.value) == message


_LABEL_KEYS = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-./"),
                      min_size=1, max_size=20)
_LABEL_VALUES = st.text(st.sampled_from("abcxyz0129-_."), max_size=63)


@settings(max_examples=200, deadline=None)
@given(name=st.text(st.sampled_from("abcz09-"), min_size=1, max_size=20),
       labels=st.dictionaries(_LABEL_KEYS | st.just(NAMESPACE_NAME_LABEL), _LABEL_VALUES,
                              max_size=6))
def test_parsed_labels_are_the_manifests_with_the_name_label(name: str,
                                                             labels: dict[str, str]):
    assert parse_namespace(namespace(name, labels)) == (
        name, {**labels, NAMESPACE_NAME_LABEL: name})


def test_read_as_core_v1_and_named_without_a_namespace():
    assert read_kind(namespace("ml")) == "Namespace"
    assert read_kind({**namespace("ml"), "apiVersion": "example.com/v1"}) is None
    assert read_kind({"metadata": {"name": "ml"}}, "Namespace") == "Namespace"  # a list item
    assert describe(namespace("ml")) == "Namespace/ml"


# --------------------------------------------------------------------------- the cache


def test_the_cache_adds_updates_and_deletes_namespaces():
    cache = Cache()
    add_object(cache, namespace("ml", {"team": "ml"}))
    add_object(cache, namespace("web"))
    first = cache.snapshot()
    assert first.namespaces == {"ml": {"team": "ml", NAMESPACE_NAME_LABEL: "ml"},
                                "web": {NAMESPACE_NAME_LABEL: "web"}}
    generation = cache.generation
    add_object(cache, namespace("ml", {"team": "ml", "tier": "gold"}))
    assert cache.generation > generation
    second = cache.snapshot()
    assert second.namespaces["ml"] == {"team": "ml", "tier": "gold",
                                       NAMESPACE_NAME_LABEL: "ml"}
    # The first session's view did not change under it.
    assert first.namespaces["ml"] == {"team": "ml", NAMESPACE_NAME_LABEL: "ml"}
    apply_event(cache, "Namespace", "DELETED", {"metadata": {"name": "web"}})
    third = cache.snapshot()
    assert list(third.namespaces) == ["ml"]
    assert "web" in second.namespaces


def test_snapshots_share_the_mapping_until_a_namespace_changes():
    cache = Cache()
    add_object(cache, namespace("ml", {"team": "ml"}))
    first = cache.snapshot().namespaces
    add_object(cache, node("n1"))
    add_object(cache, pod("p", namespace="ml"))
    assert cache.snapshot().namespaces is first
    # A Namespace read again alike (its status, an annotation changed): no change at all.
    generation = cache.generation
    add_object(cache, {**namespace("ml", {"team": "ml"}), "status": {"phase": "Terminating"}})
    assert cache.generation == generation
    assert cache.snapshot().namespaces is first
    add_object(cache, namespace("ml", {"team": "web"}))
    assert cache.snapshot().namespaces is not first


def test_a_session_cannot_change_the_namespaces():
    cache = Cache()
    add_object(cache, namespace("ml"))
    namespaces = cache.snapshot().namespaces
    with pytest.raises(TypeError):
        namespaces["web"] = {}  # type: ignore[index]


def test_deleting_an_unknown_namespace_changes_nothing():
    cache = Cache()
    generation = cache.generation
    cache.delete_namespace("absent")
    assert cache.generation == generation and not cache.snapshot().namespaces


def test_a_pods_namespace_without_an_object_is_not_added():
    cache = Cache()
    for obj in (node("n1"), pod("p", namespace="team-a"), namespace("ml")):
        add_object(cache, obj)
    namespaces = cache.snapshot().namespaces
    assert list(namespaces) == ["ml"]
    assert namespace_labels(namespaces, "team-a") == {NAMESPACE_NAME_LABEL: "team-a"}


_OPS = st.lists(st.tuples(st.sampled_from(["add", "delete", "snapshot"]),
                          st.sampled_from(["a", "b", "c"]),
                          st.sampled_from([{}, {"team": "x"}, {"team": "y"}])),
                max_size=30)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS)
def test_every_snapshot_sees_the_namespaces_as_they_are(ops):
    """After any adds and deletes, a snapshot's namespaces are exactly those known, in
    name order; one taken with no change since the last is the very same mapping; and
    an earlier snapshot's mapping never changes."""
    cache = Cache()
    known: dict[str, dict[str, str]] = {}
    taken: list[tuple[object, dict]] = []
    last = cache.snapshot().namespaces
    changed = False
    for op, name, labels in ops:
        if op == "add":
            read = {**labels, NAMESPACE_NAME_LABEL: name}
            changed |= known.get(name) != read
            known[name] = read
            add_object(cache, namespace(name, labels))
        elif op == "delete":
            changed |= known.pop(name, None) is not None
            apply_event(cache, "Namespace", "DELETED", {"metadata": {"name": name}})
        else:
            view = cache.snapshot().namespaces
            assert dict(view) == known and list(view) == sorted(known)
            assert (view is last) == (not changed)
            taken.append((view, dict(known)))
            last, changed = view, False
    for view, then in taken:
        assert dict(view) == then  # type: ignore[call-overload]


# --------------------------------------------------------------------------- fallback


def test_namespace_labels_are_the_objects_or_the_name_label():
    namespaces = {"ml": {"team": "ml", NAMESPACE_NAME_LABEL: "ml"}}
    assert namespace_labels(namespaces, "ml") is namespaces["ml"]
    assert namespace_labels(namespaces, "web") == {NAMESPACE_NAME_LABEL: "web"}
    assert namespace_labels({}, "default") == {NAMESPACE_NAME_LABEL: "default"}


# --------------------------------------------------------------------------- simulate


MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata:
  name: ml
  labels: {team: ml, tier: gold}
---
apiVersion: v1
kind: Namespace
metadata: {name: web}
---
apiVersion: v1
kind: Namespace
metadata:
  name: broken
  labels: [team]
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: batch, labels: {team: batch}}
"""


def test_simulate_reads_namespaces_from_a_manifest_file(tmp_path: Path):
    path = tmp_path / "namespaces.yaml"
    path.write_text(MANIFEST)
    found = load_manifests([str(path)])
    assert not found.notes  # (a file of Namespaces is not a file simulate ignores)
    simulation = Simulation(conf())
    simulation.load(found.objects, found.problems)
    session = Session(simulation.cache.snapshot(), conf())
    assert session.namespaces == {
        "batch": {"team": "batch", NAMESPACE_NAME_LABEL: "batch"},
        "ml": {"team": "ml", "tier": "gold", NAMESPACE_NAME_LABEL: "ml"},
        "web": {NAMESPACE_NAME_LABEL: "web"},
    }


def test_a_bad_namespace_in_a_file_is_a_warning_and_the_rest_is_scheduled(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "cluster.yaml"
    path.write_text(MANIFEST + "---\n" + json.dumps(node("n1")) + "\n---\n"
                    + json.dumps(pod("p", namespace="ml")) + "\n")
    assert main(["simulate", str(path), "--output", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["binds"] == {"ml/p": "n1"}
    [event] = [e for e in report["events"] if e["reason"] == "BadObject"]
    assert event["object"] == "Namespace/broken"
    assert event["message"] == (f"{path}#2: skipped: metadata.labels: expected a map, "
                                "got list")
