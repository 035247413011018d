"""The network topology tree (vscheduler/topology.py): HyperNodes and node labels read
into domains, Volcano's rules for members, and what cannot be used."""

from __future__ import annotations

from typing import Any


def hypernode(name: str, tier: int | None, *, nodes: list[str] | tuple[str, ...] = (),
              children: list[str] | tuple[str, ...] = (), tier_name: str | None = None,
              members: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A `topology.volcano.sh/v1alpha1` HyperNode manifest: `nodes` and `children` are
    exact-name members; `members` adds raw ones (regexMatch, labelMatch, ...)."""
    listed = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    listed += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}}
               for c in children]
    listed += members or []
    spec: dict[str, Any] = {"members": listed}
    if tier is not None:
        spec["tier"] = tier
    if tier_name is not None:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name}, "spec": spec}
