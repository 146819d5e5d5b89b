"""`glueinfo run` end to end: a real process with 1 s intervals, real agents
(`glueinfo serve` on recorded machines), the real test slapd, real signals.

What a site admin would check, each fault injected for real:

- a change on a machine (more load, a new mount, a machine gone) shows in
  ldapsearch and in the Node XML file within two cycles; SIGTERM exits 0 fast;
- SIGHUP with a broken config keeps the old one running; a good one applies;
- a collector that hangs or raises every time, a worker agent that vanishes,
  a job that overruns its interval;
- the output disk full or read-only (a real tmpfs): the old files stay, the
  error names the path, the other outputs keep updating;
- the state directory: a restart publishes last-known data at once, with its
  age; a corrupt state file is warned about and rebuilt;
- the LDAP server down at start, down mid-run, back again (fully re-synced,
  nothing lost), and rejecting some entries (reported by DN every cycle
  until fixed).

Expected values come from the recorded fixture files (tests/fixtures/hosts),
read here directly, and from slapd through ldapsearch.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import pytest
from lxml import etree
from paths import HOSTS, REPO
from waiting import wait_until

ROOT = REPO
HOSTS = HOSTS
HEAD = "xeon-gold-2s-ht"  # the head node's own (recorded) machine
WORKERS = ("wn-nfs-lustre", "arm-altra-q32", "epyc-container")
BASE = "mds-vo-name=resource,o=grid"


# -- the recorded machines, read directly ---------------------------------------------------------

def machine(root: Path) -> dict[str, Any]:
    cpuinfo = (root / "proc/cpuinfo").read_text(encoding="utf-8")
    return {"hostname": json.loads((root / ".glueinfo/recorded.json").read_text())["hostname"],
            "cpus": sum(1 for line in cpuinfo.splitlines() if line.startswith("processor")),
            "load1": float((root / "proc/loadavg").read_text().split()[0])}


def copy_machine(name: str, into: Path) -> Path:
    target = into / name
    shutil.copytree(HOSTS / name, target, symlinks=True)
    return target


def set_load(root: Path, load1: float) -> None:
    fields = (root / "proc/loadavg").read_text().split()
    fields[0] = f"{load1:.2f}"
    (root / "proc/loadavg").write_text(" ".join(fields) + "\n")


def add_mount(root: Path, mount_point: str, device: str = "/dev/sdz1", size_blocks: int = 262144) -> None:
    with open(root / "proc/self/mounts", "a") as mounts:
        escaped = mount_point.replace("\\", "\\134").replace(" ", "\\040")  # as the kernel writes it
        mounts.write(f"{device} {escaped} ext4 rw,relatime 0 0\n")
    recorded = json.loads((root / ".glueinfo/recorded.json").read_text())
    recorded.setdefault("statvfs", {})[mount_point] = {"frsize": 4096, "blocks": size_blocks, "bavail": size_blocks // 2}
    (root / ".glueinfo/recorded.json").write_text(json.dumps(recorded))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """``check()``'s first true value; a file or page not there yet (or not yet what the check
    asserts) counts as not yet."""
    return wait_until(check, what, timeout, step=interval,
                      ignore=(OSError, ValueError, etree.XMLSyntaxError, AssertionError))


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLUEINFO_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# -- processes --------------------------------------------------------------------------------------

class Agent:
    """`glueinfo serve` of one recorded machine on 127.0.0.1:port, refreshing every second."""

    def __init__(self, host_root: Path, workdir: Path) -> None:
        self.host_root = host_root
        self.port = free_port()
        self.log_path = workdir / f"agent-{host_root.name}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "glueinfo.cli", "serve", "--no-ldif", "--listen", f"127.0.0.1:{self.port}",
                 "--refresh-interval", "1", "--host-root", str(host_root), "--config", "/dev/null"],
                stdout=log, stderr=log, env=child_env(), cwd=ROOT)
        wait_for(lambda: self.node() is not None, 30, f"agent {host_root.name} to answer")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def node(self) -> etree._Element:
        with urllib.request.urlopen(f"http://{self.target}/node.xml", timeout=2) as answer:
            return etree.fromstring(answer.read())

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()  # vanishes: no goodbye
            self.process.wait(10)


class Run:
    """`glueinfo run` as a child process, its log in a file."""

    def __init__(self, config: Path, workdir: Path, *args: str) -> None:
        self.log_path = workdir / "run.log"
        self.log_file = open(self.log_path, "ab")
        self.process = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "run", "--config", str(config), *args],
                                        stdout=self.log_file, stderr=self.log_file, env=child_env(), cwd=ROOT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def count(self, pattern: str) -> int:
        return len(re.findall(pattern, self.log()))

    def alive(self) -> bool:
        return self.process.poll() is None

    def send_signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def stop(self, timeout: float = 15.0, signum: int = signal.SIGTERM) -> int:
        """SIGTERM (or ``signum``); its exit status.  ``timeout`` is a deadline, not a speed: past it
        the process is killed and the test fails, saying so."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"glueinfo run did not stop within {timeout:g} s of SIGTERM:\n{self.log()[-3000:]}") from None
        self.log_file.close()
        return code


