"""`vscheduler bench`: the figures it prints, its clusters, and sampling's determinism."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.invariants import run_checked
from vscheduler.bench import (
    BENCH_CONF,
    PREEMPT_CONF,
    TIDAL_CONF,
    BenchSpec,
    generate,
    minimum_tidal_evictions,
)
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


def test_tidal_scene_reports_evictions_against_the_fewest_that_free_enough(capsys):
    assert main(["bench", "--scene", "tidal", "--nodes", "20", "--jobs", "10", "--sessions",
                 "2", "--no-memory", "--output", "json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["scene"] == "tidal"
    # 20 nodes, each full with a gang of 8 one-GPU pods, and 10 inference pods
    assert figures["pods"] == 20 * 8 + 10
    first, second = figures["sessions"]
    assert "reclaim" in first["phases_ms"]
    # 10 pods need 10 cards: two whole gangs (16 pods) free enough
    assert figures["minimum_evictions"] == 16
    # exactly the fewest (whole gangs, released GPUs reused), and the inference pods
    # are bound once the evicted pods are gone
    assert first["evictions"] == 16
    assert figures["evictions"] == first["evictions"] + second["evictions"]
    assert figures["evictions_ratio"] == round(figures["evictions"] / 16, 3)
    assert second["binds"] == 10


def test_tidal_scene_text_report_names_the_evictions_and_the_minimum(capsys):
    assert main(["bench", "--scene", "tidal", "--nodes", "4", "--jobs", "3",
                 "--no-memory"]) == 0
    out = capsys.readouterr().out
    assert "cluster (tidal): 4 nodes of 8 GPUs" in out
    assert "fewest with gangs whole: 8; ratio" in out
    assert "reclaim" in out.splitlines()[3] and "evictions" in out.splitlines()[3]


@pytest.mark.parametrize(("nodes", "gpus", "pending", "fewest"), [
    (20, 8, 10, 16), (5000, 8, 500, 504), (10, 8, 8, 8), (10, 8, 9, 16), (10, 8, 0, 0),
    # more pending pods than cards: every gang, and no more
    (2, 8, 40, 16), (3, 4, 5, 8)])
def test_tidal_minimum_is_whole_gangs_enough_for_the_pending_pods(nodes, gpus, pending,
                                                                 fewest):
    spec = BenchSpec(nodes=nodes, gpus_per_node=gpus, jobs=pending, scene="tidal")
    assert minimum_tidal_evictions(spec) == fewest


def test_tidal_scene_is_seed_shaped():
    objects = generate(BenchSpec(nodes=3, jobs=2, queues=2, scene="tidal"))
    queues = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Queue"}
    assert queues["queue-inference"]["priority"] == 80000
    assert queues["queue-inference"]["reclaimable"] is False
    assert {q["priority"] for n, q in queues.items() if n != "queue-inference"} == {20000}
    assert all(q["reclaimable"] for n, q in queues.items() if n != "queue-inference")
    pods = [o for o in objects if o["kind"] == "Pod"]
    running = [p for p in pods if p["spec"].get("nodeName")]
    pending = [p for p in pods if not p["spec"].get("nodeName")]
    assert len(running) == 24 and len(pending) == 2
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in running} == {"Job"}
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pending} == {"ReplicaSet"}
    # each node holds exactly one gang, one card per pod
    per_node: dict[str, set[str]] = {}
    for pod in running:
        per_node.setdefault(pod["spec"]["nodeName"], set()).add(
            pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"])
        assert pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert len(per_node) == 3 and all(len(groups) == 1 for groups in per_node.values())
    groups = [o for o in objects if o["kind"] == "PodGroup"]
    assert all(g["metadata"]["annotations"]["volcano.sh/service.type"] == "training"
               and g["spec"]["minMember"] == 8 for g in groups)


def test_tidal_scene_runs_the_conf_kept_in_conf_dir():
    with open(Path(__file__).parent.parent / "conf" / "tidal-reclaim.conf",
              encoding="utf-8") as handle:
        assert yaml.safe_load(handle) == yaml.safe_load(TIDAL_CONF)


def test_volcano_preempt_scene_runs_reclaim_and_preempt_on_a_full_cluster(capsys):
    assert main(["bench", "--scene", "volcano-preempt", "--nodes", "20", "--jobs", "9",
                 "--sessions", "2", "--no-memory", "--output", "json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    spec = BenchSpec(nodes=20, jobs=9, scene="volcano-preempt")
    objects = generate(spec)
    nodes = [o for o in objects if o["kind"] == "Node"]
    cards = sum(int(v) for n in nodes for k, v in n["status"]["allocatable"].items()
                if k.startswith("nvidia.com/"))
    pods = [o for o in objects if o["kind"] == "Pod"]
    # every card is taken, and the pending pods are the jobs asked for
    assert sum(1 for p in pods if p["spec"].get("nodeName")) == cards
    assert sum(1 for p in pods if not p["spec"].get("nodeName")) == 9
    assert figures["pods"] == cards + 9
    for session in figures["sessions"]:
        assert {"reclaim", "preempt"} <= set(session["phases_ms"])
        assert session["evictions"] >= 0
    assert figures["evictions"] == sum(s["evictions"] for s in figures["sessions"])
    assert "minimum_evictions" not in figures


def test_volcano_preempt_scene_decisions_hold_the_invariants_and_repeat():
    def decisions() -> str:
        spec = BenchSpec(nodes=12, jobs=6, tasks_per_job=2, scene="volcano-preempt")
        simulation = Simulation(parse_conf(PREEMPT_CONF), ("vscheduler",))
        simulation.load([(f"b#{i}", o) for i, o in enumerate(generate(spec))])
        run_checked(simulation, 2)
        return json.dumps(simulation.report.as_dict())

    assert decisions() == decisions()


def test_an_unknown_scene_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--scene", "tides"])
    assert "invalid choice: 'tides'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="scene must be one of"):
        BenchSpec(scene="tides")


@given(nodes=st.integers(1, 6), gpus=st.integers(1, 8), pending=st.integers(0, 60))
@settings(max_examples=60, deadline=None)
def test_tidal_minimum_matches_a_search_over_the_generated_gangs(nodes, gpus, pending):
    spec = BenchSpec(nodes=nodes, gpus_per_node=gpus, jobs=pending, scene="tidal")
    cards: dict[str, int] = {}
    for obj in generate(spec):
        if obj["kind"] == "Pod" and obj["spec"].get("nodeName"):
            group = obj["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            cards[group] = cards.get(group, 0) + int(
                obj["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
    # the fewest pods over every set of whole gangs that frees a card per pending pod
    # (all of them when none does)
    fewest = min((sum(cards[g] for g in chosen)
                  for size in range(len(cards) + 1)
                  for chosen in itertools.combinations(sorted(cards), size)
                  if sum(cards[g] for g in chosen) >= pending),
                 default=sum(cards.values()))
    assert minimum_tidal_evictions(spec) == fewest
