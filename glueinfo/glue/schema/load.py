"""The GLUE schema from disk: which files, slapd's built-in part, and a parsed-schema cache.

``load_schema(directory)`` reads OpenLDAP ``.schema`` files -- by default the
ones Debian's ``glue-schema`` package installs in /etc/ldap/schema plus
core.schema and cosine.schema, the same set BDII's slapd includes -- and the
system schema slapd has built in (``top``, ``objectClass``,
``extensibleObject``...).  The installed files are the contract: nothing about
GLUE attributes is hard-coded in this package.

Failures: :class:`SchemaUnavailable` (an OSError) when the directory or a
GLUE core file is missing or unreadable -- callers then say so once and
publish unchecked (``load_schema_or_warn``, ``load_glue_schema`` return
None after one warning); :class:`~glueinfo.glue.schema.parse.SchemaError`
when a file cannot be parsed.

``load_glue_schema`` keeps the parsed schema in a cache file
(glueinfo.core.parsed_cache: ``Schema.to_plain()``), so a fresh ``glueinfo
ldif`` does not parse 80 KB of schema text at every start;
``load_cached_schema`` is that cache for any set of files (the GLUE 2 check's
GLUE20.schema with glueinfo's accelerator extension).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Optional

from glueinfo.core import parsed_cache
from glueinfo.core.errors import ConfigurationError
from glueinfo.glue.schema.parse import Schema

log = logging.getLogger(__name__)

DEFAULT_SCHEMA_DIR = "/etc/ldap/schema"
# What BDII's slapd includes (bdii-slapd.conf), minus nis.schema and BDII's own
# stats schema, which no GLUE entry uses.  Missing optional files are skipped.
DEFAULT_SCHEMA_FILES = (
    "core.schema",
    "cosine.schema",
    "Glue-CORE.schema",
    "Glue-MDS.schema",
    "Glue-CE.schema",
    "Glue-CESEBind.schema",
    "Glue-SE.schema",
    "GLUE20.schema",
)
# Without these there is nothing to check GLUE 1.3 against.
REQUIRED_SCHEMA_FILES = ("Glue-CORE.schema", "Glue-CE.schema")
# What the rendered tree uses; parsing GLUE20.schema and the SE schema too
# would triple the start-up time of `glueinfo ldif`.  Static LDIF files may
# hold anything, so with [glue] static_ldif_dir the whole default set is read.
GLUE13_SCHEMA_FILES = ("Glue-CORE.schema", "Glue-MDS.schema", "Glue-CE.schema", "Glue-CESEBind.schema")
# glueinfo's own schema reader: the cache holds its classes, so a changed reader parses again.
_READER_FILES = tuple(os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
                      for name in ("parse.py", "check.py", "normalise.py", "load.py"))

SYSTEM_SCHEMA = """
attributetype ( 2.5.4.0 NAME 'objectClass' EQUALITY objectIdentifierMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.38 )
attributetype ( 2.5.4.1 NAME ( 'aliasedObjectName' 'aliasedEntryName' ) EQUALITY distinguishedNameMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.12 SINGLE-VALUE )
attributetype ( 2.16.840.1.113730.3.1.34 NAME 'ref' EQUALITY caseExactMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15
  USAGE distributedOperation )
