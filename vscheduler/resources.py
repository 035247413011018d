"""The one resource value type: milli-CPU, memory bytes and scalar resources.

Units follow Volcano so that numbers in events and logs read the same: CPU in milli-CPU,
memory in bytes, every other resource (GPUs, MIG slices, hugepages, ephemeral storage)
in milli units (1 GPU = 1000), except `pods`, counted in whole pods. Every task asks for
`pods: 1` and every node offers its pod capacity, so a pod-slot check is part of every
resource fit, as in Volcano.

Comparisons are tolerant by `MIN_RESOURCE` (0.1 of a unit), again as Volcano, so
amounts derived by division (fair shares) compare sensibly. A scalar missing from one
side counts as zero, or as infinity where the caller says so (capabilities: a queue
without a limit on a resource has an unlimited amount of it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vscheduler.quantity import QuantityError, format_bytes, format_milli, milli_value, value

__all__ = ["CPU", "MEMORY", "MIN_RESOURCE", "PODS", "Resource", "gpus_of", "is_gpu",
           "share_of"]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
MIN_RESOURCE = 0.1
INF = float("inf")

# Names that Kubernetes accepts in a resource list but that are not requests of a node.
_IGNORED_PREFIXES = ("count/", "requests.", "limits.")


def is_gpu(name: str) -> bool:
    """Whether resource `name` counts whole GPUs or GPU slices: `<vendor>/gpu`
    (`nvidia.com/gpu`, `amd.com/gpu`), a MIG slice (`nvidia.com/mig-1g.10gb`), a
    virtual GPU (`volcano.sh/vgpu-number`). Not GPU memory or cores
    (`volcano.sh/vgpu-memory`, `nvidia.com/gpumem`): those are not counted in GPUs.
    Eviction weighs GPUs before the rest, and the `elastic_gpu_*` metrics count them."""
    return (name.endswith("/gpu") or name.startswith("nvidia.com/mig-")
            or name == "volcano.sh/vgpu-number")


class Resource:
    """An amount of each resource; arithmetic in place returns `self` for chaining."""

    __slots__ = ("cpu", "memory", "scalars")

    def __init__(
        self, cpu: float = 0, memory: float = 0, scalars: dict[str, float] | None = None
    ) -> None:
        self.cpu = cpu
        self.memory = memory
        self.scalars: dict[str, float] = scalars if scalars is not None else {}

    # ---------------------------------------------------------------- building

    @classmethod
    def from_k8s(cls, resources: Mapping[str, object] | None) -> Resource:
        """Build from a Kubernetes resource list; a bad quantity raises `QuantityError`
        naming the resource."""
        result = cls()
        if not resources:
            return result
        if not isinstance(resources, Mapping):
            raise QuantityError(f"expected a map of resource quantities, got {resources!r}")
        for name, quantity in resources.items():
            name = str(name)
            if name.startswith(_IGNORED_PREFIXES):
                continue
            try:
                if name == CPU:
                    result.cpu = milli_value(quantity)
                elif name == MEMORY:
                    result.memory = value(quantity)
                elif name == PODS:
                    result.scalars[PODS] = value(quantity)
                else:
                    result.scalars[name] = milli_value(quantity)
            except QuantityError as err:
                raise QuantityError(f"resource {name}: {err}") from None
            if result.cpu < 0 or result.memory < 0 or result.scalars.get(name, 0) < 0:
                raise QuantityError(f"resource {name}: negative quantity {quantity!r}")
        return result

    def clone(self) -> Resource:
        return Resource(self.cpu, self.memory, dict(self.scalars))

    def key(self) -> tuple[float, float, tuple[tuple[str, float], ...]]:
        """The amounts as a hashable value (a shape to index by, a state to compare)."""
        return (self.cpu, self.memory, tuple(sorted(self.scalars.items())))

    def to_k8s(self) -> dict[str, str]:
        """As a Kubernetes resource list (zero dimensions left out), names sorted."""
        out: dict[str, str] = {}
        if self.cpu >= MIN_RESOURCE and self.cpu != INF:
            out[CPU] = format_milli(self.cpu)
        if self.memory >= MIN_RESOURCE and self.memory != INF:
            out[MEMORY] = format_bytes(self.memory)
        for name in sorted(self.scalars):
            amount = self.scalars[name]
            if amount >= MIN_RESOURCE and amount != INF:
                out[name] = str(round(amount)) if name == PODS else format_milli(amount)
        return out

    # ---------------------------------------------------------------- reading

    def get(self, name: str) -> float:
        if name == CPU:
            return self.cpu
        if name == MEMORY:
            return self.memory
        return self.scalars.get(name, 0)

    def set(self, name: str, amount: float) -> None:
        if name == CPU:
            self.cpu = amount
        elif name == MEMORY:
            self.memory = amount
        else:
            self.scalars[name] = amount

    def names(self) -> list[str]:
        """Dimensions holding at least `MIN_RESOURCE` (pods included)."""
        out = []
        if self.cpu >= MIN_RESOURCE:
            out.append(CPU)
        if self.memory >= MIN_RESOURCE:
            out.append(MEMORY)
        out.extend(n for n, v in self.scalars.items() if v >= MIN_RESOURCE)
        return out

    def is_empty(self) -> bool:
        """No CPU, memory or scalar (pods aside): a best-effort request."""
        if self.cpu >= MIN_RESOURCE or self.memory >= MIN_RESOURCE:
            return False
        return all(v < MIN_RESOURCE for n, v in self.scalars.items() if n != PODS)

    # ---------------------------------------------------------------- arithmetic

    def add(self, other: Resource) -> Resource:
        self.cpu += other.cpu
        self.memory += other.memory
        if other.scalars:
            scalars = self.scalars
            for name, amount in other.scalars.items():
                scalars[name] = scalars.get(name, 0) + amount
        return self

    def sub(self, other: Resource) -> Resource:
        """Subtract; may go below zero (callers that must not, check `less_equal` first:
        a cluster that changed under us is no reason to crash)."""
        self.cpu -= other.cpu
        self.memory -= other.memory
        if other.scalars:
            scalars = self.scalars
            for name, amount in other.scalars.items():
                scalars[name] = scalars.get(name, 0) - amount
        return self

    def multiply(self, factor: float) -> Resource:
        self.cpu *= factor
        self.memory *= factor
        for name in self.scalars:
            self.scalars[name] *= factor
        return self

    def __add__(self, other: Resource) -> Resource:
        return self.clone().add(other)

    def __sub__(self, other: Resource) -> Resource:
        return self.clone().sub(other)

    def set_max(self, other: Resource) -> Resource:
        """Per-dimension maximum with `other`."""
        self.cpu = max(self.cpu, other.cpu)
        self.memory = max(self.memory, other.memory)
        for name, amount in other.scalars.items():
            if amount > self.scalars.get(name, 0):
                self.scalars[name] = amount
        return self

    def min_dimension(self, other: Resource, missing_infinite: bool) -> Resource:
        """Per-dimension minimum with `other`, for this resource's dimensions. A scalar
        missing from `other` is infinite (kept) or zero (zeroed) as the caller says."""
        self.cpu = min(self.cpu, other.cpu)
        self.memory = min(self.memory, other.memory)
        for name, amount in self.scalars.items():
            if name in other.scalars:
                self.scalars[name] = min(amount, other.scalars[name])
            elif not missing_infinite:
                self.scalars[name] = 0
        return self

    def exceeded_part(self, other: Resource) -> Resource:
        """The positive part of `self - other`, as a new resource."""
        out = Resource(max(self.cpu - other.cpu, 0), max(self.memory - other.memory, 0))
        for name, amount in self.scalars.items():
            rest = amount - other.scalars.get(name, 0)
            if rest > 0:
                out.scalars[name] = rest
        return out

    # ---------------------------------------------------------------- comparing

    def less_equal(self, other: Resource, missing_infinite: bool = False) -> bool:
        """Every dimension of self fits in `other` (tolerant by `MIN_RESOURCE`).

        A scalar self asks for that `other` lacks counts as zero there, or as unlimited
        when `missing_infinite`."""
        if self.cpu - other.cpu >= MIN_RESOURCE or self.memory - other.memory >= MIN_RESOURCE:
            return False
        theirs = other.scalars
        for name, amount in self.scalars.items():
            if amount < MIN_RESOURCE:
                continue
            limit = theirs.get(name)
            if limit is None:
                if missing_infinite:
                    continue
                return False
            if amount - limit >= MIN_RESOURCE:
                return False
        return True

    def first_insufficient(self, other: Resource) -> str | None:
        """The first dimension of self that does not fit in `other`, or None if it fits.
        The hot path's resource check: one pass, no allocation when it fits."""
        if self.cpu - other.cpu >= MIN_RESOURCE:
            return CPU
        if self.memory - other.memory >= MIN_RESOURCE:
            return MEMORY
        theirs = other.scalars
        for name, amount in self.scalars.items():
            if amount >= MIN_RESOURCE and amount - theirs.get(name, 0) >= MIN_RESOURCE:
                return name
        return None

    def insufficient(self, other: Resource, only: Iterable[str] | None = None) -> list[str]:
        """Every dimension of self (or of `only`) that does not fit in `other`; dimensions
        missing from `other` count as zero there."""
        names = self.names() if only is None else only
        return [n for n in names if self.get(n) - other.get(n) >= MIN_RESOURCE]

    def exceeds_on_requested(self, limit: Resource, request: Resource) -> list[str]:
        """Dimensions that `request` asks for where self passes `limit` strictly.
        Scalars that `limit` lacks are unlimited; `pods` is never limited here.
        (Volcano's LessEqualWithDimension, used for queue quotas.)"""
        failing = []
        if request.cpu > 0 and self.cpu > limit.cpu:
            failing.append(CPU)
        if request.memory > 0 and self.memory > limit.memory:
            failing.append(MEMORY)
        for name, asked in request.scalars.items():
            if asked <= 0 or name == PODS or name not in limit.scalars:
                continue
            if self.scalars.get(name, 0) > limit.scalars[name]:
                failing.append(name)
        return failing

    def equal(self, other: Resource) -> bool:
        if abs(self.cpu - other.cpu) >= MIN_RESOURCE:
            return False
        if abs(self.memory - other.memory) >= MIN_RESOURCE:
            return False
        names = set(self.scalars) | set(other.scalars)
        return all(
            abs(self.scalars.get(n, 0) - other.scalars.get(n, 0)) < MIN_RESOURCE for n in names
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resource) and self.equal(other)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = [f"cpu={self.cpu:g}m", f"memory={self.memory:g}"]
        parts += [f"{n}={v:g}" for n, v in sorted(self.scalars.items())]
        return f"Resource({', '.join(parts)})"


def share(allocated: float, total: float) -> float:
    """Fraction of `total` that `allocated` is (1 when total is zero but something is
    allocated, as Volcano's helpers.Share)."""
    if total == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / total


def gpus_of(amount: Resource) -> float:
    """The GPUs in `amount`, of every GPU resource (`is_gpu`)."""
    return sum(amount.get(name) for name in amount.names() if is_gpu(name))


def share_of(amount: Resource, total: Resource) -> float:
    """How much of `total` (the cluster, say) `amount` is, summed over its resources:
    one number to weigh amounts of different resources against each other."""
    weight = 0.0
    for name in amount.names():
        whole = total.get(name)
        if whole > 0:
            weight += amount.get(name) / whole
    return weight
