"""glueinfo.run.provider pieces on a test clock: LDAP backoff and this host's fast/slow merge.
(The whole service, as a process against real servers, is tests/test_run.py.)"""

from __future__ import annotations

import logging

from glueinfo.core.model import CollectorResult, CpuInfo, FileSystem, HostSnapshot, LoadInfo, MemoryInfo, OsInfo
from glueinfo.publish.outputs.ldap import LdapOutcome, LdapSync
from glueinfo.run.local_host import combine_local


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Server:
    """Stands for publish_ldap.sync_tree: down, up, or refusing some DNs."""

    def __init__(self) -> None:
        self.up = False
        self.refused: list[str] = []
        self.calls = 0

    def __call__(self, entries) -> LdapOutcome:
        self.calls += 1
        if not self.up:
            return LdapOutcome(error="ldap://x: cannot reach the LDAP server: connection refused")
        return LdapOutcome(added=len(entries), rejected=[f"{dn}: add refused: constraintViolation (19)" for dn in self.refused])


def test_a_down_server_is_retried_after_doubling_waits_and_fully_resynced_when_back(caplog):
    clock, server = Clock(), Server()
    ldap = LdapSync(server, retry_min_s=5, retry_max_s=30, clock=clock, url="ldap://x")
    caplog.set_level(logging.INFO, logger="glueinfo.publish")
    attempts = []
    for _ in range(80):  # a publish every second for 80 s
        if ldap.maybe_sync(["e1", "e2"]) is not None:
            attempts.append(clock.now - 1000)
        clock.now += 1
    assert attempts == [0, 5, 15, 35, 65]  # waits 5, 10, 20, then 30 (the cap)
    assert server.calls == 5
    assert ldap.to_dict()["state"] == "waiting" and ldap.stats.failures == 5
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[0].endswith("local files keep being updated; next attempt in 5 s") and len(warnings) == 5

    server.up = True
    clock.now = 1000 + 95  # the next attempt is due
    outcome = ldap.maybe_sync(["e1", "e2", "e3"])
    assert outcome is not None and outcome.added == 3
    assert "answering again after 95 s: full re-sync: 3 added" in caplog.text
    assert ldap.to_dict()["state"] == "ok" and ldap.stats.last_success_at == clock.now
    clock.now += 1
    assert ldap.maybe_sync(["e1"]) is not None  # no waiting any more: every publish syncs


def test_refused_entries_are_reported_by_dn_at_every_sync_until_accepted(caplog):
    clock, server = Clock(), Server()
    server.up = True
    server.refused = ["GlueCEUniqueID=ce:2119/jobmanager-slurm-long,mds-vo-name=resource,o=grid"]
    ldap = LdapSync(server, retry_min_s=5, retry_max_s=30, clock=clock, url="ldap://x")
    with caplog.at_level(logging.WARNING, logger="glueinfo.publish"):
        for _ in range(3):
            ldap.maybe_sync(["e"])
            clock.now += 1
        reports = [r.getMessage() for r in caplog.records]
        # One WARNING per cycle (issue 24), naming how many and the first refusal by DN and reason.
        assert reports == [f"LDAP ldap://x: 1 writes refused, first: {server.refused[0]}: add refused: constraintViolation (19)"] * 3
        assert ldap.refused_total == 3
        assert ldap.to_dict()["state"] == "rejecting" and ldap.to_dict()["rejected"]
        server.refused = []
        caplog.clear()
        ldap.maybe_sync(["e"])
        assert caplog.records == []
    assert ldap.to_dict()["state"] == "ok" and ldap.to_dict()["rejected"] == []


def test_a_sync_that_raises_is_a_failure_not_a_crash():
    def broken(entries):
        raise RuntimeError("socket closed\nmid-write")

    ldap = LdapSync(broken, retry_min_s=1, retry_max_s=2, clock=Clock(), url="ldap://x")
    outcome = ldap.maybe_sync([])
    assert outcome is not None and outcome.error == "RuntimeError: socket closed mid-write"


def test_fast_facts_over_the_latest_slow_ones():
    slow = HostSnapshot(hostname="ce.example.org", collected_at=100.0, cpu=CpuInfo(logical_cpus=8, model_name="EPYC"),
                        os=OsInfo(name="Debian GNU/Linux"), extra={"gpu": {"count": 2}},
                        collectors=[CollectorResult("cpu", True, 0.01), CollectorResult("os", True, 0.01)])
    fast = HostSnapshot(hostname="ce.example.org", collected_at=160.0, load=LoadInfo(load1=3.0),
                        memory=MemoryInfo(ram_mb=16000, ram_available_mb=9000),
                        filesystems=[FileSystem(mount_point="/", size_mb=100, available_mb=40)],
                        collectors=[CollectorResult("load", True, 0.001), CollectorResult("memory", True, 0.001),
                                    CollectorResult("filesystems", False, 5.0, "timed out after 5 s")])
    combined = combine_local(slow, fast)
    assert combined.collected_at == 160.0  # the time of the facts that age
    assert combined.cpu.model_name == "EPYC" and combined.os.name == "Debian GNU/Linux" and combined.extra == {"gpu": {"count": 2}}
    assert combined.load.load1 == 3.0 and combined.memory.ram_available_mb == 9000 and combined.filesystems[0].available_mb == 40
    assert [(c.name, c.success) for c in combined.collectors] == [("cpu", True), ("os", True), ("load", True), ("memory", True),
                                                                  ("filesystems", False)]
    assert slow.load is None and slow.collected_at == 100.0  # the slow facts themselves are left as they were
    # A fast collector that failed this time leaves its facts unknown: never the older value.
    again = combine_local(slow, HostSnapshot(hostname="ce.example.org", collected_at=220.0, load=LoadInfo(load1=1.0)))
    assert again.memory is None and again.filesystems is None
    assert combine_local(None, fast) is fast
