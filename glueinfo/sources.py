"""The host-source plugin API at its documented 1.x path (``from glueinfo.sources import Source``).

Re-exports only: the code lives in glueinfo.gather.registry.
docs/plugins.md lists every public name and where it lives.
"""

from glueinfo.gather.registry import Source, SourceContext, SourceError, SourceFailure, SourceReport

__all__ = ["Source", "SourceContext", "SourceError", "SourceFailure", "SourceReport"]
