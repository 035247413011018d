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

Pure functions: the capacity-card plugin reads the annotations and asks these.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["INFERENCE", "SERVICE_TYPE_ANNOTATION", "TRAINING", "UNKNOWN", "may_reclaim",
           "owner_service_types", "service_type"]

SERVICE_TYPE_ANNOTATION = "volcano.sh/service.type"
INFERENCE, TRAINING, UNKNOWN = "inference", "training", "unknown"


def owner_service_types(mapping: Mapping[object, object]) -> dict[str, str]:
    """The conf's owner kind -> service type map, its types normalised (`Inference`
    and ` inference ` mean inference)."""
    return {str(kind): str(kind_type).strip().lower() for kind, kind_type in mapping.items()}


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
