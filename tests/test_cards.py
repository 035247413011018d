"""Card detection from node labels and allocatable, and the card annotations' parsers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vscheduler.cards import (
    CardError,
    alternatives_conflict,
    card_family,
    node_cards,
    parse_alternatives,
    parse_card_counts,
)
from vscheduler.resources import Resource


def labels(product: str = "NVIDIA-H200", memory: str = "143771", count: str | None = "8",
           **extra: str) -> dict[str, str]:
    out = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": memory,
           "kubernetes.io/hostname": "n1"}
    if count is not None:
        out["nvidia.com/gpu.count"] = count
    out.update(extra)
    return out


# --------------------------------------------------------------------------- whole cards


def test_a_whole_card_node_offers_its_product_under_its_vendor_resource():
    cards = node_cards(labels(), Resource.from_k8s({"cpu": "8", "nvidia.com/gpu": "8"}))
    assert cards is not None
    assert cards.model == "NVIDIA-H200"
    assert cards.by_resource == {"nvidia.com/gpu": "NVIDIA-H200"}
    assert cards.amounts == {"NVIDIA-H200": 8000}


def test_the_count_label_is_optional():
    cards = node_cards(labels(count=None), Resource.from_k8s({"nvidia.com/gpu": "2"}))
    assert cards is not None and cards.amounts == {"NVIDIA-H200": 2000}


def test_other_vendors_follow_the_same_rule():
    npu = {"huawei.com/npu.product": "Ascend-910B", "huawei.com/npu.memory": "65536"}
    cards = node_cards(npu, Resource.from_k8s({"huawei.com/Ascend910": "8", "cpu": "4"}))
    assert cards is not None
    assert cards.by_resource == {"huawei.com/Ascend910": "Ascend-910B"}


def test_resources_of_other_vendors_and_plain_resources_are_not_cards():
    resources = Resource.from_k8s({"nvidia.com/gpu": "8", "rdma/hca": "4",
                                   "ephemeral-storage": "100Gi", "pods": "110"})
    cards = node_cards(labels(), resources)
    assert cards is not None and cards.by_resource == {"nvidia.com/gpu": "NVIDIA-H200"}


def test_a_labelled_node_without_the_resource_has_a_model_and_no_cards():
    cards = node_cards(labels(), Resource.from_k8s({"cpu": "8"}))
    assert cards is not None and cards.model == "NVIDIA-H200" and cards.amounts == {}


# --------------------------------------------------------------------------- sub-cards


def test_mig_mixed_sub_cards_sit_beside_whole_cards():
    # 8 H200: 7 whole, one split into a 3g.71gb and three 1g.18gb (seed 003's example),
    # labelled as GPU feature discovery does, a product label per MIG profile included.
    node_labels = labels(**{"nvidia.com/mig-1g.18gb.product": "NVIDIA-H200-MIG-1g.18gb",
                            "nvidia.com/mig-1g.18gb.memory": "16384",
                            "nvidia.com/mig-1g.18gb.count": "3",
                            "nvidia.com/mig-3g.71gb.product": "NVIDIA-H200-MIG-3g.71gb",
                            "nvidia.com/mig-3g.71gb.memory": "71424"})
    resources = Resource.from_k8s({"nvidia.com/gpu": "7", "nvidia.com/mig-1g.18gb": "3",
                                   "nvidia.com/mig-3g.71gb": "1"})
    cards = node_cards(node_labels, resources)
    assert cards is not None
    assert cards.by_resource == {
        "nvidia.com/gpu": "NVIDIA-H200",
        "nvidia.com/mig-1g.18gb": "NVIDIA-H200/mig-1g.18gb-mixed",
        "nvidia.com/mig-3g.71gb": "NVIDIA-H200/mig-3g.71gb-mixed",
    }
    assert cards.amounts == {"NVIDIA-H200": 7000, "NVIDIA-H200/mig-1g.18gb-mixed": 3000,
                             "NVIDIA-H200/mig-3g.71gb-mixed": 1000}


def test_mps_sub_cards_are_named_by_memory_in_gib_and_replicas():
    node_labels = labels("NVIDIA-H800", memory="81920", **{"nvidia.com/gpu.replicas": "2"})
    resources = Resource.from_k8s({"nvidia.com/gpu": "6", "nvidia.com/gpu.shared": "4"})
    cards = node_cards(node_labels, resources)
    assert cards is not None
    assert cards.by_resource == {"nvidia.com/gpu": "NVIDIA-H800",
                                 "nvidia.com/gpu.shared": "NVIDIA-H800/mps-80g*1/2"}
    assert cards.amounts == {"NVIDIA-H800": 6000, "NVIDIA-H800/mps-80g*1/2": 4000}


def test_mps_memory_is_rounded_down_to_whole_gib():
    node_labels = labels("NVIDIA-H20", memory="97871", **{"nvidia.com/gpu.replicas": "4"})
    cards = node_cards(node_labels, Resource.from_k8s({"nvidia.com/gpu.shared": "32"}))
    assert cards is not None
    assert cards.by_resource == {"nvidia.com/gpu.shared": "NVIDIA-H20/mps-95g*1/4"}


# --------------------------------------------------------------------------- malformed


@pytest.mark.parametrize("node_labels", [
    {},
    {"nvidia.com/gpu.product": "NVIDIA-H200"},                      # no memory
    {"nvidia.com/gpu.memory": "143771"},                            # no product
    labels(memory="lots"),
    labels(memory="0"),
    labels(memory="-5"),
    labels(count="eight"),
    labels(product=""),
    labels(product="NVIDIA H200"),
    labels(product="A|B"),
    labels(product="NVIDIA-H200/mig"),
    # two card models on one node
    labels(**{"huawei.com/npu.product": "Ascend-910B", "huawei.com/npu.memory": "65536"}),
    # an MPS resource whose replicas cannot be read
    labels(**{"nvidia.com/gpu.replicas": "two"}),
    labels(),
], ids=lambda value: str(sorted(value.items()))[:60])
def test_malformed_or_partial_labels_mean_no_cards(node_labels):
    resources = Resource.from_k8s({"nvidia.com/gpu": "8", "nvidia.com/gpu.shared": "8"})
    assert node_cards(node_labels, resources) is None


@given(st.dictionaries(st.sampled_from([
    "nvidia.com/gpu.product", "nvidia.com/gpu.memory", "nvidia.com/gpu.count",
    "nvidia.com/gpu.replicas", "huawei.com/npu.product", "huawei.com/npu.memory",
    "nvidia.com/mig-1g.5gb.product", "x/.product", "/gpu.product", "a.b/c.memory",
]) | st.text(max_size=30), st.text(max_size=30)),
    st.dictionaries(st.sampled_from(["nvidia.com/gpu", "nvidia.com/gpu.shared",
                                     "nvidia.com/mig-", "nvidia.com/mig-1g.5gb",
                                     "huawei.com/npu", "rdma/hca"]),
                    st.floats(min_value=0, max_value=1e6)))
def test_node_cards_never_raises(node_labels, scalars):
    cards = node_cards(node_labels, Resource(1000, 1024, scalars))
    if cards is not None:
        assert set(cards.by_resource) <= set(scalars)
        assert all(amount >= 0 for amount in cards.amounts.values())


def test_labels_of_the_wrong_shape_mean_no_cards():
    assert node_cards({"nvidia.com/gpu.product": None, "nvidia.com/gpu.memory": 5},
                      Resource()) is None  # type: ignore[dict-item]


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize("card, family", [
    ("NVIDIA-H200", "whole"),
    ("NVIDIA-H200/mig-1g.18gb-mixed", "mig 1g.18gb"),
    ("NVIDIA-H800/mps-80g*1/2", "mps"),
])
def test_card_family_reads_the_kind_from_the_name(card, family):
    assert card_family(card) == family


def test_alternatives_keep_their_order_of_preference():
    assert parse_alternatives("NVIDIA-GeForce-RTX-4090|NVIDIA-GeForce-RTX-4090-D") == (
        "NVIDIA-GeForce-RTX-4090", "NVIDIA-GeForce-RTX-4090-D")
    assert parse_alternatives(" A | B |A") == ("A", "B")
    assert parse_alternatives("NVIDIA-H200") == ("NVIDIA-H200",)


@pytest.mark.parametrize("value", ["", "A||B", "|A", "A|"])
def test_an_empty_alternative_is_an_error(value):
    with pytest.raises(CardError, match="empty card name"):
        parse_alternatives(value)


def test_alternatives_of_one_resource_name_are_fine():
    cards = ("NVIDIA-GeForce-RTX-4090", "NVIDIA-GeForce-RTX-4090-D")
    known = {c: {"nvidia.com/gpu"} for c in cards}
    assert alternatives_conflict(cards, known) is None
    assert alternatives_conflict(cards, {}) is None
    assert alternatives_conflict(("NVIDIA-H200",), {}) is None


def test_a_whole_card_and_a_mig_sub_card_cannot_be_alternatives():
    conflict = alternatives_conflict(
        ("NVIDIA-GeForce-RTX-4090", "NVIDIA-H20/mig-1g.24gb-mixed"), {})
    assert conflict is not None
    assert "NVIDIA-GeForce-RTX-4090 is a whole card" in conflict
    assert "NVIDIA-H20/mig-1g.24gb-mixed is a MIG sub-card (1g.24gb)" in conflict
    assert "same resource name" in conflict


def test_two_mig_profiles_cannot_be_alternatives():
    assert alternatives_conflict(("NVIDIA-H20/mig-1g.24gb-mixed",
                                  "NVIDIA-H20/mig-1g.37gb-mixed"), {}) is not None


def test_whole_cards_of_different_resources_cannot_be_alternatives():
    known = {"NVIDIA-H200": {"nvidia.com/gpu"}, "Ascend-910B": {"huawei.com/Ascend910"}}
    conflict = alternatives_conflict(("NVIDIA-H200", "Ascend-910B"), known)
    assert conflict is not None
    assert "NVIDIA-H200 is nvidia.com/gpu" in conflict
    assert "Ascend-910B is huawei.com/Ascend910" in conflict


# --------------------------------------------------------------------------- annotations


def test_a_quota_is_card_to_milli_amount():
    text = ('{"NVIDIA-H200":3,"NVIDIA-H800":2,"NVIDIA-H800/mps-80g*1/2":2,'
            '"NVIDIA-H200/mig-1g.18gb-mixed":3,"NVIDIA-GeForce-RTX-4090":0}')
    assert parse_card_counts(text, "volcano.sh/card.quota") == {
        "NVIDIA-H200": 3000, "NVIDIA-H800": 2000, "NVIDIA-H800/mps-80g*1/2": 2000,
        "NVIDIA-H200/mig-1g.18gb-mixed": 3000, "NVIDIA-GeForce-RTX-4090": 0}


def test_a_request_may_list_alternatives_normalised():
    counts = parse_card_counts('{"NVIDIA-GeForce-RTX-4090 | NVIDIA-GeForce-RTX-4090-D": 2}',
                               "volcano.sh/card.request", alternatives=True)
    assert counts == {"NVIDIA-GeForce-RTX-4090|NVIDIA-GeForce-RTX-4090-D": 2000}


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"NVIDIA-H200": -1}', "0 or more"),
    ('{"NVIDIA-H200": "3"}', "expected a number"),
    ('{"NVIDIA-H200": true}', "expected a number"),
    ('{"NVIDIA-H200": NaN}', "expected a number"),
    ('{"NVIDIA-H200": Infinity}', "0 or more"),
    ('{"": 1}', "empty card name"),
    ('{"A|B": 1}', "one card, not alternatives"),
])
def test_a_malformed_quota_says_what_is_wrong(text, words):
    with pytest.raises(CardError, match=words):
        parse_card_counts(text, "volcano.sh/card.quota")


@pytest.mark.parametrize("text", ['{"H100": ' + "9" * 4000 + "}", '{"H100": 1e999}',
                                  '{"H100": -1}', '{"H100": ' + "[" * 3000 + "]" * 3000 + "}",
                                  "[" * 100_000, '{"' + "x" * 300_000 + '": 1}'])
def test_card_counts_of_any_size_or_depth_are_card_errors(text: str) -> None:
    with pytest.raises(CardError) as err:
        parse_card_counts(text, "volcano.sh/card.quota")
    assert str(err.value).startswith("volcano.sh/card.quota: ")
    assert len(str(err.value)) < 300
