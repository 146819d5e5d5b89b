"""The GLUE 2 tree checked against GLUE20.schema exactly as GLUE 1.3 is against its files.

The schema package (glueinfo.glue.schema) reads GLUE20.schema from ``[glue]
schema_dir``; the tree goes through the same TreeChecker as GLUE 1.3
(glueinfo.glue.build): normalised, checked, an entry slapd would reject left
out with its children and reported by DN.  Without the schema file the tree
is normalised and published unchecked after one warning.

glueinfo's own LDAP rendering of the GLUE 2.1 accelerator classes
(glueinfo.glue.glue2.accelerators.EXTENSION_SCHEMA, shipped with glueinfo) is
read beside GLUE20.schema, so the entries of those classes are checked too;
whether they go to LDAP or to the JSON rendering only is the publish step's
choice (``[glue] accelerator_schema``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import field
from typing import Optional

from glueinfo.core.ldif import Entry, format_ldif
from glueinfo.core.records import dataclass
from glueinfo.glue.build import check_and_order
from glueinfo.glue.schema import Problem, Schema, SchemaUnavailable
from glueinfo.glue.schema.load import load_cached_schema

log = logging.getLogger(__name__)

GLUE2_SCHEMA_FILES = ("core.schema", "cosine.schema", "GLUE20.schema")


def load_glue2_schema(schema_dir: str, cache_dir: Optional[str] = None) -> Optional[Schema]:
    """GLUE20.schema (with core and cosine) from ``schema_dir``, and glueinfo's GLUE 2.1 accelerator
    extension, or None after one warning (GLUE20.schema missing or unreadable).  Kept parsed in the
    schema cache (glueinfo.glue.schema.load.load_cached_schema; ``cache_dir``, default
    ~/.cache/glueinfo): parsing them was most of a one-host `glueinfo ldif`'s own work."""
    import os

    from glueinfo.glue.glue2.accelerators import EXTENSION_SCHEMA

    if not os.path.isfile(os.path.join(schema_dir, "GLUE20.schema")):
        log.warning("GLUE 2 schema file GLUE20.schema not found in %s (Debian package glue-schema): "
                    "publishing o=glue without a schema check", schema_dir)
        return None
    try:
        return load_cached_schema(schema_dir, GLUE2_SCHEMA_FILES, (EXTENSION_SCHEMA,), cache_dir=cache_dir)
    except SchemaUnavailable as exc:
        log.warning("%s: publishing o=glue without a schema check", exc)
        return None
    except OSError as exc:  # glueinfo's own file: an incomplete installation
        log.warning("cannot read %s (%s): publishing o=glue without a schema check", EXTENSION_SCHEMA, exc)
        return None


@dataclass
class Glue2Build:
    """A checked GLUE 2 tree: ``entries`` go to LDAP (and the LDIF), ``json_only`` (the GLUE 2.1
    accelerator entries when the site's slapd does not load their schema) to the JSON rendering
    only; both parents first."""

    entries: list[Entry]
    errors: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked: bool = True
    json_only: list[Entry] = field(default_factory=list)

    def ldif(self) -> str:
        return format_ldif(self.entries, sort=False)


def check_glue2(entries: Sequence[Entry], schema: Optional[Schema]) -> Glue2Build:
    """The entries parents first, normalised and checked (see the module docstring)."""
    kept, errors, warnings = check_and_order(entries, schema)
    return Glue2Build(kept, errors, warnings, checked=schema is not None)
