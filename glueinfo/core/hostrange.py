"""Host lists for the many-host sources: explicit names, ranges, host files.

The range form is the SSS Node object's ``Range`` aggregation,
``<prefix>[5-23,77]``, generalised the way cluster tools write it:

- ``wn[001-250].example.org:8650``: numbers keep the zero padding of the
  range's first bound (``001`` -> three digits);
- ``wn[1-3,7,10-12]``: comma lists inside one bracket;
- ``rack[1-2]-wn[01-40]``: several brackets expand as a cartesian product,
  leftmost slowest;
- a ``:PORT`` suffix belongs to every expanded host; ``[::1]:8650`` (a
  bracket holding a colon) is an IPv6 literal, not a range.

A list is separated by commas or white space *outside* brackets, so
``wn[1-3,7], gpu[01-04]`` is two patterns.  A host file holds one pattern a
line; ``#`` starts a comment.  Every error names the pattern (and the file and
line) that is wrong.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Optional

from glueinfo.core.errors import ConfigurationError

# A site with more hosts than this in one list has written a typo like [1-1000000].
MAX_HOSTS = 100_000

_HOST_CHARS = re.compile(r"^[A-Za-z0-9_.\-]+$")
_NUMBER_ITEM = re.compile(r"^(\d+)(?:-(\d+))?$", re.ASCII)  # ASCII digits: the names made from them are ASCII
MAX_LABEL = 63  # characters in one DNS label: no range number can be longer


class HostRangeError(ConfigurationError, ValueError):
    """A host pattern that cannot be expanded; the message names it."""


@dataclass(frozen=True)
class Target:
    """Where to reach one host: a name or address and a TCP port, and the host's name when
    the admin wrote it beside an address (``10.1.0.17:7170=wn017.example.org``)."""

    host: str
    port: int
    name: Optional[str] = None

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def split_list(text: str) -> list[str]:
    """Split on commas and white space that are not inside brackets."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostRangeError(f"unbalanced ']' in host list {text.strip()!r}")
        if depth == 0 and (char == "," or char.isspace()):
            if current:
                items.append("".join(current))
                current = []
            continue
        current.append(char)
    if depth != 0:
        raise HostRangeError(f"unclosed '[' in host list {text.strip()!r}")
    if current:
        items.append("".join(current))
    return items


def _expand_bracket(body: str, pattern: str) -> list[str]:
    values: list[str] = []
    for item in body.split(","):
        item = item.strip()
        match = _NUMBER_ITEM.match(item)
        if not match:
            raise HostRangeError(f"{pattern!r}: range item {item!r} is not N or N-M with decimal numbers")
        first, last = match.group(1), match.group(2) or match.group(1)
        if max(len(first), len(last)) > MAX_LABEL:
            raise HostRangeError(f"{pattern[:40]!r}...: a range number is longer than a host name label "
                                 f"({MAX_LABEL} characters)")
        low, high = int(first), int(last)
        if high < low:
            raise HostRangeError(f"{pattern!r}: range {item!r} runs backwards")
        if high - low + 1 > MAX_HOSTS:
            raise HostRangeError(f"{pattern!r}: range {item!r} has more than {MAX_HOSTS} hosts")
        # Zero padding is kept when the first bound is written with a leading zero.
        width = len(first) if first.startswith("0") and len(first) > 1 else 0
        values.extend(str(n).zfill(width) for n in range(low, high + 1))
    return values


def _split_port(pattern: str) -> tuple[str, Optional[str]]:
    """Separate a ``:PORT`` suffix, minding IPv6 literals in brackets."""
    if pattern.startswith("[") and "]" in pattern and ":" in pattern[1:pattern.index("]")]:
        end = pattern.index("]")
        host, rest = pattern[: end + 1], pattern[end + 1:]
        if rest and not rest.startswith(":"):
            raise HostRangeError(f"{pattern!r}: unexpected text after the IPv6 address")
        return host, rest[1:] if rest else None
    depth = 0
    for index in range(len(pattern) - 1, -1, -1):
        char = pattern[index]
        if char == "]":
            depth += 1
        elif char == "[":
            depth -= 1
        elif char == ":" and depth == 0:
            return pattern[:index], pattern[index + 1:]
    return pattern, None


