"""core.text.one_line: the one way a message is made one line (what a log, the status page and
/metrics show of an error).  Expected values are written by hand."""

from __future__ import annotations

from glueinfo.core.text import one_line


def test_whitespace_runs_become_one_space_and_the_ends_are_trimmed():
    assert one_line("  squeue: error:\n\tUnable  to contact\r\n") == "squeue: error: Unable to contact"


def test_short_text_is_kept_whole():
    assert one_line("x" * 300) == "x" * 300
    assert one_line("") == ""


def test_long_text_is_cut_with_a_mark_to_exactly_the_limit():
    assert one_line("abcdefghij", 8) == "abcde..."
    clipped = one_line("y" * 1000)
    assert len(clipped) == 300 and clipped == "y" * 297 + "..."


def test_the_limit_is_counted_after_the_whitespace_is_collapsed():
    assert one_line("a\n\n\n\nb", 3) == "a b"


def test_tiny_limits_cut_without_a_mark():
    assert one_line("abcdef", 3) == "abc"
    assert one_line("abcdef", 0) == ""


def test_any_object_is_shown_by_its_str():
    assert one_line(ValueError("bad\nvalue")) == "bad value"
    assert one_line(42) == "42"
