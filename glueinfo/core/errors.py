"""The one base class of glueinfo's own errors.

Every error glueinfo raises on purpose derives from GlueinfoError, so a
caller (a command, the daemon, a third-party tool embedding glueinfo) can
catch "anything glueinfo reports" in one clause and show its message: by
contract the message is one line that names what was wrong.  Subclasses
also derive from the built-in type they used to be (ValueError, OSError),
so existing ``except ValueError`` code keeps working.
"""

from __future__ import annotations


class GlueinfoError(Exception):
    """An error glueinfo reports on purpose; ``str(error)`` is one line naming what was wrong."""
