"""`glueinfo run`'s output files written from pieces (the LDIF's entries, the Node XML's Nodes,
never the whole document): the file holds exactly their bytes, an unchanged document only
marks the file fresh (same inode, new modification time), and a failure mid-way leaves the old
file whole with no temporary file behind."""

from __future__ import annotations

import os

from glueinfo.publish.outputs.file import OutputFiles

PIECES = [b"dn: o=grid\n", b"objectClass: organization\n", b"\n"]


def temporaries(path) -> list[str]:
    return [name for name in os.listdir(path.parent) if name.endswith(".tmp")]


def test_pieces_make_the_file_and_the_same_bytes_only_mark_it_fresh(tmp_path):
    path = tmp_path / "glue.ldif"
    outputs = OutputFiles()
    assert outputs.publish(str(path), iter(PIECES))
    assert path.read_bytes() == b"".join(PIECES)
    inode = path.stat().st_ino
    os.utime(path, (1_000_000_000, 1_000_000_000))

    assert outputs.publish(str(path), iter(PIECES))  # the same bytes, in other pieces too
    assert path.stat().st_ino == inode and path.stat().st_mtime > 1_000_000_000
    assert outputs.publish(str(path), iter([b"".join(PIECES)]))
    assert path.stat().st_ino == inode and (outputs.rewritten, outputs.touched) == (1, 2)
    assert temporaries(path) == []

    assert outputs.publish(str(path), iter([*PIECES, b"dn: o=glue\n\n"]))
    assert path.read_bytes() == b"".join(PIECES) + b"dn: o=glue\n\n" and path.stat().st_ino != inode


def test_a_new_process_finds_the_bytes_the_file_already_holds(tmp_path):
    path = tmp_path / "nodes.xml"
    path.write_bytes(b"".join(PIECES))
    inode = path.stat().st_ino
    assert OutputFiles().publish(str(path), iter(PIECES))
    assert path.stat().st_ino == inode and temporaries(path) == []


def test_a_failure_mid_way_leaves_the_old_file_whole(tmp_path, caplog):
    path = tmp_path / "glue.ldif"
    outputs = OutputFiles()
    outputs.publish(str(path), iter(PIECES))

    def failing():
        yield b"dn: o=grid\n"
        raise OSError(28, "No space left on device")

    assert not outputs.publish(str(path), failing())
    assert path.read_bytes() == b"".join(PIECES) and temporaries(path) == []
    assert outputs.errors[str(path)].startswith(f"{path}: not written: No space left on device")
    assert "\n" not in outputs.errors[str(path)]


def test_a_document_of_many_small_pieces_past_the_write_blocks_is_whole(tmp_path):
    path = tmp_path / "glue.ldif"
    pieces = [f"dn: GlueHostUniqueID=wn{i:06d}.example.org,o=grid\nGlueHostName: wn{i:06d}\n\n".encode()
              for i in range(60_000)]  # ~4.7 MB: several 1 MiB write blocks and a last short one
    assert OutputFiles().publish(str(path), iter(pieces))
    assert path.read_bytes() == b"".join(pieces)
