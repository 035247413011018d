"""Pod affinity, anti-affinity and topology spread constraints as read from a pod
(objects._inter_pod): what each field becomes, what the API server folds in
(matchLabelKeys, mismatchLabelKeys), the defaults, and the manifests the API server
would refuse: each a BadObject naming the field, and in a simulation a Warning on the
pod, which is skipped while the others are scheduled."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, pod, simulate
from vscheduler.matching import label_selector_matches
from vscheduler.objects import BadObject, parse_pod
from vscheduler.specs import InterPod, PodAffinityTerm, SpreadConstraint

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
AFFINITY_WHERE = f"spec.affinity.podAffinity.{REQUIRED}[0]"
ANTI_WHERE = f"spec.affinity.podAntiAffinity.{REQUIRED}[0]"
PREFERRED_WHERE = f"spec.affinity.podAffinity.{PREFERRED}[0]"
SPREAD_WHERE = "spec.topologySpreadConstraints[0]"


def read(affinity: dict | None = None, spread: list | None = None, *,
         labels: dict[str, str] | None = None, namespace: str = "team-a") -> InterPod | None:
    obj = pod("p", namespace=namespace, labels=labels, affinity=affinity)
    if spread is not None:
        obj["spec"]["topologySpreadConstraints"] = spread
    return parse_pod(obj).pod.inter_pod


def required(section: str, *terms: Any) -> dict:
    return {section: {REQUIRED: list(terms)}}


def preferred(section: str, *weighted: tuple[Any, Any]) -> dict:
    return {section: {PREFERRED: [{"weight": w, "podAffinityTerm": t} for w, t in weighted]}}


def one_term(affinity: dict, **args: Any) -> PodAffinityTerm:
    rules = read(affinity, **args)
    assert rules is not None
    [term] = rules.affinity or rules.anti_affinity
    return term


def constraint(**fields: Any) -> dict:
    return {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}, **fields}


# --------------------------------------------------------------------------- good


def test_match_labels_and_expressions_make_one_selector() -> None:
    term = one_term(required("podAffinity", {
        "topologyKey": "zone",
        "labelSelector": {"matchLabels": {"tier": "db", "app": "shop"},
                          "matchExpressions": [
                              {"key": "track", "operator": "NotIn", "values": ["canary"]},
                              {"key": "owner", "operator": "Exists"}]}}))
    assert term == PodAffinityTerm(
        (("app", "In", ("shop",)), ("tier", "In", ("db",)), ("track", "NotIn", ("canary",)),
         ("owner", "Exists", ())),
        frozenset({"team-a"}), None, "zone")
    assert label_selector_matches(term.selector, {"app": "shop", "tier": "db", "owner": "x"})
    assert not label_selector_matches(term.selector, {
        "app": "shop", "tier": "db", "owner": "x", "track": "canary"})


def test_required_and_preferred_of_both_kinds_with_their_weights() -> None:
    zone = {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "a"}}}
    host = {"topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"app": "b"}}}
    affinity = {"podAffinity": {REQUIRED: [zone], PREFERRED: [
        {"weight": 1, "podAffinityTerm": host}, {"weight": 100, "podAffinityTerm": zone}]},
        "podAntiAffinity": {REQUIRED: [host], PREFERRED: [
            {"weight": 7, "podAffinityTerm": zone}]}}
    rules = read(affinity)
    assert rules is not None
    own = frozenset({"team-a"})
    zone_term = PodAffinityTerm((("app", "In", ("a",)),), own, None, "zone")
    host_term = PodAffinityTerm((("app", "In", ("b",)),), own, None, "kubernetes.io/hostname")
    assert rules == InterPod(affinity=(zone_term,), anti_affinity=(host_term,),
                             preferred_affinity=((1, host_term), (100, zone_term)),
                             preferred_anti_affinity=((7, zone_term),))


@pytest.mark.parametrize("fields, namespaces, chooser", [
    ({}, {"team-a"}, None),  # neither: the pod's own namespace
    ({"namespaces": ["x", "y"]}, {"x", "y"}, None),  # listed: only those
    ({"namespaces": []}, {"team-a"}, None),  # empty list: as none
    ({"namespaceSelector": None}, {"team-a"}, None),  # null selector: as none
    ({"namespaceSelector": {}}, set(), ()),  # {}: every namespace
    ({"namespaces": ["x"], "namespaceSelector": {}}, {"x"}, ()),
    ({"namespaceSelector": {"matchLabels": {"team": "t1"}}}, set(),
     (("team", "In", ("t1",)),)),
    ({"namespaces": ["x"], "namespaceSelector": {"matchExpressions": [
        {"key": "env", "operator": "DoesNotExist"}]}}, {"x"}, (("env", "DoesNotExist", ()),)),
])
def test_namespaces_and_namespace_selector(fields: dict, namespaces: set[str],
                                           chooser: tuple | None) -> None:
    term = one_term(required("podAntiAffinity", {
        "topologyKey": "zone", "labelSelector": {}, **fields}))
    assert term.namespaces == frozenset(namespaces)
    assert term.namespace_selector == chooser


def test_no_label_selector_selects_no_pod_and_an_empty_one_every_pod() -> None:
    absent = one_term(required("podAffinity", {"topologyKey": "zone"}))
    empty = one_term(required("podAffinity", {"topologyKey": "zone", "labelSelector": {}}))
    assert absent.selector is None and not label_selector_matches(absent.selector, {"a": "b"})
    assert empty.selector == () and label_selector_matches(empty.selector, {})


def test_match_label_keys_and_mismatch_label_keys_fold_in_the_pods_own_values() -> None:
    """As the API server merges them at creation: each key the pod has a label for, with
    its value (In for matchLabelKeys, NotIn for mismatchLabelKeys); keys it lacks are
    left out."""
    term = one_term(required("podAntiAffinity", {
        "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}},
        "matchLabelKeys": ["pod-template-hash", "absent"],
        "mismatchLabelKeys": ["tenant"]}),
        labels={"app": "web", "pod-template-hash": "5d8f", "tenant": "acme"})
    assert term.selector == (("app", "In", ("web",)), ("pod-template-hash", "In", ("5d8f",)),
                             ("tenant", "NotIn", ("acme",)))


def test_label_keys_without_a_selector_add_nothing() -> None:
    term = one_term(required("podAffinity", {"topologyKey": "zone",
                                             "matchLabelKeys": ["app"]}),
                    labels={"app": "web"})
    assert term.selector is None


def test_folding_applies_to_preferred_terms_too() -> None:
    rules = read(preferred("podAffinity", (10, {
        "topologyKey": "zone", "labelSelector": {}, "mismatchLabelKeys": ["app"]})),
        labels={"app": "web"})
    assert rules is not None
    [(weight, term)] = rules.preferred_affinity
    assert weight == 10 and term.selector == (("app", "NotIn", ("web",)),)


def test_spread_defaults() -> None:
    rules = read(spread=[constraint()])
    assert rules is not None
    [read_constraint] = rules.spread
    assert read_constraint == SpreadConstraint(
        1, PodAffinityTerm((("app", "In", ("web",)),), frozenset({"team-a"}), None, "zone"),
        hard=True, min_domains=None, honor_affinity=True, honor_taints=False)


def test_spread_fields_as_written() -> None:
    rules = read(spread=[
        constraint(maxSkew=3, minDomains=2, nodeAffinityPolicy="Ignore",
                   nodeTaintsPolicy="Honor"),
        constraint(whenUnsatisfiable="ScheduleAnyway", topologyKey="kubernetes.io/hostname",
                   labelSelector={}, matchLabelKeys=["app", "absent"])],
        labels={"app": "web"})
    assert rules is not None
    first, second = rules.spread
    assert (first.max_skew, first.min_domains, first.hard) == (3, 2, True)
    assert (first.honor_affinity, first.honor_taints) == (False, True)
    assert not second.hard and second.term.topology_key == "kubernetes.io/hostname"
    assert second.term.selector == (("app", "In", ("web",)),)


def test_a_spread_constraint_without_a_selector_keeps_none() -> None:
    rules = read(spread=[{"maxSkew": 1, "topologyKey": "zone",
                          "whenUnsatisfiable": "DoNotSchedule"}])
    assert rules is not None and rules.spread[0].term.selector is None


@pytest.mark.parametrize("affinity, spread", [
    (None, None),
    ({"nodeAffinity": {PREFERRED: [{"weight": 1, "preference": {"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}}]}}, None),
    ({"podAffinity": {}, "podAntiAffinity": {}}, None),
    ({"podAffinity": {REQUIRED: [], PREFERRED: []}}, []),
])
def test_a_pod_without_rules_has_none(affinity: dict | None, spread: list | None) -> None:
    assert read(affinity, spread) is None


def test_replicas_share_equal_terms() -> None:
    """Two pods of one template read equal rules (the census counts a term once)."""
    affinity = required("podAntiAffinity", {
        "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}})
    assert read(affinity, labels={"app": "web"}) == read(affinity, labels={"app": "web"})


# --------------------------------------------------------------------------- bad

BAD: list[tuple[str, dict | None, list | None, str]] = [
    ("affinity term without topologyKey",
     required("podAffinity", {"labelSelector": {}}), None, f"{AFFINITY_WHERE}.topologyKey"),
    ("anti-affinity term with an empty topologyKey",
     required("podAntiAffinity", {"labelSelector": {}, "topologyKey": ""}), None,
     f"{ANTI_WHERE}.topologyKey"),
    ("weight 0", preferred("podAffinity", (0, {"topologyKey": "zone"})), None,
     f"{PREFERRED_WHERE}.weight"),
    ("weight 101", preferred("podAffinity", (101, {"topologyKey": "zone"})), None,
     f"{PREFERRED_WHERE}.weight"),
    ("weight not a number", preferred("podAffinity", ("heavy", {"topologyKey": "zone"})),
     None, f"{PREFERRED_WHERE}.weight"),
    ("preferred term missing", {"podAffinity": {PREFERRED: [{"weight": 5}]}}, None,
     f"{PREFERRED_WHERE}.podAffinityTerm"),
    ("bad operator", required("podAffinity", {"topologyKey": "zone", "labelSelector": {
        "matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}}), None,
     f"{AFFINITY_WHERE}.labelSelector.matchExpressions[0]"),
    ("In without values", required("podAffinity", {"topologyKey": "zone", "labelSelector": {
        "matchExpressions": [{"key": "a", "operator": "In"}]}}), None,
     f"{AFFINITY_WHERE}.labelSelector.matchExpressions[0]"),
    ("Exists with values", required("podAntiAffinity", {
        "topologyKey": "zone", "labelSelector": {}, "namespaceSelector": {
            "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}),
     None, f"{ANTI_WHERE}.namespaceSelector.matchExpressions[0]"),
    ("matchLabels not a map of strings", required("podAffinity", {
        "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": ["web"]}}}), None,
     f"{AFFINITY_WHERE}.labelSelector.matchLabels"),
    ("podAffinity not a map", {"podAffinity": "near the database"}, None,
     "spec.affinity.podAffinity"),
    ("required terms not a list", {"podAntiAffinity": {REQUIRED: {"topologyKey": "zone"}}},
     None, f"spec.affinity.podAntiAffinity.{REQUIRED}"),
    ("a term not a map", required("podAffinity", 5), None, AFFINITY_WHERE),
    ("namespaces not a list", required("podAffinity", {
        "topologyKey": "zone", "namespaces": "default"}), None,
     f"{AFFINITY_WHERE}.namespaces"),
    ("matchLabelKeys not a list", required("podAffinity", {
        "topologyKey": "zone", "labelSelector": {}, "matchLabelKeys": "app"}), None,
     f"{AFFINITY_WHERE}.matchLabelKeys"),
    ("maxSkew 0", None, [constraint(maxSkew=0)], f"{SPREAD_WHERE}.maxSkew"),
    ("maxSkew missing", None, [{"topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
     f"{SPREAD_WHERE}.maxSkew"),
    ("spread without topologyKey", None, [constraint(topologyKey="")],
     f"{SPREAD_WHERE}.topologyKey"),
    ("whenUnsatisfiable typo", None, [constraint(whenUnsatisfiable="DoNotSchedul")],
     f"{SPREAD_WHERE}.whenUnsatisfiable"),
    ("whenUnsatisfiable missing", None, [{"maxSkew": 1, "topologyKey": "zone"}],
     f"{SPREAD_WHERE}.whenUnsatisfiable"),
    ("minDomains with ScheduleAnyway", None,
     [constraint(whenUnsatisfiable="ScheduleAnyway", minDomains=2)],
     f"{SPREAD_WHERE}.minDomains"),
    ("minDomains 0", None, [constraint(minDomains=0)], f"{SPREAD_WHERE}.minDomains"),
    ("nodeAffinityPolicy unknown", None, [constraint(nodeAffinityPolicy="Always")],
     f"{SPREAD_WHERE}.nodeAffinityPolicy"),
    ("nodeTaintsPolicy not text", None, [constraint(nodeTaintsPolicy=["Honor"])],
     f"{SPREAD_WHERE}.nodeTaintsPolicy"),
    ("second constraint bad", None, [constraint(), constraint(labelSelector={
        "matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]})],
     "spec.topologySpreadConstraints[1].labelSelector.matchExpressions[0]"),
    ("constraints not a list", None, {"maxSkew": 1}, "spec.topologySpreadConstraints"),
]


@pytest.mark.parametrize("what, affinity, spread, where", BAD, ids=[case[0] for case in BAD])
def test_what_the_api_server_refuses_is_a_bad_object_naming_the_field(
        what: str, affinity: dict | None, spread: Any, where: str) -> None:
    with pytest.raises(BadObject) as caught:
        read(affinity, spread)
    assert str(caught.value).startswith(where), (what, str(caught.value))


def _nested(depth: int) -> Any:
    inner: Any = "x"
    for _ in range(depth):
        inner = {"a": [inner]}
    return inner


@pytest.mark.parametrize("garbage", [
    {"podAffinity": {REQUIRED: [{"topologyKey": "zone",
                                 "labelSelector": {"matchLabels": _nested(400)}}]}},
    {"podAffinity": {REQUIRED: [{"topologyKey": "zone",
                                 "labelSelector": {"matchExpressions": _nested(400)}}]}},
    {"podAffinity": {REQUIRED: [{"topologyKey": _nested(400)}]}},
    {"podAntiAffinity": {PREFERRED: [_nested(400)]}},
    {"podAffinity": {REQUIRED: [{"topologyKey": "zone", "labelSelector": {
        "matchExpressions": [{"key": _nested(50), "operator": "In", "values": ["a"]}]}}]}},
    {"podAffinity": {REQUIRED: [{"topologyKey": "zone", "labelSelector": {
        "matchExpressions": [{"key": "a", "operator": "In", "values": [_nested(50)]}]}}]}},
    {"podAffinity": {REQUIRED: [{"topologyKey": "zone", "namespaces": [_nested(50)]}]}},
    {"podAffinity": [1, 2, 3]},
])
def test_deeply_nested_garbage_is_a_bad_object(garbage: dict) -> None:
    """(An unknown field is dropped, as the API server drops it: garbage under a field
    of its own, `labelSelector: {a: ...}`, reads as `{}`; these are in known fields.)"""
    with pytest.raises(BadObject) as caught:
        read(garbage)
    assert str(caught.value).startswith("spec.affinity.pod")
    assert len(str(caught.value)) < 2000  # (names the field, does not echo the garbage)


def test_nested_garbage_in_spread_is_a_bad_object() -> None:
    with pytest.raises(BadObject, match=r"^spec\.topologySpreadConstraints\[0\]"):
        read(spread=[_nested(400)])
    with pytest.raises(BadObject, match=r"^spec\.topologySpreadConstraints\[0\]\.maxSkew"):
        read(spread=[constraint(maxSkew=_nested(400))])


def test_a_bad_pod_is_skipped_with_a_warning_and_the_others_are_scheduled() -> None:
    good_rules = required("podAntiAffinity", {
        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}})
    bad_rules = preferred("podAffinity", (101, {"topologyKey": "zone"}))
    bad_spread = pod("bad-spread", labels={"app": "web"})
    bad_spread["spec"]["topologySpreadConstraints"] = [constraint(whenUnsatisfiable="Never")]
    objects = [node("n1", labels={"kubernetes.io/hostname": "n1"}),
               node("n2", labels={"kubernetes.io/hostname": "n2"}),
               pod("web-0", labels={"app": "web"}, affinity=good_rules),
               pod("bad-weight", labels={"app": "web"}, affinity=bad_rules),
               bad_spread,
               pod("web-1", labels={"app": "web"}, affinity=good_rules)]
    report = simulate(objects)
    assert sorted(report["binds"]) == ["default/web-0", "default/web-1"]
    assert len(set(report["binds"].values())) == 2  # (the good rules held)
    warnings = {e["object"]: e["message"] for e in report["events"]
                if e["type"] == "Warning" and e["reason"] == "BadObject"}
    assert set(warnings) == {"Pod/default/bad-weight", "Pod/default/bad-spread"}
    assert f"{PREFERRED_WHERE}.weight" in warnings["Pod/default/bad-weight"]
    assert f"{SPREAD_WHERE}.whenUnsatisfiable" in warnings["Pod/default/bad-spread"]
    assert "skipped" in warnings["Pod/default/bad-weight"]
