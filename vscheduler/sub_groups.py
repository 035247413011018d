"""Sub-groups of a gang (a PodGroup's `spec.subGroupPolicy`): which pods form each, and
whether enough of them are placed.

A policy takes the pods its label selector picks (every pod when it has none) and
groups them by their values of its `matchLabelKeys`: the pods of one training replica,
one pipeline stage. A pod goes to the first policy that takes it; a pod lacking a
value for one of the keys is in no group of that policy, and a pod in no policy's
group is in the job's *rest*, placed freely within the job's own limits.

Each group is a small gang of its own: it is *ready* once `size` of its pods are placed
(`subGroupSize`), and it is placed within one domain of its own network topology
(`framework/sub_group_placement.py`). The job runs only once, for every policy, at
least `minSubGroups` of its groups are ready, on top of the job's own minMember.

Volcano reads a policy without `matchLabelKeys` as taking no pod at all; here it is
one group of every pod its selector picks, which is what such a policy says.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from vscheduler.matching import label_selector_matches, parse_label_int
from vscheduler.specs import SubGroupPolicy

if TYPE_CHECKING:
    from vscheduler.model import Status, Task

__all__ = ["GroupKey", "SubGroup", "group_tasks", "short_policy"]

# A group: its policy's name and its pods' values for the policy's keys
GroupKey = tuple[str, tuple[str, ...]]


def group_key(policy: SubGroupPolicy, values: tuple[str, ...]) -> GroupKey:
    """What tells a group apart: its policy's name and its pods' values for its keys."""
    return (policy.name, values)


class SubGroup:
    """The pods of one group of a policy (`values`: theirs for its keys). `key` tells
    groups apart (a policy's name may hold a "/", and a value a "-": the `name` shown,
    `replica/0`, may repeat)."""

    __slots__ = ("index", "key", "name", "policy", "tasks", "values")

    def __init__(self, policy: SubGroupPolicy, values: tuple[str, ...]) -> None:
        self.policy = policy
        self.values = values
        self.key = group_key(policy, values)
        self.name = f"{policy.name}/{'-'.join(values)}" if values else policy.name
        # The first value read as a number orders the groups 0, 1, 2, ... rather than
        # 0, 1, 10, 11 (Volcano's match index)
        first = parse_label_int(values[0]) if values else None
        self.index = first if first is not None else -1
        self.tasks: list[Task] = []

    @property
    def size(self) -> int:
        return self.policy.size

    def count(self, statuses: Status) -> int:
        return sum(1 for task in self.tasks if task.status & statuses)

    def full(self, statuses: Status) -> bool:
        """Whether `size` of its tasks are in `statuses` (ready, with the ready ones)."""
        return self.count(statuses) >= self.policy.size

    def __repr__(self) -> str:
        return f"SubGroup({self.name}, {len(self.tasks)} pods, size {self.size})"


def _values(policy: SubGroupPolicy, labels: dict[str, str] | None) -> tuple[str, ...] | None:
    """The pod's values for the policy's keys, or None if the policy does not take it."""
    labels = labels or {}
    if policy.selector is not None and not label_selector_matches(policy.selector, labels):
        return None
    values = []
    for key in policy.match_label_keys:
        value = labels.get(key)
        if not value:
            return None
        values.append(value)
    return tuple(values)


def group_tasks(policies: Iterable[SubGroupPolicy], tasks: Iterable[Task]
                ) -> dict[GroupKey, SubGroup]:
    """Every group of the policies with its tasks, by key; tasks in no group are left
    out (the job's rest)."""
    policies = tuple(policies)
    groups: dict[GroupKey, SubGroup] = {}
    for task in tasks:
        labels = task.pod.labels
        for policy in policies:
            values = _values(policy, labels)
            if values is None:
                continue
            group = groups.get(group_key(policy, values))
            if group is None:
                group = SubGroup(policy, values)
                groups[group.key] = group
            group.tasks.append(task)
            break
    for group in groups.values():
        group.tasks.sort(key=lambda t: t.key)
    return groups


def short_policy(policies: Iterable[SubGroupPolicy], groups: Iterator[SubGroup] | list[SubGroup],
                 statuses: Status) -> tuple[SubGroupPolicy, int] | None:
    """The first policy with fewer than `minSubGroups` groups having at least `size`
    tasks in `statuses`, and how many it has; None if none falls short."""
    full: dict[str, int] = {}
    for group in groups:
        if group.full(statuses):
            full[group.policy.name] = full.get(group.policy.name, 0) + 1
    for policy in policies:
        have = full.get(policy.name, 0)
        if have < policy.min_sub_groups:
            return policy, have
    return None
