"""What a config key is: its type, default, documentation and how its text is read.

Declared by glueinfo's own SCHEMA (glueinfo.core.config) and by plugins for
the keys they read in their section (an LRMS plugin's ``[ce:NAME]`` keys, a
source's ``[sources]`` keys, an output's ``[output:NAME]`` keys), so a
plugin declares its keys without importing the config parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Optional

from glueinfo.core.records import dataclass

OPTION_TYPES = ("str", "path", "int", "float", "bool", "list")


@dataclass(frozen=True)
class Option:
    """One declared key: its type, default and a line of documentation."""

    type: str  # str, int, float, bool, list, path
    default: Any
    doc: str
    minimum: Optional[float] = None
    choices: tuple[str, ...] = ()
    # More than the type says, checked when the file is read (a host list's ranges): raises
    # ValueError naming what is wrong in the typed value, so the file is refused at once.
    check: Optional[Callable[[Any], None]] = None


_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}


def parse_value(opt: Option, raw: str) -> Any:
    """Turn the text of one value into its declared type, or raise ValueError."""
    raw = raw.strip()
    if opt.type in ("str", "path"):
        value: Any = raw
    elif opt.type == "int":
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"expected a whole number, got {raw!r}") from None
    elif opt.type == "float":
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"expected a number, got {raw!r}") from None
        if value != value or value in (float("inf"), float("-inf")):  # nan, inf: no interval, size or time is
            raise ValueError(f"expected a finite number, got {raw!r}")
    elif opt.type == "bool":
        if raw.lower() in _TRUE:
            value = True
        elif raw.lower() in _FALSE:
            value = False
        else:
            raise ValueError(f"expected yes/no (true/false, on/off, 1/0), got {raw!r}")
    elif opt.type == "list":
        value = [item for item in re.split(r"[,\s]+", raw) if item]
    else:  # pragma: no cover - a mistake in SCHEMA
        raise AssertionError(f"unknown option type {opt.type}")
    if opt.minimum is not None and isinstance(value, (int, float)) and value < opt.minimum:
        raise ValueError(f"must be at least {opt.minimum:g}, got {raw!r}")
    if opt.choices:
        # a list's choices are what each of its items may be
        bad = [item for item in value if item not in opt.choices] if opt.type == "list" else (
            [] if value in opt.choices else [raw])
        if bad:
            from glueinfo.core.suggest import did_you_mean

            hint = did_you_mean(str(bad[0]), opt.choices)
            raise ValueError(f"must be one of {', '.join(opt.choices)}, got {bad[0]!r}" + (f" ({hint})" if hint else ""))
    if opt.check is not None and value:
        opt.check(value)
    return value
