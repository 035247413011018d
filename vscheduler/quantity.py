"""Kubernetes resource quantities, parsed exactly.

Quantities are parsed into `Fraction`s so that `0.1`, `100m` and `1e-1` are the same
number and rounding happens once, the way Kubernetes does it: `milli_value` and `value`
round *up* to the next integer (a pod asking `0.0001` CPU asks 1 milli-CPU).
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from vscheduler.textinput import brief

__all__ = ["MAX_LENGTH", "MAX_MAGNITUDE", "QuantityError", "format_milli", "milli_value",
           "parse_quantity", "value"]


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


# The longest quantity string read. Kubernetes caps quantities at 2^63-1 (19 digits);
# with a fraction and a suffix a real one is far shorter. Without a bound, thousands of
# digits reach `Fraction`, which refuses them with a ValueError of its own.
MAX_LENGTH = 64
# The largest amount read, as a number of units: far beyond any real amount (Kubernetes
# caps quantities at 2^63-1, about 9.2e18), and small enough that every sum, share and
# score computed from it is a finite float. Above it is the same error as `1e31`.
MAX_MAGNITUDE = 10**30


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# sign, digits with an optional fraction, then a binary suffix, a decimal suffix or an
# exponent (the grammar of k8s.io/apimachinery's resource.Quantity).
_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)


def parse_quantity(text: object) -> Fraction:
    """Parse a quantity (`500m`, `1Gi`, `1G`, `1e3`, `0.5`, `1Ki`, or a YAML number)."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        return _in_range(Fraction(text), text)
    if isinstance(text, float):
        if text != text or text in (float("inf"), float("-inf")):
            raise QuantityError(f"{text!r} is not a quantity")
        return _in_range(Fraction(str(text)), text)
    if not isinstance(text, str):
        raise QuantityError(f"{brief(text)} is not a quantity")
    if len(text) > MAX_LENGTH:
        # (also keeps Fraction from converting thousands of digits, which Python refuses)
        raise QuantityError(f"{brief(text)} is too long to be a quantity "
                            f"(over {MAX_LENGTH} characters)")
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity (examples: 500m, 2, 1.5, 4Gi, 1e3)")
    number = Fraction(match["num"])
    if match["bin"]:
        number *= _BINARY[match["bin"]]
    elif match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 30:
            raise QuantityError(f"{text!r} is out of range")
        number *= Fraction(10) ** exponent
    else:
        number *= _DECIMAL[match["dec"] or ""]
    return _in_range(-number if match["sign"] == "-" else number, text)


def _in_range(number: Fraction, text: object) -> Fraction:
    if abs(number) > MAX_MAGNITUDE:
        raise QuantityError(f"{brief(text)} is out of range (at most 1e30)")
    return number


def _ceil(number: Fraction) -> int:
    return -((-number.numerator) // number.denominator)


def _milli(text: object) -> int:
    return _ceil(parse_quantity(text) * 1000)


def _whole(text: object) -> int:
    return _ceil(parse_quantity(text))


# The pods of a cluster repeat a few quantity strings ("1", "500m", "4Gi"): each is
# parsed once, not once per pod (parsing exactly costs most of reading a pod). Only
# strings are kept (a YAML number may be `True`, which hashes as 1 and is no quantity);
# one that is not a quantity raises every time and is not kept.
_milli_of_text = lru_cache(maxsize=4096)(_milli)
_whole_of_text = lru_cache(maxsize=4096)(_whole)


def milli_value(text: object) -> int:
    """The quantity in thousandths, rounded up (Kubernetes' `MilliValue`)."""
    return _milli_of_text(text) if type(text) is str else _milli(text)


def value(text: object) -> int:
    """The quantity in whole units, rounded up (Kubernetes' `Value`)."""
    return _whole_of_text(text) if type(text) is str else _whole(text)


def format_milli(milli: float) -> str:
    """A milli amount as the shortest quantity string: 2000 -> "2", 1500 -> "1500m"."""
    rounded = round(milli)
    if rounded % 1000 == 0:
        return str(rounded // 1000)
    return f"{rounded}m"


def format_bytes(amount: float) -> str:
    """Bytes as a binary-suffixed quantity when exact: 4294967296 -> "4Gi"."""
    rounded = round(amount)
    for suffix, size in reversed(_BINARY.items()):
        if rounded and rounded % size == 0:
            return f"{rounded // size}{suffix}"
    return str(rounded)
