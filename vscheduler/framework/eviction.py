"""Choosing victims on a node: the order they go in, and keeping gangs whole.

Shared by reclaim and preempt. Plugins say *who may* be evicted (`reclaimable`,
`preemptable`); this module decides *who is*, in Volcano's victim order, taking victims
until the preemptor fits.

Gang safety (on by default; the actions' `gangSafeEviction: false` turns it off):
evicting a pod of a gang that would leave the gang with fewer running tasks than its
minMember stops the whole job being useful while it keeps holding the rest of its
resources. So such a victim is taken only together with its whole job, in the same
statement (every task of the job goes, on every node, and all that frees counts), or
not at all. Victims that break no gang are preferred; when gangs must go, the gang that
makes the preemptor fit with the least waste goes first; victims made unnecessary by a
gang's eviction are spared.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cmp_to_key
from typing import TYPE_CHECKING

from vscheduler.model import Job, Node, Task, TaskStatus
from vscheduler.plugin import Argument
from vscheduler.resources import Resource

if TYPE_CHECKING:
    from vscheduler.framework.session import Session
    from vscheduler.framework.statement import Statement

__all__ = ["GANG_SAFE", "could_fit", "evict_and_pipeline", "plan_evictions", "plan_on_node",
           "victim_order", "whole_job_of"]

# The argument of reclaim and preempt that turns gang-safe eviction off.
GANG_SAFE = Argument("gangSafeEviction", bool, True,
                     "evict a gang whole or not at all, never below its minMember")

S = TaskStatus


def victim_order(session: Session, victims: list[Task], preemptor: Task) -> list[Task]:
    """Victims in eviction order (Volcano's): within a job, the task it would place last
    goes first; within a queue, the job it would schedule last; across queues, the
    queue the victim queue order puts first."""
    jobs, queues = session.jobs, session.queues
    preemptor_queue = queues[jobs[preemptor.job_id].queue]

    def compare(left: Task, right: Task) -> int:
        left_job, right_job = jobs[left.job_id], jobs[right.job_id]
        if left_job is right_job:
            return -session.task_compare(left, right)
        if left_job.queue == right_job.queue:
            result = session.job_compare(left_job, right_job)
            return -result if result else -session.task_compare(left, right)
        left_queue, right_queue = queues[left_job.queue], queues[right_job.queue]
        if session.victim_queue_less(left_queue, right_queue, preemptor_queue):
            return -1
        if session.victim_queue_less(right_queue, left_queue, preemptor_queue):
            return 1
        return -1 if left.uid < right.uid else (1 if left.uid > right.uid else 0)

    return sorted(victims, key=cmp_to_key(compare))


def _fits(need: Resource, available: Resource) -> bool:
    return need.first_insufficient(available) is None


def _weight(amount: Resource, total: Resource) -> float:
    """How much of the cluster `amount` is, summed over its resources: a single number
    to compare what evicting different gangs would waste."""
    weight = 0.0
    for name in amount.names():
        cluster = total.get(name)
        if cluster > 0:
            weight += amount.get(name) / cluster
    return weight


def plan_evictions(
    session: Session,
    preemptor: Task,
    node: Node,
    victims: list[Task],
    gang_safe: bool,
    whole_job: Callable[[Job], list[Task] | None],
) -> list[Task] | None:
    """The tasks to evict so that `preemptor` fits on `node` (resources only), taken
    from `victims` (already in eviction order, all on `node`), or None if they cannot
    make it fit. With `gang_safe`, a victim whose gang would drop below minMember is
    taken only with its whole job, as `whole_job(job)` gives it (None: the job cannot
    be evicted whole)."""
    jobs = session.jobs
    need = preemptor.resreq
    available = node.future_idle()
    chosen: list[Task] = []
    taken: dict[str, int] = {}
    breakers: list[Task] = []
    for victim in victims:
        if _fits(need, available):
            break
        job = jobs[victim.job_id]
        # Breaking a gang leaves it with some tasks but fewer than its minimum; taking
        # its last one evicts it whole. (A task taking the place of a task of its own
        # job leaves the job no smaller.)
        remaining = job.ready_task_num() - taken.get(job.uid, 0) - 1
        if (gang_safe and victim.job_id != preemptor.job_id
                and 0 < remaining < job.min_available):
            breakers.append(victim)
            continue
        chosen.append(victim)
        taken[job.uid] = taken.get(job.uid, 0) + 1
        available.add(victim.resreq)
    if _fits(need, available):
        return chosen
    if not breakers:
        return None

    # Whole gangs: what each would free here, and in all.
    chosen_keys = {t.key for t in chosen}
    options: dict[str, tuple[list[Task], Resource, float]] = {}
    for victim in breakers:
        if victim.job_id in options:
            continue
        tasks = whole_job(jobs[victim.job_id])
        if not tasks:
            continue
        tasks = [t for t in tasks if t.key not in chosen_keys]
        here = Resource()
        total = Resource()
        for task in tasks:
            total.add(task.resreq)
            if task.node_name == node.name:
                here.add(task.resreq)
        options[victim.job_id] = (tasks, here, _weight(total, session.total_resource))
    gang_tasks: list[Task] = []
    gangs: set[str] = set()
    while options and not _fits(need, available):
        enough = [uid for uid, (_, here, _) in options.items()
                  if _fits(need, available.clone().add(here))]
        if enough:
            pick = min(enough, key=lambda uid: options[uid][2])  # least waste
        else:
            pick = max(options, key=lambda uid: _weight(options[uid][1],
                                                        session.total_resource))
        tasks, here, _ = options.pop(pick)
        gangs.add(pick)
        gang_tasks.extend(tasks)
        available.add(here)
    if not _fits(need, available):
        return None
    # Spare the victims the gangs made unnecessary, the last taken first (not those of
    # a gang that goes whole).
    for victim in reversed(list(chosen)):
        if victim.job_id not in gangs and _fits(need, available.clone().sub(victim.resreq)):
            chosen.remove(victim)
            available.sub(victim.resreq)
    return chosen + gang_tasks


def could_fit(task: Task, node: Node, victims: list[Task]) -> bool:
    """Whether evicting every victim would make room at all (else skip the node)."""
    available = node.future_idle()
    for victim in victims:
        available.add(victim.resreq)
    return task.resreq.first_insufficient(available) is None


def whole_job_of(job: Job, eligible: Callable[[Task], bool],
                 approve: Callable[[list[Task]], list[Task]]) -> list[Task] | None:
    """Every placed task of `job`, if each is `eligible` and plugins `approve` them all
    as victims (asked in a fixed order); else None: evicting only some would leave the
    gang broken."""
    placed = sorted(job.tasks_in(S.BOUND | S.RUNNING | S.BINDING | S.ALLOCATED),
                    key=lambda t: t.key)
    if not placed or not all(eligible(t) for t in placed):
        return None
    if {t.key for t in approve(placed)} != {t.key for t in placed}:
        return None
    return placed


def evict_and_pipeline(session: Session, statement: Statement, task: Task, node: Node,
                       plan: list[Task], action: str,
                       check: Callable[[], bool] | None = None) -> bool:
    """Evict `plan` for `task` and pipeline `task` onto `node`, as one step merged into
    `statement`. `check`, if given, is asked once the victims are evicted (the task
    still pending): False gives the node up. Nothing of a failed step remains."""
    step = session.statement()
    for victim in plan:
        step.evict(victim, action, task)
    if (check is not None and not check()) or step.pipeline(
            task, node, eviction_occurred=bool(plan)) is not None:
        step.discard()
        return False
    statement.merge(step)
    return True


def plan_on_node(session: Session, task: Task, node: Node, eligible: Callable[[Task], bool],
                 offer: Callable[[Task, list[Task]], list[Task]], gang_safe: bool,
                 whole_job: Callable[[Job], list[Task] | None]) -> list[Task] | None:
    """What to evict on `node` for `task`, or None: the node's `eligible` tasks, in
    eviction order, as plugins `offer` them (reclaimable or preemptable), planned by
    `plan_evictions`."""
    candidates = [t for t, _ in node.tasks.values() if eligible(t)]
    if not candidates:
        return None
    # Plugins see candidates in eviction order: their running sums depend on it.
    candidates = victim_order(session, candidates, task)
    victims = offer(task, candidates)
    if not victims or not could_fit(task, node, victims):
        return None
    # Plugins keep the candidates' order, or are put back in it.
    position = {t.key: i for i, t in enumerate(candidates)}
    victims = sorted(victims, key=lambda t: position.get(t.key, len(position)))
    return plan_evictions(session, task, node, victims, gang_safe, whole_job)
