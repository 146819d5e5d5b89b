#!/usr/bin/env python3
"""GLUE 1.3 publication benchmarks (issue 3).  Not a test: it prints figures.

    python3 benchmarks/glue.py ldif [PYTHON]   # fresh `glueinfo ldif` processes on this host (median of 21), next to
                                               # `python -c pass` and `glueinfo probe`; PYTHON: a virtualenv's
                                               # interpreter with glueinfo installed (default: this one + checkout)
    python3 benchmarks/glue.py scale 10000 100000
                                               # aggregate + render (+ check, + LDIF text) of synthetic sites,
                                               # each size in a fresh child process: time per stage, peak RSS
    python3 benchmarks/glue.py publish 10000   # `glueinfo publish` of a 10,000-host site into a private slapd:
                                               # initial load, then a no-change run (writes counted by slapd)
    python3 benchmarks/glue.py all

Targets: `glueinfo ldif` median <= 150 ms; 100,000 hosts aggregated and
rendered in <= 10 s and <= 1 GB, growing about linearly; the no-change
publish of 10,000 hosts < 3 s with zero writes.

Synthetic hosts come from tests/harness/glue_sites.py: five hardware classes, three
file systems per host (two local, one NFS), so each host is four entries.
Building the snapshots is not timed (it stands for the collectors' work).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
sys.path.insert(0, ROOT)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    # A real install has byte-compiled modules; this sandbox sets PYTHONDONTWRITEBYTECODE,
    # which would make every fresh process recompile glueinfo from source.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def bench_ldif(runs: int = 21, python: str = sys.executable) -> dict:
    """Fresh `glueinfo ldif` processes, with `python -c pass` and `glueinfo probe` measured in
    the same rounds (interleaved, so a busy moment hits all three)."""
    env = child_env()
    if python != sys.executable:  # an interpreter with glueinfo installed: use that, not this checkout
        env.pop("PYTHONPATH", None)
    commands = {"python -c pass": [python, "-c", "pass"], "glueinfo probe": [python, "-m", "glueinfo.cli", "probe"],
                "glueinfo ldif": [python, "-m", "glueinfo.cli", "ldif"]}
    for command in commands.values():  # warm up: .pyc files, the schema cache
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd="/")
    times: dict[str, list[float]] = {name: [] for name in commands}
    output = b""
    for _ in range(runs):
        for name, command in commands.items():
            start = time.perf_counter()
            proc = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False, cwd="/")
            times[name].append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise SystemExit(f"{name} failed with exit {proc.returncode}")
            if name == "glueinfo ldif":
                output = proc.stdout
    result = {name: {"median_ms": round(statistics.median(t) * 1000, 1), "min_ms": round(min(t) * 1000, 1)}
              for name, t in times.items()}
    result["entries"] = output.count(b"\ndn: ") + output.startswith(b"dn: ")
    print(f"fresh processes, {runs} rounds with {python}: " + "; ".join(
        f"{name} median {r['median_ms']} ms (min {r['min_ms']} ms)" for name, r in result.items() if name != "entries")
        + f"; `glueinfo ldif` printed {result['entries']} entries; load average {os.getloadavg()[0]:.2f}")
    return result


def _scale_child(hosts_count: int) -> dict:
    """Runs in a fresh process: stage times and peak RSS for one site size."""
    import io

    from glue_sites import synthetic_site

    from glueinfo.core.config import parse_text
    from glueinfo.glue import build as pipeline
    from glueinfo.glue.render13 import iter_glue13
    from glueinfo.glue.schema import load_glue_schema
    from glueinfo.glue.templates import load_templates
    from glueinfo.site.aggregate import aggregate
    from glueinfo.site.assemble import query_states
    from glueinfo.site.from_config import site_from_config

    hosts = synthetic_site(hosts_count)
    gc.freeze()  # as `glueinfo ldif` does once the snapshots are read
    rss_snapshots = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    config = parse_text("[ce:default]\naccess = VO:atlas\n")
    site = site_from_config(config, "ce01.example.org")
    templates = load_templates()
    schema = load_glue_schema(site.glue.schema_dir)
    clock = time.perf_counter
    cpu = time.process_time  # the machine is shared: CPU time says what glueinfo costs, wall time what it took

    start, cpu_start = clock(), cpu()
    groups = aggregate(site, hosts)
    t_aggregate, c_aggregate = clock() - start, cpu() - cpu_start
    states = query_states(site, groups)

    start, cpu_start = clock(), cpu()
    entries = 0
    for _ in iter_glue13(site, groups, states, templates):
        entries += 1
    t_render, c_render = clock() - start, cpu() - cpu_start

    start, cpu_start = clock(), cpu()
    checker = pipeline.TreeChecker(schema)
    kept = sum(1 for e in iter_glue13(site, groups, states, templates) if checker(e) is not None)
    t_render_check, c_render_check = clock() - start, cpu() - cpu_start

    class Counting(io.TextIOBase):
        """Counts what is written and keeps nothing (so memory shows the pipeline, not the text)."""
        size = 0

        def write(self, text: str) -> int:
            self.size += len(text)
            return len(text)

    sink = Counting()
    start, cpu_start = clock(), cpu()
    from glueinfo.publish.from_snapshots import write_site_ldif

    build = write_site_ldif(config, hosts, sink, local_fqdn="ce01.example.org", schema=schema,
                                     templates=templates, states=states)
    t_full, c_full = clock() - start, cpu() - cpu_start
    size = sink.size
    assert kept == entries and not build.errors, build.errors[:3]
    return {"hosts": hosts_count, "entries": entries, "aggregate_s": round(t_aggregate, 2), "render_s": round(t_render, 2),
            "render_check_s": round(t_render_check, 2), "aggregate_render_check_s": round(t_aggregate + t_render_check, 2),
            "full_ldif_s": round(t_full, 2), "ldif_mb": round(size / 1e6, 1),
            "cpu_aggregate_s": round(c_aggregate, 2), "cpu_render_s": round(c_render, 2),
            "cpu_aggregate_render_check_s": round(c_aggregate + c_render_check, 2), "cpu_full_ldif_s": round(c_full, 2),
            "load_average": round(os.getloadavg()[0], 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "rss_after_snapshots_mb": round(rss_snapshots)}


def bench_scale(sizes: list[int]) -> list[dict]:
    results = []
    for size in sizes:
        proc = subprocess.run([sys.executable, __file__, "_scale_child", str(size)], env=child_env(),
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"scale {size} failed:\n{proc.stderr}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        results.append(result)
        print(f"{size:>7} hosts ({result['entries']} entries): aggregate {result['aggregate_s']} s, "
              f"render {result['render_s']} s, render+normalise+check {result['render_check_s']} s "
              f"=> aggregate+render+check {result['aggregate_render_check_s']} s; whole `ldif` text "
              f"({result['ldif_mb']} MB) {result['full_ldif_s']} s; peak RSS {result['peak_rss_mb']} MB "
              f"(of which the snapshots {result['rss_after_snapshots_mb']} MB); CPU time: aggregate {result['cpu_aggregate_s']} s, "
              f"render {result['cpu_render_s']} s, aggregate+render+check {result['cpu_aggregate_render_check_s']} s, "
              f"whole text {result['cpu_full_ldif_s']} s; load average {result['load_average']}")
    return results


def bench_publish(hosts_count: int) -> dict:
    from glue_sites import synthetic_site
    from servers import Slapd

    from glueinfo.core.model import HostSnapshot

    with tempfile.TemporaryDirectory(prefix="glueinfo-bench-") as tmp:
        snapshots = os.path.join(tmp, "hosts.json")
        with open(snapshots, "w") as handle:
            json.dump([h.to_dict() for h in synthetic_site(hosts_count)], handle)
        assert HostSnapshot
        password = os.path.join(tmp, "password")
        config = os.path.join(tmp, "glueinfo.conf")
        with open(config, "w") as handle:
            handle.write("[ce:default]\naccess = VO:atlas\nhost = ce01.example.org\n"
                         "[cluster:main]\nunique_id = ce01.example.org\n")
        with Slapd() as slapd:
            with open(password, "w") as handle:
                handle.write(slapd.password + "\n")
            command = [sys.executable, "-m", "glueinfo.cli", "publish", "--config", config, "--snapshots", snapshots,
                       "--ldap", slapd.url, "--bind-dn", slapd.bind_dn, "--password-file", password, "--stats"]
            results = {}
            for run in ("initial", "no_change"):
                start = time.perf_counter()
                proc = subprocess.run(command, env=child_env(), capture_output=True, text=True, check=False)
                elapsed = time.perf_counter() - start
                if proc.returncode != 0:
                    raise SystemExit(f"publish ({run}) failed: {proc.stderr}")
                stats = json.loads(proc.stdout.strip().splitlines()[-1])
                stats["sync_s"] = stats.pop("seconds")
                results[run] = {"seconds": round(elapsed, 2), **stats}
            for run, figures in results.items():
                print(f"publish {hosts_count} hosts into slapd, {run.replace('_', '-')} run: {figures['seconds']} s for the "
                      f"whole command = reading {len(snapshots) and hosts_count} snapshots {figures['hosts_s']} s + "
                      f"building the checked tree {figures['build_s']} s + LDAP sync {figures['sync_s']} s; "
                      f"{figures['added']} added, {figures['modified']} modified, {figures['deleted']} deleted, "
                      f"{figures['writes']} writes, {figures['rejected']} refused")
            return results


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    if what == "_scale_child":
        print(json.dumps(_scale_child(int(argv[1]))))
        return 0
    if what in ("ldif", "all"):
        python = argv[1] if what == "ldif" and len(argv) > 1 else sys.executable
        bench_ldif(python=python)
    if what in ("scale", "all"):
        bench_scale([int(a) for a in argv[1:]] if what == "scale" and len(argv) > 1 else [10_000, 100_000])
    if what in ("publish", "all"):
        bench_publish(int(argv[1]) if what == "publish" and len(argv) > 1 else 10_000)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