attributetype ( 2.5.18.1 NAME 'createTimestamp' EQUALITY generalizedTimeMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.24
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.2 NAME 'modifyTimestamp' EQUALITY generalizedTimeMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.24
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.3 NAME 'creatorsName' EQUALITY distinguishedNameMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.12
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.4 NAME 'modifiersName' EQUALITY distinguishedNameMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.12
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.21.9 NAME 'structuralObjectClass' EQUALITY objectIdentifierMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.38
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 1.3.6.1.1.16.4 NAME 'entryUUID' EQUALITY UUIDMatch SYNTAX 1.3.6.1.1.16.1
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 1.3.6.1.4.1.4203.666.1.7 NAME 'entryCSN' EQUALITY CSNMatch SYNTAX 1.3.6.1.4.1.4203.666.11.2.1
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 1.3.6.1.1.20 NAME 'entryDN' EQUALITY distinguishedNameMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.12
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.10 NAME 'subschemaSubentry' EQUALITY distinguishedNameMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.12
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
attributetype ( 2.5.18.9 NAME 'hasSubordinates' EQUALITY booleanMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.7
  SINGLE-VALUE NO-USER-MODIFICATION USAGE directoryOperation )
objectclass ( 2.5.6.0 NAME 'top' ABSTRACT MUST objectClass )
objectclass ( 2.5.6.1 NAME 'alias' SUP top STRUCTURAL MUST aliasedObjectName )
objectclass ( 2.16.840.1.113730.3.2.6 NAME 'referral' SUP top STRUCTURAL MUST ref )
objectclass ( 1.3.6.1.4.1.1466.101.120.111 NAME 'extensibleObject' SUP top AUXILIARY )
"""


class SchemaUnavailable(ConfigurationError, OSError):
    """The schema directory or the GLUE schema files are not there."""


def load_schema(directory: str = DEFAULT_SCHEMA_DIR, files: Sequence[str] = DEFAULT_SCHEMA_FILES) -> Schema:
    """Read the schema files (those present of ``files``) from ``directory``.

    Raises SchemaUnavailable when the directory or one of the GLUE core files
    (Glue-CORE.schema, Glue-CE.schema) is missing, SchemaError when a file
    cannot be parsed.
    """
    if not os.path.isdir(directory):
        raise SchemaUnavailable(f"LDAP schema directory {directory} does not exist")
    missing = [name for name in REQUIRED_SCHEMA_FILES if name in files and not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise SchemaUnavailable(f"GLUE schema file(s) {', '.join(missing)} not found in {directory} (Debian package glue-schema)")
    schema = Schema()
    schema.add_text(SYSTEM_SCHEMA, "<slapd system schema>")
    for name in files:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError as exc:
            raise SchemaUnavailable(f"cannot read schema file {path}: {exc}") from None
        schema.add_text(text, path)
    return schema


def load_schema_or_warn(directory: str = DEFAULT_SCHEMA_DIR, logger: Optional[logging.Logger] = None) -> Optional[Schema]:
    """load_schema, or None after ONE warning that output goes unchecked.
    Call it once per process and keep the result."""
    try:
        return load_schema(directory)
    except SchemaUnavailable as exc:
        (logger or log).warning("%s: publishing without a schema check", exc)
        return None


def load_glue_schema(schema_dir: str, everything: bool = False, cache_dir: Optional[str] = None) -> Optional[Schema]:
    """The schema to check the tree against, or None after one warning when the files are absent.

    The parsed schema is kept in a cache file (``cache_dir``, default
    $XDG_CACHE_HOME/glueinfo or ~/.cache/glueinfo) named after the schema
    files' paths, sizes and modification times and glueinfo's own schema
    reader, so a fresh `glueinfo ldif` does not parse 80 KB of schema text;
    any problem with the cache just means parsing again.
    """
    files = DEFAULT_SCHEMA_FILES if everything else GLUE13_SCHEMA_FILES
    try:
        return load_cached_schema(schema_dir, files, cache_dir=cache_dir)
    except SchemaUnavailable as exc:
        log.warning("%s: publishing without a schema check", exc)
        return None


def load_cached_schema(schema_dir: str, files: Sequence[str], extra_files: Sequence[str] = (),
                       cache_dir: Optional[str] = None) -> Schema:
    """``load_schema(schema_dir, files)`` with each of ``extra_files`` (paths of glueinfo's own
    schema files) added after them, kept in the parsed-schema cache that ``load_glue_schema``
    describes (its name covers the extra files' sizes and times too).  Raises as load_schema does,
    and OSError when an extra file cannot be read; a cache that cannot be read or written only
    means parsing again."""
    # A schema directory that is not one has no cache: load_schema says why, every time.
    inputs = [*_READER_FILES, *(os.path.join(schema_dir, name) for name in files), *extra_files]
    cache = parsed_cache.cache_file("schema", inputs, key=schema_dir, cache_dir=cache_dir) if os.path.isdir(schema_dir) else None
    if cache is not None:
        try:
            return Schema.from_plain(parsed_cache.read(cache))
        except (OSError, EOFError, TypeError, ValueError):  # absent, damaged, another form: parsed again
            pass
    schema = load_schema(schema_dir, files)
    for path in extra_files:
        with open(path, encoding="utf-8") as handle:
            schema.add_text(handle.read(), path)
    if cache is not None:
        parsed_cache.write(cache, schema.to_plain())
    return schema
