"""predicates: node selector, affinity, taints, unschedulable nodes, pod slots, host ports."""

from __future__ import annotations

from typing import ClassVar

import pytest

from tests.builders import node, open_session, pod, simulate
from vscheduler.conf import ConfError, parse_conf
from vscheduler.framework.session import Session
from vscheduler.matching import (
    NODE_NAME_FIELD,
    expression_matches,
    first_untolerated_taint,
    parse_label_int,
    ports_conflict,
    required_affinity_matches,
    selector_matches,
    term_matches,
    tolerates,
)
from vscheduler.model import Task
from vscheduler.plugins.predicates import (
    REASON_AFFINITY,
    REASON_POD_NUMBER,
    REASON_PORTS,
    REASON_UNSCHEDULABLE,
    taint_reason,
)

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates%s}]
"""


def conf(**args: object) -> str:
    if not args:
        return CONF % ""
    items = ", ".join(f"{k}: {v}" for k, v in args.items())
    return CONF % f", arguments: {{{items}}}"


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict:
    return {"key": key, "value": value, "effect": effect}


def required(*terms: list[dict], fields: list[dict] | None = None) -> dict:
    """An affinity with required node selector terms (each a list of expressions)."""
    node_terms = [{"matchExpressions": t} for t in terms]
    if fields is not None:
        node_terms.append({"matchFields": fields})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": node_terms}}}


def expr(key: str, operator: str, *values: str) -> dict:
    out: dict = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


# --------------------------------------------------------------------------- pure functions


class TestParseLabelInt:
    @pytest.mark.parametrize("text, number", [
        ("0", 0), ("42", 42), ("-7", -7), ("+3", 3), ("007", 7),
        (str(2**63 - 1), 2**63 - 1), (str(-(2**63)), -(2**63)),
    ])
    def test_integers(self, text: str, number: int) -> None:
        assert parse_label_int(text) == number

    @pytest.mark.parametrize("text", [
        "", "abc", "1.5", "1e3", " 5", "5 ", "1_000", "٣", "0x10", "--1", "+",
        str(2**63), str(-(2**63) - 1), "5\n",
    ])
    def test_what_go_refuses(self, text: str) -> None:
        assert parse_label_int(text) is None


class TestExpressionMatches:
    labels: ClassVar[dict[str, str]] = {"zone": "a", "cores": "64", "gen": "v3", "empty": ""}

    @pytest.mark.parametrize("expression, expected", [
        (("zone", "In", ("a", "b")), True),
        (("zone", "In", ("b",)), False),
        (("missing", "In", ("a",)), False),
        (("zone", "NotIn", ("b",)), True),
        (("zone", "NotIn", ("a",)), False),
        (("missing", "NotIn", ("a",)), True),
        (("zone", "Exists", ()), True),
        (("empty", "Exists", ()), True),
        (("missing", "Exists", ()), False),
        (("missing", "DoesNotExist", ()), True),
        (("zone", "DoesNotExist", ()), False),
        (("cores", "Gt", ("32",)), True),
        (("cores", "Gt", ("64",)), False),
        (("cores", "Lt", ("65",)), True),
        (("cores", "Lt", ("64",)), False),
        (("cores", "Gt", ("-1",)), True),
        (("missing", "Gt", ("1",)), False),
        (("missing", "Lt", ("1",)), False),
    ])
    def test_operators(self, expression: tuple, expected: bool) -> None:
        assert expression_matches(expression, self.labels, "n1") is expected

    @pytest.mark.parametrize("expression", [
        ("gen", "Gt", ("1",)),        # label value not an integer
        ("gen", "Lt", ("1",)),
        ("empty", "Lt", ("1",)),
        ("cores", "Gt", ("many",)),   # bound not an integer
        ("cores", "Gt", ()),          # no bound
        ("cores", "Gt", ("1", "2")),  # two bounds
        ("zone", "Matches", ("a",)),  # unknown operator
    ])
    def test_what_cannot_be_compared_does_not_match(self, expression: tuple) -> None:
        assert expression_matches(expression, self.labels, "n1") is False

    def test_match_fields_reads_the_node_name(self) -> None:
        assert expression_matches((NODE_NAME_FIELD, "In", ("n1",)), {}, "n1")
        assert not expression_matches((NODE_NAME_FIELD, "In", ("n2",)), {}, "n1")
        assert expression_matches((NODE_NAME_FIELD, "NotIn", ("n2",)), {}, "n1")
        # A label that happens to be called metadata.name is not the field.
        assert not expression_matches((NODE_NAME_FIELD, "In", ("x",)),
                                      {"metadata.name": "x"}, "n1")


class TestTerms:
    labels: ClassVar[dict[str, str]] = {"zone": "a", "disk": "ssd"}

    def test_expressions_are_anded(self) -> None:
        assert term_matches([("zone", "In", ("a",)), ("disk", "In", ("ssd",))],
                            self.labels, "n")
        assert not term_matches([("zone", "In", ("a",)), ("disk", "In", ("hdd",))],
                                self.labels, "n")

    def test_empty_term_matches_nothing(self) -> None:
        assert not term_matches([], self.labels, "n")

    def test_terms_are_ored(self) -> None:
        terms = [[("zone", "In", ("b",))], [("disk", "Exists", ())]]
        assert required_affinity_matches(terms, self.labels, "n")
        assert not required_affinity_matches(terms[:1], self.labels, "n")

    def test_no_terms_match_nothing(self) -> None:
        assert not required_affinity_matches([], self.labels, "n")
        assert not required_affinity_matches([[]], self.labels, "n")

    def test_node_selector(self) -> None:
        assert selector_matches({}, {})
        assert selector_matches({"zone": "a"}, self.labels)
        assert not selector_matches({"zone": "a", "disk": "hdd"}, self.labels)
        assert not selector_matches({"gpu": ""}, self.labels)
        assert not selector_matches({"zone": "a"}, {})


class TestTolerations:
    @pytest.mark.parametrize("toleration, taint, expected", [
        (("", "Exists", "", ""), ("any", "thing", "NoExecute"), True),
        (("", "Exists", "", "NoSchedule"), ("any", "thing", "NoExecute"), False),
        (("k", "Exists", "", ""), ("k", "v", "NoSchedule"), True),
        (("k", "Exists", "", ""), ("other", "v", "NoSchedule"), False),
        (("k", "Equal", "v", ""), ("k", "v", "NoExecute"), True),
        (("k", "Equal", "v", "NoSchedule"), ("k", "v", "NoSchedule"), True),
        (("k", "Equal", "v", "NoSchedule"), ("k", "v", "NoExecute"), False),
        (("k", "Equal", "w", ""), ("k", "v", "NoSchedule"), False),
        (("k", "Equal", "", ""), ("k", "", "NoSchedule"), True),
        (("k", "", "v", ""), ("k", "v", "NoSchedule"), True),       # empty operator: Equal
        (("", "Equal", "v", ""), ("any", "v", "NoSchedule"), True),  # empty key: any key
        (("k", "Bogus", "v", ""), ("k", "v", "NoSchedule"), False),
    ])
    def test_tolerates(self, toleration: tuple, taint: tuple, expected: bool) -> None:
        assert tolerates(toleration, taint) is expected

    def test_first_untolerated_hard_taint(self) -> None:
        taints = [("soft", "", "PreferNoSchedule"), ("a", "1", "NoSchedule"),
                  ("b", "2", "NoExecute")]
        assert first_untolerated_taint(taints, []) == ("a", "1", "NoSchedule")
        assert first_untolerated_taint(taints, [("a", "Exists", "", "")]) == (
            "b", "2", "NoExecute")
        assert first_untolerated_taint(taints, [("", "Exists", "", "")]) is None
        assert first_untolerated_taint(taints[:1], []) is None

    def test_reason_reads_like_kube(self) -> None:
        assert taint_reason(("gpu", "true", "NoSchedule")) == (
            "node(s) had untolerated taint {gpu: true}")
        assert taint_reason(("dedicated", "", "NoSchedule")) == (
            "node(s) had untolerated taint {dedicated: }")


class TestPorts:
    @pytest.mark.parametrize("wanted, used, expected", [
        (("TCP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 80), True),
        (("TCP", "10.0.0.1", 80), ("TCP", "0.0.0.0", 80), True),
        (("TCP", "0.0.0.0", 80), ("TCP", "10.0.0.1", 80), True),
        (("TCP", "10.0.0.1", 80), ("TCP", "10.0.0.1", 80), True),
        (("TCP", "10.0.0.1", 80), ("TCP", "10.0.0.2", 80), False),
        (("UDP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 80), False),
        (("TCP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 81), False),
        (("", "", 80), ("TCP", "10.0.0.1", 80), True),
    ])
    def test_conflicts(self, wanted: tuple, used: tuple, expected: bool) -> None:
        assert ports_conflict(wanted, used) is expected


# --------------------------------------------------------------------------- placement


def test_node_selector_places_only_on_matching_nodes() -> None:
    objects = [node("n1"), node("n2", labels={"disk": "ssd"}), node("n3"),
               *(pod(f"p{i}", node_selector={"disk": "ssd"}) for i in range(3))]
    report = simulate(objects, conf())
    assert report["binds"] == {f"default/p{i}": "n2" for i in range(3)}


def test_no_matching_node_reads_the_kube_way() -> None:
    objects = [node("n1"), node("n2"), pod("p", node_selector={"disk": "ssd"})]
    report = simulate(objects, conf())
    assert report["binds"] == {}
    assert report["pending"]["default/p"][0] == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.")


def test_reasons_of_several_nodes_are_aggregated() -> None:
    objects = [node("n1", labels={"disk": "ssd"}, taints=[taint("key", "value")]),
               node("n2"), node("n3"), pod("p", node_selector={"disk": "ssd"})]
    report = simulate(objects, conf())
    assert report["pending"]["default/p"][0] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {key: value}, "
        "2 node(s) didn't match Pod's node affinity/selector.")


def test_required_affinity_terms_are_ored_and_expressions_anded() -> None:
    affinity = required([expr("zone", "In", "a"), expr("cores", "Gt", "32")],
                        [expr("special", "Exists")])
    objects = [node("n1", labels={"zone": "a", "cores": "16"}),
               node("n2", labels={"zone": "b", "cores": "64"}),
               node("n3", labels={"zone": "a", "cores": "64"}),
               node("n4", labels={"special": ""}),
               pod("p", affinity=affinity)]
    session = open_session(objects, conf())
    task = _task(session, "p")
    fits = {n.name for n in session.node_list if session.predicate(task, n) is None}
    assert fits == {"n3", "n4"}


def test_affinity_on_a_non_integer_label_refuses_without_crashing() -> None:
    affinity = required([expr("cores", "Gt", "8")])
    objects = [node("n1", labels={"cores": "lots"}), node("n2", labels={"cores": "16"}),
               pod("p", affinity=affinity)]
    report = simulate(objects, conf())
    assert report["binds"] == {"default/p": "n2"}


def test_match_fields_pins_a_pod_to_a_node_by_name() -> None:
    affinity = required(fields=[expr("metadata.name", "In", "n2")])
    objects = [node("n1"), node("n2"), node("n3"), pod("p", affinity=affinity)]
    assert simulate(objects, conf())["binds"] == {"default/p": "n2"}


def test_selector_and_affinity_must_both_hold() -> None:
    affinity = required([expr("zone", "In", "a")])
    objects = [node("n1", labels={"zone": "a"}),
               node("n2", labels={"zone": "a", "disk": "ssd"}),
               node("n3", labels={"disk": "ssd"}),
               pod("p", node_selector={"disk": "ssd"}, affinity=affinity)]
    assert simulate(objects, conf())["binds"] == {"default/p": "n2"}


def test_tainted_node_is_avoided_unless_tolerated() -> None:
    objects = [node("n1", cpu="2", taints=[taint("gpu", "true")]), node("n2", cpu="2"),
               pod("plain-0"), pod("plain-1"), pod("plain-2"),
               pod("tolerant", tolerations=[{"key": "gpu", "operator": "Equal",
                                             "value": "true", "effect": "NoSchedule"}])]
    report = simulate(objects, conf())
    binds = report["binds"]
    assert binds["default/tolerant"] == "n1"
    plain_nodes = [binds.get(f"default/plain-{i}") for i in range(3)]
    assert "n1" not in plain_nodes
    assert sorted(report["pending"]) == ["default/plain-2"]
    assert report["pending"]["default/plain-2"][0] == (
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) had untolerated taint {gpu: true}.")


def test_no_execute_taints_refuse_and_prefer_no_schedule_does_not() -> None:
    objects = [node("n1", taints=[taint("a", "1", "NoExecute")]),
               node("n2", taints=[taint("b", "2", "PreferNoSchedule")]),
               node("n3", taints=[taint("c", "3", "PreferNoSchedule"), taint("d", "4")]),
               pod("p")]
    session = open_session(objects, conf())
    task = _task(session, "p")
    answers = {n.name: session.predicate(task, n) for n in session.node_list}
    assert answers["n2"] is None
    assert answers["n1"].reasons == ("node(s) had untolerated taint {a: 1}",)
    assert answers["n3"].reasons == ("node(s) had untolerated taint {d: 4}",)
    assert not answers["n1"].resolvable


def test_wildcard_toleration_tolerates_every_taint() -> None:
    objects = [node("n1", taints=[taint("a", "1"), taint("b", "2", "NoExecute")]),
               pod("p", tolerations=[{"operator": "Exists"}])]
    assert simulate(objects, conf())["binds"] == {"default/p": "n1"}


def test_unschedulable_node_is_refused() -> None:
    objects = [node("n1", unschedulable=True), pod("p")]
    report = simulate(objects, conf())
    assert report["binds"] == {}
    assert report["pending"]["default/p"][0] == (
        "0/1 nodes are available: 1 node(s) were unschedulable.")


def test_unschedulable_node_takes_a_pod_that_tolerates_it() -> None:
    toleration = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                  "effect": "NoSchedule"}
    objects = [node("n1", unschedulable=True), pod("p", tolerations=[toleration])]
    assert simulate(objects, conf())["binds"] == {"default/p": "n1"}


def test_unschedulable_is_checked_even_with_every_other_check_off() -> None:
    args = {"predicate.NodeAffinityEnable": "false", "predicate.TaintTolerationEnable": "false",
            "predicate.NodePortsEnable": "false"}
    objects = [node("n1", unschedulable=True), pod("p")]
    session = open_session(objects, conf(**args))
    unfit = session.predicate(_task(session, "p"), session.nodes["n1"])
    assert unfit is not None and unfit.reasons == (REASON_UNSCHEDULABLE,)


# --------------------------------------------------------------------------- pod slots


def test_pod_count_limit_holds_in_backfill() -> None:
    objects = [node("n1", pods="3"), pod("running", node_name="n1"),
               *(pod(f"be-{i}", cpu=None, memory=None) for i in range(4))]
    report = simulate(objects, conf())
    assert sorted(report["binds"]) == ["default/be-0", "default/be-1"]
    assert sorted(report["pending"]) == ["default/be-2", "default/be-3"]


def test_full_node_is_refused_with_a_resolvable_reason() -> None:
    objects = [node("n1", pods="1", labels={"x": "y"}), pod("running", node_name="n1"),
               pod("p"), pod("picky", node_selector={"x": "z"})]
    session = open_session(objects, conf())
    n1 = session.nodes["n1"]
    unfit = session.predicate(_task(session, "p"), n1)
    assert unfit is not None
    assert unfit.reasons == (REASON_POD_NUMBER,)
    assert unfit.resolvable
    # Reported together with a refusal eviction cannot fix, which makes it unresolvable.
    unfit = session.predicate(_task(session, "picky"), n1)
    assert unfit is not None
    assert unfit.reasons == (REASON_POD_NUMBER, REASON_AFFINITY)
    assert not unfit.resolvable


def test_pod_evicted_in_the_session_frees_its_slot_until_rolled_back() -> None:
    objects = [node("n1", pods="1"), pod("running", node_name="n1"), pod("p")]
    session = open_session(objects, conf())
    n1, task = session.nodes["n1"], _task(session, "p")
    assert session.predicate(task, n1) is not None
    statement = session.statement()
    statement.evict(_task(session, "running"), "preempt", task)
    assert session.predicate(task, n1) is None
    statement.discard()
    assert session.predicate(task, n1) is not None


def test_pods_placed_in_the_session_take_slots() -> None:
    objects = [node("n1", pods="2"), pod("a"), pod("b")]
    session = open_session(objects, conf())
    n1, a, b = session.nodes["n1"], _task(session, "a"), _task(session, "b")
    statement = session.statement()
    statement.pipeline(a, n1)
    assert session.predicate(b, n1) is None
    statement.pipeline(b, n1)
    assert session.predicate(b, n1).reasons == (REASON_POD_NUMBER,)


# --------------------------------------------------------------------------- host ports


def test_host_port_conflict_sends_the_pod_elsewhere() -> None:
    objects = [node("n1"), node("n2"), pod("web-old", node_name="n1", host_ports=[8080]),
               pod("web", host_ports=[8080])]
    assert simulate(objects, conf())["binds"] == {"default/web": "n2"}


def test_host_port_conflict_reads_the_kube_way() -> None:
    objects = [node("n1"), pod("web-old", node_name="n1", host_ports=[8080]),
               pod("web", host_ports=[8080, 9090]), pod("other", host_ports=[9091])]
    report = simulate(objects, conf())
    assert report["binds"] == {"default/other": "n1"}
    assert report["pending"]["default/web"][0] == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested "
        "pod ports.")


def test_pods_placed_in_the_session_hold_their_ports() -> None:
    objects = [node("n1"), node("n2"), *(pod(f"web-{i}", host_ports=[80]) for i in range(3))]
    report = simulate(objects, conf())
    assert sorted(report["binds"].values()) == ["n1", "n2"]
    assert list(report["pending"]) == ["default/web-2"]


def test_port_conflict_is_resolvable_and_freed_by_eviction() -> None:
    objects = [node("n1"), pod("old", node_name="n1", host_ports=[80]),
               pod("new", host_ports=[80])]
    session = open_session(objects, conf())
    n1, new = session.nodes["n1"], _task(session, "new")
    unfit = session.predicate(new, n1)
    assert unfit is not None and unfit.reasons == (REASON_PORTS,) and unfit.resolvable
    session.statement().evict(_task(session, "old"), "preempt", new)
    assert session.predicate(new, n1) is None


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("key, objects", [
    ("predicate.NodeAffinityEnable", [node("n1"), pod("p", node_selector={"a": "b"})]),
    ("predicate.TaintTolerationEnable", [node("n1", taints=[taint("a")]), pod("p")]),
    ("predicate.NodePortsEnable", [node("n1"), pod("old", node_name="n1", host_ports=[80]),
                                   pod("p", host_ports=[80])]),
])
def test_each_check_can_be_turned_off(key: str, objects: list[dict]) -> None:
    assert simulate(objects, conf())["binds"] == {}
    assert simulate(objects, conf(**{key: "false"}))["binds"] == {"default/p": "n1"}


def test_volcano_arguments_are_accepted() -> None:
    keys = ["predicate.PodAffinityEnable", "predicate.NodeVolumeLimitsEnable",
            "predicate.VolumeZoneEnable", "predicate.PodTopologySpreadEnable",
            "predicate.VolumeBindingEnable", "predicate.CacheEnable"]
    parsed = parse_conf(conf(**dict.fromkeys(keys, "true")))
    assert parsed.warnings == []
    args = parsed.tiers[1][0].args
    assert all(args[k] is True for k in keys)


def test_defaults() -> None:
    args = parse_conf(conf()).tiers[1][0].args
    assert args["predicate.CacheEnable"] is False
    assert args["predicate.NodeAffinityEnable"] is True


@pytest.mark.parametrize("value", ["3", "'yes'", "[true]"])
def test_argument_of_the_wrong_type_is_refused(value: str) -> None:
    with pytest.raises(ConfError, match=r"predicate\.NodePortsEnable.*must be a boolean"):
        parse_conf(conf(**{"predicate.NodePortsEnable": value}))


def _task(session: Session, name: str) -> Task:
    key = f"default/{name}"
    for job in session.jobs.values():
        for task in job.tasks.values():
            if task.key == key:
                return task
    raise KeyError(key)
