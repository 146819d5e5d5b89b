"""Every document of an assembled site, made once per publish: the output side's one core.

The input side has one core (glueinfo.site.assemble: which hosts the site
has); this is its twin.  From an ``AssembledSite`` and typed
:class:`~glueinfo.site.publish_settings.PublishSettings`, a
:class:`Publisher` makes the GLUE 1.3 and GLUE 2 LDIF, the GLUE 2 JSON, the
site's Node XML and the Haizea site, each only when an output asks for it
and at most once per publish (:class:`Documents`).  Every command and the
daemon call it; nothing else composes a document, so ``[glue] versions``,
the tree order (o=grid, a blank line, o=glue) and the checks are the same
everywhere.

A daemon keeps one Publisher for its life: it holds what is kept between
publishes (the GLUE 1.3 render cache, GLUE 2 CreationTimes, the Node
markup pieces, the schemas read once).  A one-shot command makes one and
uses it once.

Failure behaviour: a bad template raises TemplateError and malformed GLUE 2
CE settings raise Glue2Error (the config is wrong: one line, the command
stops).  Data problems never raise: entries the schema check refuses are
left out and named in ``errors``; a daemon's GLUE 2 failure is logged and
leaves the GLUE 1.3 tree and the Node XML published (``glue2_error``).
"""

from __future__ import annotations

import functools
import io
import logging
from collections.abc import Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, Optional

from glueinfo.core.errors import PublicationError
from glueinfo.core.records import dataclass
from glueinfo.core.text import one_line
from glueinfo.glue.build import AUTO, RenderCache, SiteBuild, render_site, write_site
from glueinfo.glue.glue2.check import Glue2Build
from glueinfo.glue.glue2.publish import LOAD_SCHEMA, build_glue2
from glueinfo.glue.glue2.render import RESOURCE_GROUP, Glue2Options
from glueinfo.glue.glue2.times import CreationTimes

if TYPE_CHECKING:
    from glueinfo.core.ldif import Entry
    from glueinfo.site.assemble import AssembledSite
    from glueinfo.site.publish_settings import PublishSettings
    from glueinfo.sss.node_markup_cache import NodeMarkupCache

log = logging.getLogger(__name__)


def glue2_base(settings: PublishSettings) -> Optional[str]:
    """The subtree an LDAP output keeps equal to the GLUE 2 entries when ``[ldap] extra_bases``
    names none: ``GLUE2GroupID=resource,o=glue`` (resource form) or ``o=glue`` (site form);
    None when this site publishes no GLUE 2 tree (no ``[site] id``, or ``versions`` without
    2.0): then nothing under o=glue is touched, whoever wrote it."""
    if not settings.publishes("2.0") or not settings.site_id:
        return None
    return "o=glue" if settings.dit == "site" else RESOURCE_GROUP


def glue2_options(settings: PublishSettings) -> Glue2Options:
    """The GLUE 2 renderer's options ([glue] dit and validity) from the publish settings."""
    return Glue2Options(dit=settings.dit, validity_s=settings.validity_s)


@dataclass(frozen=True)
class LdifPieces:
    """The LDIF as a publish keeps it anyway: each GLUE 1.3 entry's text (the render cache's own
    strings, not copies) and the o=glue tree; made whole only for an answer that needs it (the
    HTTP store's /ldif), so a server holds no second 40 MB copy between publishes."""

    build: Optional[SiteBuild]  # the GLUE 1.3 tree (None: versions leave it out)
    tail: bytes
    entries: int

    def to_bytes(self) -> bytes:
        return self.build.ldif_bytes(self.tail) if self.build is not None else self.tail


