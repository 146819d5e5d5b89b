"""The GLUE 1.3 pipeline: snapshots -> site model -> aggregate -> LRMS -> render -> check.

One function for every caller that needs the resource tree: ``glueinfo
ldif``, ``glueinfo publish``, and the long-running service (``build_site``
returns entries, ``build_site_ldif`` the LDIF text).

The check is the schema check of glueinfo.glue.schema against the installed
glue-schema files ([glue] schema_dir): every entry is normalised (ASCII for
IA5 attributes, TRUE/FALSE, integers) and then checked; an entry slapd
would still reject is left out with its children and reported by DN in
``errors``, so what is published always loads.  Without schema files the
output is normalised without a schema and published unchecked (one warning
from load_glue_schema).
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import field
from typing import IO, TYPE_CHECKING, Any, Optional, Union, cast

from glueinfo.core.ldif import (
    Entry,
    LDIFError,
    LineCache,
    dn_key,
    format_entry,
    format_ldif,
    parent_dn,
    parse_ldif,
    tree_order,
    value_text,
    write_ldif,
)
from glueinfo.core.model import QueueState
from glueinfo.core.records import dataclass
from glueinfo.glue.render13 import HostBlock, HostEntryCache, Layout, iter_glue13, patch_volatile, volatile_layout
from glueinfo.glue.schema import (
    SYNTAX_BOOLEAN,
    SYNTAX_IA5_STRING,
    SYNTAX_INTEGER,
    Problem,
    Schema,
    load_glue_schema,
    normalise_unchecked,
)
from glueinfo.glue.templates import Template, load_templates
from glueinfo.site.aggregate import SiteGroups
from glueinfo.site.assemble import AssembledSite
from glueinfo.site.model import SiteModel

if TYPE_CHECKING:
    from glueinfo.core.lastrun import LastRun

log = logging.getLogger(__name__)

AUTO = "auto"  # load the schema named by [glue] schema_dir



@dataclass
class SiteBuild:
    """The checked tree and what was found on the way."""

    site: SiteModel
    groups: SiteGroups
    states: dict[str, QueueState]  # CE unique id -> state
    entries: list[Entry]  # normalised, checked, parents first
    errors: list[Problem] = field(default_factory=list)  # entries left out, by DN
    warnings: list[str] = field(default_factory=list)  # values changed, names merged, ...
    checked: bool = True  # False when no schema files were found
    texts: list[str] = field(default_factory=list)  # each entry's LDIF text, when rendered with a RenderCache

    def ldif(self) -> str:
        if self.texts:
            return "".join(self.texts)
        return format_ldif(self.entries, sort=False)

    def ldif_chunks(self, tail: bytes = b"") -> Iterator[bytes]:
        """``ldif_bytes(tail)`` as pieces (one per entry, then ``tail``), for a writer that never
        needs the document whole."""
        if self.texts:
            for text in self.texts:
                yield text.encode()
            yield tail
        else:
            yield self.ldif().encode() + tail

    def ldif_bytes(self, tail: bytes = b"") -> bytes:
        """``ldif()`` as UTF-8 followed by ``tail``, made without the whole text first (one copy of
        the document, not two)."""
        if self.texts:
            # Each text encoded into one growing buffer (glibc grows it in place) that getvalue()
            # hands over uncopied: the document exists once, not as 40,000 pieces and then whole.
            buffer = io.BytesIO()
            write = buffer.write
            for text in self.texts:
                write(text.encode())
            write(tail)
            return buffer.getvalue()
        return self.ldif().encode() + tail


class RenderCache:
    """What the last render of one publisher produced, per DN: the rendered entry, its checked
    form and its LDIF text (glueinfo.core.lastrun: only the last render is kept).

    An entry rendered again with the same DN and attribute values reuses its
    checked form and text: no normalising, schema check or formatting.  So a
    cycle in which one host's load changed checks and formats that host's
    entry (and the CE's), not its file systems, SubCluster or cluster.  Host
    entries themselves are not even built again while their snapshot is the
    same (``hosts``).  One publisher at a time uses a cache.

    ``keep_entries=False``: for a publisher that needs the LDIF only (no
    LDAP server to sync), host entries are kept as their texts alone
    (glueinfo.glue.render13.HostBlock) and the SiteBuild's ``entries`` then
    holds no host or file system entry; ``texts`` and the LDIF are the same.
    """

    def __init__(self, keep_entries: bool = True) -> None:
        from glueinfo.core.lastrun import LastRun  # the daemon's: a one-shot command makes no RenderCache

        self.keep_entries = keep_entries
        self.hosts = HostEntryCache(keep_entries)
        # DN -> (rendered entry, its checked form, its LDIF text, where in that text its
        # HOST_VOLATILE lines are, once asked for: see render13.volatile_layout)
        self._entries: LastRun[str, tuple[Entry, Entry, str, Optional[Layout]]] = LastRun()

    @property
    def reused(self) -> int:
        return self._entries.reused + self.hosts.block_entries[1]

    @property
    def rendered(self) -> int:
        return self._entries.made + self.hosts.block_entries[0]

    def start(self) -> None:
        self._entries.start()
        self.hosts.start()

    def finish(self) -> None:
        """The render is done: only its entries are kept for the next one (the last render's go)."""
        self._entries.finish()
        self.hosts.finish()

    def known(self, entry: Entry) -> Optional[tuple[Entry, str]]:
        hit = self._entries.previous(entry.dn)
        if hit is None or (hit[0] is not entry and hit[0] != entry):
            return None
        self._entries.reuse(entry.dn, hit)
        return hit[1], hit[2]

    def patched(self, entry: Entry) -> Optional[tuple[Entry, str]]:
        """For a host entry the HostEntryCache made from the last render's entry of its DN by
        changing only integer HOST_VOLATILE values: its checked form and LDIF text, the last ones
        with those values put in (the schema check cannot judge an integer in these INTEGER
        attributes differently, and their lines are plain ``name: digits``).  None otherwise."""
        base = self.hosts.derived_from(entry)
        if base is None:
            return None
        hit = self._entries.previous(entry.dn)
        if hit is None or hit[0] is not base:
            return None
        _, checked, text, layout = hit
        if layout is None:
            layout = volatile_layout(checked, text)
            if layout is None:
                return None
        names = layout[1]
        patched = patch_volatile(text, layout, {name: entry.attributes[name][0] if len(entry.attributes[name]) == 1 else None
                                                for name in names})
        if patched is None:
            return None
        if checked is base:  # the check took the last entry as it was: it takes this one as it is too
            fixed = entry
        else:
            attributes = dict(checked.attributes)
            for name in names:
                attributes[name] = entry.attributes[name]
            fixed = Entry.from_lists(checked.dn, attributes, checked._index)
        self._entries.keep(entry.dn, (entry, fixed, patched[0], patched[1]))
        return fixed, patched[0]

    def keep(self, rendered: Entry, checked: Entry, text: str) -> None:
        self._entries.keep(rendered.dn, (rendered, checked, text, None))

    @staticmethod
    def block_texts(block: HostBlock, checker: TreeChecker, texts: list[str]) -> None:
        """A host block taken from the last render (its ``texts`` set): its entries admitted by
        ``checker`` as a checked entry is (parent left out, DN repeated), their texts appended."""
        for dn, text in zip(block.dns, block.texts or (), strict=True):
            if checker.admit_dn(dn):
                texts.append(text)

    def block_checked(self, block: HostBlock, checker: TreeChecker, texts: list[str], lines: LineCache) -> None:
        """A host block made anew: its entries checked and formatted, their texts appended, and
        the block settled for the next render when all passed with nothing changed or warned."""
        errors, notes = len(checker.errors), len(checker.warnings)
        made: list[str] = []
        dns: list[str] = []
        first: Optional[Entry] = None
        for entry in block.entries or ():
            fixed = checker(entry)
            if fixed is None:
                continue
            text = format_entry(fixed, lines)
            texts.append(text)
            made.append(text)
            dns.append(fixed.dn)
            if first is None:
                first = fixed
        self.hosts.block_entries[0] += len(made)
        if first is not None and len(made) == len(block.entries or ()) and len(checker.errors) == errors \
                and len(checker.warnings) == notes:
            self.hosts.settle(block, made, dns, volatile_layout(first, made[0]))


def static_ldif_entries(directory: str, warnings: list[str]) -> list[Entry]:
    """The entries of every *.ldif file in ``directory`` (sorted by name), published as they are."""
    entries: list[Entry] = []
    import glob

    for path in sorted(glob.glob(os.path.join(directory, "*.ldif"))):
        try:
            with open(path, encoding="utf-8") as handle:
                entries.extend(parse_ldif(handle.read()))
        except (OSError, UnicodeDecodeError, LDIFError) as exc:
            warnings.append(f"static LDIF {path}: {exc}; not published")
    return entries


_INTEGER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")
# slapd (mdb) stores an entry's RDN twice in one 511-byte key: measured, 244 bytes pass and 246 fail.
MAX_SLAPD_RDN_BYTES = 240


def parent_key(key: str) -> str:
    return key.partition(",")[2] if "\\" not in key and '"' not in key else parent_dn(key)


# Value kinds of a plan (TreeChecker._plan): what a value must look like to need no normalising.
_IA5, _INT, _BOOL, _CLASSES, _OTHER = range(5)
_KINDS = {SYNTAX_IA5_STRING: _IA5, SYNTAX_INTEGER: _INT, SYNTAX_BOOLEAN: _BOOL}


class TreeChecker:
    """Normalise and check entries one by one, as they stream past.

    Same verdicts as glueinfo.glue.schema's Schema.normalise + Schema.check (which do
    the work for anything unusual), fast enough for 100,000 hosts: an entry
    whose values are already what slapd wants (ints for INTEGER, ASCII for
    IA5, TRUE/FALSE, schema spelling, no duplicate values) is not copied, and
    the structural check (classes, MUST, MAY) is done once per shape (its
    object classes and attribute names), then only what varies per entry
    (single-valued attributes, the RDN value) is looked at.  Entries whose
    parent was left out, and repeated DNs, are left out too.
    """

    def __init__(self, schema: Optional[Schema]) -> None:
        self.schema = schema
        self.errors: list[Problem] = []
        self.warnings: list[str] = []
        self._plans: dict[tuple[str, ...], Any] = {}
        self._classes: dict[tuple[Any, ...], bool] = {}
        self._seen: set[str] = set()
        self._dropped: set[str] = set()

    def _plan(self, names: tuple[str, ...]) -> Any:
        """Per attribute of an entry shape: (kind, single-valued, fold case for duplicates), and the
        set of object class lists that passed the full check with these names; None when some
        name is unknown or not in the schema's spelling (normalise or check must look)."""
        plan = self._plans.get(names)
        if plan is None:
            schema = self.schema
            assert schema is not None  # plans are made only when there is a schema to check against
            items: Optional[list[tuple[int, bool, bool]]] = []
            for name in names:
                assert items is not None
                at = schema.attribute(name)
                if at is None or schema.canonical_name(name) != name:
                    items = None
                    break
                kind = _CLASSES if name == "objectClass" else _KINDS.get(schema.syntax(name) or "", _OTHER)
                items.append((kind, at.single_value, (schema.equality(name) or "").lower().startswith("caseignore")))
            plan = self._plans[names] = (tuple(items), set()) if items is not None else False
        return plan or None

    def _is_normal(self, entry: Entry, plan: tuple[tuple[int, bool, bool], ...]) -> Optional[bool]:
        """True when Schema.normalise would return the entry unchanged and no
        single-valued attribute has several values; False when it needs
        normalising; None when it is normal but needs the full check."""
        if not entry.dn.isascii():
            return False
        verdict: Optional[bool] = True
        integer_text = _INTEGER_TEXT.fullmatch
        for (kind, single, fold), values in zip(plan, entry.attributes.values()):  # noqa: B905 - same length by construction
            if kind == _CLASSES:
                key = tuple(values)
                ok = self._classes.get(key)
                if ok is None:
                    schema = self.schema
                    ok = self._classes[key] = schema is not None and all(
                        isinstance(v, str) and schema.canonical_class(v) == v for v in values)
                if not ok:
                    return False
                continue
            for value in values:
                kind_of = type(value)
                if kind == _IA5:
                    if isinstance(value, str):
                        if not value or not value.isascii():
                            return False
                    elif kind_of is not int:
                        return False
                elif kind == _INT:
                    if kind_of is not int and not (isinstance(value, str) and integer_text(value)):
                        return False
                elif kind == _BOOL:
                    if kind_of is not bool and value not in ("TRUE", "FALSE"):
                        return False
                elif not ((kind_of is str and value) or kind_of is int):
                    return False
            if len(values) > 1:
                if single:
                    verdict = None
                keys = [" ".join(value_text(v).casefold().split()) if fold else value_text(v) for v in values]
                if len(set(keys)) != len(keys):
                    return False
        return verdict

    def _rdn_present(self, entry: Entry) -> Optional[bool]:
        """Is the first RDN's value among the entry's values?  None: not a plain RDN, ask check()."""
        rdn, _, _ = entry.dn.partition(",")
        if "\\" in rdn or "+" in rdn or '"' in rdn:
            return None
        attr, sep, value = rdn.partition("=")
        value = value.strip()
        if not sep or not value:
            return None
        values = entry.attributes.get(attr.strip())
        if values is None:
            values = entry.get(attr.strip())
        if len(values) == 1 and values[0] == value:
            return True
        wanted = " ".join(value.casefold().split())
        return any(" ".join(value_text(v).casefold().split()) == wanted for v in values)

    def _full_check(self, entry: Entry) -> list[Problem]:
        problems = self.schema.check(entry) if self.schema is not None else []
        if not problems:
            plan = self._plan(tuple(entry.attributes))
            if plan is not None:
                plan[1].add(tuple(entry.attributes.get("objectClass", ())))
        return problems

    def admit(self, entry: Entry) -> bool:
        """An entry checked before (RenderCache): is it published here too?  Not when its
        parent was left out or its DN came already, each reported in ``errors`` as
        ``__call__`` reports them."""
        return self.admit_dn(entry.dn)

    def admit_dn(self, dn: str) -> bool:
        """:meth:`admit` for the entry of this (checked) DN."""
        key = dn_key(dn)
        if self._dropped and parent_key(key) in self._dropped:
            self._dropped.add(key)
            self.errors.append(Problem(dn, "left out because its parent entry was left out"))
            return False
        if key in self._seen:
            self.errors.append(Problem(dn, "the same DN appears twice; only the first is published"))
            return False
        self._seen.add(key)
        return True

    def __call__(self, entry: Entry) -> Optional[Entry]:
        """The entry as it will be published, or None when it is left out (see errors)."""
        schema = self.schema
        quick = False
        if schema is None:
            entry, notes = normalise_unchecked(entry)
            self.warnings.extend(str(note) for note in notes)
        else:
            plan = self._plan(tuple(entry.attributes))
            verdict = self._is_normal(entry, plan[0]) if plan is not None else False
            if verdict is False:
                entry, notes = schema.normalise(entry)
                self.warnings.extend(str(note) for note in notes)
            else:
                quick = verdict is True and tuple(entry.attributes.get("objectClass", ())) in plan[1]
        key = dn_key(entry.dn)
        if self._dropped and parent_key(key) in self._dropped:
            self._dropped.add(key)
            self.errors.append(Problem(entry.dn, "left out because its parent entry was left out"))
            return None
        if key in self._seen:
            self.errors.append(Problem(entry.dn, "the same DN appears twice; only the first is published"))
            return None
        rdn = entry.dn.partition(",")[0]
        if len(rdn) > MAX_SLAPD_RDN_BYTES // 4 and len(rdn.encode()) > MAX_SLAPD_RDN_BYTES:
            problems = [Problem(entry.dn, f"the first DN component is over {MAX_SLAPD_RDN_BYTES} bytes: "
                                          "slapd's mdb backend refuses it (Other error, 80)")]
        elif quick and self._rdn_present(entry):
            problems = []
        elif schema is not None:
            problems = self._full_check(entry)
        else:
            problems = []
        if problems:
            self.errors.extend(problems)
            self._dropped.add(key)
            return None
        self._seen.add(key)
        return entry


def check_and_order(entries: Iterable[Entry], schema: Optional[Schema]) -> tuple[list[Entry], list[Problem], list[str]]:
    """Order entries parents first (ldif.tree_order), normalise and check them:
    (entries kept, entries left out by DN, warnings)."""
    checker = TreeChecker(schema)
    kept = [fixed for fixed in map(checker, tree_order(entries)) if fixed is not None]
    return kept, checker.errors, checker.warnings


@dataclass
class _Prepared:
    """What rendering the tree needs, gathered before the first entry."""

    site: SiteModel
    groups: SiteGroups
    states: dict[str, QueueState]
    templates: Mapping[str, Template]
    schema: Optional[Schema]
    publish_hosts: Optional[bool]


def _prepare(assembled: AssembledSite, publish_hosts: Optional[bool], schema: Union[Schema, None, str],
             templates: Optional[Mapping[str, Template]]) -> _Prepared:
    site = assembled.model
    if isinstance(schema, str):
        schema = load_glue_schema(site.glue.schema_dir, bool(site.glue.static_ldif_dir))
    templates = templates or load_templates(site.glue.templates_dir)
    return _Prepared(site, assembled.groups, dict(assembled.states), templates, schema, publish_hosts)


def _checked_entries(prepared: _Prepared, checker: TreeChecker, cache: Optional[RenderCache] = None,
                     texts: Optional[list[str]] = None) -> Iterator[Entry]:
    """The rendered tree (already parents first), then the static LDIF files' entries, checked.
    With a ``cache``, entries rendered as last time are taken from it, and every entry's LDIF
    text is appended to ``texts``."""
    site = prepared.site
    warnings = checker.warnings
    warnings.extend(prepared.groups.warnings)
    if cache is not None:
        cache.start()
    rendered = iter_glue13(site, prepared.groups, prepared.states, prepared.templates,
                           publish_hosts=prepared.publish_hosts, warnings=warnings,
                           host_cache=cache.hosts if cache is not None else None)
    static = tree_order(static_ldif_entries(site.glue.static_ldif_dir, warnings)) if site.glue.static_ldif_dir else []
    if cache is None or texts is None:
        for entry in itertools.chain(rendered, static):
            fixed = checker(cast(Entry, entry))  # no host cache: entries only
            if fixed is not None:
                yield fixed
        return
    lines: LineCache = {}
    for item in itertools.chain(rendered, static):
        if type(item) is HostBlock:  # a text-keeping cache's host: its texts, no entries
            if item.texts is not None:
                cache.block_texts(item, checker, texts)
            else:
                cache.block_checked(item, checker, texts, lines)
            continue
        entry = cast(Entry, item)
        patched = cache.patched(entry)
        if patched is not None:
            if checker.admit(patched[0]):
                texts.append(patched[1])
                yield patched[0]
            continue
        known = cache.known(entry)
        if known is not None:
            if checker.admit(known[0]):
                texts.append(known[1])
                yield known[0]
            continue
        fixed = checker(entry)
        if fixed is not None:
            text = format_entry(fixed, lines)
            cache.keep(entry, fixed, text)
            texts.append(text)
            yield fixed
    cache.finish()  # reached only when the whole tree was taken: a partial render keeps the last one's too


def render_site(assembled: AssembledSite, *, publish_hosts: Optional[bool] = None, schema: Union[Schema, None, str] = AUTO,
                templates: Optional[Mapping[str, Template]] = None, cache: Optional[RenderCache] = None) -> SiteBuild:
    """The checked GLUE 1.3 tree of an assembled site (glueinfo.site.assemble).

    ``schema``: a loaded Schema, None for no check, or "auto" to load [glue]
    schema_dir (warning once when absent).  Raises TemplateError (bad
    templates); everything about the data is reported in the result instead.
    ``cache``: the publisher's RenderCache, so what did not change is neither
    checked nor formatted again (the LDIF is the same bytes either way).
    """
    prepared = _prepare(assembled, publish_hosts, schema, templates)
    checker = TreeChecker(prepared.schema)
    texts: list[str] = []
    entries = list(_checked_entries(prepared, checker, cache, texts if cache is not None else None))
    return SiteBuild(site=prepared.site, groups=prepared.groups, states=prepared.states, entries=entries,
                     errors=checker.errors, warnings=checker.warnings, checked=prepared.schema is not None, texts=texts)


def write_site(assembled: AssembledSite, stream: IO[str], *, publish_hosts: Optional[bool] = None,
               schema: Union[Schema, None, str] = AUTO, templates: Optional[Mapping[str, Template]] = None) -> SiteBuild:
    """render_site, written to ``stream`` as it is produced (memory stays flat for 100,000
    hosts); the returned SiteBuild has no entries.  Same bytes as ``render_site(...).ldif()``."""
    prepared = _prepare(assembled, publish_hosts, schema, templates)
    checker = TreeChecker(prepared.schema)
    write_ldif(_checked_entries(prepared, checker), stream, sort=False)
    return SiteBuild(site=prepared.site, groups=prepared.groups, states=prepared.states, entries=[],
                     errors=checker.errors, warnings=checker.warnings, checked=prepared.schema is not None)
