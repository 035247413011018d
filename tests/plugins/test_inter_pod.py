"""Inter-pod affinity, anti-affinity and topology spread (vscheduler/inter_pod.py, through
the predicates and nodeorder plugins): kube-scheduler's own test cases of its
InterPodAffinity and PodTopologySpread plugins, filter and score, then what a session
adds (pods placed earlier count for the next), and preempt and reclaim.

The kube-scheduler cases are numbered as in its semantics notes (IF, IM: affinity
filter; IS, IH: affinity score; PF, PM: spread filter; PS: spread score). Left out, on
purpose, as vscheduler does not do what they test:
- IS19: the `ignorePreferredTermsOfExistingPods` argument (always false here);
- IH2: a hardPodAffinityWeight other than 1 (kube-scheduler's default, fixed here);
- PS8: default spread constraints drawn from a pod's Services and ReplicaSets;
- PS18: minDomains on a ScheduleAnyway constraint, which the API server refuses (and so
  does our reading of the pod: tests/test_inter_pod_objects.py);
- the PreFilter "parsing pod" errors: a pod whose terms do not parse is refused when it
  is read (tests/test_inter_pod_objects.py), never scheduled.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.builders import (
    PREEMPT_CONF,
    RECLAIM_CONF,
    namespace,
    node,
    open_session,
    pod,
    podgroup,
    priority_class,
    queue,
    simulate,
)
from vscheduler.framework.session import Session
from vscheduler.inter_pod import (
    REASON_AFFINITY,
    REASON_ANTI_AFFINITY,
    REASON_EXISTING_ANTI_AFFINITY,
    REASON_SPREAD,
    REASON_SPREAD_LABEL,
)
from vscheduler.model import Task
from vscheduler.plugins.predicates import REASON_AFFINITY as REASON_NODE_AFFINITY

# --------------------------------------------------------------------------- manifests

Obj = dict[str, Any]


def In(key: str, *values: str) -> dict:
    return {"key": key, "operator": "In", "values": list(values)}


def NotIn(key: str, *values: str) -> dict:
    return {"key": key, "operator": "NotIn", "values": list(values)}


def Ex(key: str) -> dict:
    return {"key": key, "operator": "Exists"}


def DNE(key: str) -> dict:
    return {"key": key, "operator": "DoesNotExist"}


def sel(*expressions: dict, **labels: str) -> dict:
    """A label selector; `sel()` is the empty one, which selects everything."""
    out: dict = {}
    if labels:
        out["matchLabels"] = labels
    if expressions:
        out["matchExpressions"] = list(expressions)
    return out


_ABSENT = object()


def term(selector: dict | None, key: str, namespaces: list[str] | None = None,
         ns_selector: Any = _ABSENT) -> dict:
    """A PodAffinityTerm; `selector` None leaves labelSelector out (selects no pod)."""
    out: dict = {"topologyKey": key}
    if selector is not None:
        out["labelSelector"] = selector
    if namespaces is not None:
        out["namespaces"] = namespaces
    if ns_selector is not _ABSENT:
        out["namespaceSelector"] = ns_selector
    return out


def rules(affinity: tuple = (), anti: tuple = (), preferred: tuple = (),
          preferred_anti: tuple = ()) -> dict:
    """spec.affinity with pod affinity and anti-affinity; preferred ones as (weight, term)."""
    out: dict = {}
    for name, required, weighted in (("podAffinity", affinity, preferred),
                                     ("podAntiAffinity", anti, preferred_anti)):
        section: dict = {}
        if required:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = list(required)
        if weighted:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in weighted]
        if section:
            out[name] = section
    return out


def spread(max_skew: int, key: str, selector: dict | None, hard: bool = True,
           **extra: Any) -> dict:
    out: dict = {"maxSkew": max_skew, "topologyKey": key,
                 "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway", **extra}
    if selector is not None:
        out["labelSelector"] = selector
    return out


def n(name: str, **labels: str) -> Obj:
    return node(name, labels=labels)


def nh(name: str, **labels: str) -> Obj:
    """A node with its kubernetes.io/hostname label."""
    return node(name, labels={HOSTNAME: name, **labels})


HOSTNAME = "kubernetes.io/hostname"
_names = itertools.count()


def on(node_name: str, labels: dict | None = None, *, times: int = 1, ns: str = "default",
       affinity: dict | None = None, terminating: bool = False,
       scheduler: str = "vscheduler") -> list[Obj]:
    """`times` pods running on `node_name` with `labels`."""
    out = []
    for _ in range(times):
        obj = pod(f"e{next(_names)}", namespace=ns, node_name=node_name, labels=labels or {},
                  affinity=affinity, scheduler=scheduler)
        if terminating:
            obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        out.append(obj)
    return out


def incoming(labels: dict | None = None, *, affinity: dict | None = None,
             constraints: list[dict] | None = None, ns: str = "default",
             name: str = "p", **args: Any) -> Obj:
    obj = pod(name, namespace=ns, labels=labels or {}, affinity=affinity, **args)
    if constraints:
        obj["spec"]["topologySpreadConstraints"] = constraints
    return obj


def _task(session: Session, name: str, ns: str = "default") -> Task:
    [found] = [t for job in session.jobs.values() for t in job.tasks.values()
               if t.key == f"{ns}/{name}"]
    return found


# --------------------------------------------------------------------------- filter

FILTER_CONF = """
actions: "allocate"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates%s}]
"""

OK = None
AFF = ((REASON_AFFINITY,), False)
ANTI = ((REASON_ANTI_AFFINITY,), True)
EXIST = ((REASON_EXISTING_ANTI_AFFINITY,), True)
SKEW = ((REASON_SPREAD,), True)
LABEL = ((REASON_SPREAD_LABEL,), False)
NODE_AFF = ((REASON_NODE_AFFINITY,), False)


def filter_conf(**args: Any) -> str:
    if not args:
        return FILTER_CONF % ""
    items = ", ".join(f"{k}: {v}" for k, v in args.items())
    return FILTER_CONF % f", arguments: {{{items}}}"


def verdicts(objects: list[Obj], conf_text: str | None = None, name: str = "p",
             ns: str = "default") -> dict[str, tuple | None]:
    """Each node's verdict for pending pod `name`, through the session's combined
    predicate: None, or (reasons, resolvable)."""
    session = open_session(objects, conf_text or filter_conf())
    task = _task(session, name, ns)
    out = {}
    for one in session.node_list:
        unfit = session.predicate(task, one)
        out[one.name] = None if unfit is None else (unfit.reasons, unfit.resolvable)
    return out


NAMESPACES = [namespace("subteam1.team1", {"team": "team1"}),
              namespace("subteam2.team1", {"team": "team1"}),
              namespace("subteam1.team2", {"team": "team2"}),
              namespace("subteam2.team2", {"team": "team2"})]

SECURITYSCAN = {"service": "securityscan"}
SCANS = In("service", "securityscan", "value2")


def node1() -> list[Obj]:
    return [n("node1", region="r1", zone="z11")]


# Each case: objects (the pending pod is "p" in namespace "default" unless the case
# says), expected verdicts per node.
AFFINITY_FILTER: dict[str, Callable[[], tuple[list[Obj], dict]]] = {
    "IF1": lambda: ([*node1(), *on("node1", SECURITYSCAN),
                     incoming({"security": "S1"}, affinity=rules([term(sel(SCANS), "region")]))],
                    {"node1": OK}),
    "IF2": lambda: ([*node1(), *on("node1", SECURITYSCAN),
                     incoming(SECURITYSCAN, affinity=rules([term(
                         sel(In("service", "antivirusscan", "value2")), "region")]))],
                    {"node1": AFF}),
    "IF3 terms are ANDed": lambda: ([*node1(), *on("node1", SECURITYSCAN), incoming(
        {"security": "S1"}, affinity=rules([
            term(sel(Ex("service"), DNE("wrongkey")), "region"),
            term(sel(In("service", "securityscan2"), NotIn("service", "WrongValue")),
                 "region")]))], {"node1": AFF}),
    "IF4": lambda: ([*node1(), *on("node1", SECURITYSCAN), incoming(
        {"security": "S1"}, affinity=rules([term(sel(SCANS), "region")],
                                           [term(sel(SCANS), "zone")]))], {"node1": ANTI}),
    "IF5": lambda: ([*node1(), *on("node1", SECURITYSCAN, affinity=rules(
        anti=[term(sel(SCANS), "zone")])), incoming(SECURITYSCAN, affinity=rules(
            [term(sel(SCANS), "region")],
            [term(sel(In("service", "antivirusscan", "value2")), "node")]))],
        {"node1": EXIST}),
    "IF6": lambda: ([*node1(), *on("node1", SECURITYSCAN, affinity=rules(
        anti=[term(sel(NotIn("service", "securityscan", "value2")), "zone")])),
        incoming(SECURITYSCAN)], {"node1": OK}),
    "IF7 not self-matching": lambda: ([*node1(), *on("node2", SECURITYSCAN), incoming(
        SECURITYSCAN, affinity=rules([term(sel(NotIn("service", "securityscan", "value2")),
                                           "region")]))], {"node1": AFF}),
    "IF8": lambda: ([*NAMESPACES, *node1(), *on("node1", SECURITYSCAN, ns="subteam1.team1"),
                     incoming({"security": "S1"}, affinity=rules([term(
                         sel(SCANS), "region", ns_selector=sel(In("team", "team1")))]))],
                    {"node1": OK}),
    "IF9": lambda: ([*NAMESPACES, *node1(), *on("node1", SECURITYSCAN, ns="subteam1.team2"),
                     incoming({"security": "S1"}, affinity=rules([term(
                         sel(SCANS), "region", ns_selector=sel(In("team", "team1")))]))],
                    {"node1": AFF}),
    "IF10": lambda: ([*NAMESPACES, *node1(), *on("node1", SECURITYSCAN, ns="subteam2.team1"),
                      incoming(ns="subteam1.team1", affinity=rules(anti=[term(
                          sel(SCANS), "zone", ns_selector=sel(In("team", "team1")))]))],
                     {"node1": ANTI}),
    "IF11 empty namespace selector": lambda: (
        [*NAMESPACES, *node1(), *on("node1", SECURITYSCAN, ns="subteam2.team1"),
         incoming(ns="subteam1.team1",
                  affinity=rules(anti=[term(sel(SCANS), "zone", ns_selector={})]))],
        {"node1": ANTI}),
    "IF12": lambda: ([*NAMESPACES, *node1(), *on("node1", SECURITYSCAN, ns="subteam1.team2"),
                      incoming(ns="subteam1.team1", affinity=rules(anti=[term(
                          sel(SCANS), "zone", ns_selector=sel(In("team", "team1")))]))],
                     {"node1": OK}),
    "IM1": lambda: ([n("n1", region="China"), n("n2", region="China", az="az1"),
                     n("n3", region="India"), *on("n1", {"foo": "bar"}),
                     incoming(affinity=rules([term(sel(In("foo", "bar")), "region")]))],
                    {"n1": OK, "n2": OK, "n3": AFF}),
    "IM2 first pod": lambda: ([n("A", zone="az1", hostname="h1"),
                               n("B", zone="az2", hostname="h2"),
                               *on("A", {"foo": "bar"}),
                               incoming({"foo": "bar", "service": "securityscan"},
                                        affinity=rules([
                                            term(sel(In("foo", "bar")), "zone"),
                                            term(sel(In("service", "securityscan")), "zone")]))],
                              {"A": OK, "B": OK}),
    "IM3 first pod needs the key": lambda: (
        [n("A", zoneLabel="az1", hostname="h1"), n("B", zoneLabel="az2", hostname="h2"),
         *on("A", {"foo": "bar"}),
         incoming({"foo": "bar", "service": "securityscan"}, affinity=rules([
             term(sel(In("foo", "bar")), "zone"),
             term(sel(In("service", "securityscan")), "zone")]))],
        {"A": AFF, "B": AFF}),
    "IM4": lambda: ([n("A", region="r1", zone="z1", hostname="A"),
                     n("B", region="r1", zone="z2", hostname="B"),
                     *on("A", {"foo": "abc", "service": "securityscan"}),
                     incoming(affinity=rules(anti=[
                         term(sel(In("foo", "abc")), "region"),
                         term(sel(In("service", "securityscan")), "zone")]))],
                    {"A": ANTI, "B": ANTI}),
    "IM5 namespaces of each side": lambda: (
        [n("A", region="China"), n("B", region="China", az="az1"), n("C", region="India"),
         *on("A", {"foo": "bar"}, ns="NS1"),
         *on("C", ns="NS2", affinity=rules(anti=[term(sel(In("foo", "123")), "region")])),
         incoming({"foo": "123"}, ns="NS1",
                  affinity=rules(anti=[term(sel(In("foo", "bar")), "region")]))],
        {"A": ANTI, "B": ANTI, "C": OK}),
    "IM6": lambda: ([n("A", region="r1", zone="z1", hostname="A"),
                     n("B", region="r1", zone="z1", hostname="B"),
                     *on("A", affinity=rules(anti=[term(sel(Ex("foo")), "invalid-node-label")])),
                     incoming({"foo": ""})],
                    {"A": OK, "B": OK}),
    "IM7": lambda: ([n("A", region="r1", zone="z1", hostname="A"),
                     n("B", region="r1", zone="z1", hostname="B"), *on("A", {"foo": ""}),
                     incoming(affinity=rules(anti=[term(sel(Ex("foo")), "invalid-node-label")]))],
                    {"A": OK, "B": OK}),
    "IM8": lambda: ([n("A", region="r1", zone="z1", hostname="A"),
                     n("B", region="r1", zone="z2", hostname="B"),
                     *on("A", affinity=rules(anti=[term(sel(Ex("foo")), "invalid-node-label"),
                                                   term(sel(Ex("bar")), "zone")])),
                     incoming({"foo": "", "bar": ""})],
                    {"A": EXIST, "B": OK}),
    "IM9": lambda: ([n("A", region="r1", zone="z1", hostname="A"),
                     n("B", region="r1", zone="z2", hostname="B"),
                     *on("A", {"foo": "", "bar": ""}),
                     incoming(affinity=rules(anti=[term(sel(Ex("foo")), "invalid-node-label"),
                                                   term(sel(Ex("bar")), "zone")]))],
                    {"A": ANTI, "B": OK}),
    "IM10": lambda: ([n("A", region="r1", zone="z1"), n("B", region="r1", zone="z2"),
                      n("C", region="r1", zone="z3"),
                      *on("A", affinity=rules(anti=[term(sel(Ex("foo")), "zone"),
                                                    term(sel(Ex("labelA")), "zone")])),
                      *on("B", affinity=rules(anti=[term(sel(Ex("bar")), "zone"),
                                                    term(sel(Ex("labelB")), "zone")])),
                      incoming({"foo": "", "bar": ""})],
                     {"A": EXIST, "B": EXIST, "C": OK}),
    "IM11": lambda: ([n("A", region="r1", zone="z1"), n("B", region="r1", zone="z1"),
                      *on("A", {"foo": "", "bar": ""}),
                      incoming(affinity=rules([term(sel(Ex("foo")), "region"),
                                               term(sel(Ex("bar")), "zone")]))],
                     {"A": OK, "B": OK}),
    "IM12 one pod must match every term": lambda: (
        [n("A", region="r1", zone="z1"), n("B", region="r1", zone="z2"),
         *on("A", {"foo": ""}), *on("B", {"bar": ""}),
         incoming(affinity=rules([term(sel(Ex("foo")), "region"),
                                  term(sel(Ex("bar")), "zone")]))],
        {"A": AFF, "B": AFF}),
}


@pytest.mark.parametrize("case", sorted(AFFINITY_FILTER))
def test_kube_affinity_filter(case: str) -> None:
    objects, expected = AFFINITY_FILTER[case]()
    assert verdicts(objects, ns=objects[-1]["metadata"]["namespace"]) == expected


def test_terminating_pods_still_count_for_affinity_and_anti_affinity() -> None:
    """kube-scheduler's InterPodAffinity does not skip pods being deleted (a pod with a
    deletionTimestamp: Releasing here)."""
    nodes = [nh("a", zone="z1"), nh("b", zone="z2")]
    anti = incoming({"app": "web"}, affinity=rules(anti=[term(sel(app="web"), "zone")]))
    assert verdicts([*nodes, *on("a", {"app": "web"}, terminating=True), anti]) == {
        "a": ANTI, "b": OK}
    drawn = incoming(affinity=rules([term(sel(app="db"), "zone")]))
    assert verdicts([*nodes, *on("b", {"app": "db"}, terminating=True), drawn]) == {
        "a": AFF, "b": OK}
    owner = on("a", {"app": "db"}, terminating=True,
               affinity=rules(anti=[term(sel(app="web"), "zone")]))
    assert verdicts([*nodes, *owner, incoming({"app": "web"})]) == {"a": EXIST, "b": OK}


def test_pods_of_other_schedulers_count() -> None:
    nodes = [nh("a"), nh("b")]
    anti = incoming({"app": "web"}, affinity=rules(anti=[term(sel(app="web"), HOSTNAME)]))
    others = on("a", {"app": "web"}, scheduler="default-scheduler")
    assert verdicts([*nodes, *others, anti]) == {"a": ANTI, "b": OK}


def test_each_check_is_turned_off_by_its_argument() -> None:
    nodes = [nh("a", zone="z1"), nh("b", zone="z2")]
    pods = [*on("a", {"app": "web"}, times=2)]
    both = incoming({"app": "web"}, affinity=rules(anti=[term(sel(app="web"), "zone")]),
                    constraints=[spread(1, "zone", sel(app="web"))])
    assert verdicts([*nodes, *pods, both]) == {"a": ANTI, "b": OK}
    assert verdicts([*nodes, *pods, both], filter_conf(**{
        "predicate.PodAffinityEnable": "false"})) == {"a": SKEW, "b": OK}
    assert verdicts([*nodes, *pods, both], filter_conf(**{
        "predicate.PodTopologySpreadEnable": "false"})) == {"a": ANTI, "b": OK}
    assert verdicts([*nodes, *pods, both], filter_conf(**{
        "predicate.PodAffinityEnable": "false",
        "predicate.PodTopologySpreadEnable": "false"})) == {"a": OK, "b": OK}


def test_a_full_node_names_both_reasons_and_stays_resolvable() -> None:
    objects = [node("a", pods="1", labels={HOSTNAME: "a"}), *on("a", {"app": "web"}),
               incoming({"app": "web"}, affinity=rules(anti=[term(sel(app="web"), HOSTNAME)]))]
    [(reasons, resolvable)] = verdicts(objects).values()
    assert reasons == ("node(s) pod number exceeded", REASON_ANTI_AFFINITY) and resolvable


# The layout of kube-scheduler's spread filter tests: two zones of two nodes.
def layout4(**changes: dict) -> list[Obj]:
    labels = {"a": {"zone": "zone1", "node": "a"}, "b": {"zone": "zone1", "node": "b"},
              "x": {"zone": "zone2", "node": "x"}, "y": {"zone": "zone2", "node": "y"}}
    labels.update(changes)
    return [node(name, labels=one) for name, one in labels.items()]


FOO = {"foo": ""}
BAR = {"bar": ""}
FOOBAR = {"foo": "", "bar": ""}
Ex_foo, Ex_bar = sel(Ex("foo")), sel(Ex("bar"))


def pods_at(**counts: int) -> list[Obj]:
    """`a=2, y=3`: that many pods labelled foo on each node."""
    return [obj for name, count in counts.items() for obj in on(name, FOO, times=count)]


def c(max_skew: int, key: str, selector: dict | None, **extra: Any) -> dict:
    return spread(max_skew, key, selector, **extra)


def node_in(*names: str) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [In("node", *names)]}]}}}


def node_not_in(*names: str) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [NotIn("node", *names)]}]}}}


UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
ALL_OK = dict.fromkeys("abxy", OK)

# kube-scheduler's spread filter is tested on its own; here the node affinity and taint
# checks are turned off where a case has the pod's node affinity or a taint, so that the
# verdict on every node is the spread's (the spread still reads the pod's node affinity
# for its domains): test_node_affinity_refuses_before_spread shows them together.
ISOLATED = filter_conf(**{"predicate.NodeAffinityEnable": "false",
                          "predicate.TaintTolerationEnable": "false"})

SPREAD_FILTER: dict[str, Callable[[], tuple[list[Obj], dict]]] = {
    "PF1": lambda: ([*layout4(), incoming(FOO, constraints=[c(1, "zone", Ex_foo)])], ALL_OK),
    "PF2": lambda: ([*layout4(), incoming(FOO, constraints=[c(1, "zone", Ex_bar)])], ALL_OK),
    "PF3": lambda: ([*layout4(), *on("a", FOO, ns="ns1"), *on("a", FOO, ns="ns2"),
                     *pods_at(x=1, y=1), incoming(FOO, constraints=[c(1, "zone", Ex_foo)])],
                    {"a": OK, "b": OK, "x": SKEW, "y": SKEW}),
    "PF4 no selector": lambda: ([*layout4(), *pods_at(x=1, y=1),
                                 incoming(FOO, constraints=[c(1, "zone", None)])], ALL_OK),
    "PF5": lambda: ([*layout4(), *pods_at(a=2, b=1, y=3),
                     incoming(FOO, constraints=[c(1, "zone", Ex_foo)])], ALL_OK),
    "PF6": lambda: ([*layout4(b={"zon": "zone1", "node": "b"}), *pods_at(a=1, b=1, x=1, y=1),
                     incoming(FOO, constraints=[c(1, "zone", Ex_foo)])],
                    {"a": OK, "b": LABEL, "x": SKEW, "y": SKEW}),
    "PF7": lambda: ([*layout4()[0:4:2], incoming(FOO, constraints=[c(1, "rack", Ex_foo)])],
                    {"a": LABEL, "x": LABEL}),
    "PF8": lambda: ([*layout4(), *pods_at(a=2, b=1, y=3),
                     incoming(FOO, constraints=[c(1, "node", Ex_foo)])],
                    {"a": SKEW, "b": SKEW, "x": OK, "y": SKEW}),
    "PF9": lambda: ([*layout4(), *pods_at(a=2, b=1, y=3),
                     incoming(FOO, constraints=[c(2, "node", Ex_foo)])],
                    {"a": SKEW, "b": OK, "x": OK, "y": SKEW}),
    "PF10 not self-matching": lambda: ([*layout4(), *pods_at(a=2, b=1, y=3),
                                        incoming(BAR, constraints=[c(1, "node", Ex_foo)])],
                                       {"a": SKEW, "b": OK, "x": OK, "y": SKEW}),
    "PF11 domains by node affinity": lambda: (
        [*layout4(), *pods_at(a=2, b=1, y=3),
         incoming(FOO, affinity=node_in("a", "y"), constraints=[c(1, "node", Ex_foo)])],
        {"a": OK, "b": OK, "x": OK, "y": SKEW}),
    "PF12 terminating pods do not count": lambda: (
        [n("a", node="a"), n("b", node="b"), *on("a", FOO, terminating=True),
         *pods_at(b=1), incoming(FOO, constraints=[c(1, "node", Ex_foo)])],
        {"a": OK, "b": SKEW}),
    "PF13": lambda: ([*layout4(), *pods_at(b=2, y=1),
                      incoming(FOO, affinity=node_not_in("b"),
                               constraints=[c(1, "zone", Ex_foo)])],
                     {"a": OK, "b": OK, "x": SKEW, "y": SKEW}),
    "PF14 minDomains": lambda: ([n("a", node="a"), n("b", node="b"), n("c", node="c"),
                                 *pods_at(a=2, b=2, c=1),
                                 incoming(FOO, constraints=[c(2, "node", Ex_foo, minDomains=4)])],
                                {"a": SKEW, "b": SKEW, "c": OK}),
    "PF15": lambda: ([n("a", node="a"), n("b", node="b"), n("c", node="c"),
                      *pods_at(a=2, b=2, c=1),
                      incoming(FOO, constraints=[c(2, "node", Ex_foo, minDomains=2)])],
                     {"a": OK, "b": OK, "c": OK}),
    "PF16": lambda: ([*layout4(), *pods_at(a=1, b=1, y=1),
                      incoming(FOO, constraints=[c(2, "zone", Ex_foo, minDomains=3)])],
                     {"a": SKEW, "b": SKEW, "x": OK, "y": OK}),
    "PF17 nodeAffinityPolicy Honor": lambda: (
        [n("a", node="a", foo=""), n("b", node="b", foo=""), n("x", node="x", foo=""),
         n("y", node="y"), *pods_at(a=1, b=1, y=1),
         incoming(FOO, node_selector=FOO, constraints=[c(1, "node", Ex_foo)])],
        {"a": SKEW, "b": SKEW, "x": OK, "y": OK}),
    "PF18 nodeAffinityPolicy Ignore": lambda: (
        [n("a", node="a", foo=""), n("b", node="b", foo=""), n("x", node="x", foo=""),
         n("y", node="y"), *pods_at(a=1, b=1, y=1),
         incoming(FOO, node_selector=FOO,
                  constraints=[c(1, "node", Ex_foo, nodeAffinityPolicy="Ignore")])],
        {"a": SKEW, "b": SKEW, "x": OK, "y": SKEW}),
    "PF19 nodeTaintsPolicy Honor": lambda: (
        [n("a", node="a"), n("b", node="b"), n("x", node="x"),
         node("y", labels={"node": "y"}, taints=[UNSCHEDULABLE_TAINT]),
         *pods_at(a=1, b=1, y=1),
         incoming(FOO, constraints=[c(1, "node", Ex_foo, nodeTaintsPolicy="Honor")])],
        {"a": SKEW, "b": SKEW, "x": OK, "y": OK}),
    "PF20 nodeTaintsPolicy Ignore": lambda: (
        [n("a", node="a"), n("b", node="b"), n("x", node="x"),
         node("y", labels={"node": "y"}, taints=[UNSCHEDULABLE_TAINT]),
         *pods_at(a=1, b=1, y=1), incoming(FOO, constraints=[c(1, "node", Ex_foo)])],
        {"a": SKEW, "b": SKEW, "x": OK, "y": SKEW}),
    "PM1": lambda: ([*layout4(), *pods_at(a=2, b=1, y=3),
                     incoming(FOO, constraints=[c(1, "zone", Ex_foo), c(1, "node", Ex_foo)])],
                    {"a": SKEW, "b": SKEW, "x": OK, "y": SKEW}),
    "PM2": lambda: ([*layout4(), *pods_at(a=2, b=1, y=4),
                     incoming(FOO, constraints=[c(1, "zone", Ex_foo), c(1, "node", Ex_foo)])],
                    dict.fromkeys("abxy", SKEW)),
    "PM3": lambda: ([*layout4(), *on("a", FOO), *on("y", BAR),
                     incoming(FOOBAR, constraints=[c(1, "zone", Ex_foo), c(1, "node", Ex_bar)])],
                    {"a": SKEW, "b": SKEW, "x": OK, "y": SKEW}),
    "PM4": lambda: ([*layout4(), *on("a", FOO), *on("x", BAR), *on("y", BAR),
                     incoming(FOOBAR, constraints=[c(1, "zone", Ex_foo), c(1, "node", Ex_bar)])],
                    dict.fromkeys("abxy", SKEW)),
    "PM5": lambda: ([*layout4(), *on("a", FOO), *on("a", FOOBAR), *on("y", FOO),
                     *on("y", FOOBAR), *on("y", FOO),
                     incoming(FOOBAR, constraints=[c(1, "zone", Ex_foo), c(1, "node", Ex_bar)])],
                    {"a": SKEW, "b": OK, "x": SKEW, "y": SKEW}),
    "PM6": lambda: ([*layout4(), *on("a", FOO), *on("x", BAR), *on("y", BAR),
                     incoming(BAR, constraints=[c(1, "zone", Ex_foo), c(1, "node", Ex_bar)])],
                    {"a": OK, "b": OK, "x": SKEW, "y": SKEW}),
    "PM7 a node without every key is no domain": lambda: (
        [*layout4(x={"zone": "zone2"}), *pods_at(a=1, y=1),
         incoming(FOO, constraints=[c(1, "zone", Ex_foo), c(1, "node", Ex_foo)])],
        {"a": SKEW, "b": OK, "x": LABEL, "y": SKEW}),
}


@pytest.mark.parametrize("case", sorted(SPREAD_FILTER))
def test_kube_spread_filter(case: str) -> None:
    objects, expected = SPREAD_FILTER[case]()
    assert verdicts(objects, ISOLATED) == expected


def test_node_affinity_refuses_before_spread() -> None:
    """PF11 with every check on: the nodes the pod's node affinity refuses say so first
    (an unresolvable refusal), the others keep their spread verdicts."""
    objects, _ = SPREAD_FILTER["PF11 domains by node affinity"]()
    assert verdicts(objects) == {"a": OK, "b": NODE_AFF, "x": NODE_AFF, "y": SKEW}


def test_anti_affinity_is_checked_before_spread() -> None:
    """Volcano's order: inter-pod affinity, then topology spread (both refuse node a)."""
    objects = [*layout4(), *pods_at(a=2),
               incoming(FOO, affinity=rules(anti=[term(Ex_foo, "node")]),
                        constraints=[c(1, "node", Ex_foo)])]
    assert verdicts(objects) == {"a": ANTI, "b": OK, "x": OK, "y": OK}


