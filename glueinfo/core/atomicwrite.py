"""Publish stage, files: replace a file so that readers see the old or the new one, never half.

Every file glueinfo keeps up to date (the GLUE LDIF BDII's provider wrapper
prints, the Node XML monitoring fetches, the state of each host) is written
by :func:`write_atomic`:

1. write the new content to a temporary file in the same directory
   (``.NAME.XXXXXXXX.tmp``: a dot-file, so BDII, the spool reader and shell
   globs skip it), with the final permissions;
2. fsync it, so the data is on disk before its name is;
3. rename it over NAME (atomic within one filesystem);
4. fsync the directory, so the rename itself survives a crash.

A process killed at any point (SIGKILL included) leaves NAME complete: old
before the rename, new after it; at worst a temporary file is left behind,
which :func:`remove_temporaries` clears at the next start.  When the write
fails (disk full, read-only filesystem, no permission) the temporary file is
removed, NAME is untouched, and :class:`WriteError` says in one line which
path and why, and whether there was a previous file (left unchanged).
"""

from __future__ import annotations

import errno
import glob
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Optional, Union

from glueinfo.core.errors import PublicationError

if TYPE_CHECKING:
    import hashlib

TEMP_SUFFIX = ".tmp"


class WriteError(PublicationError, OSError):
    """A file that could not be replaced; str() is one line naming the path. The old file is intact."""

    def __init__(self, path: str, cause: OSError) -> None:
        code = cause.errno
        name = errno.errorcode.get(code, "") if code is not None else ""
        reason = cause.strerror or str(cause) or type(cause).__name__
        if name:
            reason = f"{reason} [{name}]"
        super().__init__(code, f"{path}: not written: {reason}; {_previous(path)}")
        self.path = path

    def __str__(self) -> str:
        return str(self.strerror)


def _previous(path: str) -> str:
    """What a failed write left at ``path``, said only of a file there is: a first write that fails
    leaves nothing to be unchanged."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "there is no previous file"
    except OSError:  # not even looked at (no permission on a directory above)
        return "any previous file is unchanged"
    return "the previous file is unchanged"


def _temporary_pattern(path: str) -> str:
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(glob.escape(directory), f".{glob.escape(name)}.*{TEMP_SUFFIX}")


def write_atomic(path: Union[str, os.PathLike[str]], data: Union[bytes, str], *, mode: int = 0o644, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) as the module docstring says.

    ``durable=False`` skips the two fsyncs: still atomic for readers and
    against a killed process, but not against a power cut.  Raises
    :class:`WriteError` and leaves ``path`` as it was when anything fails.
    """
    write_atomic_chunks(path, [data.encode("utf-8") if isinstance(data, str) else data], mode=mode, durable=durable,
                        hashed=False)


def write_atomic_chunks(path: Union[str, os.PathLike[str]], chunks: Iterable[bytes], *, mode: int = 0o644,
                        durable: bool = True, keep_if: Optional[Callable[[bytes], bool]] = None,
                        hashed: bool = True) -> tuple[bytes, bool]:
    """:func:`write_atomic` of the bytes ``chunks`` make one after the other, never held whole (a
    40 MB document written as its 40,000 entries); returns (SHA-256 digest of those bytes,
    whether ``path`` was replaced).  ``keep_if(digest)`` True: the bytes are what ``path``
    already holds, so it is left as it is (not replaced, its time not changed) and the temporary
    file removed.  ``hashed=False`` (no ``keep_if``): no digest is made, b"" returned.  Raises
    :class:`WriteError` and leaves ``path`` as it was when anything fails (a chunk that raises:
    the same, after the temporary file is removed)."""
    # Imported here: a command that only reads the state directory (a one-shot `glueinfo ldif`)
    # never writes, and hashlib with tempfile was 4 ms of its start-up.
    import hashlib
    import tempfile

    path = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=TEMP_SUFFIX, dir=directory)
    except OSError as exc:
        raise WriteError(path, exc) from None
    # SHA-256: twice BLAKE2b's speed where the CPU has SHA instructions
    digest = hashlib.sha256() if hashed or keep_if is not None else None
    replaced = False
    try:
        try:
            os.fchmod(fd, mode)
            # Small pieces (an LDIF entry, a Node's part) are gathered into ~1 MiB blocks: one
            # hash update and one write() per block, not per piece (100,000 system calls a publish
            # at 10,000 hosts, ~0.25 CPU-s).
            batch: list[bytes] = []
            size = 0
            for chunk in chunks:
                batch.append(chunk)
                size += len(chunk)
                if size >= _BLOCK:
                    _write_block(fd, batch, digest)
                    batch, size = [], 0
            _write_block(fd, batch, digest)
            replaced = keep_if is None or digest is None or not keep_if(digest.digest())
            if durable and replaced:
                os.fsync(fd)
        finally:
            os.close(fd)
        if replaced:
            os.replace(temporary, path)
        else:
            os.unlink(temporary)
    except BaseException as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise WriteError(path, exc) from None
        raise  # KeyboardInterrupt and the like: the old file is intact, the temporary gone
    if durable and replaced:
        _fsync_directory(directory)
    return (digest.digest() if digest is not None else b""), replaced


_BLOCK = 1 << 20


def _write_block(fd: int, pieces: list[bytes], digest: Optional[hashlib._Hash]) -> None:
    block = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    if digest is not None:
        digest.update(block)
    view = memoryview(block)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_directory(directory: str) -> None:
    # Best effort: the rename has happened; some filesystems cannot fsync a directory.
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_temporaries(path: Union[str, os.PathLike[str]]) -> list[str]:
    """Delete temporary files a killed writer of ``path`` left behind; returns their names.

    Only one process may keep ``path`` up to date, so call this once at its start.
    """
    removed = []
    for leftover in glob.glob(_temporary_pattern(os.fspath(path))):
        try:
            os.unlink(leftover)
            removed.append(leftover)
        except OSError:
            pass
    return removed
