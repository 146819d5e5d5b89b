"""Text rules every layer shares: a message clipped to one line.

glueinfo's messages (errors, warnings, a tool's output quoted in them,
``last_error`` on the status page and in /metrics) are one line by contract
(``glueinfo.core.errors``).  A batch system's stderr, an exception from a
library or a hostile peer's answer may hold newlines, tabs and runs of
spaces, and be any length: :func:`one_line` is the one way such text is made
fit to show.
"""

from __future__ import annotations

ELLIPSIS = "..."


def one_line(text: object, limit: int = 300) -> str:
    """``str(text)`` on one line of at most ``limit`` characters.

    Every run of whitespace (newlines, tabs, several spaces) becomes one
    space, and leading and trailing whitespace goes.  A line longer than
    ``limit`` keeps its first ``limit - 3`` characters followed by ``...``,
    so a reader sees that it was cut (a ``limit`` under 4 cuts without the
    mark).  Never raises for any ``text`` whose ``str()`` does not.
    """
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    if limit < len(ELLIPSIS) + 1:
        return line[:max(0, limit)]
    return line[:limit - len(ELLIPSIS)] + ELLIPSIS
