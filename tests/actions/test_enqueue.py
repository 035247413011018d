"""enqueue: admission of Pending PodGroups, queue by queue, with no head-of-line
blocking."""

from __future__ import annotations

from tests.builders import gang, node, podgroup, queue, simulate

# overcommit alone decides admission: cluster 10 CPUs x 1.0.
CONF = """
actions: "enqueue"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: overcommit, arguments: {overcommit-factor: 1.0}}]
"""


def phases(report: dict) -> dict[str, str]:
    return {uid: group["phase"] for uid, group in report["podGroups"].items()}


def test_job_without_min_resources_is_admitted_by_the_quota_plugins():
    report = simulate([node("n1", cpu="1"), *gang("huge", 20, cpu="4")], CONF)
    assert phases(report) == {"default/huge": "Inqueue"}


def test_refused_job_does_not_block_the_next_job_of_its_queue():
    objects = [node("n1", cpu="10"),
               podgroup("big", 1, min_resources={"cpu": "12"}, creation="2026-01-01T00:00:00Z"),
               podgroup("small", 1, min_resources={"cpu": "4"},
                        creation="2026-01-01T00:01:00Z")]
    report = simulate(objects, CONF)
    assert phases(report) == {"default/big": "Pending", "default/small": "Inqueue"}
    assert any(e["object"] == "PodGroup/default/big" and e["reason"] == "Unschedulable"
               and "resource in cluster is overused: overused cpu" in e["message"]
               for e in report["events"])


def test_admission_counts_jobs_admitted_earlier_in_the_session():
    objects = [node("n1", cpu="10"),
               *(podgroup(f"j{i}", 1, min_resources={"cpu": "4"}) for i in range(3))]
    report = simulate(objects, CONF)
    assert sorted(phases(report).values()) == ["Inqueue", "Inqueue", "Pending"]


def test_higher_priority_queue_is_served_first():
    objects = [node("n1", cpu="10"), queue("low", priority=1), queue("high", priority=100),
               podgroup("a", 1, queue="low", min_resources={"cpu": "6"}),
               podgroup("b", 1, queue="high", min_resources={"cpu": "6"})]
    conf = CONF.replace("[{name: overcommit", "[{name: proportion}, {name: overcommit")
    report = simulate(objects, conf)
    assert phases(report) == {"default/a": "Pending", "default/b": "Inqueue"}


def test_enable_flag_turns_admission_checks_off():
    objects = [node("n1", cpu="1"), podgroup("big", 1, min_resources={"cpu": "12"})]
    conf = CONF.replace("{name: overcommit,", "{name: overcommit, enableJobEnqueued: false,")
    assert phases(simulate(objects, conf)) == {"default/big": "Inqueue"}


def test_closed_queue_admits_nothing():
    objects = [node("n1"), queue("shut", state="Closed"), podgroup("j", 1, queue="shut")]
    assert phases(simulate(objects, CONF)) == {"default/j": "Pending"}
