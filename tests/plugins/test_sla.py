"""sla: jobs past their waiting time are admitted and served first (Volcano's plugin)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, open_session, pod, podgroup, queue, simulate
from vscheduler.conf import ConfError, parse_conf

WAIT = "volcano.sh/sla-waiting-time"
START = "2026-01-01T00:00:00Z"
HALF_PAST = "2026-01-01T00:30:00Z"
ONE = "2026-01-01T01:00:00Z"

# sla first, alone in its tier: its votes decide over overcommit's and gang's
ALONE_FIRST = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: sla}]
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
# sla beside gang: gang's refusal to pipeline a job not ready still wins
BESIDE_GANG = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: sla}, {name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def _job(name: str, members: int, cpu: str, *, creation: str = START,
         annotations: dict[str, str] | None = None,
         sized: bool = True) -> list[dict[str, Any]]:
    """A gang of `members` pods of `cpu` each; `sized`: its minResources say so (what
    overcommit admits by)."""
    minimum = {"cpu": str(members * int(cpu))} if sized else None
    return [podgroup(name, members, queue="q", creation=creation, annotations=annotations,
                     min_resources=minimum),
            *(pod(f"{name}-{i}", cpu=cpu, group=name, queue="q", creation=creation)
              for i in range(members))]


def _made_at(obj: dict[str, Any], stamp: str) -> dict[str, Any]:
    """`obj` created at `stamp` (simulate's clock starts at the newest object)."""
    obj["metadata"]["creationTimestamp"] = stamp
    return obj


def _warnings(report: dict[str, Any], obj: str) -> list[str]:
    return [e["message"] for e in report["events"]
            if e["object"] == obj and e["type"] == "Warning"]


def test_jobs_with_a_waiting_time_come_first_the_earliest_deadline_first() -> None:
    objects = [queue("q"), node("n0"),
               *_job("none", 1, "1"),  # oldest, but no service level
               *_job("hour", 1, "1", creation=HALF_PAST, annotations={WAIT: "1h"}),
               *_job("ten", 1, "1", creation=ONE, annotations={"sla-waiting-time": "10m"})]
    session = open_session(objects, ALONE_FIRST)
    jobs = sorted(session.jobs.values(), key=lambda j: j.uid)
    order = sorted(jobs, key=lambda j: sum(session.job_less(o, j) for o in jobs))
    # deadlines: ten 01:10, hour 01:30, none never
    assert [j.name for j in order] == ["ten", "hour", "none"]
    # the same order as a key (`job_order_key`), jobs without a deadline last
    assert session.job_key is not None
    assert [j.name for j in sorted(jobs, key=session.job_key)] == ["ten", "hour", "none"]


@pytest.mark.parametrize(("waiting", "admitted"), [("30m", True), ("2h", False)])
def test_a_job_past_its_waiting_time_is_admitted_over_a_full_cluster(waiting, admitted):
    """overcommit refuses a job bigger than the cluster; past its waiting time, sla's
    permit in the first tier admits it (it is then Inqueue, waiting for room)."""
    objects = [queue("q"), _made_at(node("n0", cpu="4"), ONE),
               *_job("big", 1, "40", annotations={WAIT: waiting})]
    report = simulate(objects, ALONE_FIRST)
    assert report["podGroups"]["default/big"]["phase"] == ("Inqueue" if admitted
                                                           else "Pending")


@pytest.mark.parametrize(("conf", "held"), [(ALONE_FIRST, True), (BESIDE_GANG, False)])
def test_what_is_placed_for_an_overdue_gang_is_held_for_it(conf, held):
    """Gang `wide` (3 pods of 4 cpu, past its waiting time, served first) finds room for
    two on three nodes of 4 cpu, one of them full. With sla deciding pipelining, the
    two places stay held for it and `small`, behind it, gets nothing this session; with
    gang beside sla, gang's refusal wins and `small` takes one of them. (`small` gives
    no minResources: overcommit admits it beside `wide`.)"""
    objects = [queue("q"), *(node(f"n{i}", cpu="4", memory="16Gi") for i in range(3)),
               pod("busy", cpu="4", queue="q", node_name="n2", creation=ONE),
               *_job("wide", 3, "4", annotations={WAIT: "10m"}),
               *_job("small", 1, "4", creation=HALF_PAST, sized=False)]
    report = simulate(objects, conf)
    assert report["binds"] == ({} if held else {"default/small-0": "n0"})
    holding = sorted(reason.split(" assigned to ")[1].split(",")[0]
                     for key in ("default/wide-0", "default/wide-1")
                     for reason in report["pending"][key] if "assigned to" in reason)
    assert holding == (["n0", "n1"] if held else ["n1"])


@pytest.mark.parametrize("raw", ["soon", "0", "-5m", "{" * 200])
def test_an_unreadable_waiting_time_is_ignored_with_a_warning(raw):
    objects = [queue("q"), _made_at(node("n0"), ONE), *_job("j", 1, "1", annotations={WAIT: raw})]
    report = simulate(objects, ALONE_FIRST)
    assert report["binds"] == {"default/j-0": "n0"}
    [message] = _warnings(report, "PodGroup/default/j")
    assert message.startswith(f"metadata.annotations.{WAIT}: ")
    assert message.endswith("; ignored")


@pytest.mark.parametrize("raw", ["0", "soon", "-1h"])
def test_an_unreadable_argument_is_a_conf_error(raw):
    with pytest.raises(ConfError, match="sla-waiting-time"):
        parse_conf(f"""
actions: "enqueue, allocate"
tiers:
- plugins: [{{name: sla, arguments: {{sla-waiting-time: "{raw}"}}}}]
""", "test")


def test_the_argument_gives_every_job_without_an_annotation_its_waiting_time() -> None:
    conf = ALONE_FIRST.replace("{name: sla}", "{name: sla, arguments: {sla-waiting-time: 30m}}")
    objects = [queue("q"), _made_at(node("n0", cpu="4"), ONE), *_job("big", 1, "40")]
    assert simulate(objects, conf)["podGroups"]["default/big"]["phase"] == "Inqueue"
    assert simulate(objects, ALONE_FIRST)["podGroups"]["default/big"]["phase"] == "Pending"
