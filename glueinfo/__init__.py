"""glueinfo: a GLUE / SSS grid information provider.

Data flows one way: collect (host/) -> gather (gather/) -> site model and
aggregate (site/, lrms/) -> render (glue/, sss/, haizea/) -> publish
(publish/).  See ARCHITECTURE.md.
"""

__version__ = "0.1.0"
