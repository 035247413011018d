"""The `vscheduler` command."""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
from collections.abc import Sequence

from vscheduler import __version__
from vscheduler.conf import ConfError, load_conf, parse_conf
from vscheduler.framework.placement import NodeSampling
from vscheduler.objects import timestamp_of
from vscheduler.registry import ACTIONS_GROUP, PLUGINS_GROUP, installed
from vscheduler.report import render_text
from vscheduler.simulate import Simulation, load_manifests

__all__ = ["main"]

EXIT_USAGE = 2


def _simulate(args: argparse.Namespace) -> int:
    try:
        conf = load_conf(args.conf)
    except ConfError as err:
        print(f"vscheduler: bad conf: {err}", file=sys.stderr)
        return EXIT_USAGE
    for warning in conf.warnings:
        print(f"vscheduler: warning: {warning}", file=sys.stderr)
    try:
        objects, problems = load_manifests(args.files)
    except OSError as err:
        print(f"vscheduler: cannot read {err.filename}: {err.strerror}", file=sys.stderr)
        return EXIT_USAGE
    names = tuple(args.scheduler_name or ["vscheduler"])
    simulation = Simulation(conf, names, args.default_queue, _sampling(args), args.now)
    simulation.load(objects, problems)
    report = simulation.run(args.sessions).as_dict()
    if args.output == "json":
        print(json.dumps(report, indent=2, sort_keys=False))
    else:
        print(render_text(report), end="")
    return 0


def _time(text: str) -> float:
    stamp = timestamp_of({"metadata": {"creationTimestamp": text}})
    if stamp is None:
        raise argparse.ArgumentTypeError(f"not an RFC 3339 time: {text!r}")
    return stamp


def _sampling(args: argparse.Namespace) -> NodeSampling:
    return NodeSampling(args.minimum_feasible_nodes, args.minimum_percentage_nodes_to_find,
                        args.percentage_nodes_to_find)


def _add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    """Volcano's flags for how many feasible nodes are enough for a task."""
    parser.add_argument("--percentage-nodes-to-find", type=int, default=0, metavar="PCT",
                        help="feasible nodes to find, in percent of all (0: adaptive, "
                             "as Volcano; 100: try every node)")
    parser.add_argument("--minimum-feasible-nodes", type=int, default=100, metavar="N",
                        help="clusters up to this size are searched whole (default 100)")
    parser.add_argument("--minimum-percentage-nodes-to-find", type=int, default=5,
                        metavar="PCT", help="lower bound of the adaptive percentage")


