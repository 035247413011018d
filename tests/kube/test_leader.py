"""Leader election on a Lease, two candidates against the API server stand-in."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kubernetes import client

from tests.apiserver import FakeApiServer, wait_for
from vscheduler.kube.leader import LeaderElector

TIMES = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        yield srv


def _candidate(server: FakeApiServer, identity: str) -> tuple[LeaderElector, threading.Event,
                                                             threading.Thread]:
    api = client.ApiClient(client.Configuration(host=server.url))
    elector = LeaderElector(api, "kube-system", "vscheduler", identity, **TIMES)
    stop = threading.Event()
    thread = threading.Thread(target=elector.run, args=(stop,), daemon=True)
    thread.start()
    return elector, stop, thread


@contextmanager
def _candidates(server: FakeApiServer, *identities: str) -> Iterator[list[tuple[
        LeaderElector, threading.Event, threading.Thread]]]:
    """Candidates electing (in their threads) until the block ends, then stopped."""
    running = [_candidate(server, identity) for identity in identities]
    try:
        yield running
    finally:
        for _, stop, _ in running:
            stop.set()
        for _, _, thread in running:
            thread.join(timeout=3)


def _watch_overlap(electors: list[LeaderElector], seconds: float) -> int:
    """How often more than one candidate believed it led, sampled for `seconds`."""
    overlaps = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        overlaps += sum(e.is_leader.is_set() for e in electors) > 1
        time.sleep(0.005)
    return overlaps


def test_one_leader_and_a_takeover_within_the_lease_duration(server: FakeApiServer):
    with _candidates(server, "a", "b") as [(a, stop_a, _), (b, stop_b, _)]:
        wait_for(lambda: a.is_leader.is_set() or b.is_leader.is_set())
        assert _watch_overlap([a, b], 0.5) == 0
        stop_leader, follower = (stop_a, b) if a.is_leader.is_set() else (stop_b, a)
        # The leader stops renewing (it hangs, say): it keeps believing it leads, but the
        # other takes over only once the lease has run out.
        stopped = time.monotonic()
        stop_leader.set()
        leader = a if follower is b else b
        # It is told not to schedule once its last renewal is older than the renew
        # deadline, before the other can take over (the daemon asks `leading`).
        wait_for(lambda: not leader.leading(), timeout=TIMES["renew_deadline"] + 0.3)
        assert leader.is_leader.is_set() and not follower.is_leader.is_set()
        wait_for(follower.is_leader.is_set, timeout=3)
        took = time.monotonic() - stopped
        assert TIMES["lease_duration"] * 0.8 <= took <= TIMES["lease_duration"] + 1.0
        assert server.lease("kube-system", "vscheduler")["spec"]["holderIdentity"] == \
            follower.identity


def test_a_leader_that_cannot_renew_steps_down_before_the_lease_expires(server):
    with _candidates(server, "a") as [(a, _, _)]:
        try:
            wait_for(a.is_leader.is_set)
            server.go_down()
            lost_at = time.monotonic()
            wait_for(a.lost.is_set, timeout=3)
            assert not a.is_leader.is_set()
            assert time.monotonic() - lost_at < TIMES["lease_duration"]
        finally:
            server.come_back()


def test_a_leader_that_finds_the_lease_taken_has_lost(server):
    """Paused past the lease duration (SIGSTOP, a long GC), a leader wakes to find the
    Lease held by another: it has lost leadership (the daemon exits, as kube-scheduler
    does), it does not stand by with a cache that went stale while it led."""
    with _candidates(server, "a") as [(a, _, _)]:
        wait_for(a.is_leader.is_set)
        lease = server.lease("kube-system", "vscheduler")
        lease["spec"]["holderIdentity"] = "b"
        server.update(lease)
        wait_for(a.lost.is_set, timeout=3)
        assert not a.is_leader.is_set() and not a.leading()


def test_a_leader_that_stops_gives_the_lease_up(server):
    """Stopped (SIGTERM), a leader releases the Lease: a standby takes it at once, not
    a lease duration later."""
    with _candidates(server, "a", "b") as [(a, stop_a, thread_a), (b, stop_b, thread_b)]:
        wait_for(lambda: a.is_leader.is_set() or b.is_leader.is_set())
        leader, follower, stop = (a, b, stop_a) if a.is_leader.is_set() else (b, a, stop_b)
        stop.set()
        (thread_a if leader is a else thread_b).join(timeout=3)
        stopped = time.monotonic()
        leader.release()
        assert not leader.is_leader.is_set()
        wait_for(follower.is_leader.is_set, timeout=3)
        assert time.monotonic() - stopped < TIMES["lease_duration"] * 0.8
        assert server.lease("kube-system", "vscheduler")["spec"]["holderIdentity"] == \
            follower.identity


def test_a_release_waits_out_a_renewal_in_flight_and_none_follows(server):
    """SIGTERM while the elector is inside a slow renewal (a GET that took its
    retries): the release waits for it, and the elector does not take the Lease back
    afterwards."""
    with _candidates(server, "a") as [(a, stop_a, thread_a)]:
        wait_for(a.is_leader.is_set)
        real = a._call

        def slow(method: str, path: str, body: object = None) -> dict:
            if method == "GET" and threading.current_thread() is thread_a:
                time.sleep(TIMES["renew_deadline"] * 1.5)
            return real(method, path, body)

        a._call = slow  # type: ignore[method-assign]
        time.sleep(TIMES["retry_period"] * 2)  # (the elector is inside a slow GET now)
        stop_a.set()
        a.release()
        thread_a.join(timeout=5)
        time.sleep(TIMES["lease_duration"])
        spec = server.lease("kube-system", "vscheduler")["spec"]
        assert spec["holderIdentity"] == "" and not a.is_leader.is_set()


def test_bad_timings_are_refused():
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaderElector(client.ApiClient(), "ns", "l", "me", lease_duration=5,
                      renew_deadline=10, retry_period=2)
