"""The ``http`` output: the HTTP store (glueinfo.run.http.NodeStore) given each publish's documents.

The daemon's server (``[run] serve``, and ``glueinfo serve``) answers from
the store: /ldif is the publish's LDIF (none on a worker's agent, ``serve
--no-ldif``, which makes no GLUE document at all), /glue2.json its GLUE 2 objects,
/crr.json its CRR document, /nodes.xml and SSSRMAP queries the site's Nodes, /node.xml this host with
the daemon's self-metrics.  The store holds the documents of the last
publish only; the site itself is the assembler's, shared, not copied.  A
publish in which no host changed only renews this host's own Node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from glueinfo.publish.outputs import OutputContext, OutputPlugin, OutputResult, Publication
from glueinfo.run.http import NodeStore, Refreshed

if TYPE_CHECKING:
    from glueinfo.publish.documents import Documents

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeOptions:
    """What makes a provider ``glueinfo serve``: the http output alone, from the command line."""

    listen: Optional[str] = None  # --listen, over [serve] listen
    ldif_off: Optional[str] = None  # why no GLUE document is made (--no-ldif: a worker's agent), None: they are
    # Told the "serving http://HOST:PORT/ ..." line once the server answers (serve prints it whatever
    # the log level: scripts wait for it); None: logged at INFO, as run does.
    announce: Optional[Callable[[str], None]] = None


class HttpOutput:
    name = "http"

    def __init__(self, store: NodeStore, ldif_off: Optional[str] = None) -> None:
        self.store = store
        self.ldif_off = ldif_off
        self.latest = Refreshed(local=None, snapshots=[])

    def refreshed(self) -> Refreshed:
        """The store's refresh callback: the last publish's documents."""
        return self.latest

    def publish(self, publication: Publication) -> OutputResult:
        documents = publication.documents
        local = publication.local
        if documents is not None:
            # No host changed: the Node documents are kept (below), so none is made for the store.
            self.latest = refreshed(documents, local, with_nodes=publication.hosts_changed, ldif_off=self.ldif_off)
        if not publication.hosts_changed or documents is None:
            # No host changed: the Node documents (and their SSSRMAP objects) stay; the rest is renewed.
            if self.store.update_local(local, self.latest if documents is not None else None):
                return OutputResult(written=documents is not None)
        if not self.store.refresh_once():
            return OutputResult(error=str(self.store.last_refresh.get("error") or "the HTTP store was not refreshed"))
        return OutputResult(written=True)


def refreshed(documents: Documents, local: Any, with_nodes: bool = True, ldif_off: Optional[str] = None) -> Refreshed:
    """What the store serves from one publish's documents: the LDIF as the publish's own pieces,
    the Node XML it made (its pieces, shared with the file output; re-rendered by the store only
    when a State changes with the clock), the GLUE 2 entries for /glue2.json, the CRR document for /crr.json, the site
    for /haizea/site.xml and the status page.  ``ldif_off``: no GLUE or CRR document is made (the
    documents are made when asked for), and /ldif says why."""
    site = documents.site
    chunks = documents.node_xml_chunks() if with_nodes else None
    if ldif_off is not None:
        return Refreshed(local=local, snapshots=site.snapshots(), problems=list(site.failures), ldif_off=ldif_off,
                         site=site, nodes_xml=chunks, rendered_at=site.assembled_at)
    glue2 = documents.glue2
    return Refreshed(local=local, snapshots=site.snapshots(), problems=list(site.failures),
                     ldif=documents.ldif_pieces(), ldif_error=documents.glue2_error, site=site,
                     glue2=glue2.entries if glue2 is not None else None, crr=documents.crr_json,
                     nodes_xml=chunks, rendered_at=site.assembled_at)


def http_plugin(store: Any, ldif_off: Optional[str] = None) -> OutputPlugin:
    """The ``http`` output plugin over this process's store (made by the daemon, which holds the server)."""
    return OutputPlugin("http", lambda context: HttpOutput(store, ldif_off),
                        description="the HTTP server's documents ([run] serve, glueinfo serve)")


__all__ = ["HttpOutput", "OutputContext", "ServeOptions", "http_plugin", "refreshed"]
