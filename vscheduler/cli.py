"""The `vscheduler` command."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import sys
import textwrap
from collections.abc import Callable, Sequence

from vscheduler import __version__, logs
from vscheduler.conf import ConfError, load_conf, parse_conf
from vscheduler.framework.placement import NodeSampling
from vscheduler.logs import FORMATS, MAX_VERBOSITY, fields
from vscheduler.objects import timestamp_of
from vscheduler.plugin import Argument
from vscheduler.registry import ACTIONS_GROUP, PLUGINS_GROUP, installed, summary_of
from vscheduler.report import render_text
from vscheduler.simulate import ManifestError, Simulation, load_manifests
from vscheduler.textinput import brief

__all__ = ["main"]

EXIT_USAGE = 2
log = logging.getLogger(__name__)


def _simulate(args: argparse.Namespace) -> int:
    try:
        conf = load_conf(args.conf)
    except ConfError as err:
        print(f"vscheduler: bad conf: {err}", file=sys.stderr)
        return EXIT_USAGE
    for warning in conf.warnings:
        print(f"vscheduler: warning: {warning}", file=sys.stderr)
    try:
        manifests = load_manifests(args.files)
    except ManifestError as err:
        print(f"vscheduler: {err}", file=sys.stderr)
        return EXIT_USAGE
    for note in manifests.notes:
        print(f"vscheduler: {note}", file=sys.stderr)
    names = tuple(args.scheduler_name or ["vscheduler"])
    simulation = Simulation(conf, names, args.default_queue, _sampling(args), args.now,
                            session_seconds=args.session_interval)
    simulation.load(manifests.objects, manifests.problems)
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


# ------------------------------------------------------------------ flag value types
# Each says in one line what it wants, which argparse prints after the flag's name
# (exit 2): a zero or negative count crashes or never ends further in, so none gets by.

def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _count(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _int_in(low: int, high: int) -> Callable[[str], int]:
    def read(text: str) -> int:
        value = _int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low} to {high}, not {value}")
        return value
    read.__name__ = f"int_{low}_to_{high}"
    return read


# A percentage of nodes; Volcano's 0 asks for the adaptive percentage (see NodeSampling).
_percentage = _int_in(0, 100)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def _add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    """Volcano's flags for how many feasible nodes are enough for a task."""
    parser.add_argument("--percentage-nodes-to-find", type=_percentage, default=0,
                        metavar="PCT",
                        help="feasible nodes to find, in percent of all, 0 to 100 (0: "
                             "adaptive, as Volcano; 100: try every node; default "
                             "%(default)s)")
    parser.add_argument("--minimum-feasible-nodes", type=_positive_int, default=100,
                        metavar="N",
                        help="clusters up to this size are searched whole (default "
                             "%(default)s)")
    parser.add_argument("--minimum-percentage-nodes-to-find", type=_percentage, default=5,
                        metavar="PCT",
                        help="lower bound of the adaptive percentage, 0 to 100 (default "
                             "%(default)s)")


def _add_logging_flags(parser: argparse.ArgumentParser) -> None:
    """klog's `--v`, and the format of the lines (see `vscheduler.logs`)."""
    parser.add_argument("-v", "--v", dest="verbosity", type=_int_in(0, MAX_VERBOSITY),
                        default=0, metavar="N",
                        help="log verbosity as Volcano's --v: 0 start-up, leadership, "
                             "sessions, warnings and errors; 2 each bind and eviction; 4 "
                             "lists and watches; 10 HTTP client debug (default "
                             "%(default)s)")
    parser.add_argument("--log-format", choices=FORMATS, default="text",
                        help="text (klog's line) or json (one object a line) (default "
                             "%(default)s)")


