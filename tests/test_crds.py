"""The chart's CRDs serve what Volcano's own CRDs serve.

VOLCANO below is read off volcano-sh/volcano v1.15.1 (unchanged in v1.16.0-alpha.1),
`config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml`, `..._queues.yaml` and
`topology.volcano.sh_hypernodes.yaml` (the same as `installer/helm/chart/volcano/crd/
bases/`): what a cluster with Volcano installed serves. A user who installs the chart's
CRDs instead, or the stand-in that serves them in the tests, must see the same: `kubectl
get pg` prints the same columns, a PodGroup's status has no subresource of its own, and a
HyperNode Volcano refuses is refused by the chart's CRD too.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from tests.apiserver import CHART_CRDS, crd_resources, load_crd
from vscheduler.objects import BadObject, parse_hypernode

VOLCANO = {
    "PodGroup": {
        "name": "podgroups.scheduling.volcano.sh", "group": "scheduling.volcano.sh",
        "versions": ["v1beta1"], "scope": "Namespaced", "plural": "podgroups",
        "singular": "podgroup", "listKind": "PodGroupList",
        "shortNames": ["pg", "podgroup-v1beta1"], "subresources": {},
        "columns": [("STATUS", "string", ".status.phase", 0),
                    ("minMember", "integer", ".spec.minMember", 0),
                    ("RUNNINGS", "integer", ".status.running", 0),
                    ("AGE", "date", ".metadata.creationTimestamp", 0),
                    ("QUEUE", "string", ".spec.queue", 1)],
        # fields vscheduler reads, with their types in Volcano's schema
        "spec": {"minMember": "integer", "minTaskMember": "object",
                 "minResources": "object", "queue": "string",
                 "priorityClassName": "string"},
        "status": {"phase": "string", "conditions": "array", "running": "integer",
                   "succeeded": "integer", "failed": "integer"},
    },
    "Queue": {
        "name": "queues.scheduling.volcano.sh", "group": "scheduling.volcano.sh",
        "versions": ["v1beta1"], "scope": "Cluster", "plural": "queues",
        "singular": "queue", "listKind": "QueueList", "shortNames": ["q", "queue-v1beta1"],
        "subresources": {"status": {}},
        "columns": [("PARENT", "string", ".spec.parent", 0)],
        "spec": {"weight": "integer", "capability": "object", "deserved": "object",
                 "guarantee": "object", "reclaimable": "boolean", "priority": "integer",
                 "parent": "string"},
        "status": {"state": "string", "allocated": "object"},
    },
    "HyperNode": {
        "name": "hypernodes.topology.volcano.sh", "group": "topology.volcano.sh",
        "versions": ["v1alpha1"], "scope": "Cluster", "plural": "hypernodes",
        "singular": "hypernode", "listKind": "HyperNodeList", "shortNames": ["hn"],
        "subresources": {"status": {}},
        # (Tier is a string column in Volcano's, though spec.tier is an integer)
        "columns": [("Tier", "string", ".spec.tier", 0),
                    ("TierName", "string", ".spec.tierName", 0),
                    ("NodeCount", "integer", ".status.nodeCount", 0),
                    ("Age", "date", ".metadata.creationTimestamp", 0)],
        "spec": {"tier": "integer", "tierName": "string", "members": "array"},
        "status": {"conditions": "array", "nodeCount": "integer"},
    },
}

# Volcano's validation of a HyperNode's spec, as its CRD declares it: the schema's
# constraints by path (`[]` for an array's items), and the CEL rules on a member's selector.
VOLCANO_HYPERNODE_SPEC = {
    "": {"required": ["tier"]},
    "tier": {"type": "integer", "minimum": 0},
    "tierName": {"type": "string", "maxLength": 253},
    "members": {"type": "array", "minItems": 1},
    "members[]": {"type": "object", "required": ["type"]},
    "members[].type": {"type": "string", "enum": ["Node", "HyperNode"]},
    "members[].selector.exactMatch": {"type": "object", "required": ["name"]},
    "members[].selector.exactMatch.name": {
        "type": "string", "minLength": 1, "maxLength": 253,
        "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"},
    "members[].selector.regexMatch": {"type": "object", "required": ["pattern"]},
    "members[].selector.regexMatch.pattern": {"type": "string", "minLength": 1},
    "members[].selector.labelMatch": {"type": "object", "x-kubernetes-map-type": "atomic"},
    "members[].selector.labelMatch.matchLabels": {"type": "object"},
    "members[].selector.labelMatch.matchExpressions": {"type": "array",
                                                       "x-kubernetes-list-type": "atomic"},
    "members[].selector.labelMatch.matchExpressions[]": {"required": ["key", "operator"]},
}
VOLCANO_SELECTOR_RULES = [
    "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)",
    "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + "
    "(has(self.labelMatch) ? 1 : 0) <= 1",
]
VOLCANO_CONDITION_REQUIRED = ["lastTransitionTime", "message", "reason", "status", "type"]


CHART = Path(__file__).resolve().parent.parent / "charts" / "vscheduler"


def _chart_crds() -> dict[str, dict]:
    """The chart's CRDs as Helm renders them (crds.install on)."""
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render({"crds": {"install": True}}, name="vs", namespace="vs")
    crds = [doc for path, text in rendered.items() if "/crds/" in path
            for doc in yaml.safe_load_all(text) if doc]
    return {crd["spec"]["names"]["kind"]: crd for crd in crds}


