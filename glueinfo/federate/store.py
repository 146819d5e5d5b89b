"""The federation view's memory: each site's newest document of each kind, on disk.

Layout under the view's state directory::

    sites/<site word>/<kind>.<N>    one line of JSON (site id, sender, message id, sent and
                                    received times, the body's SHA-256 and its content
                                    encoding), then the body as it came (glue.ldif still
                                    gzip-compressed)

``N`` counts the site's documents of that kind: each is written to a name
that was not there (``N`` one more than the last), and only once it is
whole is the previous one removed.  At load the highest ``N`` whose body
is the one its first line names is the site's document; anything else of
that kind (an older one a kill left behind, one cut short) is removed.
So a view killed at any point (``kill -9`` included) comes back with the
document before the one it was writing, or with that one whole; and the
consumer acknowledges a message only after :meth:`SiteStore.put`
returned, so no document the broker was told was taken is lost.

Why not a temporary file renamed over the old one: on ext4 a rename that
replaces a file makes the kernel allocate and start writing the new file's
blocks there and then (its ``auto_da_alloc`` guard), 0.1 to 0.2 ms of CPU a
message, and the meta and body were two such files, over half of the
view's own work per message.  A new name and an unlink of the old cost
a tenth.  Nothing is fsync'ed either: a power cut may lose the last
seconds' documents, which the sites send again at their next change or
``[amqp] resend``; what is loaded is never half a document, since a body
that is not its first line's is skipped.

Failure behaviour: :meth:`put` raises WriteError (one line naming the file)
when the disk refuses; the new file is removed and what the store held
stays.  At load, a site directory or document that cannot be read is
skipped with one WARNING.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

import msgspec

from glueinfo.core.atomicwrite import WriteError
from glueinfo.core.errors import UsageError
from glueinfo.core.text import one_line
from glueinfo.federate.receive import KINDS
from glueinfo.publish.outputs.amqp import site_word

log = logging.getLogger(__name__)

SITES_DIR = "sites"
MAX_META = 1 << 16  # a first line longer than this is not one the view wrote


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


def _numbered(name: str) -> Optional[tuple[str, int]]:
    """(kind, N) of a document file's name ``KIND.N``, None for any other name."""
    kind, dot, number = name.rpartition(".")
    if not dot or kind not in KINDS or not number.isdigit():
        return None
    return kind, int(number)


