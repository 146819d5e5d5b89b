"""The ``file`` output: the files ``glueinfo run`` publishes ([run] ldif_file, node_xml_file, crr_file),
rewritten only when their bytes change.

A publish hands each file its new bytes.  When they equal what the file
holds, the file is not rewritten; its modification time is set to now
instead, because that is how providers/glueinfo-provider and monitoring judge
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
from typing import Optional, Union

from glueinfo.core.atomicwrite import WriteError, remove_temporaries, write_atomic, write_atomic_chunks
from glueinfo.publish.outputs import OutputContext, OutputPlugin, OutputResult, Publication

log = logging.getLogger(__name__)


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


class FileOutput:
    """The ``file`` output: the LDIF ([run] ldif_file), the site's Node XML ([run] node_xml_file)
    and its CRR document ([run] crr_file), each given its new bytes at a publish (rewritten only
    when they change, else marked fresh); an empty path is not written.  A write that fails keeps
    the previous file and is this output's error until a write works."""

    name = "file"

    def __init__(self, ldif_file: str, node_xml_file: str, crr_file: str = "") -> None:
        self.ldif_file, self.node_xml_file, self.crr_file = ldif_file, node_xml_file, crr_file
        self.files = OutputFiles()
        OutputFiles.clean([ldif_file, node_xml_file, crr_file])

    @property
    def paths(self) -> tuple[tuple[str, str], ...]:
        """(kind, path) of each file written, for monitoring."""
        return tuple((kind, path) for kind, path in (("ldif", self.ldif_file), ("node_xml", self.node_xml_file),
                                                     ("crr", self.crr_file)) if path)

    def publish(self, publication: Publication) -> OutputResult:
        documents = publication.documents
        written = 0
        if documents is None:
            written = self.files.touch(self.ldif_file) + self.files.touch(self.node_xml_file) + self.files.touch(self.crr_file)
        else:
            written += self.files.publish(self.ldif_file, documents.ldif_chunks())
            nodes: Optional[list[bytes]] = documents.node_xml_chunks() if publication.hosts_changed and self.node_xml_file else None
            if nodes is not None:
                written += self.files.publish(self.node_xml_file, nodes)
            else:
                written += self.files.touch(self.node_xml_file)
            if self.crr_file:  # made only for a file that holds it; None (no [site] name or id): not written
                written += self.files.publish(self.crr_file, documents.crr_json)
        error = "; ".join(self.files.errors.values()) or None
        return OutputResult(note=f"{written} files current", error=error, written=documents is not None)


def _make(context: OutputContext) -> FileOutput:
    run = context.sections.get("run", {})
    return FileOutput(str(run.get("ldif_file", "")), str(run.get("node_xml_file", "")), str(run.get("crr_file", "")))


OUTPUT = OutputPlugin("file", _make, default=True,
                      description="[run] ldif_file, node_xml_file and crr_file, atomic, only when changed")
