"""What a long one-shot command is doing, on a terminal: ``glueinfo: ldif: gathering hosts... 3 s``.

``ldif``, ``gather`` and ``publish`` on a 30,000-host site take some
seconds before they print anything.  On a terminal (stderr a TTY) a
:class:`Progress` line says which stage the command is in (reading the state
directory, gathering, asking the batch systems, assembling, rendering) with
the host count once known and the seconds so far, rewritten in place with
``\\r``.  It appears only once the command has run for ``delay_s`` (one
second): a quick command prints nothing more.  Never when stderr is not a
terminal: a BDII provider's stderr is a pipe or a file, and gets only what
it always got.

A warning logged meanwhile is printed on a clean line (the progress line is
blanked first and drawn again at the next tick), and :meth:`Progress.pause`
blanks it for good before the command writes its result to the same
terminal; :meth:`Progress.close` (or leaving the ``with`` block) blanks it
at the end, so the terminal is left as the command's output alone.

The line is drawn by a daemon thread that wakes every ``every_s``; the clock
is passed in like every other (tests give their own).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO, Optional


class Progress:
    """The stage line of one command (module docstring); does nothing when ``enabled`` is False
    (default: whether ``stream`` is a terminal)."""

    def __init__(self, command: str, stream: Optional[IO[str]] = None, *, clock: Callable[[], float] = time.monotonic,
                 delay_s: float = 1.0, every_s: float = 0.5, enabled: Optional[bool] = None) -> None:
        self.command = command
        self.stream = stream if stream is not None else sys.stderr
        self.clock, self.delay_s, self.every_s = clock, delay_s, every_s
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self.started = clock()
        self.text = "starting"
        self._width = 0  # characters of the line now on the terminal (0: none)
        self._paused = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._filter = _ClearBeforeRecord(self)
        self._handlers: list[logging.Handler] = []

    # -- what the command says ---------------------------------------------------------------
    def stage(self, text: str) -> None:
        """The command is now doing ``text`` (e.g. "gathering hosts"); shown at the next tick."""
        with self._lock:
            self.text = text
        if self.enabled:
            self.tick()

    def pause(self) -> None:
        """Blank the line and show no more: the command writes its result to this terminal now."""
        with self._lock:
            self._paused = True
            self._blank()

    def start(self) -> Progress:
        if self.enabled and self._thread is None:
            for handler in logging.getLogger().handlers:  # a warning is printed on a line of its own
                if isinstance(handler, logging.StreamHandler) and handler.stream is self.stream:
                    handler.addFilter(self._filter)
                    self._handlers.append(handler)
            self._thread = threading.Thread(target=self._run, name="glueinfo-progress", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop drawing and blank the line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        for handler in self._handlers:
            handler.removeFilter(self._filter)
        self._handlers.clear()
        with self._lock:
            self._blank()

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, kind: Optional[type[BaseException]], error: Optional[BaseException],
                 trace: Optional[TracebackType]) -> None:
        self.close()

    # -- drawing ---------------------------------------------------------------------------------
    def line(self) -> str:
        """The line as it is drawn now."""
        return f"glueinfo: {self.command}: {self.text}... {max(0.0, self.clock() - self.started):.0f} s"

    def tick(self) -> None:
        """Draw the line when the command has run ``delay_s`` and is not paused."""
        with self._lock:
            if self._paused or not self.enabled or self.clock() - self.started < self.delay_s:
                return
            text = self.line()
            try:
                self.stream.write("\r" + text.ljust(self._width))
                self.stream.flush()
            except (OSError, ValueError):  # the terminal went away: nothing more to show
                self._paused = True
                return
            self._width = len(text)

    def blank(self) -> None:
        with self._lock:
            self._blank()

    def _blank(self) -> None:
        if self._width:
            try:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._width = 0

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.tick()


class _ClearBeforeRecord(logging.Filter):
    """Blanks the progress line before a record is printed on its stream (the next tick draws it again)."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress

    def filter(self, record: logging.LogRecord) -> bool:
        self.progress.blank()
        return True


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def hosts(count: int) -> str:
    return f"{count:,} host{'' if count == 1 else 's'}"
