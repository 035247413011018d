"""The `vscheduler` command."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from vscheduler.conf import ConfError, load_conf, parse_conf
from vscheduler.framework.placement import NodeSampling
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
    simulation = Simulation(conf, names, args.default_queue, _sampling(args))
    simulation.load(objects, problems)
    report = simulation.run(args.sessions).as_dict()
    if args.output == "json":
        print(json.dumps(report, indent=2, sort_keys=False))
    else:
        print(render_text(report), end="")
    return 0


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
                     sessions=args.sessions, seed=args.seed, mig_every=args.mig_every)
    figures = run_bench(spec, conf, measure_memory=not args.no_memory,
                        node_sampling=_sampling(args))
    if args.output == "json":
        print(json.dumps(figures, indent=2))
    else:
        print(render(figures), end="")
    return 0


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
    bench.add_argument("--seed", type=int, default=1)
    bench.add_argument("--conf", help="conf to run (default: Volcano's default conf with "
                                      "capacity-card)")
    bench.add_argument("--no-memory", action="store_true",
                       help="skip the cache memory measurement (tracemalloc slows loading)")
    bench.add_argument("--output", choices=("text", "json"), default="text")
    _add_sampling_flags(bench)
    bench.set_defaults(run=_bench)

    plugins = commands.add_parser("plugins", help="list installed actions and plugins")
    plugins.set_defaults(run=_plugins)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "sessions", 1) < 1:
        print("vscheduler: --sessions must be 1 or more", file=sys.stderr)
        return EXIT_USAGE
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