# Volcano's scheduler flags that mean nothing here, with why: accepted so that the
# arguments of a Volcano deployment run unchanged, and logged as ignored when given.
# Flags that would change what is decided (`--node-selector`, `--scheduler-sharding-mode`)
# are not among them: argparse refuses those as unknown.
IGNORED_VOLCANO_FLAGS: dict[str, tuple[bool, str]] = {
    # flag: (takes true/false, why it is ignored)
    "--logtostderr": (True, "logs always go to stderr"),
    "--resync-period": (False, "watches keep the cache current; there is no resync"),
    "--healthz-address": (False, "/healthz is served on --listen-address"),
    "--priority-class": (True, "PriorityClasses are always read"),
    "--plugins-dir": (False, "plugins are Python packages found through entry points"),
    "--csi-storage": (True, "volumes are not considered"),
    "--ignored-provisioners": (False, "volumes are not considered"),
    "--enable-pprof": (True, "there is no pprof endpoint"),
    "--cache-dumper": (True, "there is no cache dumper"),
    "--cache-dump-dir": (False, "there is no cache dumper"),
    "--ca-cert-file": (False, "no HTTPS endpoint is served"),
    "--tls-cert-file": (False, "no HTTPS endpoint is served"),
    "--tls-private-key-file": (False, "no HTTPS endpoint is served"),
    "--node-worker-threads": (False, "nodes are read in the scheduling loop"),
    "--gate-removal-worker-num": (False, "scheduling gates are left to their owners"),
    "--resource-sync-timeout": (False, "the first lists wait up to 60s"),
    "--feature-gates": (False, "there are no feature gates"),
    "--disable-default-scheduler-config": (True, "no conf file means Volcano's default"),
    "--leader-elect-resource-lock": (False, "the lock is always a Lease"),
}


def _ignored_dest(flag: str) -> str:
    return "ignored_" + flag.lstrip("-").replace("-", "_")


def _add_volcano_flags(parser: argparse.ArgumentParser) -> None:
    """Volcano's flags under their names: the leader election ones client-go's
    component flags give Volcano, `--master`, and those accepted and ignored."""
    parser.add_argument("--master", metavar="URL",
                        help="the API server's address; overrides the kubeconfig's "
                             "(default: the kubeconfig's)")
    parser.add_argument("--leader-elect-resource-namespace", dest="lock_object_namespace",
                        metavar="NS", default=argparse.SUPPRESS,
                        help="the same as --lock-object-namespace (default volcano-system)")
    parser.add_argument("--leader-elect-resource-name", dest="lease_name", metavar="NAME",
                        help="name of the Lease (default: the scheduler name)")
    # Volcano's own chart passes a literal "2>&1"; its flag parser ignores arguments that
    # are not flags, and so does this one (each is logged as ignored).
    parser.add_argument("stray", nargs="*", metavar="ARG", help=argparse.SUPPRESS)
    ignored = parser.add_argument_group(
        "Volcano flags accepted and ignored (each given one is logged with why)")
    for flag, (boolean, why) in IGNORED_VOLCANO_FLAGS.items():
        if boolean:
            ignored.add_argument(flag, dest=_ignored_dest(flag), type=_flag, nargs="?",
                                 const=True, default=argparse.SUPPRESS, metavar="BOOL",
                                 help=f"ignored: {why} (default: not given)")
        else:
            ignored.add_argument(flag, dest=_ignored_dest(flag), default=argparse.SUPPRESS,
                                 metavar="VALUE", help=f"ignored: {why} (default: not given)")


