"""The federation view itself: every site's newest documents, in memory and on disk, and their ages.

:meth:`Federation.take` is the consumer's ``deliver``: it judges the
message (glueinfo.federate.receive), refuses with one WARNING line and a
count, or keeps the document on disk (glueinfo.federate.store) and in
memory, and wakes the view's loop.  A document older than the one held
(its ``timestamp`` before the held one's) is dropped; one whose bytes are
those held only renews the site's age.

:meth:`Federation.tick` runs in the view's loop: sites that sent nothing for
``stale_after`` seconds are marked stale (``/sites``, ``/metrics``; their
documents are still served, as BDII keeps entries through its delete
delay), sites silent for ``withdraw_after`` seconds are withdrawn (removed
from disk, memory, LDAP and JSON, with one INFO line), and the LDAP side is
brought up to date (glueinfo.federate.ldap_view).

The HTTP side reads :meth:`sites_document`, :meth:`union_json` and
:meth:`document` under the same lock, each a quick look: the union is made
once per change, when first asked for.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.ldif import Entry
from glueinfo.core.text import one_line
from glueinfo.federate.ldap_view import LdapView
from glueinfo.federate.receive import Limits, Received, Refusal, judge, parse_blocks, site_of_word, split_routing_key, unpack
from glueinfo.federate.store import Meta, SiteStore, digest_of
from glueinfo.federate.tree import DEFAULT_GLUE_BASE, DEFAULT_GRID_BASE, Placement, containers_for, keyed_with_containers, union_json
from glueinfo.federate.trust import Senders
from glueinfo.publish.outputs.amqp import site_word

log = logging.getLogger(__name__)

REFUSALS_LOGGED = 10  # per sender and minute
WITHDRAW_CHECK_S = 5.0  # how often silent sites are looked for (withdraw_after is minutes to hours)
# After a new document, how long the loop waits for those arriving with it: at 200 sites every 60 s
# a second gathers three sites' changes into one write per LDAP target (each write's wake-ups and
# round trips cost more than its entries); a change is in LDAP about a second after it came.
BATCH_S = 1.0


@dataclass
class Site:
    site_id: str
    placement: Placement
    documents: dict[str, tuple[Meta, bytes]] = field(default_factory=dict)  # kind -> (meta, body as received)
    entries: dict[str, Entry] = field(default_factory=dict)  # the glue.ldif entries at their place, by DN key
    containers: dict[str, Entry] = field(default_factory=dict)  # those of them made here, not the site's
    blocks: dict[bytes, list[Entry]] = field(default_factory=dict)  # its LDIF's records by digest, as parsed
    placed: dict[bytes, list[tuple[str, Entry]]] = field(default_factory=dict)  # the same at their place, keyed
    received_at: float = 0.0  # when its newest document arrived


@dataclass(frozen=True)
class Ages:
    stale_after_s: float = 1800.0
    withdraw_after_s: float = 43200.0  # BDII's default BDII_DELETE_DELAY


class Federation:
    """See the module docstring."""

    def __init__(self, store: SiteStore, senders: Senders, limits: Limits = Limits(), ages: Ages = Ages(),
                 ldap: Optional[LdapView] = None, bases: tuple[str, str] = (DEFAULT_GRID_BASE, DEFAULT_GLUE_BASE),
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.senders, self.limits, self.ages, self.ldap = store, senders, limits, ages, ldap
        self.bases = bases
        self.clock = clock
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.sites: dict[str, Site] = {}
        self.changed: set[str] = set()
        self.refused: dict[str, int] = {"oversized": 0, "untrusted": 0, "invalid": 0}
        self.accepted_total = 0
        self.withdrawn_total = 0
        self.generation = 0
        self._union: tuple[int, bytes] = (-1, b"")
        self._senders_problem: Optional[str] = None
        self._refusal_log: dict[str, tuple[float, int, int]] = {}
        self._withdraw_checked_at = float("-inf")  # sender -> (minute began, logged, not logged)

    # -- loading and taking documents ----------------------------------------------------------------
    def load(self) -> int:
        """Take back what the store holds (a restart); returns the number of sites."""
        for kind, meta, body in self.store.load():
            blocks = None
            if kind == "glue.ldif":
                try:
                    blocks = parse_blocks(unpack(body, meta.content_encoding, self.limits.max_unpacked_bytes), {})[1]
                except (ValueError, UnicodeDecodeError) as exc:  # judged at arrival: only a damaged disk
                    log.warning("federation store: %s of %s cannot be read again, skipped: %s", kind, meta.site_id,
                                one_line(exc))
                    continue
            self._keep(kind, meta, body, blocks)
        self.changed = set(self.sites)
        return len(self.sites)

    def take(self, routing_key: str, properties: Any, body: bytes) -> None:
        """Judge and keep one message (module docstring).  Raises OSError (WriteError) only when the
        disk refuses a document it accepted: the consumer gives the message back to the broker."""
        problem = self.senders.refresh()
        if problem != self._senders_problem:
            if problem:
                log.warning("federation: %s; the last good bindings stay", problem)
            self._senders_problem = problem
        known = self._known_blocks(routing_key)
        verdict = judge(routing_key, getattr(properties, "headers", None), getattr(properties, "user_id", None), body,
                        getattr(properties, "content_encoding", None), getattr(properties, "message_id", None),
                        getattr(properties, "timestamp", None), self.senders, self.limits, known)
        if isinstance(verdict, Refusal):
            with self.lock:
                self.refused[verdict.kind] = self.refused.get(verdict.kind, 0) + 1
            self._log_refusal(verdict)
            return
        self._take(verdict)

    def _known_blocks(self, routing_key: str) -> dict[bytes, list[Entry]]:
        """The LDIF records held for the site a glue.ldif routing key names (judged when they came)."""
        split = split_routing_key(routing_key)
        if split is None or split[0] != "glue.ldif":
            return {}
        site_id = site_of_word(split[1])
        with self.lock:
            site = self.sites.get(site_id) if site_id is not None else None
            return site.blocks if site is not None else {}

    def _log_refusal(self, refusal: Refusal) -> None:
        """One WARNING per refusal, at most ``REFUSALS_LOGGED`` per sender and minute: a sender that
        floods the exchange is counted in /metrics, not written to the log a thousand times a second."""
        now = self.clock()
        minute, logged, hidden = self._refusal_log.get(refusal.sender, (now, 0, 0))
        if now - minute >= 60.0:
            if hidden:
                log.warning("federation: %d more refusals from %s in the last minute not logged (counted in "
                            "/metrics)", hidden, refusal.sender or "an unnamed sender")
            minute, logged, hidden = now, 0, 0
        if logged < REFUSALS_LOGGED:
            log.warning("federation: %s", refusal)
            logged += 1
        else:
            hidden += 1
        if len(self._refusal_log) > 10000:  # senders are not unbounded memory either
            self._refusal_log.clear()
        self._refusal_log[refusal.sender] = (minute, logged, hidden)

    def _take(self, received: Received) -> None:
        now = self.clock()
        digest = digest_of(received.body)
        with self.lock:
            held = self.sites.get(received.site_id)
            previous = held.documents.get(received.kind) if held is not None else None
        if previous is not None:
            old_meta = previous[0]
            if received.sent_at is not None and old_meta.sent_at is not None and received.sent_at < old_meta.sent_at:
                log.debug("federation: %s of %s sent at %s is older than the one held: dropped", received.kind,
                          received.site_id, received.sent_at)
                return
        meta = Meta(received.site_id, received.sender, received.message_id, received.sent_at, now, digest,
                    received.content_encoding)
        same = previous is not None and previous[0].digest == digest
        self.store.put(meta, received.kind, received.body)  # renewed too: a restart keeps the site's age
        with self.lock:
            self.accepted_total += 1
            self._keep(received.kind, meta, received.body, None if same else received.blocks, renew_only=same)
        if not same:
            self.wake.set()

    def _keep(self, kind: str, meta: Meta, body: bytes, blocks: Optional[dict[bytes, list[Entry]]],
              renew_only: bool = False) -> None:
        """Hold a document (caller holds the lock); ``blocks``: a glue.ldif's records, each placed in
        the view once (a record the site sent before keeps its placed entries)."""
        site = self.sites.get(meta.site_id)
        if site is None:
            site = self.sites[meta.site_id] = Site(meta.site_id, Placement(meta.site_id, *self.bases))
        site.received_at = max(site.received_at, meta.received_at)
        if renew_only:
            site.documents[kind] = (meta, site.documents[kind][1])
            return
        site.documents[kind] = (meta, body)
        if blocks is not None:
            self._place(site, blocks)
            self.changed.add(meta.site_id)
        self.generation += 1

    def _place(self, site: Site, blocks: dict[bytes, list[Entry]]) -> None:
        """The site's entries from its LDIF's records: a record it sent before keeps its placed
        entries (the same objects, so the LDAP side sees them unchanged without comparing them),
        and the containers are looked for again only when the set of DNs changed."""
        placed: dict[bytes, list[tuple[str, Entry]]] = {}
        keyed: dict[str, Entry] = {}
        for digest, entries in blocks.items():
            pairs = site.placed.get(digest)
            if pairs is None:
                pairs = site.placement.keyed(entries)
            placed[digest] = pairs
            keyed.update(pairs)  # one entry per DN: the last wins
        held, containers = site.entries, site.containers
        if len(keyed) + len(containers) == len(held) and all(k in held and k not in containers for k in keyed):
            # The same DNs as before (a change of values): the same containers, in the same order.
            site.entries = {key: keyed[key] if key in keyed else containers[key] for key in held}
        else:
            site.containers = containers_for(keyed, *self.bases)
            site.entries = keyed_with_containers(keyed, site.containers)
        site.blocks, site.placed = blocks, placed

    # -- the loop --------------------------------------------------------------------------------
    def tick(self) -> None:
        """Withdraw sites silent too long (looked for at most every ``WITHDRAW_CHECK_S``), then
        bring the LDAP server up to date."""
        now = self.clock()
        gone: list[Site] = []
        if now - self._withdraw_checked_at >= WITHDRAW_CHECK_S or now < self._withdraw_checked_at:
            self._withdraw_checked_at = now
            with self.lock:
                gone = [s for s in self.sites.values() if now - s.received_at > self.ages.withdraw_after_s]
                for site in gone:
                    del self.sites[site.site_id]
                    self.changed.add(site.site_id)
                    self.generation += 1
                    self.withdrawn_total += 1
        for site in gone:
            self.store.remove(site.site_id)
            log.info("federation: site %s withdrawn: nothing received for %.0f s (withdraw_after %.0f s)",
                     site.site_id, now - site.received_at, self.ages.withdraw_after_s)
        if self.ldap is not None and self.ldap.due() and (self.changed or self.ldap.needs_full):
            with self.lock:
                changed, self.changed = self.changed, set()
            self.ldap.write(changed, self._entries_of)

    def _entries_of(self, site_ids: Optional[set[str]]) -> dict[str, dict[str, Entry]]:
        """The placed entries of these sites (None: of every site), those that have any."""
        with self.lock:
            if site_ids is None:
                return {site_id: site.entries for site_id, site in self.sites.items() if site.entries}
            found = {site_id: self.sites.get(site_id) for site_id in site_ids}
            return {site_id: site.entries for site_id, site in found.items() if site is not None and site.entries}

    def run(self, stop: threading.Event, every_s: float = 1.0, gather_s: float = BATCH_S) -> None:
        """Tick when woken by a new document and at least every ``every_s`` seconds, until ``stop``;
        after a wake, ``gather_s`` more for the documents arriving with it, so that a burst of sites
        costs one tick and one LDAP connection's writes."""
        while not stop.is_set():
            if self.wake.wait(every_s):
                stop.wait(gather_s)
            self.wake.clear()
            self.tick()

    # -- what the HTTP side serves ---------------------------------------------------------------
    def state_of(self, site: Site, now: float) -> str:
        return "stale" if now - site.received_at > self.ages.stale_after_s else "fresh"

    def sites_document(self) -> bytes:
        """``/sites``: each site's id, state, age and documents (sender, times, digest, path)."""
        now = self.clock()
        with self.lock:
            rows = []
            for site_id in sorted(self.sites):
                site = self.sites[site_id]
                rows.append({"id": site_id, "state": self.state_of(site, now), "received_at": site.received_at,
                             "documents": {kind: {"path": f"/sites/{site_word(site_id)}/{kind}", "sender": meta.sender,
                                                  "message_id": meta.message_id, "sent_at": meta.sent_at,
                                                  "received_at": meta.received_at, "sha256": meta.digest}
                                           for kind, (meta, _body) in sorted(site.documents.items())}})
        return json.dumps({"sites": rows}, indent=1).encode() + b"\n"

    def union_json(self) -> bytes:
        """``/glue2.json``: every site's GLUE 2 objects (glueinfo.federate.tree.union_json)."""
        with self.lock:
            generation, cached = self._union
            if generation == self.generation:
                return cached
            generation = self.generation
            bodies = [self.sites[s].documents["glue21.json"][1] for s in sorted(self.sites)
                      if "glue21.json" in self.sites[s].documents]
        document = union_json(bodies)
        with self.lock:
            self._union = (generation, document)
        return document

    def document(self, site_id: str, kind: str) -> Optional[tuple[Meta, bytes]]:
        """A site's document as it came (glue.ldif unpacked), or None."""
        with self.lock:
            site = self.sites.get(site_id)
            held = site.documents.get(kind) if site is not None else None
        if held is None:
            return None
        meta, body = held
        return meta, unpack(body, meta.content_encoding, self.limits.max_unpacked_bytes)

    def counts(self) -> dict[str, Any]:
        """What /health and /metrics show."""
        now = self.clock()
        with self.lock:
            states = [self.state_of(site, now) for site in self.sites.values()]
            return {"sites": len(states), "stale": states.count("stale"), "accepted_total": self.accepted_total,
                    "refused_total": dict(self.refused), "withdrawn_total": self.withdrawn_total}
