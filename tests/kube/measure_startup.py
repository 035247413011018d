"""Time from a daemon's start to its first bind, and its peak memory, against the API
server stand-in.

    python -m tests.kube.measure_startup --nodes 5000 --running 40000 --jobs 1000
    python -m tests.kube.measure_startup --nodes 5000 --running 60000 --jobs 22500 \
        --tasks-per-job 4

The stand-in runs in a child process, filled with `vscheduler bench`'s cluster (gangs of
`--tasks-per-job` pods); the daemon lists every kind (in pages of `--page-size`), fills
its cache and runs its first session. The peak RSS is this process's: the daemon's and
its client's.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import threading
import time

from kubernetes import client

from vscheduler.cli import tune_collector
from vscheduler.kube.daemon import Daemon
from vscheduler.model import Task

_SERVER = """
import sys
from tests.apiserver import FakeApiServer
from vscheduler.bench import BenchSpec, generate
spec = BenchSpec(nodes={nodes}, running={running}, jobs={jobs}, tasks_per_job={tasks})
server = FakeApiServer(history_limit=100000).start()
for obj in generate(spec):
    server.create(obj)
print(server.url, flush=True)
sys.stdin.read()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--running", type=int, default=8000)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--tasks-per-job", type=int, default=10)
    parser.add_argument("--page-size", type=int, default=500)
    args = parser.parse_args()
    tune_collector()  # (as the `vscheduler` command does)
    code = _SERVER.format(nodes=args.nodes, running=args.running, jobs=args.jobs,
                          tasks=args.tasks_per_job)
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()  # type: ignore[union-attr]
        started = time.perf_counter()
        api = client.ApiClient(client.Configuration(host=url))
        daemon = Daemon(api, None, qps=1000, burst=1000)
        for reflector in daemon.reflectors:
            reflector.page_size = args.page_size
        first: list[float] = []
        bind = daemon.writer.bind

        def timed_bind(task: Task, node: str) -> None:
            if not first:
                first.append(time.perf_counter())
            bind(task, node)

        daemon.writer.bind = timed_bind  # type: ignore[method-assign]
        daemon.start_watches(synced_timeout=600)
        listed = time.perf_counter()
        runner = threading.Thread(target=daemon.run, daemon=True)
        runner.start()
        while not first and time.perf_counter() - started < 600:
            time.sleep(0.02)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # (KiB on Linux)
        print(f"listed every kind in {listed - started:.1f} s; first bind decided "
              f"{first[0] - started:.1f} s after start ({len(daemon.cache.tasks)} pods); "
              f"peak RSS {peak:.0f} MiB")
        daemon.stop.set()
        runner.join(timeout=600)  # (the session under way ends before the server goes)
    finally:
        server.kill()


if __name__ == "__main__":
    main()
