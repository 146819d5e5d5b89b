"""The file publisher: a reader sees the old file or the new one, never half; a
failed write (full disk, read-only filesystem, no permission) leaves the old
file intact and says which path in one line.

Full and read-only filesystems are real: a 64 KiB tmpfs mounted for the test
(and remounted read-only).  Where mounting is not allowed (not root, or a
sandbox without mount), the same failure is injected from the write path
instead; each test says in its output which of the two it used.
"""

from __future__ import annotations

import errno
import os
import pwd
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from glueinfo.core import atomicwrite
from glueinfo.core.atomicwrite import WriteError, remove_temporaries, write_atomic


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A mounted 64 KiB tmpfs, or None when this process may not mount."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if os.geteuid() != 0:
        yield None
        return
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(mount_point)],
                          capture_output=True)
    if proc.returncode != 0:
        yield None
        return
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def test_replaces_the_file_with_the_final_mode_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "glue.ldif"
    target.write_text("old\n")
    write_atomic(target, "dn: o=grid\nnew: é\n")
    assert target.read_bytes() == "dn: o=grid\nnew: é\n".encode()
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)  # BDII's user must be able to read it
    assert leftovers(tmp_path) == []
    write_atomic(target, b"\x00binary", mode=0o600, durable=False)
    assert target.read_bytes() == b"\x00binary"
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)


def test_a_full_disk_keeps_the_old_file_and_names_the_path(tiny_tmpfs, tmp_path, monkeypatch, capsys):
    directory = tiny_tmpfs or tmp_path
    target = directory / "nodes.xml"
    target.write_bytes(b"<Data>old</Data>\n")
    if tiny_tmpfs is None:
        def full(fd, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(atomicwrite.os, "write", full)
        how = "injected ENOSPC (cannot mount a tmpfs here)"
    else:
        how = "real 64 KiB tmpfs"
    with pytest.raises(WriteError) as caught:
        write_atomic(target, b"x" * 200_000)
    with capsys.disabled():
        print(f"\n  full disk: {how}: {caught.value}")
    message = str(caught.value)
    assert "\n" not in message
    assert str(target) in message and "No space left on device" in message and "ENOSPC" in message
    assert caught.value.errno == errno.ENOSPC
    assert target.read_bytes() == b"<Data>old</Data>\n"
    assert leftovers(directory) == []  # the half-written temporary is gone, the space given back
    if tiny_tmpfs is not None:  # and the disk is usable again for a write that fits
        write_atomic(target, b"<Data>new</Data>\n")
        assert target.read_bytes() == b"<Data>new</Data>\n"


def test_a_read_only_filesystem_keeps_the_old_file(tiny_tmpfs, tmp_path, monkeypatch, capsys):
    directory = tiny_tmpfs or tmp_path
    target = directory / "glue.ldif"
    target.write_text("dn: o=grid\n")
    if tiny_tmpfs is not None:
        subprocess.run(["mount", "-o", "remount,ro", str(tiny_tmpfs)], check=True)
        how = "real tmpfs remounted read-only"
    else:
        def read_only(*args, **kwargs):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        monkeypatch.setattr("tempfile.mkstemp", read_only)
        how = "injected EROFS (cannot mount a tmpfs here)"
    with pytest.raises(WriteError) as caught:
        write_atomic(target, "dn: o=grid\nchanged: yes\n")
    with capsys.disabled():
        print(f"\n  read-only: {how}: {caught.value}")
    assert caught.value.errno == errno.EROFS
    assert str(target) in str(caught.value) and "Read-only file system" in str(caught.value)
    assert target.read_text() == "dn: o=grid\n"


def _write_as(uid: int, gid: int, target: Path) -> tuple[int, str]:
    """write_atomic in a forked child running as uid:gid; (exit code, its one-line error)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 0
        try:
            os.close(read_end)
            os.setgid(gid)
            os.setuid(uid)
            try:
                write_atomic(target, "new\n")
            except WriteError as exc:
                os.write(write_end, str(exc).encode())
                code = 3
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), message


@pytest.fixture
def reachable(tmp_path):
    """A directory every user can look into (pytest's tmp_path is 0700 to others): as root,
    a fresh one under /tmp with mode 0755."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    base = Path(tempfile.mkdtemp(prefix="glueinfo-eacces-"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _write_without_permission(directory: Path, target: Path) -> tuple[int, str]:
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chmod(directory, 0o755)
        return _write_as(nobody.pw_uid, nobody.pw_gid, target)
    os.chmod(directory, 0o555)
    try:
        return _write_as(os.getuid(), os.getgid(), target)
    finally:
        os.chmod(directory, 0o755)


def test_no_permission_keeps_the_old_file(reachable):
    # Real EACCES: root ignores directory permissions, so as root the write is
    # tried by a forked child that has become 'nobody'.
    directory = reachable / "out"
    directory.mkdir()
    target = directory / "glue.ldif"
    target.write_text("old\n")
    os.chmod(target, 0o644)
    code, message = _write_without_permission(directory, target)
    assert code == 3
    assert message == f"{target}: not written: Permission denied [EACCES]; the previous file is unchanged"
    assert target.read_text() == "old\n"
    assert leftovers(directory) == []


def test_no_permission_and_no_previous_file_says_there_is_none(reachable):
    # An output directory that cannot be written from the first publish: nothing is "unchanged".
    directory = reachable / "out"
    directory.mkdir()
    target = directory / "glue.ldif"
    code, message = _write_without_permission(directory, target)
    assert code == 3
    assert message == f"{target}: not written: Permission denied [EACCES]; there is no previous file"
    assert not target.exists() and leftovers(directory) == []


WRITER = """
import sys
from glueinfo.core.atomicwrite import write_atomic
path, size = sys.argv[1], int(sys.argv[2])
blocks = [bytes([65 + i]) * size for i in range(4)]
print("ready", flush=True)
i = 0
while True:
    write_atomic(path, blocks[i % 4])
    i += 1
"""


def test_sigkill_while_writing_leaves_a_complete_old_or_new_file(tmp_path):
    target = tmp_path / "big.ldif"
    size = 24 * 2**20
    target.write_bytes(b"Z" * size)
    rng = random.Random(6)
    seen = set()
    env = dict(os.environ, PYTHONPATH=str(Path(atomicwrite.__file__).parents[2]))
    for _round in range(8):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(size)], stdout=subprocess.PIPE, env=env)
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.02, 0.6))
        proc.kill()  # SIGKILL: no handler, no cleanup
        proc.wait()
        proc.stdout.close()
        data = target.read_bytes()
        assert len(data) == size, f"file is {len(data)} bytes after SIGKILL"
        assert data == data[:1] * size, "file mixes two versions"
        seen.add(data[:1])
    # Leftover temporaries (killed mid-write) are the only trace, and are removed at the next start.
    remove_temporaries(target)
    assert leftovers(tmp_path) == []
    assert seen - {b"Z"}, "the writer never replaced the file: the test proved nothing"
