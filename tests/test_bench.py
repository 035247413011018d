"""`vscheduler bench`: the figures it prints, its clusters, and sampling's determinism."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.invariants import run_checked
from vscheduler.bench import (
    BENCH_CONF,
    HIERARCHY_CONF,
    PREEMPT_CONF,
    TIDAL_CONF,
    TOPOLOGY_CONF,
    TOPOLOGY_TIERS,
    ZONES,
    BenchSpec,
    anti_affinity_check,
    generate,
    minimum_tidal_evictions,
    replicas,
    scene_spec,
    topology_check,
    topology_domains,
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


@pytest.mark.parametrize("leaves", [1, 10, 11, 250])
def test_hierarchy_scene_hangs_its_queues_off_a_tree_of_departments(leaves):
    """The leaves (where the jobs are) ten to a department, departments likewise, the
    top under root; every parent exists, and the scene runs and holds the invariants."""
    spec = BenchSpec(nodes=30, queues=leaves, jobs=12, running=60, scene="hierarchy")
    objects = generate(spec)
    queues = {o["metadata"]["name"]: o["spec"].get("parent") for o in objects
              if o["kind"] == "Queue"}
    children: dict[str, int] = {}
    for name, parent in queues.items():
        assert parent == "root" or parent in queues, name
        children[parent] = children.get(parent, 0) + 1
    assert max(children.values()) <= 10
    used = {o["spec"]["queue"] for o in objects if o["kind"] == "PodGroup"}
    assert used <= {f"queue-{q}" for q in range(leaves)}  # jobs in leaves only
    assert all(q not in children for q in used)
    simulation = Simulation(parse_conf(HIERARCHY_CONF), ("vscheduler",))
    simulation.load([(f"b#{i}", o) for i, o in enumerate(objects)])
    run_checked(simulation, 2)
    assert simulation.report.binds


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


def _bench_json(capsys, *flags: str) -> dict:
    assert main(["bench", "--no-memory", "--output", "json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_arrivals_and_departures_are_set_apart(capsys):
    # 20 nodes of 8 cards (two MIG nodes of 56 slices): 40 running leave room for all
    figures = _bench_json(capsys, "--nodes", "20", "--jobs", "0", "--running", "40",
                          "--sessions", "3", "--arrive", "5", "--depart", "2")
    assert figures["spec"]["arrive"] == 5 and figures["spec"]["depart"] == 2
    first, *later = figures["sessions"]
    assert first["binds"] == 0 and [s["binds"] for s in later] == [5, 5]
    arrivals_only = _bench_json(capsys, "--nodes", "20", "--jobs", "0", "--running", "40",
                                "--sessions", "2", "--churn", "3", "--depart", "0")
    assert arrivals_only["spec"]["arrive"] == 3 and arrivals_only["spec"]["depart"] == 0
    assert arrivals_only["sessions"][1]["binds"] == 3


def test_departures_alone_free_room_for_work_that_waited(capsys):
    # one node of 8 cards, all taken; a job of one pod waits until a pod finishes
    figures = _bench_json(capsys, "--nodes", "1", "--mig-every", "0", "--running", "8",
                          "--shape", "1x1", "--sessions", "3", "--depart", "1")
    assert [s["binds"] for s in figures["sessions"]] == [0, 1, 0]


def test_churn_is_both_arrivals_and_departures():
    spec = BenchSpec(churn=7)
    assert (spec.arrive, spec.depart) == (7, 7)
    assert (BenchSpec(churn=7, arrive=0).arrive, BenchSpec(churn=7, depart=1).depart) == (0, 1)
    with pytest.raises(ValueError, match="arrive must be 0 or more"):
        BenchSpec(arrive=-1)


def test_shape_gives_the_pending_work_and_leaves_the_running_jobs_alone(capsys):
    objects = generate(BenchSpec(nodes=10, running=12, tasks_per_job=4, jobs=3,
                                 pending_tasks=5))
    groups = {o["metadata"]["name"]: o["spec"]["minMember"] for o in objects
              if o["kind"] == "PodGroup"}
    assert {n: m for n, m in groups.items() if n.startswith("train")} == {
        "train-00000": 5, "train-00001": 5, "train-00002": 5}
    assert {n: m for n, m in groups.items() if n.startswith("running")} == {
        "running-00000": 4, "running-00001": 4, "running-00002": 4}
    figures = _bench_json(capsys, "--nodes", "10", "--running", "12", "--shape", "3x5")
    assert figures["spec"]["jobs"] == 3 and figures["spec"]["pending_tasks"] == 5
    assert figures["pods"] == 12 + 15 and figures["sessions"][0]["binds"] == 15
    assert main(["bench", "--nodes", "4", "--shape", "2x3", "--no-memory"]) == 0
    assert "2 pending jobs x 3 tasks" in capsys.readouterr().out


@pytest.mark.parametrize(("flags", "words"), [
    (["--shape", "8"], "is not JOBSxTASKS"),
    (["--shape", "4x0"], "must be 1 or more"),
    (["--shape=-1x2"], "must be 0 or more"),
    (["--shape", "ax2"], "'a' is not a whole number"),
    (["--shape", "2x2", "--jobs", "3"], "not allowed with argument"),
    (["--arrive", "-1"], "must be 0 or more"),
    (["--depart", "x"], "not a whole number"),
])
def test_bad_bench_flags_are_refused_by_name(capsys, flags, words):
    with pytest.raises(SystemExit) as exited:
        main(["bench", *flags])
    assert exited.value.code == 2
    assert words in capsys.readouterr().err


def test_the_tidal_scene_takes_no_shape(capsys):
    assert main(["bench", "--scene", "tidal", "--shape", "2x2"]) == 2
    assert "takes no pending_tasks" in capsys.readouterr().err


def test_the_summary_holds_medians_two_runs_are_compared_by(capsys):
    figures = _bench_json(capsys, "--nodes", "20", "--jobs", "5", "--running", "30",
                          "--sessions", "4", "--churn", "3")
    summary = figures["summary"]
    sessions = figures["sessions"]
    totals = sorted(s["session_ms"] for s in sessions)
    assert summary["median_session_ms"] == round((totals[1] + totals[2]) / 2, 2)
    later = sorted(s["session_ms"] for s in sessions[1:])
    assert summary["median_later_session_ms"] == later[1]
    assert summary["first_session_ms"] == sessions[0]["session_ms"]
    for phase, value in summary["median_later_phases_ms"].items():
        assert value == sorted(s["phases_ms"].get(phase, 0.0) for s in sessions[1:])[1]
    assert set(summary["median_phases_ms"]) == {"snapshot", "open", "enqueue", "allocate",
                                                "backfill", "close"}
    assert summary["binds"] == sum(s["binds"] for s in sessions)
    assert summary["sessions"] == 4 and summary["pods"] == figures["pods"]
    assert summary["load_ms"] == figures["load_ms"]
    assert summary["pending_after_last"] == sessions[-1]["pending"]
    # every figure a script compares is a number or a map of numbers (or None)
    for value in summary.values():
        assert value is None or isinstance(value, int | float | dict)


def test_one_session_has_no_later_medians(capsys):
    summary = _bench_json(capsys, "--nodes", "5", "--jobs", "1")["summary"]
    assert summary["median_later_session_ms"] is None
    assert summary["median_later_phases_ms"] is None
    assert summary["median_session_ms"] == summary["first_session_ms"]
    assert main(["bench", "--nodes", "5", "--jobs", "1", "--no-memory"]) == 0
    assert "median session: " in capsys.readouterr().out


def test_overload_scene_is_the_issues_cluster():
    spec = scene_spec("overload")
    assert (spec.nodes, spec.running, spec.jobs * spec.tasks_pending) == (5000, 60_000, 90_000)
    # its cards: every tenth node is split into 7 MIG slices a card
    cards = sum(spec.gpus_per_node * (7 if i % spec.mig_every == spec.mig_every - 1 else 1)
                for i in range(spec.nodes))
    assert cards == 64_000 and cards - spec.running < spec.jobs  # overloaded
    # what is given wins over the scene's size
    small = scene_spec("overload", nodes=10, running=None, jobs=6)
    assert (small.nodes, small.running, small.jobs) == (10, 60_000, 6)


def test_overload_scene_scaled_down_places_what_fits_and_keeps_the_rest_pending(capsys):
    # a hundredth of the scene: 50 nodes, 600 running, 900 pending in gangs of four
    figures = _bench_json(capsys, "--scene", "overload", "--nodes", "50", "--running", "600",
                          "--jobs", "225", "--sessions", "2")
    assert figures["scene"] == "overload" and figures["pods"] == 1500
    first, second = figures["sessions"]
    assert 0 < first["binds"] <= 640 - 600
    assert first["pending"] >= 900 - 40 and second["binds"] == 0


def test_the_overload_scene_generates_150000_pods_90000_pending():
    objects = generate(scene_spec("overload"))
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 150_000
    assert sum(1 for p in pods if not p["spec"].get("nodeName")) == 90_000
    assert sum(1 for o in objects if o["kind"] == "Node") == 5000


def test_bench_says_what_a_session_holds_per_pending_pod(capsys):
    """More pods pending than the cluster takes: an extra traced session reports its
    peak per pending pod (none when nothing is pending)."""
    assert main(["bench", "--nodes", "2", "--jobs", "10", "--tasks-per-job", "4",
                 "--running", "0", "--output", "json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["session_bytes_per_pending_pod"] > 0
    assert figures["summary"]["session_bytes_per_pending_pod"] == \
        figures["session_bytes_per_pending_pod"]
    assert main(["bench", "--nodes", "20", "--jobs", "1", "--running", "0",
                 "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["session_bytes_per_pending_pod"] is None


# ------------------------------------------------------------------ topology scene


def test_topology_scene_is_the_issues_cluster():
    spec = scene_spec("topology")
    assert (spec.nodes, spec.running, spec.jobs, spec.tasks_pending) == (5000, 40_000, 100, 64)
    assert spec.topology_tier == 1
    # 5,000 nodes: 313 racks of 16 (the last of 8), 79 rows, 20 blocks, 4 superblocks
    paths = topology_domains(spec)
    assert [len({p[t] for p in paths}) for t in range(4)] == [313, 79, 20, 4]
    assert [name for name, _ in TOPOLOGY_TIERS] == ["rack", "row", "block", "superblock"]


def _topology_objects(spec: BenchSpec) -> tuple[dict, list[dict], list[dict]]:
    objects = generate(spec)
    kinds: dict[str, list[dict]] = {}
    for obj in objects:
        kinds.setdefault(obj["kind"], []).append(obj)
    return kinds, kinds.get("Pod", []), kinds["HyperNode"]


@pytest.mark.parametrize("nodes", [1, 16, 17, 100, 1300])
def test_topology_scene_hypernodes_make_the_tree_it_checks_by(nodes):
    """The HyperNodes, as vscheduler reads them, hold each node in the rack, row, block
    and superblock `topology_domains` (the check's own tree) puts it in."""
    from vscheduler.objects import parse_hypernode
    from vscheduler.topology import from_hypernodes

    spec = BenchSpec(nodes=nodes, running=0, jobs=0, scene="topology")
    kinds, _, hypernodes = _topology_objects(spec)
    names = [n["metadata"]["name"] for n in kinds["Node"]]
    tree = from_hypernodes([parse_hypernode(h) for h in hypernodes],
                           {name: {} for name in names})
    assert tree.ready and not tree.problems
    assert tree.tiers == [1, 2, 3, 4, 5]  # the four tiers and the top above them
    for name, path in zip(names, topology_domains(spec), strict=True):
        chain = [d.name for d in tree.ancestors(tree.leaf_of(name))]
        assert chain == [f"{tier}-{index:04d}" for (tier, _), index in
                         zip(TOPOLOGY_TIERS, path, strict=True)] + ["<cluster-top-hypernode>"]
    for tier, (_, size) in enumerate(TOPOLOGY_TIERS, 1):
        assert all(len(d.children if tier > 1 else d.nodes) <= size
                   for d in tree.by_tier[tier])


@given(nodes=st.integers(1, 60), running=st.integers(0, 600), seed=st.integers(0, 50))
@settings(max_examples=40, deadline=None)
def test_topology_scene_running_pods_fit_and_every_other_takes_a_card(nodes, running, seed):
    spec = BenchSpec(nodes=nodes, running=running, jobs=0, seed=seed, scene="topology")
    kinds, pods, _ = _topology_objects(spec)
    cards: dict[str, int] = {}
    cpu: dict[str, int] = {}
    for pod in pods:
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        node = pod["spec"]["nodeName"]
        cards[node] = cards.get(node, 0) + int(requests.get("nvidia.com/gpu", 0))
        cpu[node] = cpu.get(node, 0) + int(requests["cpu"])
    assert all(count <= spec.gpus_per_node for count in cards.values())
    assert all(used <= spec.cpu_per_node for used in cpu.values())
    # every other pod takes a card, while there is one; then no more are placed
    total_cards = nodes * spec.gpus_per_node
    assert sum(cards.values()) == min((running + 1) // 2, total_cards)
    assert min(running, 2 * total_cards - 1) <= len(pods) <= running
    assert {g["spec"]["minMember"] for g in kinds.get("PodGroup", [])} <= set(
        range(1, spec.tasks_per_job + 1))


def test_topology_scene_takes_cards_unevenly_rack_by_rack():
    """Free cards are scattered: at half the cards taken some racks are mostly busy and
    some mostly free, and most nodes are partly used."""
    spec = BenchSpec(nodes=640, running=5120, jobs=0, scene="topology")
    _, pods, _ = _topology_objects(spec)
    per_node: dict[str, int] = {}
    for pod in pods:
        if "nvidia.com/gpu" in pod["spec"]["containers"][0]["resources"]["requests"]:
            per_node[pod["spec"]["nodeName"]] = per_node.get(pod["spec"]["nodeName"], 0) + 1
    paths = dict(zip((f"node-{i:05d}" for i in range(spec.nodes)), topology_domains(spec),
                     strict=True))
    per_rack: dict[int, int] = {}
    for node, count in per_node.items():
        per_rack[paths[node][0]] = per_rack.get(paths[node][0], 0) + count
    busy = [per_rack.get(rack, 0) / 128 for rack in range(40)]
    assert sum(per_rack.values()) == 2560
    assert max(busy) >= 0.9 and min(busy) <= 0.2
    partly = sum(1 for count in per_node.values() if 0 < count < spec.gpus_per_node)
    assert partly > spec.nodes / 4


def test_topology_scene_pending_gangs_ask_their_tier():
    spec = BenchSpec(nodes=20, running=0, jobs=3, tasks_per_job=5, topology_tier=3,
                     scene="topology")
    kinds, pods, _ = _topology_objects(spec)
    gangs = [g for g in kinds["PodGroup"] if g["metadata"]["name"].startswith("train-")]
    assert [g["spec"]["networkTopology"] for g in gangs] == [
        {"mode": "hard", "highestTierAllowed": 3}] * 3
    assert all(g["spec"]["minMember"] == 5 for g in gangs)
    assert sum(1 for p in pods if not p["spec"].get("nodeName")) == 15


def test_topology_scene_sub_groups_split_each_gang_by_a_pod_label():
    spec = BenchSpec(nodes=20, running=0, jobs=2, tasks_per_job=6, topology_tier=2,
                     sub_groups=3, scene="topology")
    kinds, pods, _ = _topology_objects(spec)
    gangs = [g for g in kinds["PodGroup"] if g["metadata"]["name"].startswith("train-")]
    assert [g["spec"]["subGroupPolicy"][0]["subGroupSize"] for g in gangs] == [2, 2]
    assert all(g["spec"]["subGroupPolicy"][0]["minSubGroups"] == 3 for g in gangs)
    parts = [p["metadata"]["labels"]["bench.vscheduler/part"] for p in pods
             if p["metadata"]["name"].startswith("train-00000-")]
    assert parts == ["0", "0", "1", "1", "2", "2"]


@pytest.mark.parametrize("bad", [{"sub_groups": 4}, {"sub_groups": 3, "scene": "default"}])
def test_sub_groups_must_divide_the_gang_and_belong_to_the_topology_scene(bad):
    settings = {"nodes": 20, "jobs": 2, "tasks_per_job": 6, "scene": "topology", **bad}
    with pytest.raises(ValueError, match="sub_groups"):
        BenchSpec(**settings)


def test_topology_check_counts_sub_groups_across_racks():
    spec = BenchSpec(nodes=40, running=0, jobs=1, tasks_per_job=4, topology_tier=2,
                     sub_groups=2, scene="topology")
    # part 0 (pods 0, 1) across racks 0 and 1; part 1 (pods 2, 3) in rack 1; all in row 0
    binds = {"bench/train-00000-0": "node-00000", "bench/train-00000-1": "node-00016",
             "bench/train-00000-2": "node-00017", "bench/train-00000-3": "node-00018"}
    assert topology_check(spec, binds)["violations"] == 1
    binds["bench/train-00000-1"] = "node-00001"
    assert topology_check(spec, binds)["violations"] == 0


def test_topology_scene_with_sub_groups_keeps_each_in_a_rack(capsys):
    """8 gangs of 40 cards within one block, each in 4 sub-groups of 10 held to a rack:
    all bound, no gang across blocks and no sub-group across racks."""
    figures = _bench_json(capsys, "--topology", "--nodes", "160", "--running", "1280",
                          "--jobs", "8", "--tasks-per-job", "40", "--topology-tier",
                          "block", "--sub-groups", "4", "--sessions", "2")
    check = figures["topology"]
    assert (check["gangs"], check["bound_whole"], check["violations"]) == (8, 8, 0)
    assert check["sub_groups"] == 4


@pytest.mark.parametrize("tier", [1, 2, 3, 4])
def test_topology_scene_places_every_gang_within_one_domain_of_its_tier(capsys, tier):
    # 160 nodes (10 racks of 128 cards) half taken; 8 gangs of 40 cards
    figures = _bench_json(capsys, "--topology", "--nodes", "160", "--running", "1280",
                          "--jobs", "8", "--tasks-per-job", "40", "--topology-tier",
                          str(tier), "--sessions", "2")
    assert figures["scene"] == "topology"
    check = figures["topology"]
    assert check["domains"] == [10, 3, 1, 1]
    assert (check["gangs"], check["bound_whole"], check["bound_in_part"],
            check["violations"]) == (8, 8, 0, 0)
    assert figures["summary"]["topology_violations"] == 0
    assert figures["summary"]["topology_gangs_bound"] == 8
    assert figures["sessions"][0]["binds"] == 320
    assert figures["sessions"][0]["allocate_pods_per_second"] > 0


def test_a_gang_wider_than_a_rack_waits_at_rack_level_and_is_placed_within_a_row(capsys):
    # one row of 4 racks of 128 free cards; gangs of 130 cards
    flags = ("--topology", "--nodes", "64", "--running", "0", "--jobs", "2",
             "--tasks-per-job", "130", "--sessions", "2")
    rack = _bench_json(capsys, *flags)
    assert rack["topology"]["bound_whole"] == 0 and rack["summary"]["binds"] == 0
    row = _bench_json(capsys, *flags, "--topology-tier", "row")
    assert (row["topology"]["bound_whole"], row["topology"]["violations"]) == (2, 0)


def test_topology_check_counts_gangs_across_domains_and_gangs_in_part():
    spec = BenchSpec(nodes=40, running=0, jobs=3, tasks_per_job=2, scene="topology")
    binds = {"bench/train-00000-0": "node-00000", "bench/train-00000-1": "node-00015",
             "bench/train-00001-0": "node-00015", "bench/train-00001-1": "node-00016",
             "bench/train-00002-0": "node-00039", "bench/running-00000-0": "node-00020"}
    check = topology_check(spec, binds)
    # train-0 within rack 0; train-1 across racks 0 and 1; train-2 bound in part
    assert (check["bound_whole"], check["bound_in_part"], check["violations"]) == (2, 1, 1)
    row = topology_check(BenchSpec(nodes=40, running=0, jobs=3, tasks_per_job=2,
                                   topology_tier=2, scene="topology"), binds)
    assert row["violations"] == 0 and row["tier_name"] == "row"


def _pods_left_room_for(spec: BenchSpec, pods: list[dict], binds: dict[str, str]) -> list[int]:
    """Node i -> how many more one-card pods of the scene (8 CPUs, 64 GiB) it takes,
    counted from the generated running pods and `binds`, not by the scheduler."""
    cards = [spec.gpus_per_node] * spec.nodes
    cpus = [spec.cpu_per_node] * spec.nodes
    memory = [spec.memory_gi_per_node] * spec.nodes
    slots = [spec.pods_per_node] * spec.nodes
    requests = {f"{p['metadata']['namespace']}/{p['metadata']['name']}":
                p["spec"]["containers"][0]["resources"]["requests"] for p in pods}
    where = {key: p["spec"]["nodeName"] for key, p in zip(requests, pods, strict=True)
             if p["spec"].get("nodeName")}
    for key, node in {**where, **binds}.items():
        i = int(node.removeprefix("node-"))
        cards[i] -= int(requests[key].get("nvidia.com/gpu", 0))
        cpus[i] -= int(requests[key]["cpu"])
        memory[i] -= int(requests[key]["memory"].removesuffix("Gi"))
        slots[i] -= 1
    return [min(c, cpu // 8, gib // 64, s)
            for c, cpu, gib, s in zip(cards, cpus, memory, slots, strict=True)]


@given(nodes=st.integers(1, 48), running=st.integers(0, 400), jobs=st.integers(0, 6),
       tasks=st.integers(1, 40), tier=st.integers(1, 4), seed=st.integers(0, 20))
@settings(max_examples=25, deadline=None)
def test_topology_scene_decisions_hold_the_invariants_and_the_topology(nodes, running, jobs,
                                                                       tasks, tier, seed):
    """Every gang bound is bound whole within one domain of its tier, and one left
    waiting fits in no such domain with what is left (one queue: no share holds it)."""
    spec = BenchSpec(nodes=nodes, running=running, jobs=jobs, tasks_per_job=tasks,
                     topology_tier=tier, seed=seed, queues=1, scene="topology")
    objects = generate(spec)
    simulation = Simulation(parse_conf(TOPOLOGY_CONF), ("vscheduler",))
    simulation.load([(f"b#{i}", o) for i, o in enumerate(objects)])
    run_checked(simulation, 2)
    check = topology_check(spec, simulation.report.binds)
    assert check["violations"] == 0 and check["bound_in_part"] == 0
    if check["bound_whole"] < jobs:
        room = _pods_left_room_for(spec, [o for o in objects if o["kind"] == "Pod"],
                                   simulation.report.binds)
        per_domain: dict[int, int] = {}
        for i, path in enumerate(topology_domains(spec)):
            per_domain[path[tier - 1]] = per_domain.get(path[tier - 1], 0) + room[i]
        assert max(per_domain.values()) < tasks


def test_topology_scene_text_report_says_the_tree_and_the_check(capsys):
    assert main(["bench", "--scene", "topology", "--nodes", "40", "--running", "100",
                 "--jobs", "2", "--tasks-per-job", "8", "--topology-tier", "block",
                 "--no-memory"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cluster (topology): 40 nodes of 8 GPUs in 3 racks, 1 row, 1 "
                          "block, 1 superblock; 100 pods running; 2 gangs x 8 one-GPU pods "
                          "pending, each within one block (tier 3); seed 1\n")
    assert "topology: 2 of 2 gangs bound whole, 0 in part; 0 across more than one block " \
           "(violations)" in out


def test_topology_flag_is_the_topology_scene_and_tiers_go_by_number_or_name(capsys):
    by_flag = _bench_json(capsys, "--topology", "--nodes", "20", "--running", "10",
                          "--jobs", "1", "--tasks-per-job", "4", "--topology-tier",
                          "superblock")
    by_scene = _bench_json(capsys, "--scene", "topology", "--nodes", "20", "--running",
                           "10", "--jobs", "1", "--tasks-per-job", "4", "--topology-tier", "4")
    assert by_flag["spec"] == by_scene["spec"] and by_flag["spec"]["topology_tier"] == 4
    assert by_flag["summary"]["binds"] == by_scene["summary"]["binds"] == 4


@pytest.mark.parametrize(("flags", "words"), [
    (["--topology-tier", "0"], "'0' is not a tier: 1 to 4 or one of rack, row, block, "
                               "superblock"),
    (["--topology-tier", "spine"], "'spine' is not a tier"),
    (["--topology", "--scene", "tidal"], "not allowed with argument"),
])
def test_bad_topology_flags_are_refused_by_name(capsys, flags, words):
    with pytest.raises(SystemExit) as exited:
        main(["bench", *flags])
    assert exited.value.code == 2
    assert words in capsys.readouterr().err


def test_a_topology_tier_out_of_the_tree_is_refused():
    with pytest.raises(ValueError, match="topology_tier must be 1 to 4"):
        BenchSpec(scene="topology", topology_tier=5)


def test_topology_scene_runs_the_conf_kept_in_conf_dir():
    with open(Path(__file__).parent.parent / "conf" / "topology.conf",
              encoding="utf-8") as handle:
        assert yaml.safe_load(handle) == yaml.safe_load(TOPOLOGY_CONF)
    assert "network-topology-aware" in parse_conf(TOPOLOGY_CONF).plugin_names()


def test_bench_fails_when_a_gang_is_across_domains(capsys, monkeypatch):
    import vscheduler.bench

    real = vscheduler.bench.topology_check

    def one_wrong(spec, binds):
        return {**real(spec, binds), "violations": 1}

    flags = ["bench", "--topology", "--nodes", "20", "--running", "0", "--jobs", "1",
             "--tasks-per-job", "4", "--no-memory"]
    assert main(flags) == 0
    monkeypatch.setattr(vscheduler.bench, "topology_check", one_wrong)
    assert main(flags) == 1
    captured = capsys.readouterr()
    assert "1 across more than one rack (violations)" in captured.out
    assert "vscheduler: 1 gang(s) across more than one rack, 0 bound in part" in captured.err


# ------------------------------------------------------------------ anti-affinity scene


def test_anti_affinity_scene_is_the_issues_cluster():
    spec = scene_spec("anti-affinity")
    assert (spec.nodes, spec.running, spec.jobs, spec.sessions, spec.tasks_pending) == \
        (5000, 40_000, 1000, 2, 1)
    assert not spec.zone_spread
    # the running cluster alone: the replicas arrive after the first session
    small = replace(spec, nodes=20, running=60, jobs=7)
    objects = generate(small)
    assert not [o for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName")]
    assert sum(o["kind"] == "Pod" for o in objects) == 60
    pods = replicas(small)
    assert len(pods) == 7 and len({p["metadata"]["name"] for p in pods}) == 7
    for pod in pods:
        assert pod["metadata"]["labels"] == {"app": "web"}
        assert "scheduling.k8s.io/group-name" not in pod["metadata"]["annotations"]
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        assert pod["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"] == [
            {"labelSelector": {"matchLabels": {"app": "web"}},
             "topologyKey": "kubernetes.io/hostname"}]
        assert "topologySpreadConstraints" not in pod["spec"]
    spread = replicas(replace(small, zone_spread=True))[0]["spec"]["topologySpreadConstraints"]
    assert spread == [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                       "whenUnsatisfiable": "DoNotSchedule",
                       "labelSelector": {"matchLabels": {"app": "web"}}}]


@pytest.mark.parametrize("scene", ["default", "tidal", "topology", "anti-affinity"])
def test_every_scenes_nodes_carry_their_hostname_and_zone(scene):
    nodes = [o for o in generate(scene_spec(scene, nodes=7, running=10, jobs=2))
             if o["kind"] == "Node"]
    assert len(nodes) == 7
    for i, node in enumerate(nodes):
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert labels["topology.kubernetes.io/zone"] == f"zone-{i % ZONES}"


def test_anti_affinity_scene_places_every_replica_in_the_second_session(capsys):
    figures = _bench_json(capsys, "--scene", "anti-affinity", "--nodes", "40", "--running",
                          "160", "--jobs", "30")
    first, second = figures["sessions"]
    assert first["binds"] == 0 and first["pending"] == 0
    assert second["binds"] == 30 and second["pending"] == 0
    check = figures["anti_affinity"]
    assert check == {"replicas": 30, "bound": 30, "pending": 0, "zone_spread": False,
                     "nodes_shared": 0, "zones": check["zones"], "zone_skew": check["zone_skew"],
                     "violations": 0}
    assert sum(check["zones"]) == 30
    summary = figures["summary"]
    assert summary["anti_affinity_bound"] == 30 and summary["anti_affinity_violations"] == 0
    assert summary["median_later_session_ms"] == second["session_ms"]
    assert summary["median_later_phases_ms"]["allocate"] == second["phases_ms"]["allocate"]


def test_anti_affinity_scene_leaves_replicas_beyond_one_a_node_pending(capsys):
    figures = _bench_json(capsys, "--scene", "anti-affinity", "--nodes", "12", "--running",
                          "40", "--jobs", "20", "--sessions", "3")
    assert [s["binds"] for s in figures["sessions"]] == [0, 12, 0]
    assert [s["pending"] for s in figures["sessions"]] == [0, 8, 8]
    check = figures["anti_affinity"]
    assert (check["bound"], check["pending"], check["violations"]) == (12, 8, 0)
    assert check["zones"] == [4, 4, 4]


def test_zone_spread_keeps_the_zones_within_one_replica(capsys):
    figures = _bench_json(capsys, "--scene", "anti-affinity", "--zone-spread", "--nodes",
                          "30", "--running", "100", "--jobs", "13")
    check = figures["anti_affinity"]
    assert check["zone_spread"] and check["bound"] == 13
    assert sorted(check["zones"]) == [4, 4, 5] and check["zone_skew"] == 1
    assert check["violations"] == 0


@given(nodes=st.integers(1, 30), running=st.integers(0, 200), count=st.integers(0, 40),
       spread=st.booleans(), seed=st.integers(0, 20))
@settings(max_examples=20, deadline=None)
def test_anti_affinity_scene_decisions_hold_the_invariants_and_the_rules(nodes, running,
                                                                         count, spread, seed):
    """Judged from the binds themselves: no two replicas on one node, as many bound as
    there are nodes (every node has room for one), and with the spread no zone more than
    one replica ahead of another; the rest wait, saying anti-affinity refused them."""
    spec = BenchSpec(nodes=nodes, running=running, jobs=count, zone_spread=spread, seed=seed,
                     sessions=2, scene="anti-affinity")
    simulation = Simulation(parse_conf(BENCH_CONF), ("vscheduler",))
    simulation.load([(f"b#{i}", o) for i, o in enumerate(generate(spec))])
    run_checked(simulation, 1)
    simulation.load([(f"r#{i}", o) for i, o in enumerate(replicas(spec))])
    run_checked(simulation, 1)
    placed = [node for key, node in simulation.report.binds.items()
              if "/web-" in key]
    assert len(placed) == len(set(placed)) == min(nodes, count)
    if spread:
        zones = [0] * min(nodes, ZONES)
        for node in placed:
            zones[int(node.rsplit("-", 1)[1]) % ZONES] += 1
        assert max(zones) - min(zones) <= 1
    check = anti_affinity_check(spec, simulation.report.binds)
    assert (check["bound"], check["violations"]) == (len(placed), 0)
    pending = simulation.report.as_dict()["pendingJobs"]
    assert len(pending) == count - len(placed)
    for why in pending.values():
        assert any("didn't match pod anti-affinity rules" in r for r in why["reasons"])


def test_bench_fails_when_replicas_share_a_node(capsys, tmp_path):
    """Without the anti-affinity filter (a conf that turns it off) 30 replicas on 12
    nodes must share: the check sees it and bench exits 1."""
    conf = tmp_path / "no-pod-affinity.conf"
    conf.write_text(BENCH_CONF.replace(
        "  - name: predicates\n",
        "  - name: predicates\n    arguments:\n      predicate.PodAffinityEnable: false\n"),
        encoding="utf-8")
    flags = ["bench", "--scene", "anti-affinity", "--nodes", "12", "--running", "40",
             "--jobs", "30", "--no-memory"]
    assert main(flags) == 0
    capsys.readouterr()
    assert main([*flags, "--conf", str(conf)]) == 1
    captured = capsys.readouterr()
    assert "anti-affinity: 30 of 30 replicas bound" in captured.out
    shared = int(captured.err.split("vscheduler: ")[1].split(" node(s)")[0])
    assert shared >= 6
    assert f"{shared} node(s) with two or more ({shared} violations)" in captured.out


def test_anti_affinity_scene_text_report_says_the_cluster_and_the_check(capsys):
    assert main(["bench", "--scene", "anti-affinity", "--nodes", "9", "--running", "30",
                 "--jobs", "5", "--zone-spread", "--no-memory"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cluster (anti-affinity): 9 nodes, 30 pods running; 5 replicas of "
                          "one app arriving after session 1, one a node (required "
                          "anti-affinity by hostname), spread over 3 zones (maxSkew 1); seed 1")
    assert "anti-affinity: 5 of 5 replicas bound (" in out
    assert "0 pending; 0 node(s) with two or more, zone skew 1 (0 violations)" in out


@pytest.mark.parametrize(("flags", "words"), [
    (["--scene", "anti-affinity", "--sessions", "1"], "sessions must be 2 or more"),
    (["--scene", "anti-affinity", "--shape", "2x2"], "takes no pending_tasks"),
    (["--zone-spread"], "the default scene has no replicas to spread"),
    (["--topology", "--zone-spread"], "the topology scene has no replicas"),
])
def test_bad_anti_affinity_flags_are_refused(capsys, flags, words):
    assert main(["bench", *flags]) == 2
    assert words in capsys.readouterr().err
