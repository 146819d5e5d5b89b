"""The outbox (glueinfo.publish.outbox): what the amqp output promises a broker's consumers rests on it.

A document leaves only when confirmed; the newest per routing key is what waits, never a
backlog; a confirm that comes after a newer document was put does not remove that one; what a
killed process left is there for the next one; a file that is no outbox document is set aside,
never sent.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading

import pytest

from glueinfo.publish.outbox import Outbox, new_header

KEY = "glue21.json.EXAMPLE-SITE"


def put(box: Outbox, body: bytes, key: str = KEY, created: float = 1_790_000_000.0) -> str:
    header = new_header(key, "application/json", "glue21.json", "EXAMPLE-SITE", [body], created)
    box.put(header, [body])
    return header.id


def test_a_newer_document_replaces_the_one_waiting_for_its_key_and_other_keys_keep_theirs(tmp_path):
    box = Outbox(str(tmp_path / "outbox"))
    put(box, b'{"v": 1}')
    newest = put(box, b'{"v": 2}')
    put(box, b"<Data/>", key="node.xml.EXAMPLE-SITE")
    assert sorted(box.waiting()) == ["glue21.json.EXAMPLE-SITE", "node.xml.EXAMPLE-SITE"]
    assert box.depth() == 2
    message = box.read(KEY)
    assert message is not None and message.body == b'{"v": 2}' and message.header.id == newest
    # On disk: one file per key, a JSON header line then the document's bytes as they were.
    with open(tmp_path / "outbox" / f"{KEY}.msg", "rb") as handle:
        header = json.loads(handle.readline())
        assert handle.read() == b'{"v": 2}'
    assert header["routing_key"] == KEY and header["size"] == 8


def test_a_confirm_drops_the_document_it_confirms_and_never_a_newer_one(tmp_path):
    box = Outbox(str(tmp_path))
    first = put(box, b"one")
    second = put(box, b"two")  # put while `first` was on its way to the broker
    assert box.confirmed(KEY, first, at=1_790_000_100.0) is False
    assert box.read(KEY).body == b"two"
    assert box.confirmed(KEY, second, at=1_790_000_100.0) is True
    assert box.waiting() == [] and box.read(KEY) is None
    header, waiting, at = box.last(KEY)
    assert (header.id, waiting, at) == (second, False, 1_790_000_100.0)


def test_the_last_confirmed_document_can_be_sent_again_unless_another_waits(tmp_path):
    box = Outbox(str(tmp_path))
    assert box.resend(KEY) is False  # nothing ever confirmed
    sent = put(box, b"doc")
    box.confirmed(KEY, sent, at=100.0)
    assert box.resend(KEY) is True
    assert box.read(KEY).header.id == sent
    put(box, b"newer")
    assert box.resend(KEY) is False


def test_what_a_killed_process_left_is_read_by_the_next_and_its_temporary_files_removed(tmp_path):
    directory = tmp_path / "outbox"
    script = (f"import os, signal; from glueinfo.publish.outbox import Outbox, new_header\n"
              f"box = Outbox({str(directory)!r})\n"
              f"h = new_header({KEY!r}, 'application/json', 'glue21.json', 'EXAMPLE-SITE', [b'kept'], 1.0)\n"
              f"box.put(h, [b'kept'])\n"
              f"print(h.id, flush=True)\n"
              f"open({str(directory / ('.' + KEY + '.msg.abcd1234.tmp'))!r}, 'wb').write(b'half a docu')\n"
              f"open({str(directory / '.node.xml.EXAMPLE-SITE.msg.efgh5678.tmp')!r}, 'wb').write(b'a first one')\n"
              f"os.kill(os.getpid(), signal.SIGKILL)\n")
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr
    box = Outbox(str(directory))
    message = box.read(KEY)
    assert message is not None and message.body == b"kept" and message.header.id == child.stdout.strip()
    assert sorted(os.listdir(directory)) == [".lock", f"{KEY}.msg"]


def test_a_file_that_is_no_outbox_document_is_set_aside_with_a_warning_and_never_sent(tmp_path, caplog):
    box = Outbox(str(tmp_path))
    (tmp_path / f"{KEY}.msg").write_bytes(b"edited by hand\n{}")
    caplog.set_level(logging.WARNING)
    assert box.read(KEY) is None
    assert box.waiting() == []
    assert (tmp_path / f"{KEY}.bad").exists()
    assert "not an outbox document" in caplog.text and f"{KEY}.bad" in caplog.text
    # A document cut short (its header says more bytes than follow) is set aside too.
    put(box, b"whole")
    path = tmp_path / f"{KEY}.msg"
    path.write_bytes(path.read_bytes()[:-2])
    assert box.read(KEY) is None and "holds 3 bytes, its header says 5" in caplog.text


def test_two_outboxes_on_one_directory_never_lose_each_others_documents(tmp_path):
    # A reload's old output confirming while the new one puts: every put either waits or was confirmed.
    old, new = Outbox(str(tmp_path)), Outbox(str(tmp_path))
    ids = [put(new, b"0")]
    done = threading.Event()

    def confirm_all() -> None:
        while not done.is_set():
            message = old.read(KEY)
            if message is not None:
                old.confirmed(KEY, message.header.id, at=1.0)

    confirmer = threading.Thread(target=confirm_all)
    confirmer.start()
    try:
        for n in range(1, 200):
            ids.append(put(new, str(n).encode()))
    finally:
        done.set()
        confirmer.join()
    header, waiting, _at = new.last(KEY)
    assert header.id == ids[-1]  # the newest is waiting or is the one confirmed; never lost to an older confirm
    if waiting:
        assert new.read(KEY).body == b"199"


def test_a_key_that_could_name_another_file_is_refused(tmp_path):
    box = Outbox(str(tmp_path))
    for key in ("../escape", ".hidden", "a/b", ""):
        with pytest.raises(ValueError, match="letters, digits"):
            box.last(key)
