"""A throwaway copy of this machine, to run documented commands as root exactly as written.

``Sandbox(workdir).start()`` makes new mount, network and PID namespaces (util-linux
``unshare``) whose root is an overlay of this machine's ``/``: every file is there as on
the machine, and every write (``/etc/glueinfo``, ``/opt/glueinfo``, ``/var/lib/bdii``,
``/etc/passwd`` by ``systemd-sysusers``, the source tree's ``build/``) goes to a tmpfs that
disappears with the sandbox.  It has its own ``/proc``, ``/run`` and ``/tmp``, and only a
loopback network, so the documented ports (BDII's 2170, the agent's 7170) are its own and
never clash with the machine's or another test's.  ``run(..., network="host")`` runs one
command on the machine's network instead (``pip install`` reaching the package index).

No systemd runs as PID 1 here: ``systemctl`` and ``journalctl`` are replaced inside the
sandbox by ``systemd_standin.py``, which starts a unit's ``ExecStart`` itself as systemd
would (its User=, Environment=, EnvironmentFile=, drop-ins, StateDirectory=, Type=) with
the daemon in the foreground of a process of its own.  ``stop()`` ends the sandbox's PID
namespace, which kills every process started in it: no daemon survives a test.

Needs root, unshare and nsenter (util-linux) and overlayfs; ``missing_sandbox_tools()``
says what is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional, Union

HARNESS = Path(__file__).resolve().parent
# A root login shell's PATH on Debian, and systemd's default for services.
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# pid 1 of the sandbox: builds the root, reports its PID as the machine sees it, then reaps
# orphans until its stdin closes (then the kernel kills everything left in the namespace).
INIT = r'''
import os, subprocess, sys, threading, time
layers, root, repo, standin = sys.argv[1:5]
host_pid = os.readlink("/proc/self")  # the machine's /proc is still mounted: its PID there
def run(*cmd):
    subprocess.run(cmd, check=True)
run("mount", "--make-rprivate", "/")
os.makedirs(layers, exist_ok=True)
run("mount", "-t", "tmpfs", "-o", "mode=0755", "sandbox", layers)
def overlay(lower, target, name):
    for d in ("upper", "work"):
        os.makedirs(f"{layers}/{name}-{d}")
    os.makedirs(target, exist_ok=True)
    run("mount", "-t", "overlay", "overlay", "-o",
        f"lowerdir={lower},upperdir={layers}/{name}-upper,workdir={layers}/{name}-work", target)
overlay("/", root, "root")
if os.stat(repo).st_dev != os.stat("/").st_dev:  # the source tree on a mount of its own
    overlay(repo, root + repo, "repo")
run("mount", "-t", "proc", "proc", root + "/proc")
run("mount", "--rbind", "/dev", root + "/dev")
run("mount", "-t", "sysfs", "sysfs", root + "/sys")
for d, mode in (("/run", "0755"), ("/tmp", "1777")):
    run("mount", "-t", "tmpfs", "-o", f"mode={mode}", "sandbox", root + d)
    if repo.startswith(d + "/"):  # a checkout under /tmp (CI's, say): the fresh tmpfs hid it
        overlay(repo, root + repo, "repo-in" + d.replace("/", "-"))
os.makedirs(root + "/run/lock", exist_ok=True)
os.chmod(root + "/run/lock", 0o1777)
run("ip", "link", "set", "lo", "up")
for name in ("systemctl", "journalctl"):
    for d in ("/usr/bin", "/bin"):
        path = root + d + "/" + name
        if os.path.lexists(path) and not os.path.islink(os.path.dirname(path)):
            os.remove(path)
    with open(root + "/usr/bin/" + name, "w") as out, open(standin) as src:
        out.write("#!/usr/bin/python3\n" + src.read())
    os.chmod(root + "/usr/bin/" + name, 0o755)
os.chroot(root)
os.chdir("/")
print(host_pid, flush=True)
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
while not done.is_set():
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        pid = 0
    if not pid:
        time.sleep(0.1)
'''


def missing_sandbox_tools() -> list[str]:
    """What this machine lacks for a sandbox (empty when it can make one)."""
    missing = [] if os.geteuid() == 0 else ["root"]
    missing += [tool for tool in ("unshare", "nsenter", "ip", "mount") if not shutil.which(tool)]
    if not Path("/proc/filesystems").read_text().count("overlay"):
        missing.append("overlayfs")
    return missing


class Sandbox:
    """See the module's docstring.  ``repo``: the source tree, visible at its own path."""

    def __init__(self, workdir: Union[str, os.PathLike], repo: Union[str, os.PathLike]) -> None:
        self.workdir = Path(workdir)
        self.repo = Path(repo).resolve()
        self.init: Optional[subprocess.Popen] = None
        self.pid = 0

    def start(self) -> Sandbox:
        self.workdir.mkdir(parents=True, exist_ok=True)
        script = self.workdir / "sandbox-init.py"
        script.write_text(INIT)
        self.init = subprocess.Popen(
            ["unshare", "--mount", "--net", "--pid", "--fork", "--propagation", "private", sys.executable, str(script),
             str(self.workdir / "layers"), str(self.workdir / "root"), str(self.repo), str(HARNESS / "systemd_standin.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.init.stdout is not None
        line = self.init.stdout.readline()
        if not line.strip().isdigit():
            self.init.kill()
            _, err = self.init.communicate(timeout=10)
            raise RuntimeError(f"the sandbox did not start: {err.strip() or line.strip()}")
        self.pid = int(line)
        return self

    def stop(self) -> None:
        if self.init is not None:
            try:
                assert self.init.stdin is not None
                self.init.stdin.close()
                self.init.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.init.kill()
                self.init.wait(timeout=30)
            self.init = None

    def __enter__(self) -> Sandbox:
        return self.start() if self.init is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def environment(self, extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
        """A root login's environment: Debian's PATH, HOME=/root, C.UTF-8; the machine's
        pip settings (PIP_*: its package index) and proxies, as an admin's shell has them."""
        env = {"PATH": ROOT_PATH, "HOME": "/root", "USER": "root", "LOGNAME": "root", "SHELL": "/bin/bash",
               "LANG": "C.UTF-8", "TERM": "dumb"}
        env.update({k: v for k, v in os.environ.items()
                    if k.startswith("PIP_") or k.lower() in ("http_proxy", "https_proxy", "no_proxy")})
        env.update(extra or {})
        return env

    def command(self, argv: Sequence[str], cwd: str = "/", network: str = "sandbox",
                env: Optional[Mapping[str, str]] = None) -> list[str]:
        """The machine's command line that runs ``argv`` inside (see run)."""
        if not self.pid:
            raise RuntimeError("the sandbox is not started")
        spaces = ["--mount", "--pid"] + (["--net"] if network == "sandbox" else [])
        environment = [f"{k}={v}" for k, v in self.environment(env).items()]
        # nsenter's --wd=DIR would name a directory of the machine's root: env changes directory inside.
        return ["nsenter", "--target", str(self.pid), *spaces, "--root", "--wd", "--",
                "/usr/bin/env", "-i", f"--chdir={cwd}", *environment, *argv]

    def run(self, argv: Union[str, Sequence[str]], cwd: str = "/", network: str = "sandbox",
            env: Optional[Mapping[str, str]] = None, input: Union[str, bytes, None] = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """Run ``argv`` (a string: a bash script) as root inside, from ``cwd``, on the
        sandbox's own loopback network (``network="host"``: the machine's), with
        ``environment(env)``; stdout and stderr captured (text unless ``input`` is bytes)."""
        if isinstance(argv, str):
            argv = ["/bin/bash", "-c", argv]
        text = not isinstance(input, bytes)
        return subprocess.run(self.command(argv, cwd, network, env), input=input, capture_output=True, text=text,
                              timeout=timeout)

    def write(self, path: str, data: Union[str, bytes], mode: int = 0o644) -> None:
        """Write a file inside (its directory must exist, as for an editor)."""
        payload = data.encode() if isinstance(data, str) else data
        done = self.run(["/bin/sh", "-c", f'cat > "$0" && chmod {mode:o} "$0"', path], input=payload)
        if done.returncode:
            raise RuntimeError(f"cannot write {path} in the sandbox: {done.stderr.decode(errors='replace').strip()}")

    def read(self, path: str) -> str:
        done = self.run(["/bin/cat", path])
        if done.returncode:
            raise FileNotFoundError(f"{path} in the sandbox: {done.stderr.strip()}")
        return done.stdout


def shell_script(block: str, strict: bool = True) -> str:
    """A documented block as a bash script that stops at the first failing step
    (``set -e -o pipefail``) and shows each step before it runs (``set -x``)."""
    head = "set -e -o pipefail -x\n" if strict else "set -x\n"
    return head + textwrap.dedent(block)