# --------------------------------------------------------------------------- scores

WEIGHT = 2
SCORE_CONF = f"""
actions: "allocate"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}, {{name: conformance}}]
- plugins: [{{name: predicates}}, {{name: nodeorder, arguments: {{
    leastrequested.weight: 0, mostrequested.weight: 0, balancedresource.weight: 0,
    nodeaffinity.weight: 0, tainttoleration.weight: 0, imagelocality.weight: 0,
    podaffinity.weight: {WEIGHT}, podtopologyspread.weight: {WEIGHT}}}}}]
"""


def scores(objects: list[Obj], candidates: str | list[str] | None = None,
           name: str = "p", ns: str = "default") -> list[float]:
    """nodeorder's batch scores of pending pod `name` over `candidates` (all nodes)."""
    session = open_session(objects, SCORE_CONF)
    task = _task(session, name, ns)
    nodes = session.node_list if candidates is None else [session.nodes[c] for c in candidates]
    got = session.plugins["nodeorder"].batch_node_order(task, nodes)
    return [got[one.name] for one in nodes]


S1, S2 = {"security": "S1"}, {"security": "S2"}
WITH_S1_RG = rules(preferred=[(5, term(sel(In("security", "S1")), "region"))])
WITH_S2_RG = rules(preferred=[(6, term(sel(In("security", "S2")), "region"))])
AFF3 = rules(preferred=[(8, term(sel(NotIn("security", "S1"), In("security", "S2")), "region")),
                        (2, term(sel(Ex("security"), DNE("wrongkey")), "region"))])
