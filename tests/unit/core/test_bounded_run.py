"""glueinfo.core.bounded_run: a command run within a deadline, a byte cap on stdout and a
process group of its own that is killed whole (issue 26, findings 2 and 3).

Every command here is a real /bin/sh or Python child; which processes are left
is read from /proc, as an admin's `ps` would.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from glueinfo.core.bounded_run import (
    MAX_STDERR,
    CommandTimedOut,
    NotText,
    OutputTooLarge,
    decode_text,
    run_bounded,
    size_text,
)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def gone_soon(pid: int, patience_s: float = 5.0) -> bool:
    """SIGKILL is delivered asynchronously: ``pid`` gets a few seconds to die (a liveness bound).
    AssertionError naming the process when it is still alive after them."""
    wait_until(lambda: not alive(pid), f"process {pid} ended", patience_s, step=0.05)
    return not alive(pid)


@pytest.fixture
def pids(tmp_path):
    """A file the commands write their pids to; whatever is named there is killed at the end."""
    path = tmp_path / "pids"
    yield path
    if path.exists():
        for word in path.read_text().split():
            try:
                os.kill(int(word), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def written_pids(path: Path) -> list[int]:
    return [int(word) for word in path.read_text().split()]


def test_exit_code_stdout_and_stderr_of_a_command_that_ends():
    done = run_bounded(["/bin/sh", "-c", "printf 'two\\nlines\\n'; echo oops >&2; exit 3"], 10, 1024)
    assert (done.returncode, bytes(done.stdout), done.stderr, done.stderr_cut) == (3, b"two\nlines\n", b"oops\n", False)


def test_stdin_is_empty_and_the_command_leads_a_session_and_group_of_its_own():
    # cat reads stdin to its end: from /dev/null at once, from an inherited terminal or pipe never
    done = run_bounded(["/bin/sh", "-c", "cat; echo $$; cat /proc/$$/stat"], 10, 4096)
    assert done.returncode == 0
    pid_line, stat = bytes(done.stdout).decode().split("\n", 1)
    fields = stat[stat.rindex(")") + 2:].split()  # state ppid pgrp session ...
    assert int(fields[2]) == int(fields[3]) == int(pid_line)
    assert int(fields[2]) != os.getpgid(0)


def test_stdout_up_to_the_cap_is_read_and_one_byte_more_is_refused():
    exactly = run_bounded([sys.executable, "-c", "import sys; sys.stdout.write('x' * 4096)"], 10, 4096)
    assert bytes(exactly.stdout) == b"x" * 4096
    with pytest.raises(OutputTooLarge) as caught:
        run_bounded([sys.executable, "-c", "import sys; sys.stdout.write('x' * 4097)"], 10, 4096)
    assert caught.value.limit == 4096
    assert str(caught.value) == f"{sys.executable}: output passed the 4 KiB cap; its process group was killed"


def test_a_flood_is_stopped_at_the_cap_and_its_whole_group_killed(pids):
    # the flooding process is a grandchild: killing the shell alone would leave it writing
    script = f"yes garbage & echo $! >> {pids}; wait"
    with pytest.raises(OutputTooLarge):
        run_bounded(["/bin/sh", "-c", script], 30, 1024 * 1024)
    (flooder,) = written_pids(pids)
    assert gone_soon(flooder)


def test_a_chatty_stderr_is_cut_not_an_error():
    done = run_bounded([sys.executable, "-c", "import sys; sys.stderr.write('e' * 1_000_000); print('answer')"], 30, 1024)
    assert done.returncode == 0 and bytes(done.stdout) == b"answer\n"
    assert done.stderr == b"e" * MAX_STDERR and done.stderr_cut


def test_a_command_that_hangs_with_a_child_is_killed_whole_at_the_deadline(pids):
    with pytest.raises(CommandTimedOut) as caught:
        run_bounded(["/bin/sh", "-c", f"echo $$ >> {pids}; sleep 300 & echo $! >> {pids}; sleep 300"], 0.5, 1024)
    assert caught.value.timeout_s == 0.5
    assert "timed out after 0.5 s; its process group was killed" in str(caught.value)
    shell, child = written_pids(pids)
    assert gone_soon(shell) and gone_soon(child)


def test_a_command_that_closed_its_pipes_but_runs_on_times_out(pids):
    with pytest.raises(CommandTimedOut):
        run_bounded(["/bin/sh", "-c", f"echo $$ >> {pids}; exec >&- 2>&-; sleep 300"], 0.5, 1024)
    (shell,) = written_pids(pids)
    assert gone_soon(shell)


def test_a_command_that_exits_while_its_child_holds_stdout_is_read_at_its_exit(pids):
    """Reading to end of file would wait for `sleep 300`, so the 60 s deadline would pass: the exit
    is what ends the read (after a short grace), and the child is killed with the group."""
    done = run_bounded(["/bin/sh", "-c", f"sleep 300 & echo $! >> {pids}; echo partial; exit 4"], 60, 1024)
    assert (done.returncode, bytes(done.stdout)) == (4, b"partial\n")
    (child,) = written_pids(pids)
    assert gone_soon(child)


def test_a_background_child_is_killed_even_when_the_command_ends_cleanly(pids):
    done = run_bounded(["/bin/sh", "-c", f"sleep 300 >/dev/null 2>&1 & echo $! >> {pids}; echo done"], 10, 1024)
    assert (done.returncode, bytes(done.stdout)) == (0, b"done\n")
    (child,) = written_pids(pids)
    assert gone_soon(child)


def test_a_program_that_cannot_start_is_the_os_error():
    with pytest.raises(FileNotFoundError):
        run_bounded(["/nonexistent/squeue"], 10, 1024)


def test_decoding_keeps_text_and_reads_a_stray_byte_as_a_replacement():
    assert decode_text(bytearray("Zürich job ✓\n".encode()), "x") == "Zürich job ✓\n"
    # every job named in Latin-1: 20,000 bad bytes in 640 kB, past the floor, well under one in 16
    latin1 = bytearray(b"1|r\xe9sum\xe9 of run 7|RUNNING|atlas001|2024-07-02T09:00:00|wn01\n" * 10_000)
    assert decode_text(latin1, "x").splitlines()[0] == "1|r\ufffdsum\ufffd of run 7|RUNNING|atlas001|2024-07-02T09:00:00|wn01"


def test_binary_garbage_is_not_text_but_a_short_answer_is_left_to_the_parser():
    with pytest.raises(NotText) as caught:
        decode_text(bytearray(os.urandom(1_000_000)), "squeue")
    assert str(caught.value).startswith("squeue: printed ")
    assert decode_text(bytearray(b"\xff\xfe nonsense\n"), "sinfo") == "\ufffd\ufffd nonsense\n"


@pytest.mark.parametrize("size, text", [(64 * 1024 * 1024, "64 MiB"), (512 * 1024, "512 KiB"), (1000, "1000 bytes"),
                                        (1024 * 1024 + 1, "1048577 bytes")])
def test_size_text(size, text):
    assert size_text(size) == text
