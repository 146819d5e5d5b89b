"""systemctl and journalctl for a machine without systemd as PID 1 (tests/harness/sandbox.py).

Installed inside a sandbox as /usr/bin/systemctl and /usr/bin/journalctl, it does what
systemd would do for the commands the docs use, reading the same unit files:

  systemctl daemon-reload | enable [--now] U... | disable [--now] U... | start U... |
            stop U... | restart U... | try-restart U... | reload U... | is-active U... | status U...
  journalctl -u U [-n N] [--no-pager]

Units are read from /etc/systemd/system, /run/systemd/system, /lib/systemd/system and
/usr/lib/systemd/system with their drop-ins (U.d/*.conf); Requires=, Wants= and BindsTo=
are started first; PartOf= units are stopped and restarted with the unit they are part of.
A service is started with its Environment= and EnvironmentFile= (the files override
Environment=, as in systemd), User=/Group= (HOME, USER, LOGNAME, SHELL set as systemd sets
them), UMask=, WorkingDirectory=, StateDirectory=/RuntimeDirectory= made and owned by the
user (the whole tree, when its owner differs); ExecStart's $$, ${VAR} and $VAR as systemd expands them.  Type=simple/exec: the
daemon runs in the foreground of a process of its own, its output going to the unit's
journal (/run/systemd-standin/U.log, what journalctl prints); the start fails when it exits
within a second (systemd would report that in `systemctl status` instead).
Type=forking: ExecStart must exit 0 and PIDFile= appear.  Type=oneshot: each ExecStart
runs to completion.  The sandbox's PID namespace ends every daemon with the test.

Not systemd: no cgroups (stop signals the main process's process group), no timers or
sockets, no sandboxing directives (ProtectSystem=, NoNewPrivileges=, ... are ignored).
"""

import glob
import grp
import os
import pwd
import re
import shlex
import signal
import subprocess
import sys
import time

UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system")
STATE = "/run/systemd-standin"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LIST_KEYS = {"Environment", "EnvironmentFile", "ExecStart", "ExecStartPre", "ExecStartPost", "ExecStop",
             "ExecStopPost", "ExecReload", "Requires", "Wants", "BindsTo", "PartOf", "After", "Before",
             "StateDirectory", "RuntimeDirectory", "SupplementaryGroups", "WantedBy"}


class Failed(Exception):
    pass


def unit_name(name):
    return name if "." in name else name + ".service"


def read_unit_file(path, unit):
    section = None
    lines = open(path).read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        while line.endswith("\\") and i < len(lines):  # a continued line: the backslash becomes a space
            line = line[:-1] + " " + lines[i].strip()
            i += 1
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            unit.setdefault(section, {})
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        values = unit.setdefault(section, {})
        if key in LIST_KEYS:
            values[key] = [] if value == "" else values.get(key, []) + [value]
        else:
            values[key] = value


def load(name):
    name = unit_name(name)
    main = next((os.path.join(d, name) for d in UNIT_DIRS if os.path.isfile(os.path.join(d, name))), None)
    if main is None:
        raise Failed(f"Unit {name} not found.")
    unit = {}
    read_unit_file(main, unit)
    dropins = {}
    for d in reversed(UNIT_DIRS):  # the same file name in /etc overrides /lib's
        for path in glob.glob(os.path.join(d, name + ".d", "*.conf")):
            dropins[os.path.basename(path)] = path
    for base in sorted(dropins):
        read_unit_file(dropins[base], unit)
    unit["name"] = name
    return unit


def service(unit, key, default=None):
    return unit.get("Service", {}).get(key, default)


def words(unit, key):
    return [w for value in unit.get("Unit", {}).get(key, []) for w in value.split()]


def env_file(path):
    values = {}
    for line in open(path).read().splitlines():
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def environment(unit):
    env = {"PATH": DEFAULT_PATH, "LANG": os.environ.get("LANG", "C.UTF-8")}
    user = service(unit, "User")
    if user:
        entry = pwd.getpwnam(user)
        env.update(HOME=entry.pw_dir, USER=user, LOGNAME=user, SHELL=entry.pw_shell)
    for value in service(unit, "Environment", []):
        for assignment in shlex.split(value):
            key, _, val = assignment.partition("=")
            env[key] = val
    for value in service(unit, "EnvironmentFile", []):
        optional = value.startswith("-")
        path = value.lstrip("-")
        if os.path.exists(path):
            env.update(env_file(path))
        elif not optional:
            raise Failed(f"{unit['name']}: EnvironmentFile {path} not found")
    return env


