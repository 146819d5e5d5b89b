"""The names a finite regular expression matches: the SSS spec's Pattern aggregation (spec 4.4) as
glueinfo.sss.node_reader expands it into node names."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from glueinfo.core.errors import InputError

# The spec's Pattern aggregation is "a regular expression (perl5)": a Node read from a document must
# become named nodes, so a Pattern is expanded into every string it matches in full, which is possible
# only for a finite language.  The subset read: literal characters; \d and escaped punctuation
# (\. \- ...); classes [a-z0-9_] of characters, ranges and \d (not negated); groups ( ) and (?: ) with
# | alternatives; the quantifiers ?, {n} and {m,n} (a lazy ? after one changes nothing); ^ at the
# start and $ at the end.  Refused: . (any character), * and + and {m,} (no bound), negated classes,
# other escapes (\w, \s, back references) and (? ) constructs.  Its size is counted before any name
# is made.

class PatternError(InputError, ValueError):
    """A Pattern that does not name a finite, small set of names; the message says why."""


_META = frozenset("\\^$.|?*+()[]{}")
_MAX_PATTERN = 1024  # characters
_MAX_DEPTH = 32  # nested groups
_MAX_REPEAT = 64
_DIGITS = tuple("0123456789")

# A parsed Pattern: ("set", characters) | ("seq", items) | ("alt", items) | ("rep", item, low, high)
_Node = tuple[Any, ...]


class _PatternParser:
    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        self.at += 1
        return char

    def parse(self) -> _Node:
        text = self.text
        if len(text) > _MAX_PATTERN:
            raise PatternError(f"longer than {_MAX_PATTERN} characters")
        if text.startswith("^"):
            self.at = 1
        if text.endswith("$") and not text.endswith("\\$"):
            self.text = text = text[:-1]
        tree = self.alternatives(0)
        if self.at < len(text):
            raise PatternError(f"unbalanced {text[self.at]!r} at {self.at}")
        return tree

    def alternatives(self, depth: int) -> _Node:
        if depth > _MAX_DEPTH:
            raise PatternError(f"groups nested deeper than {_MAX_DEPTH}")
        branches = [self.sequence(depth)]
        while self.peek() == "|":
            self.take()
            branches.append(self.sequence(depth))
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self, depth: int) -> _Node:
        items = []
        while self.peek() not in ("", "|", ")"):
            items.append(self.quantified(self.atom(depth)))
        return ("seq", items)

    def atom(self, depth: int) -> _Node:
        at, char = self.at, self.take()
        if char == "(":
            if self.peek() == "?":
                if self.text[self.at:self.at + 2] != "?:":
                    raise PatternError(f"(? constructs other than (?: are not read (at {at})")
                self.at += 2
            inner = self.alternatives(depth + 1)
            if self.take() != ")":
                raise PatternError(f"the group opened at {at} is not closed")
            return inner
        if char == "[":
            return ("set", self.characters(at))
        if char == "\\":
            return ("set", self.escape(at))
        if char == ".":
            raise PatternError(f"'.' (at {at}) matches any character: write '\\.' for a dot")
        if char in "*+?{":
            raise PatternError(f"{char!r} at {at} has nothing to repeat")
        if char in _META or char.isspace():
            raise PatternError(f"{char!r} at {at} cannot stand there")
        return ("set", (char,))

    def escape(self, at: int) -> tuple[str, ...]:
        char = self.take()
        if char == "d":
            return _DIGITS
        if char and not char.isalnum() and not char.isspace():
            return (char,)
        raise PatternError(f"'\\{char}' at {at}: only \\d and escaped punctuation are read")

    def characters(self, at: int) -> tuple[str, ...]:
        if self.peek() == "^":
            raise PatternError(f"the class at {at} is negated: it matches almost any character")
        chars: dict[str, None] = {}
        first = True
        while True:
            char = self.take()
            if char == "":
                raise PatternError(f"the class opened at {at} is not closed")
            if char == "]" and not first:
                break
            first = False
            if char == "\\":
                members = self.escape(self.at - 1)
                chars.update(dict.fromkeys(members))
                continue
            if self.peek() == "-" and self.text[self.at + 1:self.at + 2] not in ("", "]"):
                self.take()
                end = self.take()
                if end == "\\":
                    escaped = self.escape(self.at - 1)
                    end = escaped[0] if len(escaped) == 1 else ""  # \d cannot end a range
                if not end or ord(end) < ord(char) or ord(end) - ord(char) > 256:
                    raise PatternError(f"the range {char}-{end} in the class at {at} is not one of up to 256 characters")
                chars.update(dict.fromkeys(chr(code) for code in range(ord(char), ord(end) + 1)))
                continue
            chars[char] = None
        if any(c.isspace() for c in chars):
            raise PatternError(f"the class at {at} holds white space, which no name has")
        return tuple(chars)

    def quantified(self, item: _Node) -> _Node:
        at, char = self.at, self.peek()
        if char in ("*", "+"):
            raise PatternError(f"{char!r} at {at} repeats without bound")
        if char == "?":
            self.take()
            low, high = 0, 1
        elif char == "{":
            end = self.text.find("}", at)
            bounds = self.text[at + 1:end].split(",") if end > 0 else []
            if not 1 <= len(bounds) <= 2 or not all(b.isdigit() and b.isascii() for b in bounds if b) or not bounds[0]:
                raise PatternError(f"the repetition at {at} is not {{n}} or {{m,n}}")
            if len(bounds) == 2 and not bounds[1]:
                raise PatternError(f"{{{bounds[0]},}} at {at} repeats without bound")
            low, high = int(bounds[0]), int(bounds[-1])
            if high < low or high > _MAX_REPEAT:
                raise PatternError(f"the repetition at {at} is not {{m,n}} with m <= n <= {_MAX_REPEAT}")
            self.at = end + 1
        else:
            return item
        if self.peek() == "?":  # lazy: the same strings
            self.take()
        elif self.peek() in ("*", "+", "?", "{"):
            raise PatternError(f"{self.peek()!r} at {self.at} repeats a repetition")
        return ("rep", item, low, high)


def _size(tree: _Node, cap: int) -> int:
    """How many strings ``tree`` makes (repeats counted), or cap + 1 when more than ``cap``."""
    kind = tree[0]
    if kind == "set":
        return min(len(tree[1]), cap + 1)
    if kind == "seq":
        total = 1
        for item in tree[1]:
            total = min(total * _size(item, cap), cap + 1)
        return total
    if kind == "alt":
        return min(sum(_size(item, cap) for item in tree[1]), cap + 1)
    one, total, power = _size(tree[1], cap), 0, 1
    for times in range(tree[3] + 1):
        if times >= tree[2]:
            total = min(total + power, cap + 1)
        power = min(power * one, cap + 1)
    return total


def _strings(tree: _Node) -> Iterator[str]:
    kind = tree[0]
    if kind == "set":
        yield from tree[1]
    elif kind == "seq":
        for parts in itertools.product(*[list(_strings(item)) for item in tree[1]]):
            yield "".join(parts)
    elif kind == "alt":
        for item in tree[1]:
            yield from _strings(item)
    else:
        one = list(_strings(tree[1]))
        for times in range(tree[2], tree[3] + 1):
            for parts in itertools.product(one, repeat=times):
                yield "".join(parts)


def pattern_names(pattern: str, limit: int) -> list[str]:
    """Every string the finite regular expression ``pattern`` matches in full, in order, each once
    (the subset above); PatternError when it is outside that subset or makes more than ``limit``."""
    tree = _PatternParser(pattern).parse()
    size = _size(tree, limit)
    if size > limit:
        raise PatternError(f"makes more than {limit} names")
    return list(dict.fromkeys(_strings(tree)))
