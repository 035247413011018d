"""What the scheduler reads of Kubernetes objects, frozen: built once by `objects.py` from
the API's JSON, then shared by the cache, every snapshot and every session.

Frozen so that sharing is safe: a copy-on-write snapshot hands the same `Pod` to every
copy of a task and the same `PodGroupSpec` to every copy of a job, which is only right
if nobody can change one under the others. What a session does change (a task's status,
a job's phase) lives on the `model` objects that hold these specs.

Dataclasses with `slots=True` read as fast as hand-written `__slots__` classes (the
predicates read a pod's selector and tolerations for every node); `eq=False` keeps
identity comparison and hashing, since two pods with equal fields are still two pods.
Maps and lists inside are shared too and never mutated (`Mapping`, tuples).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from vscheduler.resources import Resource

__all__ = ["Affinity", "ConditionSpec", "DisruptionBudget", "HyperNodeMember", "HyperNodeSpec",
           "InterPod", "LabelExpression", "LabelSelector", "NetworkTopology", "NodeSpec", "Pod",
           "PodAffinityTerm", "PodGroupSpec", "SpreadConstraint", "SubGroupPolicy", "pod_index"]

# Node affinity terms: a list of terms (ORed), each a list of (key, operator, values)
# expressions (ANDed).
Affinity = list[list[tuple[str, str, tuple[str, ...]]]]
# A PodGroup condition as read: (type, status, reason, message).
ConditionSpec = tuple[str, str, str, str]

# A label selector requirement: (key, operator, values), operator In, NotIn, Exists or
# DoesNotExist.
LabelExpression = tuple[str, str, tuple[str, ...]]
# A label selector: its requirements, all of which must hold (`matchLabels` are read as
# In requirements with one value); empty: every object.
LabelSelector = tuple[LabelExpression, ...]

VOLCANO_PODGROUP = "scheduling.volcano.sh/v1beta1"

_TRAILING_INDEX = re.compile(r"^[^-]+(?:-[^-]*)+-([0-9]+)$")


def pod_index(name: str) -> int | None:
    """The integer after a pod name's last '-', if the name has three parts or more
    (`job-worker-3`): tasks of a job are placed in the order of their indexes."""
    if name.count("-") < 2:
        return None
    match = _TRAILING_INDEX.match(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """Pods that a pod wants near it, or away from it: those `selector` picks (None: no
    pod) in `namespaces`, in namespaces whose labels `namespace_selector` picks (None:
    none beyond `namespaces`; empty: every namespace), on nodes with the same value of
    node label `topology_key`. Read as the API server and kube-scheduler read a term:
    with neither namespaces nor a namespace selector, the pod's own namespace; its
    `matchLabelKeys` and `mismatchLabelKeys` already folded into `selector` with the
    pod's own values. Compared by value: the replicas of a Deployment share one term."""

    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One of a pod's `topologySpreadConstraints`: the pods `term` picks (the pod's own
    namespace; `matchLabelKeys` folded in) may differ by at most `max_skew` between the
    domains of `term.topology_key`. `hard` is `whenUnsatisfiable: DoNotSchedule` (else
    ScheduleAnyway: a score only). Nodes count as domains when they pass the pod's node
    affinity (`honor_affinity`, the default) and, with `honor_taints`, tolerate its
    taints; fewer than `min_domains` domains count as a global minimum of 0."""

    max_skew: int
    term: PodAffinityTerm
    hard: bool
    min_domains: int | None = None
    honor_affinity: bool = True
    honor_taints: bool = False


@dataclass(frozen=True, slots=True)
class InterPod:
    """A pod's rules about other pods: required and preferred pod affinity and
    anti-affinity ((weight, term) pairs for the preferred) and topology spread
    constraints. One object for all of them, and None on the pods that have none (most):
    a pod pays one field for them."""

    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[tuple[int, PodAffinityTerm], ...] = ()
    preferred_anti_affinity: tuple[tuple[int, PodAffinityTerm], ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class Pod:
    """What the scheduler reads of a pod."""

    uid: str
    namespace: str
    name: str
    # `namespace/name`, the key the cache and reports use ("" = made from the two)
    key: str = ""
    # metadata.resourceVersion: an Event's involvedObject names the version it saw
    resource_version: str = ""
    scheduler_name: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    creation: float = 0.0
    phase: str = "Pending"
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str = ""
    # The owner that controls the pod (else the first listed): its kind and uid.
    owner_kind: str = ""
    owner_uid: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # Required node affinity; None = no requirement.
    required_affinity: Affinity | None = None
    # Preferred node affinity: (weight, expressions) pairs.
    preferred_affinity: Sequence[tuple[int, list[tuple[str, str, tuple[str, ...]]]]] = ()
    # (key, operator, value, effect)
    tolerations: Sequence[tuple[str, str, str, str]] = ()
    # (protocol, host IP, port)
    host_ports: Sequence[tuple[str, str, int]] = ()
    # pod affinity, anti-affinity and topology spread; None: none of them
    inter_pod: InterPod | None = None
    scheduling_gates: tuple[str, ...] = ()
    nominated_node: str = ""
    # status.startTime (seconds since the epoch), None before the kubelet starts it: a
    # pod's age, for the minimum runtime before it may be a victim (guards.py)
    start_time: float | None = None
    # derived from the name (see `pod_index`)
    index: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "index", pod_index(self.name))


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    """How closely a gang's pods must sit (a PodGroup's `spec.networkTopology`): `hard`
    keeps every pod within one HyperNode of at most `highest_tier` (or of the tier named
    `highest_tier_name`), `soft` prefers the smallest domain that holds the gang and
    falls back to the whole cluster. A hard limit without a tier that resolves is no
    limit (Volcano's rule)."""

    mode: str = "hard"
    highest_tier: int | None = None
    highest_tier_name: str | None = None


@dataclass(frozen=True, slots=True)
class SubGroupPolicy:
    """One entry of a PodGroup's `spec.subGroupPolicy`: the pods its `selector` picks
    (every pod when None) are grouped by their values of `match_label_keys` (a pod
    lacking one is in no group of this policy); each group is a gang of `size` pods
    placed within one domain of its `network_topology`, and the job runs only with at
    least `min_sub_groups` groups of this policy ready."""

    name: str
    selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    size: int = 1
    min_sub_groups: int = 0
    network_topology: NetworkTopology | None = None


@dataclass(frozen=True, slots=True, eq=False)
class PodGroupSpec:
    """What the scheduler reads of a PodGroup; a job holds it (`Job.spec`). A pod without
    a group is a job with a spec made from the pod, and a pod whose PodGroup has not
    arrived yet waits in a job with a spec of defaults."""

    namespace: str
    name: str
    queue: str = ""  # "" = the cache's default queue
    min_member: int = 1
    min_task_member: Mapping[str, int] = field(default_factory=dict)
    min_resources: Resource | None = None
    priority_class_name: str = ""
    creation: float = 0.0
    # seconds from creation to give up scheduling it (scheduleTimeoutSeconds)
    schedule_timeout: int | None = None
    preemptable: bool = False
    # Explicitly not preemptable (`volcano.sh/preemptable` or `elastic.gpu/preemptible`
    # false): none of its pods is ever a victim. Unlike `preemptable`, absent is False.
    protected: bool = False
    # volcano.sh/min-runtime in seconds: its pods' minimum runtime before they may be
    # victims, over the queue's and the action's (None: not said here)
    min_runtime: float | None = None
    # what is wrong with its min-runtime annotation, if anything (it then guards for ever)
    min_runtime_problem: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    # Which CRD the object is of (its status is written as that CRD allows), and what
    # an Event's involvedObject names.
    api_version: str = VOLCANO_PODGROUP
    uid: str = ""
    resource_version: str = ""
    # spec.networkTopology (None: the job may go anywhere)
    network_topology: NetworkTopology | None = None
    # spec.subGroupPolicy, in the order given (a pod joins the first policy that takes it)
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    # Its status as read: the job starts from these.
    phase: str = "Pending"
    # what is wrong with the phase written, if anything (it is then read as Pending)
    phase_problem: str | None = None
    conditions: tuple[ConditionSpec, ...] = ()
    # (running, succeeded, failed): what a status write compares to
    counts: tuple[int, int, int] = (0, 0, 0)


@dataclass(frozen=True, slots=True, eq=False)
class NodeSpec:
    """What the scheduler reads of a node; the cache builds a `Node` from it."""

    name: str
    allocatable: Resource
    labels: Mapping[str, str]
    # (key, value, effect)
    taints: Sequence[tuple[str, str, str]]
    unschedulable: bool


@dataclass(frozen=True, slots=True, eq=False)
class DisruptionBudget:
    """What the scheduler reads of a `policy/v1` PodDisruptionBudget: which pods it covers
    and how many of them may go (guards.py says which victims would break it)."""

    namespace: str
    name: str
    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelExpression, ...] = ()
    # int, or a percent as written ("50%"); at most one of the two is set
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    # status.disruptionsAllowed, None when the object has no status yet
    disruptions_allowed: int | None = None
    # status.disruptedPods: names of pods whose eviction the API server already counted
    disrupted_pods: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def selector_empty(self) -> bool:
        """No requirement at all: such a budget covers no pod (kube-scheduler's reading)."""
        return not self.match_labels and not self.match_expressions


@dataclass(frozen=True, slots=True)
class HyperNodeMember:
    """One member of a HyperNode: a node or a HyperNode (`kind`), chosen by exact name
    (`name`), by a regular expression searched in names (`pattern`), or by node labels
    (`match_labels` and `match_expressions`, for nodes only). Exactly one way is set."""

    kind: str  # "Node" or "HyperNode"
    name: str | None = None
    pattern: str | None = None
    match_labels: Mapping[str, str] | None = None
    match_expressions: tuple[LabelExpression, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class HyperNodeSpec:
    """What the scheduler reads of a `topology.volcano.sh/v1alpha1` HyperNode: a network
    domain (a leaf switch, a rack, a block) at a `tier` (lower: closer), named by
    `tier_name` if it says, and its members (`vscheduler.topology` builds the tree).
    `uid` is the object's, which the Warnings about it name (kubectl describe finds a
    cluster-scoped object's events by uid)."""

    name: str
    tier: int
    tier_name: str = ""
    members: tuple[HyperNodeMember, ...] = ()
    uid: str = ""
