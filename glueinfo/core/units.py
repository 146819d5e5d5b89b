"""Units of measure for SSS consumable resources (SSS Node spec, Appendix A).

Byte multiples are binary (KB = 2**10 bytes, MB = 2**20, ...) as the SSS
spec defines them; network rates are decimal (1 Gbps = 1000 Mbps) as link
speeds are.  Shared by the Node XML reader and the SSSRMAP query engine so a
value in GB compares correctly with one in MB.
"""

from __future__ import annotations

import math
import re
from typing import Optional

from glueinfo.core.errors import InputError

_BYTE_UNITS = ("B", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB", "NB", "DB")
BYTE_FACTORS: dict[str, float] = {unit: float(2 ** (10 * i)) for i, unit in enumerate(_BYTE_UNITS)}
_BYTE_ALIASES = {
    "BYTE": "B", "BYTES": "B", "KIB": "KB", "MIB": "MB", "GIB": "GB", "TIB": "TB", "PIB": "PB", "EIB": "EB",
    "KILOBYTE": "KB", "MEGABYTE": "MB", "GIGABYTE": "GB", "TERABYTE": "TB", "PETABYTE": "PB", "EXABYTE": "EB",
}
RATE_FACTORS: dict[str, float] = {"bps": 1.0, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12}

_NUMBER = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z/]*)\s*$")


class UnitError(InputError, ValueError):
    """A unit we do not know, or two units that measure different things."""


def canonical(unit: str) -> tuple[str, float]:
    """(family, factor to the family's base unit) for a unit name; UnitError if unknown."""
    name = unit.strip()
    upper = name.upper()
    upper = _BYTE_ALIASES.get(upper.rstrip("S") if upper.endswith("BYTES") else upper, upper)
    if upper in BYTE_FACTORS:
        return "bytes", BYTE_FACTORS[upper]
    lower = name.lower().replace("/s", "ps").replace("bit", "b")
    if lower in RATE_FACTORS:
        return "rate", RATE_FACTORS[lower]
    raise UnitError(f"unknown unit {unit!r}")


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """``value`` in ``from_unit`` expressed in ``to_unit``."""
    if from_unit == to_unit:
        return value
    family_from, factor_from = canonical(from_unit)
    family_to, factor_to = canonical(to_unit)
    if family_from != family_to:
        raise UnitError(f"cannot convert {from_unit} to {to_unit}")
    return value * factor_from / factor_to


def parse_quantity(text: str) -> Optional[tuple[float, Optional[str]]]:
    """'4GB' -> (4.0, 'GB'); '512' -> (512.0, None); anything else (or NaN/inf) -> None."""
    match = _NUMBER.match(text)
    if not match:
        return None
    number = float(match.group(1))
    if not math.isfinite(number):
        return None
    return number, (match.group(2) or None)


def format_number(value: float) -> str:
    """Integers without a decimal point, other values with at most 6 decimals, never exponent form."""
    if value == int(value) and abs(value) < 2**63:
        return str(int(value))
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text if text not in ("-0", "") else "0"
