"""`vscheduler bench`: the figures it prints, its clusters, and sampling's determinism."""

from __future__ import annotations

import json

from tests.invariants import run_checked
from vscheduler.bench import BENCH_CONF, BenchSpec, generate
from vscheduler.cli import main
from vscheduler.conf import parse_conf
from vscheduler.framework.placement import NodeSampling
from vscheduler.simulate import Simulation


def test_bench_prints_figures_for_every_phase(capsys):
    assert main(["bench", "--nodes", "20", "--jobs", "5", "--tasks-per-job", "3",
                 "--running", "30", "--sessions", "2", "--output", "json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["pods"] == 45
    assert figures["cache_bytes_per_pod"] > 0 and figures["peak_rss_mib"] > 0
    first, second = figures["sessions"]
    assert set(first["phases_ms"]) == {"snapshot", "open", "enqueue", "allocate",
                                       "backfill", "close"}
    assert first["binds"] == 15 and second["binds"] == 0


def test_the_same_seed_gives_the_same_cluster_and_another_seed_another():
    spec = BenchSpec(nodes=10, jobs=4, running=20, seed=7)
    assert generate(spec) == generate(spec)
    assert generate(spec) != generate(BenchSpec(nodes=10, jobs=4, running=20, seed=8))


def _decisions(sampling: NodeSampling) -> str:
    spec = BenchSpec(nodes=300, jobs=40, tasks_per_job=3, running=300, seed=5)
    simulation = Simulation(parse_conf(BENCH_CONF), ("vscheduler",), node_sampling=sampling)
    simulation.load([(f"b#{i}", o) for i, o in enumerate(generate(spec))])
    run_checked(simulation, 2)
    return json.dumps(simulation.report.as_dict())


def test_with_sampling_decisions_hold_the_invariants_and_repeat():
    sampling = NodeSampling()  # 300 nodes: 48% are enough, from a rotating start
    assert sampling.nodes_to_find(300) == 144
    assert _decisions(sampling) == _decisions(NodeSampling())


def test_sampling_sizes_follow_volcano():
    sampling = NodeSampling()
    assert sampling.nodes_to_find(100) == 100
    assert sampling.nodes_to_find(1000) == 420
    assert sampling.nodes_to_find(5000) == 500
    assert sampling.nodes_to_find(100_000) == 5000
    assert NodeSampling(percentage=100).nodes_to_find(5000) == 5000
    assert NodeSampling(percentage=20).nodes_to_find(5000) == 1000


def test_churn_brings_new_pods_to_every_later_session(capsys):
    assert main(["bench", "--nodes", "20", "--jobs", "0", "--running", "40", "--sessions",
                 "3", "--churn", "4", "--no-memory", "--output", "json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    first, *later = figures["sessions"]
    assert first["binds"] == 0
    # the arrivals are placed; the pods that finished made room
    assert [s["binds"] for s in later] == [4, 4]
    assert all("snapshot" in s["phases_ms"] for s in later)
