"""The Helm chart in charts/vscheduler: rendered with Helm's own engine (helm-python-sdk,
Helm as a library, no cluster), every manifest validated against the Kubernetes OpenAPI
schemas that kubernetes-validate ships, and the content that matters checked: RBAC verbs,
daemon flags, the conf, replicas and leader election, the CRDs, the Grafana dashboard and
the alerts (every metric they name is one the daemon registers). The real `helm` binary
(Helm v4, what users run) lints every scenario strictly and renders each one exactly as
the library does, so the checks here hold for `helm template` and `helm install`."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.binaries import binary

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "vscheduler"
RELEASE = "vs"
NAMESPACE = "vscheduler-system"

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion; also the oldest schema
# kubernetes-validate ships) and the newest schema it ships.
KUBE_VERSIONS = ("1.25", kubernetes_validate.latest_version())
# Kinds defined by CRDs of other projects: no schema in kubernetes-validate. Each is
# checked by hand below instead.
FOREIGN_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"),
                 ("monitoring.coreos.com/v1", "PrometheusRule")}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}

SCENARIOS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "no-leader-election": {"leaderElect": False},
    "service-monitor": {"serviceMonitor": {"enabled": True}},
    "crds": {"crds": {"install": True}},
    "dashboard-and-alerts": {"grafanaDashboard": {"enabled": True},
                             "prometheusRule": {"enabled": True}},
    "everything-on": {"crds": {"install": True}, "serviceMonitor": {"enabled": True},
                      "grafanaDashboard": {"enabled": True, "labels": {"team": "batch"}},
                      "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
                      "rbac": {"coschedulingPodGroups": True}, "restartOnConfChange": True,
                      "podAntiAffinity": "hard", "replicas": 3},
    "everything-off": {"leaderElect": False, "enableMetrics": False,
                       "enableHealthz": False, "podAntiAffinity": "none",
                       "priorityClassName": "", "rbac": {"create": False},
                       "serviceAccount": {"create": False, "name": "existing"}},
}

# The ClusterRole the brief allows, as (apiGroup, resource, verb).
CLUSTER_GRANTS = {
    *(("", "pods", verb) for verb in ("get", "list", "watch", "delete")),
    *(("", "pods/status", verb) for verb in ("patch", "update")),
    ("", "pods/binding", "create"),
    *(("", "nodes", verb) for verb in ("get", "list", "watch")),
    # Namespaces' labels: a pod affinity term's namespaceSelector matches them.
    *(("", "namespaces", verb) for verb in ("get", "list", "watch")),
    *((group, "events", verb) for group in ("", "events.k8s.io")
      for verb in ("create", "patch")),
    *(("scheduling.k8s.io", "priorityclasses", verb) for verb in ("get", "list", "watch")),
    *(("scheduling.volcano.sh", kind, verb) for kind in ("podgroups", "queues")
      for verb in ("get", "list", "watch")),
    *(("scheduling.volcano.sh", f"{kind}/status", verb) for kind in ("podgroups", "queues")
      for verb in ("update", "patch")),
    # Volcano's PodGroup CRD has no status subresource: status is patched on the object.
    ("scheduling.volcano.sh", "podgroups", "patch"),
    # fairshare's usage history, an annotation on the Queue
    ("scheduling.volcano.sh", "queues", "patch"),
    *(("policy", "poddisruptionbudgets", verb) for verb in ("get", "list", "watch")),
    # Volcano's network topology: read only (its controllers or an administrator write it).
    *(("topology.volcano.sh", "hypernodes", verb) for verb in ("get", "list", "watch")),
}
LEASE_GRANTS = {("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")}


# --------------------------------------------------------------------------- rendering


@pytest.fixture(scope="module")
def chart() -> Iterator[helm.Chart]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: helm.Chart, values: dict[str, Any] | None = None) -> dict[str, str]:
    """Template path -> rendered text, as `helm template` would print it."""
    return chart.render(copy.deepcopy(values or {}), name=RELEASE, namespace=NAMESPACE)


def manifests(chart: helm.Chart, values: dict[str, Any] | None = None) -> list[dict]:
    objects = []
    for path, text in sorted(render(chart, values).items()):
        if path.endswith(".yaml"):
            objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def only(objects: list[dict], kind: str) -> dict:
    found = [obj for obj in objects if obj["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def kinds(objects: list[dict]) -> list[str]:
    return sorted(obj["kind"] for obj in objects)


def container(objects: list[dict]) -> dict:
    containers = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def flags(objects: list[dict]) -> dict[str, list[str]]:
    """--flag=value arguments as flag -> values (a repeated flag has several)."""
    parsed: dict[str, list[str]] = {}
    for arg in container(objects)["args"]:
        assert arg.startswith("--") and "=" in arg, f"not --flag=value: {arg!r}"
        flag, value = arg.split("=", 1)
        parsed.setdefault(flag, []).append(value)
    return parsed


def grants(role: dict) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for rule in role["rules"]
            for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


# --------------------------------------------------------------------------- validity


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_manifest_validates_against_the_kubernetes_schemas(
        chart: helm.Chart, scenario: str) -> None:
    objects = manifests(chart, SCENARIOS[scenario])
    assert objects
    for obj in objects:
        name = f"{scenario}: {obj['kind']}/{obj['metadata']['name']}"
        if (obj["apiVersion"], obj["kind"]) in FOREIGN_KINDS:
            continue  # no schema shipped; test_service_monitor checks it
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as err:
                path = ".".join(str(part) for part in err.path)
                pytest.fail(f"{name} invalid for Kubernetes {version} at {path}: {err.message}")
            except kubernetes_validate.SchemaNotFoundError as err:
                pytest.fail(f"{name}: {err.message}")
        if obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in obj["metadata"], name
        else:
            assert obj["metadata"]["namespace"] == NAMESPACE, name
        assert obj["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE, name


def test_the_validator_does_reject_a_bad_manifest(chart: helm.Chart) -> None:
    """Guards the test above: strict validation catches a misspelt field."""
    deployment = only(manifests(chart), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSIONS[0], strict=True)


def test_default_objects(chart: helm.Chart) -> None:
    assert kinds(manifests(chart)) == [
        "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment",
        "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount"]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_helm_lint_finds_nothing(scenario: str) -> None:
    report = helm.lint(CHART, copy.deepcopy(SCENARIOS[scenario]), strict=True,
                       namespace=NAMESPACE, kube_version=f"v{KUBE_VERSIONS[0]}.0")
    assert report["errors"] == []
    # Severity 1 is information ("icon is recommended"); warnings and errors fail.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_values_schema_rejects_mistakes(chart: helm.Chart) -> None:
    for bad in ({"schedulePeriod": "3 seconds"}, {"leaderElect": "yes"},
                {"replicas": "two"}, {"schedulerNames": []}, {"listenAddress": "8080"},
                {"podAntiAffinity": "sometimes"}, {"leaderElection": {"leaseDuration": 15}},
                {"leaderElct": False}):
        with pytest.raises(helm.HelmValuesError):
            render(chart, bad)


# --------------------------------------------------------------------------- RBAC


def test_cluster_role_grants_exactly_what_the_scheduler_needs(chart: helm.Chart) -> None:
    objects = manifests(chart)
    role = only(objects, "ClusterRole")
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule
    assert grants(role) == CLUSTER_GRANTS
    binding = only(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": role["metadata"]["name"]}
    account = only(objects, "ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "namespace": NAMESPACE,
                                    "name": account["metadata"]["name"]}]
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]


def test_leases_are_a_namespaced_role(chart: helm.Chart) -> None:
    objects = manifests(chart)
    role = only(objects, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role) == LEASE_GRANTS
    binding = only(objects, "RoleBinding")
    assert binding["roleRef"]["kind"] == "Role"
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert flags(objects)["--lock-object-namespace"] == [NAMESPACE]
    # Without leader election there is no lease to hold.
    assert "Role" not in kinds(manifests(chart, {"leaderElect": False}))


def test_coscheduling_podgroups_are_opt_in(chart: helm.Chart) -> None:
    role = only(manifests(chart, {"rbac": {"coschedulingPodGroups": True}}), "ClusterRole")
    extra = grants(role) - CLUSTER_GRANTS
    assert extra == {(group, resource, verb)
                     for group in ("scheduling.x-k8s.io",)
                     for resource, verbs in (("podgroups", ("get", "list", "watch")),
                                             ("podgroups/status", ("update", "patch")))
                     for verb in verbs}


def test_rbac_off_renders_none(chart: helm.Chart) -> None:
    objects = manifests(chart, SCENARIOS["everything-off"])
    assert not {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                "ServiceAccount"} & set(kinds(objects))
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "existing"


# --------------------------------------------------------------------------- the daemon


def test_default_flags(chart: helm.Chart) -> None:
    objects = manifests(chart)
    main = container(objects)
    assert main["command"] == ["vscheduler", "run"]
    assert flags(objects) == {
        "--scheduler-conf": ["/etc/vscheduler/volcano-scheduler.conf"],
        "--schedule-period": ["1s"],
        "--scheduler-name": ["vscheduler"],
        "--leader-elect": ["true"],
        "--lock-object-namespace": [NAMESPACE],
        "--leader-elect-lease-duration": ["15s"],
        "--leader-elect-renew-deadline": ["10s"],
        "--leader-elect-retry-period": ["2s"],
        "--kube-api-qps": ["2000"],
        "--kube-api-burst": ["2000"],
        "--enable-metrics": ["true"],
        "--enable-healthz": ["true"],
        "--listen-address": [":8080"],
        "--default-queue": ["default"],
    }
    assert main["image"] == "vscheduler:0.1.0"  # the tag defaults to appVersion


def test_flags_follow_the_values(chart: helm.Chart) -> None:
    objects = manifests(chart, {
        "schedulePeriod": "3s", "schedulerNames": ["vscheduler", "volcano"],
        "leaderElection": {"leaseDuration": "30s", "renewDeadline": "20s",
                           "retryPeriod": "5s"},
        "kubeApiQps": 500, "kubeApiBurst": 800, "enableMetrics": False,
        "listenAddress": "0.0.0.0:9090", "defaultQueue": "batch",
        "extraArgs": ["--percentage-nodes-to-find=50"],
        "image": {"repository": "registry.example/vscheduler", "tag": "dev"}})
    assert flags(objects) == {
        "--scheduler-conf": ["/etc/vscheduler/volcano-scheduler.conf"],
        "--schedule-period": ["3s"],
        "--scheduler-name": ["vscheduler", "volcano"],
        "--leader-elect": ["true"],
        "--lock-object-namespace": [NAMESPACE],
        "--leader-elect-lease-duration": ["30s"],
        "--leader-elect-renew-deadline": ["20s"],
        "--leader-elect-retry-period": ["5s"],
        "--kube-api-qps": ["500"],
        "--kube-api-burst": ["800"],
        "--enable-metrics": ["false"],
        "--enable-healthz": ["true"],
        "--listen-address": ["0.0.0.0:9090"],
        "--default-queue": ["batch"],
        "--percentage-nodes-to-find": ["50"],
    }
    main = container(objects)
    assert main["image"] == "registry.example/vscheduler:dev"
    # The healthz server still listens, on the port of --listen-address.
    assert main["ports"] == [{"name": "http-metrics", "containerPort": 9090, "protocol": "TCP"}]
    assert "Service" not in kinds(objects)


def test_probes_and_security(chart: helm.Chart) -> None:
    objects = manifests(chart)
    main = container(objects)
    assert main["ports"] == [{"name": "http-metrics", "containerPort": 8080, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    context = main["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert main["resources"]["requests"] and main["resources"]["limits"]["memory"]
    # The conf directory is the ConfigMap, mounted whole; /tmp is writable.
    mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/vscheduler"]]["configMap"]["name"] == \
        only(objects, "ConfigMap")["metadata"]["name"]
    assert "emptyDir" in volumes[mounts["/tmp"]]

    off = container(manifests(chart, {"enableHealthz": False}))
    assert "livenessProbe" not in off and "readinessProbe" not in off


# --------------------------------------------------------------------------- replicas


def deployment_state(objects: list[dict]) -> tuple[int, str, str]:
    spec = only(objects, "Deployment")["spec"]
    strategy = spec.get("strategy", {}).get("type", "RollingUpdate")
    return spec["replicas"], flags(objects)["--leader-elect"][0], strategy


def test_replicas_and_leader_election(chart: helm.Chart) -> None:
    """Choice: replicas empty means 2 with leader election, 1 without. A number is taken as
    given, except more than one without leader election, which fails to render: two active
    schedulers would bind the same pods. Without leader election the Deployment also
    recreates instead of rolling, so an update never runs two schedulers at once."""
    assert deployment_state(manifests(chart)) == (2, "true", "RollingUpdate")
    assert deployment_state(manifests(chart, {"replicas": 3})) == (3, "true", "RollingUpdate")
    assert deployment_state(manifests(chart, {"leaderElect": False})) == \
        (1, "false", "Recreate")
    assert deployment_state(manifests(chart, {"leaderElect": False, "replicas": 1})) == \
        (1, "false", "Recreate")
    assert deployment_state(manifests(chart, {"leaderElect": False, "replicas": 0})) == \
        (0, "false", "Recreate")
    with pytest.raises(helm.HelmRenderError, match="needs leaderElect=true"):
        render(chart, {"leaderElect": False, "replicas": 2})
    lone = flags(manifests(chart, {"leaderElect": False}))
    assert not {"--lock-object-namespace", "--leader-elect-lease-duration"} & set(lone)


def test_pod_disruption_budget_only_with_standbys(chart: helm.Chart) -> None:
    budget = only(manifests(chart), "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    assert "PodDisruptionBudget" not in kinds(manifests(chart, {"leaderElect": False}))
    assert "PodDisruptionBudget" not in kinds(manifests(chart, {"replicas": 1}))


def test_replicas_spread_over_nodes(chart: helm.Chart) -> None:
    def affinity(values: dict[str, Any]) -> dict:
        objects = manifests(chart, values)
        return only(objects, "Deployment")["spec"]["template"]["spec"].get("affinity", {})

    deployment = only(manifests(chart), "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    soft = affinity({})["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert soft == [{"weight": 100, "podAffinityTerm": {
        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector}}}]
    hard = affinity({"podAntiAffinity": "hard"})["podAntiAffinity"]
    assert hard == {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": selector}}]}
    assert affinity({"podAntiAffinity": "none"}) == {}
    # A node affinity given is kept beside the spread; a pod anti-affinity given wins.
    node = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "role", "operator": "In", "values": ["control"]}]}]}}}
    mixed = affinity({"affinity": node})
    assert mixed["nodeAffinity"] == node["nodeAffinity"] and "podAntiAffinity" in mixed
    own = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    assert affinity({"affinity": own}) == own


# --------------------------------------------------------------------------- conf


def conf_of(objects: list[dict]) -> str:
    data = only(objects, "ConfigMap")["data"]
    assert list(data) == ["volcano-scheduler.conf"]
    return data["volcano-scheduler.conf"]


def test_default_conf_is_volcanos_default(chart: helm.Chart) -> None:
    from vscheduler.conf import parse_conf

    text = conf_of(manifests(chart))
    assert text == chart.values["schedulerConf"]
    expected = (ROOT / "conf" / "volcano-default.conf").read_text()
    assert yaml.safe_load(text) == yaml.safe_load(expected)
    conf = parse_conf(text, "chart default")
    assert conf.action_names() == ["enqueue", "allocate", "backfill"]
    assert conf.warnings == []


def test_conf_is_the_values_conf_verbatim(chart: helm.Chart) -> None:
    text = (ROOT / "conf" / "volcano-helm.conf").read_text()
    assert conf_of(manifests(chart, {"schedulerConf": text})) == text
    one_line = 'actions: "allocate"'  # no trailing newline, a quote inside
    assert conf_of(manifests(chart, {"schedulerConf": one_line})) == one_line


def test_conf_checksum_rolls_pods_only_when_asked(chart: helm.Chart) -> None:
    def annotations(values: dict[str, Any]) -> dict:
        template = only(manifests(chart, values), "Deployment")["spec"]["template"]
        return template["metadata"].get("annotations", {})

    assert "checksum/scheduler-conf" not in annotations({})
    first = annotations({"restartOnConfChange": True})["checksum/scheduler-conf"]
    second = annotations({"restartOnConfChange": True, "schedulerConf": 'actions: "allocate"'})
    assert first != second["checksum/scheduler-conf"]


def test_the_charts_command_line_parses_as_the_daemon_reads_it(chart: helm.Chart) -> None:
    """The chart's command line against the CLI's own parser (argparse exits 2 on a flag
    it does not know)."""
    from vscheduler.cli import _parser

    parser = _parser()
    for values in ({}, {"leaderElect": False}, {"enableMetrics": False}):
        main = container(manifests(chart, values))
        args = parser.parse_args([*main["command"][1:], *main["args"]])
        assert args.command == "run"


# --------------------------------------------------------------------------- metrics


def test_service_monitor(chart: helm.Chart) -> None:
    assert "ServiceMonitor" not in kinds(manifests(chart))
    objects = manifests(chart, {"serviceMonitor": {"enabled": True, "interval": "15s",
                                                   "labels": {"release": "prom"}}})
    monitor = only(objects, "ServiceMonitor")
    service = only(objects, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint == {"port": "http-metrics", "path": "/metrics", "interval": "15s",
                        "scrapeTimeout": "10s"}
    [port] = service["spec"]["ports"]
    assert port["name"] == "http-metrics" and port["targetPort"] == "http-metrics"
    deployment = only(objects, "Deployment")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    with pytest.raises(helm.HelmRenderError, match="needs enableMetrics"):
        render(chart, {"serviceMonitor": {"enabled": True}, "enableMetrics": False})


# --------------------------------------------------------------------------- CRDs


def crd_schemas(chart: helm.Chart) -> dict[str, dict]:
    objects = [o for o in manifests(chart, {"crds": {"install": True}})
               if o["kind"] == "CustomResourceDefinition"]
    return {crd["spec"]["names"]["kind"]: crd for crd in objects}


def assert_structural(schema: dict, where: str) -> None:
    """Kubernetes' structural schema rules, as far as these CRDs use them: every node has
    a type (or is int-or-string / preserves unknown fields), anyOf only for int-or-string."""
    if schema.get("x-kubernetes-int-or-string"):
        assert schema.get("anyOf") == [{"type": "integer"}, {"type": "string"}], where
        assert "type" not in schema, where
    else:
        assert "anyOf" not in schema, where
        assert "type" in schema or schema.get("x-kubernetes-preserve-unknown-fields"), where
    for name, sub in schema.get("properties", {}).items():
        assert_structural(sub, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            assert_structural(schema[key], f"{where}[{key}]")


def test_crds(chart: helm.Chart) -> None:
    assert "CustomResourceDefinition" not in kinds(manifests(chart))
    crds = crd_schemas(chart)
    assert set(crds) == {"Queue", "PodGroup", "HyperNode"}
    assert crds["Queue"]["metadata"]["name"] == "queues.scheduling.volcano.sh"
    assert crds["Queue"]["spec"]["scope"] == "Cluster"
    assert crds["PodGroup"]["metadata"]["name"] == "podgroups.scheduling.volcano.sh"
    assert crds["PodGroup"]["spec"]["scope"] == "Namespaced"
    assert crds["HyperNode"]["metadata"]["name"] == "hypernodes.topology.volcano.sh"
    assert crds["HyperNode"]["spec"]["scope"] == "Cluster"
    fields = {
        "Queue": ({"weight", "capability", "deserved", "guarantee", "reclaimable", "priority",
                   "parent"}, {"state", "allocated"}),
        "PodGroup": ({"minMember", "minTaskMember", "minResources", "queue",
                      "priorityClassName", "scheduleTimeoutSeconds", "networkTopology",
                      "subGroupPolicy"},
                     {"phase", "conditions", "running", "succeeded", "failed"}),
        "HyperNode": ({"tier", "tierName", "members"}, {"conditions", "nodeCount"}),
    }
    for kind, crd in crds.items():
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        [version] = crd["spec"]["versions"]
        assert version["served"] and version["storage"]
        # As Volcano's own CRDs: a status subresource for Queue and HyperNode, none for
        # PodGroup.
        assert version["subresources"] == ({} if kind == "PodGroup" else {"status": {}})
        schema = version["schema"]["openAPIV3Schema"]
        assert_structural(schema, kind)
        spec, status = schema["properties"]["spec"], schema["properties"]["status"]
        assert set(spec["properties"]) == fields[kind][0]
        assert set(status["properties"]) == fields[kind][1]
        if kind == "HyperNode":
            # Every field of Volcano's HyperNode is declared: nothing is kept unchecked.
            assert crd["spec"]["group"] == "topology.volcano.sh"
            assert version["name"] == "v1alpha1"
            assert "x-kubernetes-preserve-unknown-fields" not in spec
            assert "x-kubernetes-preserve-unknown-fields" not in status
            continue
        assert crd["spec"]["group"] == "scheduling.volcano.sh"
        assert version["name"] == "v1beta1"
        # Fields vscheduler does not read (Volcano's others) are kept, not pruned.
        assert spec["x-kubernetes-preserve-unknown-fields"] is True
        assert status["x-kubernetes-preserve-unknown-fields"] is True
    guarantee = crds["Queue"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
        "properties"]["spec"]["properties"]["guarantee"]
    assert set(guarantee["properties"]) == {"resource"}
    # crds.keep false: uninstalling the release deletes the CRDs (and every object).
    unkept = manifests(chart, {"crds": {"install": True, "keep": False}})
    assert all("annotations" not in obj["metadata"] for obj in unkept
               if obj["kind"] == "CustomResourceDefinition")


def test_the_real_helm_renders_the_hypernode_crd_only_when_asked(tmp_path: Path) -> None:
    """`helm template` (the binary) renders the HyperNode CRD with crds.install, beside
    the Queue and PodGroup CRDs, and none of them without: a cluster with Volcano keeps
    Volcano's own."""
    def crd_names(values: dict[str, Any]) -> set[str]:
        rendered = real_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE,
                             values=values, tmp_path=tmp_path)
        assert rendered.returncode == 0, rendered.stderr
        return {doc["metadata"]["name"] for doc in yaml.safe_load_all(rendered.stdout)
                if doc and doc["kind"] == "CustomResourceDefinition"}

    assert crd_names({}) == set()
    assert crd_names({"crds": {"install": True}}) == {
        "hypernodes.topology.volcano.sh", "queues.scheduling.volcano.sh",
        "podgroups.scheduling.volcano.sh"}