def expand(command, env, mainpid=None):
    """systemd's command line: prefixes, quoting, $$ -> $, ${VAR} in place, $VAR as words."""
    ignore = False
    while command[:1] in ("-", "@", "+", "!", ":"):
        ignore |= command[0] == "-"
        command = command[1:]
    values = dict(env)
    if mainpid:
        values["MAINPID"] = str(mainpid)
    argv = []
    for word in shlex.split(command):
        word = word.replace("$$", "\0")
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:
            argv += values.get(whole.group(1), "").split()
            continue
        word = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: values.get(m.group(1), ""), word)
        argv.append(word.replace("\0", "$"))
    return argv, ignore


def make_directories(unit, user, group):
    for key, base, mode_key in (("StateDirectory", "/var/lib", "StateDirectoryMode"),
                                ("RuntimeDirectory", "/run", "RuntimeDirectoryMode")):
        mode = int(service(unit, mode_key, "0755"), 8)
        for value in service(unit, key, []):
            for name in value.split():
                path = os.path.join(base, name)
                os.makedirs(path, exist_ok=True)
                os.chmod(path, mode)
                if user:
                    uid, gid = pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid
                    if (os.stat(path).st_uid, os.stat(path).st_gid) != (uid, gid):
                        # systemd then gives the whole tree to the service's user
                        for top, dirs, files in os.walk(path):
                            for entry in [top] + [os.path.join(top, n) for n in dirs + files]:
                                os.lchown(entry, uid, gid)


def credentials(unit):
    user = service(unit, "User")
    group = service(unit, "Group") or (grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name if user else None)
    return user, group


def preexec(unit, user, group):
    umask = service(unit, "UMask")

    def setup():
        os.setsid()
        if umask:
            os.umask(int(umask, 8))
        if user:
            entry = pwd.getpwnam(user)
            gid = grp.getgrnam(group).gr_gid
            os.setgroups([gid])
            os.setgid(gid)
            os.setuid(entry.pw_uid)
    return setup


def log_path(name):
    return os.path.join(STATE, name + ".log")


def pid_path(name):
    return os.path.join(STATE, name + ".pid")


def main_pid(name):
    try:
        pid = int(open(pid_path(name)).read())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    try:  # a zombie (an orphan nobody reaped yet) is not running
        if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
            return None
    except OSError:
        return None
    return pid


def run_command(unit, command, env, user, group, mainpid=None, stdout=None):
    argv, ignore = expand(command, env, mainpid)
    log = stdout or open(log_path(unit["name"]), "ab")
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                          cwd=service(unit, "WorkingDirectory", "/"), preexec_fn=preexec(unit, user, group))
    if done.returncode and not ignore:
        raise Failed(f"{unit['name']}: {argv[0]} exited with status {done.returncode} "
                     f"(journalctl -u {unit['name']}:\n{tail(unit['name'])})")


def tail(name, lines=20):
    try:
        return "\n".join(open(log_path(name), errors="replace").read().splitlines()[-lines:])
    except OSError:
        return ""


def start(name, started=None):
    started = set() if started is None else started
    unit = load(name)
    name = unit["name"]
    if name in started or main_pid(name):
        return
    started.add(name)
    for dependency in words(unit, "Requires") + words(unit, "BindsTo"):
        start(dependency, started)
    for dependency in words(unit, "Wants"):
        try:
            start(dependency, started)
        except Failed:
            pass
    os.makedirs(STATE, exist_ok=True)
    env = environment(unit)
    user, group = credentials(unit)
    make_directories(unit, user, group)
    kind = service(unit, "Type", "simple")
    for command in service(unit, "ExecStartPre", []):
        run_command(unit, command, env, user, group)
    commands = service(unit, "ExecStart", [])
    if not commands:
        raise Failed(f"{name} has no ExecStart=")
    log = open(log_path(name), "ab")
    if kind in ("simple", "exec", "notify"):
        argv, _ = expand(commands[0], env)
        process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   cwd=service(unit, "WorkingDirectory", "/"), preexec_fn=preexec(unit, user, group))
        with open(pid_path(name), "w") as out:
            out.write(str(process.pid))
        try:
            code = process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:
            raise Failed(f"Job for {name} failed: {argv[0]} exited with status {code} at once.\n{tail(name)}")
    elif kind == "forking":
        run_command(unit, commands[0], env, user, group, stdout=log)
        pidfile = service(unit, "PIDFile")
        deadline = time.monotonic() + 30
        while pidfile and not os.path.exists(pidfile) and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            pid = int(open(pidfile).read().split()[0])
        except (OSError, ValueError, IndexError, TypeError):
            raise Failed(f"Job for {name} failed: no PID in PIDFile {pidfile}\n{tail(name)}") from None
        with open(pid_path(name), "w") as out:
            out.write(str(pid))
    elif kind == "oneshot":
        for command in commands:
            run_command(unit, command, env, user, group, stdout=log)
    else:
        raise Failed(f"{name}: Type={kind} is not supported by this stand-in")
    for command in service(unit, "ExecStartPost", []):
        run_command(unit, command, env, user, group)


