"""The site state directory ([run] state_dir): what every command given it reads alike.

It holds each host's last good snapshot per source (``hosts/``, written by
glueinfo.gather.state.StateStore) and the SubCluster ids
(``subclusters.json``, glueinfo.site.ids).  One process writes at a time:
the writer holds an exclusive lock on ``STATE_DIR/lock`` (flock), which
``glueinfo run`` takes for its whole life, and writes its PID and role
(``run``, or ``command`` for a one-shot) in the file, so the next one can
say who holds it.  A second ``glueinfo run`` on the same directory refuses
to start (:class:`StateLocked`, exit 2, naming the holder's PID); it waits
up to ``COMMAND_WAIT_S`` for a one-shot command that holds the lock for its
few seconds.  A one-shot command (``ldif``, ``gather``, ``publish``...)
reads the directory when it exists and writes it back only when it can take
the lock at once: while the daemon runs, one-shot commands read its state
and leave it alone.  One-shot commands never create the directory.

Other failures are warnings naming the file, never fatal: an unreadable ids
file means ids are derived afresh (and rewritten at the next save), a
directory that cannot be written (no permission, a read-only filesystem)
means nothing is remembered, and the daemon's warning says so.
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

from glueinfo.core.errors import UsageError
from glueinfo.core.model import HostSnapshot
from glueinfo.gather.state import HostStates, StateStore
from glueinfo.site.ids import SubClusterIds

log = logging.getLogger(__name__)

IDS_FILE = "subclusters.json"
LOCK_FILE = "lock"
MAX_IDS_FILE = 64 * 2**20
COMMAND_WAIT_S = 60.0  # how long the daemon waits for a one-shot command's lock (a 30,000-host ldif: ~15 s)
DAEMON, COMMAND = "run", "command"  # the roles written in the lock file


class StateLocked(UsageError):
    """Another ``glueinfo run`` writes the state directory: this daemon does not start (exit 2)."""


class SiteState:
    """One state directory, opened for reading and, when the lock is had, writing."""

    def __init__(self, directory: str, clock: Callable[[], float] = time.time,
                 on_warning: Callable[[str], None] = log.warning) -> None:
        self.directory = directory
        self.on_warning = on_warning
        self.hosts = StateStore(directory, on_warning=on_warning, clock=clock)
        self._lock: Optional[IO[bytes]] = None
        self.unwritable: Optional[str] = None  # why the last lock() could not open the lock file
        self._ids_written: Optional[str] = None

    @property
    def writable(self) -> bool:
        return self._lock is not None

    def lock(self, create: bool) -> bool:
        """Take the writer's lock without waiting; ``create`` makes the directory first (the daemon),
        and warns when the directory cannot be written.  Returns whether this process may write;
        False (quietly) when another holds it (:meth:`holder` says who)."""
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
            self.unwritable = exc.strerror or str(exc)
            if create:
                self.on_warning(f"state directory {self.directory}: cannot be written: {self.unwritable}; "
                                "nothing is remembered across restarts")
            return False
        self.unwritable = None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        try:  # who holds it, for the next one that finds it taken (the file is this process's now)
            os.ftruncate(handle.fileno(), 0)
            handle.write(f"{os.getpid()} {DAEMON if create else COMMAND}\n".encode("ascii"))
            handle.flush()
        except OSError:
            pass  # a full disk: the lock still holds, only the holder's name is missing
        self._lock = handle
        return True

    def lock_daemon(self, wait_s: float = COMMAND_WAIT_S, sleep: Callable[[float], None] = time.sleep,
                    clock: Callable[[], float] = time.monotonic) -> bool:
        """The daemon's lock: :meth:`lock` with the directory created.  A one-shot command holding it
        is waited for, up to ``wait_s``; another daemon is not.  Returns False when the directory
        cannot be written (warned); raises :class:`StateLocked` naming the holder's PID when another
        ``glueinfo run`` holds the lock (or a command kept it past ``wait_s``)."""
        deadline = clock() + wait_s
        while not self.lock(create=True):
            if self.unwritable is not None:
                return False  # lock() warned
            pid, role = self.holder()
            if role == COMMAND and clock() < deadline:
                sleep(0.2)
                continue
            who = f"another glueinfo {'run' if role != COMMAND else 'command'}" + (f" (PID {pid})" if pid else "")
            raise StateLocked(f"[run] state_dir: {self.directory}: {who} holds its lock and writes there; stop it, or "
                              "give this one a state_dir of its own")
        return True

    def holder(self) -> tuple[Optional[int], Optional[str]]:
        """(PID, role) the lock's holder wrote in the lock file ((None, None) when it says nothing)."""
        try:
            fd = os.open(os.path.join(self.directory, LOCK_FILE), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                words = os.read(fd, 64).decode("ascii", "replace").split()
            finally:
                os.close(fd)
        except OSError:
            return None, None
        pid = int(words[0]) if words and words[0].isdigit() and len(words[0]) < 10 else None
        return pid, (words[1] if len(words) > 1 and words[1] in (DAEMON, COMMAND) else None)

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
        # The file readers and writers are imported where there are files: a command run before
        # the first `glueinfo run` made the directory never loads them.
        from glueinfo.core.files import read_capped

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
                from glueinfo.core.atomicwrite import WriteError, write_atomic

                try:
                    write_atomic(os.path.join(self.directory, IDS_FILE), text, mode=0o640)
                    self._ids_written = text
                except WriteError as exc:
                    errors.append(str(exc))
        return errors