class Publisher:
    """Makes :class:`Documents`; keeps, between publishes, what makes the next one cheap.

    ``daemon``: keep the caches of a long-lived publisher (GLUE 1.3 texts, Node markup pieces,
    CreationTimes for the process's life); a one-shot command leaves it False.  ``schema`` and
    ``templates``: GLUE 1.3's, read once by a daemon (default: read at each publish).
    ``glue2_schema``: GLUE20.schema as glueinfo.glue.glue2.check.load_glue2_schema gave it
    (default: read when there are GLUE 2 entries).  ``times``: a CreationTime memory a one-shot
    publisher kept in a file (glueinfo publish).  ``check_health``: connect to the endpoints for
    GLUE 2 HealthState (off: unknown, 'not checked').
    """

    def __init__(self, settings: PublishSettings, *, daemon: bool = False, schema: Any = AUTO, templates: Any = None,
                 glue2_schema: Any = LOAD_SCHEMA, times: Optional[CreationTimes] = None, check_health: bool = True,
                 keep_entries: bool = False) -> None:
        self.settings = settings
        self.daemon = daemon
        self.schema, self.templates, self.glue2_schema = schema, templates, glue2_schema
        self.check_health = check_health
        self.times = times if times is not None else (CreationTimes() if daemon else None)
        self.render_cache: Optional[RenderCache] = RenderCache(keep_entries=keep_entries) if daemon else None
        self.last_glue2: Optional[Glue2Build] = None  # a daemon's last good GLUE 2 tree, kept through a failure
        self.node_markup: Optional[NodeMarkupCache] = None
        if daemon:  # a one-shot command that prints LDIF never loads the Node XML renderer
            from glueinfo.sss.node_markup_cache import NodeMarkupCache

            self.node_markup = NodeMarkupCache()

    def keep_entries(self, keep: bool) -> None:
        """Whether each publish must hand over every GLUE 1.3 entry (an LDAP output syncs them) or
        only their texts (files and HTTP): switching renders the next publish in full."""
        if self.render_cache is not None and self.render_cache.keep_entries != keep:
            self.render_cache = RenderCache(keep_entries=keep)

    def documents(self, site: AssembledSite) -> Documents:
        """The documents of this site; each is made when first asked for (see :class:`Documents`)."""
        return Documents(self, site)


