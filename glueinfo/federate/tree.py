"""Where each site's entries go in the federation view's LDAP tree, and the union of its JSON.

The view lays its server out as a top-level BDII does, because consumers
read the site's name from the DN: DIRAC's getGlue2CEInfo takes it from
``GLUE2DomainID=SITE`` in a share's DN (and skips a share without one), and
GLUE 1.3 readers from the ``Mds-Vo-name=SITE`` above a CE.  So each site is
below ``Mds-Vo-name=SITE,Mds-Vo-name=local,o=grid`` (GLUE 1.3) and is the
AdminDomain ``GLUE2DomainID=SITE,GLUE2GroupID=grid,o=glue`` (GLUE 2), the
two bases being ``[federate] grid_base`` and ``glue_base``.  A site's LDIF
comes in either of glueinfo's two forms (``[glue] dit``):

- GLUE 1.3: its top container (``mds-vo-name=resource`` or
  ``mds-vo-name=SITE``) is replaced by ``mds-vo-name=SITE`` below grid_base;
- GLUE 2, site form: ``GLUE2DomainID=SITE,o=glue`` and everything below it
  go below glue_base as they are;
- GLUE 2, resource form: the AdminDomain ``GLUE2DomainID=SITE,
  GLUE2GroupID=resource,o=glue`` (and what is below it) becomes
  ``GLUE2DomainID=SITE`` below glue_base, and the services below
  ``GLUE2GroupID=resource`` go below that domain, as a site BDII holds them.

Containers a site's entries need and its LDIF does not hold (an
``mds-vo-name`` or ``GLUE2GroupID`` entry) are made here, as BDII makes
them.  Foreign keys name IDs, not DNs, so nothing else changes.

The JSON union (``/glue2.json``) is every site's GLUE 2 document's top
lists concatenated per class, sites in id order: the same objects the sites
pushed, unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

import msgspec

from glueinfo.core.ldif import Entry, dn_key, format_dn, make_dn, parent_dn, parse_dn

DEFAULT_GRID_BASE = "mds-vo-name=local,o=grid"
DEFAULT_GLUE_BASE = "GLUE2GroupID=grid,o=glue"
_CONTAINERS = {"mds-vo-name": ("MDS", "Mds-Vo-name"), "glue2groupid": ("GLUE2Group", "GLUE2GroupID")}


def _container(dn: str) -> Entry | None:
    (name, value), *_ = parse_dn(dn)[0]
    known = _CONTAINERS.get(name.lower())
    if known is None:
        return None
    object_class, attribute = known
    return Entry(dn, {"objectClass": object_class, attribute: value})


# What dn_escape would change in a value, or what parse_dn would strip or split on: a DN without
# any of these (and with one '=' per RDN) is its own format_dn(parse_dn(dn)), so it is placed by
# its text.
_NOT_PLAIN = ("\\", '"', "+", ";", "<", ">", "#", " ,", ", ", " =", "= ")


def _plain(dn: str) -> bool:
    """Whether ``dn`` is written as format_dn writes it, so that its RDNs are its ","-separated words."""
    return not any(mark in dn for mark in _NOT_PLAIN) and dn.count("=") == dn.count(",") + 1 and \
        dn.isprintable() and dn == dn.strip(" ")


class Placement:
    """One site's entries at their place in the view (module docstring): the site's containers'
    DNs are made once, and a DN written plainly (as every DN glueinfo writes) is placed by its
    text, not parsed and formatted again."""

    def __init__(self, site_id: str, grid_base: str = DEFAULT_GRID_BASE, glue_base: str = DEFAULT_GLUE_BASE) -> None:
        self.site_id, self.grid_base, self.glue_base = site_id, grid_base, glue_base
        self.site_grid = make_dn("mds-vo-name", site_id, grid_base)
        self.site_domain = make_dn("GLUE2DomainID", site_id, glue_base)

    def place(self, entry: Entry) -> Optional[Entry]:
        """The entry (already judged the site's own: glueinfo.federate.receive) at its place; None
        for the site's GLUE 1.3 container, which :func:`with_containers` makes as BDII makes it."""
        dn = self._dn(entry.dn)
        # The values are the parsed entry's own, shared, not copied: neither is changed after this.
        return None if dn == self.site_grid else Entry.from_lists(dn, entry.attributes)

    def keyed(self, entries: Iterable[Entry]) -> list[tuple[str, Entry]]:
        """The placed entries with their DN keys (glueinfo.core.ldif.dn_key), the container left out."""
        return [(dn_key(placed.dn), placed) for placed in map(self.place, entries) if placed is not None]

    def _dn(self, dn: str) -> str:
        if not _plain(dn):
            return self._parsed_dn(dn)
        words = dn.split(",")
        if words[-1].partition("=")[2].lower() == "grid":
            return f"{','.join(words[:-2])},{self.site_grid}" if len(words) > 2 else self.site_grid
        if self._is_site_domain(words[-2]):  # site form
            return f"{','.join(words[:-1])},{self.glue_base}"
        if len(words) > 2 and self._is_site_domain(words[-3]):  # resource form: the domain moves up
            return f"{','.join(words[:-2])},{self.glue_base}"
        return f"{','.join(words[:-1])},{self.site_domain}"  # the services go below it

    def _is_site_domain(self, rdn: str) -> bool:
        name, _eq, value = rdn.partition("=")
        return value == self.site_id and name.lower() == "glue2domainid"

    def _parsed_dn(self, dn: str) -> str:
        """_dn for a DN with escapes, quotes, spaces or several values in an RDN: parsed, and
        written again as format_dn writes it."""
        rdns = parse_dn(dn)
        inner = rdns[:-2]  # below the site's top container
        top = [(name.lower(), value) for name, value in rdns[-2]]
        site_domain = [[("glue2domainid", self.site_id)]]
        if rdns[-1][0][1].lower() == "grid":
            return f"{format_dn(inner)},{self.site_grid}" if inner else self.site_grid
        if [top] == site_domain:  # site form
            return f"{format_dn(rdns[:-1])},{self.glue_base}"
        keyed = [[(name.lower(), value) for name, value in rdn] for rdn in inner]
        if keyed[-1:] == site_domain:  # resource form: the domain moves up, the services go below it
            return f"{format_dn(inner)},{self.glue_base}"
        return f"{format_dn(rdns[:-1])},{self.site_domain}"


def place(site_id: str, entry: Entry, grid_base: str = DEFAULT_GRID_BASE,
          glue_base: str = DEFAULT_GLUE_BASE) -> Optional[Entry]:
    """:meth:`Placement.place` of one entry."""
    return Placement(site_id, grid_base, glue_base).place(entry)


def with_containers(placed: Iterable[Optional[Entry]], grid_base: str = DEFAULT_GRID_BASE,
                    glue_base: str = DEFAULT_GLUE_BASE) -> dict[str, Entry]:
    """The placed entries (one per DN, the last wins) with the containers they need and the site's
    LDIF did not hold, by DN key (glueinfo.core.ldif.dn_key), parents first."""
    by_key = {dn_key(entry.dn): entry for entry in placed if entry is not None}
    return keyed_with_containers(by_key, containers_for(by_key, grid_base, glue_base))


def containers_for(by_key: Mapping[str, Entry], grid_base: str = DEFAULT_GRID_BASE,
                   glue_base: str = DEFAULT_GLUE_BASE) -> dict[str, Entry]:
    """The containers (``mds-vo-name``, ``GLUE2GroupID`` entries) that the entries (by DN key)
    need between them and the bases, and do not hold, by DN key."""
    needed: dict[str, Entry] = {}
    bases = {dn_key(grid_base), dn_key(glue_base)}
    for entry in by_key.values():
        parent = entry.dn
        while True:
            parent = parent_dn(parent)
            key = dn_key(parent)
            if not parent or key in bases or key in by_key or key in needed:
                break
            container = _container(parent)
            if container is None:
                break
            needed[key] = container
    return needed


def keyed_with_containers(by_key: Mapping[str, Entry], containers: Mapping[str, Entry]) -> dict[str, Entry]:
    """Entries and containers by DN key, parents first."""
    everything = [*containers.items(), *by_key.items()]
    everything.sort(key=lambda item: item[1].dn.count(","))  # a child's DN holds its parent's commas and one more
    return dict(everything)


def relocate(site_id: str, entries: Iterable[Entry], grid_base: str = DEFAULT_GRID_BASE,
             glue_base: str = DEFAULT_GLUE_BASE) -> list[Entry]:
    """The site's entries at their place in the view, parents first, with the containers they need."""
    placed = (place(site_id, entry, grid_base, glue_base) for entry in entries)
    return list(with_containers(placed, grid_base, glue_base).values())


def union_json(documents: Sequence[bytes]) -> bytes:
    """One GLUE 2 JSON document holding every site's objects (module docstring); a document that
    is not an object of lists (the receiver refuses those) is skipped."""
    union: dict[str, list[object]] = {}
    for body in documents:
        document = msgspec.json.decode(body)
        if not isinstance(document, dict):
            continue
        for kind, objects in document.items():
            if isinstance(objects, list):
                union.setdefault(kind, []).extend(objects)
    return msgspec.json.format(msgspec.json.encode(union), indent=1) + b"\n"
