"""Publish stage: make an LDAP server's tree under a base equal to ours, with ldap3.

``sync_tree(entries, LdapTarget(...))`` reads what the server has under the
base, then adds what is missing (parents first), modifies only the
attributes that differ (one modify per entry) and deletes what is no longer
published (children first).  A second run with nothing changed sends no
write at all.

Reading 40,000 entries in full through ldap3 takes far longer than the
run's budget, so the comparison is done in steps:

1. the server's DNs are listed (a deletion by someone else must be seen);
2. a state file remembers, for each entry glueinfo wrote or confirmed, the
   ``entryCSN`` it had then (slapd changes it on every write, whoever makes
   it), a digest of the entry glueinfo published, and the newest entryCSN
   seen; one search ``(entryCSN>=newest)`` finds what was written since;
3. an entry whose entryCSN and digest both still match needs no further
   look; every other entry that exists on both sides is read in full and
   compared attribute by attribute.

The state file is only a cache: missing, unreadable or for another server,
it is ignored (everything is read in full) and rewritten atomically at the
end.  A server that does not keep entryCSN is always read in full.

Every write the server refuses is reported with the DN, the server's result
code and message (``PublishReport.rejected``); the other writes still go
ahead (the children of a refused add are not sent and are reported as
such).  An unreachable server or a failed bind is a ``PublishError`` with a
one-line message, before anything is sent.
"""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from glueinfo.core.errors import GlueinfoError
from glueinfo.core.ldif import Entry, normalise_dn, parent_dn, parse_dn, value_text

if TYPE_CHECKING:  # ldap3 is imported when a publish talks to a server, not when this module loads
    from ldap3 import Connection

log = logging.getLogger("glueinfo.publish")

STATE_VERSION = 2
# Above this many entries to compare in full, one subtree search beats one base search each.
FULL_READ_THRESHOLD = 200


class PublishError(GlueinfoError):
    """The server cannot be used at all (unreachable, bind refused, base missing); one line."""


@dataclass(frozen=True)
class LdapTarget:
    url: str
    bind_dn: str
    password: str
    base_dn: str
    timeout_s: float = 10.0
    state_file: Optional[str] = None  # None: no state file, every common entry is compared in full


@dataclass(frozen=True)
class Rejection:
    dn: str
    operation: str  # add, modify, delete
    code: int
    result: str  # the result's name, e.g. objectClassViolation
    message: str  # the server's diagnostic message

    def __str__(self) -> str:
        message = f": {self.message}" if self.message else ""
        return f"{self.dn}: {self.operation} refused: {self.result} ({self.code}){message}"


@dataclass
class PublishReport:
    added: int = 0
    modified: int = 0
    deleted: int = 0
    unchanged: int = 0
    compared_in_full: int = 0  # entries read attribute by attribute (the rest matched by entryCSN + digest)
    writes: int = 0  # add/modify/delete operations sent
    rejected: list[Rejection] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.rejected

    def summary(self) -> str:
        return (f"{self.added} added, {self.modified} modified, {self.deleted} deleted, {self.unchanged} unchanged "
                f"({self.writes} writes); {len(self.rejected)} refused")

    def as_dict(self) -> dict[str, Any]:
        return {"added": self.added, "modified": self.modified, "deleted": self.deleted, "unchanged": self.unchanged,
                "compared_in_full": self.compared_in_full, "writes": self.writes, "rejected": len(self.rejected),
                "seconds": round(self.seconds, 3)}


# -- helpers ------------------------------------------------------------------------------

def dn_key(dn: str) -> str:
    return normalise_dn(dn)


def entry_digest(entry: Entry) -> str:
    """What we published, as a short digest of its DN and attributes (in glueinfo's stable order).
    marshal is three times faster than repr here; a value it cannot take falls back to repr."""
    try:
        data = marshal.dumps((entry.dn, entry.attributes), 2)  # version 2: no back-references, so no refcount dependence
    except ValueError:
        data = f"{entry.dn}\n{entry.attributes!r}".encode()
    return hashlib.blake2b(data, digest_size=10).hexdigest()


def _values(values: Iterable[Any]) -> list[str]:
    return [value_text(v) for v in values]


def _attribute_map(entry: Entry) -> dict[str, tuple[str, list[str]]]:
    """lower-case name -> (spelling, values as LDAP strings)."""
    return {name.lower(): (name, _values(values)) for name, values in entry.attributes.items()}


def _server_map(raw: dict[str, list[bytes]]) -> dict[str, tuple[str, list[str]]]:
    out: dict[str, tuple[str, list[str]]] = {}
    for name, values in raw.items():
        texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values]
        key = name.lower()
        if key in out:
            out[key][1].extend(texts)
        else:
            out[key] = (name, texts)
    return out