class SiteStore:
    """The documents on disk (module docstring).  Only one process may use a directory: the
    federate command holds its lock (:meth:`lock`) for its life."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.root = os.path.join(state_dir, SITES_DIR)
        os.makedirs(self.root, mode=0o755, exist_ok=True)
        self._lock_fd: Optional[int] = None
        self._numbers: dict[str, dict[str, int]] = {}  # site word -> kind -> the highest N on disk
        self._words: dict[str, str] = {}  # site id -> its word (made character by character: kept)
        self._encoder = msgspec.json.Encoder()

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

    def directory(self, site_id: str) -> str:
        """The site's directory (its id as a site word: never a path outside the store)."""
        return os.path.join(self.root, self._word(site_id))

    def _word(self, site_id: str) -> str:
        word = self._words.get(site_id)
        if word is None:
            word = self._words[site_id] = site_word(site_id)
        return word

    def _site_numbers(self, word: str, directory: str) -> dict[str, int]:
        """The highest N of each kind on disk for the site (looked for once per site and process:
        a store not loaded first still never reuses a name)."""
        numbers = self._numbers.get(word)
        if numbers is None:
            numbers = self._numbers[word] = {}
            try:
                names = os.listdir(directory)
            except FileNotFoundError:
                os.makedirs(directory, mode=0o755, exist_ok=True)
                names = []
            for name in names:
                found = _numbered(name)
                if found is not None and found[1] > numbers.get(found[0], 0):
                    numbers[found[0]] = found[1]
        return numbers

    def put(self, meta: Meta, kind: str, body: bytes) -> None:
        """Keep ``body`` as the site's ``kind`` with its meta (``meta.digest`` is the body's);
        WriteError when the disk refuses, the document held before staying."""
        word = self._word(meta.site_id)
        directory = os.path.join(self.root, word)
        try:
            numbers = self._site_numbers(word, directory)
        except OSError as exc:
            raise WriteError(directory, exc) from None
        previous = numbers.get(kind, 0)
        path = os.path.join(directory, f"{kind}.{previous + 1}")
        data = self._encoder.encode(meta) + b"\n" + body
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            # A name that was not there (O_EXCL): nothing is replaced, so nothing held is touched
            # until the new document is whole.
            try:
                fd = os.open(path, flags, 0o644)
            except FileNotFoundError:  # the site's directory went (removed by hand): made again
                os.makedirs(directory, mode=0o755, exist_ok=True)
                fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise WriteError(path, exc) from None
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            try:
                os.unlink(path)
            except OSError:
                pass
            raise WriteError(path, exc) from None
        numbers[kind] = previous + 1
        if previous:
            try:
                os.unlink(os.path.join(directory, f"{kind}.{previous}"))
            except FileNotFoundError:
                pass
            except OSError as exc:  # the new one is whole and is what load takes: the old one only wastes space
                log.warning("federation store: %s.%d of %s not removed: %s", kind, previous, meta.site_id,
                            one_line(exc))

    def remove(self, site_id: str) -> None:
        """Forget a site (its withdrawal); a directory already gone is fine."""
        word = self._words.pop(site_id, None) or site_word(site_id)
        self._numbers.pop(word, None)
        shutil.rmtree(os.path.join(self.root, word), ignore_errors=True)

    def load(self) -> Iterator[tuple[str, Meta, bytes]]:
        """Every kept document as (kind, meta, body): of each site's kind, the newest whose body is
        the one its first line names; the others of that kind are removed, with one WARNING for
        one that was cut short or cannot be read."""
        try:
            names = sorted(os.listdir(self.root))
        except OSError as exc:
            log.warning("federation store %s: cannot be read: %s", self.root, one_line(exc))
            return
        decoder = msgspec.json.Decoder(Meta)
        for name in names:
            directory = os.path.join(self.root, name)
            try:
                files = os.listdir(directory)
            except NotADirectoryError:
                continue
            except OSError as exc:
                log.warning("federation store: %s: cannot be read, skipped: %s", directory, one_line(exc))
                continue
            by_kind: dict[str, list[int]] = {}
            for file in files:
                found = _numbered(file)
                if found is not None:
                    by_kind.setdefault(found[0], []).append(found[1])
            self._numbers[name] = {kind: max(numbers) for kind, numbers in by_kind.items()}  # never reused
            for kind in KINDS:
                chosen = None
                for number in sorted(by_kind.get(kind, ()), reverse=True):
                    path = os.path.join(directory, f"{kind}.{number}")
                    if chosen is None:
                        chosen = self._read(path, name, decoder)
                        if chosen is not None:
                            continue
                    try:
                        os.unlink(path)
                    except OSError as exc:
                        log.warning("federation store: %s: not removed: %s", path, one_line(exc))
                if chosen is not None:
                    yield kind, chosen[0], chosen[1]

    @staticmethod
    def _read(path: str, word: str, decoder: msgspec.json.Decoder[Meta]) -> Optional[tuple[Meta, bytes]]:
        """(meta, body) of one document file, None (one WARNING) when it is not one whole."""
        try:
            with open(path, "rb") as stream:
                data = stream.read()
        except OSError as exc:
            log.warning("federation store: %s: cannot be read, skipped: %s", path, one_line(exc))
            return None
        line, newline, body = data.partition(b"\n")
        try:
            if not newline or len(line) > MAX_META:
                raise ValueError("no first line")
            meta = decoder.decode(line)
        except (ValueError, msgspec.DecodeError) as exc:
            log.warning("federation store: %s: no meta line (a write cut short), skipped: %s", path, one_line(exc))
            return None
        if digest_of(body) != meta.digest or site_word(meta.site_id) != word:
            log.warning("federation store: %s: the body is not the one its meta names (a write cut short); "
                        "skipped", path)
            return None
        return meta, body
