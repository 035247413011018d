"""The daemon's metrics: units stated and consistent, the documented table equal to what
the code registers, per-PodGroup series for PodGroups only, queue and card figures,
measured on real sessions (Simulation runs the daemon's Scheduler on an in-memory cache).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import conf, gang, node, pod, podgroup, queue
from vscheduler.framework.results import SessionResult
from vscheduler.kube.metrics import Metrics, markdown_table
from vscheduler.simulate import Simulation

ROOT = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"
CARD_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: capacity-card}, {name: nodeorder}]
"""


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
