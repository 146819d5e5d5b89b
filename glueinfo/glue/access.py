"""Moved to glueinfo.site.access (the OSG_ResourceCatalog reads a CE's VOs too, and glueinfo.catalogs
may not import glueinfo.glue).  Kept as a re-export for code written against this path meanwhile;
import glueinfo.site.access."""

from glueinfo.site.access import vo_of_rule, vos_of, whole_vo_rule

__all__ = ["vo_of_rule", "vos_of", "whole_vo_rule"]
