"""Reading files that another process or host wrote: never more than a cap,
and a one-line reason when it cannot be read (writing is atomicwrite.py)."""

from __future__ import annotations


def read_capped(path: str, limit: int) -> bytes:
    """The file's bytes; ValueError naming why when unreadable or over ``limit`` bytes."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)  # one byte past the cap tells "too large" without reading it all
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data
