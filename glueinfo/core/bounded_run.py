"""Running an external command within bounds of time, bytes and processes.

:func:`run_bounded` is how glueinfo runs a program it does not trust to end
or to stop talking (a batch system's ``squeue``, ``condor_q``, ``qstat``...):

- **processes**: the command starts in a session and process group of its
  own (``setsid``), with stdin from /dev/null.  Whatever way the run ends
  (normal exit, timeout, too much output, an error in this process) the
  whole group is sent SIGKILL and the command is reaped, so no child it
  forked outlives the call.  A child that left the group on purpose
  (``setsid``, a daemon such as an ssh ControlPersist master) is its own.
- **time**: one deadline covers the start, every read and the wait for the
  exit status.  When the command itself has exited but a child of it still
  holds its stdout or stderr open, the pipes are read for ``exit_grace_s``
  more, then the group is killed: a daemonising child does not stall the
  read until the deadline.
- **bytes**: stdout and stderr are read as they stream (one selector, no
  thread).  stdout past ``max_stdout`` bytes ends the run; stderr is kept up
  to ``max_stderr`` bytes and the rest read and dropped (a chatty tool is not
  an error).

Failures are :class:`CommandTimedOut` and :class:`OutputTooLarge`, raised
after the group is killed; a program that cannot be started raises the
``OSError`` ``subprocess.Popen`` gives (``FileNotFoundError``,
``PermissionError``), with nothing to kill.  :func:`decode_text` turns the
bytes read into text without a second copy beyond the text itself, and
refuses output that is not text.
"""

from __future__ import annotations

import codecs
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from glueinfo.core.errors import UpstreamError

KIB = 1024
MIB = 1024 * KIB

# What a run keeps of stderr: enough for any tool's error message.
MAX_STDERR = 64 * KIB
# How long the pipes are still read once the command itself has exited (a child of it may still
# be writing the last of the output): short, since nothing legitimate keeps a batch tool's pipes.
EXIT_GRACE_S = 0.5
# The bytes asked of the kernel per read; a pipe rarely holds more.
CHUNK = 256 * KIB
# How often the exit is looked for where the kernel gives no pidfd (Linux < 5.3).
POLL_S = 0.05
# The wait for a killed command to be reaped: one stuck in the kernel (a hung NFS read) is left to
# subprocess's own reaping rather than block the caller past its deadline.
REAP_S = 1.0
# Output with more than one byte in this many that is not UTF-8, and more than NOT_TEXT_FLOOR such
# bytes, is not text (a tool printing binary garbage, which decoded would take up to four times
# its size); stray Latin-1 bytes in job names, and any short output, are read, each bad byte as
# U+FFFD, for the plugin's parser to judge.
NOT_TEXT_ONE_IN = 16
NOT_TEXT_FLOOR = 4096


class CommandError(UpstreamError):
    """A command run by :func:`run_bounded` that was stopped or whose output was refused;
    ``program`` is argv[0] as given."""

    def __init__(self, message: str, program: str) -> None:
        super().__init__(message)
        self.program = program


class CommandTimedOut(CommandError):
    """The command was still running (or still holding its pipes) at the deadline; its process group
    was killed.  ``timeout_s`` is the time it was given."""

    def __init__(self, program: str, timeout_s: float) -> None:
        super().__init__(f"{program}: timed out after {timeout_s:.3g} s; its process group was killed", program)
        self.timeout_s = timeout_s


class OutputTooLarge(CommandError):
    """The command printed more than ``limit`` bytes on stdout; its process group was killed and
    nothing it printed is kept."""

    def __init__(self, program: str, limit: int) -> None:
        super().__init__(f"{program}: output passed the {size_text(limit)} cap; its process group was killed", program)
        self.limit = limit


class NotText(CommandError):
    """The command's output is not UTF-8 text (more than ``NOT_TEXT_FLOOR`` bytes, and more than one
    byte in ``NOT_TEXT_ONE_IN``, are not): binary garbage, which decoded would take up to four times
    its size."""

    def __init__(self, program: str, size: int) -> None:
        super().__init__(f"{program}: printed {size_text(size)} that is not UTF-8 text", program)


@dataclass
class Finished:
    """A command that ended by itself: its exit status, its stdout (at most the cap; a bytearray
    the caller may ``clear()`` once decoded) and the first ``max_stderr`` bytes of its stderr."""

    returncode: int
    stdout: bytearray
    stderr: bytes
    stderr_cut: bool = False


