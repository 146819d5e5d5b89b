"""Text for XML written as text: characters XML 1.0 cannot carry, escaping, and how Node XML writes
values (times, durations, typed facts)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any, Optional

from glueinfo.core.units import format_number

# Characters XML 1.0 cannot carry at all; replaced so hostile strings never break a document.
_NOT_XML_CHAR = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: Any) -> str:
    """Text safe for an XML 1.0 document: characters XML cannot carry become U+FFFD."""
    text = value if isinstance(value, str) else str(value)
    return _NOT_XML_CHAR.sub("\ufffd", text)


def format_time(epoch: float) -> str:
    """ISO 8601 UTC with microseconds (xsd:dateTime), e.g. 2024-05-01T12:00:00.250000Z."""
    moment = datetime.fromtimestamp(epoch, UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}"
    return text + "Z"


def format_seconds(seconds: float) -> str:
    """A wallDuration as the spec's examples write it (``wallDuration="3576"``): seconds, to the
    microsecond, without an exponent: 60 -> 60, 1.5 -> 1.5 (docs/sss-node-reader.md says why not
    the xsd:duration of the spec's type table)."""
    return format_number(round(max(0.0, float(seconds)), 6))


def format_value(kind: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    if kind == "int":
        return str(int(value))
    if kind == "float":
        return repr(float(value)) if math.isfinite(value) else None
    if kind == "bool":
        return "true" if value else "false"
    if kind == "time":
        return format_time(value) if math.isfinite(value) and value > 0 else None
    if kind == "words":
        return " ".join(value) if value else None
    text = str(value)
    return text if text != "" else None


def escaped_text(value: str) -> str:
    """``value`` as an element's text: characters XML cannot carry replaced (xml_text), markup escaped."""
    if not (value.isascii() and value.isprintable()):
        value = xml_text(value)
    if "&" in value:
        value = value.replace("&", "&amp;")
    if "<" in value:
        value = value.replace("<", "&lt;")
    if ">" in value:
        value = value.replace(">", "&gt;")
    if "\r" in value:  # a bare CR would come back as LF
        value = value.replace("\r", "&#13;")
    return value


def escaped_attribute(value: str) -> str:
    """``value`` as a double-quoted attribute's value: escaped_text, quotes and white space escaped."""
    value = escaped_text(value)
    if '"' in value:
        value = value.replace('"', "&quot;")
    if "\n" in value or "\t" in value:
        value = value.replace("\n", "&#10;").replace("\t", "&#9;")
    return value
