"""Text lengths at the model boundary (issue 26, finding 5): every row of the table in
docs/admin-guide.md ("Text lengths") holds for a snapshot as glueinfo reads it.

The expected bounds and outcomes are read from the documentation, what an
admin reads, never from glueinfo.core.validate: for each documented fact, a
text of exactly its maximum is kept as it is and one character more is cut
(to the maximum, ending in "..."), dropped (found nowhere in the snapshot) or
refuses the snapshot, as the row says, with one line naming field, length
and bound.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import types
import typing

import pytest
from paths import REPO

from glueinfo.core.model import HostSnapshot
from glueinfo.core.validate import validate_snapshot

NOW = 1_800_000_000.0
GUIDE = REPO / "docs" / "admin-guide.md"


def documented_bounds() -> list[tuple[str, int, str]]:
    """(path, maximum, what a longer one gets) for every fact the "Text lengths" table names."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("#### Text lengths"):]
    section = section[:section.index("\n#", 1)]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[2].isdigit():
            continue
        for path in re.findall(r"`([^`]+)`", cells[1]):
            rows.append((path, int(cells[2]), cells[3]))
    return rows


BOUNDS = documented_bounds()


def base() -> dict:
    """A snapshot (JSON form) with one of every part a path can name, each text short and clean."""
    amount = {"tag": "Memory", "text": "64000", "value": 64000.0, "units": "MB", "metric": "Instantaneous",
              "wall_duration": "60", "consumption_rate": "0.5", "name": "mem", "type": "consumable"}
    # Configured first: a path's ``parts[]`` is the first part, and it has an amount
    parts = [{"tag": "Configured", "text": "", "amounts": [amount]},
             {"tag": "Id", "text": ""}, {"tag": "Name", "text": ""}, {"tag": "State", "text": ""},
             {"tag": "Opsys", "text": "Linux"}, {"tag": "Arch", "text": "x86_64"},
             {"tag": "Description", "text": "a worker"},
             {"tag": "Feature", "text": "gpu,ib", "aggregation": "List", "delimiter": ",", "count": "2"},
             {"tag": "Extension", "text": "42", "name": "Rack", "type": "Site"}]
    return {
        "hostname": "wn01.example.org", "collected_at": NOW - 10, "source": "agents", "host_root": "/srv/trees/wn01",
        "cpu": {"logical_cpus": 16, "vendor": "GenuineIntel", "model_name": "Xeon Gold 6130", "version": "family 6",
                "instruction_set": "x86_64", "features": ["avx2"]},
        "os": {"name": "Debian GNU/Linux", "release": "12", "version": "bookworm", "pretty_name": "Debian 12",
               "kernel_release": "6.1.0-13-amd64", "kernel_version": "#1 SMP", "platform_type": "x86_64"},
        "network": [{"name": "eth0", "ipv4": ["10.0.0.1"], "ipv6": ["fe80::1"], "mac": "aa:bb:cc:dd:ee:ff"}],
        "filesystems": [{"mount_point": "/scratch", "device": "nfs1:/export", "fs_type": "nfs", "remote": True,
                         "server": "nfs1.example.org", "size_mb": 1000, "available_mb": 500}],
        "accelerators": [{"type": "GPU", "vendor": "NVIDIA", "model": "NVIDIA H100 80GB HBM3", "count": 2,
                          "memory_mb": 81559, "compute_capability": "9.0", "driver_version": "550.54.15",
                          "runtime_version": "12.4", "partition": "1g.10gb", "pci_ids": ["10de:2330"], "source": "nvml"}],
        "static": {"runtime_environment": ["VO-atlas-17"], "features": ["gpu"], "extensions": {"Rack": "B4"}},
        "extra": {"myplugin": {"fact": "value"}},
        "collectors": [{"name": "cpu", "success": False, "duration_s": 0.1, "error": "boom", "source": "builtin"}],
        "published": {"name": "wn01", "state": "Idle", "parts": parts, "features": ["gpu", "ib"]},
    }


def place(data: dict, path: str, value: str) -> None:
    """Put ``value`` at ``path`` (the table's notation) in the JSON form ``data``."""
    steps = re.findall(r"\[[^\]]*\]|\{[^}]*\}|[^.\[{]+", path)
    holder, key = None, None
    node = data
    for step in steps:
        if holder is not None:
            node = holder[key]
        if step == "[]":
            holder, key = node, 0
        elif step.startswith("["):  # parts[Tag]: the published part of that element
            tag = step[1:-1]
            holder, key = node, next(i for i, part in enumerate(node) if part["tag"] == tag)
        elif step == "{}":
            holder, key = node, next(iter(node))
        elif step == "{key}":  # the name of the map's first entry
            old = next(iter(node))
            node[value] = node.pop(old)
            return
        else:
            holder, key = node, step
    holder[key] = value


def text_of(path: str, length: int, fill: str = "z") -> str:
    """A text of ``length`` characters that fits the field otherwise (a host name of DNS labels, a
    figure that is a number, a duration of seconds)."""
    if path == "hostname":
        labels, left = [], length
        while left > 0:
            size = min(63, left)
            labels.append("a" * size)
            left -= size + 1
        name = ".".join(labels)
        return name[:length] if len(name) >= length else name + "b" * (length - len(name))
    if path.endswith(("amounts[].text", "wall_duration", "consumption_rate")):
        return "0" * (length - 1) + "1"
    return fill * length


