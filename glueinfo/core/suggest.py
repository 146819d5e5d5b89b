"""Near misses: what an admin probably meant by a name glueinfo does not know.

A config key, section, source or choice written with one letter wrong
(``agent`` for ``agents``, ``listn`` for ``listen``) is refused like any
unknown name; the message then says which known names are close, instead of
listing all of them (``[sources]`` alone has some thirty keys).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

# SequenceMatcher's ratio from which a known name counts as a near miss: one letter added,
# dropped or changed in a name of four letters or more (``host``/``hots`` is 0.75).
CUTOFF = 0.75
NEARLY = 0.1  # a second name is offered only when it is this close to the best one's ratio


def near_misses(word: str, known: Iterable[str], limit: int = 3) -> list[str]:
    """The known names closest to ``word`` (at most ``limit``, the closest first, and only those
    nearly as close as the closest: ``clusters`` is ``cluster``, not also ``subcluster``); []
    when none is close.  Case is ignored in the comparison, never in what is returned."""
    import difflib  # only when a name is wrong: a command's start-up does not pay for it

    names = {name.lower(): name for name in known}
    scored = []
    for candidate in difflib.get_close_matches(word.lower(), list(names), n=limit, cutoff=CUTOFF):
        scored.append((difflib.SequenceMatcher(None, word.lower(), candidate).ratio(), candidate))
    best = max((score for score, _ in scored), default=0.0)
    return [names[candidate] for score, candidate in scored if score >= best - NEARLY]


def did_you_mean(word: str, known: Iterable[str], show: Callable[[str], str] = str) -> str:
    """``"did you mean X?"`` (``X or Y``, ``X, Y or Z``) for the near misses of ``word``, each
    written as ``show`` makes it (``[X]`` for a section, say); "" when nothing known is close."""
    close = [show(name) for name in near_misses(word, known)]
    if not close:
        return ""
    listed = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f"did you mean {listed}?"
