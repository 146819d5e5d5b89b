"""A real RabbitMQ broker for the tests: Debian 12's rabbitmq-server 3.10, private, without systemd.

Everything lives in one directory of the test's (its node's mnesia and
log directories, config, enabled plugins, feature flags, the Erlang
cookie's HOME), owned by user ``rabbitmq`` when the tests run as root: the
packaged script drops to that user and the broker cannot write anything
else.  The node name is private (``glueinfo-test-PID-N@localhost``), and so
are its ports: AMQP on 127.0.0.1, the Erlang distribution port, and an epmd
of its own (``ERL_EPMD_PORT``) that the harness starts in the foreground
before the broker, so it is stopped by its PID like the broker and never
left behind.  ``loopback_users = none`` lets ``guest`` in from loopback.

With ``tls=True`` it also listens for AMQP over TLS (``tls_port``) with
a certificate of a private CA (:func:`make_certificates`, by the
``openssl`` tool), demands a client certificate of that CA, and lets a
client log in as its certificate's common name (SASL EXTERNAL, the
``rabbitmq_auth_mechanism_ssl`` plugin); :meth:`add_user` makes such users.

Start to first connection takes 4 to 7 s on the CI machine, so a test
module starts one broker (see tests/integration/test_amqp_push.py) and
stops and starts it again (same directory, same durable exchanges and
queues, same persistent messages) to play a broker that goes away.
See NOTES.md, "RabbitMQ privately".
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

from servers import ServerError, _stop, _tail, free_port

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # the script itself: the wrapper in /usr/sbin runs it under su
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
EPMD = "/usr/bin/epmd"
OPENSSL = "/usr/bin/openssl"
USER = "rabbitmq"
_names = itertools.count()


def missing_rabbitmq() -> list[str]:
    """What is missing to run a broker (empty when everything is there)."""
    missing = [f"{path} (Debian package rabbitmq-server)" for path in (RABBITMQ_SERVER, RABBITMQCTL, EPMD)
               if not os.access(path, os.X_OK)]
    if not os.access(OPENSSL, os.X_OK):
        missing.append(f"{OPENSSL} (Debian package openssl)")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        missing.append(f"user {USER} (Debian package rabbitmq-server)")
    try:
        import pika  # noqa: F401
    except ImportError:
        missing.append("Python package pika (glueinfo's test extra)")
    return missing


def make_certificates(directory: Path, client_cn: str) -> dict[str, Path]:
    """A private CA (``ca.pem``), a server certificate for 127.0.0.1 and a client certificate
    whose common name is ``client_cn`` (each ``NAME.pem`` with ``NAME.key``), EC P-256, valid
    two days; the paths by name."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run([OPENSSL, *args], cwd=directory, check=True, capture_output=True, timeout=60)

    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=glueinfo test CA")
    for name, cn, usage in (("server", "127.0.0.1", "serverAuth"), ("client", client_cn, "clientAuth")):
        (directory / f"{name}.ext").write_text(f"subjectAltName=IP:127.0.0.1\nextendedKeyUsage={usage}\n")
        openssl("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")
    return {name: directory / name for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


class RabbitMQ:
    """A private broker in ``workdir`` (see the module docstring); ``user``/``password`` guest."""

    user = "guest"
    password = "guest"

    def __init__(self, workdir: os.PathLike[str] | str, tls: bool = False) -> None:
        self.workdir = Path(workdir)
        self.tls = tls
        self.tls_port = free_port() if tls else None
        self.certificates: dict[str, Path] = {}
        self.node = f"glueinfo-test-{os.getpid()}-{next(_names)}@localhost"
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.epmd: Optional[subprocess.Popen[bytes]] = None
        self._as_rabbitmq = os.geteuid() == 0
        self._prepared = False

    @property
    def url(self) -> str:
        return f"amqp://{self.user}@127.0.0.1:{self.port}/"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.out"

    def _env(self) -> dict[str, str]:
        d = self.workdir
        return {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(d / "home"), "LANG": "C.UTF-8",
            "RABBITMQ_NODENAME": self.node, "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port), "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(d / "mnesia"), "RABBITMQ_LOG_BASE": str(d / "log"),
            "RABBITMQ_PID_FILE": str(d / "rabbit.pid"), "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq.conf"), "RABBITMQ_FEATURE_FLAGS_FILE": str(d / "feature_flags"),
            "RABBITMQ_CONF_ENV_FILE": str(d / "rabbitmq-env.conf"),  # not /etc/rabbitmq's
            "ERL_EPMD_PORT": str(self.epmd_port),
        }

    def _user(self) -> dict[str, Any]:
        return {"user": USER, "group": USER, "extra_groups": []} if self._as_rabbitmq else {}

    def _prepare(self) -> None:
        d = self.workdir
        for sub in ("mnesia", "log", "home"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        conf = f"loopback_users = none\nlisteners.tcp.default = 127.0.0.1:{self.port}\n"
        plugins = "[]."
        if self.tls:
            self.certificates = make_certificates(d / "tls", "example-site")
            files = self.certificates
            conf += (f"listeners.ssl.default = 127.0.0.1:{self.tls_port}\n"
                     f"ssl_options.cacertfile = {files['ca.pem']}\nssl_options.certfile = {files['server.pem']}\n"
                     f"ssl_options.keyfile = {files['server.key']}\nssl_options.verify = verify_peer\n"
                     "ssl_options.fail_if_no_peer_cert = true\n"
                     "auth_mechanisms.1 = PLAIN\nauth_mechanisms.2 = AMQPLAIN\nauth_mechanisms.3 = EXTERNAL\n"
                     "ssl_cert_login_from = common_name\n")
            plugins = "[rabbitmq_auth_mechanism_ssl]."
        (d / "rabbitmq.conf").write_text(conf)
        (d / "enabled_plugins").write_text(plugins + "\n")
        (d / "rabbitmq-env.conf").write_text("")
        if self._as_rabbitmq:  # the broker runs as rabbitmq and writes only here
            account = pwd.getpwnam(USER)
            for root, dirs, files in os.walk(d):
                for name in [*dirs, *files]:
                    os.chown(os.path.join(root, name), account.pw_uid, account.pw_gid)
            os.chown(d, account.pw_uid, account.pw_gid)
        self._prepared = True

    def start(self, timeout: float = 60.0) -> RabbitMQ:
        """Start epmd and the broker; return once it accepts AMQP connections.  ServerError."""
        if not self._prepared:
            self._prepare()
        env = self._env()
        with open(self.workdir / "epmd.out", "ab") as log:
            self.epmd = subprocess.Popen([EPMD, "-port", str(self.epmd_port), "-address", "127.0.0.1"], env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, **self._user())
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([RABBITMQ_SERVER], env=env, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=log, **self._user())
        try:
            self._wait_ready(timeout)
        except ServerError:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        import pika

        deadline = time.monotonic() + timeout
        error: Exception = ServerError("not started")
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = self.process.returncode if self.process is not None else None
                raise ServerError(f"rabbitmq-server exited with status {code}:\n{_tail(self.log_path)}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                connection = pika.BlockingConnection(self.parameters())
                connection.close()
                return
            except Exception as exc:  # not listening yet, or listening but not yet booted
                error = exc
                time.sleep(0.1)
        raise ServerError(f"rabbitmq-server did not take connections on 127.0.0.1:{self.port} within {timeout:g} s "
                          f"({error!r}):\n{_tail(self.log_path)}")

    def parameters(self) -> Any:
        import pika

        return pika.ConnectionParameters("127.0.0.1", self.port, credentials=pika.PlainCredentials(self.user, self.password),
                                         connection_attempts=1, socket_timeout=5)

    def ctl(self, *args: str) -> str:
        """``rabbitmqctl -n NODE ARGS`` as the broker's user, with its cookie; its output.  ServerError."""
        done = subprocess.run([RABBITMQCTL, "-n", self.node, *args], env=self._env(), cwd=self.workdir,
                              capture_output=True, text=True, timeout=120, **self._user())
        if done.returncode != 0:
            raise ServerError(f"rabbitmqctl {' '.join(args)}: {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def add_user(self, name: str, configure: str, write: str, read: str = "^$") -> None:
        """A user without a password (it logs in by its certificate) with these permissions on vhost /."""
        self.ctl("add_user", name, os.urandom(16).hex())
        self.ctl("clear_password", name)
        self.ctl("set_permissions", "-p", "/", name, configure, write, read)

    def connect(self) -> Any:
        """A pika BlockingConnection to the broker, as guest."""
        import pika

        return pika.BlockingConnection(self.parameters())

    def stop(self) -> None:
        """Stop the broker (SIGTERM to the script, which stops the node), then its epmd, by PID."""
        if self.process is not None and self.process.poll() is None:
            try:
                self.thaw()  # a frozen node would never hear the script's SIGTERM
            except (OSError, ValueError):
                pass
        _stop(self.process, timeout=60.0)
        self.process = None
        _stop(self.epmd)
        self.epmd = None

    def _node_pid(self) -> int:
        """The Erlang VM's PID, as the node wrote it (the script we started is its parent)."""
        return int((self.workdir / "rabbit.pid").read_text().split()[0])

    def freeze(self) -> None:
        """SIGSTOP the broker: connections are still accepted by the kernel, and then nothing answers."""
        os.kill(self._node_pid(), signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self._node_pid(), signal.SIGCONT)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> RabbitMQ:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_text(self) -> str:
        return "\n".join(_tail(path, 60) for path in [self.log_path, *sorted((self.workdir / "log").glob("*.log"))])
