"""Haizea export: the site as a Haizea ``<site>`` and the batch jobs as an LWF ``<lease-workload>``.

The renderers take the assembled site (``glueinfo.site.assemble.AssembledSite``)
and typed values, never the config; ``xsd/haizea.xsd`` describes the three
elements of Haizea's XML appendix (``<nodes>``, ``<lease>``, ``<site>``) and
the LWF root.  See docs/haizea.md.
"""
