"""The site state directory ([run] state_dir): what every command given it reads alike.

It holds each host's last good snapshot per source (``hosts/``, written by
glueinfo.gather.state.StateStore) and the SubCluster ids
(``subclusters.json``, glueinfo.site.ids).  One process writes at a time:
the writer holds an exclusive lock on ``STATE_DIR/lock`` (flock), which
``glueinfo run`` takes for its whole life.  A one-shot command (``ldif``,
``gather``, ``publish``...) reads the directory when it exists and writes it
back only when it can take the lock at once: while the daemon runs, one-shot
commands read its state and leave it alone.  One-shot commands never create
the directory.

Failures are warnings naming the file, never fatal: an unreadable ids file
means ids are derived afresh (and rewritten at the next save), an unwritable
directory means nothing is remembered.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import stat
import time
from collections.abc import Callable, Mapping
from typing import IO, Optional

from glueinfo.core.atomicwrite import WriteError, write_atomic
from glueinfo.core.files import read_capped
from glueinfo.core.model import HostSnapshot
from glueinfo.gather.state import HostStates, StateStore
from glueinfo.site.ids import SubClusterIds

log = logging.getLogger(__name__)

IDS_FILE = "subclusters.json"
LOCK_FILE = "lock"
MAX_IDS_FILE = 64 * 2**20


class SiteState:
    """One state directory, opened for reading and, when the lock is had, writing."""

    def __init__(self, directory: str, clock: Callable[[], float] = time.time,
                 on_warning: Callable[[str], None] = log.warning) -> None:
        self.directory = directory
        self.on_warning = on_warning
        self.hosts = StateStore(directory, on_warning=on_warning, clock=clock)
        self._lock: Optional[IO[bytes]] = None
        self._ids_written: Optional[str] = None

    @property
    def writable(self) -> bool:
        return self._lock is not None

    def lock(self, create: bool) -> bool:
        """Take the writer's lock without waiting; ``create`` makes the directory first (the daemon).
        Returns whether this process may write; False (quietly) when another holds it."""
        if self._lock is not None:
            return True
        try:
            if create:
                os.makedirs(self.directory, exist_ok=True)
            # Non-blocking and without following a symlink: a FIFO or a link planted as the lock
            # file must not hang the daemon at start or make it create a file elsewhere.
            fd = os.open(os.path.join(self.directory, LOCK_FILE),
                         os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OSError(errno.EINVAL, f"{LOCK_FILE} is not a regular file")
            handle = os.fdopen(fd, "ab")
        except OSError as exc:
            if create:
                self.on_warning(f"state directory {self.directory}: cannot be written: {exc.strerror or exc}; "
                                "nothing is remembered across restarts")
            return False
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._lock = handle
        return True

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing drops the flock
            self._lock = None

    def load_hosts(self) -> HostStates:
        return self.hosts.load()

    def load_ids(self) -> Optional[SubClusterIds]:
        """The remembered SubCluster ids; None when there is no file or it cannot be used (warned)."""
        path = os.path.join(self.directory, IDS_FILE)
        if not os.path.lexists(path):
            return None
        try:
            raw = read_capped(path, MAX_IDS_FILE)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.on_warning(f"state file {path} ignored: {exc}; SubCluster ids are derived afresh")
            return None
        try:
            ids = SubClusterIds.from_json(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, ValueError) as exc:
            self.on_warning(f"state file {path} ignored: {' '.join(str(exc).split())[:160]}; SubCluster ids are derived afresh")
            return None
        self._ids_written = raw.decode("utf-8")
        return ids

    def save(self, hosts: Mapping[str, Mapping[str, HostSnapshot]], ids: Optional[SubClusterIds]) -> list[str]:
        """Write what changed (only with the lock); returns one-line errors, the old files staying."""
        if self._lock is None:
            return []
        errors = self.hosts.save(hosts)
        if ids is not None:
            text = json.dumps(ids.to_json(), separators=(",", ":"), sort_keys=True)
            if text != self._ids_written:
                try:
                    write_atomic(os.path.join(self.directory, IDS_FILE), text, mode=0o640)
                    self._ids_written = text
                except WriteError as exc:
                    errors.append(str(exc))
        return errors
