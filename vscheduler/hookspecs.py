"""The plugin API: every extension point a plugin may implement, in one module.

A plugin is a class with a `name`, its `arguments` (see `vscheduler.plugin`), and
methods marked `@hookimpl` whose names and parameter names are those below; pluggy checks
them when the plugin is loaded, so a misspelt hook or parameter is an error at start,
not a silent no-op. Register it in your distribution's `pyproject.toml`::

    [project.entry-points."vscheduler.plugins"]
    my-plugin = "my_package.module:MyPlugin"

A fresh instance is built for every session, in conf order, and `on_session_open`
receives the session: keep it on `self` and read the cluster from it (`session.jobs`,
`session.nodes`, `session.queues`, ...). Hooks are then called by the session, which
combines the answers of all plugins tier by tier, as Volcano does:

- order hooks (`job_order`, `queue_order`, `task_order`, `victim_queue_order`): the first
  plugin, in conf order, with a non-zero answer decides;
- `predicate`, `pre_predicate`: the first refusal is the answer;
- `node_order`, `batch_node_order`: scores are summed;
- `job_ready`, `allocatable`, `preemptive`: every plugin must agree;
- `overused`: any plugin may say so;
- `job_enqueueable`, `job_pipelined`: votes; within the first tier that does not abstain a
  rejection wins, else a permit; all abstaining permits;
- `job_starving`: the first tier with any such hook decides (all of it must agree);
- `preemptable`, `reclaimable`: victims are intersected across the plugins of a tier,
  and the first tier with a non-empty answer decides.

Each hook except the session and event hooks can be turned off per plugin in the conf
with Volcano's flag (`enableJobOrder: false`, ...), listed in `ENABLE_FLAGS`.

Hooks on the per-task-per-node path (`predicate`, `node_order`) are called once per
candidate node: keep them free of allocation and lookups you could do at session open.
Implement `task_signature` too: it tells the session which tasks your answers treat
alike, so that it can match them against the nodes once (see that hook).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from vscheduler.fit import Unfit
    from vscheduler.framework.session import Session
    from vscheduler.model import Job, Node, Queue, Task

__all__ = ["ABSTAIN", "ENABLE_FLAGS", "PERMIT", "Reject", "hookimpl", "hookspec"]

PROJECT = "vscheduler"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

PERMIT = 1
ABSTAIN = 0


class Reject:
    """A vote against, with the reason users will read."""

    __slots__ = ("reason",)

    def __init__(self, reason: str = "") -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"Reject({self.reason!r})"


# A vote: PERMIT, ABSTAIN, or a Reject carrying its reason.
Vote = int | Reject


# hook name -> the conf flag that turns it off for one plugin (Volcano's spellings).
ENABLE_FLAGS: dict[str, str] = {
    "job_order": "enableJobOrder",
    "queue_order": "enableQueueOrder",
    "task_order": "enableTaskOrder",
    "pre_predicate": "enablePredicate",
    "predicate": "enablePredicate",
    "node_order": "enableNodeOrder",
    "batch_node_order": "enableNodeOrder",
    "job_ready": "enableJobReady",
    "job_pipelined": "enableJobPipelined",
    "job_enqueueable": "enableJobEnqueued",
    "job_enqueued": "enableJobEnqueued",
    "job_starving": "enableJobStarving",
    "allocatable": "enabledAllocatable",
    "overused": "enabledOverused",
    "preemptive": "enablePreemptive",
    "preemptable": "enablePreemptable",
    "reclaimable": "enableReclaimable",
}


# --------------------------------------------------------------------------- session


@hookspec
def on_session_open(session: Session) -> None:
    """The session is open and the snapshot is in place: build per-session state here.

    Sessions share unchanged objects: a snapshot hands the last session's copy of a job
    or node on to the next one when neither the cache nor that session changed it. So:

    - change jobs and nodes only through the session (statements) or their methods
      (`Job.set_condition`, `Node.add_task`, ...), which mark them `dirty`; a plugin
      that sets a field itself must set `dirty = True` too;
    - what you derive from a job at open (sums over its pods, say) may be kept in
      `job.memo[your plugin's name]` and reused by the next session while the job copy
      is the same: a copy made anew starts with an empty memo. Store beside it what else
      the figure depends on (`session.node_specs` for the nodes' labels and capacity,
      your arguments) and compare. Figures kept on `node.memo` must depend only on the
      node's labels and allocatable, which never change for a Node object.
    """


@hookspec
def on_session_close(session: Session) -> None:
    """All actions ran; set job conditions or export figures here."""


# --------------------------------------------------------------------------- order


@hookspec
def job_order(left: Job, right: Job) -> int:
    """Negative if `left` should be scheduled before `right`, positive if after, 0 if this
    plugin has no opinion. Ties are broken by PodGroup creation time, then uid."""


@hookspec
def queue_order(left: Queue, right: Queue) -> int:
    """Negative if `left` should be served before `right`; 0 for no opinion."""


@hookspec
def task_order(left: Task, right: Task) -> int:
    """Negative if task `left` should be placed before `right` (within one job)."""


@hookspec
def victim_queue_order(left: Queue, right: Queue, preemptor_queue: Queue) -> int:
    """Negative if victims should be taken from `left` before `right`."""


# --------------------------------------------------------------------------- placement


@hookspec
def pre_predicate(task: Task) -> Unfit | None:
    """None if the task may be placed at all, else why not (checked once per task)."""


@hookspec
def predicate(task: Task, node: Node) -> Unfit | None:
    """None if `task` may run on `node`, else why not. Resources are checked by the
    actions before this is asked."""


@hookspec
def node_order(task: Task, node: Node) -> float:
    """A score for placing `task` on `node` (higher is better); summed over plugins."""


@hookspec
def task_signature(task: Task) -> Hashable:
    """What this plugin's `predicate` and `node_order` answers for `task` depend on,
    besides the node and the task's resources, node selector, node affinity,
    tolerations and host ports (None: nothing else). Tasks that agree on all of it
    share node searches within an action, which is what keeps a session fast on large
    clusters: a gang's identical pods, or many jobs of the same shape, are matched
    against the nodes once, and afterwards only the nodes that changed are looked at
    again. Return everything else the answers read: annotations, the queue and what it
    has used, and so on. A plugin with `predicate` or `node_order` but no
    `task_signature` turns the sharing off for every task (correct, slower)."""


@hookspec
def batch_node_order(task: Task, nodes: list[Node]) -> dict[str, float]:
    """Scores for several candidate nodes at once, by node name, for scorers that
    normalise over the candidates."""


# --------------------------------------------------------------------------- jobs


@hookspec
def job_valid(job: Job) -> tuple[str, str] | None:
    """None if the job may be scheduled at all, else (reason, message)."""


@hookspec
def job_enqueueable(job: Job) -> Vote:
    """May this Pending job be admitted (Inqueue)? PERMIT, ABSTAIN or Reject(reason)."""


@hookspec
def job_enqueued(job: Job) -> None:
    """The job was admitted: count its minimum resources as in the queue."""


@hookspec
def job_ready(job: Job) -> bool:
    """Has the job enough tasks placed for its allocations to be committed?"""


@hookspec
def job_pipelined(job: Job) -> Vote:
    """Is the job placed or waiting on releasing resources enough to keep its
    statement? PERMIT, ABSTAIN or Reject(reason)."""


@hookspec
def job_starving(job: Job) -> bool:
    """Does the job still need resources (so it may reclaim or preempt for them)?"""


# --------------------------------------------------------------------------- queues


@hookspec
def allocatable(queue: Queue, task: Task) -> str | None:
    """None if `queue` may take `task`'s resources now, else the reason it may not."""


@hookspec
def overused(queue: Queue) -> str | None:
    """A reason if `queue` has used its share (it gets nothing more this action), else
    None."""


@hookspec
def preemptive(queue: Queue, task: Task) -> str | None:
    """None if `queue` may reclaim resources for `task`, else the reason it may not."""


# --------------------------------------------------------------------------- victims


@hookspec
def preemptable(preemptor: Task, candidates: list[Task]) -> list[Task] | None:
    """Which of `candidates` (same queue) `preemptor` may evict; None to abstain."""


@hookspec
def reclaimable(reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
    """Which of `candidates` (other queues) `reclaimer` may evict; None to abstain."""


# --------------------------------------------------------------------------- events


@hookspec
def allocate_event(task: Task) -> str | None:
    """`task` was allocated or pipelined in the session (not yet committed). Update
    accounting; return an error message to refuse the placement (it is rolled back)."""


@hookspec
def deallocate_event(task: Task) -> None:
    """`task` was evicted, or its allocation or pipelining rolled back."""
