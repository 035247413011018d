"""conformance: never evict what keeps the cluster itself running.

Pods in `kube-system` and pods of the `system-cluster-critical` and
`system-node-critical` priority classes are never victims of preempt or reclaim.
"""

from __future__ import annotations

from vscheduler.hookspecs import hookimpl
from vscheduler.model import Job, Task
from vscheduler.plugin import Plugin

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


def _critical(task: Task) -> bool:
    return (task.pod.namespace == "kube-system"
            or task.pod.priority_class_name in CRITICAL_CLASSES)


def _evictable(candidates: list[Task]) -> list[Task]:
    return [t for t in candidates if not _critical(t)]


class ConformancePlugin(Plugin):
    name = "conformance"

    @hookimpl
    def preemptor_signature(self, task: Task) -> None:
        """Nothing: the offers read the candidates only."""
        return None

    @hookimpl
    def offers_by_signature(self) -> bool:
        """The offers read the candidates only."""
        return True

    @hookimpl
    def victim_signature(self, job: Job, tasks: list[Task]) -> tuple[bool, ...]:
        """Which of the tasks are critical (the offers read nothing else)."""
        return tuple(map(_critical, tasks))

    @hookimpl
    def victim_state(self) -> None:
        """Nothing: the offers read the candidates only."""
        return None

    @hookimpl
    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        return _evictable(candidates)

    @hookimpl
    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        return _evictable(candidates)