def example_objects(kind: str) -> list[dict]:
    found = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if (doc and doc.get("kind") == kind
                    and doc.get("apiVersion") == "scheduling.volcano.sh/v1beta1"):
                found.append(doc)
    return found


@pytest.mark.parametrize("kind", ["Queue", "PodGroup"])
def test_crd_schemas_accept_the_examples_and_reject_nonsense(
        chart: helm.Chart, kind: str) -> None:
    schema = crd_schemas(chart)[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    validator = jsonschema.Draft7Validator(schema)
    examples = example_objects(kind)
    assert examples, f"no {kind} in examples/"
    for obj in examples:
        errors = [e.message for e in validator.iter_errors(obj)]
        assert errors == [], f"{kind}/{obj['metadata']['name']}: {errors}"
    bad = {
        "Queue": [{"spec": {"weight": "three"}}, {"spec": {"capability": {"cpu": "lots"}}},
                  {"spec": {"reclaimable": "yes"}}, {"spec": {"guarantee": {"resource": []}}},
                  {"status": {"allocated": {"nvidia.com/gpu": "2 cards"}}}],
        "PodGroup": [{"spec": {"minMember": -1}}, {"spec": {"minTaskMember": {"ps": "one"}}},
                     {"spec": {"minResources": {"memory": "1 GB"}}},
                     {"status": {"conditions": [{"type": 1}]}}, {"status": {"running": "2"}}],
    }[kind]
    base = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": kind,
            "metadata": {"name": "x"}}
    for fields in bad:
        assert not validator.is_valid({**base, **fields}), fields