def _structural(classes: Sequence[str]) -> str:
    """Our entries list the abstract top class first and the structural class second."""
    names = [c.lower() for c in classes]
    return names[1] if len(names) > 1 else (names[0] if names else "")


Changes = dict[str, list[tuple[str, list[str]]]]  # ldap3 modify changes: attribute -> [(MODIFY_REPLACE, values)]


def changes_for(new: Entry, server_attributes: dict[str, list[bytes]]) -> Optional[Changes]:
    """ldap3 modify changes turning the server's entry into ``new`` (only the
    attributes that differ); {} when equal; None when only delete + add can do
    it (the structural object class changed)."""
    import ldap3

    ours = _attribute_map(new)
    theirs = _server_map(server_attributes)
    ours_classes = ours.get("objectclass", ("objectClass", []))[1]
    theirs_classes = theirs.get("objectclass", ("objectClass", []))[1]
    if {c.lower() for c in ours_classes} != {c.lower() for c in theirs_classes}:
        if _structural(ours_classes) != _structural(theirs_classes) and theirs_classes:
            return None
    rdn_attrs = {attr.lower(): value for attr, value in (parse_dn(new.dn)[0] if new.dn else [])}
    changes: Changes = {}
    for key, (name, values) in ours.items():
        server = theirs.get(key)
        if server is not None and sorted(server[1]) == sorted(values):
            continue
        if server is not None and key in rdn_attrs and sorted(v.casefold() for v in server[1]) == sorted(v.casefold() for v in values):
            continue  # the naming value differs only in case: slapd would refuse to change it, and matches it anyway
        changes[name] = [(ldap3.MODIFY_REPLACE, values)]
    for key, (name, _server_values) in theirs.items():
        if key not in ours:
            changes[name] = [(ldap3.MODIFY_REPLACE, [])]
    return changes


# -- the state file ----------------------------------------------------------------------

def default_state_file(url: str, base_dn: str) -> str:
    """$XDG_CACHE_HOME/glueinfo (or ~/.cache/glueinfo) / publish-<hash of url and base>.json"""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = hashlib.sha1(f"{url}\n{dn_key(base_dn)}".encode()).hexdigest()[:12]
    return os.path.join(cache, "glueinfo", f"publish-{digest}.json")


@dataclass
class PublishState:
    """What the state file remembers: dn key -> [entryCSN, digest], and the newest entryCSN seen."""

    entries: dict[str, list[str]] = field(default_factory=dict)
    max_csn: Optional[str] = None


def load_state(path: Optional[str], url: str, base_dn: str) -> PublishState:
    """The state file's content; empty when absent, unreadable or for another server/base."""
    if not path:
        return PublishState()
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("version") != STATE_VERSION or data.get("url") != url or data.get("base") != dn_key(base_dn):
            return PublishState()
        entries, max_csn = data.get("entries"), data.get("max_csn")
        if not isinstance(entries, dict) or not (max_csn is None or isinstance(max_csn, str)):
            return PublishState()
        return PublishState(entries=entries, max_csn=max_csn)
    except FileNotFoundError:
        return PublishState()
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("publish state file %s unreadable (%s): comparing every entry in full", path, exc)
        return PublishState()


def save_state(path: Optional[str], url: str, base_dn: str, state: PublishState) -> None:
    """Write the state file atomically (temporary file + rename); a failure is a warning, not an error."""
    if not path:
        return
    try:
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".publish-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"version": STATE_VERSION, "url": url, "base": dn_key(base_dn), "max_csn": state.max_csn,
                           "entries": state.entries}, handle, separators=(",", ":"))
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as exc:
        log.warning("cannot write publish state file %s: %s (the next run compares every entry in full)", path, exc)


# -- talking to the server ---------------------------------------------------------------

def connect(target: LdapTarget) -> Connection:
    """A bound ldap3 connection, or PublishError with one line."""
    import ldap3
    from ldap3.core.exceptions import LDAPException

    try:
        server = ldap3.Server(target.url, get_info=ldap3.NONE, connect_timeout=target.timeout_s)
        conn = ldap3.Connection(server, target.bind_dn or None, target.password or None, auto_bind=ldap3.AUTO_BIND_NONE,
                                check_names=False, auto_escape=False, raise_exceptions=False,
                                receive_timeout=max(1, math.ceil(target.timeout_s)),  # ldap3 packs it as an int
                                return_empty_attributes=False)
        conn.open()
        if not conn.bind():
            result = conn.result or {}
            raise PublishError(f"{target.url}: bind as {target.bind_dn or 'anonymous'} refused: "
                               f"{result.get('description', 'error')} ({result.get('result')}) {result.get('message', '')}".strip())
    except (LDAPException, OSError) as exc:
        raise PublishError(f"{target.url}: cannot reach the LDAP server: {' '.join(str(exc).split()) or type(exc).__name__}") from None
    except ValueError as exc:  # a malformed URL
        raise PublishError(f"{target.url}: {exc}") from None
    return conn


