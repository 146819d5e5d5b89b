"""The one pause of Python's cyclic garbage collector, for code that makes many containers none
of which is in a reference cycle (a batch system's job list, 10,000 Ganglia HOSTs, a command's
snapshots): the collector would otherwise walk them hundreds of times for nothing.

Reference counting still frees everything.  Blocks may run in several threads at once (one LRMS
query per CE thread): only a block that found the collector on turns it off, and that block
always turns it back on, so whatever the interleaving the collector ends as it was found.  The
daemon's own schedule of collections is glueinfo.run.gc_policy's alone.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused(freeze: bool = False) -> Iterator[None]:
    """Pause the cyclic collector for the block; ``freeze``: then move everything made so far out
    of its reach for good (gc.freeze: what a command keeps until it exits)."""
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
        if freeze:
            gc.freeze()
    finally:
        if was_enabled:
            gc.enable()