HARD = rules([term(sel(In("security", "S1", "value2")), "region"),
              term(sel(Ex("security"), DNE("wrongkey")), "region")])
AWAY_S1_AZ = rules(preferred_anti=[(5, term(sel(In("security", "S1")), "az"))])
AWAY_S2_AZ = rules(preferred_anti=[(5, term(sel(In("security", "S2")), "az"))])
BOTH = rules(preferred=[(8, term(sel(In("security", "S1")), "region"))],
             preferred_anti=[(5, term(sel(In("security", "S2")), "az"))])
_NS_TERM = term(sel(In("security", "S1")), "region", ["subteam2.team2"],
                sel(In("team", "team1")))
AFF_NS = rules(preferred=[(5, _NS_TERM)])
ANTI_NS = rules(preferred_anti=[(5, _NS_TERM)])


def china(name: str) -> Obj:
    return n(name, region="China")


def india(name: str) -> Obj:
    return n(name, region="India")


def az1(name: str) -> Obj:
    return n(name, az="az1")


def az2(name: str) -> Obj:
    return n(name, az="az2")


def china_az1(name: str) -> Obj:
    return n(name, region="China", az="az1")


CIA = [china("n1"), india("n2"), az1("n3")]

# objects, expected normalised scores (before the weight)
AFFINITY_SCORE: dict[str, Callable[[], tuple[list[Obj], list[int]]]] = {
    "IS1 no terms anywhere": lambda: ([*CIA, incoming(S1)], [0, 0, 0]),
    "IS2": lambda: ([*CIA, *on("n1", S1), *on("n2", S2), *on("n3", S1),
                     incoming(S1, affinity=WITH_S1_RG)], [100, 0, 0]),
    "IS3": lambda: ([china("n1"), china_az1("n2"), india("n3"), *on("n1", S1),
                     incoming(affinity=WITH_S1_RG)], [100, 100, 0]),
    "IS4 the lowest is not 0": lambda: (
        [china("n1"), india("n2"), china("n3"), china("n4"), india("n5"),
         *on("n1", S2, times=2), *on("n2", S2), *on("n3", S2), *on("n4", S2), *on("n5", S2),
         incoming(S1, affinity=WITH_S2_RG)], [100, 0, 100, 100, 0]),
    "IS5": lambda: ([*CIA, *on("n1", S1), *on("n2", S2), *on("n3", S1),
                     incoming(S1, affinity=AFF3)], [20, 100, 0]),
    "IS6 existing pods' preferred terms": lambda: (
        [*CIA, *on("n1", S1, affinity=WITH_S1_RG), *on("n2", S2, affinity=WITH_S2_RG),
         incoming(S2)], [0, 100, 0]),
    "IS7": lambda: ([*NAMESPACES, *CIA, *on("n1", S1, affinity=AFF_NS),
                     *on("n2", S2, affinity=WITH_S2_RG), incoming(S1, ns="subteam1.team1")],
                    [100, 0, 0]),
    "IS8": lambda: ([*NAMESPACES, *CIA, *on("n1", S1, affinity=ANTI_NS),
                     *on("n2", S2, affinity=WITH_S2_RG), incoming(S1, ns="subteam1.team1")],
                    [0, 100, 100]),
    "IS9 existing pods' required affinity": lambda: (
        [*CIA, *on("n1", S1, affinity=HARD), *on("n2", S2, affinity=HARD), incoming(S1)],
        [100, 100, 0]),
    "IS10": lambda: ([az1("n1"), china("n2"), *on("n1", S1), *on("n2", S2),
                      incoming(S1, affinity=AWAY_S1_AZ)], [0, 100]),
    "IS11": lambda: ([az1("n1"), india("n2"), *on("n1", S1, times=2), *on("n2", S2),
                      incoming(S1, affinity=AWAY_S1_AZ)], [0, 100]),
    "IS12": lambda: ([az1("n1"), az2("n2"), *on("n1", S1, affinity=AWAY_S2_AZ),
                      *on("n2", S2, affinity=AWAY_S1_AZ), incoming(S2)], [0, 100]),
    "IS13": lambda: ([china_az1("n1"), india("n2"), china("n3"), china("n4"), india("n5"),
                      *on("n1", S1, times=2), *on("n2", S1), *on("n3", S1, times=2),
                      *on("n4", S1), *on("n5", S1), incoming(S1, affinity=BOTH)],
                     [100, 0, 100, 100, 0]),
    "IS14": lambda: ([china("n1"), az1("n2"), india("n3"), az2("n4"), *on("n1", S1),
                      *on("n2", S2), *on("n3", affinity=BOTH), *on("n4", affinity=AWAY_S1_AZ),
                      incoming(S1, affinity=BOTH)], [100, 0, 100, 0]),
    "IS15 all equal": lambda: ([china("n1"), china("n2"), *on("n1", S1),
                                *on("n2", affinity=BOTH), incoming(S1)], [0, 0]),
    "IS16": lambda: ([*NAMESPACES, china("n1"), india("n2"),
                      *on("n1", S1, times=2, ns="subteam1.team1"),
                      *on("n1", S1, ns="subteam1.team2"), *on("n2", S1, ns="subteam2.team1"),
                      incoming(S1, ns="subteam1.team1", affinity=AFF_NS)], [100, 0]),
    "IS17": lambda: ([*NAMESPACES, china("n1"), india("n2"),
                      *on("n1", S1, times=2, ns="subteam1.team1"),
                      *on("n1", S1, ns="subteam2.team2"), *on("n2", S1, ns="subteam2.team1"),
                      incoming(S1, ns="subteam1.team1", affinity=AFF_NS)], [100, 0]),
    "IS18": lambda: ([*NAMESPACES, china("n1"), india("n2"),
                      *on("n1", S1, times=2, ns="subteam1.team1"),
                      *on("n1", S1, ns="subteam1.team2"), *on("n2", S1, ns="subteam2.team1"),
                      incoming(S1, ns="subteam1.team1", affinity=ANTI_NS)], [0, 100]),
    "IS20": lambda: ([china("n1"), india("n2"), *on("n1", S1, affinity=BOTH),
                      *on("n2", S2, affinity=WITH_S2_RG), incoming(S2)], [0, 100]),
}