def size_text(size: int) -> str:
    """``size`` bytes as an admin would write them: ``64 MiB``, ``512 KiB``, else ``1000 bytes``."""
    for unit, name in ((MIB, "MiB"), (KIB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def run_bounded(argv: Sequence[str], timeout_s: float, max_stdout: int, env: Optional[Mapping[str, str]] = None, *,
                max_stderr: int = MAX_STDERR, exit_grace_s: float = EXIT_GRACE_S,
                clock: Callable[[], float] = time.monotonic) -> Finished:
    """Run ``argv`` within ``timeout_s`` seconds and ``max_stdout`` bytes of stdout (see the module).

    Returns the :class:`Finished` run, whatever its exit status.  Raises
    :class:`CommandTimedOut` when the deadline passes first (the command still
    running, or its pipes still held), :class:`OutputTooLarge` when stdout
    passes ``max_stdout``; in both cases, and on any other exception, every
    process still in the command's group is killed before the call returns.
    ``OSError`` when the program cannot be started (nothing ran)."""
    deadline = clock() + timeout_s
    program = argv[0] if argv else ""
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=None if env is None else dict(env), start_new_session=True)
    try:
        out, err, cut = _read(proc, program, timeout_s, deadline, max_stdout, max_stderr, exit_grace_s, clock)
        if not _wait_exit(proc, deadline, clock):
            raise CommandTimedOut(program, timeout_s)
    finally:
        _end_group(proc)
    assert proc.returncode is not None  # reaped by _end_group after an exit _wait_exit saw
    return Finished(proc.returncode, out, bytes(err), cut)


def decode_text(data: bytearray, program: str) -> str:
    """``data`` as text: UTF-8, a stray byte that is not read as U+FFFD; :class:`NotText` when more
    than ``NOT_TEXT_FLOOR`` bytes, and more than one byte in ``NOT_TEXT_ONE_IN``, are not UTF-8.  Makes the text and nothing else as large
    (valid output is decoded once; invalid output is counted a chunk at a time first)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        first_bad = exc.start
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    allowed = max(NOT_TEXT_FLOOR, len(data) // NOT_TEXT_ONE_IN)
    bad = 0
    view = memoryview(data)
    try:
        for start in range(first_bad, len(data), CHUNK):
            bad += decoder.decode(view[start:start + CHUNK], final=start + CHUNK >= len(data)).count("\ufffd")
            if bad > allowed:
                raise NotText(program, len(data))
    finally:
        view.release()
    return data.decode("utf-8", "replace")


def _read(proc: subprocess.Popen[bytes], program: str, timeout_s: float, deadline: float, max_stdout: int,
          max_stderr: int, exit_grace_s: float, clock: Callable[[], float]) -> tuple[bytearray, bytearray, bool]:
    """stdout and stderr until both are at end of file, or until ``exit_grace_s`` after the
    command's exit while a child still holds one open."""
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    out, err = bytearray(), bytearray()
    cut = False
    exit_fd = _pidfd(proc.pid)
    selector = selectors.DefaultSelector()
    try:
        for fd in (out_fd, err_fd):
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ)
        open_pipes = 2
        exited_at: Optional[float] = None
        while open_pipes:
            now = clock()
            if exited_at is None and exit_fd is None and _has_exited(proc.pid):
                exited_at = now
            if now >= deadline:
                raise CommandTimedOut(program, timeout_s)
            if exited_at is not None and now >= exited_at + exit_grace_s:
                break  # a child of the command holds the pipes: killed with the group
            until = deadline if exited_at is None else min(deadline, exited_at + exit_grace_s)
            wait = until - now if exit_fd is not None or exited_at is not None else min(until - now, POLL_S)
            for key, _ in selector.select(wait):
                if key.fd == exit_fd:
                    selector.unregister(exit_fd)
                    exited_at = clock()
                    continue
                try:
                    chunk = os.read(key.fd, CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fd)
                    open_pipes -= 1
                elif key.fd == out_fd:
                    if len(out) + len(chunk) > max_stdout:
                        raise OutputTooLarge(program, max_stdout)
                    out += chunk
                else:
                    room = max_stderr - len(err)
                    if len(chunk) > room:
                        cut = True
                    if room > 0:
                        err += chunk[:room]
    finally:
        selector.close()
        if exit_fd is not None:
            os.close(exit_fd)
    return out, err, cut


def _pidfd(pid: int) -> Optional[int]:
    """A descriptor that becomes readable when ``pid`` exits, or None where the kernel has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _has_exited(pid: int) -> bool:
    """Whether ``pid`` (our child) has exited, without reaping it: its pid stays taken, so the
    process group it leads cannot be a new process's before it is killed."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_exit(proc: subprocess.Popen[bytes], deadline: float, clock: Callable[[], float]) -> bool:
    """Whether the command exits (unreaped) before the deadline: its pipes may close before it ends."""
    exit_fd = _pidfd(proc.pid)
    try:
        while not _has_exited(proc.pid):
            left = deadline - clock()
            if left <= 0:
                return False
            if exit_fd is None:
                time.sleep(min(left, POLL_S))
            else:
                with selectors.DefaultSelector() as selector:
                    selector.register(exit_fd, selectors.EVENT_READ)
                    selector.select(left)
        return True
    finally:
        if exit_fd is not None:
            os.close(exit_fd)


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the command's whole process group, then reap the command and close its pipes.

    The group is killed before the command is reaped: while its zombie holds the pid, no new
    process can lead a group of that number."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is empty: everything in it has ended and been reaped
    except PermissionError:
        pass  # every process left runs as another user (a sudo prefix): not ours to kill
    try:
        proc.wait(REAP_S)
    except subprocess.TimeoutExpired:
        pass  # in an uninterruptible sleep: subprocess reaps it later
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
