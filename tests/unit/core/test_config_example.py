"""etc/glueinfo.conf.example documents every key glueinfo knows, with its real default.

The example is what admins copy and read; glueinfo.core.config.SCHEMA is what the
code accepts.  This test keeps them from drifting: every declared section and
key must appear in the example (commented out or not) with the declared
default, nothing it documents may be unknown to glueinfo, and the file as
shipped must load.
"""

from __future__ import annotations

import re

import pytest
from paths import REPO

from glueinfo.core.config import SCHEMA, parse_text
from glueinfo.core.options import Option, parse_value

EXAMPLE = REPO / "etc" / "glueinfo.conf.example"

_SECTION = re.compile(r"^#?\s*\[([^\]]+)\]\s*$")
_KEY = re.compile(r"^#?([a-z][a-z0-9_]*)\s*=\s*(.*)$")


def documented() -> dict[str, dict[str, list[str]]]:
    """Declared section (``kind:*`` for named ones) -> key -> every value written for it in the example."""
    found: dict[str, dict[str, list[str]]] = {}
    section = None
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        match = _SECTION.match(line.strip())
        if match:
            name = match.group(1).strip()
            section = name.split(":", 1)[0] + ":*" if ":" in name else name
            found.setdefault(section, {})
            continue
        match = _KEY.match(line.strip())
        if match and section is not None:
            found[section].setdefault(match.group(1), []).append(match.group(2).strip())
    return found


def is_default(option: Option, raw: str) -> bool:
    if raw == "":
        return option.default in (None, "", [])
    try:
        return parse_value(option, raw) == option.default
    except ValueError:
        return False


@pytest.mark.parametrize("section", sorted(SCHEMA))
def test_every_key_is_documented_with_its_default(section):
    written = documented().get(section)
    assert written is not None, f"[{section}] is not in {EXAMPLE.name}"
    problems = []
    for key, option in SCHEMA[section].items():
        values = written.get(key)
        if not values:
            problems.append(f"{key}: not documented")
        elif not any(is_default(option, value) for value in values):
            problems.append(f"{key}: the example never shows its default {option.default!r} (shows {values})")
    assert not problems, f"[{section}] in {EXAMPLE.name}: " + "; ".join(problems)


def test_the_example_documents_nothing_glueinfo_would_refuse():
    known = {section: set(options) for section, options in SCHEMA.items()}
    for section, keys in documented().items():
        if section == "extensions":  # free-form
            continue
        assert section in known, f"{EXAMPLE.name} documents unknown section [{section}]"
        assert keys.keys() <= known[section], f"[{section}] documents unknown keys {sorted(keys.keys() - known[section])}"


def test_the_example_loads_as_it_is():
    parse_text(EXAMPLE.read_text(encoding="utf-8"), str(EXAMPLE))