HARD_POD = rules([term(sel(In("service", "S1")), "region", ["default", "subteam2.team2"],
                       sel(In("team", "team1")))])
for _case, _ns, _expected in (("IH1", "default", [100, 100, 0]),
                              ("IH3", "subteam1.team2", [0, 0, 0]),
                              ("IH4", "subteam1.team1", [100, 100, 0]),
                              ("IH5", "subteam2.team2", [100, 100, 0])):
    AFFINITY_SCORE[_case] = lambda ns=_ns, expected=_expected: (
        [*NAMESPACES, *CIA, *on("n1", affinity=HARD_POD), *on("n2", affinity=HARD_POD),
         incoming({"service": "S1"}, ns=ns)], expected)


@pytest.mark.parametrize("case", sorted(AFFINITY_SCORE))
def test_kube_affinity_score(case: str) -> None:
    objects, expected = AFFINITY_SCORE[case]()
    ns = objects[-1]["metadata"]["namespace"]
    assert scores(objects, ns=ns) == [WEIGHT * score for score in expected]


def test_affinity_scores_are_normalised_over_the_candidates() -> None:
    """IS4 with only one China and one India node as candidates: still 100 and 0; with
    two China nodes only: all equal, all 0."""
    objects, _ = AFFINITY_SCORE["IS4 the lowest is not 0"]()
    assert scores(objects, ["n3", "n5"]) == [WEIGHT * 100, 0]
    assert scores(objects, ["n1", "n4"]) == [0, 0]