def _bench(args: argparse.Namespace) -> int:
    from vscheduler.bench import render, run_bench, scene_conf, scene_spec

    try:
        conf = (load_conf(args.conf) if args.conf
                else parse_conf(scene_conf(args.scene), f"{args.scene} scene's conf"))
    except ConfError as err:
        print(f"vscheduler: bad conf: {err}", file=sys.stderr)
        return EXIT_USAGE
    jobs, pending_tasks = args.shape if args.shape else (args.jobs, None)
    try:
        spec = scene_spec(args.scene, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                          queues=args.queues, jobs=jobs, tasks_per_job=args.tasks_per_job,
                          running=args.running, sessions=args.sessions, churn=args.churn,
                          arrive=args.arrive, depart=args.depart, seed=args.seed,
                          mig_every=args.mig_every, pending_tasks=pending_tasks,
                          topology_tier=args.topology_tier, zone_spread=args.zone_spread,
                          sub_groups=args.sub_groups)
    except ValueError as err:
        print(f"vscheduler: {err}", file=sys.stderr)
        return EXIT_USAGE
    figures = run_bench(spec, conf, measure_memory=not args.no_memory,
                        node_sampling=_sampling(args))
    if args.output == "json":
        print(json.dumps(figures, indent=2))
    else:
        print(render(figures), end="")
    # (a gang placed across domains is a wrong decision, not a slow one: CI's small runs
    # fail on it)
    check = figures.get("topology") or {}
    if check.get("violations") or check.get("bound_in_part"):
        print(f"vscheduler: {check['violations']} gang(s) across more than one "
              f"{check['tier_name']}, {check['bound_in_part']} bound in part",
              file=sys.stderr)
        return 1
    replicas = figures.get("anti_affinity") or {}
    if replicas.get("violations"):
        print(f"vscheduler: {replicas['nodes_shared']} node(s) with two or more replicas, "
              f"zone skew {replicas['zone_skew']}", file=sys.stderr)
        return 1
    return 0


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _topology_tier(text: str) -> int:
    """A tier of the bench's topology scene, by number (1-4) or by name (rack, ...)."""
    from vscheduler.bench import TOPOLOGY_TIERS

    names = [name for name, _ in TOPOLOGY_TIERS]
    if text.lower() in names:
        return names.index(text.lower()) + 1
    if text.isdigit() and 1 <= int(text) <= len(names):
        return int(text)
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a tier: 1 to {len(names)} or one of {', '.join(names)}")


def _shape(text: str) -> tuple[int, int]:
    """`JOBSxTASKS`: JOBS pending jobs (0 or more) of TASKS pods (1 or more)."""
    jobs, x, tasks = text.lower().partition("x")
    if not x:
        raise argparse.ArgumentTypeError(f"{text!r} is not JOBSxTASKS (example: 1000x8)")
    return _count(jobs), _positive_int(tasks)


def _duration(text: str) -> float:
    """A Go duration as Volcano's flags take them (`1s`, `500ms`, `1m30s`), in seconds."""
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (examples: 1s, 500ms)")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _duration_text(seconds: float) -> str:
    """Seconds as the flags take them back (`100ms`, `15s`), for the start-up lines."""
    return f"{seconds * 1000:g}ms" if seconds < 1 else f"{seconds:g}s"


