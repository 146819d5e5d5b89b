"""Reading files that another process or host wrote: never more than a cap,
only regular files, and a one-line reason when one cannot be read (writing
is atomicwrite.py).

A root daemon reads directories other hosts write (the spool, often an NFS
export) and its own state directory: a FIFO there must not hang it, a
device must not be read, and a symlink must not make it open a file outside
(``/etc/shadow`` dropped into the spool as ``wn01.xml``).  So the file is
opened non-blocking and without following a symlink, and checked to be a
regular file on the open descriptor (no window between check and read).
"""

from __future__ import annotations

import os
import stat

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory", stat.S_IFLNK: "a symlink"}


def open_regular(path: str, follow_symlinks: bool = False) -> int:
    """A read-only descriptor on ``path``, which must be a regular file; ValueError naming why not.
    ``follow_symlinks`` only for a path an admin wrote himself (a file named in the config)."""
    return _open_regular(path, follow_symlinks)[0]


def _open_regular(path: str, follow_symlinks: bool) -> tuple[int, int]:
    """open_regular's descriptor, and the file's size when it was opened."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: O_NOFOLLOW met a symlink
            raise ValueError("is a symlink: not followed (only regular files in the directory are read)") from None
        raise ValueError(f"cannot read: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    mode = info.st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ValueError(f"is {_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a regular file: not read")
    return fd, info.st_size


def read_capped(path: str, limit: int, follow_symlinks: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (see open_regular); ValueError naming why when
    it is not one, cannot be read, or is over ``limit`` bytes."""
    fd, size = _open_regular(path, follow_symlinks)
    # Plain reads of the size the file had (plus one, to meet its end), never past one byte over the
    # cap, which tells "too large" without reading it all: no buffered file object, and no buffer of
    # the cap's size for a 4 kB spool file (together two thirds of the read's time).
    parts: list[bytes] = []
    total = 0
    try:
        while total <= limit:
            wanted = min(limit + 1 - total, max(size + 1 - total, 65536))
            chunk = os.read(fd, wanted)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
            if len(chunk) < wanted:  # a regular file reads short only at its end: no call just to be told so
                break
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data


def read_password_file(path: str, key: str) -> str:
    """The first line of the password file ``path`` named by the config key ``key`` ('' for no
    path: no password); ValueError naming the key, the file and why when it cannot be read.
    An admin's own file: a symlink to it is followed."""
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{key} {path}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
