"""Room held for nominated pods.

A session that evicts pods for a pending pod pipelines it onto the room being released
and nominates the node for it (`status.nominatedNodeName`); the pod is bound in a later
session, once the victims are gone. Until then, that room is the nominated pod's: a pod
of lower priority that took it in the meantime would leave the evictions made for
nothing and the nominated pod pending, to evict again. So, as kube-scheduler counts
nominated pods when it filters a node, a node's nominated pods that are still pending
and of a priority at least the task's hold their room against it: the task fits the
node only if it fits beside them. A pod of higher priority may take the room (and the
nominated pod may then evict in its turn). A nominated pod placed in the session (there
or elsewhere) holds nothing any more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from vscheduler.fit import Unfit
from vscheduler.model import TaskStatus as S

if TYPE_CHECKING:
    from vscheduler.model import Job, Node, Task

__all__ = ["HELD", "holding", "nominated_pods"]

HELD = Unfit("node(s) had room held for a nominated pod of higher or equal priority",
             resolvable=True)

Predicate = Callable[["Task", "Node"], Unfit | None]


def nominated_pods(nominated: Mapping[str, tuple[str, str, str]], jobs: Mapping[str, Job],
                   nodes: Mapping[str, Node]) -> dict[str, list[Task]]:
    """The pending pods of `jobs` nominated to one of `nodes`, by node name, from the
    cache's list of nominated pods (`Snapshot.nominated`: pod key -> job uid, uid,
    node), in pod key order."""
    found: dict[str, list[Task]] = {}
    for key in sorted(nominated):
        job_uid, uid, name = nominated[key]
        job = jobs.get(job_uid)
        task = job.tasks.get(uid) if job is not None else None
        if task is not None and task.status == S.PENDING and name in nodes:
            found.setdefault(name, []).append(task)
    return found


def holding(predicate: Predicate, nominated: dict[str, list[Task]]) -> Predicate:
    """`predicate`, then whether the room the node's nominated pods wait for is left
    to `task` (`HELD` if not)."""

    def held_predicate(task: Task, node: Node) -> Unfit | None:
        unfit = predicate(task, node)
        if unfit is not None:
            return unfit
        waiting = nominated.get(node.name)
        if waiting is None:
            return None
        need = None
        for other in waiting:
            if other is not task and other.status == S.PENDING \
                    and other.priority >= task.priority:
                need = task.resreq.clone() if need is None else need
                need.add(other.resreq)
        if need is None or node.insufficient_future(need) is None:
            return None
        return HELD

    return held_predicate
