"""GLUE20.schema with glueinfo's accelerator extension is kept parsed, as the GLUE 1.3 files are.

A fresh `glueinfo ldif` used to parse GLUE20.schema (with core and cosine) at every start; the
parsed schema now comes from the same cache as GLUE 1.3's, and an edited file, the extension
included, is parsed again.
"""

import os
import shutil

import pytest

from glueinfo.glue.glue2.accelerators import EXTENSION_SCHEMA
from glueinfo.glue.glue2.check import GLUE2_SCHEMA_FILES, load_glue2_schema
from glueinfo.glue.schema import load as pipeline

SYSTEM_SCHEMA_DIR = "/etc/ldap/schema"

pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(SYSTEM_SCHEMA_DIR, "GLUE20.schema")),
                                reason="Debian package glue-schema not installed")


@pytest.fixture
def schema_dir(tmp_path):
    directory = tmp_path / "schema"
    directory.mkdir()
    for name in GLUE2_SCHEMA_FILES:
        shutil.copy(os.path.join(SYSTEM_SCHEMA_DIR, name), directory / name)
    return directory


@pytest.fixture
def parsed(monkeypatch):
    """The schema-file sets parsed from text (not taken from the cache), one item per parse."""
    calls = []
    real = pipeline.load_schema
    monkeypatch.setattr(pipeline, "load_schema", lambda *args: calls.append(args) or real(*args))
    return calls


def test_glue2_schema_is_parsed_once_and_then_read_from_the_cache(schema_dir, tmp_path, parsed):
    cache = tmp_path / "cache"
    first = load_glue2_schema(str(schema_dir), cache_dir=str(cache))
    again = load_glue2_schema(str(schema_dir), cache_dir=str(cache))
    assert len(parsed) == 1 and len(list(cache.iterdir())) == 1
    for schema in (first, again):  # a class of GLUE20.schema and one of the extension, from either
        assert schema.object_class("GLUE2ComputingService").name == "GLUE2ComputingService"
        assert schema.object_class("GLUE2AcceleratorEnvironment").name == "GLUE2AcceleratorEnvironment"


def test_an_edited_glue20_schema_is_parsed_again(schema_dir, tmp_path, parsed):
    cache = str(tmp_path / "cache")
    load_glue2_schema(str(schema_dir), cache_dir=cache)
    with open(schema_dir / "GLUE20.schema", "a") as handle:
        handle.write("\n# edited\n")
    load_glue2_schema(str(schema_dir), cache_dir=cache)
    assert len(parsed) == 2


def test_an_edited_extension_file_is_parsed_again(schema_dir, tmp_path, parsed):
    extension = tmp_path / "extension.schema"
    shutil.copy(EXTENSION_SCHEMA, extension)
    cache = str(tmp_path / "cache")
    pipeline.load_cached_schema(str(schema_dir), GLUE2_SCHEMA_FILES, (str(extension),), cache_dir=cache)
    pipeline.load_cached_schema(str(schema_dir), GLUE2_SCHEMA_FILES, (str(extension),), cache_dir=cache)
    assert len(parsed) == 1
    extension.write_text(extension.read_text().replace("GLUE2AcceleratorEnvironment", "GLUE2AcceleratorEnvironmentX"))
    schema = pipeline.load_cached_schema(str(schema_dir), GLUE2_SCHEMA_FILES, (str(extension),), cache_dir=cache)
    assert len(parsed) == 2 and schema.object_class("GLUE2AcceleratorEnvironmentX") is not None


def test_a_damaged_cache_or_one_that_cannot_be_written_is_no_error(schema_dir, tmp_path, parsed):
    cache = tmp_path / "cache"
    load_glue2_schema(str(schema_dir), cache_dir=str(cache))
    for name in os.listdir(cache):
        (cache / name).write_bytes(b"garbage")
    assert load_glue2_schema(str(schema_dir), cache_dir=str(cache)).object_class("GLUE2ComputingService") is not None
    (tmp_path / "a-file").write_text("")
    assert load_glue2_schema(str(schema_dir), cache_dir=str(tmp_path / "a-file" / "cache")) is not None
    assert len(parsed) == 3


def test_without_the_extension_file_the_tree_goes_unchecked_after_one_warning(schema_dir, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr("glueinfo.glue.glue2.accelerators.EXTENSION_SCHEMA", str(tmp_path / "missing.schema"))
    assert load_glue2_schema(str(schema_dir), cache_dir=str(tmp_path / "cache")) is None
    assert [r.getMessage() for r in caplog.records if "missing.schema" in r.getMessage()] != []


def test_the_schema_from_the_cache_is_the_parsed_one(schema_dir, tmp_path, parsed):
    cache = str(tmp_path / "cache")
    parsed_now = pipeline.load_cached_schema(str(schema_dir), GLUE2_SCHEMA_FILES, (EXTENSION_SCHEMA,), cache_dir=cache)
    cached = pipeline.load_cached_schema(str(schema_dir), GLUE2_SCHEMA_FILES, (EXTENSION_SCHEMA,), cache_dir=cache)
    assert len(parsed) == 1 and cached is not parsed_now
    assert cached.attribute_types == parsed_now.attribute_types and cached.object_classes == parsed_now.object_classes
    assert cached.sources == parsed_now.sources
    service = cached.object_class("GLUE2ComputingService")
    assert cached.object_class(service.oid) is service  # one definition, found by its name and its OID
    assert cached.check_entries([]) == [] and cached.syntax("GLUE2EntityName") == parsed_now.syntax("GLUE2EntityName")
