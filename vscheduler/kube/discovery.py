"""What the API server serves, read from its discovery documents.

A cluster does not always serve what we would like: Volcano's own PodGroup CRD has no
status subresource (its scheduler writes a PodGroup's status with an update of the whole
object), its Queue CRD has one, and scheduler-plugins' coscheduling PodGroup CRD is
there only where someone installed it. The daemon asks once at start which kinds are
served and whether `<plural>/status` is, and asks again when a write is answered 404.
"""

from __future__ import annotations

import json
import logging
import threading

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from vscheduler.kube.errors import error_fields
from vscheduler.logs import fields

__all__ = ["ApiDiscovery"]

log = logging.getLogger(__name__)


class ApiDiscovery:
    """The resources of each group/version, as `GET /apis/{group}/{version}` lists them
    (`/api/v1` for the core group); a group/version the server does not serve lists
    nothing. Answers are kept until `forget`."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self._served: dict[tuple[str, str], frozenset[str] | None] = {}
        self._lock = threading.Lock()  # the loop and the writer's workers both ask

    def resources(self, group: str, version: str) -> frozenset[str] | None:
        """Resource names (`podgroups`, `podgroups/status`, ...) served under
        group/version; None when the question could not be answered (server away)."""
        key = (group, version)
        with self._lock:
            if key in self._served:
                return self._served[key]
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            response = self.api.call_api(path, "GET", _preload_content=False,
                                         _request_timeout=30, auth_settings=["BearerToken"])
            doc = json.loads(response.data or b"{}")
            names = frozenset(str(r.get("name") or "") for r in doc.get("resources") or []
                              if isinstance(r, dict))
        except ApiException as err:
            if err.status != 404:
                log.warning("Discovery failed", extra=fields(path=path, **error_fields(err)))
                return None
            names = frozenset()  # the group/version is not served at all
        except Exception as err:  # the server away: ask again next time
            log.warning("Discovery failed", extra=fields(path=path, **error_fields(err)))
            return None
        with self._lock:
            self._served[key] = names
        return names

    def serves(self, group: str, version: str, plural: str) -> bool | None:
        """Whether `plural` is served (None: unknown)."""
        names = self.resources(group, version)
        return None if names is None else plural in names

    def has_status(self, group: str, version: str, plural: str) -> bool | None:
        """Whether `plural/status` is served (None: unknown)."""
        names = self.resources(group, version)
        return None if names is None else f"{plural}/status" in names

    def forget(self, group: str, version: str) -> None:
        """Ask the server again next time (a CRD may have been installed or changed)."""
        with self._lock:
            self._served.pop((group, version), None)
