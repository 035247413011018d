"""The bundled examples and confs: they run as the README says, and decide the same way
every time, in any process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vscheduler.cli import main
from vscheduler.conf import DEFAULT_CONF, load_conf

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
CONFS = sorted((ROOT / "conf").glob("*.conf"))


def _report(capsys: pytest.CaptureFixture, *args: str) -> dict:
    assert main(["simulate", *args, "--output", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("path", CONFS, ids=lambda p: p.name)
def test_every_bundled_conf_loads(path: Path):
    conf = load_conf(str(path))
    assert conf.action_names() and conf.plugin_names()
    assert conf.warnings == []


def test_quickstart(capsys):
    report = _report(capsys, str(ROOT / "examples/quickstart.yaml"))
    # The training gang takes all 16 GPUs, on the GPU nodes (it tolerates their taint).
    train = {k: v for k, v in report["binds"].items() if "llm-train" in k}
    assert len(train) == 4 and set(train.values()) == {"gpu-a", "gpu-b"}
    # The inference pods do not tolerate the GPU taint: they go to the CPU node.
    assert {v for k, v in report["binds"].items() if "chat-api" in k} == {"cpu-a"}
    assert set(report["pendingJobs"]) == {"research/finetune", "research/batch-report"}
    assert report["pendingJobs"]["research/batch-report"]["reasons"] == [
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."]
    assert report["podGroups"]["research/finetune"]["conditions"][0]["type"] == \
        "Unschedulable"


def test_queues_share_by_weight_within_capability(capsys):
    report = _report(capsys, str(ROOT / "examples/queues.yaml"))
    assert report["queues"]["ml"]["allocated"]["cpu"] == "16"
    assert report["queues"]["analytics"]["allocated"]["cpu"] == "8"


def test_gang_example(capsys):
    report = _report(capsys, str(ROOT / "examples/gang.yaml"), "--sessions", "2")
    binds = report["binds"]
    assert sum(k.startswith("ml/pretrain") for k in binds) == 3
    assert sum(k.startswith("ml/sweep") for k in binds) == 4
    assert sum(k.startswith("hpc/mpi") for k in binds) == 2
    assert not any(k.startswith("ml/ps-job") for k in binds)
    assert report["podGroups"]["hpc/mpi"]["phase"] == "Running"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_same_input_gives_byte_identical_reports_across_processes(path: Path):
    """Different hash seeds change set and dict-of-set iteration orders: decisions must
    not depend on them."""
    outputs = []
    for seed in ("1", "2"):
        run = subprocess.run(
            [sys.executable, "-m", "vscheduler.cli", "simulate", str(path), "--sessions", "3",
             "--output", "json"], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": seed})
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_text_report_lists_placements_then_pending_jobs(path: Path, capsys):
    assert main(["simulate", str(path)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].endswith("bound in 1 session(s)")
    if not lines[0].startswith("0 ") and "Pending" in text:
        assert lines.index("") + 1 == lines.index(next(x for x in lines if x.startswith("POD ")))
        assert text.index("\nPOD ") < text.index("\nPending")


def test_tidal_reclaim(capsys):
    report = _report(capsys, str(ROOT / "examples/tidal.yaml"), "--conf",
                     str(ROOT / "conf/tidal-reclaim.conf"), "--sessions", "2")
    evicted = sorted(e["pod"] for e in report["evictions"])
    # A whole training gang, never half of one; never the protected one.
    assert evicted == ["training/train-a-worker-0", "training/train-a-worker-1"]
    assert all(e["action"] == "reclaim" and e["for"].startswith("inference/")
               for e in report["evictions"])
    assert {k for k in report["binds"] if k.startswith("inference/")} == {
        "inference/chat-7d9f6-qm4t7", "inference/chat-7d9f6-xk2p9"}
    assert report["queues"]["queue-inference"]["cards"] == {"NVIDIA-GeForce-RTX-4090": 4}


def test_card_quota(capsys):
    report = _report(capsys, str(ROOT / "examples/card-quota.yaml"), "--conf",
                     str(ROOT / "conf/card-quota.conf"))
    binds = report["binds"]
    assert sorted(k for k in binds if "h200-job" in k) == [
        f"team-a/h200-job-{i}" for i in range(3)]
    assert report["pending"]["team-a/h200-job-3"] == [
        "Queue <cr-queue1> has insufficient <NVIDIA-H200> quota: requested <1000>, total "
        "would be <4000>, but capability is <3000>"]
    # A|B: the first choice while its quota lasts, then the second.
    assert [binds[f"team-a/rtx-svc-{i}"] for i in range(4)] == [
        "rtx4090-a", "rtx4090-a", "rtx4090d-a", "rtx4090d-a"]
    assert "mix kinds of card" in report["pending"]["team-a/mixed-0"][0]
    assert report["queues"]["cr-queue1"]["cards"] == {
        "NVIDIA-GeForce-RTX-4090": 2, "NVIDIA-GeForce-RTX-4090-D": 2, "NVIDIA-H200": 3,
        "NVIDIA-H200/mig-1g.18gb-mixed": 2, "NVIDIA-H800/mps-79g*1/2": 1}
    assert any(e["object"] == "Pod/team-a/h200-job-3" and e["type"] == "Warning"
               for e in report["events"])


def test_timeout_example_gives_up_the_gang_that_waited_too_long(capsys):
    path = str(ROOT / "examples/timeout.yaml")
    report = _report(capsys, path)
    assert sorted(report["binds"]) == ["ml/eval", "ml/finetune-0", "ml/finetune-1"]
    big = report["podGroups"]["ml/big-train"]
    assert [c["reason"] for c in big["conditions"]] == ["ScheduleTimeout"]
    assert report["pending"]["ml/big-train-0"] == [
        "PodGroup scheduling timed out: fewer than 3 pods scheduled within "
        "scheduleTimeoutSeconds 300"]
    assert [e["object"] for e in report["events"] if e["reason"] == "ScheduleTimeout"] == [
        "PodGroup/ml/big-train"]
    # At 10:03 it had not waited 5 minutes yet: it waits for room, as any gang.
    early = _report(capsys, path, "--now", "2026-05-01T10:03:00Z")
    assert [c["reason"] for c in early["podGroups"]["ml/big-train"]["conditions"]] == [
        "NotEnoughResources"]


def test_a_bad_now_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", str(ROOT / "examples/timeout.yaml"), "--now", "yesterday"])
    assert exit_info.value.code == 2
    assert "not an RFC 3339 time" in capsys.readouterr().err


# Each strategy's example, with its own conf and with the default's (LowestPriority):
# the victims each chooses (training pods, for one inference replica).
STRATEGY_EXAMPLES = [
    ("lowest-priority", "LowestPriority", ["eval-new", "sweep-spot"],
     ["eval-new", "sweep-spot"]),
    ("newest-first", "NewestFirst", ["trial-c", "trial-d"], ["sweep-spot", "trial-d"]),
    ("minimum-victims", "MinimumVictims", ["finetune"],
     ["sweep-1", "sweep-2", "sweep-3"]),
    ("minimum-gpu-waste", "MinimumGPUWaste", ["finetune"], ["spot-sim"]),
]


@pytest.mark.parametrize(("name", "strategy", "victims", "by_default"), STRATEGY_EXAMPLES,
                         ids=[s[0] for s in STRATEGY_EXAMPLES])
def test_strategy_example(capsys, name, strategy, victims, by_default):
    example = str(ROOT / f"examples/strategy-{name}.yaml")
    report = _report(capsys, example, "--conf", str(ROOT / f"conf/strategy-{name}.conf"))
    assert sorted(e["pod"] for e in report["evictions"]) == [
        f"training/{victim}" for victim in victims]
    assert {(e["action"], e["for"], e["queue"], e["strategy"])
            for e in report["evictions"]} == {
        ("reclaim", "inference/chat-7d9f6-xk2p9", "queue-training", strategy)}
    assert report["pipelined"] == {"inference/chat-7d9f6-xk2p9": "gpu-node-1"}
    default = _report(capsys, example, "--conf", str(ROOT / "conf/tidal-reclaim.conf"))
    assert sorted(e["pod"] for e in default["evictions"]) == [
        f"training/{victim}" for victim in by_default]
    # The next session binds the replica on the GPUs its victims released.
    later = _report(capsys, example, "--conf", str(ROOT / f"conf/strategy-{name}.conf"),
                    "--sessions", "2")
    assert later["binds"] == {"inference/chat-7d9f6-xk2p9": "gpu-node-1"}
    assert len(later["evictions"]) == len(victims)


def test_hierarchy_example(capsys):
    report = _report(capsys, str(ROOT / "examples/hierarchy.yaml"),
                     "--conf", str(ROOT / "conf/hierarchy.conf"))
    jobs = {key.split("/")[1].rsplit("-", 1)[0] for key in report["binds"]}
    assert jobs == {"llm-finetune", "detector", "chat", "embeddings"}
    # product-batch borrows research-nlp's two unused GPUs (its lending limit), no more
    assert sum(k.startswith("batch/") for k in report["binds"]) == 2
    assert set(report["pendingJobs"]) == {"research/misplaced", "vision/segmenter",
                                          "batch/embeddings"}
    assert "its lenders (research-nlp) have none of it unused" in \
        report["pendingJobs"]["batch/embeddings"]["reasons"][0]
    assert report["pendingJobs"]["research/misplaced"]["reasons"][0].startswith(
        "queue research has child queues")
    assert report["pendingJobs"]["vision/segmenter"]["reasons"][0].startswith(
        "queue research-vision: insufficient nvidia.com/gpu")
    gpus = {name: q["allocated"].get("nvidia.com/gpu") for name, q in report["queues"].items()}
    assert (gpus["research"], gpus["research-nlp"], gpus["research-vision"],
            gpus["product"], gpus["root"]) == ("8", "4", "4", "6", "14")


def _rack(node: str) -> str:
    return node.split("-")[1]  # gpu-a1-0: rack a1, in block a


def _topology_example(capsys, example: str, conf: str) -> dict:
    report = _report(capsys, str(ROOT / f"examples/{example}"), "--conf", str(ROOT / conf))
    gangs: dict[str, list[str]] = {}
    for pod, node in report["binds"].items():
        gangs.setdefault(pod.split("/")[1].rsplit("-", 1)[0], []).append(node)
    # llm-rack (hard, tier 1) fills rack-a1 beside the serving pod; llm-block (hard,
    # tier name block) is too big for a rack and goes to block-b; eval-soft fills what
    # is left of rack-b2
    assert {name: sorted({_rack(n) for n in nodes}) for name, nodes in gangs.items()} == {
        "llm-rack": ["a1"], "llm-block": ["b1", "b2"], "eval-soft": ["b2"]}
    assert [len(gangs[name]) for name in ("llm-rack", "llm-block", "eval-soft")] == [3, 6, 2]
    # wide-rack (three 8-GPU workers within one rack of two nodes) waits, saying why
    assert set(report["pendingJobs"]) == {"ml/wide-rack"}
    assert report["pendingJobs"]["ml/wide-rack"]["reasons"][0] == (
        "no HyperNode of tier 1 or lower has free room for the 3 pods the gang still needs")
    return report


def test_topology_example_places_gangs_within_their_racks_and_blocks(capsys):
    _topology_example(capsys, "topology.yaml", "conf/topology.conf")


def test_topology_labels_example_makes_the_same_tree_from_node_labels(capsys):
    by_labels = _topology_example(capsys, "topology-labels.yaml", "conf/topology-labels.conf")
    by_hypernodes = _report(capsys, str(ROOT / "examples/topology.yaml"), "--conf",
                            str(ROOT / "conf/topology.conf"))
    assert by_labels["binds"] == by_hypernodes["binds"]
    # without the label keys there is no tree: the gangs go anywhere, wide-rack too
    flat = _report(capsys, str(ROOT / "examples/topology-labels.yaml"), "--conf",
                   str(ROOT / "conf/topology.conf"))
    assert not flat["pendingJobs"].get("ml/wide-rack")
    assert sum(k.startswith("ml/wide-rack") for k in flat["binds"]) == 3


def test_sub_groups_example_keeps_each_replica_in_a_rack_and_the_job_in_a_block(capsys):
    report = _report(capsys, str(ROOT / "examples/sub-groups.yaml"), "--conf",
                     str(ROOT / "conf/topology.conf"))
    replicas: dict[str, set[str]] = {}
    for pod, node in report["binds"].items():
        part = pod.split("/")[1].removeprefix("llm-replicas-").split("-")[0]
        replicas.setdefault(part, set()).add(_rack(node))
    # block-a holds one replica only: the job goes to block-b, a replica per rack, the
    # launcher beside them; replica 2 waits
    assert replicas == {"0": {"b1"}, "1": {"b2"}, "launcher": replicas["launcher"]}
    assert replicas["launcher"] <= {"b1", "b2"}
    assert report["pendingJobs"]["ml/llm-replicas"]["reasons"] == [
        "no HyperNode of tier 1 or lower has free room for the 4 pods sub-group replica/2 "
        "still needs"]
    assert len(report["pending"]) == 4


def _zone(node: str) -> str:
    return node.split("-")[1][0]  # node-a1: zone-a


def _anti_affinity_report(capsys, tmp_path: Path, text: str = "", predicates: str = "",
                          nodeorder: str = "") -> dict:
    example = ROOT / "examples/anti-affinity.yaml"
    if text:
        example = tmp_path / "anti-affinity.yaml"
        example.write_text(text, encoding="utf-8")
    args = [str(example)]
    if predicates or nodeorder:
        conf = tmp_path / "anti-affinity.conf"
        text = DEFAULT_CONF
        for plugin, arguments in (("predicates", predicates), ("nodeorder", nodeorder)):
            if arguments:
                line = f"  - name: {plugin}\n"
                assert text.count(line) == 1
                text = text.replace(line, f"{line}    arguments: {{{arguments}}}\n")
        conf.write_text(text, encoding="utf-8")
        args += ["--conf", str(conf)]
    return _report(capsys, *args)


def _by_app(report: dict, prefix: str) -> list[str]:
    return [node for pod, node in report["binds"].items() if pod.startswith(prefix)]


def test_anti_affinity_example(capsys, tmp_path):
    report = _anti_affinity_report(capsys, tmp_path)
    # web: one replica on each frontend node; the fourth waits, saying why
    assert sorted(_by_app(report, "shop/web-")) == ["node-a1", "node-b1", "node-c1"]
    assert report["pendingJobs"] == {"shop/web-7b9d5-v5r1c": {
        "queue": "default", "pods": ["shop/web-7b9d5-v5r1c"], "reasons": [
            "0/6 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, "
            "3 node(s) didn't match pod anti-affinity rules."]}}
    # api: with the replica running on node-a2, every zone ends with two
    api = _by_app(report, "shop/api-")
    assert len(api) == 5
    assert sorted(_zone(n) for n in [*api, "node-a2"]) == ["a", "a", "b", "b", "c", "c"]
    # cache: beside a web replica; report: in zone-a, off shop's web (research's is fine)
    assert report["binds"]["shop/cache-0"] in _by_app(report, "shop/web-")
    assert report["binds"]["analytics/report"] == "node-a2"


def test_anti_affinity_example_namespace_selector_follows_namespace_labels(capsys, tmp_path):
    text = (ROOT / "examples/anti-affinity.yaml").read_text(encoding="utf-8")
    assert text.count("labels: {team: research}") == 1
    report = _anti_affinity_report(
        capsys, tmp_path, text.replace("labels: {team: research}", "labels: {team: storefront}"))
    # research's web demo on node-a2 now counts too: no node of zone-a is left
    assert "analytics/report" not in report["binds"]
    assert report["pendingJobs"]["analytics/report"]["reasons"] == [
        "0/6 nodes are available: 2 node(s) didn't match pod anti-affinity rules, "
        "4 node(s) didn't match Pod's node affinity/selector."]
    # without the Namespace objects, shop is seen with its name label alone: the
    # storefront selector picks no namespace, and the report may go beside shop's web
    bare = "\n---\n".join(doc for doc in text.split("\n---\n") if "kind: Namespace" not in doc)
    report = _anti_affinity_report(capsys, tmp_path, bare)
    assert report["binds"]["analytics/report"] in ("node-a1", "node-a2")


def test_anti_affinity_example_without_the_rules(capsys, tmp_path):
    """What the comments say happens with each rule turned off: each rule is what made
    the difference."""
    report = _anti_affinity_report(capsys, tmp_path,
                                   predicates="predicate.PodAffinityEnable: false")
    web = _by_app(report, "shop/web-")
    assert len(web) == 4 and sorted(web).count("node-a1") == 2
    report = _anti_affinity_report(capsys, tmp_path,
                                   predicates="predicate.PodTopologySpreadEnable: false")
    zones = [_zone(n) for n in [*_by_app(report, "shop/api-"), "node-a2"]]
    assert [zones.count(z) for z in "abc"] == [2, 3, 1]
    report = _anti_affinity_report(capsys, tmp_path, nodeorder="podaffinity.weight: 0")
    assert report["binds"]["shop/cache-0"] not in _by_app(report, "shop/web-")
    assert report["binds"]["shop/cache-0"].endswith("2")
