"""An LRMS refresh that ends while the gather is at work leaves its publish to the gather's,
which carries the new CE state too: one render for both, and the state is never lost (issue 10:
"every publish uses the latest"; a cycle's work proportional to what changed)."""

from __future__ import annotations

import json
import re
import threading

from glue_sites import synthetic_site

from glueinfo.core.config import parse_text
from glueinfo.core.model import QueueState
from glueinfo.run.provider import Provider

T0 = 1_800_000_000.0


def free_cpus(path) -> list[str]:
    return re.findall(r"^GlueCEStateFreeCPUs: (\d+)$", path.read_text(), re.M)


def make_provider(tmp_path, scheduler):
    hosts = synthetic_site(20)[:2]
    for host in hosts:
        host.collected_at = T0
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([h.to_dict() for h in hosts]))
    config = parse_text(
        f"[site]\nname = TEST\n[cluster:main]\nunique_id = ce01.example.org\n"
        f"[ce:grid]\nhost = ce01.example.org\nlrms = slurm\naccess = VO:dteam\n"
        f"[node]\nsite_snapshots = {snapshots}\nstale_after = 300\n"
        f"[sources]\nenabled =\ndrop_after = 3600\n"
        f"[run]\nstate_dir = {tmp_path / 'state'}\nldif_file = {tmp_path / 'glue.ldif'}\n"
        f"node_xml_file = {tmp_path / 'nodes.xml'}\n")

    def queue_state(lrms, ctx):
        return QueueState(lrms_type="slurm", total_cpus=8, free_cpus=scheduler["free"], running_jobs=0, waiting_jobs=0,
                          total_jobs=0, status="Production")

    (tmp_path / "state").mkdir()
    return Provider(config, clock=lambda: T0 + 10, queue_state=queue_state)


def held_gather(provider, fail: bool = False):
    """Make the next gather wait until released (and then fail, if asked): (started, release)."""
    started, release = threading.Event(), threading.Event()
    real = provider.assembler.gather

    def gather(**options):
        started.set()
        assert release.wait(10)
        if fail:
            raise OSError("spool unreadable")
        return real(**options)

    provider.assembler.gather = gather
    return started, release


def test_an_lrms_refresh_during_the_gather_is_published_by_the_gathers_publish(tmp_path):
    scheduler = {"free": 8}
    provider = make_provider(tmp_path, scheduler)
    ldif = tmp_path / "glue.ldif"
    try:
        provider.run_job("lrms")  # nothing else at work: published at once
        assert free_cpus(ldif) == ["8"] and provider.publishes == 1

        started, release = held_gather(provider)
        worker = threading.Thread(target=provider.run_job, args=("gather",))
        worker.start()
        assert started.wait(10)
        scheduler["free"] = 3
        provider.run_job("lrms")  # the gather is at work: its publish will carry this
        assert free_cpus(ldif) == ["8"] and provider.publishes == 1
        release.set()
        worker.join(10)
        assert free_cpus(ldif) == ["3"] and provider.publishes == 2  # one publish for both jobs

        scheduler["free"] = 5
        provider.run_job("lrms")  # alone again: published at once
        assert free_cpus(ldif) == ["5"] and provider.publishes == 3
    finally:
        provider.close()


def test_a_gather_that_fails_still_publishes_the_lrms_state_left_to_it(tmp_path):
    scheduler = {"free": 8}
    provider = make_provider(tmp_path, scheduler)
    ldif = tmp_path / "glue.ldif"
    try:
        provider.run_job("lrms")
        started, release = held_gather(provider, fail=True)
        worker = threading.Thread(target=provider.run_job, args=("gather",))
        worker.start()
        assert started.wait(10)
        scheduler["free"] = 2
        provider.run_job("lrms")
        release.set()
        worker.join(10)
        assert provider.job_stats["gather"].failures == 1
        assert free_cpus(ldif) == ["2"] and provider.publishes == 2
    finally:
        provider.close()