def _positive_duration(text: str) -> float:
    seconds = _duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be longer than 0s, not {text!r}")
    return seconds


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

    # The conf first: a bad one is the user's to fix, cluster or not.
    try:
        conf = load_conf(args.scheduler_conf)
    except ConfError as err:
        print(f"vscheduler: bad conf: {err}", file=sys.stderr)
        return EXIT_USAGE
    names = tuple(args.scheduler_name or ["vscheduler"])
    log.info("Starting vscheduler", extra=fields(
        version=__version__, conf=args.scheduler_conf or "Volcano's default",
        actions=conf.action_names(), plugins=conf.plugin_names(), scheduler_names=names,
        default_queue=args.default_queue, schedule_period=_duration_text(args.schedule_period),
        percentage_nodes_to_find=args.percentage_nodes_to_find, dry_run=args.dry_run))
    for warning in conf.warnings:
        log.warning("Conf warning", extra=fields(conf=conf.source, warning=warning))
    for flag, (_, why) in IGNORED_VOLCANO_FLAGS.items():
        if hasattr(args, _ignored_dest(flag)):
            log.warning("Volcano flag ignored", extra=fields(flag=flag, why=why))
    for stray in args.stray:
        log.warning("Argument ignored", extra=fields(argument=stray, why="not a flag"))
    # The lock is named after the scheduler, as Volcano's; the identity is unique per
    # process.
    lease = (args.lock_object_namespace,
             args.lease_name or (names[0] if len(names) == 1 else "vscheduler"))
    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    electing = args.leader_elect and not args.dry_run
    log.info("Leader election", extra=fields(
        enabled=electing, lease="/".join(lease) if electing else None,
        identity=identity if electing else None,
        lease_duration=_duration_text(args.leader_elect_lease_duration),
        renew_deadline=_duration_text(args.leader_elect_renew_deadline),
        retry_period=_duration_text(args.leader_elect_retry_period)))
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
        if not args.master:
            print(f"vscheduler: no cluster to talk to: {err}", file=sys.stderr)
            return EXIT_USAGE
    if args.master:
        configuration.host = args.master
    # One connection each for the watches (up to nine kinds), the writer's workers, the
    # lease and the scheduling loop: the client's default (5 per core) has urllib3
    # drop and reopen connections on a small machine.
    configuration.connection_pool_maxsize = 32
    api = client.ApiClient(configuration)
    elector = None
    if args.leader_elect and args.dry_run:
        # (a dry run writes nothing, the Lease neither: it would keep the replicas that
        # do schedule standing by)
        log.info("Dry run: no leader election", extra=fields(lease="/".join(lease)))
    elif args.leader_elect:
        try:
            elector = LeaderElector(
                api, *lease, identity,
                lease_duration=args.leader_elect_lease_duration,
                renew_deadline=args.leader_elect_renew_deadline,
                retry_period=args.leader_elect_retry_period)
        except ValueError as err:
            print(f"vscheduler: {err}", file=sys.stderr)
            return EXIT_USAGE
    daemon = Daemon(api, args.scheduler_conf, conf=conf, scheduler_names=names,
                    default_queue=args.default_queue, period=args.schedule_period,
                    qps=args.kube_api_qps, burst=args.kube_api_burst,
                    dry_run=args.dry_run, node_sampling=_sampling(args), elector=elector)
    if args.enable_metrics or args.enable_healthz:
        try:
            serve(daemon.metrics, args.listen_address, args.schedule_period,
                  enable_metrics=args.enable_metrics, enable_healthz=args.enable_healthz)
        except (OSError, ValueError) as err:
            print(f"vscheduler: cannot listen on {args.listen_address}: {err}",
                  file=sys.stderr)
            return EXIT_USAGE
    log.info("Metrics and health endpoints", extra=fields(
        address=args.listen_address if args.enable_metrics or args.enable_healthz else None,
        metrics=args.enable_metrics, healthz=args.enable_healthz))
    signal.signal(signal.SIGTERM, lambda *_: daemon.stop.set())
    signal.signal(signal.SIGINT, lambda *_: daemon.stop.set())
    if daemon.start_watches():
        log.info("Watches synced", extra=fields(kinds=[r.kind for r in daemon.reflectors]))
    else:
        log.warning("Not every kind listed in time; scheduling with what arrived",
                    extra=fields(synced=[r.kind for r in daemon.reflectors
                                         if r.synced.is_set()]))
    code = daemon.run()
    log.log(logging.INFO if code == 0 else logging.ERROR, "Stopped",
            extra=fields(exit_code=code))
    return code