def test_the_table_is_there_and_names_every_text_of_the_model():
    """A text fact added to the model without a documented bound fails here."""
    documented = {re.sub(r"\[[A-Z][a-z]+\]", "[]", path) for path, _, _ in BOUNDS}
    assert len(BOUNDS) > 40

    def walk(kind: type, prefix: str) -> list[str]:
        found = []
        for f in dataclasses.fields(kind):
            hint, where = f.type, prefix + f.name
            if typing.get_origin(hint) in (typing.Union, types.UnionType):
                hint = next(a for a in typing.get_args(hint) if a is not type(None))
            if hint is str:
                found.append(where)
            elif typing.get_origin(hint) is list:
                item = typing.get_args(hint)[0]
                found.extend(walk(item, where + "[].") if dataclasses.is_dataclass(item) else
                             [where + "[]"] if item is str else [])
            elif typing.get_origin(hint) is dict:
                found.append(where + "{key}")
                value = typing.get_args(hint)[1]
                if value is str:
                    found.append(where + "{}")
                elif typing.get_origin(value) is dict:  # extra: a plugin's facts
                    found.extend([where + "{}{key}", where + "{}{}"])
            elif dataclasses.is_dataclass(hint):
                found.extend(walk(hint, where + "."))
        return found

    texts = set(walk(HostSnapshot, ""))
    # a published part's and figure's tag is an element name, checked against the spec's list
    texts -= {"published.parts[].tag", "published.parts[].amounts[].tag"}
    missing = sorted(t for t in texts if t not in documented)
    assert missing == []


@pytest.mark.parametrize("path, maximum, longer", BOUNDS, ids=[row[0] for row in BOUNDS])
def test_a_text_at_its_bound_is_kept_and_one_longer_is_cut_dropped_or_refused_as_documented(path, maximum, longer):
    assert longer in ("cut", "dropped", "refused"), longer
    at_bound, over = text_of(path, maximum), text_of(path, maximum + 1)
    assert len(at_bound) == maximum and len(over) == maximum + 1

    data = base()
    place(data, path, at_bound)
    checked = validate_snapshot(HostSnapshot.from_dict(copy.deepcopy(data)), NOW)
    assert checked.snapshot is not None and checked.dropped == [], checked.dropped
    assert json.dumps(at_bound) in checked.snapshot.to_json()

    data = base()
    place(data, path, over)
    snapshot = HostSnapshot.from_dict(copy.deepcopy(data))
    before = snapshot.to_json()
    checked = validate_snapshot(snapshot, NOW)
    assert snapshot.to_json() == before  # the caller's snapshot is never changed
    if longer == "refused":
        assert checked.snapshot is None and f"{maximum + 1} characters long" in checked.refused
        return
    assert checked.snapshot is not None
    assert checked.snapshot.hostname == "wn01.example.org"
    kept = checked.snapshot.to_json()
    assert over not in kept
    shown = f"is {maximum + 1} characters long (at most {maximum}): {longer}"
    [line] = [line for line in checked.dropped if "characters long" in line]
    assert line.startswith("host wn01.example.org: ") and shown in line
    if longer == "cut":
        assert json.dumps(over[:maximum - 3] + "...") in kept
    else:
        assert over[:maximum - 3] not in kept  # not cut either: gone
    assert checked.snapshot.cpu.logical_cpus == 16  # the rest of the host is kept


def test_every_text_of_one_snapshot_over_its_bound_is_named_in_one_line():
    data = base()
    data["cpu"]["vendor"] = "v" * 10_000
    data["cpu"]["model_name"] = "Intel(R) Xeon(R) " + "m" * 9_983
    data["os"]["name"] = "o" * 10_000
    checked = validate_snapshot(HostSnapshot.from_dict(data), NOW)
    assert checked.dropped == [
        "host wn01.example.org: cpu.vendor is 10000 characters long (at most 64): dropped; "
        "cpu.model_name is 10000 characters long (at most 256): cut; "
        "os.name is 10000 characters long (at most 256): cut"]
    assert checked.snapshot.cpu.vendor is None
    assert checked.snapshot.cpu.model_name == "Intel(R) Xeon(R) " + "m" * (256 - 17 - 3) + "..."
    assert checked.snapshot.os.name == "o" * 253 + "..."


def test_a_thousand_texts_over_their_bound_make_one_line_of_bounded_length():
    data = base()
    data["static"]["runtime_environment"] = [f"{i}-" + "r" * 300 for i in range(1000)]
    checked = validate_snapshot(HostSnapshot.from_dict(data), NOW)
    [line] = checked.dropped
    assert line.endswith("; and 992 more texts over their bound") and len(line) < 1000
    assert checked.snapshot.static.runtime_environment == []


def test_a_text_with_control_characters_is_still_dropped_whatever_its_length():
    data = base()
    data["cpu"]["model_name"] = "Xeon\x1b[2J" + "x" * 1000
    checked = validate_snapshot(HostSnapshot.from_dict(data), NOW)
    assert checked.dropped == ["host wn01.example.org: cpu.model_name holds control characters: dropped"]
    assert checked.snapshot.cpu.model_name is None
