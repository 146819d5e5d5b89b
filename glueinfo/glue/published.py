"""What an LDAP server already publishes, read back for SubCluster id adoption (glueinfo.site.ids).

Only the GlueHost entries are read (DN and GlueHostName): their DNs say which
SubCluster of which Cluster each host is in.  An earlier glueinfo (or an
upgrade from another provider with the same DN layout) named those
SubClusters; adopting the names keeps the first publish after an upgrade
from renaming them.
"""

from __future__ import annotations

from typing import Any

from glueinfo.core.ldif import Entry
from glueinfo.core.text import one_line
from glueinfo.glue.ldap_connection import LdapTarget, PublishError, connect


def read_hosts(target: LdapTarget) -> list[Entry]:
    """The GlueHost entries under ``target.base_dn``; PublishError (one line) when the server
    cannot be read.  A base that does not exist yet gives no entries."""
    conn = connect(target)
    try:
        found: list[Entry] = []
        results: Any = conn.extend.standard.paged_search(target.base_dn, "(objectClass=GlueHost)", search_scope="SUBTREE",
                                                         attributes=["GlueHostName"], paged_size=1000, generator=True)
        try:
            for item in results:
                if item.get("type") != "searchResEntry":
                    continue
                names = item.get("attributes", {}).get("GlueHostName") or []
                found.append(Entry.from_lists(item["dn"], {"GlueHostName": [str(n) for n in names]}))
        except Exception as exc:  # noSuchObject for a fresh server, or the connection dropped: nothing to adopt
            raise PublishError(f"{target.url}: cannot read the published hosts: {one_line(exc, 160)}") from None
        return found
    finally:
        try:
            conn.unbind()
        except Exception:  # closing anyway
            pass
