#!/usr/bin/env python3
"""Cost of the shared LDIF layer (glueinfo.core.ldif, glueinfo.glue.schema).  Not a test: it prints figures.

    python3 benchmarks/ldif_layer.py [HOSTS ...]     # default: 10000

For a synthetic tree of HOSTS GlueHost entries (20 attributes, nine object
classes) each with three GlueHostLocalFileSystem children, reports CPU
seconds and microseconds per entry for: building the Entry objects,
Schema.normalise, Schema.check, write_ldif (tree order + text), parse_ldif
of the result; and the time to load the schema files.  CPU time
(process_time), so other work on the machine disturbs it less than wall time.
"""

from __future__ import annotations

import io
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from glueinfo.core.ldif import Entry, make_dn, parse_ldif, write_ldif  # noqa: E402
from glueinfo.glue.schema import DEFAULT_SCHEMA_FILES, load_schema  # noqa: E402

BASE = "mds-vo-name=resource,o=grid"
HOST_CLASSES = ["GlueClusterTop", "GlueHost", "GlueHostArchitecture", "GlueHostProcessor", "GlueHostMainMemory",
                "GlueHostOperatingSystem", "GlueHostNetworkAdapter", "GlueHostProcessorLoad", "GlueSchemaVersion"]


def build(hosts: int) -> list[Entry]:
    entries = []
    cluster = make_dn("GlueClusterUniqueID", "cluster.example.org", BASE)
    for i in range(hosts):
        subcluster = make_dn("GlueSubClusterUniqueID", f"class-{i % 5}", cluster)
        name = f"wn{i:06d}.example.org"
        host = make_dn("GlueHostUniqueID", name, subcluster)
        entries.append(Entry(host, {
            "objectClass": HOST_CLASSES, "GlueHostUniqueID": name, "GlueHostName": name,
            "GlueHostArchitecturePlatformType": "x86_64", "GlueHostArchitectureSMPSize": 16,
            "GlueHostProcessorModel": "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz", "GlueHostProcessorVendor": "GenuineIntel",
            "GlueHostProcessorClockSpeed": 2100, "GlueHostMainMemoryRAMSize": 65536, "GlueHostMainMemoryVirtualSize": 98304,
            "GlueHostOperatingSystemName": "Debian", "GlueHostOperatingSystemRelease": "12",
            "GlueHostNetworkAdapterInboundIP": False, "GlueHostNetworkAdapterOutboundIP": True,
            "GlueHostProcessorLoadLast1Min": i % 1600, "GlueHostProcessorLoadLast5Min": 1400, "GlueHostProcessorLoadLast15Min": 1300,
            "GlueSchemaVersionMajor": 1, "GlueSchemaVersionMinor": 3,
        }))
        for mount in ("/", "/tmp", "/scratch"):
            entries.append(Entry(make_dn("GlueHostLocalFileSystemName", mount, host), {
                "objectClass": ["GlueClusterTop", "GlueHostLocalFileSystem", "GlueSchemaVersion"],
                "GlueHostLocalFileSystemName": mount, "GlueHostLocalFileSystemSize": 100000 + i,
                "GlueHostLocalFileSystemReadOnly": False, "GlueSchemaVersionMajor": 1, "GlueSchemaVersionMinor": 3,
            }))
    return entries


def timed(label: str, count: int, function):
    start = time.process_time()
    result = function()
    seconds = time.process_time() - start
    print(f"  {label:<22} {seconds:7.2f} s CPU  {seconds / count * 1e6:6.1f} us/entry")
    return result


def main(sizes: list[int]) -> None:
    start = time.process_time()
    schema = load_schema(files=DEFAULT_SCHEMA_FILES)
    print(f"load_schema ({len(DEFAULT_SCHEMA_FILES)} files): {(time.process_time() - start) * 1000:.0f} ms CPU")
    for hosts in sizes:
        print(f"{hosts} hosts, {hosts * 4} entries")
        entries = timed("build Entry objects", hosts * 4, lambda h=hosts: build(h))
        fixed, _ = timed("Schema.normalise", len(entries), lambda e=entries: schema.normalise_entries(e))
        problems = timed("Schema.check", len(fixed), lambda f=fixed: [p for entry in f for p in schema.check(entry)])
        assert not problems, problems[:3]
        out = io.StringIO()
        timed("write_ldif", len(fixed), lambda f=fixed, o=out: write_ldif(f, o))
        text = out.getvalue()
        print(f"  LDIF size              {len(text) / 2**20:7.1f} MB")
        timed("parse_ldif", len(fixed), lambda t=text: parse_ldif(t))


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [10000])
