"""The one retry rule of everything glueinfo retries (an LDAP server, a broker, a consumer):
the first wait after a failure is the minimum, each further failure doubles it, up to the
maximum; a success starts again from the minimum (the caller sets its wait back to 0)."""

from __future__ import annotations


def next_wait(current_s: float, minimum_s: float, maximum_s: float) -> float:
    """The wait after one more failure, given the wait so far (0: none yet)."""
    return minimum_s if current_s <= 0 else min(maximum_s, current_s * 2)
