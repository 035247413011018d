"""The chart's CRDs serve what Volcano's own CRDs serve.

VOLCANO below is read off volcano-sh/volcano v1.15.1 (unchanged in v1.16.0-alpha.1),
`config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml` and `..._queues.yaml`
(the same as `installer/helm/chart/volcano/crd/bases/`): what a cluster with Volcano
installed serves. A user who installs the chart's CRDs instead, or the stand-in that
serves them in the tests, must see the same: `kubectl get pg` prints the same columns,
and a PodGroup's status has no subresource of its own.
"""

from __future__ import annotations

from pathlib import Path

import helm_python as helm
import pytest
import yaml

from tests.apiserver import CHART_CRDS, crd_resources, load_crd

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
}


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
