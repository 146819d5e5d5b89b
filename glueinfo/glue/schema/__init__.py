"""The GLUE LDAP schema checker: what slapd will say about an entry, said first.

- parse.py -- OpenLDAP ``.schema`` text into the :class:`Schema` model
  (attribute types and object classes, looked up by any name or OID);
- check.py -- ``Schema.check(entry)``: what slapd would reject the entry for,
  as :class:`Problem` findings (checked against a real slapd in
  tests/integration/test_ldapschema.py);
- normalise.py -- ``Schema.normalise(entry)``: what is data rather than a
  renderer bug fixed, each change a warning; ``normalise_unchecked`` when
  there are no schema files;
- load.py -- which files, slapd's built-in schema, ``load_schema`` and
  ``load_glue_schema`` with its parsed-schema cache.

The installed files are the contract: nothing about GLUE attributes is
hard-coded here.  This module re-exports the public names, so ``from
glueinfo.glue.schema import load_schema, Problem`` keeps working.
"""

from glueinfo.glue.schema.check import (
    SYNTAX_BOOLEAN,
    SYNTAX_DIRECTORY_STRING,
    SYNTAX_GENERALIZED_TIME,
    SYNTAX_IA5_STRING,
    SYNTAX_INTEGER,
    SYNTAX_NAMES,
    SYNTAX_OID,
    Problem,
    check_ldif_text,
    syntax_error,
)
from glueinfo.glue.schema.load import (
    DEFAULT_SCHEMA_DIR,
    DEFAULT_SCHEMA_FILES,
    GLUE13_SCHEMA_FILES,
    REQUIRED_SCHEMA_FILES,
    SYSTEM_SCHEMA,
    SchemaUnavailable,
    load_glue_schema,
    load_schema,
    load_schema_or_warn,
)
from glueinfo.glue.schema.normalise import normalise_entries, normalise_unchecked, to_ascii
from glueinfo.glue.schema.parse import AttributeType, ObjectClass, Schema, SchemaError

__all__ = [
    "DEFAULT_SCHEMA_DIR", "DEFAULT_SCHEMA_FILES", "GLUE13_SCHEMA_FILES", "REQUIRED_SCHEMA_FILES", "SYNTAX_BOOLEAN",
    "SYNTAX_DIRECTORY_STRING", "SYNTAX_GENERALIZED_TIME", "SYNTAX_IA5_STRING", "SYNTAX_INTEGER", "SYNTAX_NAMES", "SYNTAX_OID",
    "SYSTEM_SCHEMA", "AttributeType", "ObjectClass", "Problem", "Schema", "SchemaError", "SchemaUnavailable",
    "check_ldif_text", "load_glue_schema", "load_schema", "load_schema_or_warn", "normalise_entries", "normalise_unchecked",
    "syntax_error", "to_ascii",
]