def _bench(args: argparse.Namespace) -> int:
    from vscheduler.bench import BENCH_CONF, BenchSpec, render, run_bench

    try:
        conf = load_conf(args.conf) if args.conf else parse_conf(BENCH_CONF, "bench conf")
    except ConfError as err:
        print(f"vscheduler: bad conf: {err}", file=sys.stderr)
        return EXIT_USAGE
    spec = BenchSpec(nodes=args.nodes, gpus_per_node=args.gpus_per_node, queues=args.queues,
                     jobs=args.jobs, tasks_per_job=args.tasks_per_job, running=args.running,
                     sessions=args.sessions, churn=args.churn, seed=args.seed,
                     mig_every=args.mig_every)
    figures = run_bench(spec, conf, measure_memory=not args.no_memory,
                        node_sampling=_sampling(args))
    if args.output == "json":
        print(json.dumps(figures, indent=2))
    else:
        print(render(figures), end="")
    return 0


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _duration(text: str) -> float:
    """A Go duration as Volcano's flags take them (`1s`, `500ms`, `1m30s`), in seconds."""
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (examples: 1s, 500ms)")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _flag(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def _run(args: argparse.Namespace) -> int:
    import signal
    import socket
    import uuid

    from kubernetes import client, config

    from vscheduler.kube.daemon import Daemon
    from vscheduler.kube.leader import LeaderElector
    from vscheduler.kube.metrics import serve

    configuration = client.Configuration()
    try:
        if args.kubeconfig:
            config.load_kube_config(args.kubeconfig, client_configuration=configuration)
        else:
            try:
                config.load_incluster_config(client_configuration=configuration)
            except config.ConfigException:
                config.load_kube_config(client_configuration=configuration)
    except Exception as err:
        print(f"vscheduler: no cluster to talk to: {err}", file=sys.stderr)
        return EXIT_USAGE
    api = client.ApiClient(configuration)
    names = tuple(args.scheduler_name or ["vscheduler"])
    elector = None
    if args.leader_elect:
        try:
            # The lock is named after the scheduler, as Volcano's; the identity is unique
            # per process.
            elector = LeaderElector(
                api, args.lock_object_namespace, names[0] if len(names) == 1 else "vscheduler",
                f"{socket.gethostname()}_{uuid.uuid4()}",
                lease_duration=args.leader_elect_lease_duration,
                renew_deadline=args.leader_elect_renew_deadline,
                retry_period=args.leader_elect_retry_period)
        except ValueError as err:
            print(f"vscheduler: {err}", file=sys.stderr)
            return EXIT_USAGE
    try:
        daemon = Daemon(api, args.scheduler_conf, scheduler_names=names,
                        default_queue=args.default_queue, period=args.schedule_period,
                        qps=args.kube_api_qps, burst=args.kube_api_burst,
                        dry_run=args.dry_run, node_sampling=_sampling(args), elector=elector)
    except ConfError as err:
        print(f"vscheduler: bad conf: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.enable_metrics or args.enable_healthz:
        try:
            serve(daemon.metrics, args.listen_address, args.schedule_period,
                  enable_metrics=args.enable_metrics, enable_healthz=args.enable_healthz)
        except (OSError, ValueError) as err:
            print(f"vscheduler: cannot listen on {args.listen_address}: {err}",
                  file=sys.stderr)
            return EXIT_USAGE
    signal.signal(signal.SIGTERM, lambda *_: daemon.stop.set())
    signal.signal(signal.SIGINT, lambda *_: daemon.stop.set())
    daemon.start_watches()
    return daemon.run()


def _plugins(args: argparse.Namespace) -> int:
    for title, group in (("actions", ACTIONS_GROUP), ("plugins", PLUGINS_GROUP)):
        print(f"{title}:")
        for name, point in installed(group).items():
            print(f"  {name:<16} {point.value}")  # type: ignore[attr-defined]
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vscheduler",
        description="A Volcano-style batch scheduler for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    simulate = commands.add_parser(
        "simulate", help="run scheduling sessions on manifest files, with no cluster",
        description="Load Kubernetes manifests (Nodes, Pods, PodGroups, Queues, "
                    "PriorityClasses), run sessions in memory and print the decisions.")
    simulate.add_argument("files", nargs="+", metavar="FILE", help="YAML manifests")
    simulate.add_argument("--conf", help="volcano-scheduler.conf (default: Volcano's "
                                         "default conf)")
    simulate.add_argument("--sessions", type=int, default=1, metavar="N",
                          help="sessions to run (default 1)")
    simulate.add_argument("--scheduler-name", action="append", metavar="NAME",
                          help="pods with this schedulerName are ours (repeatable; "
                               "default vscheduler)")
    simulate.add_argument("--default-queue", default="default", metavar="NAME",
                          help="queue of jobs that name none (default: default)")
    simulate.add_argument("--now", type=_time, metavar="TIME",
                          help="the clock at the first session, as an RFC 3339 time "
                               "(default: the newest creationTimestamp in the files); it "
                               "moves one second a session")
    simulate.add_argument("--output", choices=("text", "json"), default="text")
    _add_sampling_flags(simulate)
    simulate.set_defaults(run=_simulate)

    bench = commands.add_parser(
        "bench", help="time real sessions on a generated cluster",
        description="Generate a GPU cluster from a seed, run sessions in-process and print "
                    "the time of each phase, pods placed per second and memory figures.")
    bench.add_argument("--nodes", type=int, default=100)
    bench.add_argument("--gpus-per-node", type=int, default=8)
    bench.add_argument("--mig-every", type=int, default=10, metavar="N",
                       help="every Nth node is split into MIG slices (0: none)")
    bench.add_argument("--queues", type=int, default=4)
    bench.add_argument("--jobs", type=int, default=20, help="pending gang jobs")
    bench.add_argument("--tasks-per-job", type=int, default=4)
    bench.add_argument("--running", type=int, default=200, help="pods already running")
    bench.add_argument("--sessions", type=int, default=1)
    bench.add_argument("--churn", type=int, default=0, metavar="N",
                       help="before each session after the first, N running pods finish "
                            "and N new pods arrive (the steady state)")
    bench.add_argument("--seed", type=int, default=1)
    bench.add_argument("--conf", help="conf to run (default: Volcano's default conf with "
                                      "capacity-card)")
    bench.add_argument("--no-memory", action="store_true",
                       help="skip the cache memory measurement (tracemalloc slows loading)")
    bench.add_argument("--output", choices=("text", "json"), default="text")
    _add_sampling_flags(bench)
    bench.set_defaults(run=_bench)

    run = commands.add_parser(
        "run", help="schedule a cluster's pods (the daemon)",
        description="Watch the cluster and schedule pods whose schedulerName is ours. Flags "
                    "are named as Volcano's scheduler's.")
    run.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, "
                                          "then ~/.kube/config)")
    run.add_argument("--scheduler-conf", help="volcano-scheduler.conf (default: Volcano's "
                                              "default conf); reloaded when it changes")
    run.add_argument("--schedule-period", type=_duration, default=1.0, metavar="DURATION",
                     help="pause between sessions (default 1s)")
    run.add_argument("--scheduler-name", action="append", metavar="NAME",
                     help="pods with this schedulerName are ours (repeatable)")
    run.add_argument("--default-queue", default="default", metavar="NAME")
    run.add_argument("--leader-elect", type=_flag, nargs="?", const=True, default=False,
                     metavar="BOOL", help="elect a leader on a Lease: standbys only watch")
    run.add_argument("--lock-object-namespace", default="volcano-system", metavar="NS")
    for name, default in (("lease-duration", "15s"), ("renew-deadline", "10s"),
                          ("retry-period", "2s")):
        run.add_argument(f"--leader-elect-{name}", type=_duration, default=_duration(default),
                         metavar="DURATION")
    run.add_argument("--kube-api-qps", type=float, default=50.0, metavar="QPS")
    run.add_argument("--kube-api-burst", type=int, default=100, metavar="N")
    run.add_argument("--enable-metrics", type=_flag, nargs="?", const=True, default=False,
                     metavar="BOOL")
    run.add_argument("--enable-healthz", type=_flag, nargs="?", const=True, default=False,
                     metavar="BOOL")
    run.add_argument("--listen-address", default=":8080", metavar="ADDRESS")
    run.add_argument("--dry-run", action="store_true",
                     help="decide and report, write nothing to the cluster")
    _add_sampling_flags(run)
    run.set_defaults(run=_run)

    plugins = commands.add_parser("plugins", help="list installed actions and plugins")
    plugins.set_defaults(run=_plugins)
    return parser


def entry() -> int:
    """The `vscheduler` command. Sessions create and drop hundreds of thousands of
    objects over a cache of millions, and free them without the cyclic collector (see
    `Session.release`): with the default thresholds it would scan everything almost
    every session (0.3-0.5 s at 50,000 pods) and find nothing. The process is ours, so
    it runs rarely here; `main` leaves the collector of a caller's process alone."""
    gc.set_threshold(100_000, 50, 100)
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "sessions", 1) < 1:
        print("vscheduler: --sessions must be 1 or more", file=sys.stderr)
        return EXIT_USAGE
    return args.run(args)


if __name__ == "__main__":
    sys.exit(entry())
