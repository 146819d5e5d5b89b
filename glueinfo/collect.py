"""The collector plugin API at its documented 1.x path (``from glueinfo.collect import Collector``).

Re-exports only: the code lives in glueinfo.host.collect.  Third-party
collectors written against this path keep working; new code may import
either.  docs/plugins.md lists every public name and where it lives.
"""

from glueinfo.host.collect import CollectContext, Collector, CollectorError

__all__ = ["CollectContext", "Collector", "CollectorError"]
