"""The simulate report for people: placements, evictions, pending jobs and why, queues."""

from __future__ import annotations

from typing import Any

__all__ = ["render_text"]


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return lines



def render_text(report: dict[str, Any]) -> str:
    out: list[str] = []
    sessions = report["sessions"]
    binds = report["binds"]
    out.append(f"{len(binds)} pod(s) bound in {sessions} session(s)")
    if binds:
        out.append("")
        out.extend(_table(["POD", "NODE"], [[pod, node] for pod, node in binds.items()]))
    if report["evictions"]:
        out.append("")
        out.append("Evicted:")
        out.extend(_table(["POD", "NODE", "ACTION", "STRATEGY", "FOR"], [
            [e["pod"] + (" (elastic)" if e.get("elastic") else ""), e["node"], e["action"],
             e.get("strategy") or "-", e["for"]] for e in report["evictions"]]))
    if report["pipelined"]:
        out.append("")
        out.append("Waiting for resources being released (pipelined):")
        out.extend(_table(["POD", "NODE"], [[p, n] for p, n in report["pipelined"].items()]))
    jobs = report["pendingJobs"]
    if jobs:
        out.append("")
        out.append(f"Pending ({len(report['pending'])} pod(s) in {len(jobs)} job(s)):")
        for name, job in jobs.items():
            pods = job["pods"]
            what = pods[0] if pods == [name] else f"{name} ({len(pods)} pod(s))"
            queue = f", queue {job['queue']}" if job["queue"] else ""
            out.append(f"  {what}{queue}")
            for reason in job["reasons"]:
                out.append(f"    - {reason}")
    groups = report["podGroups"]
    if groups:
        out.append("")
        rows = []
        for uid, status in groups.items():
            condition = next((c for c in status["conditions"] if c["type"] == "Unschedulable"
                              and c.get("status") == "True"), None)
            rows.append([uid, status["phase"], condition["reason"] if condition else ""])
        out.extend(_table(["PODGROUP", "PHASE", "CONDITION"], rows))
    queues = report["queues"]
    if queues:
        out.append("")
        rows = []
        for name, status in queues.items():
            allocated = ", ".join(f"{k}={v}" for k, v in status["allocated"].items()
                                  if k != "pods") or "-"
            cards = ", ".join(f"{k}={v}" for k, v in status.get("cards", {}).items())
            rows.append([name, allocated, cards])
        headers = ["QUEUE", "ALLOCATED", "CARDS"]
        if not any(row[2] for row in rows):
            headers, rows = headers[:2], [row[:2] for row in rows]
        out.extend(_table(headers, rows))
    warnings = [e for e in report["events"] if e["type"] == "Warning"
                and e["reason"] in ("BadObject", "BadManifest", "QueueNotFound",
                                    "DuplicateObject")]
    if warnings:
        out.append("")
        out.append("Skipped input:")
        for event in warnings:
            out.append(f"  {event['object']}: {event['message']}")
    return "\n".join(out) + "\n"
