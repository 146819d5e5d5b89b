"""The outbox: documents waiting for a broker's confirm, one file each, newest per key, surviving restarts.

A pushing output (glueinfo.publish.outputs.amqp) puts each document in
the outbox on its writer thread, after the publish that made it (the
publish itself never waits for the disk); its sender thread reads the
outbox and drops a document only once the broker has confirmed it.  The outbox is a directory
(``[run] state_dir``/amqp-outbox) holding, per routing key:

- ``KEY.msg``: the document waiting to be sent (at most one per key: a newer
  one replaces it, so a broker away for a day costs one document per key,
  not a day's backlog);
- ``KEY.sent``: the last document the broker confirmed for that key, its
  modification time the moment of that confirm.  It is what an unchanged
  site sends again after ``resend`` seconds (a consumer then knows the site
  is alive), and what tells a restarted process that a document is already
  out.

Each file is one line of JSON (the :class:`Header`: the message's id,
routing key, content type, document kind, site id, SHA-256 digest, when it
was made), then the document's bytes.  Files are replaced atomically
(glueinfo.core.atomicwrite: written, fsynced, renamed), so a process killed
at any moment (kill -9 included) leaves each key's document whole; a
temporary file it left is removed when the outbox is next opened.  A
document is never removed before its confirm: confirming renames ``.msg`` to
``.sent`` only when the ``.msg`` still holds the confirmed message (its id),
so a newer document written meanwhile stays waiting.

Writers and the sender take one lock (a thread lock and ``flock`` on
``.lock`` in the directory), held only for a write or a rename, never while
talking to a broker: two outboxes on one directory (a reload's old and new
output) never lose each other's documents.

Failure behaviour: a write that fails raises WriteError (one line, the
previous document of that key stays); a file that is not an outbox document
(edited by hand, truncated by a full disk before atomic writes) is renamed
``KEY.bad`` with a WARNING and never sent.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Optional

from glueinfo.core.atomicwrite import TEMP_SUFFIX, WriteError, write_atomic_chunks
from glueinfo.core.errors import PublicationError

log = logging.getLogger(__name__)

PENDING, SENT, BAD = ".msg", ".sent", ".bad"
LOCK_NAME = ".lock"
MAX_HEADER = 64 * 1024  # a header line is a few hundred bytes; more is not an outbox file


class OutboxError(PublicationError):
    """A file in the outbox that is not an outbox document; one line naming it."""


@dataclass(frozen=True)
class Header:
    """What a document is sent as: AMQP properties and the facts a consumer routes it by."""

    id: str  # the message id: new for every document put in the outbox
    routing_key: str
    content_type: str
    document: str  # its kind, e.g. glue21.json
    site_id: str
    digest: str  # SHA-256 of the bytes, hex
    created: float  # when the publish that made it began (the clock's)
    size: int

    def line(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode("ascii") + b"\n"


@dataclass(frozen=True)
class Message:
    """One document as the outbox holds it."""

    header: Header
    body: bytes


@dataclass(frozen=True)
class OutboxState:
    """What monitoring shows of a pushing output: documents waiting, the last confirm, whether
    the broker is answering (None: not tried yet), its last error."""

    output: str
    depth: int
    last_confirm_at: Optional[float]
    confirmed: int
    up: Optional[bool]
    error: Optional[str] = None


def digest_of(chunks: Sequence[bytes]) -> tuple[str, int]:
    """SHA-256 (hex) and length of the bytes ``chunks`` make one after the other."""
    digest = hashlib.sha256()
    size = 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def new_header(routing_key: str, content_type: str, document: str, site_id: str, chunks: Sequence[bytes],
               created: float) -> Header:
    """The header of a new document made of ``chunks`` (a fresh message id)."""
    digest, size = digest_of(chunks)
    return Header(id=uuid.uuid4().hex, routing_key=routing_key, content_type=content_type, document=document,
                  site_id=site_id, digest=digest, created=created, size=size)


def _parse_header(line: bytes, path: str) -> Header:
    try:
        fields = json.loads(line)
        return Header(id=str(fields["id"]), routing_key=str(fields["routing_key"]),
                      content_type=str(fields["content_type"]), document=str(fields["document"]),
                      site_id=str(fields["site_id"]), digest=str(fields["digest"]), created=float(fields["created"]),
                      size=int(fields["size"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise OutboxError(f"{path}: not an outbox document (its first line is no header: {exc})") from None


class Outbox:
    """The outbox in ``directory`` (created, mode 0750, when missing).  OSError when it cannot be
    created or locked.  Keys are routing keys: letters, digits and ``.%_-`` only (they name files)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, mode=0o750, exist_ok=True)
        self._thread_lock = threading.Lock()
        self._lock_fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
        with self._locked():  # what a writer killed mid-write left (a live one writes under the lock)
            for name in os.listdir(directory):
                if name.startswith(".") and name.endswith(TEMP_SUFFIX):
                    try:
                        os.unlink(os.path.join(directory, name))
                    except OSError:
                        pass

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _path(self, key: str, suffix: str) -> str:
        if not key or key.startswith(".") or any(not (c.isascii() and (c.isalnum() or c in ".%_-")) for c in key):
            raise ValueError(f"outbox key {key!r}: letters, digits and .%_- only")
        return os.path.join(self.directory, key + suffix)

    # -- what a publish does ---------------------------------------------------------------------
    def put(self, header: Header, chunks: Sequence[bytes]) -> None:
        """Make ``header`` and ``chunks`` the document waiting for its routing key, replacing any
        older one still waiting (newest per key).  Durable before it returns.  WriteError."""
        path = self._path(header.routing_key, PENDING)
        with self._locked():
            write_atomic_chunks(path, [header.line(), *chunks], mode=0o640, hashed=False)

    def last(self, key: str) -> Optional[tuple[Header, bool, float]]:
        """The newest document of ``key``: (its header, whether it still waits, the modification
        time of its file: for a sent one, when it was confirmed); None when there is none, or
        when its file is not an outbox document."""
        for suffix, waiting in ((PENDING, True), (SENT, False)):
            path = self._path(key, suffix)
            try:
                with open(path, "rb") as handle:
                    header = _parse_header(handle.readline(MAX_HEADER), path)
                    return header, waiting, os.fstat(handle.fileno()).st_mtime
            except FileNotFoundError:
                continue
            except (OSError, OutboxError) as exc:
                log.debug("outbox: %s", exc)
                return None
        return None

    def resend(self, key: str) -> bool:
        """Put the last confirmed document of ``key`` back in the outbox (an unchanged site sent
        again); False when one is already waiting or none was ever confirmed.  WriteError."""
        with self._locked():
            pending = self._path(key, PENDING)
            if os.path.exists(pending):
                return False
            try:
                os.replace(self._path(key, SENT), pending)
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise WriteError(pending, exc) from None
        return True

    # -- what the sender does --------------------------------------------------------------------
    def waiting(self) -> list[str]:
        """The keys with a document waiting, the longest waiting first."""
        found = []
        try:
            entries = list(os.scandir(self.directory))
        except OSError as exc:
            log.warning("outbox %s: cannot be read: %s", self.directory, exc)
            return []
        for entry in entries:
            if entry.name.endswith(PENDING) and not entry.name.startswith("."):
                try:
                    found.append((entry.stat().st_mtime, entry.name[:-len(PENDING)]))
                except OSError:
                    continue  # confirmed meanwhile
        return [key for _mtime, key in sorted(found)]

    def depth(self) -> int:
        """How many documents wait."""
        return len(self.waiting())

    def read(self, key: str) -> Optional[Message]:
        """The document waiting for ``key``, None when there is none (confirmed meanwhile).  A file
        that is not an outbox document is renamed ``KEY.bad`` with a WARNING and None returned."""
        path = self._path(key, PENDING)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        newline = data.find(b"\n", 0, MAX_HEADER)
        try:
            if newline < 0:
                raise OutboxError(f"{path}: not an outbox document (no header line)")
            header = _parse_header(data[:newline], path)
            body = data[newline + 1:]
            if len(body) != header.size:
                raise OutboxError(f"{path}: holds {len(body)} bytes, its header says {header.size}")
        except OutboxError as exc:
            self._quarantine(key, path, exc)
            return None
        return Message(header, body)

    def _quarantine(self, key: str, path: str, why: Exception) -> None:
        with self._locked():
            try:
                os.replace(path, self._path(key, BAD))
            except OSError:
                pass
        log.warning("%s; kept as %s and never sent", why, key + BAD)

    def confirmed(self, key: str, message_id: str, at: float) -> bool:
        """The broker confirmed message ``message_id`` of ``key``: it becomes the key's last sent
        document (its time ``at``), unless a newer one was put meanwhile (that one stays waiting,
        False returned)."""
        pending = self._path(key, PENDING)
        with self._locked():
            try:
                with open(pending, "rb") as handle:
                    header = _parse_header(handle.readline(MAX_HEADER), pending)
            except (FileNotFoundError, OutboxError):
                return False
            if header.id != message_id:
                return False
            sent = self._path(key, SENT)
            os.replace(pending, sent)
            try:
                os.utime(sent, (at, at))
            except OSError:
                pass
        return True
