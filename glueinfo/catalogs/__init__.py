"""Documents other consumers read, made from the same assembled site: WLCG's Computing Resource
Reporting (CRR) JSON and the OSG_ResourceCatalog an HTCondor-CE advertises.  Renderers only:
they take the assembled site and typed settings, never the config."""
