"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's elector does it.

One replica holds the Lease and renews it every retry period; the others watch it and
take it once it has not been renewed for a lease duration (measured on their own
clock, from when they last saw it change, so clocks need not agree). Writes carry the
Lease's resourceVersion, so two candidates cannot both win: the loser gets 409. A leader
that cannot renew within the renew deadline (shorter than the lease duration) stops
being leader before anyone else can take over, and says so through `lost`: the daemon
stops scheduling and exits non-zero, as Volcano's does; so does a leader that finds the
Lease taken (it was paused past the lease duration, say). The daemon schedules only
while the last renewal is younger than the renew deadline (`leading`), whatever this
thread has noticed yet: after a pause, the loop may run before the elector does. A
leader that stops (SIGTERM) gives the Lease up, as client-go's ReleaseOnCancel does, so
a standby takes over at once rather than after a lease duration.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from vscheduler.kube.errors import error_fields
from vscheduler.logs import V4, fields

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)


def _micro_time() -> str:
    # The API server wants exactly six fractional digits.
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, api: ApiClient, namespace: str, name: str, identity: str, *,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs retry period < renew deadline < lease "
                             "duration")
        self.api = api
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.is_leader = threading.Event()
        self.lost = threading.Event()
        self._observed: tuple[Any, float] | None = None  # (record, when we saw it change)
        self._renewed = 0.0
        self._holder: str | None = None  # the holder last logged
        # One attempt to acquire or renew at a time, and none once the Lease is given
        # up: a renewal in flight would otherwise take it back after the release.
        self._turn = threading.Lock()
        self._released = False

    def leading(self) -> bool:
        """Whether to schedule now: leader, and renewed within the renew deadline."""
        return self.is_leader.is_set() and \
            time.monotonic() - self._renewed < self.renew_deadline

    def release(self) -> None:
        """Give the Lease up if this replica holds it (best effort: a standby otherwise
        takes it once it runs out), once a renewal in flight is done; the elector then
        neither acquires nor renews."""
        with self._turn:
            self._released = True
            if self.is_leader.is_set():
                self.is_leader.clear()
                self._give_up()

    def _give_up(self) -> None:
        try:
            lease = self._call("GET", self.path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = _micro_time()
            lease["spec"] = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1,
                             "acquireTime": now, "renewTime": now}
            self._call("PUT", self.path, lease)
        except Exception as err:
            log.warning("Lease not released", extra=fields(
                lease=self.lease, identity=self.identity, **error_fields(err)))
            return
        log.info("Lease released", extra=fields(lease=self.lease, identity=self.identity))

    @property
    def lease(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _call(self, method: str, path: str, body: Any = None) -> dict:
        response = self.api.call_api(
            path, method, body=body, header_params={"Content-Type": "application/json"},
            _preload_content=False, _request_timeout=max(self.retry_period, 1.0),
            auth_settings=["BearerToken"])
        return json.loads(response.data or b"{}")

    def run(self, stop: threading.Event) -> None:
        """Try to acquire, then renew, until `stop` is set or leadership is lost."""
        while not stop.is_set() and not self.lost.is_set():
            try:
                self._try()
            except Exception as err:  # the API server away: a leader counts the time
                log.warning("Lease not read or renewed", extra=fields(
                    lease=self.lease, identity=self.identity, leader=self.is_leader.is_set(),
                    **error_fields(err)))
            if self.is_leader.is_set() and time.monotonic() - self._renewed > \
                    self.renew_deadline:
                log.error("Leadership lost: lease not renewed within the renew deadline",
                          extra=fields(lease=self.lease, identity=self.identity,
                                       renew_deadline=self.renew_deadline))
                self.is_leader.clear()
                self.lost.set()
                return
            stop.wait(self.retry_period)

    def _spec(self, acquired: str | None) -> dict:
        now = _micro_time()
        return {"holderIdentity": self.identity,
                "leaseDurationSeconds": max(int(self.lease_duration), 1),
                "acquireTime": acquired or now, "renewTime": now}

    def _try(self) -> None:
        with self._turn:
            if not self._released:
                self._acquire_or_renew()

    def _acquire_or_renew(self) -> None:
        try:
            lease = self._call("GET", self.path)
        except ApiException as err:
            if err.status != 404:
                raise
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(None)}
            try:
                self._call("POST", self.collection, body)
            except ApiException as conflict:
                if conflict.status == 409:  # another candidate created it first
                    return
                raise
            self._won()
            return
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"))
        now = time.monotonic()
        if self._observed is None or self._observed[0] != record:
            self._observed = (record, now)
        holder = spec.get("holderIdentity")
        if holder and holder != self.identity and now - self._observed[1] < \
                self.lease_duration:
            if self.is_leader.is_set():
                log.error("Leadership lost: the lease is held by another",
                          extra=fields(lease=self.lease, identity=self.identity,
                                       holder=holder))
                self.lost.set()
            elif self._holder != holder:
                log.info("Lease held by another; standing by",
                         extra=fields(lease=self.lease, holder=holder))
            self._holder = holder
            self.is_leader.clear()
            return
        acquired = spec.get("acquireTime") if holder == self.identity else None
        lease["spec"] = {**spec, **self._spec(acquired)}
        try:
            self._call("PUT", self.path, lease)
        except ApiException as err:
            if err.status == 409:  # someone else wrote it in between
                if self.is_leader.is_set():
                    log.error("Leadership lost: the lease was written by another",
                              extra=fields(lease=self.lease, identity=self.identity))
                    self.lost.set()
                self.is_leader.clear()
                return
            raise
        self._won()

    def _won(self) -> None:
        self._renewed = time.monotonic()
        if not self.is_leader.is_set():
            log.info("Lease acquired", extra=fields(lease=self.lease,
                                                    identity=self.identity))
        else:
            log.log(V4, "Lease renewed", extra=fields(lease=self.lease))
        self._holder = self.identity
        self.is_leader.set()
