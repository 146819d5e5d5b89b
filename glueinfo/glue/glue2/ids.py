"""GLUE 2 ID forms and per-CE-type vocabulary, as each CE type's own provider published them.

Workload managers parse GLUE 2 IDs (DIRAC takes the CE host from a
ServiceID or an EndpointID, ARC's client the ``urn:ogf:`` forms), so each CE
type declared by ``[ce:NAME] implementation_name`` gets the forms its own
information provider used (docs/glue2-mapping.md lists them with their
source):

- ``HTCondorCE`` (HTCondor-CE's BDII provider, removed in 2025): Endpoint
  ``<host>_HTCondorCE``, Share ``<host>_<vo>_share`` (``<host>_<queue>_<vo>_share`` with several queues), Manager
  ``<service>_Manager``, URL ``condor://host:port``, Type and InterfaceName
  ``org.opensciencegrid.htcondorce``;
- ``ARC-CE`` (A-REX's infoproviders): ``urn:ogf:<Kind>:<host>:...``, Type
  ``org.nordugrid.arex``, InterfaceName ``org.nordugrid.arcrest``,
  ImplementationName ``nordugrid-arc``;
- ``CREAM`` (gLite CREAM's GLUE 2 provider): Service
  ``<host>_ComputingElement``, Endpoint ``<host>_org.glite.ce.CREAM``,
  Share ``<queue>_<vo>_<service>``;
- anything else: the host-based forms of CREAM with the admin's values, and no
  middleware claimed: type, interface and URL unknown unless ``[ce:NAME]``
  ``service_type``, ``interface_name`` and ``endpoint_url`` say them.

Functions here only format strings; nothing is looked up.
"""

from __future__ import annotations

from glueinfo.core.records import dataclass


@dataclass(frozen=True)
class CeKind:
    """What one CE type publishes by default."""

    key: str  # "htcondorce", "arc", "cream", "generic"
    service_type: str
    interface_name: str
    implementation_name: str  # GLUE2EndpointImplementationName
    implementor: str
    technology: str  # GLUE2EndpointTechnology ("" to leave out)
    url_form: str  # formatted with host, port, jobmanager, lrms
    daemon: str  # process name of the CE daemon ("" for no process check)
    job_description: tuple[str, ...] = ()


HTCONDOR_CE = CeKind("htcondorce", "org.opensciencegrid.htcondorce", "org.opensciencegrid.htcondorce", "HTCondor",
                     "HTCondor", "", "condor://{host}:{port}", "condor_master", ("condor",))
ARC_CE = CeKind("arc", "org.nordugrid.arex", "org.nordugrid.arcrest", "nordugrid-arc", "NorduGrid", "webservice",
                "https://{host}:{port}/arex", "arched", ("nordugrid:xrsl", "emies:adl"))
CREAM_CE = CeKind("cream", "org.glite.ce.CREAM", "org.glite.ce.CREAM", "CREAM", "gLite", "webservice",
                  "https://{host}:{port}/ce-cream/services", "", ("glite:jdl",))
# A CE whose type is neither declared nor found: nothing about its middleware is known, so none
# is claimed (no CREAM, no GRAM); the renderer writes GLUE's place-holders where the schema
# requires a value (glueinfo.glue.glue2.render).
GENERIC_CE = CeKind("generic", "", "", "", "", "", "", "")

# implementation_name as admins write it (case, spaces, dashes and underscores ignored) -> kind
_KINDS = {"htcondorce": HTCONDOR_CE, "condorce": HTCONDOR_CE, "arcce": ARC_CE, "arc": ARC_CE, "nordugridarc": ARC_CE,
          "arex": ARC_CE, "cream": CREAM_CE, "creamce": CREAM_CE}


def ce_kind(implementation_name: str) -> CeKind:
    """The CE type an ``implementation_name`` names; GENERIC_CE for any other (or none)."""
    key = "".join(c for c in implementation_name.lower() if c.isalnum())
    return _KINDS.get(key, GENERIC_CE)


def _vo_part(vo: str) -> str:
    return vo.replace(",", "_").replace("=", "_").replace("+", "_")


class Ids:
    """The IDs of one ComputingService's entities, in its CE type's forms.

    ``host``: the CE host (the service's name); ``kind``: its CeKind.
    """

    def __init__(self, kind: CeKind, host: str) -> None:
        self.kind = kind
        self.host = host

    @property
    def service(self) -> str:
        if self.kind is ARC_CE:
            return f"urn:ogf:ComputingService:{self.host}:arex"
        if self.kind is HTCONDOR_CE:
            return self.host  # the provider named the service after the pool's central manager; glueinfo's is the CE host
        return f"{self.host}_ComputingElement"

    def endpoint(self, url: str, interface: str) -> str:
        """``interface``: the InterfaceName published (a place-holder when it is not known)."""
        if self.kind is ARC_CE:
            return f"urn:ogf:ComputingEndpoint:{self.host}:rest:{url}"
        if self.kind is HTCONDOR_CE:
            return f"{self.host}_HTCondorCE"
        return f"{self.host}_{interface}"

    def manager(self, lrms: str) -> str:
        if self.kind is ARC_CE:
            return f"urn:ogf:ComputingManager:{self.host}:{lrms}"
        if self.kind is HTCONDOR_CE:
            return f"{self.service}_Manager"
        return f"{self.service}_Manager" if lrms == "" else f"{self.service}_{lrms}_Manager"

    def share(self, queue: str, vo: str, one_queue: bool = False) -> str:
        """``one_queue``: the service has one queue (HTCondor-CE's provider knew no other case
        and named shares by VO only; with several queues the queue is put before the VO)."""
        vo = _vo_part(vo)
        if self.kind is ARC_CE:
            return f"urn:ogf:ComputingShare:{self.host}:{queue}_{vo}"
        if self.kind is HTCONDOR_CE:
            return f"{self.host}_{vo}_share" if one_queue else f"{self.host}_{queue}_{vo}_share"
        return f"{queue}_{vo}_{self.service}"

    def access_policy(self, endpoint_id: str) -> str:
        if self.kind is ARC_CE:
            return f"urn:ogf:AccessPolicy:{self.host}:basic"
        return f"{endpoint_id}_policy"

    def mapping_policy(self, share_id: str, queue: str, vo: str) -> str:
        if self.kind is ARC_CE:
            return f"urn:ogf:MappingPolicy:{self.host}:basic:{queue}_{_vo_part(vo)}"
        return f"{share_id}_policy"

    def execution_environment(self, subcluster: str) -> str:
        if self.kind is ARC_CE:
            return f"urn:ogf:ExecutionEnvironment:{self.host}:{subcluster}"
        return f"{self.service}_{subcluster}"

    def benchmark(self, ee_id: str, kind: str) -> str:
        if self.kind is ARC_CE:
            return f"urn:ogf:Benchmark:{self.host}:{ee_id.rsplit(':', 1)[-1]}:{kind}"
        return f"{ee_id}_{kind}"

    def application_environment(self, tag: str) -> str:
        if self.kind is ARC_CE:
            return f"urn:ogf:ApplicationEnvironment:{self.host}:rte:{tag}"
        return f"{self.service}_{tag}"

    def to_storage(self, storage_id: str) -> str:
        if self.kind is ARC_CE:
            return f"urn:ogf:ToStorageElement:{self.host}:{storage_id}"
        return f"{self.service}_{storage_id}"


def admin_domain_ids(site_id: str) -> tuple[str, str]:
    """(LocationID, ContactID prefix) of the site's AdminDomain."""
    return f"{site_id}_location", f"{site_id}_contact"
