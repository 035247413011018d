"""The daemon's metrics: units stated and consistent, the documented table equal to what
the code registers, per-PodGroup series for PodGroups only, queue and card figures, the
seed's elastic_gpu_* figures, measured on real sessions (Simulation runs the daemon's
Scheduler on an in-memory cache) and scraped from a daemon on the API server stand-in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import conf, gang, node, pod, podgroup, queue
from vscheduler.framework.results import Eviction, SessionResult
from vscheduler.kube.metrics import Metrics, markdown_table, serve
from vscheduler.simulate import Simulation

ROOT = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"
CARD_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: capacity-card}, {name: nodeorder}]
"""
RECLAIM_CONF = """
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""
H200 = {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.memory": "143771"}


def registered_names(metrics: Metrics) -> set[str]:
    """Metric names as Prometheus sees them (a counter's family is named without
    `_total` by prometheus_client; its samples carry it)."""
    names = set()
    for family in metrics.registry.collect():
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return names


def run(objects: list[dict], conf_text: str | None = None,
        metrics: Metrics | None = None) -> tuple[Metrics, SessionResult, Simulation]:
    """One session over the objects, recorded as the daemon records it."""
    simulation = Simulation(conf(conf_text))
    simulation.load([(f"test#{i}", obj) for i, obj in enumerate(objects)])
    result = simulation.scheduler.run_once()
    assert result is not None
    metrics = metrics or Metrics()
    metrics.cycle(simulation.scheduler.timings, result, simulation.cache)
    return metrics, result, simulation


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def series(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


# --------------------------------------------------------------------------- units, docs


def test_every_metric_states_its_unit_in_its_help() -> None:
    metrics = Metrics()
    exposition = generate_latest(metrics.registry).decode()
    families = [f for f in text_string_to_metric_families(exposition)
                if not f.name.endswith("_created")]
    assert len(families) == len(metrics.described) >= 20
    for family in families:
        assert "Unit: " in family.documentation, family.name
    for info in metrics.described:
        # Prometheus naming: counters end in _total; a unit in the name is the unit said.
        assert (info.kind == "counter") == info.name.endswith("_total"), info.name
        for suffix, unit in (("_seconds", "seconds"), ("_bytes", "bytes"),
                             ("_milliseconds", "milliseconds"), ("_milli_cpu", "millicores")):
            if info.name.endswith(suffix):
                assert info.unit.startswith(unit), info


def test_the_metrics_doc_lists_exactly_the_registered_metrics() -> None:
    metrics = Metrics()
    assert {info.name for info in metrics.described} == registered_names(metrics)
    doc = (ROOT / "docs" / "metrics.md").read_text()
    table = markdown_table(metrics)
    assert table in doc, ("docs/metrics.md is out of date; regenerate its table with "
                          "python -c 'from vscheduler.kube.metrics import markdown_table; "
                          "print(markdown_table(), end=\"\")'")
    documented = {line.split("|")[1].strip().strip("`") for line in doc.splitlines()
                  if line.startswith("| `")}
    assert documented == registered_names(metrics)


def test_queue_figures_are_in_the_units_their_help_says() -> None:
    objects = [
        node("g1", cpu="16", memory="64Gi", **{GPU: "8", "rdma/hca": "4"}),
        queue("train", capability={"cpu": "8", "memory": "32Gi", GPU: "4"},
              deserved={"cpu": "4", GPU: "2"}),
        pod("a", cpu="1500m", memory="2Gi", queue="train", **{GPU: "2", "rdma/hca": "1"}),
        pod("b", cpu="500m", memory="1Gi", queue="train", **{GPU: "1"}),
    ]
    metrics, result, _ = run(objects)
    assert len(result.binds) == 2
    q = {"queue_name": "train"}
    assert value(metrics, "volcano_queue_allocated_milli_cpu", **q) == 2000
    assert value(metrics, "volcano_queue_allocated_memory_bytes", **q) == 3 * 2**30
    scalar = "volcano_queue_allocated_scalar_resources"
    assert value(metrics, scalar, **q, resource=GPU) == 3  # devices, not 3000
    assert value(metrics, scalar, **q, resource="rdma/hca") == 1
    assert value(metrics, scalar, **q, resource="pods") == 2
    assert value(metrics, "volcano_queue_deserved_milli_cpu", **q) == 4000
    assert value(metrics, "volcano_queue_deserved_scalar_resources", **q, resource=GPU) == 2
    # deserved gives no memory: no series rather than a made-up 0
    assert value(metrics, "volcano_queue_deserved_memory_bytes", **q) is None
    assert value(metrics, "volcano_queue_capacity_milli_cpu", **q) == 8000
    assert value(metrics, "volcano_queue_capacity_memory_bytes", **q) == 32 * 2**30
    assert value(metrics, "volcano_queue_capacity_scalar_resources", **q, resource=GPU) == 4
    # The default queue exists in memory only: allocated, no spec figures.
    assert value(metrics, "volcano_queue_allocated_milli_cpu", queue_name="default") == 0
    assert value(metrics, "volcano_queue_capacity_milli_cpu", queue_name="default") is None


def test_cards_per_queue_in_whole_cards() -> None:
    h200 = {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.memory": "143771"}
    objects = [
        node("h1", cpu="32", memory="256Gi", labels=h200, **{GPU: "8"}),
        queue("infer", annotations={"volcano.sh/card.quota": '{"NVIDIA-H200": 4}'}),
        queue("broken", annotations={"volcano.sh/card.quota": "not json"}),
        pod("p", cpu="1", queue="infer", **{GPU: "3"},
            annotations={"volcano.sh/card.name": "NVIDIA-H200"}),
    ]
    metrics, result, _ = run(objects, CARD_CONF)
    assert result.binds == {"default/p": "h1"}
    card = {"queue_name": "infer", "card": "NVIDIA-H200"}
    assert value(metrics, "vscheduler_queue_card_allocated", **card) == 3
    assert value(metrics, "vscheduler_queue_card_quota", **card) == 4
    # A malformed quota is the plugin's Warning event; here it has no series.
    assert not [k for k in series(metrics, "vscheduler_queue_card_quota")
                if ("queue_name", "broken") in k]


# --------------------------------------------------------------------------- pods waiting


def test_a_pod_without_a_podgroup_is_not_a_podgroup_series() -> None:
    objects = [node("n1", cpu="1"), *gang("train", 3, cpu="1"), pod("solo", cpu="2"),
               # a bare pod named like a PodGroup of its namespace
               pod("train", cpu="2")]
    metrics, result, _ = run(objects)
    assert set(result.pending) == {"default/train-0", "default/train-1", "default/train-2",
                                   "default/solo", "default/train"}
    waiting = series(metrics, "podgroup_waiting_pods")
    assert waiting == {(("namespace", "default"), ("podgroup", "train")): 3.0}
    assert value(metrics, "volcano_unschedule_task_count") == 5


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4), max_size=4),
       st.integers(min_value=0, max_value=4), st.integers(min_value=0, max_value=6))
def test_waiting_series_name_exactly_the_podgroups_with_pods_waiting(
        gangs: list[int], bare: int, cpus: int) -> None:
    objects = [node("n1", cpu=str(cpus))] if cpus else []
    for i, size in enumerate(gangs):
        objects += gang(f"g{i}", size, cpu="1")
    objects += [pod(f"solo-{i}", cpu="1") for i in range(bare)]
    metrics, result, simulation = run(objects)
    expected: dict[tuple, float] = {}
    for key in result.pending:
        job = simulation.cache.tasks[key].job_id
        if not key.startswith("default/solo-"):
            labels = (("namespace", "default"), ("podgroup", job.partition("/")[2]))
            expected[labels] = expected.get(labels, 0) + 1
    assert series(metrics, "podgroup_waiting_pods") == expected
    assert value(metrics, "volcano_unschedule_task_count") == len(result.pending)
    assert value(metrics, "volcano_unschedule_job_count") == len(result.pending_jobs)
    assert sum(expected.values()) + sum(k.startswith("default/solo-") for k in
                                        result.pending) == len(result.pending)


def test_series_of_a_podgroup_no_longer_waiting_go_away() -> None:
    objects = [*gang("big", 2, cpu="1")]
    metrics, _, simulation = run(objects)
    assert series(metrics, "podgroup_waiting_pods")
    simulation.load([("late", node("n1", cpu="4"))])
    result = simulation.scheduler.run_once()
    assert result is not None and len(result.binds) == 2
    metrics.cycle(simulation.scheduler.timings, result, simulation.cache)
    assert series(metrics, "podgroup_waiting_pods") == {}
    assert value(metrics, "volcano_unschedule_task_count") == 0


def test_the_oldest_pending_pod_age_counts_from_its_creation() -> None:
    def stamp(seconds_ago: float) -> str:
        return datetime.fromtimestamp(time.time() - seconds_ago, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ")

    hour_ago = stamp(3600)
    objects = [pod("old", cpu="1", creation=hour_ago), pod("new", cpu="1", creation=stamp(5))]
    metrics, result, _ = run(objects)
    assert len(result.pending) == 2  # no node
    age = value(metrics, "vscheduler_oldest_pending_pod_age_seconds")
    assert age is not None and 3600 <= age < 3700
    # Once nothing waits, 0.
    metrics2, _, _ = run([node("n1"), pod("p", cpu="1", creation=hour_ago)])
    assert value(metrics2, "vscheduler_oldest_pending_pod_age_seconds") == 0


def test_scheduling_duration_counts_podgroups_not_bare_pods() -> None:
    objects = [node("n1", cpu="8"), *gang("g", 3, cpu="1"), pod("solo", cpu="1"),
               podgroup("empty", 1)]
    metrics, result, _ = run(objects)
    assert len(result.binds) == 4
    assert value(metrics, "podgroup_scheduling_duration_seconds_count") == 1


def test_the_last_cycle_is_stamped_even_when_nothing_was_decided() -> None:
    metrics = Metrics()
    before = time.time()
    metrics.cycle({"idle": 0.0}, None)
    stamp = value(metrics, "vscheduler_last_cycle_timestamp_seconds")
    assert stamp is not None and before <= stamp <= time.time()
    assert value(metrics, "volcano_e2e_scheduling_latency_milliseconds_count") == 0


# --------------------------------------------------------------------------- the daemon


def test_the_daemon_counts_refused_binds_and_says_it_leads(tmp_path: Path) -> None:
    """Against the API server stand-in: a bind answered 500 is counted under
    operation="bind" (and the pod is bound on a later session); without leader election
    the replica leads; the period is exported once the server serves it."""
    from kubernetes import client

    from tests.apiserver import FakeApiServer, wait_for
    from vscheduler.kube.daemon import Daemon
    from vscheduler.kube.metrics import serve

    conf_path = tmp_path / "volcano-scheduler.conf"
    conf_path.write_text('actions: "enqueue, allocate, backfill"\ntiers:\n'
                         "- plugins: [{name: gang}, {name: predicates}]\n")
    with FakeApiServer(bookmark_interval=0.1) as server:
        api = client.ApiClient(client.Configuration(host=server.url))
        daemon = Daemon(api, str(conf_path), period=0.05)
        http = serve(daemon.metrics, "127.0.0.1:0", daemon.period)
        assert daemon.start_watches(synced_timeout=5)
        server.fail("POST", r"/binding$", 500, times=1)
        server.create_all([node("n1", cpu="4"), pod("p", cpu="1")])
        try:
            # The refused bind comes back through the writer's failures, which the next
            # cycle reads (and counts) before it decides the pod again.
            def bound() -> bool:
                daemon.run_once()
                return any(b.code == 201 for b in server.bindings())

            wait_for(bound, timeout=10)
            m = daemon.metrics
            assert value(m, "vscheduler_api_errors_total", operation="bind") == 1
            assert [b.code for b in server.bindings()] == [500, 201]
            assert value(m, "volcano_pod_bind_total") == 2  # decided twice, bound once
            assert value(m, "vscheduler_is_leader") == 1
            assert value(m, "vscheduler_schedule_period_seconds") == 0.05
            assert value(m, "vscheduler_api_errors_total", operation="evict") is None
        finally:
            daemon.stop.set()
            http.shutdown()
            api.close()


# --------------------------------------------------------------------------- GPUs (seed 000)


def stamp(seconds_ago: float) -> str:
    return datetime.fromtimestamp(time.time() - seconds_ago, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def gpu_series(metrics: Metrics, name: str) -> dict[tuple[str, str], float]:
    """A (queue, card) gauge as {(queue, card): value}."""
    return {(dict(k)["queue"], dict(k)["card"]): v for k, v in series(metrics, name).items()}


def test_gpu_binds_count_by_queue_and_wait_from_the_later_creation() -> None:
    objects = [
        node("g1", cpu="32", memory="128Gi", **{GPU: "8"}),
        queue("train"), queue("infer"),
        # a pod created an hour ago whose PodGroup came ten minutes ago
        podgroup("late", 1, queue="train", creation=stamp(600)),
        pod("late-0", cpu="1", group="late", queue="train", creation=stamp(3600),
            **{GPU: "2"}),
        # a bare pod: its own creation counts
        pod("quick", cpu="1", queue="infer", creation=stamp(20), **{GPU: "1"}),
        # no GPU: neither allocation nor wait
        pod("cpu-only", cpu="1", queue="infer", creation=stamp(20)),
    ]
    metrics, result, _ = run(objects)
    assert len(result.binds) == 3
    assert value(metrics, "elastic_gpu_allocations_total", queue="train") == 1
    assert value(metrics, "elastic_gpu_allocations_total", queue="infer") == 1
    assert value(metrics, "elastic_gpu_allocations_total", queue="default") is None
    wait = "elastic_gpu_wait_seconds"
    assert value(metrics, f"{wait}_count", queue="train") == 1
    late = value(metrics, f"{wait}_sum", queue="train")
    assert late is not None and 600 <= late < 700  # the PodGroup's creation, not the pod's
    assert value(metrics, f"{wait}_bucket", queue="train", le="300.0") == 0
    assert value(metrics, f"{wait}_bucket", queue="train", le="1200.0") == 1
    assert value(metrics, f"{wait}_count", queue="infer") == 1
    quick = value(metrics, f"{wait}_sum", queue="infer")
    assert quick is not None and 20 <= quick < 60


def test_gpus_used_and_quota_by_resource_name() -> None:
    objects = [
        node("g1", cpu="32", memory="128Gi", **{GPU: "8", "amd.com/gpu": "2"}),
        queue("train", capability={"cpu": "16", GPU: "4"}),
        queue("idle", capability={GPU: "2", "amd.com/gpu": "0"}),
        queue("free"),  # no capability: unbounded
        pod("a", cpu="1", queue="train", **{GPU: "3"}),
        pod("b", cpu="1", queue="free", **{GPU: "1", "amd.com/gpu": "2"}),
        pod("c", cpu="1", queue="train"),
    ]
    metrics, result, _ = run(objects)
    assert len(result.binds) == 3
    assert gpu_series(metrics, "elastic_gpu_used") == {
        ("train", GPU): 3, ("idle", GPU): 0, ("idle", "amd.com/gpu"): 0,
        ("free", GPU): 1, ("free", "amd.com/gpu"): 2}
    # cpu is no GPU; a capability of 0 is a limit of 0; no capability, no series
    assert gpu_series(metrics, "elastic_gpu_quota") == {
        ("train", GPU): 4, ("idle", GPU): 2, ("idle", "amd.com/gpu"): 0}


def test_gpus_used_and_quota_by_card_where_the_capacity_card_plugin_runs() -> None:
    quota = {"volcano.sh/card.quota": '{"NVIDIA-H200": 4, "NVIDIA-A100": 2}'}
    objects = [
        node("h1", cpu="32", memory="256Gi", labels=H200, **{GPU: "8"}),
        # the capability of nvidia.com/gpu is not the plugin's limit: the quota is
        queue("infer", annotations=quota, capability={GPU: "8"}),
        queue("broken", annotations={"volcano.sh/card.quota": "not json"}),
        pod("p", cpu="1", queue="infer", **{GPU: "3"},
            annotations={"volcano.sh/card.name": "NVIDIA-H200"}),
    ]
    metrics, result, _ = run(objects, CARD_CONF)
    assert result.binds == {"default/p": "h1"}
    assert gpu_series(metrics, "elastic_gpu_used") == {
        ("infer", "NVIDIA-H200"): 3, ("infer", "NVIDIA-A100"): 0}
    assert gpu_series(metrics, "elastic_gpu_quota") == {
        ("infer", "NVIDIA-H200"): 4, ("infer", "NVIDIA-A100"): 2}
    # Without the plugin the annotation limits nothing: the capability is the quota.
    metrics, result, _ = run(objects)
    assert result.binds == {"default/p": "h1"}
    assert gpu_series(metrics, "elastic_gpu_used") == {("infer", GPU): 3}
    assert gpu_series(metrics, "elastic_gpu_quota") == {("infer", GPU): 8}


def test_gpu_series_of_a_deleted_queue_go_away() -> None:
    objects = [node("g1", **{GPU: "4"}), queue("gone", capability={GPU: "2"}),
               queue("kept", capability={GPU: "2"})]
    metrics, _, simulation = run(objects)
    assert set(gpu_series(metrics, "elastic_gpu_quota")) == {("gone", GPU), ("kept", GPU)}
    simulation.cache.delete_queue("gone")
    result = simulation.scheduler.run_once()
    assert result is not None
    metrics.cycle(simulation.scheduler.timings, result, simulation.cache)
    assert gpu_series(metrics, "elastic_gpu_quota") == {("kept", GPU): 2}
    assert gpu_series(metrics, "elastic_gpu_used") == {("kept", GPU): 0}


def reclaim_scene(cpu_victims: bool = False) -> list[dict]:
    """Queue a holds every GPU of the node; queue b's pod asks one back."""
    extra = {} if cpu_victims else {GPU: "1"}
    return [node("n1", cpu="4", memory="16Gi", **{GPU: "4"}), queue("a"),
            queue("b", capability={GPU: "2"}),
            *(pod(f"a-{i}", cpu="1", queue="a", node_name="n1", **extra)
              for i in range(4)),
            pod("b-0", cpu="1", queue="b", **{GPU: "1"})]