class Documents:
    """One publish's documents of one site, each made at most once, when first asked for.

    The LDIF is o=grid's tree (when ``versions`` has 1.3), then a blank line and o=glue's (when
    it has 2.0 and the site has an id): the same bytes from every command and output."""

    def __init__(self, publisher: Publisher, site: AssembledSite) -> None:
        self.publisher = publisher
        self.settings = publisher.settings
        self.site = site
        self.glue2_error: Optional[str] = None  # why the daemon's GLUE 2 tree was not made this time
        self._streamed = False  # the GLUE 1.3 tree went to a stream as it was made, kept nowhere

    # -- GLUE ----------------------------------------------------------------------------------
    @functools.cached_property
    def glue13(self) -> Optional[SiteBuild]:
        """The checked GLUE 1.3 tree, or None when ``versions`` leaves it out.  TemplateError."""
        if not self.settings.publishes("1.3"):
            return None
        p = self.publisher
        build = render_site(self.site, publish_hosts=self.settings.publish_hosts, schema=p.schema,
                            templates=p.templates, cache=p.render_cache)
        for problem in build.errors:
            log.debug("GLUE 1.3: left out %s", problem)
        return build

    @functools.cached_property
    def glue2(self) -> Optional[Glue2Build]:
        """The checked GLUE 2 tree, or None when ``versions`` leaves it out (or, in a daemon, when
        it failed: ``glue2_error`` says why).  Glue2Error for malformed CE settings (one-shot)."""
        if not self.settings.publishes("2.0"):
            return None
        p = self.publisher
        options = glue2_options(self.settings)
        try:
            build = build_glue2(self.site, options, self.site.assembled_at, p.times, check_health=p.check_health,
                                schema=p.glue2_schema)
        except Exception as exc:
            if not p.daemon:
                raise
            # A GLUE 2 failure must not stop GLUE 1.3 and Node XML, nor withdraw the GLUE 2 tree already
            # published (the LDAP sync would delete it, the file lose it): the last good one stays, said.
            self.glue2_error = f"{type(exc).__name__}: {one_line(exc)}"
            kept = "; the last good GLUE 2 tree stays published" if p.last_glue2 is not None else ""
            log.warning("GLUE 2 not made: %s%s", self.glue2_error, kept)
            return p.last_glue2
        if p.daemon:
            p.last_glue2 = build
        return build

    @property
    def errors(self) -> list[Any]:
        """Entries left out by the schema checks, by DN (o=grid's, then o=glue's)."""
        return [*(self.glue13.errors if self.glue13 else ()), *(self.glue2.errors if self.glue2 else ())]

    @property
    def warnings(self) -> list[str]:
        return [*(self.glue13.warnings if self.glue13 else ()), *(self.glue2.warnings if self.glue2 else ())]

    @functools.cached_property
    def _glue2_tail(self) -> bytes:
        glue2 = self.glue2
        if glue2 is None or not glue2.entries:
            return b""
        return (b"\n" if self.glue13 is not None else b"") + glue2.ldif().encode()

    def write_ldif(self, stream: IO[bytes]) -> None:
        """Write the LDIF to ``stream``.  A one-shot publisher that has not built the GLUE 1.3 tree
        yet writes it as it is produced, never holding it (100,000 hosts in flat memory); the
        build's errors and warnings are kept all the same, and asking for the LDIF or the entries
        again afterwards is a PublicationError (they were not kept)."""
        if "glue13" not in self.__dict__ and self.publisher.render_cache is None and self.settings.publishes("1.3"):
            text = io.TextIOWrapper(stream, encoding="utf-8", newline="\n", write_through=True)
            p = self.publisher
            self.__dict__["glue13"] = write_site(self.site, text, publish_hosts=self.settings.publish_hosts,
                                                 schema=p.schema, templates=p.templates)
            text.write(self._glue2_tail.decode())
            text.flush()
            text.detach()
            self._streamed = True
            return
        for piece in self.ldif_chunks():
            stream.write(piece)

    def _kept(self) -> None:
        if self._streamed:
            raise PublicationError("the GLUE 1.3 tree was written as it was made (write_ldif) and not kept")

    def ldif_chunks(self) -> Iterator[bytes]:
        """The LDIF as pieces (one per GLUE 1.3 entry, then the o=glue tree), for a writer that
        never needs the document whole (10,000 hosts: 40 MB)."""
        self._kept()
        if self.glue13 is not None:
            yield from self.glue13.ldif_chunks(self._glue2_tail)
        else:
            yield self._glue2_tail

    @functools.cached_property
    def ldif(self) -> bytes:
        """The LDIF whole (kept once per publish)."""
        return self.ldif_pieces().to_bytes()

    def ldif_pieces(self) -> LdifPieces:
        """The LDIF as :class:`LdifPieces` (the daemon's GLUE 1.3 texts shared, not copied)."""
        self._kept()
        return LdifPieces(self.glue13, self._glue2_tail, self.entry_count())

    def entries(self) -> list[Entry]:
        """Every entry, parents first, o=grid's then o=glue's: what an LDAP server is made to hold.
        PublicationError when this daemon's publisher keeps only the entries' texts (an output that
        reads entries declares ``needs_entries``)."""
        self._kept()
        cache = self.publisher.render_cache
        if cache is not None and not cache.keep_entries and self.settings.publishes("1.3"):
            raise PublicationError("this publisher keeps the GLUE 1.3 entries as texts only: an output that reads "
                                   "Documents.entries() declares needs_entries=True in its OutputPlugin")
        return [*(self.glue13.entries if self.glue13 else ()), *(self.glue2.entries if self.glue2 else ())]

    def entry_count(self) -> int:
        glue13 = self.glue13
        count = (len(glue13.texts) or len(glue13.entries)) if glue13 is not None else 0
        return count + (len(self.glue2.entries) if self.glue2 is not None else 0)

    @functools.cached_property
    def glue2_json(self) -> Optional[bytes]:
        """The GLUE 2 entries in the OGF GLUE 2 JSON rendering (with the GLUE 2.1 accelerator objects
        the LDAP tree leaves out), or None without a GLUE 2 tree."""
        from glueinfo.glue.glue2.json import glue2_json_document

        if self.glue2 is None:
            return None
        return glue2_json_document(self.glue2.entries, self.glue2.json_only)

    @functools.cached_property
    def crr_json(self) -> Optional[bytes]:
        """WLCG's Computing Resource Reporting document of the site (glueinfo.catalogs.crr: its CEs'
        queues, its hosts' capacity, the GLUE 2 endpoints as access points; docs/crr.md), or None
        when the site has neither ``[site] name`` nor ``id``.  Glue2Error for malformed CE settings
        (one-shot); a daemon logs it and has no CRR this publish, as for GLUE 2."""
        from glueinfo.catalogs.crr import crr_document
        from glueinfo.publish.crr_facts import crr_shares

        try:
            return crr_document(self.site, self.settings, crr_shares(self.site))
        except Exception as exc:
            if not self.publisher.daemon:
                raise
            log.warning("CRR not made: %s: %s", type(exc).__name__, one_line(exc))
            return None

    # -- SSS and Haizea ------------------------------------------------------------------------
    @functools.cached_property
    def _node_chunks(self) -> Optional[list[bytes]]:
        from glueinfo.sss.node_templates import NodeRenderError
        from glueinfo.sss.node_xml import render_data_chunks

        try:
            if self.publisher.node_markup is not None:
                return render_data_chunks(self.site.snapshots(), self.site.assembled_at, self.settings.node,
                                          self.publisher.node_markup)
            return [self.node_xml(pretty=True)]
        except NodeRenderError as exc:
            log.warning("Node XML not written: %s", exc)
            return None

    def node_xml_chunks(self) -> Optional[list[bytes]]:
        """The site's Node XML ``<Data>`` (what ``node-xml --site`` prints) as pieces, made once per
        publish (a file output and the HTTP store share them), or None after a warning when it
        cannot be rendered (a file output then keeps its old file)."""
        return self._node_chunks

    def node_xml(self, pretty: bool = True) -> bytes:
        """The site's Node XML whole.  NodeRenderError."""
        from glueinfo.sss.node_xml import render_data

        return render_data(self.site.snapshots(), self.site.assembled_at, self.settings.node, pretty=pretty)

    def haizea_site(self, now: float) -> bytes:
        """The site as a Haizea ``<site>``, its hosts' States as of ``now``.  HaizeaError."""
        from glueinfo.haizea.site import site_document

        return site_document(self.site, now, self.settings.node)

    def haizea_workload(self, now: float, jobs: Sequence[Any], name: str = "",
                        preemptible: Optional[bool] = None) -> bytes:
        """The batch ``jobs`` (glueinfo.lrms.registry.site_jobs) on this site's hosts as a Haizea
        ``<lease-workload>`` named ``name`` (default: [site] name, else its id, else glueinfo).
        HaizeaError when no host is left to describe."""
        from glueinfo.haizea.site import site_nodes
        from glueinfo.haizea.workload import workload_document

        info = self.site.model.site
        ces = [ce.unique_id for ce in self.site.model.ces if ce.lrms != "fork"]
        return workload_document(name or info.name or info.unique_id or "glueinfo", ces,
                                 site_nodes(self.site, now, self.settings.node), jobs, now, preemptible)

    # -- catalogs ------------------------------------------------------------------------------
    @functools.cached_property
    def osg_resource_catalog(self) -> bytes:
        """The HTCondor-CE config file advertising the site's ``OSG_ResourceCatalog``: one pilot
        entry per CE queue and SubCluster, with the measured CPUs, memory, GPUs, wall time, VOs
        and OS (glueinfo.catalogs.resource_catalog; docs/htcondor-ce.md).  Never raises on the
        site's data."""
        from glueinfo.catalogs.resource_catalog import resource_catalog

        return resource_catalog(self.site)
