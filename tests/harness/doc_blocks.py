"""The documented command blocks the quick-start tests run, read from the docs themselves.

A block an admin is meant to run is marked in its Markdown file by an HTML comment (invisible
once rendered) on the line right before its fenced code block::

    <!-- quickstart: NAME [file=PATH | append=PATH | cron] -->
    ```sh
    ...
    ```

A plain marker is a shell block, run with bash from the source tree, stopping at the first
failing step (``set -e -o pipefail``).  ``file=PATH``: the block is the content of that file,
written as an editor would save it (its directory must exist); ``append=PATH``: added at the
end of it; ``cron``: a crontab line, whose command is run as cron runs it (``/bin/sh -c`` with
only ``PATH=/usr/bin:/bin``, ``SHELL``, ``HOME`` and ``LOGNAME``).  In the docs,
``/path/to/glueinfo`` stands for the source tree.

So the docs stay the single source: the tests name blocks, never copy them.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass, field

from paths import REPO
from sandbox import Sandbox

DOCS = ("README.md", "docs/install.md", "docs/admin-guide.md")
MARKER = re.compile(r"<!-- quickstart: (?P<name>[\w-]+)(?P<options>(?: [^ >]+)*) -->\n")
FENCE = re.compile(r"```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$", re.S | re.M)
CRON_ENV = {"PATH": "/usr/bin:/bin", "SHELL": "/bin/sh", "HOME": "/root", "LOGNAME": "root"}
# While BDII's first update cycle runs, a broker's query finds nothing yet: an admin
# looks again.  Inside a block, ldapsearch is retried (up to a minute) until it answers
# with entries; its last answer and status are the step's.
LOOK_AGAIN = r'''
ldapsearch() {
    { local trace=$-; set +x; } 2>/dev/null  # the answer may be 40,000 entries: not traced
    local tries=0 status out=/tmp/.quickstart-ldapsearch.$$ err=/tmp/.quickstart-ldapsearch-err.$$
    while :; do
        command ldapsearch "$@" > $out 2> $err && status=0 || status=$?
        if { [ $status = 0 ] && grep -q '^dn:' $out; } || [ $tries -ge 60 ]; then break; fi
        tries=$((tries + 1)); sleep 1
    done
    cat $out; cat $err >&2; rm -f $out $err
    case $trace in *x*) set -x;; esac
    return $status
}
'''


@dataclass(frozen=True)
class Block:
    doc: str
    name: str
    line: int  # of the marker, 1-based
    lang: str
    body: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line} ({self.name})"


def blocks(doc: str) -> dict[str, Block]:
    """The marked blocks of one document, by name; a marker not followed by a fenced
    block, or a name used twice, is an error."""
    text = (REPO / doc).read_text()
    found: dict[str, Block] = {}
    for marker in MARKER.finditer(text):
        fence = FENCE.match(text, marker.end())
        line = text.count("\n", 0, marker.start()) + 1
        if fence is None:
            raise ValueError(f"{doc}:{line}: quickstart marker {marker['name']!r} not followed by a fenced block")
        if marker["name"] in found:
            raise ValueError(f"{doc}:{line}: quickstart block {marker['name']!r} marked twice")
        options = {}
        for option in marker["options"].split():
            key, _, value = option.partition("=")
            options[key] = value
        found[marker["name"]] = Block(doc, marker["name"], line, fence["lang"], fence["body"], options)
    return found


def all_blocks() -> dict[tuple[str, str], Block]:
    return {(doc, name): block for doc in DOCS for name, block in blocks(doc).items()}


@dataclass
class Step:
    block: Block
    returncode: int
    stdout: str
    stderr: str

    def report(self, limit: int = 6000) -> str:
        return (f"{self.block.where} exited {self.returncode}\n--- block ---\n{self.block.body}"
                f"--- stdout ---\n{self.stdout[-limit:]}\n--- stderr (set -x trace) ---\n{self.stderr[-limit:]}")


def run_block(sandbox: Sandbox, block: Block, network: str = "sandbox", env: dict[str, str] | None = None,
              timeout: float = 300) -> Step:
    """Run one marked block inside ``sandbox`` as its marker says (see the module's docstring)."""
    body = block.body.replace("/path/to/glueinfo", str(REPO))
    if "file" in block.options or "append" in block.options:
        path = block.options.get("file") or block.options["append"]
        redirect = ">" if "file" in block.options else ">>"
        done = sandbox.run(["/bin/sh", "-c", f'cat {redirect} "$0"', path], input=body, timeout=timeout)
    elif "cron" in block.options:
        lines = [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if len(lines) != 1 or len(lines[0].split(None, 5)) != 6:
            raise ValueError(f"{block.where}: a cron block is one crontab line (five time fields, then the command)")
        command = lines[0].split(None, 5)[5]
        cron = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**CRON_ENV, **(env or {})}.items())
        done = sandbox.run(f"cd /root && exec env -i {cron} /bin/sh -c {shlex.quote(command)}", timeout=timeout)
    else:
        script = "set -e -o pipefail\n" + LOOK_AGAIN + "set -x\n" + textwrap.dedent(body)
        done = sandbox.run(["/bin/bash", "-c", script], cwd=str(REPO), network=network, env=env, timeout=timeout)
    return Step(block, done.returncode, done.stdout, done.stderr)
