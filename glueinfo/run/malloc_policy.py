"""One malloc arena for the daemon: a policy of `glueinfo run`, not of the library.

glibc gives each new thread that allocates its own malloc arena (up to eight per core) and unmaps
an arena's extra heaps as soon as they are free.  The daemon runs every job on a pool thread and
every LRMS query on a thread of its own, so each refresh of a 50,000-job queue page-faulted its
whole working set again: measured, 0.76-0.85 s of system time per Torque refresh (186,000 minor
faults) against 0.06-0.10 s in one arena, the same user time either way; and a 10,000-host site's
resident memory was 626 MB at the end of the window against 531 MB (docs/development.md).  The
jobs take Python's lock to allocate anyway, so one arena costs them no parallelism.

Applied with ``mallopt(M_ARENA_MAX, 1)`` before the daemon starts its threads.  An operator's own
choice (``MALLOC_ARENA_MAX`` or ``glibc.malloc.arena_max`` in ``GLIBC_TUNABLES``) is left as it is,
and so is a C library that is not glibc.  Process-wide by nature, so only `glueinfo run` (and the
benchmarks that measure it) apply it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Mapping

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's malloc.h


def operator_choice(environ: Mapping[str, str]) -> bool:
    """Has the operator set the arena count themselves?"""
    return "MALLOC_ARENA_MAX" in environ or "glibc.malloc.arena_max" in environ.get("GLIBC_TUNABLES", "")


def use_one_arena(environ: Mapping[str, str]) -> bool:
    """Limit this process to one malloc arena; True when applied.  Never raises: without glibc's
    mallopt, or when the operator chose (see :func:`operator_choice`), nothing changes (logged at DEBUG)."""
    if operator_choice(environ):
        log.debug("malloc arenas: left as the environment sets them")
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError) as exc:
        log.debug("malloc arenas: no glibc mallopt (%s); left as they are", exc)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if mallopt(M_ARENA_MAX, 1) != 1:
        log.debug("malloc arenas: mallopt refused M_ARENA_MAX; left as they are")
        return False
    return True