def part_of(name):
    """The loaded units that are PartOf= or BindsTo= ``name`` (stopped and restarted with it)."""
    found = []
    for d in UNIT_DIRS:
        for path in glob.glob(os.path.join(d, "*.service")):
            other = os.path.basename(path)
            if other == name or other in found:
                continue
            try:
                unit = load(other)
            except Failed:
                continue
            if name in words(unit, "PartOf") + words(unit, "BindsTo"):
                found.append(other)
    return found


def stop(name, stopping=None):
    stopping = set() if stopping is None else stopping
    unit = load(name)
    name = unit["name"]
    if name in stopping:
        return
    stopping.add(name)
    pid = main_pid(name)
    env = environment(unit)
    user, group = credentials(unit)
    if pid:
        for command in service(unit, "ExecStop", []):
            run_command(unit, command, env, user, group, mainpid=pid)
        for target in (lambda s: os.killpg(pid, s), lambda s: os.kill(pid, s)):
            try:
                target(signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + float(re.sub(r"[^0-9.]", "", service(unit, "TimeoutStopSec", "20")) or 20)
        while main_pid(name) and time.monotonic() < deadline:
            time.sleep(0.1)
        if main_pid(name):
            os.kill(pid, signal.SIGKILL)
        for command in service(unit, "ExecStopPost", []):
            run_command(unit, command, env, user, group)
    try:
        os.remove(pid_path(name))
    except FileNotFoundError:
        pass
    for other in part_of(name):
        stop(other, stopping)


def reload(name):
    unit = load(name)
    pid = main_pid(unit["name"])
    if not pid:
        raise Failed(f"{unit['name']} is not active, cannot reload.")
    user, group = credentials(unit)
    commands = service(unit, "ExecReload", [])
    if not commands:
        raise Failed(f"Failed to reload {unit['name']}: Job type reload is not applicable for unit {unit['name']}.")
    for command in commands:
        run_command(unit, command, environment(unit), user, group, mainpid=pid)


def systemctl(args):
    args = [a for a in args if a not in ("--no-pager", "-q", "--quiet", "--no-block")]
    now = "--now" in args
    args = [a for a in args if a != "--now"]
    if not args:
        raise Failed("systemctl stand-in: no command")
    verb, names = args[0], [unit_name(n) for n in args[1:]]
    if verb == "daemon-reload":
        return 0
    if verb in ("enable", "disable") and not now:
        for name in names:
            load(name)
        return 0
    if verb in ("start", "enable"):
        for name in names:
            start(name)
        return 0
    if verb in ("stop", "disable"):
        for name in names:
            stop(name)
        return 0
    if verb in ("restart", "try-restart", "reload-or-restart"):
        for name in names:
            if verb == "try-restart" and not main_pid(name):
                continue
            stop(name)
            start(name)
        return 0
    if verb == "reload":
        for name in names:
            reload(name)
        return 0
    if verb == "is-active":
        active = [bool(main_pid(name)) for name in names]
        for flag in active:
            print("active" if flag else "inactive")
        return 0 if all(active) else 3
    if verb == "status":
        code = 0
        for name in names:
            pid = main_pid(name)
            print(f"* {name}\n   Active: {'active (running)' if pid else 'inactive (dead)'}"
                  + (f"\n Main PID: {pid}" if pid else "") + "\n" + tail(name, 10))
            code = code or (0 if pid else 3)
        return code
    raise Failed(f"systemctl stand-in: '{verb}' is not supported")


def journalctl(args):
    units, lines, i = [], None, 0
    while i < len(args):
        if args[i] in ("-u", "--unit"):
            units.append(unit_name(args[i + 1]))
            i += 2
        elif args[i].startswith("--unit="):
            units.append(unit_name(args[i].split("=", 1)[1]))
            i += 1
        elif args[i] in ("-n", "--lines"):
            lines = int(args[i + 1])
            i += 2
        elif args[i] in ("--no-pager", "-q", "-e", "-x", "-b"):
            i += 1
        else:
            raise Failed(f"journalctl stand-in: '{args[i]}' is not supported")
    for name in units:
        try:
            text = open(log_path(name), errors="replace").read().splitlines()
        except OSError:
            text = []
        if not text:
            print("-- No entries --")
        for line in text[-lines:] if lines else text:
            print(line)
    return 0


def main(argv):
    tool = os.path.basename(argv[0])
    try:
        return journalctl(argv[1:]) if tool == "journalctl" else systemctl(argv[1:])
    except Failed as exc:
        print(exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