def test_gpu_preemptions_count_victims_holding_gpus_by_their_queue() -> None:
    metrics, result, _ = run(reclaim_scene(), RECLAIM_CONF)
    [eviction] = result.evictions
    assert eviction.task.startswith("default/a-") and eviction.action == "reclaim"
    counted = {dict(k)["queue"]: (dict(k)["strategy"], dict(k)["action"], v)
               for k, v in series(metrics, "elastic_gpu_preemptions_total").items()}
    assert counted == {"a": (eviction.strategy or "none", "reclaim", 1)}
    assert gpu_series(metrics, "elastic_gpu_used") == {("a", GPU): 3, ("b", GPU): 0}
    # The same reclaim of pods that hold no GPU is no GPU preemption.
    metrics, result, _ = run(reclaim_scene(cpu_victims=True), RECLAIM_CONF)
    assert len(result.evictions) == 1
    assert series(metrics, "elastic_gpu_preemptions_total") == {}
    assert value(metrics, "volcano_eviction_total", action="reclaim") == 1


def test_an_eviction_without_a_strategy_or_queue_is_labelled_from_the_cache() -> None:
    """Evictions name their strategy once eviction strategies choose victims; until then,
    and for an eviction that names no queue, the label values are "none" and the
    victim's queue as the cache knows it."""
    _, _, simulation = run(reclaim_scene(), RECLAIM_CONF)
    metrics = Metrics()
    result = SessionResult()
    result.evictions = [
        Eviction("default/a-0", "n1", "preempt", "default/b-0"),
        Eviction("default/a-1", "n1", "reclaim", "default/b-0", queue="a",
                 strategy="LowestPriority"),
        Eviction("default/gone", "n1", "reclaim", "default/b-0", queue="a"),
    ]
    metrics.cycle({}, result, simulation.cache)
    assert series(metrics, "elastic_gpu_preemptions_total") == {
        (("action", "preempt"), ("queue", "a"), ("strategy", "none")): 1,
        (("action", "reclaim"), ("queue", "a"), ("strategy", "LowestPriority")): 1}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["q1", "q2"]), st.integers(0, 3)),
                min_size=1, max_size=8),
       st.integers(min_value=0, max_value=8))
