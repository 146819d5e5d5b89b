"""GLUE 1.3 entries a site used to write by hand: its CE services, its resource BDII, its CE-SE bindings.

- **GlueService** per CE endpoint of a CE whose type is declared (``implementation_name`` or
  ``endpoint_url``, and the URL and service type are known: from a type glueinfo knows or from
  ``endpoint_url`` and ``service_type``; one per URL, as ``lcg-infosites`` and site BDIIs list them): UniqueID and
  Endpoint the endpoint URL (``[ce:NAME] endpoint_url``, else the CE type's form:
  glueinfo.glue.glue2.ids), Type the CE type's service type, Version
  ``implementation_version``, Name ``<site>-<type>``, the CEs' access rules, a foreign key to
  the site.  No status is published: what a check found is GLUE 2's HealthState.
- **GlueService** of the resource BDII when ``[glue] information_service_url`` is set (type
  ``bdii_resource``).
- **GlueCESEBindGroup** per CE with ``[ce:NAME] close_se``, one **GlueCESEBind** per SE below it
  (access point and mount info the local path of ``SE_ID=LOCAL_PATH[:REMOTE_PATH]``, weight 0).

Entries follow the forms the ``ldif/`` examples had (they load into slapd with the glue-schema).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from glueinfo.core.ldif import Entry, make_dn
from glueinfo.site.model import SiteModel

SERVICE_CLASSES = ["GlueTop", "GlueService", "GlueKey", "GlueSchemaVersion"]
BIND_CLASSES = ["GlueGeneralTop", "GlueCESEBindGroup", "GlueSchemaVersion"]
ONE_BIND_CLASSES = ["GlueGeneralTop", "GlueCESEBind", "GlueSchemaVersion"]
VERSION = {"GlueSchemaVersionMajor": [1], "GlueSchemaVersionMinor": [3]}


def _entry(dn: str, classes: list[str], attributes: dict[str, list[Any]]) -> Entry:
    values: dict[str, list[Any]] = {"objectClass": list(classes)}
    values.update({name: [v for v in vs if v not in (None, "")] for name, vs in attributes.items()})
    values.update(VERSION)
    return Entry(dn, {name: vs for name, vs in values.items() if vs})


def service_entries(site: SiteModel) -> list[Entry]:
    """The CEs' GlueServices, one per endpoint URL, and the resource BDII's (see the module docstring)."""
    from glueinfo.glue.glue2.ces import ce_view  # here: the glue2 package imports the GLUE 1.3 build it sits beside

    base = site.glue.base_dn
    site_id = site.site.unique_id
    services: dict[str, tuple[str, str, list[str]]] = {}  # URL -> (type, version, access rules)
    for ce in site.ces:
        if not ce.implementation_name and not ce.options.get("endpoint_url"):
            continue  # a CE whose type the admin did not declare: no service record to guess
        view = ce_view(ce)
        if not view.url or not view.service_type:
            continue  # a type glueinfo does not know, without endpoint_url and service_type: nothing true to write
        service_type, version, rules = services.setdefault(view.url, (view.service_type, view.implementation_version, []))
        rules.extend(rule for rule in ce.access if rule not in rules)
    entries = []
    for url, (service_type, version, rules) in services.items():
        entries.append(_entry(make_dn("GlueServiceUniqueID", url, base), SERVICE_CLASSES, {
            "GlueServiceUniqueID": [url], "GlueServiceName": [f"{site_id or urlsplit(url).hostname}-{service_type}"],
            "GlueServiceType": [service_type], "GlueServiceVersion": [version], "GlueServiceEndpoint": [url],
            "GlueServiceAccessControlBaseRule": list(rules),
            "GlueForeignKey": [f"GlueSiteUniqueID={site_id}"] if site_id else []}))
    bdii = site.glue.information_service_url
    if bdii:
        host = urlsplit(bdii).hostname or bdii
        unique_id = f"{host}_bdii_resource"
        entries.append(_entry(make_dn("GlueServiceUniqueID", unique_id, base), SERVICE_CLASSES, {
            "GlueServiceUniqueID": [unique_id], "GlueServiceName": [f"{site_id or host}-bdii_resource"],
            "GlueServiceType": ["bdii_resource"], "GlueServiceEndpoint": [bdii],
            "GlueForeignKey": [f"GlueSiteUniqueID={site_id}"] if site_id else []}))
    return entries


def cese_bind_entries(site: SiteModel) -> list[Entry]:
    """A GlueCESEBindGroup per CE with close SEs, each SE's GlueCESEBind below it."""
    from glueinfo.glue.glue2.ces import ce_view  # see service_entries

    base = site.glue.base_dn
    entries = []
    for ce in site.ces:
        storage = ce_view(ce).close_storage
        if not storage:
            continue
        group_dn = make_dn("GlueCESEBindGroupCEUniqueID", ce.unique_id, base)
        entries.append(_entry(group_dn, BIND_CLASSES, {
            "GlueCESEBindGroupCEUniqueID": [ce.unique_id],
            "GlueCESEBindGroupSEUniqueID": list(dict.fromkeys(s.service_id for s in storage))}))
        for se in dict((s.service_id, s) for s in storage).values():
            entries.append(_entry(make_dn("GlueCESEBindSEUniqueID", se.service_id, group_dn), ONE_BIND_CLASSES, {
                "GlueCESEBindSEUniqueID": [se.service_id], "GlueCESEBindCEUniqueID": [ce.unique_id],
                "GlueCESEBindCEAccesspoint": [se.local_path], "GlueCESEBindMountInfo": [se.local_path],
                "GlueCESEBindWeight": [0]}))
    return entries