def _result(conn: Connection) -> tuple[int, str, str]:
    result = conn.result or {}
    return int(result.get("result", 80)), str(result.get("description", "other")), " ".join(str(result.get("message", "")).split())


_CREATE_BASE = {
    "o": (["organization"], "o"),
    "mds-vo-name": (["Mds"], "Mds-Vo-name"),
    "glue2groupid": (["GLUE2Group"], "GLUE2GroupID"),
}


def ensure_base(conn: Connection, base_dn: str) -> None:
    """Create the base DN (and missing parents) when it is absent: o=..., mds-vo-name=..., GLUE2GroupID=..."""
    missing = []
    dn = base_dn
    while dn:
        conn.search(dn, "(objectClass=*)", search_scope="BASE", attributes=["1.1"])
        code = _result(conn)[0]
        if code == 0:
            break
        if code != 32:  # anything but noSuchObject: the server cannot tell us
            raise PublishError(f"cannot read the base {base_dn}: {_result(conn)[1]} ({code}) {_result(conn)[2]}".strip())
        missing.append(dn)
        dn = parent_dn(dn)
    for dn in reversed(missing):
        attr, value = parse_dn(dn)[0][0]
        known = _CREATE_BASE.get(attr.lower())
        if known is None:
            raise PublishError(f"the base {base_dn} does not exist and glueinfo cannot create {dn}")
        classes, name = known
        conn.add(dn, attributes={"objectClass": classes, name: [value]})  # type: ignore[no-untyped-call]  # types-ldap3 leaves add/modify/delete unannotated
        code, description, message = _result(conn)
        if code not in (0, 68):  # 68: someone else created it meanwhile
            raise PublishError(f"cannot create the base entry {dn}: {description} ({code}) {message}".strip())


def _search(conn: Connection, base: str, attributes: list[str], scope: str = "SUBTREE",
            filter: str = "(objectClass=*)") -> Iterable[dict[str, Any]]:
    if scope == "BASE":
        conn.search(base, filter, search_scope="BASE", attributes=attributes)
        if _result(conn)[0] == 0:
            yield from (r for r in conn.response or () if r.get("type") == "searchResEntry")
        return
    yield from (r for r in conn.extend.standard.paged_search(base, filter, search_scope=scope,
                                                             attributes=attributes, paged_size=1000, generator=True)
                if r.get("type") == "searchResEntry")


def _csn(item: dict[str, Any]) -> Optional[str]:
    csn = item.get("raw_attributes", {}).get("entryCSN")
    return csn[0].decode("ascii", "replace") if csn else None


def _changed_since(conn: Connection, base: str, csn: str) -> dict[str, str]:
    """dn key -> entryCSN of the entries written at or after ``csn`` (slapd orders CSNs: csnOrderingMatch)."""
    return {dn_key(item["dn"]): _csn(item) or "" for item in _search(conn, base, ["entryCSN"], filter=f"(entryCSN>={csn})")}


# -- the sync ------------------------------------------------------------------------------

