"""State on disk: each host's last good snapshot per source, so a restart publishes at once.

``glueinfo run`` keeps, under ``[run] state_dir``, one file per host::

    STATE_DIR/hosts/<host>.json   {"format": 1, "host": "wn01.example.org",
                                    "sources": {"agents": <snapshot>, "ganglia": <snapshot>}}

Snapshots are the JSON of HostSnapshot.to_dict and keep their own
``collected_at``: after a restart a host is published with its real age, so
the freshness rules (glueinfo.core.freshness) mark it Unknown when it is stale and
drop it when it is older than ``[sources] drop_after`` -- last-known data,
never passed off as new.

Files are written with glueinfo.core.atomicwrite (never half a file; not
fsynced: this is a cache of what the sources will say again, and a file a
power cut spoiled is ignored and rewritten) and only when the host's
snapshots changed: at once when a source appears or goes, else at most
every ``refresh_after_s`` (300 s), so a site whose workers report every
minute rewrites each host's file every five minutes, not every cycle, and
a quiet spool writes nothing.  A restart after a crash therefore restores a
host up to that old, published with its real age until its sources speak
again.  A file that cannot be read at start (truncated, not JSON,
not a snapshot) is ignored with one warning naming it, and rewritten at the
next save; a host no longer known has its file removed.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from glueinfo.core.model import HostSnapshot, ModelError
from glueinfo.core.text import one_line

log = logging.getLogger(__name__)

FORMAT = 1
MAX_STATE_FILE = 64 * 2**20

# host key -> source name -> snapshot
HostStates = dict[str, dict[str, HostSnapshot]]


def _file_name(host: str) -> str:
    return urllib.parse.quote(host, safe="") + ".json"


def _host_of(file_name: str) -> str:
    return urllib.parse.unquote(file_name[: -len(".json")])


def _signature(sources: Mapping[str, HostSnapshot]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((name, snapshot.collected_at) for name, snapshot in sources.items()))


class StateStore:
    """The state directory of one ``glueinfo run`` process (only one may use it)."""

    def __init__(self, directory: str, on_warning: Callable[[str], None] = log.warning,
                 clock: Callable[[], float] = time.time, refresh_after_s: float = 300.0) -> None:
        self.directory = directory
        self.hosts_dir = os.path.join(directory, "hosts")
        self.on_warning = on_warning
        self.clock = clock
        self.refresh_after_s = refresh_after_s
        self._written: dict[str, tuple[tuple[str, float], ...]] = {}  # host -> what its file holds
        self._written_at: dict[str, float] = {}  # host -> when this process last wrote its file (clock)
        self._on_disk: set[str] = set()  # hosts with a file, readable or not

    def _path(self, host: str) -> str:
        return os.path.join(self.hosts_dir, _file_name(host))

    def load(self) -> HostStates:
        """Every host's snapshots as last saved; unreadable files are warned about and skipped."""
        states: HostStates = {}
        try:
            names = sorted(os.listdir(self.hosts_dir))
        except FileNotFoundError:
            return states
        except OSError as exc:
            self.on_warning(f"state directory {self.hosts_dir}: cannot list: {exc.strerror or exc}; starting without state")
            return states
        for name in names:
            if name.startswith(".") or not name.endswith(".json"):
                continue
            host = _host_of(name)
            self._on_disk.add(host)
            path = os.path.join(self.hosts_dir, name)
            try:
                sources = self._read(path, host)
            except ValueError as exc:
                self.on_warning(f"state file {path} ignored: {exc}; it is rebuilt at the next save")
                continue
            states[host] = sources
            self._written[host] = _signature(sources)
        from glueinfo.core.atomicwrite import TEMP_SUFFIX  # file code is imported where there are files (see save)

        for name in names:  # temporaries of a writer killed mid-save (only this process writes here)
            if name.startswith(".") and name.endswith(TEMP_SUFFIX):
                try:
                    os.unlink(os.path.join(self.hosts_dir, name))
                except OSError:
                    pass
        return states

    @staticmethod
    def _read(path: str, host: str) -> dict[str, HostSnapshot]:
        from glueinfo.core.files import read_capped

        raw = read_capped(path, MAX_STATE_FILE)
        try:
            data: Any = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"not JSON ({one_line(exc, 120)})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("sources"), dict):
            raise ValueError(f"not a glueinfo state file (format {FORMAT} with 'sources')")
        if data.get("host") != host:
            raise ValueError(f"names host {str(data.get('host'))[:80]!r}, not {host!r}")
        sources = {}
        for source, item in data["sources"].items():
            try:
                snapshot = HostSnapshot.from_dict(item)
            except (ModelError, TypeError, ValueError) as exc:
                raise ValueError(f"source {source!r}: {one_line(exc, 160)}") from None
            if not snapshot.hostname:
                raise ValueError(f"source {source!r}: snapshot has no hostname")
            sources[str(source)] = snapshot
        return sources

    def save(self, states: Mapping[str, Mapping[str, HostSnapshot]]) -> list[str]:
        """Write the hosts whose snapshots changed, remove the files of hosts gone.

        Returns one-line errors (a full or read-only disk); the old files stay
        as they were and the next save tries again.
        """
        # The file readers and writers are imported here and in load: a command run before the
        # first `glueinfo run` made the directory never loads them.
        from glueinfo.core.atomicwrite import WriteError, write_atomic

        errors: list[str] = []
        try:
            os.makedirs(self.hosts_dir, exist_ok=True)
        except OSError as exc:
            return [f"state directory {self.hosts_dir}: cannot create: {exc.strerror or exc}"]
        now = self.clock()
        for host, sources in states.items():
            signature = _signature(sources)
            written = self._written.get(host)
            if written == signature:
                continue
            if written is not None and {name for name, _ in written} == set(sources) \
                    and now - self._written_at.get(host, float("-inf")) < self.refresh_after_s:
                continue  # only newer snapshots from the same sources: written at the next refresh
            document = {"format": FORMAT, "host": host, "saved_at": self.clock(),
                        "sources": {name: snapshot.to_dict() for name, snapshot in sorted(sources.items())}}
            try:
                write_atomic(self._path(host), json.dumps(document, separators=(",", ":"), ensure_ascii=False), mode=0o640,
                             durable=False)
            except WriteError as exc:
                errors.append(str(exc))
                self._written.pop(host, None)
                continue
            self._written[host] = signature
            self._written_at[host] = now
            self._on_disk.add(host)
        for host in sorted(self._on_disk - set(states)):
            try:
                os.unlink(self._path(host))
            except FileNotFoundError:
                pass
            except OSError as exc:
                errors.append(f"{self._path(host)}: cannot remove: {exc.strerror or exc}")
                continue
            self._on_disk.discard(host)
            self._written.pop(host, None)
        return errors
