"""Publish stage: make an LDAP server's trees under one or more bases equal to ours.

``sync_tree(entries, LdapTarget(...))`` reads what the server has under each
base (``base_dn`` and ``extra_bases``, e.g. mds-vo-name=resource,o=grid and
GLUE2GroupID=resource,o=glue), then adds what is missing (parents first),
modifies only the attributes that differ (one modify per entry) and deletes
what is no longer published (children first).  A second run with nothing
changed sends no write at all.

Reading 40,000 entries in full takes far longer than the run's budget, so
the comparison is done in steps:

1. one search per base lists the server's DNs with their ``entryCSN`` (a
   deletion by someone else must be seen; slapd changes an entry's entryCSN
   on every write, whoever makes it), read off the connection's socket
   (:func:`~glueinfo.glue.ldap_wire.search_subtree`: ldap3's decoding took
   2 s for 80,000 entries);
2. a state file (:mod:`glueinfo.glue.ldap_state`) remembers, for each entry
   glueinfo wrote or confirmed, the entryCSN it had then and a digest of the
   entry glueinfo published;
3. an entry whose entryCSN and digest both still match needs no further
   look; every other entry that exists on both sides is read in full and
   compared attribute by attribute (:mod:`glueinfo.glue.ldap_diff`).

The state file is only a cache: missing, unreadable or for another server or
other bases, it is ignored (everything is read in full) and rewritten
atomically at the end.  A server that does not keep entryCSN is always read
in full.

Writes are pipelined (:class:`~glueinfo.glue.ldap_wire.Pipeline`): up to
``window`` requests are on the wire before their answers are read (each
answer is matched to its request by message id).  An add is sent only once
the server has confirmed its parent (or the parent was already there); a
delete only once every child being deleted was answered.  Every write the
server refuses is reported with the DN, the server's result code and message
(``PublishReport.rejected``); the other writes still go ahead, and the
descendants of a refused add are not sent and are reported as such, after
it.  An unreachable server or a failed bind is a ``PublishError``
(:mod:`glueinfo.glue.ldap_connection`) with a one-line message, before
anything is sent; a connection lost during the writes is one too (what the
server confirmed by then stays; the next run compares and completes it).
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Optional, Union

from glueinfo.core.ldif import Entry, dn_key, parent_dn, parse_dn, value_text
from glueinfo.glue.ldap_connection import LdapTarget, PublishError, connect
from glueinfo.glue.ldap_diff import changes_for, value_texts
from glueinfo.glue.ldap_state import PublishState, entry_digest, load_state, save_state
from glueinfo.glue.ldap_wire import (
    ANY_ENTRY,
    Answer,
    Changes,
    Pipeline,
    encode_add,
    encode_delete,
    encode_modify,
    greater_or_equal,
    result_name,
    search_subtree,
)

if TYPE_CHECKING:  # ldap3 is imported when a publish talks to a server, not when this module loads
    from ldap3 import Connection

# Above this many entries to compare in full, one subtree search beats one base search each.
FULL_READ_THRESHOLD = 200


@dataclass(frozen=True)
class Rejection:
    """One write the server refused (or that was not sent because of one), as reported to the admin."""

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
    """What one sync or delta did: counts of entries by outcome, the writes sent, the refusals, its duration."""

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


# -- talking to the server ---------------------------------------------------------------

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
            filter: Optional[bytes] = None) -> Iterable[tuple[str, dict[str, list[bytes]]]]:
    """(DN, raw attributes) of each entry the search finds (``filter``: an encoded filter, by
    default every entry).  A subtree is read by :func:`search_subtree` on the connection's own
    socket; a BASE search of one DN through ldap3 (nothing when it fails: the entry is gone)."""
    if scope == "BASE":
        conn.search(base, "(objectClass=*)", search_scope="BASE", attributes=attributes)
        if _result(conn)[0] == 0:
            yield from ((r["dn"], r.get("raw_attributes", {})) for r in conn.response or ()
                        if r.get("type") == "searchResEntry")
        return
    yield from search_subtree(conn.socket, base, attributes, filter or ANY_ENTRY,
                              max(1, math.ceil(conn.receive_timeout or 10)))


def _csn(attributes: dict[str, list[bytes]]) -> Optional[str]:
    csn = attributes.get("entryCSN")
    return csn[0].decode("ascii", "replace") if csn else None


def _changed_since(conn: Connection, base: str, csn: str) -> dict[str, str]:
    """dn key -> entryCSN of the entries written at or after ``csn`` (slapd orders CSNs: csnOrderingMatch)."""
    return {dn_key(dn): _csn(attributes) or "" for dn, attributes
            in _search(conn, base, ["entryCSN"], filter=greater_or_equal("entryCSN", csn))}


# -- the sync ------------------------------------------------------------------------------

Progress = Callable[[int, int], None]  # (writes answered, writes planned), called as answers arrive


def below(key: str, base_keys: Sequence[str]) -> Optional[str]:
    """The first of the base keys the DN key ``key`` lies below (not the base itself), else None."""
    return next((b for b in base_keys if key.endswith("," + b)), None)


def sync_tree(entries: Sequence[Entry], target: LdapTarget, clock: Callable[[], float] = time.monotonic,
              progress: Optional[Progress] = None) -> PublishReport:
    """Make the server's trees under target.bases equal to ``entries`` (see the module docstring).

    ``entries`` must be parents first (as pipeline.build_site gives them);
    entries below none of the bases are not sent and are reported as refused.
    ``progress`` is called with (writes answered, writes planned) as the
    server answers.  Raises PublishError when the server cannot be used at
    all (or the connection is lost during the writes: what was answered by
    then stays written); refused writes are in the report.
    """
    return sync_keyed([(dn_key(entry.dn), entry) for entry in entries], target, clock, progress)


def sync_keyed(keyed: Sequence[tuple[str, Entry]], target: LdapTarget, clock: Callable[[], float] = time.monotonic,
               progress: Optional[Progress] = None) -> PublishReport:
    """:func:`sync_tree` of (dn_key of its DN, entry) pairs: for a caller that keyed them already."""
    start = clock()
    report = PublishReport()
    bases = target.bases
    base_keys = [dn_key(b) for b in bases]
    for key in base_keys:
        inner = below(key, base_keys)
        if inner is not None:
            raise PublishError(f"the bases overlap: {key} is below {inner}; give only one of them")
    suffixes = tuple("," + key for key in base_keys)
    where = f"the base {bases[0]}" if len(bases) == 1 else f"any of the bases {', '.join(bases)}"
    ours: dict[str, Entry] = {}
    for key, entry in keyed:
        if not key.endswith(suffixes):  # e.g. a static GLUE 2 file under o=glue, not published there
            report.rejected.append(Rejection(entry.dn, "add", 0, "notSent", f"not below {where}"))
            continue
        if key not in ours:
            ours[key] = entry
    order = list(ours)  # parents first, as given
    digests = {key: entry_digest(entry) for key, entry in ours.items()}
    # The server spells a DN as it was written, mostly as we wrote it: its key is then known.
    known_keys = {entry.dn: key for key, entry in ours.items()}

    conn = connect(target)
    try:
        for base in bases:
            ensure_base(conn, base)
        state = load_state(target.state_file, target.url, bases)

        # 1. What is there: every DN with its entryCSN, one search per base read off the
        #    socket (search_subtree).  slapd changes an entry's entryCSN on every write,
        #    whoever makes it: one that still has the entryCSN recorded is as we left it.
        server_dn: dict[str, str] = {}
        server_csn: dict[str, Optional[str]] = {}
        csn_below: dict[str, dict[str, Optional[str]]] = {}  # the same, per base (bases do not overlap)
        for base, base_key in zip(bases, base_keys, strict=True):
            found = csn_below[base_key] = {}
            for dn, attributes in _search(conn, base, ["entryCSN"]):
                key = known_keys.get(dn) or dn_key(dn)
                if key != base_key:
                    server_dn[key] = dn
                    found[key] = _csn(attributes)
            server_csn.update(found)

        # 2. Which common entries need a full comparison.
        to_compare = []
        recorded = state.entries
        unchanged = 0
        for key in order:
            if key not in server_dn:
                continue
            known = recorded.get(key)
            csn = server_csn[key]
            if known and csn and known[0] == csn and known[1] == digests[key]:
                unchanged += 1
            else:
                to_compare.append(key)
        report.unchanged += unchanged
        report.compared_in_full = len(to_compare)
        server_attrs: dict[str, dict[str, list[bytes]]] = {}
        if len(to_compare) > FULL_READ_THRESHOLD:
            wanted = set(to_compare)
            for base, base_key in zip(bases, base_keys, strict=True):
                if any(below(key, (base_key,)) for key in wanted):
                    for dn, attributes in _search(conn, base, ["*"]):
                        key = dn_key(dn)
                        if key in wanted:
                            server_attrs[key] = attributes
        else:
            for key in to_compare:
                for _dn, attributes in _search(conn, server_dn[key], ["*"], scope="BASE"):
                    server_attrs[key] = attributes

        # 3. Writes: modifications, deletions (children first), additions (parents first).
        written: set[str] = set()
        replace: list[str] = []
        modifies: list[tuple[str, Changes]] = []
        for key in to_compare:
            changes = changes_for(ours[key], server_attrs.get(key, {}))
            if changes is None:
                replace.append(key)
            elif not changes:
                report.unchanged += 1
                written.add(key)
            else:
                modifies.append((key, changes))
        stale = [key for key in server_dn if key not in ours] + replace
        adds = [key for key in order if key not in server_dn or key in replace]
        writer = _Writes(Pipeline(conn.socket, target.window, target.timeout_s), report, progress,
                         len(modifies) + len(stale) + len(adds))
        writer.modify([(key, server_dn[key], ours[key].dn, changes) for key, changes in modifies], written)
        writer.delete({key: server_dn[key] for key in stale}, set(replace))
        writer.add(adds, ours, set(replace), written)

        # 4. Remember what we know to be equal, with the entryCSN it has now: our
        #    writes have entryCSNs newer than anything read in step 1.
        if target.state_file:
            for key in stale:
                server_csn.pop(key, None)
                for mine in csn_below.values():
                    mine.pop(key, None)
            new_state = PublishState()
            for base, base_key in zip(bases, base_keys, strict=True):
                mine = csn_below[base_key]
                if base_key in writer.bases_written:
                    since = max(filter(None, mine.values()), default=None)
                    if since is None:
                        mine = {dn_key(dn): _csn(attributes) for dn, attributes in _search(conn, base, ["entryCSN"])}
                        mine.pop(base_key, None)
                    else:
                        mine.update(_changed_since(conn, base, since))
                    server_csn.update(mine)
                # Not read by this version; kept so that a state file stays good for one before it.
                newest = max(filter(None, mine.values()), default=None)
                if newest:
                    new_state.max_csn[base_key] = newest
            remembered = new_state.entries
            for key in order:
                csn = server_csn.get(key)
                if not csn:
                    continue
                previous = state.entries.get(key)
                if previous and previous[0] == csn and previous[1] == digests[key]:
                    remembered[key] = previous
                elif key in written:
                    remembered[key] = [csn, digests[key]]
            if new_state != state or not os.path.exists(target.state_file):  # nothing new: no 40,000-entry rewrite
                save_state(target.state_file, target.url, bases, new_state)
    finally:
        try:
            conn.unbind()
        except Exception:  # the connection may already be gone; nothing to clean up
            pass
    report.seconds = clock() - start
    return report


class _Writes:
    """Step 3 of sync_tree through a Pipeline, counting into the report."""

    def __init__(self, pipeline: Pipeline, report: PublishReport, progress: Optional[Progress], planned: int) -> None:
        self.pipeline, self.report, self.progress, self.planned = pipeline, report, progress, planned
        self.answered = 0
        self.bases_written: set[str] = set()  # ancestors of what was sent: the bases whose entryCSNs moved

    def _sent(self, key: str) -> None:
        self.report.writes += 1
        parent = key
        while parent:  # the base it is below: every ancestor but the root could be one
            parent = parent_dn(parent)
            self.bases_written.add(parent)

    def _answers(self) -> list[Answer]:
        found = self.pipeline.answers()
        if not found:  # nothing in flight although writes are left: a bug here, never a wait forever
            raise PublishError(f"internal error: {self.planned - self.answered} writes left but none sent")
        self.answered += len(found)
        if self.progress is not None and found:
            self.progress(self.answered, self.planned)
        return found

    def _refused(self, answer: Answer, dn: str, operation: str) -> bool:
        if answer.code == 0:
            return False
        self.report.rejected.append(Rejection(dn, operation, answer.code, result_name(answer.code),
                                              " ".join(answer.message.split())))
        return True

    def modify(self, modifies: list[tuple[str, str, str, Changes]], written: set[str]) -> None:
        """Each (key, server's DN, our DN, changes): independent of each other."""
        pending = deque(modifies)
        left = len(modifies)
        while left:
            while pending and self.pipeline.room() > 0:
                key, server_dn, dn, changes = pending.popleft()
                self.pipeline.send(partial(encode_modify, dn=server_dn, changes=changes), (key, dn))
                self._sent(key)
            for answer in self._answers():
                left -= 1
                key, dn = answer.tag
                if not self._refused(answer, dn, "modify"):
                    self.report.modified += 1
                    written.add(key)

    def delete(self, stale: dict[str, str], replaced: set[str]) -> None:
        """Children before their parents: a parent is sent once all its children here were answered."""
        children_left: dict[str, int] = {}
        for key in stale:
            parent = parent_dn(key)
            if parent in stale:
                children_left[parent] = children_left.get(parent, 0) + 1
        ready = deque(sorted((k for k in stale if k not in children_left), key=lambda k: (-k.count(","), k)))
        left = len(stale)
        while left:
            while ready and self.pipeline.room() > 0:
                key = ready.popleft()
                self.pipeline.send(partial(encode_delete, dn=stale[key]), key)
                self._sent(key)
            for answer in self._answers():
                left -= 1
                key = answer.tag
                if not self._refused(answer, stale[key], "delete") and key not in replaced:
                    self.report.deleted += 1
                parent = parent_dn(key)
                if parent in children_left:
                    children_left[parent] -= 1
                    if not children_left[parent]:
                        ready.append(parent)

    def add(self, adds: list[str], ours: dict[str, Entry], replaced: set[str], written: set[str]) -> None:
        """Parents before children: a child is sent once the server confirmed its parent;
        the children of a refused entry are not sent and are reported as such."""
        to_add = set(adds)
        waiting: dict[str, list[str]] = {}
        ready: deque[str] = deque()
        for key in adds:
            parent = parent_dn(key)
            if parent in to_add:
                waiting.setdefault(parent, []).append(key)
            else:
                ready.append(key)
        left = len(adds)
        while left:
            while ready and self.pipeline.room() > 0:
                key = ready.popleft()
                entry = ours[key]
                attributes = {name: value_texts(values) for name, values in entry.attributes.items()}
                self.pipeline.send(partial(encode_add, dn=entry.dn, attributes=attributes), key)
                self._sent(key)
            for answer in self._answers():
                left -= 1
                key = answer.tag
                if self._refused(answer, ours[key].dn, "add"):
                    below = list(waiting.pop(key, ()))
                    while below:  # the whole subtree, parents first
                        child = below.pop(0)
                        left -= 1
                        self.answered += 1
                        self.report.rejected.append(Rejection(ours[child].dn, "add", 0, "notSent",
                                                              "its parent entry was refused"))
                        below[0:0] = waiting.pop(child, ())
                    continue
                if key in replaced:
                    self.report.modified += 1
                else:
                    self.report.added += 1
                written.add(key)
                ready.extend(waiting.pop(key, ()))


def write_delta(target: LdapTarget, old: Mapping[str, Entry], new: Union[Sequence[Entry], Mapping[str, Entry]],
                connection: Optional[Callable[[], Connection]] = None) -> PublishReport:
    """Write to the server only what differs between ``old`` (DN key -> entry: what it holds of
    these DNs, as this process last wrote or confirmed them) and ``new`` (parents first), without
    reading the server first: modifications, deletions (children first), additions (parents
    first), pipelined as :func:`sync_tree` writes.  For a writer that is the only one writing its
    subtrees and reconciles them with :func:`sync_tree` at its start and after any refusal (the
    federation view).  No connection is made when nothing differs; ``connection`` gives a bound
    one the caller keeps open between calls (default: one made for this call and closed after it).
    Refused writes are in the report; PublishError when the server cannot be used at all (the
    caller then drops a connection it keeps)."""
    start = time.monotonic()
    report = PublishReport()
    ours: dict[str, Entry] = {}
    if isinstance(new, Mapping):  # already keyed by dn_key, parents first
        ours = dict(new)
    else:
        for entry in new:
            ours.setdefault(dn_key(entry.dn), entry)
    modifies: list[tuple[str, Changes]] = []
    replace: list[str] = []
    for key, entry in ours.items():
        before = old.get(key)
        if before is None:
            continue
        if before is entry or before.attributes == entry.attributes:
            report.unchanged += 1
            continue
        held = {name: [value_text(v).encode() for v in values] for name, values in before.attributes.items()}
        changes = changes_for(entry, held)
        if changes is None:
            replace.append(key)
        elif changes:
            modifies.append((key, changes))
        else:
            report.unchanged += 1
    stale = [key for key in old if key not in ours] + replace
    adds = [key for key in ours if key not in old or key in replace]
    if not (modifies or stale or adds):
        report.seconds = time.monotonic() - start
        return report
    conn = connection() if connection is not None else connect(target)
    try:
        writer = _Writes(Pipeline(conn.socket, target.window, target.timeout_s), report, None,
                         len(modifies) + len(stale) + len(adds))
        written: set[str] = set()
        writer.modify([(key, old[key].dn, ours[key].dn, changes) for key, changes in modifies], written)
        writer.delete({key: old[key].dn for key in stale}, set(replace))
        writer.add(adds, ours, set(replace), written)
    finally:
        if connection is None:
            try:
                conn.unbind()
            except Exception:  # the connection may already be gone; nothing to clean up
                pass
    report.seconds = time.monotonic() - start
    return report