@pytest.mark.parametrize("kind", sorted(VOLCANO))
def test_chart_crd_serves_what_volcanos_serves(kind: str) -> None:
    want = VOLCANO[kind]
    crd = _chart_crds()[kind]
    spec, names = crd["spec"], crd["spec"]["names"]
    assert crd["metadata"]["name"] == want["name"]
    assert (spec["group"], spec["scope"]) == (want["group"], want["scope"])
    assert (names["plural"], names["singular"], names["listKind"], names["shortNames"]) \
        == (want["plural"], want["singular"], want["listKind"], want["shortNames"])
    assert [v["name"] for v in spec["versions"] if v["served"]] == want["versions"]
    [version] = spec["versions"]
    assert version["subresources"] == want["subresources"]
    columns = [(c["name"], c["type"], c["jsonPath"], c.get("priority", 0))
               for c in version["additionalPrinterColumns"]]
    assert columns == want["columns"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    for part in ("spec", "status"):
        declared = schema[part]["properties"]
        for field, kind_of in want[part].items():
            assert declared[field]["type"] == kind_of, f"{part}.{field}"


def test_the_stand_in_serves_the_chart_crds_as_declared() -> None:
    # (read from the chart's files as the stand-in reads them, template lines dropped)
    served = {r.kind: r for path in CHART_CRDS for r in crd_resources(load_crd(path))}
    assert served["PodGroup"].subresources == ()
    assert served["Queue"].subresources == ("status",)
    assert [c["name"] for c in served["PodGroup"].printer_columns] == [
        c[0] for c in VOLCANO["PodGroup"]["columns"]]
    assert served["PodGroup"].short_names == ("pg", "podgroup-v1beta1")
    assert served["HyperNode"].subresources == ("status",)
    assert not served["HyperNode"].namespaced
    assert served["HyperNode"].short_names == ("hn",)
    assert [c["name"] for c in served["HyperNode"].printer_columns] == [
        c[0] for c in VOLCANO["HyperNode"]["columns"]]


def _hypernode_schema() -> dict:
    [version] = _chart_crds()["HyperNode"]["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def _at(schema: dict, path: str) -> dict:
    """The schema node at `path` (`a.b`, `[]` for an array's items) under `schema`."""
    for part in re.findall(r"[^.\[\]]+|\[\]", path):
        schema = schema["items"] if part == "[]" else schema["properties"][part]
    return schema


def test_the_hypernode_crd_validates_as_volcanos_does() -> None:
    schema = _hypernode_schema()
    spec = schema["properties"]["spec"]
    for path, want in VOLCANO_HYPERNODE_SPEC.items():
        node = _at(spec, path) if path else spec
        assert {key: node.get(key) for key in want} == want, path
    selector = _at(spec, "members[].selector")
    assert [v["rule"] for v in selector["x-kubernetes-validations"]] == VOLCANO_SELECTOR_RULES
    assert set(selector["properties"]) == {"exactMatch", "regexMatch", "labelMatch"}
    status = schema["properties"]["status"]
    assert _at(status, "conditions[]")["required"] == VOLCANO_CONDITION_REQUIRED
    assert _at(status, "conditions[].status")["enum"] == ["True", "False", "Unknown"]
    assert _at(status, "nodeCount")["minimum"] == 0


SELECTOR_WAYS = ("exactMatch", "labelMatch", "regexMatch")


def _selector_rules_hold(selector: dict, rules: list[str]) -> bool:
    """The CRD's CEL rules evaluated on `selector`. They use only `has(self.<field>)`,
    `||`, `c ? 1 : 0`, `+` and `<=`, which read the same in Python once `has` and the
    conditional are spelt the Python way; anything else in a rule fails the test."""
    for rule in rules:
        python = re.sub(r"has\(self\.(\w+)\)", r"('\1' in selector)", rule)
        python = re.sub(r"(\('\w+' in selector\)) \? 1 : 0", r"(1 if \1 else 0)", python)
        python = python.replace("||", " or ")
        words = set(re.findall(r"[A-Za-z_]+", python))
        assert words <= {"in", "selector", "if", "else", "or", *SELECTOR_WAYS}, rule
        if not eval(python, {"__builtins__": {}}, {"selector": selector}):
            return False
    return True


def test_the_crd_and_the_parser_agree_on_which_selectors_are_valid() -> None:
    """Every combination of selector fields: the CRD's CEL rules accept a selector
    exactly when vscheduler's parser reads it (exactly one way of choosing members)."""
    rules = [v["rule"] for v in _at(_hypernode_schema()["properties"]["spec"],
                                     "members[].selector")["x-kubernetes-validations"]]
    ways = {"exactMatch": {"name": "n1"}, "regexMatch": {"pattern": "^n"},
            "labelMatch": {"matchLabels": {"rack": "r1"}}}
    assert sorted(ways) == sorted(SELECTOR_WAYS)
    for count in range(len(ways) + 1):
        for chosen in itertools.combinations(sorted(ways), count):
            selector = {key: ways[key] for key in chosen}
            obj = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                   "metadata": {"name": "s0"},
                   "spec": {"tier": 1, "members": [{"type": "Node", "selector": selector}]}}
            try:
                parse_hypernode(obj)
                parsed = True
            except BadObject:
                parsed = False
            assert _selector_rules_hold(selector, rules) is parsed is (count == 1), chosen
