"""Each CE as the GLUE 2 renderer resolves it, handed to the CRR renderer (glueinfo.catalogs.crr).

glueinfo.catalogs sits beside glueinfo.glue and does not import it, so the
publish layer, which composes every document, reads the CEs through the GLUE 2
renderer's own functions and hands the result down: the endpoint
(glueinfo.glue.glue2.ces.ce_views: URL, interface, implementation; its ID by
glueinfo.glue.glue2.ids), the serving state (render.serving_state), the VOs of
the access rules (glueinfo.site.access.vos_of) and the limits
(render.share_limits).  The CRR's access points and limits are then the GLUE 2
tree's, never a second reading of the config.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from glueinfo.catalogs.crr import AccessPoint, ShareFacts
from glueinfo.glue.glue2.ces import ce_views
from glueinfo.glue.glue2.ids import ARC_CE, CREAM_CE, HTCONDOR_CE, Ids
from glueinfo.glue.glue2.render import serving_state, share_limits
from glueinfo.site.access import vos_of

if TYPE_CHECKING:
    from glueinfo.glue.glue2.ces import CeView
    from glueinfo.site.assemble import AssembledSite

# The CE types glueinfo knows, by the flavour names CRIC gives CEs.
FLAVOURS = {HTCONDOR_CE.key: "HTCONDOR-CE", ARC_CE.key: "ARC-CE", CREAM_CE.key: "CREAM-CE"}


def access_point(view: CeView) -> AccessPoint | None:
    """The CE's endpoint as GLUE 2 publishes it, named by its GLUE 2 EndpointID (by its URL when
    its interface is not known); None when its URL is not known (GLUE 2 then writes a
    place-holder, which no CRR repeats)."""
    if not view.url:
        return None
    name = Ids(view.kind, view.spec.host).endpoint(view.url, view.interface_name) if view.interface_name else view.url
    return AccessPoint(name=name, url=view.url, interface_name=view.interface_name,
                       interface_version=view.interface_version, flavour=FLAVOURS.get(view.kind.key, ""),
                       version=view.implementation_version)


def crr_shares(site: AssembledSite) -> dict[str, ShareFacts]:
    """CE unique id -> its ShareFacts.  Glue2Error (one line, naming the section and key) for a
    malformed ``[ce:NAME]`` GLUE 2 value, as the GLUE 2 tree raises it."""
    shares = {}
    for view in ce_views(site.model):
        spec = view.spec
        state = site.states.get(spec.unique_id)
        shares[spec.unique_id] = ShareFacts(access_point=access_point(view), serving_state=serving_state(state, spec.status),
                                            vos=tuple(vos_of(spec.access)), limits=share_limits(view, state))
    return shares
