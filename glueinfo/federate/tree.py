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

from collections.abc import Iterable, Sequence
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


def place(site_id: str, entry: Entry, grid_base: str = DEFAULT_GRID_BASE,
          glue_base: str = DEFAULT_GLUE_BASE) -> Optional[Entry]:
    """The entry (already judged the site's own: glueinfo.federate.receive) at its place in the
    view (module docstring); None for the site's GLUE 1.3 container, which :func:`with_containers`
    makes as BDII makes it."""
    site_grid = make_dn("mds-vo-name", site_id, grid_base)
    rdns = parse_dn(entry.dn)
    inner = rdns[:-2]  # below the site's top container
    top = [(name.lower(), value) for name, value in rdns[-2]]
    site_domain = [[("glue2domainid", site_id)]]
    if rdns[-1][0][1].lower() == "grid":
        dn = f"{format_dn(inner)},{site_grid}" if inner else site_grid
    elif [top] == site_domain:  # site form
        dn = f"{format_dn(rdns[:-1])},{glue_base}"
    else:  # resource form: the domain moves up, the services go below it
        keyed = [[(name.lower(), value) for name, value in rdn] for rdn in inner]
        if keyed[-1:] == site_domain:
            dn = f"{format_dn(inner)},{glue_base}"
        else:
            dn = f"{format_dn(rdns[:-1])},{make_dn('GLUE2DomainID', site_id, glue_base)}"
    # The values are the parsed entry's own, shared, not copied: neither is changed after this.
    return None if dn == site_grid else Entry.from_lists(dn, entry.attributes)


def with_containers(placed: Iterable[Optional[Entry]], grid_base: str = DEFAULT_GRID_BASE,
                    glue_base: str = DEFAULT_GLUE_BASE) -> dict[str, Entry]:
    """The placed entries (one per DN, the last wins) with the containers they need and the site's
    LDIF did not hold, by DN key (glueinfo.core.ldif.dn_key), parents first."""
    by_key = {dn_key(entry.dn): entry for entry in placed if entry is not None}
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
    everything = [*needed.items(), *by_key.items()]
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