# HyperNodes as Volcano's documentation shows them: tier 1 by exact names, by a regular
# expression and by labels; tier 2 over HyperNodes.
HYPERNODES = [
    {"tier": 1, "tierName": "switch", "members": [
        {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
        {"type": "Node", "selector": {"exactMatch": {"name": "node-1.rack-a"}}}]},
    {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-"}}}]},
    {"tier": 1, "members": [{"type": "Node", "selector": {"labelMatch": {
        "matchLabels": {"rack": "r1"},
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]},
                             {"key": "spare", "operator": "DoesNotExist"}]}}}]},
    {"tier": 2, "tierName": "block", "members": [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}}]},
]


def test_hypernode_schema_accepts_volcanos_examples_and_rejects_nonsense(
        chart: helm.Chart) -> None:
    """What the OpenAPI part of the HyperNode schema decides (the CEL rules on a
    member's selector are checked in test_crds.py)."""
    schema = crd_schemas(chart)["HyperNode"]["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"]
    validator = jsonschema.Draft7Validator(schema)
    base = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "s0"}}
    for spec in HYPERNODES:
        obj = {**base, "spec": spec, "status": {"nodeCount": 2, "conditions": [
            {"type": "Ready", "status": "True", "reason": "Built", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
        errors = [e.message for e in validator.iter_errors(obj)]
        assert errors == [], f"{spec}: {errors}"
    member = {"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}
    bad = [{"members": [member]},                                  # no tier
           {"tier": -1, "members": [member]},                      # below 0
           {"tier": "1", "members": [member]},
           {"tier": 1, "tierName": "x" * 254, "members": [member]},
           {"tier": 1, "members": []},                             # no member
           {"tier": 1, "members": [{"selector": member["selector"]}]},  # no type
           {"tier": 1, "members": [{**member, "type": "Rack"}]},
           {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {}}}]},
           {"tier": 1, "members": [{"type": "Node", "selector": {
               "exactMatch": {"name": "Not_A_Name"}}}]},
           {"tier": 1, "members": [{"type": "Node", "selector": {
               "regexMatch": {"pattern": ""}}}]},
           {"tier": 1, "members": [{"type": "Node", "selector": {"labelMatch": {
               "matchExpressions": [{"key": "rack"}]}}}]}]
    for spec in bad:
        assert not validator.is_valid({**base, "spec": spec}), spec
    assert not validator.is_valid({**base, "spec": HYPERNODES[0], "status": {"nodeCount": -1}})


# --------------------------------------------------------------------------- notes


def test_notes_tell_how_to_use_the_scheduler(chart: helm.Chart) -> None:
    notes = render(chart)["vscheduler/templates/NOTES.txt"]
    assert "schedulerName: vscheduler" in notes
    assert NAMESPACE in notes
    custom = render(chart, {"schedulerNames": ["batch", "vscheduler"]})
    assert "schedulerName: batch" in custom["vscheduler/templates/NOTES.txt"]


# --------------------------------------------------------------------------- dashboard, alerts

DASHBOARD = CHART / "dashboards" / "vscheduler.json"
# PromQL words that are not metric names (functions are told by the "(" after them).
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                "and", "or", "unless", "offset", "inf", "nan"}
# Series that Prometheus itself writes for every target.
PROMETHEUS_SERIES = {"up"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: strings, label matchers, ranges and
    grouping label lists removed, then every identifier that is not a function call, a
    keyword or a number."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    # (not inside a number or a duration such as 5m)
    for match in re.finditer(r"(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end():].lstrip()
        word = match.group()
        if rest.startswith("(") or word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names


# Labels Prometheus gives every series of a target (the ServiceMonitor's and the pod's).
TARGET_LABELS = {"job", "namespace", "pod", "instance", "service", "endpoint", "container"}


def labels_used(expr: str) -> tuple[dict[str, set[str]], set[str]]:
    """The labels a PromQL expression reads: those matched per metric name, and those
    grouped or joined on (by, without, on, ignoring)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    matched: dict[str, set[str]] = {}
    for match in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}", text):
        keys = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", match.group(2)))
        matched.setdefault(match.group(1), set()).update(keys)
    grouped = set()
    for match in re.finditer(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", text):
        grouped |= {label.strip() for label in match.group(1).split(",") if label.strip()}
    return matched, grouped


def exported_labels() -> dict[str, set[str]]:
    """Each exported series name and its labels (a histogram's buckets add `le`)."""
    from vscheduler.kube.metrics import Metrics

    labels: dict[str, set[str]] = {name: set() for name in PROMETHEUS_SERIES}
    for info in Metrics().described:
        if info.kind == "histogram":
            labels[f"{info.name}_bucket"] = {*info.labels, "le"}
            labels[f"{info.name}_sum"] = labels[f"{info.name}_count"] = set(info.labels)
        else:
            labels[info.name] = set(info.labels)
    return labels


def assert_labels_exist(expr: str) -> None:
    """Every label an expression matches exists on that metric (or on every target), and
    every label it groups by exists on one of the metrics it reads: a misnamed label
    (`queue_name` for `queue`) matches nothing and shows an empty panel, not an error."""
    known = exported_labels()
    matched, grouped = labels_used(expr)
    for name, keys in matched.items():
        assert keys <= known[name] | TARGET_LABELS, (name, sorted(keys - known[name]), expr)
    available = set().union(*(known[name] for name in metric_names(expr))) | TARGET_LABELS
    assert grouped <= available, (sorted(grouped - available), expr)


def test_misnamed_labels_are_found() -> None:
    """Guards the label checks: a label the metric lacks is caught, in a matcher and in a
    grouping."""
    assert_labels_exist('sum by (queue, card) (elastic_gpu_used{job=~"a", queue=~"b"})')
    for bad in ('sum by (queue_name) (elastic_gpu_used{job=~"a"})',
                'elastic_gpu_used{queue_name="x"}',
                'sum by (le) (rate(elastic_gpu_wait_seconds_count[5m]))',
                'elastic_gpu_used{card="x"} / on(strategy) elastic_gpu_quota'):
        with pytest.raises(AssertionError):
            assert_labels_exist(bad)


def exported_series() -> set[str]:
    """Every series name the daemon exports: gauges as named, counters with _total,
    histograms' _bucket, _sum and _count."""
    from vscheduler.kube.metrics import Metrics

    names = set()
    for info in Metrics().described:
        if info.kind == "histogram":
            names |= {f"{info.name}_{part}" for part in ("bucket", "sum", "count")}
        else:
            names.add(info.name)
    return names


def test_metric_names_are_found_in_promql() -> None:
    """Guards the checks below: the parser finds names, and only names."""
    assert metric_names('sum by (queue_name) (rate(volcano_pod_bind_total{job=~"a|b"}[5m]))'
                        ) == {"volcano_pod_bind_total"}
    assert metric_names("histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m]))) / 1000"
                        ) == {"x_bucket"}
    assert metric_names('min(timestamp(a{l="}"}) - a) / b > 30 and on() c offset 5m') == \
        {"a", "b", "c"}
    assert metric_names("absent(up == 1)") == {"up"}


def dashboard_expressions(dashboard: dict) -> list[str]:
    exprs = [target["expr"] for panel in dashboard["panels"]
             for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            exprs.append(re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1",
                                variable["query"]["query"]))
    return exprs


def test_the_dashboard_reads_only_metrics_the_daemon_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = exported_series()
    used: set[str] = set()
    for expr in dashboard_expressions(dashboard):
        names = metric_names(expr)
        assert names, expr
        assert names <= exported, f"{sorted(names - exported)} in {expr}"
        assert_labels_exist(expr)
        used |= names
    # Every exported metric is on the dashboard, but for the period (read by an alert).
    bases = {re.sub(r"_(bucket|sum|count)$", "", name) for name in used}
    missing = {re.sub(r"_(bucket|sum|count)$", "", name) for name in exported} - bases
    assert missing == {"vscheduler_schedule_period_seconds"}
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}"


def test_grafana_dashboard_config_map(chart: helm.Chart) -> None:
    def dashboards(values: dict[str, Any]) -> list[dict]:
        return [obj for obj in manifests(chart, values) if obj["kind"] == "ConfigMap"
                and obj["metadata"]["name"].endswith("-dashboard")]

    assert dashboards({}) == []
    [config] = dashboards({"grafanaDashboard": {"enabled": True}})
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config["metadata"]["namespace"] == NAMESPACE
    assert list(config["data"]) == ["vscheduler.json"]
    assert json.loads(config["data"]["vscheduler.json"]) == json.loads(DASHBOARD.read_text())
    [custom] = dashboards({"grafanaDashboard": {
        "enabled": True, "labels": {"grafana_dashboard": "yes", "team": "batch"},
        "annotations": {"grafana_folder": "Schedulers"}, "namespace": "monitoring"}})
    assert custom["metadata"]["labels"]["grafana_dashboard"] == "yes"
    assert custom["metadata"]["labels"]["team"] == "batch"
    assert custom["metadata"]["annotations"] == {"grafana_folder": "Schedulers"}
    assert custom["metadata"]["namespace"] == "monitoring"
    with pytest.raises(helm.HelmRenderError, match="needs enableMetrics"):
        render(chart, {"grafanaDashboard": {"enabled": True}, "enableMetrics": False})


def alert_rules(chart: helm.Chart, values: dict[str, Any] | None = None) -> dict[str, dict]:
    rule = only(manifests(chart, {"prometheusRule": {"enabled": True, **(values or {})}}),
                "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    [group] = rule["spec"]["groups"]
    return {r["alert"]: r for r in group["rules"]}


ALERTS = {"VSchedulerDown", "VSchedulerNoSchedulingCycle", "VSchedulerLeaderChanges",
          "VSchedulerBindErrors", "VSchedulerPodsPendingTooLong",
          "VSchedulerGPUPreemptionsHigh", "VSchedulerGPUQuotaExceeded"}


def test_alerts_read_only_metrics_the_daemon_exports(chart: helm.Chart) -> None:
    assert "PrometheusRule" not in kinds(manifests(chart))
    rules = alert_rules(chart)
    assert set(rules) == ALERTS
    exported = exported_series() | PROMETHEUS_SERIES
    for name, rule in rules.items():
        names = metric_names(rule["expr"])
        assert names and names <= exported, (name, sorted(names - exported))
        assert_labels_exist(rule["expr"])
        assert rule["labels"]["severity"] in ("critical", "warning")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        # Each alert looks at this release's series only.
        assert f'job="{RELEASE}-vscheduler-metrics", namespace="{NAMESPACE}"' in rule["expr"]


def test_alert_thresholds_follow_the_values(chart: helm.Chart) -> None:
    rules = alert_rules(chart, {"selector": 'job="sched"', "rules": {
        "noCycle": {"periods": 12, "for": "30s"},
        "leaderChanges": {"window": "30m", "max": 2},
        "bindErrors": {"window": "5m", "threshold": 3},
        "podsPending": {"thresholdSeconds": 900, "severity": "critical"},
        "gpuPreemptions": {"window": "6h", "ratio": 0.25, "minPreemptions": 10},
        "gpuOverQuota": {"for": "1h", "severity": "critical"},
        "down": {"enabled": False}}})
    assert set(rules) == ALERTS - {"VSchedulerDown"}
    cycle = rules["VSchedulerNoSchedulingCycle"]
    assert cycle["expr"].rstrip().endswith("> 12") and cycle["for"] == "30s"
    assert "vscheduler_schedule_period_seconds{job=\"sched\"}" in cycle["expr"]
    assert rules["VSchedulerLeaderChanges"]["expr"] == \
        'sum(changes(vscheduler_is_leader{job="sched"}[30m])) > 2'
    assert rules["VSchedulerBindErrors"]["expr"] == (
        'sum(increase(vscheduler_api_errors_total{job="sched", operation="bind"}[5m])) > 3')
    pending = rules["VSchedulerPodsPendingTooLong"]
    assert pending["expr"].endswith("> 900") and pending["labels"]["severity"] == "critical"
    preemptions = rules["VSchedulerGPUPreemptionsHigh"]["expr"]
    assert preemptions.count("[6h]") == 3 and ") > 0.25\n" in preemptions
    assert preemptions.endswith('sum(increase(elastic_gpu_preemptions_total{job="sched"}[6h]))'
                                " >= 10")
    quota = rules["VSchedulerGPUQuotaExceeded"]
    assert quota["expr"] == ('max by (queue, card) (elastic_gpu_used{job="sched"}) > '
                             'max by (queue, card) (elastic_gpu_quota{job="sched"})')
    assert quota["for"] == "1h" and quota["labels"]["severity"] == "critical"
    labelled = only(manifests(chart, {"prometheusRule": {"enabled": True,
                                                         "labels": {"release": "prom"}}}),
                    "PrometheusRule")
    assert labelled["metadata"]["labels"]["release"] == "prom"
    with pytest.raises(helm.HelmRenderError, match="needs enableMetrics"):
        render(chart, {"prometheusRule": {"enabled": True}, "enableMetrics": False})
    for bad in ({"prometheusRule": {"rules": {"noCycle": {"periods": 0}}}},
                {"prometheusRule": {"rules": {"bindErrors": {"window": "ten minutes"}}}},
                {"prometheusRule": {"rules": {"podsPending": {"threshold": 5}}}},
                {"prometheusRule": {"rules": {"gpuPreemptions": {"ratio": 0}}}},
                {"prometheusRule": {"rules": {"gpuOverQuota": {"threshold": 1}}}},
                {"grafanaDashboard": {"enable": True}}):
        with pytest.raises(helm.HelmValuesError):
            render(chart, bad)


# --------------------------------------------------------------------------- promtool


def promtool() -> str:
    """Prometheus' own rule checker, where installed (Debian's `prometheus` package); the
    tests that need it are skipped otherwise."""
    found = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if not found:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return found


def rule_file(chart: helm.Chart, tmp_path: Path, values: dict[str, Any] | None = None) -> Path:
    rule = only(manifests(chart, {"prometheusRule": {"enabled": True, **(values or {})}}),
                "PrometheusRule")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


def test_promtool_accepts_the_rules(chart: helm.Chart, tmp_path: Path) -> None:
    checked = subprocess.run([promtool(), "check", "rules", str(rule_file(chart, tmp_path))],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout


# Series as the daemon exports them, one sample a minute for 30 minutes: a leader whose
# loop stops at minute 10 (and whose target is gone from then on), while binds fail from
# minute 6, the oldest pending pod ages by 3 minutes a minute, and the lease changes hands
# six times in the first minutes.
SERIES = {
    "up": "1x10 0x20",
    "vscheduler_last_cycle_timestamp_seconds": "0+60x10 600x20",
    "vscheduler_schedule_period_seconds": "1x30",
    "vscheduler_is_leader": "1 0 1 0 1 0 1 1x23",
    'vscheduler_api_errors_total{operation="bind"}': "0x5 1+1x25",
    "vscheduler_oldest_pending_pod_age_seconds": "0+180x30",
    # 4 GPU pods bound a minute; from minute 5 on, 8 GPU pods evicted a minute (more than
    # 0.5 per bind over the hour from minute 7)
    'elastic_gpu_allocations_total{queue="train"}': "0+4x30",
    'elastic_gpu_preemptions_total{queue="train", strategy="none", action="reclaim"}':
        "0x5 8+8x25",
    # train passes its quota of 4 at minute 11; infer stays within its own
    'elastic_gpu_used{queue="train", card="nvidia.com/gpu"}': "2x10 6x20",
    'elastic_gpu_quota{queue="train", card="nvidia.com/gpu"}': "4x30",
    'elastic_gpu_used{queue="infer", card="NVIDIA-H200"}': "4x30",
    'elastic_gpu_quota{queue="infer", card="NVIDIA-H200"}': "4x30",
}
# (minute, alert, whether it fires then)
EXPECTED = [(5, "VSchedulerNoSchedulingCycle", False), (20, "VSchedulerNoSchedulingCycle", True),
            (5, "VSchedulerDown", False), (20, "VSchedulerDown", True),
            (8, "VSchedulerLeaderChanges", True), (4, "VSchedulerBindErrors", False),
            (15, "VSchedulerBindErrors", True), (20, "VSchedulerPodsPendingTooLong", False),
            (30, "VSchedulerPodsPendingTooLong", True),
            (5, "VSchedulerGPUPreemptionsHigh", False), (25, "VSchedulerGPUPreemptionsHigh", True),
            (20, "VSchedulerGPUQuotaExceeded", False), (28, "VSchedulerGPUQuotaExceeded", True)]
# Labels an alert carries from its expression, beside the rule's own.
ALERT_LABELS = {"VSchedulerGPUQuotaExceeded": {"queue": "train", "card": "nvidia.com/gpu"}}


def promtool_test(rules: dict[str, dict], fire: bool = True) -> str:
    """A `promtool test rules` file: SERIES under this release's labels, and EXPECTED with
    each alert's labels and annotations as rendered (or nothing firing)."""
    labels = f'job="{RELEASE}-vscheduler-metrics", namespace="{NAMESPACE}", pod="a"'
    series = []
    for name, values in SERIES.items():
        base, _, extra = name.partition("{")
        matchers = f"{labels}, {extra.rstrip('}')}" if extra else labels
        series.append({"series": f"{base}{{{matchers}}}", "values": values})
    checks = []
    for minute, alert, fires in EXPECTED:
        expected = [{"exp_labels": {**rules[alert]["labels"], **ALERT_LABELS.get(alert, {})},
                     "exp_annotations": rules[alert]["annotations"]}] if fire and fires else []
        checks.append({"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": expected})
    return yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
                           "tests": [{"interval": "1m", "input_series": series,
                                      "alert_rule_test": checks}]})


def test_promtool_fires_each_alert_when_it_should(chart: helm.Chart, tmp_path: Path) -> None:
    tool = promtool()
    tests = tmp_path / "tests.yaml"
    rule_file(chart, tmp_path)
    tests.write_text(promtool_test(alert_rules(chart)))
    ran = subprocess.run([tool, "test", "rules", str(tests)], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # The same series with every threshold out of reach: nothing fires.
    relaxed = {"rules": {"noCycle": {"periods": 100000}, "down": {"for": "1h"},
                         "leaderChanges": {"max": 10}, "bindErrors": {"threshold": 100},
                         "podsPending": {"thresholdSeconds": 100000},
                         "gpuPreemptions": {"ratio": 100}, "gpuOverQuota": {"for": "1h"}}}
    rule_file(chart, tmp_path, relaxed)
    tests.write_text(promtool_test(alert_rules(chart, relaxed), fire=False))
    ran = subprocess.run([tool, "test", "rules", str(tests)], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr


# --------------------------------------------------------------------------- the real helm


def real_helm(*args: str, values: dict[str, Any] | None = None,
              tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values or {}))
    return subprocess.run([binary("helm"), *args, "-f", str(path)], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_real_helm_lints_strictly(scenario: str, tmp_path: Path) -> None:
    linted = real_helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE,
                       values=SCENARIOS[scenario], tmp_path=tmp_path)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "0 chart(s) failed" in linted.stdout
    assert "[WARNING]" not in linted.stdout and "[ERROR]" not in linted.stdout


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_real_helm_renders_what_the_library_renders(
        chart: helm.Chart, scenario: str, tmp_path: Path) -> None:
    rendered = real_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE,
                         values=SCENARIOS[scenario], tmp_path=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    by_binary = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]

    def key(obj: dict) -> tuple[str, str]:
        return obj["kind"], obj["metadata"]["name"]

    assert sorted(by_binary, key=key) == sorted(manifests(chart, SCENARIOS[scenario]),
                                                key=key)


def test_the_real_helm_refuses_what_the_schema_refuses(tmp_path: Path) -> None:
    for bad in ({"leaderElect": "yes"}, {"prometheusRule": {"rules": {"noCycle": {
            "periods": 0}}}}, {"grafanaDashboard": {"enable": True}}):
        rendered = real_helm("template", RELEASE, str(CHART), values=bad, tmp_path=tmp_path)
        assert rendered.returncode != 0 and "schema" in rendered.stderr, bad
    refused = real_helm("template", RELEASE, str(CHART), tmp_path=tmp_path,
                        values={"prometheusRule": {"enabled": True}, "enableMetrics": False})
    assert refused.returncode != 0 and "needs enableMetrics" in refused.stderr


def test_the_readme_values_table_covers_every_value() -> None:
    """Every key of values.yaml has a row in the chart README's table: its own, or its
    parent's (`resources`, `livenessProbe.*`)."""
    def leaves(values: dict[str, Any], prefix: str = "") -> Iterator[str]:
        for key, value in values.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and value:
                yield from leaves(value, f"{path}.")
            else:
                yield path

    readme = (CHART / "README.md").read_text()
    rows = {m.group(1).removesuffix(".*")
            for m in re.finditer(r"^\| `([^`]+)` \|", readme, re.MULTILINE)}
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert len(rows) > 40
    for path in leaves(values):
        parts = path.split(".")
        assert any(".".join(parts[:n]) in rows for n in range(1, len(parts) + 1)), path
