"""What a failed call to the API server said, as log fields every writer shares."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

__all__ = ["error_fields"]


def error_fields(err: Exception) -> dict[str, Any]:
    """`status` (the HTTP status, None when no answer came) and `error` (the API
    server's message from its Status object, else the reason or the exception)."""
    if isinstance(err, ApiException):
        try:
            message = json.loads(err.body).get("message")
        except (TypeError, ValueError, AttributeError):
            message = None
        return {"status": err.status, "error": str(message or f"{err.status} {err.reason}")}
    return {"status": None, "error": str(err) or type(err).__name__}