def hn(name: str, **labels: str) -> Obj:
    return nh(name, **labels)


def foo_at(**counts: int) -> list[Obj]:
    return pods_at(**counts)


def soft(max_skew: int, key: str, selector: dict | None, **extra: Any) -> dict:
    return spread(max_skew, key, selector, hard=False, **extra)


ABCD = [hn("a"), hn("b"), hn("c"), hn("d")]
ZONES4 = [hn("a", zone="zone1"), hn("b", zone="zone1"), hn("x", zone="zone2"),
          hn("y", zone="zone2")]

# objects, candidates (None: all nodes), expected normalised scores
SPREAD_SCORE: dict[str, Callable[[], tuple[list[Obj], list[str] | None, list[int]]]] = {
    "PS1": lambda: ([hn("a"), hn("b"), incoming(FOO, constraints=[soft(1, HOSTNAME, Ex_foo)])],
                    None, [100, 100]),
    "PS2 a failed node is no candidate": lambda: (
        [hn("a"), hn("b"), *foo_at(a=2, b=1),
         incoming(FOO, constraints=[soft(1, HOSTNAME, Ex_foo)])], ["a"], [100]),
    "PS3": lambda: ([hn("a"), hn("b"), *foo_at(a=1, b=1),
                     incoming(FOO, constraints=[soft(1, HOSTNAME, Ex_foo)])], None, [100, 100]),
    "PS4": lambda: ([*ABCD, *foo_at(a=2, b=1, d=3),
                     incoming(FOO, constraints=[soft(1, HOSTNAME, Ex_foo)])],
                    None, [20, 60, 100, 0]),
    "PS5 no selector": lambda: ([*ABCD, *foo_at(a=2, b=1, d=3),
                                 incoming(FOO, constraints=[soft(1, HOSTNAME, None)])],
                                None, [100, 100, 100, 100]),
    "PS6": lambda: ([*ABCD, *foo_at(a=2, b=1, d=3),
                     incoming(FOO, constraints=[soft(2, HOSTNAME, Ex_foo)])],
                    None, [33, 66, 100, 16]),
    "PS7": lambda: ([*ABCD, *foo_at(a=4, b=3, c=2, d=1),
                     incoming(FOO, constraints=[soft(3, HOSTNAME, Ex_foo)])],
                    None, [44, 66, 77, 100]),
    "PS9": lambda: ([hn("a"), hn("b"), hn("x"), hn("y"), *foo_at(a=4, b=2, x=1, y=3),
                     incoming(FOO, constraints=[soft(1, HOSTNAME, Ex_foo)])],
                    ["a", "b", "x"], [33, 83, 100]),
    "PS10 a candidate without the key": lambda: (
        [hn("a"), n("b", n="b"), hn("x"), hn("y"), *foo_at(a=4, b=2, x=1, y=3),
         incoming(FOO, constraints=[soft(1, HOSTNAME, Ex_foo)])],
        ["a", "b", "x"], [16, 0, 100]),
    "PS11 pods of failed nodes count in their zone": lambda: (
        [*ZONES4, *foo_at(a=4, b=2, x=1, y=3),
         incoming(FOO, constraints=[soft(1, "zone", Ex_foo)])],
        ["a", "b", "x"], [75, 75, 100]),
    "PS12": lambda: ([*ZONES4, *foo_at(a=2, b=1, x=2, y=4), incoming(FOO, constraints=[
        soft(1, "zone", Ex_foo), soft(1, HOSTNAME, Ex_foo)])], ["a", "x"], [100, 63]),
    "PS13": lambda: ([*ZONES4, *on("a", FOO), *on("b", FOOBAR), *on("y", FOO), *on("y", BAR),
                      incoming(FOOBAR, constraints=[soft(1, "zone", Ex_foo),
                                                    soft(1, HOSTNAME, Ex_bar)])],
                     None, [60, 20, 100, 60]),
    "PS14": lambda: ([*ZONES4, *on("b", BAR), *on("x", FOO), *on("y", FOOBAR),
                      incoming(FOOBAR, constraints=[soft(1, "zone", Ex_foo),
                                                    soft(1, HOSTNAME, Ex_bar)])],
                     None, [100, 60, 40, 0]),
    "PS15": lambda: ([*ZONES4, *on("a", FOO), *on("b", FOOBAR), *on("y", FOO), *on("y", BAR),
                      incoming(FOOBAR, constraints=[soft(1, "zone", Ex_foo),
                                                    soft(1, HOSTNAME, Ex_bar)])],
                     ["a", "b", "x"], [50, 25, 100]),
    "PS16 other namespaces do not count": lambda: (
        [hn("a"), hn("b"), *on("a", FOO, ns="ns1"), *foo_at(a=1, b=2),
         incoming(FOO, constraints=[soft(1, HOSTNAME, Ex_foo)])], None, [100, 33]),
    "PS17 terminating pods do not count": lambda: (
        [hn("a"), hn("b"), *on("a", FOO, terminating=True), *foo_at(b=1),
         incoming(FOO, constraints=[soft(1, HOSTNAME, Ex_foo)])], None, [100, 0]),
    "PS19 nodeAffinityPolicy Honor": lambda: (
        [n("a", node="a", foo=""), n("b", node="b", foo=""), n("c", node="c"),
         *foo_at(a=2, b=1, c=1),
         incoming(FOO, node_selector=FOO, constraints=[soft(1, "node", Ex_foo)])],
        None, [0, 33, 100]),
    "PS19 nodeAffinityPolicy Ignore": lambda: (
        [n("a", node="a", foo=""), n("b", node="b", foo=""), n("c", node="c"),
         *foo_at(a=2, b=1, c=1),
         incoming(FOO, node_selector=FOO,
                  constraints=[soft(1, "node", Ex_foo, nodeAffinityPolicy="Ignore")])],
        None, [66, 100, 100]),
    "PS20 nodeTaintsPolicy Honor": lambda: (
        [n("a", node="a"), n("b", node="b"),
         node("c", labels={"node": "c"}, taints=[UNSCHEDULABLE_TAINT]),
         *foo_at(a=2, b=1, c=1),
         incoming(FOO, constraints=[soft(1, "node", Ex_foo, nodeTaintsPolicy="Honor")])],
        None, [0, 33, 100]),
    "PS20 nodeTaintsPolicy Ignore": lambda: (
        [n("a", node="a"), n("b", node="b"),
         node("c", labels={"node": "c"}, taints=[UNSCHEDULABLE_TAINT]),
         *foo_at(a=2, b=1, c=1), incoming(FOO, constraints=[soft(1, "node", Ex_foo)])],
        None, [66, 100, 100]),
    "PS21 matchLabelKeys": lambda: (
        [hn("a", zone="zone1"), hn("b", zone="zone1"), hn("c", zone="zone2"),
         hn("d", zone="zone2"), *on("a", FOO), *on("b", FOOBAR), *on("c", FOO), *on("c", BAR),
         incoming(FOOBAR, constraints=[soft(1, "zone", {}, matchLabelKeys=["foo"]),
                                       soft(1, HOSTNAME, {}, matchLabelKeys=["bar"])])],
        None, [60, 20, 60, 100]),
}


