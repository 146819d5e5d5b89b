"""glueinfo.core.parsed_cache: a cache file per set of inputs, named after their sizes and times,
holding what was written; a cache that cannot be written or read is no error to its user."""

from __future__ import annotations

import os

import pytest

from glueinfo.core import parsed_cache


def test_what_is_written_is_read_back(tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("text")
    path = parsed_cache.cache_file("demo", [str(source)], cache_dir=str(tmp_path / "cache"))
    value = ("format-1", {"key": ("a", 1, None, 2.5, True)}, frozenset({"x"}), (("nested",),))
    parsed_cache.write(path, value)
    assert parsed_cache.read(path) == value
    assert os.path.basename(path).startswith("demo-") and path.endswith(".marshal")


def test_an_edited_or_removed_input_names_another_cache_file(tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("text")
    inputs, cache = [str(source), str(tmp_path / "absent.txt")], str(tmp_path / "cache")
    first = parsed_cache.cache_file("demo", inputs, cache_dir=cache)
    assert parsed_cache.cache_file("demo", inputs, cache_dir=cache) == first
    assert parsed_cache.cache_file("demo", inputs, key="another reader", cache_dir=cache) != first
    source.write_text("longer text")
    edited = parsed_cache.cache_file("demo", inputs, cache_dir=cache)
    (tmp_path / "absent.txt").write_text("")
    assert len({first, edited, parsed_cache.cache_file("demo", inputs, cache_dir=cache)}) == 3


def test_a_cache_that_cannot_be_written_or_read_raises_only_on_reading(tmp_path):
    (tmp_path / "a-file").write_text("")
    path = parsed_cache.cache_file("demo", [], cache_dir=str(tmp_path / "a-file" / "cache"))
    parsed_cache.write(path, ("value",))  # cannot make the directory: nothing written, no error
    with pytest.raises(OSError):
        parsed_cache.read(path)
    damaged = tmp_path / "damaged.marshal"
    damaged.write_bytes(b"garbage")
    with pytest.raises((EOFError, ValueError, TypeError)):
        parsed_cache.read(str(damaged))