def sync_tree(entries: Sequence[Entry], target: LdapTarget, clock: Callable[[], float] = time.monotonic) -> PublishReport:
    """Make the server's tree under target.base_dn equal to ``entries`` (see the module docstring).

    ``entries`` must be parents first (as pipeline.build_site gives them);
    entries not below the base are not sent and are reported as refused.
    Raises PublishError when the server cannot be used at all; refused
    writes are in the report.
    """
    start = clock()
    report = PublishReport()
    base_key = dn_key(target.base_dn)
    ours: dict[str, Entry] = {}
    order: list[str] = []
    for entry in entries:
        key = dn_key(entry.dn)
        if key == base_key or not key.endswith("," + base_key):  # e.g. a static GLUE 2 file under o=glue
            report.rejected.append(Rejection(entry.dn, "add", 0, "notSent", f"not below the base {target.base_dn}"))
            continue
        if key not in ours:
            ours[key] = entry
            order.append(key)
    digests = {key: entry_digest(entry) for key, entry in ours.items()}

    conn = connect(target)
    try:
        ensure_base(conn, target.base_dn)
        state = load_state(target.state_file, target.url, target.base_dn)

        # 1. What is there: DNs and entryCSNs.  With a state file only the DNs are
        #    listed, and the entryCSNs of what was written since the newest one we
        #    saw: every other entry still has the entryCSN we recorded.
        server_dn: dict[str, str] = {}
        server_csn: dict[str, Optional[str]] = {}
        if state.entries and state.max_csn:
            for item in _search(conn, target.base_dn, ["1.1"]):
                key = dn_key(item["dn"])
                if key != base_key:
                    server_dn[key] = item["dn"]
            changed = _changed_since(conn, target.base_dn, state.max_csn)
            for key in server_dn:
                known = state.entries.get(key)
                server_csn[key] = changed[key] if key in changed else (known[0] if known else None)
        else:
            for item in _search(conn, target.base_dn, ["entryCSN"]):
                key = dn_key(item["dn"])
                if key != base_key:
                    server_dn[key] = item["dn"]
                    server_csn[key] = _csn(item)

        # 2. Which common entries need a full comparison.
        to_compare = []
        for key in order:
            if key not in server_dn:
                continue
            known = state.entries.get(key)
            csn = server_csn.get(key)
            if known and csn and known[0] == csn and known[1] == digests[key]:
                report.unchanged += 1
            else:
                to_compare.append(key)
        report.compared_in_full = len(to_compare)
        server_attrs: dict[str, dict[str, list[bytes]]] = {}
        if len(to_compare) > FULL_READ_THRESHOLD:
            wanted = set(to_compare)
            for item in _search(conn, target.base_dn, ["*"]):
                key = dn_key(item["dn"])
                if key in wanted:
                    server_attrs[key] = item.get("raw_attributes", {})
        else:
            for key in to_compare:
                for item in _search(conn, server_dn[key], ["*"], scope="BASE"):
                    server_attrs[key] = item.get("raw_attributes", {})

        # 3. Writes: modifications, additions (parents first), deletions (children first).
        refused_adds: set[str] = set()
        written: set[str] = set()
        replace: list[str] = []
        for key in to_compare:
            changes = changes_for(ours[key], server_attrs.get(key, {}))
            if changes is None:
                replace.append(key)
            elif not changes:
                report.unchanged += 1
                written.add(key)
            else:
                report.writes += 1
                conn.modify(server_dn[key], changes)  # type: ignore[no-untyped-call]  # types-ldap3 leaves add/modify/delete unannotated
                if _refused(conn, ours[key].dn, "modify", report):
                    continue
                report.modified += 1
                written.add(key)
        stale = sorted((key for key in server_dn if key not in ours), key=lambda k: (-k.count(","), k))
        stale += sorted(replace, key=lambda k: (-k.count(","), k))
        for key in stale:
            report.writes += 1
            conn.delete(server_dn[key])  # type: ignore[no-untyped-call]  # types-ldap3 leaves add/modify/delete unannotated
            if not _refused(conn, server_dn[key], "delete", report) and key not in ours:
                report.deleted += 1
        for key in order:
            if key in server_dn and key not in replace:
                continue
            entry = ours[key]
            parent = parent_dn(key)
            if parent in refused_adds:
                refused_adds.add(key)
                report.rejected.append(Rejection(entry.dn, "add", 0, "notSent", "its parent entry was refused"))
                continue
            report.writes += 1
            conn.add(entry.dn, attributes={name: _values(values) for name, values in entry.attributes.items()})  # type: ignore[no-untyped-call]  # types-ldap3 leaves add/modify/delete unannotated
            if _refused(conn, entry.dn, "add", report):
                refused_adds.add(key)
                continue
            if key in replace:
                report.modified += 1
            else:
                report.added += 1
            written.add(key)

        # 4. Remember what we know to be equal, with the entryCSN it has now: our
        #    writes have entryCSNs newer than anything read in step 1.
        if target.state_file:
            for key in stale:
                server_csn.pop(key, None)
            if report.writes:
                since = max((c for c in server_csn.values() if c), default=None)
                if since is None:
                    server_csn = {dn_key(item["dn"]): _csn(item) for item in _search(conn, target.base_dn, ["entryCSN"])}
                else:
                    server_csn.update(_changed_since(conn, target.base_dn, since))
            new_state = PublishState(max_csn=max((c for c in server_csn.values() if c), default=None))
            for key in order:
                csn = server_csn.get(key)
                if not csn:
                    continue
                previous = state.entries.get(key)
                unchanged_known = previous and previous[0] == csn and previous[1] == digests[key]
                if key in written or unchanged_known:
                    new_state.entries[key] = [csn, digests[key]]
            if new_state != state or not os.path.exists(target.state_file):  # nothing new: no 40,000-entry rewrite
                save_state(target.state_file, target.url, target.base_dn, new_state)
    finally:
        try:
            conn.unbind()
        except Exception:  # the connection may already be gone; nothing to clean up
            pass
    report.seconds = clock() - start
    return report


def _refused(conn: Connection, dn: str, operation: str, report: PublishReport) -> bool:
    code, description, message = _result(conn)
    if code == 0:
        return False
    report.rejected.append(Rejection(dn, operation, code, description, message))
    return True
