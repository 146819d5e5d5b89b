"""The federation view's memory: each site's newest document of each kind, on disk.

Layout under the view's state directory::

    sites/<site word>/<kind>        the body as it came (glue.ldif still gzip-compressed)
    sites/<site word>/<kind>.meta   JSON: site id, sender, message id, sent and received times,
                                    the body's SHA-256 and its content encoding

The body is written first, then its meta, each atomically (a new file
renamed over the old: glueinfo.core.atomicwrite): the meta is the commit
point, so a view killed between the two finds the old meta's digest not
matching the new body and keeps neither half (the broker still holds the
unacknowledged message and delivers it again).  The consumer acknowledges a
message only after :meth:`SiteStore.put` returned, so a restart, even after
kill -9, loses no document the broker was told was taken.  The files are
not fsync'ed (four syncs a message were a third of the view's CPU): a power
cut may lose the last seconds' documents, which the sites send again at
their next change or ``[amqp] resend``; what is loaded is never half a
document, since a body that is not its meta's is skipped.

Failure behaviour: :meth:`put` raises WriteError (one line naming the file)
when the disk refuses; what the store held stays.  At load, a site
directory or document that cannot be read is skipped with one WARNING.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Optional

from glueinfo.core.atomicwrite import remove_temporaries, write_atomic
from glueinfo.core.errors import UsageError
from glueinfo.core.text import one_line
from glueinfo.federate.receive import KINDS
from glueinfo.publish.outputs.amqp import site_word

log = logging.getLogger(__name__)

SITES_DIR = "sites"


@dataclass(frozen=True)
class Meta:
    site_id: str
    sender: str
    message_id: str
    sent_at: Optional[float]
    received_at: float
    digest: str
    content_encoding: str = ""


def digest_of(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class StoreLocked(UsageError):
    """Another federation view holds the state directory; one line naming its PID."""


class SiteStore:
    """The documents on disk (module docstring).  Only one process may use a directory: the
    federate command holds its lock (:meth:`lock`) for its life."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.root = os.path.join(state_dir, SITES_DIR)
        os.makedirs(self.root, mode=0o755, exist_ok=True)
        self._lock_fd: Optional[int] = None

    def lock(self) -> None:
        """Take ``STATE_DIR/lock`` (flock) and write this PID in it; StoreLocked naming the holder's
        PID when another process has it, OSError when it cannot be made."""
        path = os.path.join(self.state_dir, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise StoreLocked(f"{self.state_dir}: another glueinfo federate (PID {holder}) holds its lock") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _paths(self, site_id: str, kind: str) -> tuple[str, str]:
        directory = os.path.join(self.root, site_word(site_id))
        return os.path.join(directory, kind), os.path.join(directory, kind + ".meta")

    def put(self, meta: Meta, kind: str, body: Optional[bytes]) -> None:
        """Keep ``body`` as the site's ``kind`` (``body`` None: the body on disk is unchanged,
        only the meta is renewed); WriteError when the disk refuses."""
        body_path, meta_path = self._paths(meta.site_id, kind)
        os.makedirs(os.path.dirname(body_path), mode=0o755, exist_ok=True)
        if body is not None:
            write_atomic(body_path, body, durable=False)
        write_atomic(meta_path, json.dumps(asdict(meta), sort_keys=True).encode() + b"\n", durable=False)

    def remove(self, site_id: str) -> None:
        """Forget a site (its withdrawal); a directory already gone is fine."""
        shutil.rmtree(os.path.join(self.root, site_word(site_id)), ignore_errors=True)

    def load(self) -> Iterator[tuple[str, Meta, bytes]]:
        """Every kept document as (kind, meta, body), skipping with one WARNING what cannot be read
        or whose body is not the one its meta names."""
        try:
            names = sorted(os.listdir(self.root))
        except OSError as exc:
            log.warning("federation store %s: cannot be read: %s", self.root, one_line(exc))
            return
        for name in names:
            directory = os.path.join(self.root, name)
            if not os.path.isdir(directory):
                continue
            for kind in KINDS:
                body_path, meta_path = os.path.join(directory, kind), os.path.join(directory, kind + ".meta")
                remove_temporaries(body_path)
                remove_temporaries(meta_path)
                if not os.path.exists(meta_path):
                    continue
                try:
                    with open(meta_path, "rb") as stream:
                        meta = Meta(**json.loads(stream.read(1 << 20)))
                    with open(body_path, "rb") as stream:
                        body = stream.read()
                except (OSError, ValueError, TypeError) as exc:
                    log.warning("federation store: %s: cannot be read, skipped: %s", meta_path, one_line(exc))
                    continue
                if digest_of(body) != meta.digest or site_word(meta.site_id) != name:
                    log.warning("federation store: %s: the body is not the one its meta names (a write cut short); "
                                "skipped until the site sends again", body_path)
                    continue
                yield kind, meta, body
