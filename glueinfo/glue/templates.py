"""Static GLUE objects from templates (the glite-info-static idea).

A template is an LDIF entry with variables, one file per object
(``templates/site.ldif``, ``cluster.ldif``, ``subcluster.ldif``,
``ce.ldif`` in the source tree), headed by declarations::

    # @mandatory CE_UNIQUE_ID CE_HOST PARENT_DN
    # @optional  LRMS_VERSION ACCESS_RULE
    # @multi     ACCESS_RULE
    dn: GlueCEUniqueID=${CE_UNIQUE_ID},${PARENT_DN}
    objectClass: GlueCE
    [if ACCESS_RULE] objectClass: GlueCEAccessControlBase
    GlueCEAccessControlBaseRule: ${ACCESS_RULE}
    GlueCEInfoLRMSVersion: ${LRMS_VERSION}

Rules:

- ``$NAME`` or ``${NAME}``; every variable used must be declared
  ``@mandatory`` or ``@optional``, and ``@multi`` ones (which may hold
  several values) must be one of those.
- A mandatory variable without a value, or a single-valued variable given
  several values, is a :class:`TemplateError` naming the variable.
- A line using an optional variable that has no value (None, "" or an
  empty list) is left out: unknown is never published.  A line using a
  ``@multi`` variable becomes one attribute value per item (one ``@multi``
  variable per line).  ``[if NAME]`` in front of a line keeps it only when
  NAME has a value.
- A value that is a whole attribute value keeps its type (an int stays an
  INTEGER); in the DN, variables ending in ``_DN`` are inserted as they are
  and all others are escaped (RFC 4514).

The result is a glueinfo.core.ldif.Entry; the one LDIF writer formats it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, Union

from glueinfo.core import parsed_cache
from glueinfo.core.errors import ConfigurationError
from glueinfo.core.ldif import Entry, dn_escape
from glueinfo.core.records import dataclass

TEMPLATE_NAMES = ("site", "cluster", "subcluster", "ce", "voview")
# Templates added after sites first copied theirs: a templates_dir without one uses the built-in.
LATER_TEMPLATES = frozenset({"voview"})

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
# The parser's own, compiled at its first use (re keeps them): templates read from the
# parsed-template cache (load_templates) never need them.
_GUARD = r"\[if\s+([A-Za-z_][A-Za-z0-9_]*)\]\s*"
_DECL = r"#\s*@(mandatory|optional|multi)\b(.*)"
_ATTR = r"([A-Za-z][A-Za-z0-9-]*)\s*:\s?(.*)"


class TemplateError(ConfigurationError, ValueError):
    """A bad template or bad variables; the message names the template and variable."""


@dataclass(frozen=True)
class _Line:
    """One attribute line of a template, with the variables it uses."""

    number: int
    attr: str
    text: str
    guard: Optional[str]
    variables: tuple[str, ...]
    whole: Optional[str]  # the variable when the value is exactly one variable


@dataclass(frozen=True)
class Template:
    """One parsed LDIF template (site, cluster, subcluster or ce)."""

    name: str
    path: str
    mandatory: frozenset[str]
    optional: frozenset[str]
    multi: frozenset[str]
    dn: str
    lines: tuple[_Line, ...]

    @property
    def variables(self) -> frozenset[str]:
        return self.mandatory | self.optional

    def render(self, values: Mapping[str, Any]) -> Entry:
        """Fill the template; raises TemplateError naming the variable at fault."""
        where = f"template {self.name} ({self.path})"
        for var in sorted(self.mandatory):
            if _missing(values.get(var)):
                raise TemplateError(f"{where}: mandatory variable {var} has no value")
        for var in sorted(self.variables - self.multi):
            value = values.get(var)
            if isinstance(value, (list, tuple, set, frozenset)) and len(value) > 1:
                raise TemplateError(f"{where}: variable {var} is single-valued but was given {len(value)} values")

        def single(var: str) -> Any:
            value = values.get(var)
            if isinstance(value, (list, tuple)):
                return value[0]
            return value

        def substitute(text: str, lookup: Callable[[str], Any], escape_dn: bool = False) -> str:
            def repl(match: re.Match[str]) -> str:
                var = match.group(1) or match.group(2)
                value = lookup(var)
                text_value = _text(value)
                if escape_dn and not var.endswith("_DN"):
                    return dn_escape(text_value)
                return text_value
            return _VAR.sub(repl, text)

        entry = Entry(substitute(self.dn, single, escape_dn=True))
        for line in self.lines:
            if line.guard is not None and _missing(values.get(line.guard)):
                continue
            if any(_missing(values.get(var)) for var in line.variables):
                continue
            multi = [v for v in line.variables if v in self.multi]
            if multi:
                items = values[multi[0]]
                items = list(items) if isinstance(items, (list, tuple, set, frozenset)) else [items]
                for item in items:
                    if _missing(item):
                        continue
                    if line.whole == multi[0]:
                        entry.add(line.attr, _typed(item))
                    else:
                        def lookup(var: str, item: Any = item, name: str = multi[0]) -> Any:
                            return item if var == name else single(var)
                        entry.add(line.attr, substitute(line.text, lookup))
            elif line.whole is not None:
                entry.add(line.attr, _typed(single(line.whole)))
            else:
                entry.add(line.attr, substitute(line.text, single))
        return entry


def _missing(value: Any) -> bool:
    if value is None or value == "":
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_missing(v) for v in value)
    return False


def _typed(value: Any) -> Union[str, int, bool]:
    if isinstance(value, (bool, int)):
        return value
    return str(value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return str(value)


def parse_template(text: str, name: str, path: str = "<template>") -> Template:
    """Read one template; raises TemplateError (naming template and line) for a bad one."""
    where = f"template {name} ({path})"
    declared: dict[str, set[str]] = {"mandatory": set(), "optional": set(), "multi": set()}
    dn: Optional[str] = None
    lines: list[_Line] = []
    logical: list[tuple[int, str]] = []
    blank_after_content = False
    for number, raw in enumerate(text.splitlines(), 1):
        decl = re.match(_DECL, raw)
        if decl:
            declared[decl.group(1)].update(decl.group(2).split())
            continue
        if raw.startswith("#"):
            continue
        if raw.startswith(" ") and logical and not blank_after_content:  # LDIF continuation line
            logical[-1] = (logical[-1][0], logical[-1][1] + raw[1:])
            continue
        if not raw.strip():
            blank_after_content = bool(logical)
            continue
        if blank_after_content:
            raise TemplateError(f"{where}: line {number}: a template holds one entry; remove the blank line before it")
        logical.append((number, raw))
    for number, raw in logical:
        guard = None
        match = re.match(_GUARD, raw)
        if match:
            guard = match.group(1)
            raw = raw[match.end():]
        attr_match = re.fullmatch(_ATTR, raw)
        if not attr_match:
            raise TemplateError(f"{where}: line {number}: expected 'attribute: value', got {raw[:60]!r}")
        attr, value = attr_match.groups()
        variables = tuple(dict.fromkeys(m.group(1) or m.group(2) for m in _VAR.finditer(value)))
        whole_match = _VAR.fullmatch(value.strip())
        whole = (whole_match.group(1) or whole_match.group(2)) if whole_match else None
        if attr.lower() == "dn":
            if dn is not None:
                raise TemplateError(f"{where}: line {number}: a second dn line")
            if guard:
                raise TemplateError(f"{where}: line {number}: the dn line cannot be conditional")
            dn = value
            for var in variables:
                if var in declared["multi"]:
                    raise TemplateError(f"{where}: line {number}: multi-valued variable {var} cannot be used in the DN")
            lines_vars = variables
        else:
            if dn is None:
                raise TemplateError(f"{where}: line {number}: the first line must be 'dn: ...'")
            if len([v for v in variables if v in declared["multi"]]) > 1:
                raise TemplateError(f"{where}: line {number}: at most one multi-valued variable per line")
            lines.append(_Line(number, attr, value, guard, variables, whole))
            lines_vars = variables + ((guard,) if guard else ())
        for var in lines_vars:
            if var not in declared["mandatory"] and var not in declared["optional"]:
                raise TemplateError(f"{where}: line {number}: variable {var} is not declared (@mandatory or @optional)")
    if dn is None:
        raise TemplateError(f"{where}: no 'dn:' line")
    both = declared["mandatory"] & declared["optional"]
    if both:
        raise TemplateError(f"{where}: variable {sorted(both)[0]} is declared both @mandatory and @optional")
    stray = declared["multi"] - declared["mandatory"] - declared["optional"]
    if stray:
        raise TemplateError(f"{where}: @multi variable {sorted(stray)[0]} is not declared @mandatory or @optional")
    return Template(name=name, path=path, mandatory=frozenset(declared["mandatory"]),
                    optional=frozenset(declared["optional"]), multi=frozenset(declared["multi"]), dn=dn, lines=tuple(lines))


def builtin_templates_dir() -> str:
    """The templates shipped with glueinfo.  Their one copy is the source tree's
    ``templates/``; building the package copies it into the package data
    ``glueinfo/glue/ldif_templates`` (setup.py), which an installed glueinfo reads.
    A source checkout (an editable install, the tests) has no package data and
    reads ``templates/`` itself.  Neither there: the path of the package data,
    which :func:`load_templates` then names in its error."""
    here = os.path.dirname(os.path.realpath(__file__))
    installed = os.path.join(here, "ldif_templates")
    source = os.path.join(os.path.dirname(os.path.dirname(here)), "templates")
    if not os.path.isdir(installed) and os.path.isfile(os.path.join(source, "site.ldif")):
        return source
    return installed


def load_templates(directory: str = "", names: Sequence[str] = TEMPLATE_NAMES,
                   cache_dir: Optional[str] = None) -> dict[str, Template]:
    """Read ``NAME.ldif`` for each name from ``directory`` (default: the built-in
    templates); raises TemplateError for a missing or bad template.  Parsed templates are
    kept in a cache file named after the files' paths, sizes and times and this reader
    (glueinfo.core.parsed_cache, in ``cache_dir``): a fresh command parses them once; a
    cache that cannot be read or written only means parsing again."""
    directory = directory or builtin_templates_dir()
    paths = {}
    for name in names:
        path = os.path.join(directory, f"{name}.ldif")
        if name in LATER_TEMPLATES and not os.path.exists(path):
            path = os.path.join(builtin_templates_dir(), f"{name}.ldif")
        paths[name] = path
    cache = parsed_cache.cache_file("templates", [os.path.abspath(__file__), *paths.values()], cache_dir=cache_dir)
    if cache is not None:
        try:
            return _from_plain(parsed_cache.read(cache), paths)
        except (OSError, EOFError, TypeError, ValueError):  # absent, damaged, another form: parsed again
            pass
    templates = {}
    for name, path in paths.items():
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise TemplateError(f"template {name}: cannot read {path}: {exc.strerror or exc}") from None
        templates[name] = parse_template(text, name, path)
    if cache is not None:
        parsed_cache.write(cache, _to_plain(templates))
    return templates


_PLAIN_FORMAT = "glueinfo-templates-1"


def _to_plain(templates: Mapping[str, Template]) -> tuple[Any, ...]:
    """The templates as the cache keeps them (tuples and strings: glueinfo.core.parsed_cache)."""
    return (_PLAIN_FORMAT, tuple((t.name, t.path, tuple(sorted(t.mandatory)), tuple(sorted(t.optional)),
                                  tuple(sorted(t.multi)), t.dn,
                                  tuple((ln.number, ln.attr, ln.text, ln.guard, ln.variables, ln.whole) for ln in t.lines))
                                 for t in templates.values()))


def _from_plain(plain: Any, paths: Mapping[str, str]) -> dict[str, Template]:
    """The templates :func:`_to_plain` gave, for these names and paths; ValueError otherwise."""
    if not isinstance(plain, tuple) or len(plain) != 2 or plain[0] != _PLAIN_FORMAT:
        raise ValueError("not parsed templates of this form")
    templates = {}
    for name, path, mandatory, optional, multi, dn, lines in plain[1]:
        templates[name] = Template(name=name, path=path, mandatory=frozenset(mandatory), optional=frozenset(optional),
                                   multi=frozenset(multi), dn=dn, lines=tuple(_Line(*line) for line in lines))
    if {name: t.path for name, t in templates.items()} != dict(paths):
        raise ValueError("parsed templates of other files")
    return templates