@pytest.mark.parametrize("case", sorted(SPREAD_SCORE))
def test_kube_spread_score(case: str) -> None:
    objects, candidates, expected = SPREAD_SCORE[case]()
    assert scores(objects, candidates) == [WEIGHT * score for score in expected]


def test_only_schedule_anyway_constraints_score() -> None:
    """A pod with only DoNotSchedule constraints gets no spread score (and vice versa:
    ScheduleAnyway ones refuse no node)."""
    objects = [*ABCD, *foo_at(a=2, b=1, d=3),
               incoming(FOO, constraints=[c(1, HOSTNAME, Ex_foo)])]
    assert scores(objects) == [0, 0, 0, 0]
    objects[-1] = incoming(FOO, constraints=[soft(1, HOSTNAME, Ex_foo)])
    assert verdicts(objects) == dict.fromkeys("abcd", OK)


def test_a_weight_of_0_turns_its_scorer_off() -> None:
    objects, _ = AFFINITY_SCORE["IS2"]()
    text = SCORE_CONF.replace(f"podaffinity.weight: {WEIGHT}", "podaffinity.weight: 0")
    session = open_session(objects, text)
    assert session.plugins["nodeorder"].batch_node_order(
        _task(session, "p"), session.node_list) == {"n1": 0.0, "n2": 0.0, "n3": 0.0}


