"""Read stage: host snapshots stored as files, for a site's other hosts.

A path is a snapshot JSON file (``glueinfo probe > wn01.json``, or a JSON
list of snapshots), a Node XML
file (an agent's /node.xml saved to disk, a ``<Node>`` or ``<Data>``), or a
directory of ``*.json`` / ``*.xml`` files.  A file that cannot be read is
reported through ``on_error`` and skipped: one bad file never hides the
other hosts.  Two snapshots of the same host: the newer one wins.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable

from glueinfo.core.model import HostSnapshot, ModelError
from glueinfo.core.text import one_line

MAX_FILE_BYTES = 64 * 2**20


def snapshot_paths(path: str) -> list[str]:
    """The snapshot files a path names: itself, or a directory's ``*.json`` and ``*.xml`` (not dot-files)."""
    if os.path.isdir(path):
        return sorted(os.path.join(path, name) for name in os.listdir(path)
                      if name.endswith((".json", ".xml")) and not name.startswith("."))
    return [path]


def read_snapshot_file(path: str, follow_symlinks: bool = False) -> list[HostSnapshot]:
    """The snapshot(s) in one regular file; ValueError (one line) when it cannot be read.
    ``follow_symlinks`` for a file the admin named himself, never for one found in a directory."""
    from glueinfo.core.files import read_capped  # only where there are files: most sites list none

    try:
        data = read_capped(path, MAX_FILE_BYTES, follow_symlinks=follow_symlinks)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if data.lstrip()[:1] == b"<":
        from glueinfo.sss.node_reader import NodeXMLError, read_nodes

        try:
            return read_nodes(data, what=path, source="file")
        except NodeXMLError as exc:
            raise ValueError(str(exc)) from None
    try:
        parsed = json.loads(data.decode("utf-8"))
        items = parsed if isinstance(parsed, list) else [parsed]  # one snapshot, or a list of them
        snapshots = [HostSnapshot.from_dict(item) for item in items]
    except (ValueError, ModelError, UnicodeDecodeError, TypeError) as exc:
        raise ValueError(f"{path}: not a glueinfo snapshot: {one_line(exc, 160)}") from None
    for snapshot in snapshots:
        if not snapshot.hostname:
            raise ValueError(f"{path}: a snapshot has no hostname")
    return snapshots


class SiteFiles:
    """The snapshot files an admin lists ([node] site_snapshots), read again only when they change.

    A file whose (inode, size, mtime) is unchanged since the last read gives
    the snapshots it gave then; a directory is listed at every read (a new
    file is seen at once).  Errors are reported at every read, as
    one line each, through ``on_error``.
    """

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = tuple(paths)
        self._cache: dict[str, tuple[tuple[int, int, int], list[HostSnapshot]]] = {}

    def load(self, on_error: Callable[[str], None] = lambda message: None) -> list[HostSnapshot]:
        """Every host's snapshot (the newest when a host is in several files), in the order first seen."""
        by_host: dict[str, HostSnapshot] = {}
        seen_files = set()
        for path in self.paths:
            try:
                files = snapshot_paths(path)
            except OSError as exc:
                on_error(f"{path}: cannot list: {exc.strerror or exc}")
                continue
            for name in files:
                seen_files.add(name)
                try:
                    info = os.stat(name)
                    signature = (info.st_ino, info.st_size, info.st_mtime_ns)
                except OSError as exc:
                    on_error(f"{name}: cannot read: {exc.strerror or exc}")
                    continue
                cached = self._cache.get(name)
                if cached is not None and cached[0] == signature:
                    found = cached[1]
                else:
                    try:
                        found = read_snapshot_file(name, follow_symlinks=name == path)
                    except ValueError as exc:
                        self._cache.pop(name, None)
                        on_error(str(exc))
                        continue
                    self._cache[name] = (signature, found)
                for snapshot in found:
                    known = by_host.get(snapshot.hostname)
                    if known is not None:
                        on_error(f"{name}: host {snapshot.hostname} seen twice; keeping the newer snapshot")
                        if known.collected_at >= snapshot.collected_at:
                            continue
                    by_host[snapshot.hostname] = snapshot
        for gone in set(self._cache) - seen_files:
            del self._cache[gone]
        return list(by_host.values())
