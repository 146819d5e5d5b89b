"""Templates (glite-info-static style): declared variables, mandatory/optional, single/multi-valued."""

from __future__ import annotations

import os

import pytest

from glueinfo.core.ldif import format_ldif
from glueinfo.glue.schema import load_schema
from glueinfo.glue.templates import TEMPLATE_NAMES, TemplateError, builtin_templates_dir, load_templates, parse_template

CE = """\
# @mandatory CE_ID PARENT_DN
# @optional  VERSION RULE PORT NOTE
# @multi     RULE
dn: GlueCEUniqueID=${CE_ID},${PARENT_DN}
objectClass: GlueCETop
objectClass: GlueCE
[if RULE] objectClass: GlueCEAccessControlBase
GlueCEUniqueID: $CE_ID
GlueCEInfoLRMSVersion: ${VERSION}
GlueCEAccessControlBaseRule: VO:${RULE}
GlueCEInfoTotalCPUs: ${PORT}
GlueCEName: queue of ${CE_ID} (${NOTE})
"""


def render(values, text=CE):
    return format_ldif([parse_template(text, "ce").render(values)], sort=False)


def test_values_are_filled_in_and_lines_with_unknown_optional_values_are_left_out():
    text = render({"CE_ID": "ce1:2119/jm-a,b", "PARENT_DN": "mds-vo-name=resource,o=grid", "RULE": ["atlas", "cms"],
                   "PORT": 8, "NOTE": None})
    assert text == (
        "dn: GlueCEUniqueID=ce1:2119/jm-a\\,b,mds-vo-name=resource,o=grid\n"
        "objectClass: GlueCETop\n"
        "objectClass: GlueCE\n"
        "objectClass: GlueCEAccessControlBase\n"
        "GlueCEUniqueID: ce1:2119/jm-a,b\n"
        "GlueCEAccessControlBaseRule: VO:atlas\n"
        "GlueCEAccessControlBaseRule: VO:cms\n"
        "GlueCEInfoTotalCPUs: 8\n"
        "\n")


def test_a_guarded_line_goes_when_its_variable_is_unset():
    text = render({"CE_ID": "x", "PARENT_DN": "o=grid", "RULE": []})
    assert "GlueCEAccessControlBase" not in text and "VERSION" not in text


def test_a_whole_value_keeps_its_type():
    entry = parse_template(CE, "ce").render({"CE_ID": "x", "PARENT_DN": "o=grid", "PORT": 2119, "VERSION": 7})
    assert entry.get("GlueCEInfoTotalCPUs") == [2119]  # int: the LDIF writer prints it, the schema check sees an INTEGER
    assert entry.get("GlueCEInfoLRMSVersion") == [7]


def test_missing_mandatory_variable_is_an_error_naming_it():
    with pytest.raises(TemplateError, match=r"template ce .*: mandatory variable CE_ID has no value"):
        render({"PARENT_DN": "o=grid"})
    with pytest.raises(TemplateError, match="mandatory variable CE_ID"):
        render({"CE_ID": "", "PARENT_DN": "o=grid"})


def test_several_values_for_a_single_valued_variable_is_an_error_naming_it():
    with pytest.raises(TemplateError, match="variable VERSION is single-valued but was given 2 values"):
        render({"CE_ID": "x", "PARENT_DN": "o=grid", "VERSION": ["1", "2"]})


@pytest.mark.parametrize("text, message", [
    ("# @mandatory A\ndn: x=$A\nGlueCEName: $B\n", "line 3: variable B is not declared"),
    ("# @optional A\n# @multi A B\ndn: x=1\n", "@multi variable B is not declared"),
    ("# @mandatory A\n# @optional A\ndn: x=$A\n", "variable A is declared both"),
    ("# @optional A B\n# @multi A B\ndn: x=1\nGlueCEName: $A $B\n", "at most one multi-valued variable per line"),
    ("# @optional A\n# @multi A\ndn: x=$A\n", "multi-valued variable A cannot be used in the DN"),
    ("GlueCEName: x\n", "the first line must be 'dn: ...'"),
    ("dn: x=1\nGlueCEName: a\n\ndn: x=2\n", "a template holds one entry"),
    ("dn: x=1\nthis is not ldif\n", "expected 'attribute: value'"),
    ("# nothing\n", "no 'dn:' line"),
])
def test_bad_templates_are_rejected_with_the_line(text, message):
    with pytest.raises(TemplateError, match=message):
        parse_template(text, "bad", "/tmp/bad.ldif")


def test_missing_template_file_names_the_path(tmp_path):
    with pytest.raises(TemplateError, match=f"template site: cannot read {tmp_path}/site.ldif"):
        load_templates(str(tmp_path))


def test_builtin_templates_load_and_only_use_attributes_and_classes_of_the_installed_schema():
    schema = load_schema()
    templates = load_templates()
    assert sorted(templates) == sorted(TEMPLATE_NAMES)
    assert os.path.isfile(os.path.join(builtin_templates_dir(), "ce.ldif"))
    for template in templates.values():
        for line in template.lines:
            assert schema.attribute(line.attr) is not None, (template.name, line.attr)
            assert schema.canonical_name(line.attr) == line.attr, (template.name, line.attr)  # schema spelling
            if line.attr == "objectClass":
                assert schema.object_class(line.text) is not None, (template.name, line.text)


def test_templates_are_parsed_once_then_read_from_the_cache_and_parsed_again_when_edited(tmp_path, monkeypatch):
    import shutil

    from glueinfo.glue import templates as module

    directory, cache = tmp_path / "templates", str(tmp_path / "cache")
    shutil.copytree(builtin_templates_dir(), directory)
    parsed = []
    real = module.parse_template
    monkeypatch.setattr(module, "parse_template", lambda *args: parsed.append(args[1]) or real(*args))
    first = load_templates(str(directory), cache_dir=cache)
    again = load_templates(str(directory), cache_dir=cache)
    assert len(parsed) == len(TEMPLATE_NAMES) and again == first and again is not first  # equal: every line
    (directory / "site.ldif").write_text((directory / "site.ldif").read_text() + "GlueSiteOtherInfo: edited\n")
    edited = load_templates(str(directory), cache_dir=cache)
    assert parsed.count("site") == 2 and edited["site"].lines[-1].text == "edited"
    for name in os.listdir(cache):  # a damaged cache is parsed again, no error
        with open(os.path.join(cache, name), "wb") as handle:
            handle.write(b"garbage")
    assert load_templates(str(directory), cache_dir=cache) == edited