# --------------------------------------------------------------------------- sessions

SESSION_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates%s}, {name: nodeorder%s}]
"""


def session_conf(predicates: str = "", nodeorder: str = "") -> str:
    return SESSION_CONF % (f", arguments: {{{predicates}}}" if predicates else "",
                           f", arguments: {{{nodeorder}}}" if nodeorder else "")


def replicas(app: str, count: int, *, affinity: dict | None = None,
             constraints: list[dict] | None = None, created: int = 0, **args: Any) -> list[Obj]:
    """A Deployment's pods (each its own job), created one second apart."""
    return [incoming({"app": app}, affinity=affinity, constraints=constraints,
                     name=f"{app}-{i}", owner_kind="ReplicaSet",
                     creation=f"2026-01-01T00:{(created + i) // 60:02d}:{(created + i) % 60:02d}Z",
                     **args) for i in range(count)]


def hostname_anti(app: str) -> dict:
    return rules(anti=[term(sel(app=app), HOSTNAME)])


def test_replicas_placed_earlier_in_the_session_keep_the_next_away() -> None:
    objects = [nh("n0"), nh("n1"), nh("n2"), *replicas("web", 5, affinity=hostname_anti("web"))]
    report = simulate(objects, session_conf())
    assert sorted(report["binds"].values()) == ["n0", "n1", "n2"]
    message = "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    assert len(report["pending"]) == 2
    assert all(reasons == [message] for reasons in report["pending"].values())


def test_turning_the_filter_off_lets_replicas_share_a_node() -> None:
    objects = [nh("n0"), nh("n1"), nh("n2"), *replicas("web", 5, affinity=hostname_anti("web"))]
    report = simulate(objects, session_conf("predicate.PodAffinityEnable: false"))
    assert len(report["binds"]) == 5 and not report["pending"]


def _zone_counts(report: dict, zones: dict[str, str]) -> Counter:
    return Counter(zones[node_name] for node_name in report["binds"].values())


@pytest.mark.parametrize("count", [5, 9, 10])
def test_zone_spread_evens_out_zones_of_uneven_sizes(count: int) -> None:
    """Zones of 3, 1 and 2 nodes: without the constraint the pods go by the scores
    (here packed by most-requested); with it, zones differ by at most maxSkew."""
    zones = {"a0": "a", "a1": "a", "a2": "a", "b0": "b", "c0": "c", "c1": "c"}
    nodes = [nh(name, zone=zone) for name, zone in zones.items()]
    packing = "leastrequested.weight: 0, balancedresource.weight: 0, mostrequested.weight: 1"
    constraint = [spread(1, "zone", sel(app="web"))]
    report = simulate([*nodes, *replicas("web", count, constraints=constraint)],
                      session_conf(nodeorder=packing))
    counts = _zone_counts(report, zones)
    assert len(report["binds"]) == count
    assert max(counts[z] for z in "abc") - min(counts[z] for z in "abc") <= 1
    packed = simulate([*nodes, *replicas("web", count)], session_conf(nodeorder=packing))
    assert max(_zone_counts(packed, zones).values()) == count  # (the constraint mattered)


def test_a_group_drawn_to_itself_lands_in_one_zone_and_followers_join_it() -> None:
    """The first replica passes by the first-pod rule; the others must follow it into
    its zone; a second Deployment drawn to the first joins that zone too."""
    zones = {"a0": "a", "a1": "a", "b0": "b", "b1": "b", "c0": "c"}
    nodes = [nh(name, zone=zone) for name, zone in zones.items()]
    cache = replicas("cache", 4, affinity=rules([term(sel(app="cache"), "zone")]))
    web = replicas("web", 3, affinity=rules([term(sel(app="cache"), "zone")]), created=30)
    report = simulate([*nodes, *cache, *web], session_conf())
    assert len(report["binds"]) == 7
    assert len(set(_zone_counts(report, zones))) == 1


def test_followers_without_a_leader_wait_as_unresolvable() -> None:
    nodes = [nh("a0", zone="a"), nh("b0", zone="b")]
    web = replicas("web", 2, affinity=rules([term(sel(app="cache"), "zone")]))
    report = simulate([*nodes, *web], session_conf())
    assert not report["binds"]
    message = "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
    assert all(reasons == [message] for reasons in report["pending"].values())


