"""The tidal reclaim policy between inference and training (seed 002), on its own.

Inference services follow the day's traffic; training jobs fill what they leave. So an
inference task may take cards back from training tasks, and nothing else is ever taken:

- a task's *service type* is its job's `volcano.sh/service.type` annotation
  (`inference` or `training`, any case), else what the conf maps the kind of the pod's
  first owner to (`podOwnerReferenceToServiceType`, e.g. ReplicaSet -> inference);
  anything else is *unknown*;
- a training task reclaims from nobody;
- any other task (inference, or unknown as the seed's code allows) may take training
  tasks only: never inference tasks, never tasks of unknown type.

Pure functions (and the conf's argument that names owner kinds' types): the
capacity-card plugin reads the annotations and asks these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vscheduler.plugin import Argument, ArgumentError
from vscheduler.textinput import brief

__all__ = ["INFERENCE", "SERVICE_TYPE_ANNOTATION", "TRAINING", "UNKNOWN", "ServiceTypesArgument",
           "may_reclaim", "service_type"]

SERVICE_TYPE_ANNOTATION = "volcano.sh/service.type"
INFERENCE, TRAINING, UNKNOWN = "inference", "training", "unknown"


class ServiceTypesArgument(Argument):
    """`podOwnerReferenceToServiceType`: owner kind -> `inference` or `training` (any
    case), handed on normalised. Any other type is refused with the conf: a misspelt
    `trainig` would leave every such job of unknown type, which reclaims from anyone
    and is never taken, with nothing said."""

    __slots__ = ()

    def convert(self, raw: Any) -> Any:
        mapping = super().convert(raw)
        types: dict[str, str] = {}
        for kind, kind_type in mapping.items():
            value = kind_type.strip().lower() if isinstance(kind_type, str) else None
            if not isinstance(kind, str) or value not in (INFERENCE, TRAINING):
                raise ArgumentError(f"maps owner kinds to {INFERENCE} or {TRAINING}, got "
                                    f"{brief(kind)}: {brief(kind_type)}")
            types[kind] = value
        return types


def service_type(declared: str | None, owner_kind: str,
                 owner_types: Mapping[str, str]) -> str:
    """inference, training or unknown: `declared` (the job's annotation) when it says
    something, else the type `owner_types` gives the pod's owner kind."""
    if declared is not None and declared.strip():
        kind = declared.strip().lower()
    else:
        kind = owner_types.get(owner_kind, "")
    return kind if kind in (INFERENCE, TRAINING) else UNKNOWN


def may_reclaim(reclaimer: str, victim: str) -> bool:
    """May a task of service type `reclaimer` take a task of type `victim`? Only a
    training victim, and only for a reclaimer that is not training itself."""
    return reclaimer != TRAINING and victim == TRAINING
