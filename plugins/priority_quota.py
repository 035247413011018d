"""Quotas per priority class within a queue, and the priority classes a queue allows
(seed 000's priorityQuotas), for the capacity plugin.

Two Queue annotations:
- `elastic.gpu/priority-quotas: '{"production": {"nvidia.com/gpu": "8"}, "normal":
  {"nvidia.com/gpu": "4"}}'`: the most the queue's jobs of each class listed hold in
  all, per resource listed (a job's class is its PodGroup's `priorityClassName`, or
  its pod's);
- `elastic.gpu/priority-classes: "production,high"`: the classes whose jobs the queue
  takes; a job of another class waits, with a reason that names the list.

An annotation that cannot be read is ignored, with a Warning event on the Queue (the
plugin's). What each queue holds per class is kept between sessions (a tally).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from vscheduler.model import Job, Queue
from vscheduler.quantity import QuantityError
from vscheduler.quota import amount_text
from vscheduler.resources import MIN_RESOURCE, Resource
from vscheduler.tally import Part

__all__ = ["CLASSES", "QUOTAS", "ClassTerms", "class_of", "class_part", "read_class_terms"]

QUOTAS = "elastic.gpu/priority-quotas"
CLASSES = "elastic.gpu/priority-classes"


@dataclass(frozen=True, slots=True)
class ClassTerms:
    """A queue's quotas per priority class, and the classes it allows (None: any)."""

    quotas: Mapping[str, Resource] = field(default_factory=dict)
    allowed: tuple[str, ...] | None = None

    def refusal(self, queue: str, job_class: str) -> str | None:
        """Why a job of `job_class` may not run in `queue`, if its class is not allowed."""
        if self.allowed is None or job_class in self.allowed:
            return None
        return (f"queue {queue} takes jobs of priority classes {', '.join(self.allowed)} "
                f"only, not {job_class or '(none)'} ({CLASSES})")

    def over(self, queue: str, job_class: str, held: Resource,
             request: Resource) -> str | None:
        """Why `request` more for a job of `job_class` passes the class's quota in
        `queue`, holding `held` already (None if it fits, or the class has none)."""
        quota = self.quotas.get(job_class)
        if quota is None:
            return None
        listed = set(quota.names()) | set(quota.scalars)
        future = held.clone().add(request)
        failing = [n for n in request.names()
                   if n in listed and future.get(n) - quota.get(n) >= MIN_RESOURCE]
        if not failing:
            return None
        return (f"queue {queue}: priority class {job_class} may hold at most "
                + ", ".join(f"{n} {amount_text(n, quota.get(n))}" for n in failing)
                + f" ({QUOTAS})")


NO_CLASS_TERMS = ClassTerms()


def read_class_terms(queue: Queue) -> tuple[ClassTerms, list[str]]:
    """A queue's class terms, and why an annotation cannot be used (then ignored)."""
    annotations = queue.annotations or {}
    raw = (annotations.get(QUOTAS), annotations.get(CLASSES))
    if raw == (None, None):
        return NO_CLASS_TERMS, []
    return _read(raw)


@lru_cache(maxsize=1024)
def _read(raw: tuple[str | None, str | None]) -> tuple[ClassTerms, list[str]]:
    quotas_raw, classes_raw = raw
    problems: list[str] = []
    quotas: dict[str, Resource] = {}
    if quotas_raw is not None:
        try:
            parsed: Any = json.loads(quotas_raw)
            if not isinstance(parsed, Mapping) or not all(
                    isinstance(v, Mapping) for v in parsed.values()):
                raise ValueError("not a JSON object of priority class -> resource "
                                 "quantities")
            quotas = {str(name): Resource.from_k8s(amounts)
                      for name, amounts in parsed.items()}
        except (ValueError, QuantityError, RecursionError) as err:
            problems.append(f"{QUOTAS}: {str(err)[:120]}; ignored")
            quotas = {}
    allowed = None
    if classes_raw is not None:
        names = tuple(dict.fromkeys(n.strip() for n in str(classes_raw).split(",")
                                    if n.strip()))
        if names:
            allowed = names
        else:
            problems.append(f"{CLASSES}: names no priority class; ignored")
    return ClassTerms(quotas, allowed), problems


def class_of(job: Job) -> str:
    """A job's priority class name (its PodGroup's, or its pod's)."""
    return job.priority_class_name


def class_part(job: Job) -> Part:
    """A job's part of what its queue holds per priority class (a tally's part)."""
    return f"{job.queue}\0{class_of(job)}", (job.allocated.clone(),)