def test_a_gang_rolled_back_leaves_no_trace_in_the_counts() -> None:
    """A gang of 3 that keeps its pods a node apart cannot be placed on 2 nodes: its
    statement is discarded. A pod keeping away from it, tried next, may then go on
    either node (were the gang's tentative placements still counted, neither would do)."""
    nodes = [nh("n0"), nh("n1")]
    gang_pods = [podgroup("g", 3, creation="2026-01-01T00:00:00Z")]
    gang_pods += [pod(f"g-{i}", group="g", labels={"app": "g"}, affinity=hostname_anti("g"),
                      creation="2026-01-01T00:00:00Z") for i in range(3)]
    solo = incoming({"app": "solo"}, name="solo", affinity=hostname_anti("g"),
                    creation="2026-01-01T00:00:05Z")
    report = simulate([*nodes, *gang_pods, solo], session_conf())
    assert list(report["binds"]) == ["default/solo"]
    assert report["pending"]["default/g-2"][0] == (
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.")
    tried = [report["pending"][f"default/g-{i}"][0] for i in range(2)]  # (one per node)
    assert all("can possibly be assigned to" in line for line in tried)
    assert {line.split()[-5] for line in tried} == {"n0,", "n1,"}


def test_preferred_anti_affinity_spreads_what_most_requested_would_pack() -> None:
    nodes = [nh("n0"), nh("n1"), nh("n2")]
    packing = "leastrequested.weight: 0, balancedresource.weight: 0, mostrequested.weight: 1"
    away = rules(preferred_anti=[(100, term(sel(app="web"), HOSTNAME))])
    spread_out = simulate([*nodes, *replicas("web", 3, affinity=away)],
                          session_conf(nodeorder=packing))
    assert sorted(spread_out["binds"].values()) == ["n0", "n1", "n2"]
    packed = simulate([*nodes, *replicas("web", 3)], session_conf(nodeorder=packing))
    assert len(set(packed["binds"].values())) == 1


def test_preferred_affinity_draws_pods_to_the_zone_of_their_peers() -> None:
    zones = {"a0": "a", "b0": "b", "b1": "b"}
    nodes = [nh(name, zone=zone) for name, zone in zones.items()]
    near = rules(preferred=[(100, term(sel(app="db"), "zone"))])
    report = simulate([*nodes, *on("a0", {"app": "db"}),
                       *replicas("web", 3, affinity=near, cpu="100m")], session_conf())
    assert set(report["binds"].values()) == {"a0"}


def test_schedule_anyway_spread_prefers_the_emptier_zone() -> None:
    zones = {"a0": "a", "a1": "a", "b0": "b"}
    nodes = [nh(name, zone=zone) for name, zone in zones.items()]
    constraint = [spread(1, "zone", sel(app="web"), hard=False)]
    report = simulate([*nodes, *on("a0", {"app": "web"}), *on("a1", {"app": "web"}),
                       *replicas("web", 1, constraints=constraint)], session_conf())
    assert report["binds"] == {"default/web-0": "b0"}


# --------------------------------------------------------------------------- preempt, reclaim

PRIORITIES = [priority_class("high", 1000), priority_class("low", 10)]


def _low_db(node_name: str, **args: Any) -> list[Obj]:
    return [podgroup("db", 1, phase="Running", priority_class="low", **args),
            pod("db-0", group="db", node_name=node_name, labels={"app": "db"},
                priority_class="low", **args)]


@pytest.mark.parametrize("own", [True, False], ids=["its-anti-affinity", "the-victims"])
def test_preempt_evicts_the_pod_an_anti_affinity_refuses(own: bool) -> None:
    """One node with room: the high-priority pod is kept off only by anti-affinity (its
    own, or the running pod's), a resolvable refusal: preempt evicts the low pod."""
    if own:
        victim = _low_db("n1")
        preemptor = pod("web", priority_class="high", labels={"app": "web"},
                        affinity=rules(anti=[term(sel(app="db"), HOSTNAME)]))
    else:
        victim = _low_db("n1")
        victim[1]["spec"]["affinity"] = rules(anti=[term(sel(app="web"), HOSTNAME)])
        preemptor = pod("web", priority_class="high", labels={"app": "web"})
    report = simulate([*PRIORITIES, nh("n1"), *victim, preemptor], PREEMPT_CONF, sessions=2)
    assert [(e["pod"], e["for"]) for e in report["evictions"]] == [("default/db-0",
                                                                     "default/web")]
    assert report["binds"] == {"default/web": "n1"}


# preempt with no queue plugin: only priority and the predicates decide
PRIORITY_PREEMPT_CONF = """
actions: "allocate, backfill, preempt"
tiers:
- plugins: [{name: priority}, {name: gang, enablePreemptable: false}, {name: conformance}]
- plugins: [{name: predicates}, {name: nodeorder}]
"""


@pytest.mark.parametrize("drawn", [False, True], ids=["control", "missing-affinity"])
def test_a_missing_required_affinity_never_evicts(drawn: bool) -> None:
    """A node full of low-priority pods and a high-priority pod that needs the room:
    preempt evicts one (control); the same pod drawn to a pod that is nowhere is refused
    by the node unresolvably, so preempt evicts nothing."""
    victims = [podgroup("fill", 1, phase="Running", priority_class="low"),
               *(pod(f"fill-{i}", cpu="4", group="fill", node_name="n1", priority_class="low",
                     labels={"app": "fill"}) for i in range(2))]
    preemptor = pod("web", cpu="4", priority_class="high",
                    affinity=rules([term(sel(app="cache"), HOSTNAME)]) if drawn else None)
    objects = [*PRIORITIES, nh("n1"), *victims, preemptor]
    report = simulate(objects, PRIORITY_PREEMPT_CONF, sessions=2)
    if not drawn:
        assert [e["for"] for e in report["evictions"]] == ["default/web"]
        return
    assert report["evictions"] == [] and report["binds"] == {}
    assert verdicts(objects, name="web") == {"n1": AFF}


def _reclaim_scene(fill: bool) -> list[Obj]:
    """Queue qa runs db-0 (app=db) on the only node, with fill-0 beside it (`fill`) or
    db-0 taking the whole node; web, of queue qb, keeps away from app=db."""
    objects = [*PRIORITIES, queue("qa", reclaimable=True), queue("qb", reclaimable=True),
               nh("n1"), *_low_db("n1", queue="qa")]
    objects[-1]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1" if fill else "8"
    if fill:
        objects += [podgroup("fill", 1, phase="Running", priority_class="low", queue="qa"),
                    pod("fill-0", cpu="7", group="fill", node_name="n1", priority_class="low",
                        queue="qa")]
    return [*objects, pod("web", queue="qb", labels={"app": "web"},
                          affinity=rules(anti=[term(sel(app="db"), HOSTNAME)]))]


def test_reclaim_evicts_the_pod_an_anti_affinity_refuses() -> None:
    """The node refuses web for its anti-affinity and for room, both resolvable: reclaim
    evicts db-0 and web is bound there next session."""
    report = simulate(_reclaim_scene(fill=False), RECLAIM_CONF, sessions=2)
    assert [(e["pod"], e["action"]) for e in report["evictions"]] == [("default/db-0",
                                                                       "reclaim")]
    assert report["binds"] == {"default/web": "n1"}


def test_reclaim_evicts_the_anti_affinity_pod_beside_a_bigger_victim() -> None:
    """fill-0 comes first in eviction order and would free room enough, but web's
    anti-affinity still refuses the node: victims are taken until every predicate
    passes, and the reprieve drops fill-0, which is not needed once db-0 goes."""
    report = simulate(_reclaim_scene(fill=True), RECLAIM_CONF, sessions=2)
    assert [e["pod"] for e in report["evictions"]] == ["default/db-0"]
    assert report["binds"] == {"default/web": "n1"}


def test_preempt_evicts_the_anti_affinity_pod_beside_a_bigger_victim() -> None:
    """Preempt's scene of the case above: victims are taken until every predicate passes;
    the plan keeps only db-0 (fill-0 is not needed once db-0 goes)."""
    objects = [obj for obj in _reclaim_scene(fill=True) if obj["kind"] != "Queue"]
    for obj in objects:
        obj.get("spec", {}).pop("queue", None)
        obj["metadata"].get("annotations", {}).pop("scheduling.volcano.sh/queue-name", None)
    objects[-1]["spec"]["priorityClassName"] = "high"
    report = simulate(objects, PRIORITY_PREEMPT_CONF, sessions=2)
    assert [e["pod"] for e in report["evictions"]] == ["default/db-0"]
    assert report["binds"] == {"default/web": "n1"}
