"""read_capped: a regular file's bytes whole, whatever its size against the read sizes, and a
one-line refusal past the cap (compared with the file as Python's own open() reads it)."""

from __future__ import annotations

import os

import pytest

from glueinfo.core.files import read_capped


@pytest.mark.parametrize("size", [0, 1, 4096, 65535, 65536, 65537, 200_000])
def test_the_whole_file_is_read_at_every_size(tmp_path, size):
    path = tmp_path / "node.xml"
    path.write_bytes(os.urandom(size))
    assert read_capped(str(path), 1_000_000) == path.read_bytes()


@pytest.mark.parametrize("size", [1, 65537, 200_000])
def test_a_file_over_the_cap_is_refused(tmp_path, size):
    path = tmp_path / "node.xml"
    path.write_bytes(b"x" * size)
    assert read_capped(str(path), size) == path.read_bytes()
    with pytest.raises(ValueError, match=f"larger than {size - 1} bytes"):
        read_capped(str(path), size - 1)