def _plugins(args: argparse.Namespace) -> int:
    """Each installed action and plugin (or those named): where it comes from, what it
    does and its conf arguments with their types, defaults and help, read from the
    code itself. Exit 1 if one of them cannot be loaded, 2 for a name not installed."""
    wanted = set(args.names)
    groups = [(title, {name: point for name, point in installed(group).items()
                       if not wanted or name in wanted})
              for title, group in (("actions", ACTIONS_GROUP), ("plugins", PLUGINS_GROUP))]
    unknown = wanted.difference(*(points for _, points in groups))
    if unknown:
        print(f"vscheduler: not installed: {', '.join(sorted(unknown))} "
              "(`vscheduler plugins` lists what is)", file=sys.stderr)
        return EXIT_USAGE
    code = 0
    summary = textwrap.TextWrapper(width=88, initial_indent=" " * 4, subsequent_indent=" " * 4)
    helps = textwrap.TextWrapper(width=88, initial_indent=" " * 8, subsequent_indent=" " * 8)
    for title, points in groups:
        if not points:
            continue
        print(f"{title}:")
        for name, point in points.items():
            print(f"  {name} ({point.value})")  # type: ignore[attr-defined]
            try:
                cls = point.load()  # type: ignore[attr-defined]
            except Exception as err:  # (a broken third-party package: say so, go on)
                print(f"      fails to load: {brief(str(err))}")
                code = 1
                continue
            said = summary_of(cls, name)
            if said:
                print(summary.fill(said))
            for argument in getattr(cls, "arguments", ()):
                if not isinstance(argument, Argument):
                    print(f"      {brief(argument)}: not an Argument")
                    code = 1
                    continue
                print(f"      {argument.key}: {argument.describe()}")
                if argument.help:
                    print(helps.fill(argument.help))
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vscheduler",
        description="A Volcano-style batch scheduler for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    simulate = commands.add_parser(
        "simulate", help="run scheduling sessions on manifest files, with no cluster",
        description="Load Kubernetes manifests (Nodes, Pods, PodGroups, Queues, "
                    "PriorityClasses, PodDisruptionBudgets, HyperNodes, Namespaces), run "
                    "sessions in memory and print the decisions.")
    simulate.add_argument("files", nargs="+", metavar="FILE",
                          help="YAML manifests (- reads stdin)")
    simulate.add_argument("--conf", help="volcano-scheduler.conf (default: Volcano's "
                                         "default conf)")
    simulate.add_argument("--sessions", type=_positive_int, default=1, metavar="N",
                          help="sessions to run (default %(default)s)")
    simulate.add_argument("--scheduler-name", action="append", metavar="NAME",
                          help="pods with this schedulerName are ours (repeatable; "
                               "default vscheduler)")
    simulate.add_argument("--default-queue", default="default", metavar="NAME",
                          help="queue of jobs that name none (default %(default)s)")
    simulate.add_argument("--now", type=_time, metavar="TIME",
                          help="the clock at the first session, as an RFC 3339 time "
                               "(default: the newest creationTimestamp in the files); it "
                               "moves --session-interval a session")
    simulate.add_argument("--session-interval", type=_duration, default=1.0,
                          metavar="DURATION",
                          help="how far the clock moves from one session to the next, "
                               "as 1s, 10m or 1h: what usage history (fairshare) and "
                               "timeouts see (default 1s)")
    simulate.add_argument("--output", choices=("text", "json"), default="text",
                          help="report format (default %(default)s)")
    _add_sampling_flags(simulate)
    simulate.set_defaults(run=_simulate)

    bench = commands.add_parser(
        "bench", help="time real sessions on a generated cluster",
        description="Generate a GPU cluster from a seed, run sessions in-process and print "
                    "the time of each phase, pods placed per second and memory figures.")
    bench.add_argument("--nodes", type=_positive_int, metavar="N",
                       help="GPU nodes (default 100; overload, topology and anti-affinity 5000)")
    bench.add_argument("--gpus-per-node", type=_positive_int, default=8, metavar="N",
                       help="cards on each node (default %(default)s)")
    bench.add_argument("--mig-every", type=_count, default=10, metavar="N",
                       help="every Nth node is split into MIG slices, 0 for none "
                            "(default %(default)s)")
    bench.add_argument("--queues", type=_positive_int, default=4, metavar="N",
                       help="queues the jobs are spread over (default %(default)s)")
    pending = bench.add_mutually_exclusive_group()
    pending.add_argument("--jobs", type=_count, metavar="N",
                         help="pending gang jobs, of --tasks-per-job pods each (default "
                              "20; overload 22500; topology 100; anti-affinity 1000 "
                              "one-pod replicas)")
    pending.add_argument("--shape", type=_shape, metavar="JOBSxTASKS",
                         help="the pending work as JOBS gang jobs of TASKS pods each, "
                              "instead of --jobs jobs of --tasks-per-job pods (which then "
                              "sizes the running jobs only) (default: not given)")
    bench.add_argument("--tasks-per-job", type=_positive_int, metavar="N",
                       help="pods in each job, running or pending (default 4; topology "
                            "64)")
    bench.add_argument("--running", type=_count, metavar="N",
                       help="pods already running (default 200; overload 60000; "
                            "topology and anti-affinity 40000)")
    bench.add_argument("--sessions", type=_positive_int, metavar="N",
                       help="sessions to run (default 1; anti-affinity 2)")
    bench.add_argument("--churn", type=_count, default=0, metavar="N",
                       help="before each session after the first, N running pods finish "
                            "and N new pods arrive, the steady state (default "
                            "%(default)s)")
    bench.add_argument("--arrive", type=_count, metavar="N",
                       help="new one-pod jobs arriving before each session after the "
                            "first (default: --churn)")
    bench.add_argument("--depart", type=_count, metavar="N",
                       help="running pods finishing before each session after the first "
                            "(default: --churn)")
    bench.add_argument("--seed", type=_int, default=1, metavar="N",
                       help="seed of the generated cluster (default %(default)s)")
    scene = bench.add_mutually_exclusive_group()
    scene.add_argument("--scene", choices=("default", "tidal", "volcano-preempt", "overload",
                                           "hierarchy", "topology", "anti-affinity"),
                       default="default",
                       help="the cluster: default (running and pending gang jobs); tidal "
                            "(every node full with one training gang, --jobs one-GPU "
                            "inference pods pending, conf/tidal-reclaim.conf's conf; "
                            "reports evictions against the fewest that free enough); "
                            "volcano-preempt (every card taken by low-priority gangs, --jobs "
                            "high-priority pods pending, Volcano's default conf with "
                            "capacity-card, reclaim and preempt); overload (the default "
                            "cluster at 5,000 nodes, 60,000 pods running and 90,000 pending, "
                            "far more than the cards left); hierarchy (the default cluster "
                            "with its --queues as the leaves of a tree of departments, ten "
                            "to a parent, capacity's enableHierarchy in place of "
                            "proportion); topology (5,000 nodes under HyperNodes: racks of "
                            "16 nodes, rows of 4 racks, blocks of 4 rows, superblocks of 5 "
                            "blocks; 40,000 pods running, every other on a card, cards "
                            "taken unevenly rack by rack; 100 gangs of 64 one-GPU pods "
                            "pending, each held within one domain of --topology-tier; Volcano's "
                            "default conf with network-topology-aware; reports the gangs "
                            "bound and those spread over more than one domain); "
                            "anti-affinity (the default cluster at 5,000 nodes, 40,000 pods "
                            "running; after session 1, --jobs (1,000) replicas of one app "
                            "arrive, one a node by required pod anti-affinity; reports the "
                            "replicas bound and nodes holding two) (default %(default)s)")
    scene.add_argument("--topology", dest="scene", action="store_const", const="topology",
                       help="the topology scene: the same as --scene topology")
    bench.add_argument("--topology-tier", type=_topology_tier, default=1, metavar="TIER",
                       help="topology scene: the tier each pending gang is held within, by "
                            "number or name: 1 rack, 2 row, 3 block, 4 superblock (default "
                            "1, rack)")
    bench.add_argument("--sub-groups", type=int, default=0, metavar="N",
                       help="topology scene: each pending gang in N sub-groups (a "
                            "subGroupPolicy), each held within one rack, the gang within "
                            "--topology-tier; N divides the gang's pods (default 0: none)")
    bench.add_argument("--zone-spread", action="store_true",
                       help="anti-affinity scene: the replicas are also spread over the "
                            "zones, maxSkew 1, DoNotSchedule")
    bench.add_argument("--conf", help="conf to run (default: the scene's; for the default "
                                      "scene Volcano's default conf with capacity-card)")
    bench.add_argument("--no-memory", action="store_true",
                       help="skip the memory measurements: the cache's (tracemalloc slows "
                            "loading) and a session's (one more session, traced)")
    bench.add_argument("--output", choices=("text", "json"), default="text",
                       help="report format; json ends with a summary of medians to compare "
                            "two runs by (default %(default)s)")
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
    run.add_argument("--schedule-period", type=_positive_duration, default="1s",
                     metavar="DURATION", help="pause between sessions (default %(default)s)")
    run.add_argument("--scheduler-name", action="append", metavar="NAME",
                     help="pods with this schedulerName are ours (repeatable; default "
                          "vscheduler)")
    run.add_argument("--default-queue", default="default", metavar="NAME",
                     help="queue of jobs that name none (default %(default)s)")
    run.add_argument("--leader-elect", type=_flag, nargs="?", const=True, default=False,
                     metavar="BOOL", help="elect a leader on a Lease: standbys only watch "
                                          "(default false)")
    run.add_argument("--lock-object-namespace", default="volcano-system", metavar="NS",
                     help="namespace of the leader election Lease (default %(default)s)")
    for name, default, what in (
            ("lease-duration", "15s", "how long standbys wait before taking a Lease "
                                      "not renewed"),
            ("renew-deadline", "10s", "how long the leader keeps trying to renew before "
                                      "it stops"),
            ("retry-period", "2s", "pause between tries to acquire or renew")):
        run.add_argument(f"--leader-elect-{name}", type=_positive_duration, default=default,
                         metavar="DURATION", help=f"{what} (default %(default)s)")
    run.add_argument("--kube-api-qps", type=_positive_float, default=50.0, metavar="QPS",
                     help="writes a second to the API server, on average (default "
                          "%(default)s)")
    run.add_argument("--kube-api-burst", type=_positive_int, default=100, metavar="N",
                     help="writes at once above the QPS (default %(default)s)")
    run.add_argument("--enable-metrics", type=_flag, nargs="?", const=True, default=False,
                     metavar="BOOL", help="serve Prometheus /metrics (default false)")
    run.add_argument("--enable-healthz", type=_flag, nargs="?", const=True, default=False,
                     metavar="BOOL", help="serve /healthz (default false)")
    run.add_argument("--listen-address", default=":8080", metavar="ADDRESS",
                     help="address of /metrics and /healthz (default %(default)s)")
    run.add_argument("--dry-run", action="store_true",
                     help="decide and log every decision, write nothing to the cluster")
    _add_sampling_flags(run)
    _add_logging_flags(run)
    _add_volcano_flags(run)
    run.set_defaults(run=_run)

    plugins = commands.add_parser(
        "plugins", help="list installed actions and plugins, with their arguments",
        description="List the installed actions and plugins (built-in and third-party): "
                    "what each does and the arguments a conf may give it.")
    plugins.add_argument("names", nargs="*", metavar="NAME",
                         help="only these actions or plugins (default: all)")
    plugins.set_defaults(run=_plugins)
    return parser


def tune_collector() -> None:
    """Sessions create and drop hundreds of thousands of objects over a cache of
    millions, and free them without the cyclic collector (see `Session.release`): with
    the default thresholds it would scan everything almost every session (0.3-0.5 s at
    50,000 pods) and find nothing. In a process of ours it runs rarely."""
    gc.set_threshold(100_000, 50, 100)


def entry() -> int:
    """The `vscheduler` command (`main` leaves the collector of a caller's process
    alone)."""
    tune_collector()
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # (the reader went away, `| head` say: no traceback, and nothing more to
        # write at exit either)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logs.setup(getattr(args, "verbosity", 0), getattr(args, "log_format", "text"))
    return args.run(args)


if __name__ == "__main__":
    sys.exit(entry())
