"""Host identity: when two names denote the same host (the one rule every source and the site use),
and which host a document may speak for.

Host names are compared case-insensitively without a trailing dot; a short
name (``wn001``, as Ganglia often reports) is the same host as the one FQDN
whose first label it is (``wn001.example.org``), when exactly one is known.

Claims.  A document from an agent or a spool file describes exactly one
host, the one its target stands for: a listed name, the name written beside
an address (``10.1.0.17=wn017.example.org``), else the address's reverse DNS
name; a spool file's name.  Its Node Id must be that identity, its short or
full form, or a configured alias (``[sources] aliases``).  An Id naming any
other listed host or, for an address whose host is not known, any host
another source knows, in full or short form, is refused and logged with both
names; the other host's data is untouched.

What an address nothing names may speak for is never decided by which source
happened to finish first: its first answer is only pinned once every source of
the gather has reported, and refused (the pin undone, nothing kept or saved) if
that host is this head node (when ``local`` is enabled) or a host any other
source reported in the same gather or before (:func:`unbound_refusals`).  A
snapshot such a pin brought, saved in the state directory, is checked by the
same rule when the state is loaded (:func:`restorable`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional


def host_key(name: str) -> str:
    """How host names are compared: case-insensitive, no trailing dot."""
    return name.strip().rstrip(".").lower()


def same_host(reported: str, expected: str) -> bool:
    """Does a reported name denote the expected host?  Equal, or equal in the
    first label when one of the two is a short name (``wn01`` vs ``wn01.example.org``)."""
    a, b = host_key(reported), host_key(expected)
    if a == b:
        return True
    if "." in a and "." in b:
        return False
    return a.split(".", 1)[0] == b.split(".", 1)[0]


def fold_short_names(keys: Iterable[str]) -> dict[str, str]:
    """Map every key to its canonical key: a short name to the single FQDN it abbreviates."""
    keys = set(keys)
    by_label: dict[str, list[str]] = {}
    for key in keys:
        if "." in key and not looks_like_ip(key):
            by_label.setdefault(key.split(".", 1)[0], []).append(key)
    canonical = {}
    for key in keys:
        fqdns = by_label.get(key, []) if "." not in key else []
        canonical[key] = fqdns[0] if len(fqdns) == 1 else key
    return canonical


def looks_like_ip(key: str) -> bool:
    return bool(re.match(r"^[0-9.]+$", key)) or ":" in key


# -- claims: a document may speak only for the host it came from ---------------------------------


def parse_aliases(entries: Iterable[str]) -> dict[str, frozenset[str]]:
    """``[sources] aliases`` (``NAME=ALIAS`` each) -> host key -> the other Ids it may report;
    ValueError naming an entry without '='."""
    aliases: dict[str, set[str]] = {}
    for entry in entries:
        name, sep, alias = entry.partition("=")
        if not sep or not name.strip() or not alias.strip():
            raise ValueError(f"[sources] aliases: {entry!r} is not NAME=ALIAS")
        aliases.setdefault(host_key(name), set()).add(host_key(alias))
    return {key: frozenset(values) for key, values in aliases.items()}


def answers_to(reported: str, identity: str, aliases: Mapping[str, frozenset[str]]) -> bool:
    """May a document whose Node Id is ``reported`` come from the host ``identity``?  Its own
    name, the short or full form of it (same_host), or one of its configured aliases."""
    return same_host(reported, identity) or host_key(reported) in aliases.get(host_key(identity), ())


class Claims:
    """Whose name is a reported Id?  An index of the hosts a source must not let one target
    speak for: every other target's identity (``owners``: host key -> the target that owns it)
    and the hosts other sources know (``known``).  A short Id claims every FQDN it abbreviates,
    and a full Id the short identity it expands, so no form of a name slips through."""

    def __init__(self, owners: Mapping[str, str], known: Iterable[str] = ()) -> None:
        self.owners = dict(owners)
        self.known = frozenset(known)
        self._by_label: dict[str, list[str]] = {}
        for key in (*self.owners, *self.known):
            self._index(key)

    def _index(self, key: str) -> None:
        if "." in key and not looks_like_ip(key):
            self._by_label.setdefault(key.split(".", 1)[0], []).append(key)

    def claim(self, reported: str, target: str) -> None:
        """``target`` now owns the host ``reported`` names (a pinned address)."""
        key = host_key(reported)
        if key not in self.owners:
            self._index(key)
        self.owners[key] = target

    def _forms(self, reported: str) -> list[str]:
        key = host_key(reported)
        forms = [key]
        if "." not in key:
            forms.extend(self._by_label.get(key, ()))
        elif not looks_like_ip(key):
            forms.append(key.split(".", 1)[0])
        return forms

    def owner(self, reported: str, asking: str) -> Optional[str]:
        """The other target whose identity ``reported`` names (None: no other target's)."""
        for form in self._forms(reported):
            owner = self.owners.get(form)
            if owner is not None and owner != asking:
                return owner
        return None

    def known_host(self, reported: str) -> Optional[str]:
        """The host other sources know that ``reported`` names, if any."""
        return next((form for form in self._forms(reported) if form in self.known), None)


# A pulling source's memory key: target -> (host key it is pinned to, time of its last answer).
PINS = "pins"


def release_pin(memory: dict[str, Any], target: str) -> None:
    """Undo a target's pin (its claim was refused after the gather): it may pin again later."""
    memory.get(PINS, {}).pop(target, None)


def unbound_refusals(unbound: Mapping[str, str], source: str,
                     reported_by: Mapping[str, Iterable[str]]) -> list[tuple[str, str, list[str]]]:
    """The claims among ``unbound`` (host key -> the target of ``source`` whose answer named it,
    nothing having named the target before) that name, in any form, a host someone else has:
    ``reported_by`` maps host keys to who has them (source names; ``"this host"`` for the head
    node).  Returns (target, claimed host key, the others that have it) for each refused claim."""
    others = {key: sorted(set(whom) - {source}) for key, whom in reported_by.items()}
    claims = Claims({}, [key for key, whom in others.items() if whom])
    refused = []
    for key, target in unbound.items():
        taken = claims.known_host(key)
        if taken is not None:
            refused.append((target, key, others[taken]))
    return refused


def restorable(host: str, source: str, listed: frozenset[str], saved_by: Iterable[str], reserved: Iterable[str],
               aliases: Mapping[str, frozenset[str]]) -> Optional[str]:
    """Why a saved snapshot of ``host`` from ``source`` (a source that binds targets to hosts,
    whose listed targets name ``listed``) may not be restored, or None.  One that no listed name
    covers came from a pin; it is refused when the host is this head node (``reserved``) or another
    source's snapshot of it was saved too (``saved_by``): the rule a gather applies to a new pin."""
    if any(answers_to(host, name, aliases) for name in listed):
        return None
    if any(same_host(host, name) for name in reserved):
        return "this head node's own name, which no unnamed address may claim"
    others = sorted(set(saved_by) - {source})
    if others:
        return f"a host {', '.join(others)} reports too, and no listed name says {source} speaks for it"
    return None


def claim_problem(reported: str, target: str, identity: Optional[str], expected: Optional[str], pinned: bool,
                  claims: Claims, aliases: Mapping[str, frozenset[str]]) -> Optional[tuple[str, str]]:
    """Why the name ``reported`` by ``target`` is a claim on another host, or None (the one rule
    every pulling source applies; each words its refusal its own way):

    - ``("owner", other_target)``: it names another target's host, in any form;
    - ``("expected", expected)``: it is not the host the target stands for (nor an alias);
    - ``("known", host)``: the target is an address nothing names nor pins, and the name is a host
      another source knows."""
    owner = claims.owner(reported, target)
    if owner is not None:
        return "owner", owner
    if expected is not None and not answers_to(reported, expected, aliases):
        return "expected", expected
    if identity is None and not pinned:
        known = claims.known_host(reported)
        if known:
            return "known", known
    return None
