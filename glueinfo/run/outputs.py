"""The files ``glueinfo run`` publishes ([run] ldif_file, node_xml_file): rewritten only when their bytes change.

A publish hands each file its new bytes.  When they equal what the file
holds, the file is not rewritten; its modification time is set to now
instead, because that is how etc/bdii/glueinfo-provider and monitoring judge
liveness: an idle, healthy site is never withdrawn for looking stale.
Otherwise the file is replaced atomically (glueinfo.core.atomicwrite: never
half a file).  A full or read-only disk is a warning naming the file, whose
previous version stays; the error is kept (``errors``) until a write works.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable
from typing import Union

from glueinfo.core.atomicwrite import WriteError, remove_temporaries, write_atomic, write_atomic_chunks

log = logging.getLogger("glueinfo.run")


class OutputFiles:
    """The published files of one provider and what each holds."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}  # path -> the last write error, while it lasts
        self._digests: dict[str, bytes] = {}  # path -> digest of the bytes it holds (as written by us)
        self.rewritten = 0
        self.touched = 0

    @staticmethod
    def clean(paths: list[str]) -> None:
        """Remove what a writer killed mid-write left beside these files (only this process writes them)."""
        for path in paths:
            if path:
                remove_temporaries(path)

    def _holds(self, path: str, digest: bytes) -> bool:
        known = self._digests.get(path)
        if known is None:  # first publish of this process: the file may already hold these bytes
            try:
                with open(path, "rb") as handle:
                    known = hashlib.sha256(handle.read()).digest()
            except OSError:
                return False
            self._digests[path] = known
        return known == digest

    def touch(self, path: str) -> bool:
        """Mark a file whose bytes did not change as fresh (its modification time is now); returns
        whether it is current."""
        if not path or path not in self._digests:
            return False
        try:
            os.utime(path)
        except OSError as exc:
            return self._failed(path, WriteError(path, exc))
        self.touched += 1
        return self._succeeded(path)

    def _failed(self, path: str, exc: WriteError) -> bool:
        self._digests.pop(path, None)
        log.warning("%s%s", exc, " (still)" if self.errors.get(path) == str(exc) else "")
        self.errors[path] = str(exc)
        return False

    def _succeeded(self, path: str) -> bool:
        if path in self.errors:
            log.info("%s: written again", path)
            del self.errors[path]
        return True

    def publish(self, path: str, payload: Union[bytes, Iterable[bytes], None]) -> bool:
        """Give ``path`` these bytes (None: nothing to publish this time), whole or as pieces
        written one after the other (the document never held whole: two 40 MB documents at
        10,000 hosts); returns whether the file is now current (written or touched).  Pieces are
        written to the temporary file as they come and it is dropped when they make what the file
        holds."""
        if not path or payload is None:
            return False
        try:
            if isinstance(payload, bytes):
                digest = hashlib.sha256(payload).digest()  # SHA-256: twice BLAKE2b's speed where the CPU has SHA instructions
                replaced = not self._holds(path, digest)
                if replaced:
                    write_atomic(path, payload)
            else:
                digest, replaced = write_atomic_chunks(path, payload, keep_if=lambda made: self._holds(path, made))
            if replaced:
                self._digests[path] = digest
                self.rewritten += 1
            else:
                try:
                    os.utime(path)
                except OSError as exc:
                    raise WriteError(path, exc) from None
                self.touched += 1
        except WriteError as exc:
            return self._failed(path, exc)
        return self._succeeded(path)