def expand(pattern: str) -> list[str]:
    """Expand one pattern into host strings (each with the pattern's port suffix)."""
    pattern = pattern.strip()
    if not pattern:
        raise HostRangeError("empty host pattern")
    host_part, port = _split_port(pattern)
    suffix = f":{port}" if port is not None else ""
    if port is not None and _port_number(port) is None:
        raise HostRangeError(f"{pattern[:80]!r}: port {port[:20]!r} is not a number from 1 to 65535")
    if host_part.startswith("[") and ":" in host_part:  # IPv6 literal
        return [host_part + suffix]

    pieces = re.split(r"(\[[^\[\]]*\])", host_part)
    choices: list[list[str]] = []
    total = 1
    for piece in pieces:
        if piece.startswith("[") and piece.endswith("]"):
            values = _expand_bracket(piece[1:-1], pattern)
            total *= len(values)
            if total > MAX_HOSTS:
                raise HostRangeError(f"{pattern!r} expands to more than {MAX_HOSTS} hosts")
            choices.append(values)
        elif piece:
            if "[" in piece or "]" in piece:
                raise HostRangeError(f"{pattern!r}: unbalanced or nested brackets")
            if not _HOST_CHARS.match(piece):
                raise HostRangeError(f"{pattern!r}: {piece!r} is not part of a host name "
                                     "(letters, digits, '-', '.', '_')")
            choices.append([piece])
    return ["".join(parts) + suffix for parts in itertools.product(*choices)]


def expand_list(text: str) -> list[str]:
    """Expand a comma/space separated list of patterns, keeping order, dropping repeats."""
    hosts: dict[str, None] = {}
    for pattern in split_list(text):
        for host in expand(pattern):
            hosts.setdefault(host, None)
            if len(hosts) > MAX_HOSTS:
                raise HostRangeError(f"host list has more than {MAX_HOSTS} hosts")
    return list(hosts)


def expand_named(pattern: str) -> list[tuple[str, Optional[str]]]:
    """``TARGET=NAME`` -> [(target, name)], ranges on both sides expanded in step
    (``10.1.0.[1-3]=wn[01-03].example.org`` is three pairs); a plain pattern -> [(target, None)]."""
    if "=" not in pattern:
        return [(host, None) for host in expand(pattern)]
    left, _, right = pattern.partition("=")
    targets, names = expand(left), expand(right)
    if len(names) != len(targets):
        raise HostRangeError(f"{pattern!r}: {len(targets)} target(s) but {len(names)} name(s); "
                             "each side of '=' must expand to as many hosts")
    if any(":" in name for name in names):
        raise HostRangeError(f"{pattern!r}: the name after '=' is a host name, without a port")
    return list(zip(targets, names, strict=True))


def check_named_list(text: str) -> None:
    """HostRangeError (a ValueError) naming the first bad pattern of a list :func:`expand_named_list`
    reads (a range that runs backwards, a bad port, more than MAX_HOSTS hosts); for a config key's
    ``check``, so a bad list is refused when the file is read, with its file and line."""
    expand_named_list(text)


def expand_named_list(text: str) -> list[tuple[str, Optional[str]]]:
    """expand_list for patterns that may name their targets (see expand_named)."""
    pairs: dict[str, Optional[str]] = {}
    for pattern in split_list(text):
        for target, name in expand_named(pattern):
            pairs.setdefault(target, name)
            if len(pairs) > MAX_HOSTS:
                raise HostRangeError(f"host list has more than {MAX_HOSTS} hosts")
    return list(pairs.items())


def read_named_host_file(path: str) -> list[tuple[str, Optional[str]]]:
    """read_host_file for patterns that may name their targets (see expand_named)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise HostRangeError(f"{path}: cannot read host file: {exc}") from None
    pairs: dict[str, Optional[str]] = {}
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            expanded = expand_named_list(text)
        except HostRangeError as exc:
            raise HostRangeError(f"{path}:{number}: {exc}") from None
        for target, name in expanded:
            pairs.setdefault(target, name)
        if len(pairs) > MAX_HOSTS:
            raise HostRangeError(f"{path}:{number}: host file has more than {MAX_HOSTS} hosts")
    return list(pairs.items())


def read_host_file(path: str) -> list[str]:
    """Hosts from a file: one pattern (or list) a line, ``#`` comments, blank lines ignored."""
    return [target for target, _ in read_named_host_file(path)]


def parse_target(spec: str, default_port: int) -> Target:
    """``host``, ``host:port``, ``[v6]:port`` or a bare IPv6 address -> Target."""
    spec = spec.strip()
    if spec.count(":") > 1 and not spec.startswith("["):  # bare IPv6 address, no port
        return Target(spec, default_port)
    host, port = _split_port(spec)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        raise HostRangeError(f"{spec!r}: no host name")
    if port is None:
        return Target(host, default_port)
    number = _port_number(port)
    if number is None:
        raise HostRangeError(f"{spec[:80]!r}: port {port[:20]!r} is not a number from 1 to 65535")
    return Target(host, number)


def _port_number(text: str) -> Optional[int]:
    """A TCP port written in ASCII digits (1-65535), or None: int() alone would take other
    scripts' digits and, past 4,300 digits, raise instead of answering."""
    if not (text.isascii() and text.isdigit() and len(text) <= 5):
        return None
    number = int(text)
    return number if 0 < number < 65536 else None
