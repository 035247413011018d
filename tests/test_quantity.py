"""Kubernetes quantities (vscheduler/quantity.py): exact parsing, Kubernetes rounding
(MilliValue / Value round up), and clear refusals."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vscheduler.quantity import (
    QuantityError,
    format_bytes,
    format_milli,
    milli_value,
    parse_quantity,
    value,
)

FAST = settings(max_examples=150, deadline=None)


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", Fraction(1, 2)),
        ("1Gi", 2**30),
        ("1G", 10**9),
        ("1e3", 1000),
        ("1e+3", 1000),
        ("1E3", 1000),  # an exponent, not the Exa suffix
        ("1E", 10**18),  # the Exa suffix
        ("1.2e3", 1200),
        ("1e-3", Fraction(1, 1000)),
        ("0.5", Fraction(1, 2)),
        ("1Ki", 1024),
        ("100Mi", 100 * 2**20),
        ("1.5Gi", 3 * 2**29),
        (".5", Fraction(1, 2)),
        ("+1", 1),
        ("-1", -1),
        ("2", 2),
        ("1k", 1000),
        ("1M", 10**6),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1Ti", 2**40),
        ("1Pi", 2**50),
        ("1Ei", 2**60),
        ("1n", Fraction(1, 10**9)),
        ("1u", Fraction(1, 10**6)),
        ("0", 0),
    ],
)
def test_parse_strings_exactly(text: str, expected: Fraction | int) -> None:
    assert parse_quantity(text) == expected


def test_decimal_forms_of_the_same_amount_are_equal() -> None:
    # 0.1 CPU written three ways: no floating-point drift between them
    assert parse_quantity("0.1") == parse_quantity("100m") == parse_quantity("1e-1")
    assert parse_quantity("0.1") == Fraction(1, 10)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (1, 1),           # `cpu: 1` in YAML is an int
        (16, 16),
        (0, 0),
        (0.5, Fraction(1, 2)),   # `cpu: 0.5` is a float
        (0.1, Fraction(1, 10)),  # exact, not 0.1000000000000000055...
        (1000.0, 1000),
        (10**20, 10**20),
    ],
)
def test_parse_yaml_numbers(raw: float, expected: Fraction | int) -> None:
    assert parse_quantity(raw) == expected


# --------------------------------------------------------------------------- rounding


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("0.0001", 1),   # a pod asking 0.0001 CPU asks 1 milli-CPU (rounded up)
        ("1n", 1),
        ("1m", 1),
        ("1.0001m", 2),
        ("500m", 500),
        ("1", 1000),
        ("2.5", 2500),
        (0.0001, 1),
        (1, 1000),
        ("1Gi", 2**30 * 1000),
        ("0", 0),
    ],
)
def test_milli_value_rounds_up(text: object, milli: int) -> None:
    assert milli_value(text) == milli


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        ("0.1", 1),   # rounded up, as Kubernetes' Value()
        ("1.5", 2),
        ("1", 1),
        ("500m", 1),
        ("1Gi", 2**30),
        ("1.5Gi", 3 * 2**29),
        ("129M", 129 * 10**6),
        ("0", 0),
    ],
)
def test_value_rounds_up(text: object, whole: int) -> None:
    assert value(text) == whole


def test_results_are_plain_ints() -> None:
    assert type(milli_value("1.5")) is int
    assert type(value("1Gi")) is int


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "bad",
    [
        "1.2.3",
        "abc",
        "1Gb",
        "1gi",
        "1K",      # kilo is lowercase k
        "",
        " ",
        "1e",
        "e3",
        "Gi",
        ".",
        "+",
        "1_000",
        "0x10",
        "1 Gi",
        "1e3Gi",
        "--1",
    ],
)
def test_refuses_malformed_strings(bad: str) -> None:
    with pytest.raises(QuantityError) as err:
        parse_quantity(bad)
    # the message quotes what was refused, so the user can find it
    assert repr(bad) in str(err.value)


@pytest.mark.parametrize(
    "bad", [True, False, None, float("nan"), float("inf"), float("-inf"), [], {}, b"1"]
)
def test_refuses_values_that_are_not_quantities(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)
    with pytest.raises(QuantityError):
        milli_value(bad)
    with pytest.raises(QuantityError):
        value(bad)


@pytest.mark.parametrize("bad", ["1e31", "1e999", "1e-31", "1e99999999999", "5E-1000"])
def test_refuses_huge_exponents(bad: str) -> None:
    with pytest.raises(QuantityError, match="out of range"):
        parse_quantity(bad)


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


# --------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("milli", "text"),
    [(2000, "2"), (1500, "1500m"), (0, "0"), (1, "1m"), (1000, "1"), (250, "250m")],
)
def test_format_milli(milli: int, text: str) -> None:
    assert format_milli(milli) == text


@pytest.mark.parametrize(
    ("amount", "text"),
    [(2**32, "4Gi"), (2**20, "1Mi"), (1536 * 2**20, "1536Mi"), (1000, "1000"), (0, "0")],
)
def test_format_bytes(amount: int, text: str) -> None:
    assert format_bytes(amount) == text


@FAST
@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_format_milli_parses_back_to_the_same_milli(milli: int) -> None:
    assert milli_value(format_milli(milli)) == milli


@FAST
@given(st.integers(min_value=0, max_value=2**62))
def test_format_bytes_parses_back_to_the_same_bytes(amount: int) -> None:
    assert value(format_bytes(amount)) == amount


@FAST
@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["", "m", "k", "Mi", "Gi"]))
def test_integer_with_suffix_is_exact(number: int, suffix: str) -> None:
    scale = {"": 1, "m": Fraction(1, 1000), "k": 1000, "Mi": 2**20, "Gi": 2**30}[suffix]
    assert parse_quantity(f"{number}{suffix}") == number * scale


@FAST
@given(st.decimals(min_value=0, max_value=10**6, places=6, allow_nan=False))
def test_milli_value_of_decimal_strings_rounds_up(amount: Decimal) -> None:
    text = format(amount, "f")
    exact = Fraction(text)
    milli = milli_value(text)
    assert milli - 1 < exact * 1000 <= milli
    assert value(text) - 1 < exact <= value(text)


@FAST
@given(st.text(alphabet="0123456789.eEkKmMGgiI+- ", max_size=8))
def test_any_string_either_parses_or_raises_quantity_error(text: str) -> None:
    try:
        result = parse_quantity(text)
    except QuantityError:
        return
    assert isinstance(result, Fraction)


@pytest.mark.parametrize("bad", ["9" * 5000, "0." + "0" * 5000 + "1", "1" * 65])
def test_refuses_strings_too_long_to_be_quantities(bad: str) -> None:
    with pytest.raises(QuantityError, match="too long to be a quantity") as err:
        parse_quantity(bad)
    assert len(str(err.value)) < 200  # the message quotes a shortened text


@pytest.mark.parametrize("bad", [10**31, -(10**31), 10**400, 1e308, -1e300, "2e30",
                                 "9" * 40, "1000000000000000Ei"])
def test_refuses_amounts_beyond_1e30(bad: object) -> None:
    with pytest.raises(QuantityError, match="out of range"):
        parse_quantity(bad)


def test_the_largest_amounts_still_parse() -> None:
    assert parse_quantity(10**30) == 10**30
    assert parse_quantity("1e30") == 10**30
    assert milli_value("9223372036854775807") == 9223372036854775807000


@FAST
@given(st.one_of(st.integers(), st.floats(), st.text(max_size=100),
                 st.from_regex(r"[+-]?[0-9]{1,80}(\.[0-9]{0,40})?([eE][+-]?[0-9]{1,12})?",
                               fullmatch=True)))
def test_any_number_or_text_is_a_bounded_fraction_or_a_quantity_error(raw: object) -> None:
    try:
        result = parse_quantity(raw)
    except QuantityError:
        return
    assert abs(result) <= 10**30


@FAST
@given(st.one_of(st.text(alphabet="0123456789.eEkKmMGgiI+- ", max_size=10),
                 st.sampled_from(["1", "500m", "4Gi", "1e3", "0.1", "x"])))
def test_a_string_read_again_reads_as_parsed_afresh(text: str) -> None:
    # milli_value and value keep what a string read; a second read (from that memory)
    # equals the exact parse rounded up, and a string that is no quantity is refused
    # every time.
    try:
        exact = parse_quantity(text)
    except QuantityError:
        for _ in range(2):
            with pytest.raises(QuantityError):
                milli_value(text)
            with pytest.raises(QuantityError):
                value(text)
        return
    for _ in range(2):
        assert milli_value(text) == math.ceil(exact * 1000)
        assert value(text) == math.ceil(exact)


def test_what_is_remembered_is_not_confused_with_numbers_alike() -> None:
    # 1.0, 1 and True hash alike: only strings are remembered, so True stays refused
    class Text(str):
        pass

    assert milli_value(1.0) == 1000 and value(1) == 1 and milli_value("1") == 1000
    with pytest.raises(QuantityError):
        milli_value(True)
    with pytest.raises(QuantityError):
        value(True)
    assert value(1.5) == 2 and value("1.5") == 2
    assert milli_value(Text("500m")) == 500 and value(Text("4Gi")) == 4 * 2**30
