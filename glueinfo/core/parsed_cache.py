"""Files a command parses at every start, kept parsed between runs: the GLUE schema files
(glueinfo.glue.schema.load) and the GLUE 1.3 LDIF templates (glueinfo.glue.templates).

:func:`cache_file` names the cache file of one set of input files: ``KIND-DIGEST.marshal``
in ``cache_dir`` (default ``$XDG_CACHE_HOME/glueinfo``, else ``~/.cache/glueinfo``), the
digest covering each input's path, size and modification time (or its absence) and a key
the caller adds, so an edited input, or an edited reader of it (the caller lists its own
source files among the inputs), is parsed again.  :func:`read` gives back what
:func:`write` wrote: values ``marshal`` writes (tuples, strings, numbers, None, dicts,
frozensets).  marshal is built in: reading a cache imports nothing (pickle's import was a
visible part of a fresh one-host ``glueinfo ldif``).

Failures: a cache is only ever a shortcut.  :func:`read` raises OSError, EOFError,
ValueError or TypeError for a cache that is absent, damaged or of another Python (the
caller then parses); :func:`write` never raises (the next run parses again).  Like pickle's,
marshal's data is trusted: the cache directory is the user's own (files 0600).
"""

from __future__ import annotations

import binascii
import marshal
import os
from collections.abc import Sequence
from typing import Any, Optional


def cache_file(kind: str, inputs: Sequence[str], key: str = "", cache_dir: Optional[str] = None) -> Optional[str]:
    """The cache file of ``inputs`` (paths) for ``kind`` (a word: schema, templates); None when
    an input cannot be looked at (not merely absent): then there is no cache."""
    parts = [key]
    try:
        for path in inputs:
            try:
                st = os.stat(path)
                parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
            except FileNotFoundError:
                parts.append(f"{path}:absent")
    except OSError:
        return None
    directory = cache_dir or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                                          "glueinfo")
    # CRC-32 (binascii, loaded anyway), not hashlib: importing hashlib loads OpenSSL.
    digest = f"{binascii.crc32(chr(10).join(parts).encode('utf-8', 'surrogateescape')):08x}{len(parts):02d}"
    return os.path.join(directory, f"{kind}-{digest}.marshal")


def read(path: str) -> Any:
    """What :func:`write` put in ``path``; OSError, EOFError, ValueError or TypeError otherwise."""
    with open(path, "rb") as handle:
        return marshal.loads(handle.read())


def write(path: str, value: Any) -> None:
    """Keep ``value`` in ``path``, replacing it whole (never half a file); never raises."""
    try:
        data = marshal.dumps(value)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        import tempfile  # only when a cache is written

        fd, temporary = tempfile.mkstemp(prefix=".cache-", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, path)
        except OSError:
            os.unlink(temporary)
            raise
    except (OSError, ValueError):
        pass  # no cache: the next run parses again
