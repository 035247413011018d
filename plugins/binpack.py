"""binpack: fill nodes up before starting on empty ones.

A node scores higher the fuller it would be with the pod on it, so pods gather on few
nodes and whole nodes stay free for large jobs. For each weighted resource the pod asks
for (cpu, memory, and the extra resources named in `binpack.resources`)::

    (used + requested) / allocatable * weight

summed, divided by the sum of the weights, times 100 and `binpack.weight`. `used` is
what the node already holds, including this session's placements. As soon as one
weighted resource would overflow, the node scores 0 (it is still feasible if the action
finds room on resources being released). A resource the node does not offer, or with
weight 0, adds its weight to the divisor but nothing to the sum.

Negative per-resource weights are taken as 1, as Volcano does; a negative
`binpack.weight` is kept (it spreads pods instead), and 0 turns the plugin off.
"""

from __future__ import annotations

from typing import Any

from vscheduler.hookspecs import SessionView, hookimpl
from vscheduler.model import Node, Task
from vscheduler.plugin import Argument, Plugin
from vscheduler.resources import CPU, MEMORY, MIN_RESOURCE, Resource

__all__ = ["BinpackPlugin", "binpack_score", "resource_weights"]

MAX_SCORE = 100
RESOURCES_KEY = "binpack.resources"

# (resource name, amount the pod asks for, weight): what one pod is scored on.
Request = tuple[tuple[str, float, int], ...]


def resource_weights(args: dict[str, Any]) -> dict[str, int]:
    """Resource name -> weight, from the plugin's arguments. An extra resource takes
    its weight from `binpack.resources.<name>` (default 1); a negative weight is 1."""
    weights = {CPU: args.get("binpack.cpu", 1), MEMORY: args.get("binpack.memory", 1)}
    for name in str(args.get(RESOURCES_KEY) or "").split(","):
        name = name.strip()
        if name:
            weights[name] = args.get(f"{RESOURCES_KEY}.{name}", 1)
    return {name: (1 if weight < 0 else weight) for name, weight in weights.items()}


def weighted_request(request: Resource, weights: dict[str, int]) -> Request:
    """The weighted resources `request` asks for, in the order the weights list them."""
    out = []
    for name, weight in weights.items():
        amount = request.get(name)
        if amount >= MIN_RESOURCE:
            out.append((name, amount, weight))
    return tuple(out)


def binpack_score(request: Request, node: Node) -> float:
    """0..1: how full the node would be on the weighted resources, or 0 on overflow."""
    used, allocatable = node.used, node.allocatable
    score = 0.0
    weight_sum = 0
    for name, amount, weight in request:
        capacity = allocatable.get(name)
        if capacity > 0 and weight != 0:
            total = used.get(name) + amount
            if total > capacity:
                return 0.0
            score += total * weight / capacity
        weight_sum += weight
    return score / weight_sum if weight_sum > 0 else score


class BinpackPlugin(Plugin):
    name = "binpack"
    arguments = (
        Argument("binpack.weight", int, 1, "multiplier of the whole score; 0 turns it off"),
        Argument("binpack.cpu", int, 1, "weight of cpu"),
        Argument("binpack.memory", int, 1, "weight of memory"),
        Argument(RESOURCES_KEY, str, "", "extra resources to pack on, comma separated"),
        Argument(f"{RESOURCES_KEY}.*", int, 1, "weight of one extra resource"),
    )

    @hookimpl
    def task_signature(self, task: Task) -> None:
        """Nothing beyond the task's resources and placement constraints and the node."""
        return None

    @hookimpl
    def on_session_open(self, session: SessionView) -> None:
        self.session = session
        self._weight: int = self.args["binpack.weight"]
        self._weights = resource_weights(self.args)
        self._requests: dict[str, Request] = {}

    @hookimpl
    def node_order(self, task: Task, node: Node) -> float:
        if not self._weight:
            return 0.0
        request = self._requests.get(task.uid)
        if request is None:
            request = self._requests[task.uid] = weighted_request(task.resreq, self._weights)
        return binpack_score(request, node) * MAX_SCORE * self._weight