def test_gpu_figures_add_up_to_the_pods_bound(pods: list[tuple[str, int]],
                                              gpus: int) -> None:
    """On generated pods (some asking no GPU) and a node of `gpus` GPUs: a queue's used
    GPUs are the GPUs of its pods bound, its allocations and waits its GPU pods bound."""
    objects = [node("n1", cpu="16", memory="64Gi", **{GPU: str(gpus)}),
               queue("q1"), queue("q2", capability={GPU: "3"})]
    for i, (queue_name, count) in enumerate(pods):
        extra = {GPU: str(count)} if count else {}
        objects.append(pod(f"p{i}", cpu="1", queue=queue_name, creation=stamp(30), **extra))
    metrics, result, _ = run(objects)
    for queue_name in ("q1", "q2"):
        bound = [count for i, (q, count) in enumerate(pods)
                 if q == queue_name and f"default/p{i}" in result.binds]
        used = gpu_series(metrics, "elastic_gpu_used").get((queue_name, GPU))
        if sum(bound) or queue_name == "q2":  # (q2 has a quota: a series even at 0)
            assert used == sum(bound)
        else:
            assert used is None
        gpu_pods = sum(1 for count in bound if count)
        allocations = value(metrics, "elastic_gpu_allocations_total", queue=queue_name)
        assert (allocations or 0) == gpu_pods
        waits = value(metrics, "elastic_gpu_wait_seconds_count", queue=queue_name)
        assert (waits or 0) == gpu_pods
    assert gpu_series(metrics, "elastic_gpu_quota") == {("q2", GPU): 3}


