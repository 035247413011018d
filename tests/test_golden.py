"""Speed-ups must not change decisions: reports of generated clusters, kept as golden
files made before any cache, index or incremental snapshot existed, are compared with
today's. To remake them on purpose (a change of behaviour, said in the commit):
`VSCHEDULER_REGEN_GOLDEN=1 pytest tests/test_golden.py`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.invariants import run_checked
from vscheduler.bench import BENCH_CONF, BenchSpec, generate
from vscheduler.conf import DEFAULT_CONF, parse_conf
from vscheduler.framework.placement import OFF
from vscheduler.simulate import Simulation

GOLDEN = Path(__file__).parent / "golden"

RECLAIM_CONF = """
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang, enableReclaimable: false}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder},
            {name: binpack}]
"""

# Each case leaves work undone (pending jobs, and evictions where the conf reclaims), so
# the orders, the tie-breaks and the reasons all matter.
CASES = {
    "default-small": (DEFAULT_CONF, BenchSpec(nodes=10, jobs=30, tasks_per_job=4,
                                              running=20, queues=3, seed=1), 3),
    "default-mixed": (DEFAULT_CONF, BenchSpec(nodes=20, jobs=60, tasks_per_job=3,
                                              running=60, queues=2, seed=2), 2),
    "cards": (BENCH_CONF, BenchSpec(nodes=12, jobs=30, tasks_per_job=5, running=40,
                                    queues=4, seed=3), 2),
    "reclaim": (RECLAIM_CONF, BenchSpec(nodes=6, jobs=12, tasks_per_job=2, running=48,
                                        queues=3, seed=4), 3),
}


def _report(conf_text: str, spec: BenchSpec, sessions: int) -> dict:
    simulation = Simulation(parse_conf(conf_text, "golden conf"), ("vscheduler",),
                            node_sampling=OFF)
    simulation.load([(f"golden#{i}", o) for i, o in enumerate(generate(spec))])
    run_checked(simulation, sessions)
    report = simulation.report.as_dict()
    report.pop("events")  # wording may be improved; decisions may not change
    return report


@pytest.mark.parametrize("name", sorted(CASES))
def test_decisions_match_the_golden_report(name: str):
    conf_text, spec, sessions = CASES[name]
    report = _report(conf_text, spec, sessions)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("VSCHEDULER_REGEN_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    golden = json.loads(path.read_text())
    assert report["binds"] == golden["binds"]
    assert report["evictions"] == golden["evictions"]
    assert report["pipelined"] == golden["pipelined"]
    assert sorted(report["pending"]) == sorted(golden["pending"])
    assert report["podGroups"] == golden["podGroups"]
    assert report["queues"] == golden["queues"]
