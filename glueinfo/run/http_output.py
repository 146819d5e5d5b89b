"""The ``http`` output: the HTTP store (glueinfo.run.http.NodeStore) given each publish's documents.

The daemon's server (``[run] serve``, and ``glueinfo serve``) answers from
the store: /ldif is the publish's LDIF, /glue2.json its GLUE 2 objects,
/crr.json its CRR document, /nodes.xml and SSSRMAP queries the site's Nodes, /node.xml this host with
the daemon's self-metrics.  The store holds the documents of the last
publish only; the site itself is the assembler's, shared, not copied.  A
publish in which no host changed only renews this host's own Node.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from glueinfo.publish.outputs import OutputContext, OutputPlugin, OutputResult, Publication
from glueinfo.run.http import NodeStore, Refreshed

if TYPE_CHECKING:
    from glueinfo.publish.documents import Documents

log = logging.getLogger(__name__)


class HttpOutput:
    name = "http"

    def __init__(self, store: NodeStore) -> None:
        self.store = store
        self.latest = Refreshed(local=None, snapshots=[])

    def refreshed(self) -> Refreshed:
        """The store's refresh callback: the last publish's documents."""
        return self.latest

    def publish(self, publication: Publication) -> OutputResult:
        documents = publication.documents
        local = publication.local
        if documents is not None:
            # No host changed: the Node documents are kept (below), so none is made for the store.
            self.latest = refreshed(documents, local, with_nodes=publication.hosts_changed)
        if not publication.hosts_changed or documents is None:
            # No host changed: the Node documents (and their SSSRMAP objects) stay; the rest is renewed.
            if self.store.update_local(local, self.latest if documents is not None else None):
                return OutputResult(written=documents is not None)
        if not self.store.refresh_once():
            return OutputResult(error=str(self.store.last_refresh.get("error") or "the HTTP store was not refreshed"))
        return OutputResult(written=True)


def refreshed(documents: Documents, local: Any, with_nodes: bool = True) -> Refreshed:
    """What the store serves from one publish's documents: the LDIF as the publish's own pieces,
    the Node XML it made (its pieces, shared with the file output; re-rendered by the store only
    when a State changes with the clock), the GLUE 2 entries for /glue2.json, the CRR document for /crr.json, the site
    for /haizea/site.xml and the status page."""
    glue2 = documents.glue2
    site = documents.site
    chunks = documents.node_xml_chunks() if with_nodes else None
    return Refreshed(local=local, snapshots=site.snapshots(), problems=list(site.failures),
                     ldif=documents.ldif_pieces(), ldif_error=documents.glue2_error, site=site,
                     glue2=glue2.entries if glue2 is not None else None, crr=documents.crr_json,
                     nodes_xml=chunks, rendered_at=site.assembled_at)


def http_plugin(store: Any) -> OutputPlugin:
    """The ``http`` output plugin over this process's store (made by the daemon, which holds the server)."""
    return OutputPlugin("http", lambda context: HttpOutput(store),
                        description="the HTTP server's documents ([run] serve, glueinfo serve)")


__all__ = ["HttpOutput", "OutputContext", "http_plugin", "refreshed"]