def promtool() -> str:
    """Prometheus' own checker, where installed (CI sets PROMTOOL); skipped otherwise."""
    found = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if not found:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return found


def test_promtool_finds_the_exposition_sound() -> None:
    """`promtool check metrics` parses the exposition after a GPU reclaim; its only lint
    findings are on names kept as Volcano spells them (`..._milliseconds`, `..._count`
    gauges), none on ours."""
    metrics, result, _ = run(reclaim_scene(), RECLAIM_CONF)
    assert result.evictions
    checked = subprocess.run([promtool(), "check", "metrics"],
                             input=generate_latest(metrics.registry), capture_output=True,
                             timeout=60)
    findings = (checked.stdout + checked.stderr).decode().strip().splitlines()
    assert checked.returncode in (0, 3), findings  # 3: lint findings only
    assert findings and all(line.startswith("volcano_") for line in findings), findings


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The daemon's /metrics over HTTP, sample by sample."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_the_daemon_exports_gpu_figures_after_a_reclaim(tmp_path: Path) -> None:
    """A daemon on the API server stand-in reclaims a GPU from queue a for queue b's pod;
    the scrape shows the preemption, then (once the victim is gone) b's allocation, wait
    and use."""
    from tests.apiserver import FakeApiServer, wait_for
    from tests.kube.conftest import start_daemon

    with FakeApiServer(bookmark_interval=0.1) as server:
        server.create_all(reclaim_scene()[:-1])
        daemon, stop = start_daemon(server, tmp_path, RECLAIM_CONF)
        http = serve(daemon.metrics, "127.0.0.1:0", daemon.period)
        port = http.server_address[1]
        try:
            used = ("elastic_gpu_used", (("card", GPU), ("queue", "a")))
            wait_for(lambda: scrape(port).get(used) == 4, timeout=10)
            server.create_all(reclaim_scene()[-1:])
            deleting = wait_for(lambda: [p for p in server.objects("Pod")
                                         if p["metadata"].get("deletionTimestamp")],
                                timeout=10)
            assert len(deleting) == 1
            # (the eviction is sent before the cycle is recorded)
            preempted = wait_for(lambda: [(labels, v) for (name, labels), v
                                          in scrape(port).items()
                                          if name == "elastic_gpu_preemptions_total"])
            assert len(preempted) == 1
            labels = dict(preempted[0][0])
            assert (labels["queue"], labels["action"], preempted[0][1]) == ("a", "reclaim", 1)
            server.finish_deletion("default", deleting[0]["metadata"]["name"])
            wait_for(lambda: any(b.pod == "b-0" and b.code == 201
                                 for b in server.bindings()), timeout=10)
            b = (("queue", "b"),)
            wait_for(lambda: scrape(port).get(("elastic_gpu_allocations_total", b)) == 1)
            figures = scrape(port)
            assert figures[used] == 3
            assert figures["elastic_gpu_used", (("card", GPU), ("queue", "b"))] == 1
            assert figures["elastic_gpu_quota", (("card", GPU), ("queue", "b"))] == 2
            assert ("elastic_gpu_quota", (("card", GPU), ("queue", "a"))) not in figures
            assert figures["elastic_gpu_wait_seconds_count", b] == 1
            # created just now by the stand-in: bound within seconds
            assert figures["elastic_gpu_wait_seconds_bucket", (("le", "15.0"), *b)] == 1
            assert ("elastic_gpu_allocations_total", (("queue", "a"),)) not in figures
        finally:
            http.shutdown()
            stop()
