"""Accelerator cards: which card model a node offers, and what users write about cards.

Kubernetes sees a GPU as a resource name (`nvidia.com/gpu`) whatever its model; queues
here are given quotas per *card model* (seed 003). The model comes from the node's labels
and the amounts from its allocatable resources, by the naming rules users already follow:

- whole card: the value of the label `<vendor-domain>/<type>.product` (e.g.
  `nvidia.com/gpu.product: NVIDIA-H200`), which needs `<vendor-domain>/<type>.memory`
  (MiB) beside it; `<vendor-domain>/<type>.count` is optional. Its resource is every
  allocatable name under `<vendor-domain>/` that is not a sub-card;
- MIG sub-card (mixed strategy): resource `<vendor-domain>/mig-<profile>`, card
  `<card>/mig-<profile>-mixed`;
- MPS sub-card: resource `<vendor-domain>/<type>.shared`, replicas from the label
  `<vendor-domain>/<type>.replicas`, card `<card>/mps-<memory GiB>g*1/<replicas>`.

One card model per node; whole cards and sub-cards may sit on the same node. A node
whose card labels are malformed or incomplete has no cards at all: it is scheduled like
any other node, and no card quota is charged there. Nothing here raises on a node.

Users write card names in three annotations: a pod's `volcano.sh/card.name` (one card,
or alternatives `A|B` in order of preference), a job's `volcano.sh/card.request` and a
queue's `volcano.sh/card.quota` (JSON objects of card -> count). Those parsers raise
`CardError` with a message for the user.

Amounts are in milli units, as every scalar resource (`vscheduler.resources`): 5 cards
are 5000.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from vscheduler.objects import BadObject, parse_json_annotation
from vscheduler.resources import Resource
from vscheduler.textinput import brief

__all__ = [
    "CARD_NAME_ANNOTATION",
    "CARD_QUOTA_ANNOTATION",
    "CARD_REQUEST_ANNOTATION",
    "SEPARATOR",
    "CardError",
    "NodeCards",
    "alternatives_conflict",
    "card_family",
    "join_alternatives",
    "node_cards",
    "parse_alternatives",
    "parse_card_counts",
]

CARD_NAME_ANNOTATION = "volcano.sh/card.name"
CARD_REQUEST_ANNOTATION = "volcano.sh/card.request"
CARD_QUOTA_ANNOTATION = "volcano.sh/card.quota"
SEPARATOR = "|"
MILLI = 1000.0

# `<vendor-domain>/<type>.product`. A type with a dot (`mig-1g.10gb`) never matches:
# GPU feature discovery labels every MIG profile the same way, and those are sub-cards.
_PRODUCT_LABEL = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9.]*)/([A-Za-z0-9_-]+)\.product$")
# A Kubernetes label value, which is what a card model is written as.
_CARD_MODEL = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_WHOLE_NUMBER = re.compile(r"^[0-9]+$")
_MIG = "mig-"
_MIG_SUFFIX = "-mixed"
_MPS = "mps-"


class CardError(ValueError):
    """A card annotation a user wrote that cannot be used; the message says why."""


class NodeCards:
    """The cards one node offers: its model, which allocatable resource is which card,
    and how many of each it has (milli units)."""

    __slots__ = ("amounts", "by_resource", "model")

    def __init__(self, model: str, by_resource: dict[str, str],
                 amounts: dict[str, float]) -> None:
        self.model = model
        self.by_resource = by_resource
        self.amounts = amounts

    def __repr__(self) -> str:
        cards = ", ".join(f"{c}={a / MILLI:g}" for c, a in sorted(self.amounts.items()))
        return f"NodeCards({self.model}: {cards})"


# --------------------------------------------------------------------------- nodes


def _whole_number(text: str | None) -> int | None:
    """A label holding a whole number (`97871`), or None when absent or malformed."""
    if text is None or not _WHOLE_NUMBER.match(text.strip()):
        return None
    return int(text.strip())


def _model_labels(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """(vendor domain, type) of the node's one card model, or None when there is none
    or more than one (a node has one model; two is a labelling mistake)."""
    found = []
    for key in labels:
        match = _PRODUCT_LABEL.match(key)
        if match and not match.group(2).startswith(_MIG):
            found.append((match.group(1), match.group(2)))
    return found[0] if len(found) == 1 else None


def node_cards(labels: Mapping[str, str], allocatable: Resource) -> NodeCards | None:
    """The cards a node offers, from its labels and allocatable resources; None for a
    node without a (well-formed) card model. Never raises."""
    try:
        return _node_cards(labels, allocatable)
    except (AttributeError, TypeError, ValueError):
        return None  # labels of the wrong shape: a node without cards, not a crash


def _node_cards(labels: Mapping[str, str], allocatable: Resource) -> NodeCards | None:
    found = _model_labels(labels)
    if found is None:
        return None
    domain, kind = found
    base = f"{domain}/{kind}"
    model = str(labels[f"{base}.product"]).strip()
    memory_mib = _whole_number(labels.get(f"{base}.memory"))
    if not _CARD_MODEL.match(model) or not memory_mib:
        return None
    if f"{base}.count" in labels and _whole_number(labels[f"{base}.count"]) is None:
        return None
    prefix, mig_prefix, shared = f"{domain}/", f"{domain}/{_MIG}", f"{base}.shared"
    by_resource: dict[str, str] = {}
    for name in sorted(allocatable.scalars):
        if not name.startswith(prefix):
            continue
        if name == shared:
            replicas = _whole_number(labels.get(f"{base}.replicas"))
            if not replicas:
                return None  # an MPS resource we cannot name
            by_resource[name] = f"{model}/{_MPS}{memory_mib // 1024}g*1/{replicas}"
        elif name.startswith(mig_prefix):
            profile = name[len(mig_prefix):]
            if not profile:
                return None
            by_resource[name] = f"{model}/{_MIG}{profile}{_MIG_SUFFIX}"
        else:
            by_resource[name] = model
    amounts: dict[str, float] = {}
    for name, card in by_resource.items():
        amounts[card] = amounts.get(card, 0.0) + max(allocatable.scalars[name], 0.0)
    return NodeCards(model, by_resource, amounts)


# --------------------------------------------------------------------------- names


def card_family(card: str) -> str:
    """What kind of resource a card name stands for, from the name alone: `whole`, `mps`,
    or `mig <profile>`. Cards of different families never share a resource name."""
    _, slash, rest = card.partition("/")
    if not slash:
        return "whole"
    if rest.startswith(_MIG) and rest.endswith(_MIG_SUFFIX):
        return f"mig {rest[len(_MIG):-len(_MIG_SUFFIX)]}"
    if rest.startswith(_MPS):
        return "mps"
    return f"sub-card {rest}"


def _describe_family(family: str) -> str:
    if family == "whole":
        return "a whole card"
    if family == "mps":
        return "an MPS sub-card"
    if family.startswith("mig "):
        return f"a MIG sub-card ({family[4:]})"
    return f"a {family}"


def parse_alternatives(value: str) -> tuple[str, ...]:
    """`A|B` as ("A", "B"), in order of preference (repeats dropped); CardError for an
    empty name."""
    names: list[str] = []
    for part in str(value).split(SEPARATOR):
        name = part.strip()
        if not name:
            raise CardError(f"card list {brief(value)} has an empty card name")
        if name not in names:
            names.append(name)
    return tuple(names)


def join_alternatives(names: Iterable[str]) -> str:
    return SEPARATOR.join(names)


def alternatives_conflict(alternatives: tuple[str, ...],
                          card_resources: Mapping[str, Iterable[str]]) -> str | None:
    """Why a list of alternative cards cannot be offered to one pod, or None if it can.
    A pod asks for one resource name (`nvidia.com/gpu: 1`), so every alternative must be
    that resource: cards of different kinds (a whole card and a MIG sub-card), or cards
    the cluster's nodes offer under different resource names (`nvidia.com/gpu` and
    `huawei.com/Ascend910`), cannot be mixed. `card_resources` maps a card to the
    resource names nodes offer it as."""
    if len(alternatives) < 2:
        return None
    families = {card: card_family(card) for card in alternatives}
    if len(set(families.values())) > 1:
        kinds = ", ".join(f"{c} is {_describe_family(f)}" for c, f in families.items())
        return (f"cards {join_alternatives(alternatives)} mix kinds of card ({kinds}); "
                "the alternatives of one pod must use the same resource name")
    resources = {card: sorted(card_resources.get(card, ())) for card in alternatives}
    known = {name for names in resources.values() for name in names}
    if len(known) > 1:
        where = ", ".join(f"{c} is {'/'.join(r)}" for c, r in resources.items() if r)
        return (f"cards {join_alternatives(alternatives)} use different resource names "
                f"({where}); the alternatives of one pod must use the same resource name")
    return None


# --------------------------------------------------------------------------- annotations


def parse_card_counts(text: str, where: str, alternatives: bool = False) -> dict[str, float]:
    """A card annotation's JSON object (`{"NVIDIA-H200": 3}`) as card -> milli amount.
    With `alternatives`, a key may list cards `A|B` (a job's request; the key is kept
    normalised, `A|B`); a quota names single cards. CardError names what is wrong."""
    try:
        data = parse_json_annotation(text, where)
    except BadObject as err:
        raise CardError(str(err)) from None
    counts: dict[str, float] = {}
    for key, count in data.items():
        try:
            names = parse_alternatives(key)
        except CardError as err:
            raise CardError(f"{where}: {err}") from None
        if len(names) > 1 and not alternatives:
            raise CardError(f"{where}: {brief(key)}: a quota names one card, not alternatives")
        if isinstance(count, bool) or not isinstance(count, int | float) or count != count:
            raise CardError(f"{where}: {brief(key)}: expected a number of cards, "
                            f"got {brief(count)}")
        try:
            milli = float(count) * MILLI
        except OverflowError:  # an integer of hundreds of digits
            milli = math.inf
        if count < 0 or not math.isfinite(milli):
            raise CardError(f"{where}: {brief(key)}: the number of cards must be 0 or more "
                            f"and finite, got {brief(count)}")
        name = join_alternatives(names)
        counts[name] = counts.get(name, 0.0) + milli
    return counts