@pytest.fixture
def processes():
    """Every process a test starts, stopped by PID at the end whatever happened."""
    started: list[Any] = []
    yield started
    for item in started:
        process = item.process
        if process.poll() is None:
            process.kill()
            process.wait(10)
        if isinstance(item, Run) and not item.log_file.closed:
            item.log_file.close()


def write_config(path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    lines = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {value}" for key, value in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def base_sections(workdir: Path, head_root: Path, agents: list[Agent] = (), **run: Any) -> dict[str, dict[str, Any]]:
    sections: dict[str, dict[str, Any]] = {
        "glueinfo": {"host_root": head_root},
        "collectors": {"timeout": 1},
        "run": {"fast_interval": 1, "gather_interval": 1, "slow_interval": 60, "ldif_file": workdir / "out" / "glue.ldif",
                "node_xml_file": workdir / "out" / "nodes.xml", "state_dir": workdir / "state", "shutdown_grace": 3, **run},
        "node": {"stale_after": 4},
        "sources": {"enabled": "local, agents" if agents else "local", "drop_after": 8, "timeout": 1, "retries": 0},
    }
    if agents:
        sections["sources"]["agents"] = ", ".join(a.target for a in agents)
    (workdir / "out").mkdir(exist_ok=True)
    return sections


def with_ldap(sections: dict[str, dict[str, Any]], server: Any, workdir: Path, **run: Any) -> dict[str, dict[str, Any]]:
    password = workdir / "ldap.password"
    password.write_text(server.password + "\n")
    sections["run"].update({"ldap_sync": "yes", "ldap_retry_min": 1, "ldap_retry_max": 2, **run})
    sections["ldap"] = {"url": server.url, "bind_dn": server.bind_dn, "password_file": password, "timeout": 2}
    return sections


def normalise(dn: str) -> str:
    from glueinfo.core.ldif import normalise_dn

    return normalise_dn(dn)


def nodes_from_bytes(document: bytes) -> dict[str, etree._Element]:
    return {node.findtext("Id"): node for node in etree.fromstring(document).iter("Node")}


def nodes(path: Path) -> dict[str, etree._Element]:
    return nodes_from_bytes(path.read_bytes())


def own_node(port: int) -> etree._Element:
    """This host's Node as `glueinfo run` with [run] serve answers it on /node.xml."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/node.xml", timeout=5) as answer:
        return etree.fromstring(answer.read())


def extension(node: etree._Element, name: str, etype: Optional[str] = None) -> Optional[str]:
    for element in node.iter("Extension"):
        if element.get("name") == name and (etype is None or element.get("type") == etype):
            return element.text
    return None


def ldif_entries(path: Path) -> dict[str, Any]:
    from glueinfo.core.ldif import normalise_dn, parse_ldif

    return {normalise_dn(e.dn): e for e in parse_ldif(path.read_text(encoding="utf-8"))}


def host_entry(entries, hostname: str):
    return next((e for e in entries if e.dn.lower().startswith(f"gluehostuniqueid={hostname.lower()},")), None)


# -- end to end -------------------------------------------------------------------------------------

@pytest.mark.integration
def test_changes_reach_ldap_and_node_xml_within_two_cycles_and_sigterm_exits_cleanly(tmp_path, processes, slapd):
    head_root = copy_machine(HEAD, tmp_path)
    roots = {name: copy_machine(name, tmp_path) for name in WORKERS}
    agents = {name: Agent(root, tmp_path) for name, root in roots.items()}
    processes.extend(agents.values())
    sections = base_sections(tmp_path, head_root, list(agents.values()))
    config = write_config(tmp_path / "glueinfo.conf", with_ldap(sections, slapd, tmp_path))
    run = Run(config, tmp_path)
    processes.append(run)
    xml_path, ldif_path = tmp_path / "out" / "nodes.xml", tmp_path / "out" / "glue.ldif"
    names = {name: machine(root)["hostname"] for name, root in roots.items()}
    head_name = machine(head_root)["hostname"]
    wait_for(lambda: set(nodes(xml_path)) == {head_name, *names.values()}, 30, "every host in nodes.xml")

    def glue_load(entries, hostname: str) -> Optional[int]:
        entry = host_entry(entries.values() if isinstance(entries, dict) else entries, hostname)
        return int(entry.first("GlueHostProcessorLoadLast1Min")) if entry is not None and "GlueHostProcessorLoadLast1Min" in entry else None

    def visible_within_two_cycles(kind: str, agent: Optional[Agent], check_agent, check_outputs, what: str) -> None:
        if agent is not None:  # the change is on the worker: from when its agent serves it
            wait_for(lambda: check_agent(agent.node()), 10, f"agent to serve {what}")
        before = run.count(rf"cycle {kind}:")
        wait_for(check_outputs, 20, what)
        assert run.count(rf"cycle {kind}:") - before <= 2, f"{what} took more than two {kind} cycles"

    # More load on a worker: GLUE ProcessorLoad = (CPUs - load) x 100 (the GLUE rule), Node XML LoadAverage1.
    worker = roots["wn-nfs-lustre"]
    cpus = machine(worker)["cpus"]
    set_load(worker, 4.25)
    visible_within_two_cycles(
        "gather", agents["wn-nfs-lustre"], lambda node: extension(node, "LoadAverage1") == "4.25",
        lambda: (glue_load(slapd.ldapsearch(BASE), names["wn-nfs-lustre"]) == round((cpus - 4.25) * 100)
                 and glue_load(ldif_entries(ldif_path), names["wn-nfs-lustre"]) == round((cpus - 4.25) * 100)
                 and extension(nodes(xml_path)[names["wn-nfs-lustre"]], "LoadAverage1") == "4.25"),
        "the worker's new load")

    # A new mount on another worker: a GlueHostLocalFileSystem child entry and a FileSystem Extension.
    add_mount(roots["arm-altra-q32"], "/scratch/new disk")
    visible_within_two_cycles(
        "gather", agents["arm-altra-q32"], lambda node: extension(node, "/scratch/new disk", "FileSystem") is not None,
        lambda: (slapd.ldapsearch(BASE, "(GlueHostLocalFileSystemRoot=/scratch/new disk)")
                 and any(e.first("GlueHostLocalFileSystemRoot") == "/scratch/new disk" for e in ldif_entries(ldif_path).values())
                 and extension(nodes(xml_path)[names["arm-altra-q32"]], "/scratch/new disk", "FileSystem") is not None),
        "the new mount")

    # The head node's own load: the fast job.
    head_cpus = machine(head_root)["cpus"]
    set_load(head_root, 1.5)
    visible_within_two_cycles(
        "fast", None, None,
        lambda: (glue_load(slapd.ldapsearch(BASE), head_name) == round((head_cpus - 1.5) * 100)
                 and glue_load(ldif_entries(ldif_path), head_name) == round((head_cpus - 1.5) * 100)
                 and extension(nodes(xml_path)[head_name], "LoadAverage1") == "1.5"),
        "the head node's new load")

    # A worker vanishes: State Unknown after [node] stale_after, then gone after [sources] drop_after;
    # the others carry on.
    gone = names["epyc-container"]
    agents["epyc-container"].kill()
    def unknown_since() -> Optional[tuple[float]]:
        node = nodes(xml_path)[gone]
        if node.findtext("State") != "Unknown":
            return None
        return (datetime.fromisoformat(extension(node, "CollectedAt").replace("Z", "+00:00")).timestamp(),)

    (collected,) = wait_for(unknown_since, 15, "the vanished worker to turn Unknown")
    assert time.time() - collected >= 4  # Unknown only once its last snapshot is older than [node] stale_after
    wait_for(lambda: gone not in nodes(xml_path) and host_entry(ldif_entries(ldif_path).values(), gone) is None
             and host_entry(slapd.ldapsearch(BASE), gone) is None, 20, "the vanished worker to be dropped")
    # What slapd holds is exactly the LDIF file: a broker sees what BDII would.
    assert {normalise(e.dn) for e in slapd.ldapsearch(BASE) if normalise(e.dn) != normalise(BASE)} == set(ldif_entries(ldif_path))
    assert set(nodes(xml_path)) == {head_name, names["wn-nfs-lustre"], names["arm-altra-q32"]}
    assert nodes(xml_path)[names["wn-nfs-lustre"]].findtext("State") != "Unknown"
    assert re.search(rf"WARNING: agents: .*{agents['epyc-container'].target}", run.log()), "the dead agent is not named"

    # The log: one INFO line per cycle with hosts, entries, changes and duration.
    line = re.findall(r"INFO: cycle gather: .*", run.log())[-1]
    assert re.fullmatch(r"INFO: cycle gather: \d+ hosts \(\d+ stale\), \d+ entries \(\w+ changed.*\), 2 files current, "
                        r"LDAP \+\d+ ~\d+ -\d+, \d+\.\d\d s", line), line

    assert run.stop(timeout=5) == 0
    assert "INFO: stopped" in run.log()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


def test_sighup_rejects_a_broken_config_and_applies_a_good_one(tmp_path, processes):
    head_root = copy_machine(HEAD, tmp_path)
    sections = base_sections(tmp_path, head_root)
    config = write_config(tmp_path / "glueinfo.conf", sections)
    run = Run(config, tmp_path)
    processes.append(run)
    xml_path = tmp_path / "out" / "nodes.xml"
    wait_for(lambda: run.count("cycle fast:") >= 2, 30, "two cycles")

    good_text = config.read_text()
    config.write_text(good_text + "[run]\nfast_interval = soon\n")
    run.send_signal(signal.SIGHUP)
    wait_for(lambda: "new config rejected" in run.log(), 10, "the rejection")
    line = next(line for line in run.log().splitlines() if "new config rejected" in line)
    assert "ERROR" in line and f"{config}:" in line
    config.write_text(good_text.replace("[node]\n", "[node]\noffline_hosts = nothing.example.org\nbogus_key = 1\n"))
    run.send_signal(signal.SIGHUP)
    wait_for(lambda: run.count("new config rejected") == 2, 10, "the second rejection")
    assert "bogus_key" in run.log().splitlines()[-1] or "bogus_key" in run.log()
    count = run.count("cycle fast:")
    wait_for(lambda: run.count("cycle fast:") >= count + 2, 10, "cycles to go on with the old config")
    assert run.alive()

    # A good config applies: the head node taken out of service is Offline in the next cycles.
    head_name = machine(head_root)["hostname"]
    config.write_text(good_text.replace("[node]\n", f"[node]\noffline_hosts = {head_name}\n"))
    run.send_signal(signal.SIGHUP)
    wait_for(lambda: "reloaded" in run.log(), 10, "the reload")
    wait_for(lambda: nodes(xml_path)[head_name].findtext("State") == "Offline", 10, "the new config to apply")
    assert run.stop(timeout=5, signum=signal.SIGINT) == 0  # Ctrl-C in a terminal: the same clean stop
    assert "INFO: stopped" in run.log()


def test_once_logs_to_a_file_and_to_syslog(tmp_path):
    head_root = copy_machine(HEAD, tmp_path)
    config = write_config(tmp_path / "glueinfo.conf", base_sections(tmp_path, head_root))
    syslog = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # stands for /dev/log
    syslog.bind(str(tmp_path / "log.sock"))
    syslog.settimeout(10)
    try:
        proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "run", "--once", "--config", str(config),
                               "--log-file", str(tmp_path / "glueinfo.log"), "--syslog", str(tmp_path / "log.sock")],
                              capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=120)
        assert proc.returncode == 0, proc.stderr
        messages = []
        syslog.settimeout(0.5)
        try:
            while True:
                messages.append(syslog.recv(65536).decode())
        except TimeoutError:
            pass
    finally:
        syslog.close()
    logged = (tmp_path / "glueinfo.log").read_text()
    assert re.search(r"INFO: cycle fast: 1 hosts \(0 stale\)", logged) and re.search(r"cycle fast:", proc.stderr)
    # <daemon.info> = <30>, as syslog daemons file it
    assert any(m.startswith("<30>glueinfo[") and "INFO: cycle fast: 1 hosts" in m for m in messages), messages
    assert (tmp_path / "out" / "glue.ldif").read_text().startswith("dn: ")


def make_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("Threads:")).split()[1])


def test_collectors_that_hang_or_raise_every_time_do_not_stop_the_cycles(tmp_path, processes):
    head_root = copy_machine(HEAD, tmp_path)
    make_fifo(head_root / "proc/loadavg")  # opening it blocks for ever: the load collector hangs every run
    (head_root / ".glueinfo/recorded.json").write_text('{"format": 1, "statvfs": [')  # filesystems and network raise
    port = free_port()
    sections = base_sections(tmp_path, head_root, serve="yes")
    sections["serve"] = {"listen": f"127.0.0.1:{port}"}
    config = write_config(tmp_path / "glueinfo.conf", sections)
    run = Run(config, tmp_path)
    processes.append(run)
    xml_path = tmp_path / "out" / "nodes.xml"
    wait_for(lambda: run.count("cycle fast:") >= 4, 40, "four cycles despite the hung collector")
    log = run.log()
    assert re.search(r"WARNING: collector load on \S+ failed: timed out after 1 s", log)
    assert re.search(r"WARNING: collector filesystems on \S+ failed: .*recorded\.json", log)
    assert run.count(r"collector filesystems on \S+ failed") >= 4  # raising: every cycle, by name

    head = next(iter(nodes(xml_path).values()))
    assert head.find("Configured/Memory") is not None  # what works is still published
    assert extension(head, "LoadAverage1") is None  # what does not is left out, not invented
    assert extension(head, "load", "Collector").startswith("failed")
    # The self-metrics are on this host's own Node (/node.xml), not in the site's file, which stays the
    # document `glueinfo node-xml --site` prints.
    assert extension(head, "glueinfo-run-collectors", "Extra") is None
    head = own_node(port)
    metrics = json.loads(extension(head, "glueinfo-run-collectors", "Extra"))
    assert metrics["load"]["failures"] >= 3 and metrics["memory"]["failures"] == 0
    assert metrics["memory"]["last_success_at"] is not None
    fast = json.loads(extension(head, "glueinfo-run-job-fast", "Extra"))
    assert fast["runs"] >= 3 and fast["failures"] == 0  # the job itself goes on fine

    # /health of the same process carries the same self-metrics.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
        health = json.loads(answer.read())
    assert health["run"]["jobs"]["fast"]["runs"] >= 3 and health["run"]["collectors"]["load"]["failures"] >= 3
    assert health["status"] == "degraded" and health["hostname"] == head.findtext("Id")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/nodes.xml", timeout=5) as answer:
        served = nodes_from_bytes(answer.read())
    assert set(served) == set(nodes(xml_path))

    # Each timed-out run leaves a thread blocked on the FIFO for good: the hung collector is retried
    # after doubling pauses, reported as not run meanwhile, so blocked threads do not pile up per cycle.
    wait_for(lambda: run.count("cycle fast:") >= 12, 40, "twelve cycles")
    attempts = run.count(r"collector load on \S+ failed: timed out")
    assert run.count(r"collector load on \S+ failed: not run: it timed out before") >= 6
    assert attempts <= 5, f"{attempts} blocked threads in 12 cycles"
    assert threads(run.process.pid) < 20
    assert run.stop(timeout=6) == 0


def test_an_overrunning_job_is_logged_and_never_runs_twice_at_once(tmp_path, processes):
    # An agent that accepts the connection and never answers: each gather takes [sources] timeout (3 s)
    # while its interval is 1 s.
    silent = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        head_root = copy_machine(HEAD, tmp_path)
        sections = base_sections(tmp_path, head_root)
        sections["sources"].update({"enabled": "local, agents", "agents": f"127.0.0.1:{silent.getsockname()[1]}", "timeout": 3})
        config = write_config(tmp_path / "glueinfo.conf", sections)
        run = Run(config, tmp_path)
        processes.append(run)
        wait_for(lambda: run.count("job gather overran") >= 2, 30, "the overrun to be logged")
        line = next(line for line in run.log().splitlines() if "job gather overran" in line)
        assert "WARNING" in line and "interval 1 s" in line
        wait_for(lambda: run.count("cycle fast:") >= 5, 10, "the fast job to keep its own pace meanwhile")
        # One gather at a time: every connection the agent saw belongs to a finished gather, but the one in flight.
        assert len(held) <= run.count(r"INFO: gathered ") + 1
        assert "maximum number of running instances" not in run.log()  # APScheduler's own line: ours says it better
        # A gather still waiting on the agent is finished or abandoned within the deadline.
        assert run.stop(timeout=6) == 0
    finally:
        stop.set()
        thread.join()
        silent.close()
        for conn in held:
            conn.close()


# -- disks ------------------------------------------------------------------------------------------

@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A mounted 256 KiB tmpfs (root only); skipped with the reason when this machine may not mount."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", str(mount_point)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def test_a_full_then_read_only_output_disk_keeps_the_old_file_and_the_rest_updating(tmp_path, tiny_tmpfs, processes):
    head_root = copy_machine(HEAD, tmp_path)
    ldif_path = tiny_tmpfs / "glue.ldif"
    sections = base_sections(tmp_path, head_root)
    sections["run"]["ldif_file"] = ldif_path
    config = write_config(tmp_path / "glueinfo.conf", sections)
    run = Run(config, tmp_path)
    processes.append(run)
    xml_path = tmp_path / "out" / "nodes.xml"
    wait_for(lambda: ldif_path.exists() and run.count("cycle fast:") >= 1, 30, "the first LDIF")

    # Fill the disk: the LDIF no longer fits next to its old copy.
    filler = tiny_tmpfs / "filler"
    free = os.statvfs(tiny_tmpfs).f_bavail * os.statvfs(tiny_tmpfs).f_frsize
    filler.write_bytes(b"\0" * max(0, free - ldif_path.stat().st_size // 2))
    set_load(head_root, 3.25)  # new bytes to write (an unchanged file is only marked fresh, never rewritten)
    wait_for(lambda: run.count(rf"{re.escape(str(ldif_path))}: not written: No space left on device") >= 2, 15,
             "the full-disk error, every cycle")
    old = ldif_path.read_bytes()
    line = next(line for line in run.log().splitlines() if "No space left" in line)
    assert "WARNING" in line and "the previous file is unchanged" in line
    assert old.startswith(b"dn: ") and old.endswith(b"\n")  # complete, not truncated
    mtime = xml_path.stat().st_mtime
    wait_for(lambda: xml_path.stat().st_mtime > mtime, 10, "the Node XML on the other disk to keep updating")
    assert [p.name for p in tiny_tmpfs.iterdir() if p.name.endswith(".tmp")] == []

    # Space again: written again at the next cycle.
    filler.unlink()
    wait_for(lambda: "glue.ldif: written again" in run.log(), 10, "the LDIF to be written again")

    # Read-only: same story.
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_tmpfs)], check=True)
    kept = ldif_path.read_bytes()
    set_load(head_root, 5.5)
    wait_for(lambda: run.count(r"not written: Read-only file system") >= 2, 15, "the read-only error, every cycle")
    assert ldif_path.read_bytes() == kept
    assert run.stop(timeout=5) == 0


# -- state ------------------------------------------------------------------------------------------

def test_a_restart_publishes_last_known_hosts_at_once_with_their_age(tmp_path, processes):
    head_root = copy_machine(HEAD, tmp_path)
    worker_root = copy_machine("wn-nfs-lustre", tmp_path)
    agent = Agent(worker_root, tmp_path)
    processes.append(agent)
    sections = base_sections(tmp_path, head_root, [agent])
    sections["node"]["stale_after"] = 3
    sections["sources"]["drop_after"] = 3600
    config = write_config(tmp_path / "glueinfo.conf", sections)
    xml_path, ldif_path = tmp_path / "out" / "nodes.xml", tmp_path / "out" / "glue.ldif"
    worker = machine(worker_root)["hostname"]

    first = Run(config, tmp_path)
    processes.append(first)
    wait_for(lambda: worker in nodes(xml_path), 30, "the worker in nodes.xml")
    assert first.stop() == 0
    collected = extension(nodes(xml_path)[worker], "CollectedAt")
    agent.kill()  # while glueinfo is down, the worker vanishes too
    xml_path.unlink()
    ldif_path.unlink()
    time.sleep(3.5)  # longer than stale_after

    # A corrupt state file of some other host must not stop the restart.
    corrupt = tmp_path / "state" / "hosts" / "ghost.example.org.json"
    corrupt.write_text('{"format": 1, "host": "ghost.exa')
    second = Run(config, tmp_path)
    processes.append(second)
    wait_for(lambda: "cycle restart:" in second.log(), 20, "the publish of the restored state")
    restored = nodes(xml_path)[worker]
    assert extension(restored, "CollectedAt") == collected  # last-known data, with its real time
    assert restored.findtext("State") == "Unknown"  # and older than stale_after: not passed off as live
    assert host_entry(ldif_entries(ldif_path).values(), worker) is not None
    line = next(line for line in second.log().splitlines() if "ghost.example.org.json" in line)
    assert "WARNING" in line and "ignored" in line
    wait_for(lambda: not corrupt.exists() or json.loads(corrupt.read_text()).get("host") == "ghost.example.org", 10,
             "the corrupt state file to be rebuilt or removed")
    state = json.loads((tmp_path / "state" / "hosts" / f"{worker}.json").read_text())
    assert "agents" in state["sources"]
    assert second.stop() == 0


# -- the LDAP server ---------------------------------------------------------------------------------

def slapd_down(server: Any) -> None:
    """Stop the test slapd by its PID; its database and port stay for slapd_up."""
    server.process.terminate()
    server.process.wait(10)


def slapd_up(server: Any) -> None:
    """Start the same slapd again, same config, database and port (as a restarted server would be)."""
    from servers import find_slapd

    with open(server.log_path, "ab") as log:
        server.process = subprocess.Popen([find_slapd(), "-f", str(server.conf_path), "-h", f"{server.url}/", "-d", "0"],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def listening() -> bool:
        assert server.process.poll() is None, "slapd exited"
        with socket.create_connection(("127.0.0.1", server.port), timeout=0.5):
            return True

    wait_for(listening, 20, "slapd to listen again")


def ldap_dns(server: Any) -> set[str]:
    return {normalise(e.dn) for e in server.ldapsearch(BASE) if normalise(e.dn) != normalise(BASE)}


@pytest.mark.integration
def test_ldap_down_at_start_then_back_then_down_mid_run_then_back_loses_nothing(tmp_path, processes, slapd):
    head_root = copy_machine(HEAD, tmp_path)
    ldif_path, xml_path = tmp_path / "out" / "glue.ldif", tmp_path / "out" / "nodes.xml"
    port = free_port()
    sections = base_sections(tmp_path, head_root, serve="yes")
    sections["serve"] = {"listen": f"127.0.0.1:{port}"}
    config = write_config(tmp_path / "glueinfo.conf", with_ldap(sections, slapd, tmp_path))
    unreachable = rf"WARNING: LDAP {re.escape(slapd.url)}: {re.escape(slapd.url)}: cannot reach the LDAP server"

    # Down at start: the files are written anyway, the server is retried with doubling waits.
    slapd_down(slapd)
    run = Run(config, tmp_path)
    processes.append(run)
    wait_for(lambda: run.count(unreachable) >= 3, 30, "three failed attempts")
    assert ldif_path.exists() and xml_path.exists()
    waits = [float(w) for w in re.findall(unreachable + r".*next attempt in (\d+) s", run.log())]
    assert waits[:3] == [1, 2, 2], waits  # [run] ldap_retry_min 1 s, doubled, capped at ldap_retry_max 2 s
    assert run.count("cycle fast:") > run.count(unreachable)  # publishes between attempts skip the LDAP step
    assert "LDAP waiting to retry" in run.log()

    # Back: a full sync at the next attempt.
    slapd_up(slapd)
    wait_for(lambda: "answering again" in run.log(), 15, "the server to be noticed back")
    assert re.search(r"INFO: LDAP .* answering again after \d+ s: full re-sync: \d+ added", run.log())
    wait_for(lambda: ldap_dns(slapd) == set(ldif_entries(ldif_path)), 10, "slapd to hold exactly the LDIF file's entries")

    # Down mid-run, while the machine changes: the files follow, LDAP catches up when it is back.
    slapd_down(slapd)
    failures = run.count(unreachable)
    wait_for(lambda: run.count(unreachable) > failures, 15, "the outage to be noticed")
    head_name, cpus = machine(head_root)["hostname"], machine(head_root)["cpus"]
    set_load(head_root, 7.75)
    expected = str(round((cpus - 7.75) * 100))
    wait_for(lambda: host_entry(ldif_entries(ldif_path).values(), head_name).first("GlueHostProcessorLoadLast1Min") == expected
             and extension(nodes(xml_path)[head_name], "LoadAverage1") == "7.75", 10, "the files to keep updating")
    slapd_up(slapd)
    wait_for(lambda: run.count("answering again") >= 2, 15, "the server to be noticed back again")
    wait_for(lambda: host_entry(slapd.ldapsearch(BASE), head_name).first("GlueHostProcessorLoadLast1Min") == expected, 10,
             "the change made during the outage to reach LDAP")
    assert ldap_dns(slapd) == set(ldif_entries(ldif_path))
    # The self-metrics in this host's own Node (/node.xml; rendered before each cycle's LDAP step: one cycle behind).
    metrics = wait_for(lambda: (lambda m: m if m["state"] == "ok" else None)(
        json.loads(extension(own_node(port), "glueinfo-run-ldap", "Extra"))), 10, "the LDAP metrics to say ok")
    assert metrics["failures"] >= 4 and metrics["last_success_at"] and metrics["url"] == slapd.url
    assert run.stop(timeout=5) == 0


class ConstrainedSlapd:
    """The test slapd with slapo-constraint on o=grid: GlueHostOperatingSystemName may not start with U
    (a site policy, say), so entries for Ubuntu hosts are refused with constraintViolation."""

    @staticmethod
    def start(workdir: Path):
        from servers import Slapd

        class Constrained(Slapd):
            def _config(self) -> str:
                text = super()._config().replace("moduleload back_mdb", "moduleload back_mdb\nmoduleload constraint")
                head, grid = text.split('suffix "o=grid"', 1)
                grid = grid.replace("\n\ndatabase mdb", "\noverlay constraint\n"
                                    "constraint_attribute GlueHostOperatingSystemName regex ^[^U]\n\ndatabase mdb", 1)
                return head + 'suffix "o=grid"' + grid

        return Constrained(workdir).start()


@pytest.mark.integration
def test_entries_the_server_refuses_are_reported_by_dn_every_cycle_until_fixed(tmp_path, processes):
    from servers import missing_slapd_tools

    missing = missing_slapd_tools()
    if missing:
        pytest.skip("real slapd needed, missing: " + ", ".join(missing))
    server = ConstrainedSlapd.start(tmp_path / "slapd")
    try:
        head_root = copy_machine("arm-altra-q32", tmp_path)  # Ubuntu: its SubCluster and host carry the OS name
        assert 'NAME="Ubuntu"' in (head_root / "etc/os-release").read_text()
        ldif_path = tmp_path / "out" / "glue.ldif"
        config = write_config(tmp_path / "glueinfo.conf", with_ldap(base_sections(tmp_path, head_root), server, tmp_path))
        run = Run(config, tmp_path)
        processes.append(run)
        # One WARNING per cycle: how many writes were refused, and the first by DN and reason.
        refused = (r"WARNING: LDAP \S+: 1 writes refused \(\d+ entries below them not sent\), first: "
                   r"(GlueSubClusterUniqueID=[^,]+),GlueClusterUniqueID=.*: add refused: constraintViolation \(19\)")
        wait_for(lambda: run.count(refused) >= 3, 30, "three cycles reporting the refused entry")
        dns = set(re.findall(refused, run.log()))
        assert len(dns) == 1  # the same DN, every cycle
        entries = ldif_entries(ldif_path)
        subcluster = next(dn for dn in entries if dn.startswith("gluesubclusteruniqueid="))
        assert normalise(next(iter(dns))).split(",")[0] == subcluster.split(",")[0]
        assert re.search(r"LDAP \+\d+ ~\d+ -\d+ \(\d+ refused\)", run.log())
        # The rest is in sync: the cluster and the CE answer a broker.
        assert server.ldapsearch(BASE, "(objectClass=GlueCluster)") and server.ldapsearch(BASE, "(objectClass=GlueCE)")
        assert ldap_dns(server) == {dn for dn in entries if "gluesubclusteruniqueid=" not in dn}

        # Fixed (the OS renamed), SIGHUP re-reads the slow facts: accepted, no more reports.
        release = head_root / "etc/os-release"
        release.write_text(release.read_text().replace('NAME="Ubuntu"', 'NAME="Kubuntu"'))
        run.send_signal(signal.SIGHUP)
        wait_for(lambda: ldap_dns(server) == set(ldif_entries(ldif_path)) and server.ldapsearch(BASE, "(objectClass=GlueSubCluster)"),
                 15, "the fixed entries to be accepted")
        reports = run.count(refused)
        cycles = run.count("cycle fast:")
        wait_for(lambda: run.count("cycle fast:") >= cycles + 2, 10, "two more cycles")
        assert run.count(refused) == reports
        assert run.stop() == 0
    finally:
        server.stop()


# -- SIGTERM in the middle of a cycle ---------------------------------------------------------------

def node_document(tree: Path, hostname: str, ram_mb: int, workdir: Path) -> bytes:
    """`glueinfo node-xml` of a recorded machine under ``hostname``, its configured memory set to ``ram_mb``."""
    config = write_config(workdir / f"node-{ram_mb}.conf", {"glueinfo": {"host_root": tree, "hostname": hostname}})
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "node-xml", "--config", str(config)],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    text, count = re.subn(r'(<Configured>.*?<Memory units="MB">)\d+', rf"\g<1>{ram_mb}", proc.stdout, count=1, flags=re.S)
    assert count == 1
    return text.encode()


@pytest.mark.integration
def test_sigterm_during_a_cycle_leaves_ldap_and_the_file_alike(tmp_path, processes, slapd):
    """Issue 26, finding 8: a gather still waiting on a slow worker when SIGTERM comes used to go on
    to write the LDIF file but skip LDAP, so a broker reading BDII saw another site than the file.
    Now a publication that has not begun writing when SIGTERM comes writes nothing, one that has is
    let finish every output: either way, what slapd holds is what the file says."""
    worker = "wn01.example.org"
    first = node_document(HOSTS / "wn-nfs-lustre", worker, 64000, tmp_path)
    second = node_document(HOSTS / "wn-nfs-lustre", worker, 96000, tmp_path)
    slow, asked = threading.Event(), threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = first
            if slow.is_set():  # the gather SIGTERM will arrive in: answered late, with news
                asked.set()
                time.sleep(2.0)
                body = second
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        head_root = copy_machine(HEAD, tmp_path)
        sections = base_sections(tmp_path, head_root, shutdown_grace=5)
        sections["sources"].update({"enabled": "local, agents", "agents": f"127.0.0.1:{server.server_address[1]}={worker}",
                                    "timeout": 4})
        config = write_config(tmp_path / "glueinfo.conf", with_ldap(sections, slapd, tmp_path))
        run = Run(config, tmp_path)
        processes.append(run)
        ldif_path = tmp_path / "out" / "glue.ldif"

        def ram(entries) -> Optional[str]:
            entry = host_entry(entries, worker)
            return entry.first("GlueHostMainMemoryRAMSize") if entry is not None else None

        wait_for(lambda: ram(slapd.ldapsearch(BASE)) == "64000" and ldif_path.exists()
                 and ram(ldif_entries(ldif_path).values()) == "64000", 30, "the worker published in LDAP and the file")
        slow.set()
        assert asked.wait(10), "no gather asked the worker"
        code = run.stop(timeout=30)
        assert code == 0
        in_file, in_ldap = ram(ldif_entries(ldif_path).values()), ram(slapd.ldapsearch(BASE))
        assert in_file == in_ldap, f"the file says {in_file} MB, LDAP {in_ldap} MB"
        assert {normalise(e.dn) for e in slapd.ldapsearch(BASE) if normalise(e.dn) != normalise(BASE)} == set(ldif_entries(ldif_path))
    finally:
        server.shutdown()
        server.server_close()


# -- what the admin installs -------------------------------------------------------------------------

@pytest.mark.parametrize("unit, command", [("glueinfo.service", "run"), ("glueinfo-agent.service", "serve")])
def test_systemd_units(unit, command, tmp_path):
    import configparser

    path = ROOT / "etc" / "systemd" / unit
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment]
    parser.read_string(path.read_text())
    service = parser["Service"]
    assert service["ExecStart"].split()[:2] == ["/opt/glueinfo/bin/glueinfo", command]  # where docs/install.md puts it
    assert service["User"] == "glueinfo" and service["NoNewPrivileges"] == "yes" and service["CapabilityBoundingSet"] == ""
    if command == "run":
        assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
        assert service["StateDirectory"] == "glueinfo"
    analyze = shutil.which("systemd-analyze")
    if analyze:  # systemd's own parser, with ExecStart pointing at the glueinfo under test
        copy = tmp_path / unit
        copy.write_text(path.read_text().replace("/opt/glueinfo/bin/glueinfo", sys.executable))
        proc = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True)
        assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
