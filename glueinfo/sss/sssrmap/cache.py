"""The per-field caches of an ObjectSet, bounded: least recently used fields first out.

A query's Get or Where names a field (a path); what the engine works out
for a field over every object (the elements it selects, their numbers,
serialized fragments...) is kept as that field's :class:`Columns`, so the
next query naming it is a look-up.  Each field's columns cost about one
list slot per object and more for what they hold (33 KB for a field no host
has on 2,000 hosts), and field names are the client's choice
(``Extension[@name='a1']``, ``'a2'``...), so :class:`PathCache` keeps at
most ``max_paths`` fields and about ``max_bytes`` of their columns; past
either, the fields used longest ago are forgotten, and asked again they are
worked out again, with the same answer.  The bytes are an estimate made as
the columns are filled (list slots, tuples, numbers, texts, serialized
bytes, lxml element proxies), not a measurement; a single field larger
than ``max_bytes`` is kept until another field is asked for.

Fields the server warms itself (:meth:`PathCache.pin`, a fixed list it
chooses) are kept outside the bound: the common queries never pay again.

Thread-safe: queries running at once share one cache.  A column filled by a
query after its field was forgotten is used by that query and then dropped.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Optional

# Default bounds (docs/sss.md "Memory"): 256 fields is a hundred times what a monitoring client
# asks for; 32 MiB holds every field of a 10,000-host site's usual queries.
DEFAULT_MAX_PATHS = 256
DEFAULT_MAX_BYTES = 32 << 20

# Estimated sizes in bytes on 64-bit CPython (sys.getsizeof), with the slot pointing at each.
_SLOT = 8
_LIST = 56
_TUPLE = 40
_PROXY = 72  # an lxml element proxy, kept alive by the tuples that hold it
_FLOAT = 24
_INT = 28
_BYTES = 33
_STR = 49
_PAIR = 56 + _FLOAT  # (family, base value): the family is a shared string
_VALUE = 64 + _FLOAT + _STR  # (text, number, units): the units mostly shared


class Columns:
    """What is kept for one field: each column None until a query needs it (the engine fills them)."""

    __slots__ = ("matches", "measures", "sorted", "fragments", "values", "text_only", "size")

    def __init__(self) -> None:
        self.matches: Optional[list[Any]] = None
        self.measures: Optional[list[Any]] = None
        self.sorted: dict[Optional[str], tuple[list[float], list[int]]] = {}
        self.fragments: Optional[list[Optional[bytes]]] = None
        self.values: Optional[list[Any]] = None
        self.text_only: Optional[list[int]] = None
        self.size = 0  # estimated bytes, added to as columns are filled


class PathCache:
    """Columns by field (path text), least recently used first out.

    At most ``max_paths`` fields and about ``max_bytes`` of columns besides
    the pinned ones; ValueError for a bound under 1.  :meth:`columns` gives
    a field's columns (new, empty ones when it is not kept) and marks it
    used; :meth:`grew` records bytes a query added to them and forgets the
    fields used longest ago while over a bound, never the one just grown.
    """

    def __init__(self, max_paths: int = DEFAULT_MAX_PATHS, max_bytes: int = DEFAULT_MAX_BYTES):
        if max_paths < 1 or max_bytes < 1:
            raise ValueError(f"SSSRMAP field cache bounds must be at least 1, not {max_paths} fields and {max_bytes} bytes")
        self.max_paths = max_paths
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, Columns] = OrderedDict()  # least recently used first
        self._pinned: dict[str, Columns] = {}
        self._bytes = 0  # estimated, of the fields in _recent
        self.evicted = 0

    def __len__(self) -> int:
        """Fields kept under the bound (pinned ones not counted)."""
        return len(self._recent)

    def __contains__(self, key: str) -> bool:
        return key in self._recent or key in self._pinned

    @property
    def bytes(self) -> int:
        """Estimated bytes of the fields kept under the bound."""
        return self._bytes

    def columns(self, key: str) -> Columns:
        with self._lock:
            found = self._pinned.get(key)
            if found is not None:
                return found
            found = self._recent.get(key)
            if found is None:
                found = self._recent[key] = Columns()
                self._evict(found)
            else:
                self._recent.move_to_end(key)
            return found

    def pin(self, key: str) -> Columns:
        """Keep this field for good, outside the bound (the server's warmed fields)."""
        with self._lock:
            found = self._pinned.get(key)
            if found is None:
                found = self._recent.pop(key, None)
                if found is not None:
                    self._bytes -= found.size
                else:
                    found = Columns()
                self._pinned[key] = found
            return found

    def grew(self, key: str, columns: Columns, size: int) -> None:
        """``size`` more estimated bytes in ``columns`` (the field ``key``'s); forgotten fields' growth is ignored."""
        with self._lock:
            columns.size += size
            if self._recent.get(key) is columns:
                self._bytes += size
                self._evict(columns)

    def _evict(self, keep: Columns) -> None:
        """Under the lock: forget the least recently used fields while over a bound, never ``keep``."""
        while len(self._recent) > self.max_paths or (self._bytes > self.max_bytes and len(self._recent) > 1):
            key, oldest = next(iter(self._recent.items()))
            if oldest is keep:
                if len(self._recent) == 1:
                    return
                self._recent.move_to_end(key)
                continue
            del self._recent[key]
            self._bytes -= oldest.size
            self.evicted += 1


# -- estimates, made once per column as it is filled ------------------------------------------------


def size_of_matches(column: Sequence[tuple[Any, ...]]) -> int:
    elements = sum(map(len, column))
    filled = len(column) - column.count(())
    return _LIST + _SLOT * len(column) + _TUPLE * filled + (_SLOT + _PROXY) * elements


def size_of_measures(column: Sequence[tuple[Any, ...]]) -> int:
    values = sum(map(len, column))
    filled = len(column) - column.count(())
    return _LIST + _SLOT * len(column) + _TUPLE * filled + (_SLOT + _PAIR) * values


def size_of_values(column: Sequence[tuple[tuple[str, Any, Any], ...]]) -> int:
    filled = len(column) - column.count(())
    texts = sum(len(text) for values in column for text, _, _ in values)
    values = sum(map(len, column))
    return _LIST + _SLOT * len(column) + _TUPLE * filled + (_SLOT + _VALUE) * values + texts


def size_of_indices(count: int) -> int:
    return _LIST + (_SLOT + _INT) * count


def size_of_sorted(count: int) -> int:
    return 2 * _LIST + (2 * _SLOT + _FLOAT + _INT) * count


def size_of_slots(count: int) -> int:
    return _LIST + _SLOT * count


def size_of_fragments(fragments: Sequence[bytes]) -> int:
    return sum(map(len, fragments)) + _BYTES * (len(fragments) - fragments.count(b""))
