#!/usr/bin/env python3
"""The federation view's own work per message, measured in this process.  Not a test: it prints figures.

    python3 benchmarks/federation_work.py                  # 200 sites, 5 rounds, a real slapd
    python3 benchmarks/federation_work.py --no-ldap        # the JSON-only view
    python3 benchmarks/federation_work.py --profile FILE   # cProfile of the measured rounds, top functions

benchmarks/federation.py measures the whole `glueinfo federate` process under
a real broker; this script takes the broker and the consumer's thread away
to show where the rest of the CPU goes.  The sites' documents are that
benchmark's (its SiteDocuments: `glueinfo glue2-json` and `glueinfo ldif` of
five small sites, the site id replaced, the waiting jobs, load and
CreationTime changed at each publish).  Every message is handed to
``Federation.take`` as the consumer hands it (the properties the amqp
output sets), and ``Federation.tick`` (the LDAP write) is called after every
``--per-tick`` messages (7: at 200 sites every 60 s, the view's loop
gathers a second, about three sites' pairs of documents).  Each publish's
documents are made, and the LDIF gzipped, before the clock starts.  On
the 2-core development machine the figures vary by up to a third from one
run to the next: compare changes over several runs.

Printed: CPU time (this thread's) per message in take and in tick, split by
kind, after one warm-up round (every site's first documents, all added).
The broker's and pika's part is not here: compare with benchmarks/federation.py.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
import tempfile
import time
import types
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, ROOT)


def properties(site_id: str, document: str, sender: str, gzipped: bool, sent: float, number: int) -> Any:
    """What pika hands the consumer for one message of glueinfo's amqp output (PikaLink.publish)."""
    return types.SimpleNamespace(headers={"document": document, "site_id": site_id}, user_id=sender,
                                 content_encoding="gzip" if gzipped else None, message_id=f"m-{number}",
                                 timestamp=int(sent), content_type="application/json", app_id="glueinfo")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sites", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5, help="publishes of every site measured (default 5)")
    parser.add_argument("--per-tick", type=int, default=7, help="messages between ticks (default 7)")
    parser.add_argument("--templates", type=int, default=5)
    parser.add_argument("--no-ldap", action="store_true", help="no LDAP server: the JSON-only view")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the measured rounds into FILE and print the top")
    args = parser.parse_args()

    import federation as bench
    from servers import Slapd, missing_slapd_tools

    from glueinfo.federate.ldap_view import LdapView
    from glueinfo.federate.store import SiteStore
    from glueinfo.federate.trust import Senders
    from glueinfo.federate.view import Federation
    from glueinfo.publish.outputs.amqp import GZIP_LEVEL, routing_key
    from glueinfo.site.publish_settings import LdapSettings, ldap_binds

    workdir = tempfile.mkdtemp(prefix="glueinfo-federation-work-")
    slapd: Optional[Any] = None
    try:
        templates = bench.make_templates(workdir, args.templates)
        sites = [bench.SiteDocuments(f"FEDSITE-{n:03d}", templates[n % len(templates)]) for n in range(1, args.sites + 1)]
        senders_file = os.path.join(workdir, "senders")
        with open(senders_file, "w") as handle:
            handle.write("".join(f"{site.site_id} sender-{n % 4}\n" for n, site in enumerate(sites)))
        ldap = None
        if not args.no_ldap:
            missing = missing_slapd_tools()
            if missing:
                print("needs " + ", ".join(missing), file=sys.stderr)
                return 2
            slapd = Slapd(os.path.join(workdir, "slapd"), layout="bdii")
            slapd.start()
            password = os.path.join(workdir, "ldap.password")
            with open(password, "w") as handle:
                handle.write(slapd.password + "\n")
            ldap = LdapView(LdapSettings(url=slapd.url, binds=ldap_binds("o=grid; o=glue; o=infosys", password)),
                            ("mds-vo-name=local,o=grid", "GLUE2GroupID=grid,o=glue"),
                            os.path.join(workdir, "ldap-view.json"))
        federation = Federation(SiteStore(os.path.join(workdir, "state")), Senders.load(senders_file), ldap=ldap)
        number = 0

        def messages() -> list[tuple[str, str, Any, bytes]]:
            """One publish of every site: (kind, routing key, properties, body), made before the clock."""
            nonlocal number
            out = []
            for n, site in enumerate(sites):
                now = time.time()
                _waiting, body, ldif = site.next_publish(now)
                sender = f"sender-{n % 4}"
                number += 1
                out.append(("json", routing_key("glue21-json", site.site_id),
                            properties(site.site_id, "glue21.json", sender, False, now, number), body))
                number += 1
                out.append(("ldif", routing_key("glue-ldif", site.site_id),
                            properties(site.site_id, "glue.ldif", sender, True, now, number),
                            gzip.compress(ldif, GZIP_LEVEL, mtime=0)))
            return out

        def play(batch: list[tuple[str, str, Any, bytes]], spent: dict[str, float]) -> None:
            clock = time.thread_time
            for index, (kind, key, props, body) in enumerate(batch, 1):
                start = clock()
                federation.take(key, props, body)
                spent[kind] += clock() - start
                if index % args.per_tick == 0 or index == len(batch):
                    start = clock()
                    federation.tick()
                    spent["tick"] += clock() - start

        warm = {"json": 0.0, "ldif": 0.0, "tick": 0.0}
        play(messages(), warm)
        rounds = [messages() for _ in range(args.rounds)]
        spent = {"json": 0.0, "ldif": 0.0, "tick": 0.0}
        profile = None
        if args.profile:
            import cProfile

            profile = cProfile.Profile(time.thread_time)
            profile.enable()
        for batch in rounds:
            play(batch, spent)
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
        count = sum(len(batch) for batch in rounds)
        per = {name: value / (count / 2) * 1e3 for name, value in spent.items()}
        total = sum(spent.values()) / count * 1e3
        print(f"{args.sites} sites, {args.rounds} rounds measured ({count} messages, a tick every {args.per_tick}), "
              f"LDAP {'none' if ldap is None else 'slapd (BDII layout)'}; warm-up round "
              f"{sum(warm.values()):.2f} CPU-s")
        print(f"  per message: {total:.3f} ms CPU (take JSON {per['json']:.3f} ms, take LDIF {per['ldif']:.3f} ms, "
              f"ticks {per['tick'] / 2:.3f} ms a message)")
        print(f"  at 200 sites every 60 s (24,000 messages an hour): {total * 24:.1f} CPU-s an hour, broker and pika "
              f"not counted")
        if ldap is not None:
            print(f"  LDAP: {ldap.state.writes_total} writes, {ldap.state.refused_total} refused, "
                  f"{ldap.state.full_syncs_total} full reconciliations")
        if args.profile:
            import pstats

            stats = pstats.Stats(args.profile)
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(40)
        return 0
    finally:
        if slapd is not None:
            slapd.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
