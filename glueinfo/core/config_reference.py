"""The configuration reference (docs/configuration.md), rendered from SCHEMA.

The reference is generated so that it cannot drift from what glueinfo
accepts: every section and key of ``glueinfo.core.config.SCHEMA`` with its
type, default and description, in the order SCHEMA declares them.  The
output depends on nothing but SCHEMA (no clock, no host, no locale), so two
runs give the same bytes.  Regenerate the committed file after changing
SCHEMA::

    python -m glueinfo.core.config_reference > docs/configuration.md

tests/unit/core/test_config_reference.py fails while the committed file
differs from what this module renders.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from glueinfo.core.config import DEFAULT_PATH, ENV_PATH, FREEFORM, SCHEMA
from glueinfo.core.options import Option

COMMAND = "python -m glueinfo.core.config_reference > docs/configuration.md"

TYPE_NAMES = {
    "str": "string",
    "path": "path",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "list",
}

# One line on what a section is for, and where the longer story is told.
# A section without an entry here is still rendered in full (keys, types,
# defaults); only this introduction is missing.
SECTION_INTROS = {
    "glueinfo": "This host: where its facts are read and the name it is published under. "
                "See [What is measured](glue-mapping.md#what-is-measured).",
    "collectors": "Which collectors run and how long each may take. `--collector NAME` and "
                  "`--no-collector NAME` on the command line override these lists for the collectors "
                  "they name; a name no collector has is an error (exit 2), not a silent no-op.",
    "static": "Facts no probe can measure, as the site admin states them; unset means unknown and "
              "is not published.",
    "node": "SSS Node XML (`glueinfo node-xml`, `glueinfo serve`, `glueinfo run`). "
            "See [SSS Node XML and SSSRMAP](sss.md).",
    "serve": "The HTTP server of `glueinfo serve` (and of `glueinfo run` with `[run] serve = yes`). "
             "See [`glueinfo serve`](sss.md#glueinfo-serve).",
    "site": "The GlueSite entry. See [Site configuration](glue-mapping.md#site-configuration).",
    "cluster:*": "One section per GlueCluster; NAME is the default unique id.",
    "subcluster:*": "A pin: these hosts form one SubCluster, whatever their hardware. "
                    "See [Aggregation](glue-mapping.md#aggregation-which-hosts-share-a-subcluster).",
    "ce:*": "One section per Computing Element (a queue of a batch system). "
            "See [Batch systems](batch-systems.md).",
    "discovery": "CEs found on this host, not declared: HTCondor-CE's Job Router routes and ARC-CE's "
                 "queues, each published as a `[ce:NAME]` that a declared section of that NAME overrides key by key. "
                 "See [CEs found on this host](admin-guide.md#ces-found-on-this-host).",
    "glue": "The GLUE 1.3 tree: aggregation, schema check, templates. "
            "See [GLUE 1.3 mapping](glue-mapping.md).",
    "ldap": "The LDAP server `glueinfo publish` and `[run] ldap_sync` write. "
            "See [Publishing directly into LDAP](admin-guide.md#publishing-directly-into-ldap).",
    "htcondor-ce": "The `htcondor-ce` output (`[run] outputs = htcondor-ce`): the site's OSG_ResourceCatalog as an "
                   "HTCondor-CE config file. See [HTCondor-CE: OSG_ResourceCatalog](htcondor-ce.md).",
    "sources": "Where a head node's host snapshots come from. "
               "See [Many hosts](admin-guide.md#many-hosts-agents-spool-ganglia).",
    "run": "The periodic provider `glueinfo run`. "
           "See [Running glueinfo run](admin-guide.md#running-glueinfo-run).",
}

FREEFORM_INTROS = {
    "extensions": "Free-form `name = value` pairs, kept as strings in the snapshot's `static.extensions` "
                  "for site-specific properties (published as Node XML extensions of type `Site`). "
                  "Any key is accepted.",
}


def section_title(section: str) -> str:
    """``[ce:NAME]`` for the declared ``ce:*``, ``[glue]`` for ``glue``."""
    if section.endswith(":*"):
        return f"[{section[:-2]}:NAME]"
    return f"[{section}]"


def anchor(title: str) -> str:
    """The anchor GitHub-flavoured Markdown gives a heading with this text."""
    kept = (ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return "".join(kept).replace(" ", "-")


def format_number(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def format_default(option: Option) -> str:
    """The default as it would be written in the config file, or a word for none."""
    value: Any = option.default
    if value is None:
        return "*unset*"
    if option.type == "bool":
        return "`yes`" if value else "`no`"
    if option.type == "list":
        return f"`{', '.join(str(item) for item in value)}`" if value else "*empty*"
    if option.type in ("int", "float"):
        return f"`{format_number(value)}`"
    return f"`{value}`" if value != "" else "*empty*"


def format_type(option: Option) -> str:
    text = TYPE_NAMES.get(option.type, option.type)
    if option.minimum is not None:
        text += f", at least {format_number(option.minimum)}"
    if option.choices:
        text += ", one of " + ", ".join(f"`{choice}`" for choice in option.choices)
    return text


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def render_section(section: str, options: Mapping[str, Option]) -> list[str]:
    lines = [f"## {section_title(section)}", ""]
    intro = SECTION_INTROS.get(section)
    if intro:
        lines += [intro, ""]
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    for key, option in options.items():
        lines.append(f"| `{key}` | {cell(format_type(option))} | {cell(format_default(option))} | {cell(option.doc)} |")
    lines.append("")
    return lines


def render_freeform(section: str) -> list[str]:
    lines = [f"## {section_title(section)}", ""]
    intro = FREEFORM_INTROS.get(section, "Any key is accepted; values are kept as strings.")
    return lines + [intro, ""]


def render(schema: Mapping[str, Mapping[str, Option]] = SCHEMA, freeform: Iterable[str] = FREEFORM) -> str:
    """The whole reference as Markdown text."""
    freeform = sorted(freeform)
    titles = [section_title(s) for s in schema] + [section_title(s) for s in freeform]
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated from glueinfo.core.config.SCHEMA: do not edit by hand.",
        f"     Regenerate with: {COMMAND} -->",
        "",
        f"One INI file: `--config FILE`, else `${ENV_PATH}`, else `{DEFAULT_PATH}`.",
        "Every key is optional: without any file every key has the default below,",
        "and a file named on the command line or in the environment must exist.",
        "The whole file is checked before anything is used: an unknown section or",
        "key, or a value of the wrong type, stops the command with exit code 2 and",
        "one line naming file, line and key",
        "(`glueinfo: /etc/glueinfo/glueinfo.conf:7: [static] si00: expected a whole number, got 'fast'`),",
        "and nothing from that file is applied.  A name one letter off a known one says",
        "which was meant (`[sources] agent: unknown key (did you mean agents?)`), and an",
        "error found later by the code that reads a value (a name in `[sources] enabled`",
        "no source has, a busy `[serve] listen`) names the file and line the same way.",
        "",
        "- `#` starts a comment: at the start of a line, or after white space on a value's line",
        "  (`listen = 127.0.0.1:7170  # loopback only`); a `#` inside a value is kept",
        "  (`web = https://www.example.org/#grid`).",
        "- Lists are separated by commas or spaces.",
        "- Booleans are `yes`/`no`, `true`/`false`, `on`/`off` or `1`/`0`.",
        "- Sections written `[kind:NAME]` (`[cluster:main]`, `[ce:long]`) may appear once per NAME.",
        "- *unset* means unknown: nothing is published for it.",
        "",
        "`etc/glueinfo.conf.example` is the same list as a file to copy and edit.",
        "",
        "Sections: " + ", ".join(f"[`{t}`](#{anchor(t)})" for t in titles) + ".",
        "",
    ]
    for section, options in schema.items():
        lines += render_section(section, options)
    for section in freeform:
        lines += render_freeform(section)
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    sys.stdout.buffer.write(render().encode("utf-8"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
