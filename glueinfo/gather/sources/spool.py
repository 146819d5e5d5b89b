"""Source ``spool``: Node XML files that workers drop into a shared directory.

Each worker writes its own ``HOST.xml`` into ``[sources] spool_dir`` (an NFS
export, say), from cron, atomically: write a dot-file in the same directory,
then rename it over the real name, so the head node sees the old file or the
new one, never half of one::

    */2 * * * * glueinfo node-xml > /spool/.$(hostname -f).xml.tmp && mv -f /spool/.$(hostname -f).xml.tmp /spool/$(hostname -f).xml

Read: regular files named ``*.xml`` not starting with a dot (dot-files and
``*.tmp``/``*~`` are writes in progress or editor leftovers and are skipped),
at most ``max_body`` bytes each.  A symlink, FIFO or device in the spool is
reported and never opened (glueinfo.core.files), so a worker that can write
the spool cannot make a root daemon read another file or hang on a FIFO.
The file name is the host: the Node inside must have that Id (or its short
form, or an alias of ``[sources] aliases``), so a copied or misnamed file
cannot pose as another host.  A file whose Node carries no CollectedAt counts as
collected when it was last written (its mtime).  Files unchanged since the
last gather (same inode, size and mtime) are not read again; a file rewritten
with only its volatile figures changed (load, free memory, collection time) is
read without parsing it again (glueinfo.sss.node_file_reader.NodeFileReader: the
same snapshot and the same errors as a full read).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from typing import Any

from glueinfo.core.files import read_capped
from glueinfo.gather.registry import Source, SourceContext, SourceFailure, SourceReport

SOURCE_NAME = "spool"


def spool_candidates(directory: str) -> list[os.DirEntry[str]]:
    """The files of the spool that are finished Node XML documents, by name."""
    entries = []
    with os.scandir(directory) as scan:
        for entry in scan:
            if entry.name.startswith(".") or not entry.name.endswith(".xml"):
                continue
            entries.append(entry)
    return sorted(entries, key=lambda e: e.name)


def gather(ctx: SourceContext) -> SourceReport:
    from glueinfo.gather.identity import answers_to, parse_aliases
    from glueinfo.gather.naming import as_listed
    from glueinfo.sss.node_file_reader import NodeFileReader
    from glueinfo.sss.node_reader import NodeXMLError

    section = ctx.config.section("sources")
    report = SourceReport()
    try:
        aliases = parse_aliases(section["aliases"])
    except ValueError as exc:
        report.failures.append(SourceFailure(target="[sources] aliases", error=str(exc)))
        return report
    directory = section["spool_dir"]
    if not directory:
        report.failures.append(SourceFailure(target="[sources] spool_dir", error="not set, so the spool source has nothing to read"))
        return report
    try:
        entries = spool_candidates(directory)
    except OSError as exc:
        report.failures.append(SourceFailure(target=directory, error=f"cannot list the spool: {exc.strerror or exc}"))
        return report

    # file name -> ((inode, size, mtime_ns), snapshot or None when it was bad)
    seen: dict[str, tuple[tuple[int, int, int], Any]] = ctx.memory.setdefault("files", {})
    reader: NodeFileReader = ctx.memory.setdefault("reader", NodeFileReader())  # each file's last full read
    present = set()
    max_body = section["max_body"]
    for entry in entries:
        if ctx.remaining() <= 0:
            report.failures.append(SourceFailure(target=directory, error="gather time was up before every file was read"))
            break
        name, host = entry.name, entry.name[:-len(".xml")]
        path = os.path.join(directory, name)
        present.add(name)
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError as exc:
            report.failures.append(SourceFailure(target=path, host=host, error=f"cannot stat: {exc.strerror or exc}"))
            continue
        if not stat.S_ISREG(info.st_mode):  # a symlink (perhaps to /etc/shadow), a FIFO, a device: never opened
            if not stat.S_ISDIR(info.st_mode):  # a directory is an admin's own archive, not an attempt
                what = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                report.failures.append(SourceFailure(target=path, host=host, error=f"{what}: not read"))
            continue
        signature = (info.st_ino, info.st_size, info.st_mtime_ns)
        cached = seen.get(name)
        if cached is not None and cached[0] == signature and cached[1] is not None:
            report.snapshots.append(cached[1])
            continue
        if info.st_size > max_body:
            report.failures.append(SourceFailure(target=path, host=host,
                                                 error=f"{info.st_size} bytes is over the limit of {max_body} bytes ([sources] max_body)"))
            continue
        try:
            data = read_capped(path, max_body)
        except ValueError as exc:
            report.failures.append(SourceFailure(target=path, host=host, error=str(exc)))
            continue
        try:
            snapshot = reader.read(name, data, what=f"Node XML in {path}", source=SOURCE_NAME, max_bytes=max_body)
        except NodeXMLError as exc:
            seen.pop(name, None)
            reader.forget(name)
            report.failures.append(SourceFailure(target=path, host=host, error=str(exc)))
            continue
        if not answers_to(snapshot.hostname, host, aliases):
            report.failures.append(SourceFailure(
                target=path, host=host, error=f"Node claims to be {snapshot.hostname[:80]!r}, not {host!r}: refused"))
            continue
        if snapshot.collected_at <= 0:
            snapshot = dataclasses.replace(snapshot, collected_at=info.st_mtime)
        snapshot = as_listed(snapshot, host, aliases)  # the file's name, as glueinfo.gather.naming says
        seen[name] = (signature, snapshot)
        report.snapshots.append(snapshot)
    for gone in set(seen) - present:
        del seen[gone]
    for gone in set(reader.names()) - present:
        reader.forget(gone)
    return report


SOURCE = Source(SOURCE_NAME, gather, "Node XML files workers write into [sources] spool_dir")
