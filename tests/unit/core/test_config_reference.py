"""docs/configuration.md is generated from glueinfo.core.config.SCHEMA and committed.

The first test keeps the committed file equal to what the renderer makes
today, so a key added to SCHEMA without regenerating fails here.  The others
read the committed file on their own (not through the renderer) and check it
against SCHEMA: every section and key is there, with the default glueinfo
really uses, and nothing is documented that glueinfo would refuse.  They
would catch a renderer that silently drops or garbles a key.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from paths import REPO

from glueinfo.core.config import FREEFORM, SCHEMA
from glueinfo.core.config_reference import COMMAND, render
from glueinfo.core.options import Option, parse_value

REFERENCE = Path(REPO) / "docs" / "configuration.md"

_HEADING = re.compile(r"^## \[([a-z_-]+)(:NAME)?\]$")  # [htcondor-ce] has a hyphen
_ROW = re.compile(r"^\| `([a-z0-9_]+)` \| (.*?) \| (.*?) \| (.*) \|$")


def committed() -> str:
    return REFERENCE.read_text(encoding="utf-8")


def documented() -> dict[str, dict[str, tuple[str, str, str]]]:
    """Section (``kind:*`` for named ones) -> key -> (type, default, description) cells of the committed file."""
    found: dict[str, dict[str, tuple[str, str, str]]] = {}
    section = None
    for line in committed().splitlines():
        heading = _HEADING.match(line)
        if heading:
            section = heading.group(1) + (":*" if heading.group(2) else "")
            assert section not in found, f"{REFERENCE.name}: section [{section}] appears twice"
            found[section] = {}
            continue
        if line.startswith("## "):
            section = None
            continue
        row = _ROW.match(line)
        if row and section is not None:
            key, type_cell, default_cell, doc_cell = row.groups()
            assert key not in found[section], f"{REFERENCE.name}: [{section}] {key} appears twice"
            found[section][key] = (type_cell, default_cell, doc_cell)
    return found


def test_the_committed_reference_is_what_the_schema_renders_today() -> None:
    assert committed() == render(), (
        f"{REFERENCE.relative_to(REPO)} is out of date with glueinfo.core.config.SCHEMA; "
        f"regenerate it from the repository root with:  {COMMAND}"
    )


def test_rendering_twice_gives_the_same_text() -> None:
    assert render() == render()


def test_every_schema_section_and_key_is_documented() -> None:
    found = documented()
    missing = [f"[{section}]" for section in SCHEMA if section not in found]
    missing += [f"[{section}] {key}" for section, options in SCHEMA.items() for key in options
                if key not in found.get(section, {})]
    missing += [f"[{section}]" for section in FREEFORM if section not in found]
    assert not missing, f"{REFERENCE.name} lacks {', '.join(missing)}; regenerate it: {COMMAND}"


def test_nothing_documented_is_unknown_to_glueinfo() -> None:
    for section, keys in documented().items():
        if section in FREEFORM:
            assert not keys, f"free-form [{section}] documents fixed keys {sorted(keys)}"
            continue
        assert section in SCHEMA, f"{REFERENCE.name} documents unknown section [{section}]"
        unknown = sorted(set(keys) - set(SCHEMA[section]))
        assert not unknown, f"{REFERENCE.name} documents unknown keys [{section}] {unknown}"


def _default_matches(option: Option, cell: str) -> bool:
    if cell in ("*unset*", "*empty*"):
        return bool(option.default in (None, "", []))
    text = cell.strip("`")
    try:
        return bool(parse_value(option, text) == option.default)
    except ValueError:
        return False


@pytest.mark.parametrize("section", sorted(SCHEMA))
def test_each_documented_default_is_the_one_glueinfo_uses(section: str) -> None:
    written = documented().get(section, {})
    wrong = [f"{key}: documents {written[key][1]}, glueinfo uses {option.default!r}"
             for key, option in SCHEMA[section].items()
             if key in written and not _default_matches(option, written[key][1])]
    assert not wrong, f"[{section}] in {REFERENCE.name}: " + "; ".join(wrong)


@pytest.mark.parametrize("section", sorted(SCHEMA))
def test_each_key_has_its_description(section: str) -> None:
    written = documented().get(section, {})
    bare = [key for key, option in SCHEMA[section].items()
            if key in written and option.doc and not written[key][2].strip()]
    assert not bare, f"[{section}] in {REFERENCE.name}: no description for {bare}"
