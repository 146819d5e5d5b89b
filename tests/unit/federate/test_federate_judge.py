"""The federation view's judgement of each message, its tree and its memory (glueinfo/federate/).

The documents are what `glueinfo ldif` and `glueinfo glue2-json` print for a small site (made once
per module with the real commands); the messages carry what glueinfo's amqp output sends.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from paths import HOSTS, REPO

from glueinfo.core.ldif import parse_ldif
from glueinfo.federate.receive import Limits, Received, Refusal, judge
from glueinfo.federate.store import SiteStore
from glueinfo.federate.tree import relocate, union_json
from glueinfo.federate.trust import Senders, TrustError, parse_senders
from glueinfo.federate.view import Ages, Federation


class Clock:
    def __init__(self, now: float = 1_790_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def site_documents(tmp_path_factory) -> dict[str, bytes]:
    """SITE-A's LDIF (both trees, resource form) and GLUE 2 JSON, as its commands print them."""
    tmp = tmp_path_factory.mktemp("site")
    config = tmp / "glueinfo.conf"
    config.write_text(f"[glueinfo]\nhost_root = {HOSTS / 'xeon-gold-2s-ht'}\n[site]\nid = SITE-A\nname = Site A\n"
                      "[ce:atlas]\nlrms = fork\nqueue = atlas\nhost = ce.site-a.example.org\nport = 9619\n"
                      f"implementation_name = HTCondorCE\naccess = VO:atlas\n[run]\nstate_dir = {tmp / 'state'}\n")
    out = {}
    for command, name in (("ldif", "ldif"), ("glue2-json", "json")):
        proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", command, "--config", str(config)], capture_output=True,
                              cwd=REPO, env={**os.environ, "GLUEINFO_CLOCK": "1790000000"}, timeout=120, check=True)
        out[name] = proc.stdout
    return out


@pytest.fixture
def senders(tmp_path) -> Senders:
    path = tmp_path / "senders"
    path.write_text("# site  sender\nSITE-A alice\nSITE-B CN=ce01.site-b.example.org,O=Grid\n")
    return Senders.load(str(path))


def message(site: str = "SITE-A", user: str | None = "alice", encoding: str | None = None, timestamp: int = 1790000000):
    return types.SimpleNamespace(headers={"site_id": site, "document": "x"}, user_id=user, content_encoding=encoding,
                                 message_id="m-1", timestamp=timestamp)


def verdict(key: str, body: bytes, senders: Senders, limits: Limits = Limits(), **props) -> Received | Refusal:
    m = message(**props)
    return judge(key, m.headers, m.user_id, body, m.content_encoding, m.message_id, m.timestamp, senders, limits)


# -- the senders file ----------------------------------------------------------------------------------

def test_senders_bind_sites_to_users_and_certificate_subjects(senders):
    assert senders.may_send("alice", "SITE-A")
    assert senders.may_send("CN=ce01.site-b.example.org,O=Grid", "SITE-B")
    assert not senders.may_send("alice", "SITE-B")
    assert not senders.may_send("mallory", "SITE-A")


def test_a_senders_line_without_a_sender_names_the_file_and_line(tmp_path):
    with pytest.raises(TrustError, match=r"senders:3: 'SITE-C' has no sender"):
        parse_senders("SITE-A alice\n\nSITE-C\n", str(tmp_path / "senders"))


def test_a_changed_senders_file_is_read_again_and_a_broken_one_keeps_the_last_good(tmp_path):
    path = tmp_path / "senders"
    path.write_text("SITE-A alice\n")
    senders = Senders.load(str(path))
    path.write_text("SITE-A alice\nSITE-N newcomer\n")
    os.utime(path, (1, 1))  # a new mtime even within the same second
    assert senders.refresh() is None and senders.may_send("newcomer", "SITE-N")
    path.write_text("SITE-X\n")
    os.utime(path, (2, 2))
    assert "has no sender" in (senders.refresh() or "")
    assert senders.may_send("newcomer", "SITE-N")


# -- the judgement -----------------------------------------------------------------------------------------

def test_the_sites_own_documents_are_accepted(site_documents, senders):
    accepted = verdict("glue.ldif.SITE-A", gzip.compress(site_documents["ldif"]), senders, encoding="gzip")
    assert isinstance(accepted, Received) and accepted.site_id == "SITE-A" and accepted.sender == "alice"
    assert len(accepted.entries or []) == len(parse_ldif(site_documents["ldif"].decode()))
    assert isinstance(verdict("glue21.json.SITE-A", site_documents["json"], senders), Received)


@pytest.mark.parametrize("key, props, reason, kind", [
    ("glue21.json.SITE-A", {"user": None}, "no user_id: the sender is unknown", "untrusted"),
    ("glue21.json.SITE-A", {"user": "mallory"}, "'mallory' may not publish for site 'SITE-A'", "untrusted"),
    ("glue21.json.SITE-B", {"site": "SITE-B"}, "'alice' may not publish for site 'SITE-B'", "untrusted"),
    ("glue21.json.SITE-B", {}, "its site_id header 'SITE-A' is not the site its routing key names", "invalid"),
    ("node.xml.SITE-A", {}, "not KIND.SITE with a kind this view keeps", "invalid"),
])
def test_a_message_not_from_the_sites_bound_sender_is_refused(site_documents, senders, key, props, reason, kind):
    refused = verdict(key, site_documents["json"], senders, **props)
    assert isinstance(refused, Refusal) and reason in str(refused) and refused.kind == kind
    assert "\n" not in str(refused)


def test_a_bound_sender_cannot_slip_another_sites_entries_in(site_documents, senders):
    """SITE-A's sender sends an LDIF and a JSON naming SITE-B's domain: refused, never loaded."""
    ldif = site_documents["ldif"].replace(b"SITE-A", b"SITE-B")
    refused = verdict("glue.ldif.SITE-A", gzip.compress(ldif), senders, encoding="gzip")
    assert isinstance(refused, Refusal) and refused.kind == "untrusted"
    assert "SITE-B" in refused.reason
    document = json.loads(site_documents["json"])
    document["AdminDomain"][0]["ID"] = "SITE-B"
    refused = verdict("glue21.json.SITE-A", json.dumps(document).encode(), senders)
    assert isinstance(refused, Refusal) and "AdminDomain 'SITE-B' is another site's" in refused.reason
    foreign = b"dn: GlueCEUniqueID=x,mds-vo-name=local,o=grid\nobjectClass: GlueCE\nGlueCEUniqueID: x\n"
    refused = verdict("glue.ldif.SITE-A", foreign, senders)
    assert isinstance(refused, Refusal) and "not below this site's own tree" in refused.reason


def test_oversized_bombs_and_garbage_are_refused_with_one_line(senders):
    limits = Limits(max_message_bytes=1000, max_unpacked_bytes=10_000)
    cases = {
        "1001 bytes, over the limit of 1000": verdict("glue21.json.SITE-A", b"{" * 1001, senders, limits),
        "over 10000 bytes once unpacked": verdict("glue.ldif.SITE-A", gzip.compress(b"\n" * 100_000), senders, limits,
                                                  encoding="gzip"),
        "not gzip": verdict("glue.ldif.SITE-A", b"plain text", senders, limits, encoding="gzip"),
        "content_encoding 'br' is not gzip": verdict("glue.ldif.SITE-A", b"x", senders, limits, encoding="br"),
        "not JSON": verdict("glue21.json.SITE-A", b'{"AdminDomain": [', senders, limits),
        "not a JSON object": verdict("crr.json.SITE-A", b"[1, 2]", senders, limits),
        "not LDIF": verdict("glue.ldif.SITE-A", b"dn: x\nno colon here\n", senders, limits),
    }
    for reason, refused in cases.items():
        assert isinstance(refused, Refusal), reason
        assert reason in refused.reason
        assert "\n" not in str(refused)
    assert cases["1001 bytes, over the limit of 1000"].kind == "oversized"
    not_utf8 = verdict("glue21.json.SITE-A", b'{"AdminDomain": [], "Name": "\xff"}', senders, limits)
    assert isinstance(not_utf8, Refusal) and "not JSON" in not_utf8.reason  # refused, not raised at the consumer
    assert cases["over 10000 bytes once unpacked"].kind == "oversized"


# -- the tree ---------------------------------------------------------------------------------------------

def test_a_resource_form_site_is_laid_out_as_a_top_bdii_holds_it(site_documents):
    placed = relocate("SITE-A", parse_ldif(site_documents["ldif"].decode()))
    dns = [entry.dn for entry in placed]
    assert dns[0] in ("mds-vo-name=SITE-A,mds-vo-name=local,o=grid", "GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue")
    assert "GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue" in dns  # the AdminDomain moved up
    ce = next(dn for dn in dns if dn.startswith("GlueCEUniqueID="))
    assert ce.endswith(",mds-vo-name=SITE-A,mds-vo-name=local,o=grid") and "resource" not in ce
    shares = [e.dn for e in placed if "GLUE2ComputingShare" in e.get("objectClass")]
    assert shares and all(dn.endswith(",GLUE2GroupID=resource,GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue")
                          for dn in shares)
    index = {dn.lower(): i for i, dn in enumerate(dns)}
    for i, dn in enumerate(dns):  # parents first, and every parent is there or is a base
        parent = dn.split(",", 1)[1].lower()
        assert parent in ("mds-vo-name=local,o=grid", "glue2groupid=grid,o=glue") or index[parent] < i, dn


def test_dns_with_escapes_and_spaces_are_placed_as_plain_ones_are():
    from glueinfo.core.ldif import Entry
    from glueinfo.federate.tree import place

    cases = {
        "GLUE2ShareID=atlas,GLUE2ServiceID=ce,GLUE2GroupID=resource,o=glue":
            "GLUE2ShareID=atlas,GLUE2ServiceID=ce,GLUE2GroupID=resource,GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue",
        "GLUE2ShareID=a\\,b , GLUE2ServiceID = ce,GLUE2GroupID=resource,o=glue":
            "GLUE2ShareID=a\\,b,GLUE2ServiceID=ce,GLUE2GroupID=resource,GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue",
        "GLUE2DomainID=SITE-A,GLUE2GroupID=resource,o=glue": "GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue",
        "GLUE2LocationID=x,GLUE2DomainID=SITE-A,GLUE2GroupID=resource,o=glue":
            "GLUE2LocationID=x,GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue",
        "GLUE2ServiceID=s+GLUE2EntityName=n,GLUE2DomainID=SITE-A,o=glue":
            "GLUE2ServiceID=s+GLUE2EntityName=n,GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue",
        "GLUE2DomainID=SITE-A,o=glue": "GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue",
        "GlueCEUniqueID=ce:2119/x,mds-vo-name=resource,o=grid":
            "GlueCEUniqueID=ce:2119/x,mds-vo-name=SITE-A,mds-vo-name=local,o=grid",
        "GlueClusterUniqueID=c\\;d,Mds-Vo-name=SITE-A,o=grid":
            "GlueClusterUniqueID=c\\;d,mds-vo-name=SITE-A,mds-vo-name=local,o=grid",
        "GlueSubClusterUniqueID=#1,mds-vo-name=resource,o=grid":
            "GlueSubClusterUniqueID=\\231,mds-vo-name=SITE-A,mds-vo-name=local,o=grid",
    }
    for dn, expected in cases.items():
        placed = place("SITE-A", Entry(dn, {"objectClass": "GlueTop"}))
        assert placed is not None and placed.dn == expected, dn
    assert place("SITE-A", Entry("mds-vo-name=resource,o=grid", {"objectClass": "MDS"})) is None  # made as BDII makes it


def test_entries_a_site_stops_sending_leave_the_view_and_come_back_when_sent_again(site_documents, senders, tmp_path):
    federation = Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock())
    ldif = site_documents["ldif"].decode()
    federation.take("glue.ldif.SITE-A", message(), ldif.encode())
    before = dict(federation.sites["SITE-A"].entries)
    records = [(record, parse_ldif(record)[0].dn) for record in ldif.split("\n\n") if record.strip()]
    ce = next(dn for record, dn in records if "objectClass: GlueCE\n" in record)
    kept = [record for record, dn in records if not dn.endswith(ce)]  # the CE and its VOViews gone
    assert len(records) - len(kept) >= 2
    federation.take("glue.ldif.SITE-A", message(timestamp=1790000100), "\n\n".join(kept).encode())
    after = federation.sites["SITE-A"].entries
    placed_ce = ce.replace("mds-vo-name=resource,o=grid", "mds-vo-name=SITE-A,mds-vo-name=local,o=grid").lower()
    assert placed_ce in before and not any(key.endswith(placed_ce) for key in after)
    assert len(after) == len(before) - (len(records) - len(kept))
    federation.take("glue.ldif.SITE-A", message(timestamp=1790000200), ldif.encode())
    assert list(federation.sites["SITE-A"].entries) == list(before)


def test_the_json_union_holds_every_sites_objects_unchanged(site_documents):
    other = site_documents["json"].replace(b"SITE-A", b"SITE-B").replace(b"site-a", b"site-b")
    union = json.loads(union_json([site_documents["json"], other]))
    for document in (site_documents["json"], other):
        for kind, objects in json.loads(document).items():
            for obj in objects:
                assert obj in union[kind]
    assert sorted(d["ID"] for d in union["AdminDomain"]) == ["SITE-A", "SITE-B"]


# -- the view's memory ---------------------------------------------------------------------------------------

def test_a_site_silent_too_long_is_stale_then_withdrawn_and_a_restart_keeps_the_rest(site_documents, senders, tmp_path):
    clock = Clock()
    federation = Federation(SiteStore(str(tmp_path / "state")), senders, ages=Ages(600, 3600), clock=clock)
    federation.take("glue21.json.SITE-A", message(), site_documents["json"])
    federation.take("glue.ldif.SITE-A", message(encoding="gzip"), gzip.compress(site_documents["ldif"]))

    def state() -> str:
        return json.loads(federation.sites_document())["sites"][0]["state"]

    assert state() == "fresh"
    clock.now += 601
    assert state() == "stale"
    assert federation.document("SITE-A", "glue21.json") is not None  # still served while stale
    restarted = Federation(SiteStore(str(tmp_path / "state")), senders, ages=Ages(600, 3600), clock=clock)
    assert restarted.load() == 1
    assert restarted.document("SITE-A", "glue21.json")[1] == site_documents["json"]
    assert restarted.document("SITE-A", "glue.ldif")[1] == site_documents["ldif"]
    clock.now += 3000
    federation.tick()
    assert json.loads(federation.sites_document())["sites"] == []
    assert federation.counts()["withdrawn_total"] == 1
    assert not os.listdir(tmp_path / "state" / "sites")
    assert list(SiteStore(str(tmp_path / "state")).load()) == []


def test_an_older_document_does_not_replace_a_newer_one(site_documents, senders, tmp_path):
    federation = Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock())
    newer = site_documents["json"]
    older = newer.replace(b'"Name"', b'"Name" ', 1)
    federation.take("glue21.json.SITE-A", message(timestamp=1790000100), newer)
    federation.take("glue21.json.SITE-A", message(timestamp=1790000000), older)
    assert federation.document("SITE-A", "glue21.json")[1] == newer


def test_a_view_killed_while_writing_comes_back_with_the_document_before(site_documents, senders, tmp_path, caplog):
    """A kill -9 cut the newest document's file short, or came between it and the old one's removal:
    the restarted view has the last whole document, and what was left over is cleared."""
    federation = Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock())
    first, second = site_documents["json"], site_documents["json"].replace(b'"Name"', b'"Name" ', 1)
    directory = tmp_path / "state" / "sites" / "SITE-A"
    federation.take("glue21.json.SITE-A", message(timestamp=1790000000), first)
    [written] = directory.iterdir()
    left_over = written.read_bytes()  # the first document's file, as a kill before its removal leaves it
    federation.take("glue21.json.SITE-A", message(timestamp=1790000100), second)
    [newest] = directory.iterdir()
    (directory / written.name).write_bytes(left_over)
    torn = directory / f"glue21.json.{int(newest.suffix[1:]) + 1}"  # the next one, killed half-way
    torn.write_bytes(newest.read_bytes()[:len(newest.read_bytes()) // 2])
    restarted = Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock())
    assert restarted.load() == 1
    assert restarted.document("SITE-A", "glue21.json")[1] == second
    assert "the body is not the one its meta names" in caplog.text
    assert [path.name for path in directory.iterdir()] == [newest.name]
    restarted.take("glue21.json.SITE-A", message(timestamp=1790000200), first)  # after the torn one's number
    assert restarted.document("SITE-A", "glue21.json")[1] == first
    again = Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock())
    assert again.load() == 1 and again.document("SITE-A", "glue21.json")[1] == first


def test_a_store_not_loaded_first_keeps_a_sites_next_document(site_documents, senders, tmp_path):
    Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock()).take("glue21.json.SITE-A", message(),
                                                                                 site_documents["json"])
    newer = site_documents["json"].replace(b'"Name"', b'"Name" ', 1)
    Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock()).take(
        "glue21.json.SITE-A", message(timestamp=1790000100), newer)
    restarted = Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock())
    assert restarted.load() == 1 and restarted.document("SITE-A", "glue21.json")[1] == newer


def test_a_disk_that_refuses_a_document_keeps_the_one_held(site_documents, senders, tmp_path, monkeypatch):
    from glueinfo.core.atomicwrite import WriteError

    federation = Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock())
    federation.take("glue21.json.SITE-A", message(), site_documents["json"])
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data[:100]))  # some of it went, then the disk was full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(WriteError, match=r"glue21\.json\.2: not written: No space left on device \[ENOSPC\]"):
        federation.take("glue21.json.SITE-A", message(timestamp=1790000100), site_documents["json"] + b" ")
    monkeypatch.undo()
    assert federation.document("SITE-A", "glue21.json")[1] == site_documents["json"]
    restarted = Federation(SiteStore(str(tmp_path / "state")), senders, clock=Clock())
    assert restarted.load() == 1 and restarted.document("SITE-A", "glue21.json")[1] == site_documents["json"]
    assert [p.name for p in (tmp_path / "state" / "sites" / "SITE-A").iterdir()] == ["glue21.json.1"]


def test_a_second_view_on_the_same_state_directory_is_refused(tmp_path):
    from glueinfo.federate.store import StoreLocked

    first = SiteStore(str(tmp_path))
    first.lock()
    with pytest.raises(StoreLocked, match=rf"another glueinfo federate \(PID {os.getpid()}\) holds its lock"):
        SiteStore(str(tmp_path)).lock()
    first.release()
    SiteStore(str(tmp_path)).lock()


def test_site_ids_with_odd_characters_stay_inside_the_state_directory(tmp_path):
    store = SiteStore(str(tmp_path))
    directory = store.directory("../../etc/x y")
    assert Path(directory).resolve().parent == tmp_path / "sites"
    assert os.path.basename(directory) == "%2E%2E%2F%2E%2E%2Fetc%2Fx%20y"


# -- the settings ---------------------------------------------------------------------------------------------

def test_the_example_config_is_read_and_a_missing_file_is_named(tmp_path):
    from glueinfo.core.config import load, parse_text
    from glueinfo.federate.settings import federate_settings

    example = load(str(REPO / "etc" / "examples" / "federate.conf"))  # every key known, every value typed
    assert example.get("federate", "queue") == "federate-example"
    with pytest.raises(ValueError, match=r"^\[amqp\] ca_file /etc/grid-security/.*: cannot be read$"):
        federate_settings(example)
    password = tmp_path / "password"
    password.write_text("secret\n")
    base = f"[amqp]\nurl = amqp://view@broker.example.org/\npassword_file = {password}\n"
    with pytest.raises(ValueError, match=r"^\[federate\] queue is not set"):
        federate_settings(parse_text(base))
    with pytest.raises(ValueError, match=r"^\[federate\] listen: 0.0.0.0:8180 is not loopback"):
        federate_settings(parse_text(base + "[federate]\nqueue = q\nlisten = 0.0.0.0:8180\n"))
    with pytest.raises(ValueError, match=r"^\[federate\] glue_base: 'o=grid' is not below o=glue"):
        federate_settings(parse_text(base + "[federate]\nqueue = q\nglue_base = o=grid\n"))
    with pytest.raises(ValueError, match=r"withdraw_after \(60 s\) is shorter than stale_after \(600 s\)"):
        federate_settings(parse_text(base + "[federate]\nqueue = q\nstale_after = 600\nwithdraw_after = 60\n"))
    settings = federate_settings(parse_text(base + "[federate]\nqueue = q\n"))
    assert settings.kinds == ("glue21.json", "glue.ldif", "crr.json") and settings.ldap is None


def test_an_ldap_server_that_is_down_is_retried_later_and_the_json_side_goes_on(site_documents, senders, tmp_path, caplog):
    from servers import free_port

    from glueinfo.federate.http_view import FederationRoutes
    from glueinfo.federate.ldap_view import LdapView
    from glueinfo.run.http_server import Request
    from glueinfo.site.publish_settings import LdapBind, LdapSettings

    clock = Clock()
    dead = f"ldap://127.0.0.1:{free_port()}"  # nothing listens there
    ldap = LdapView(LdapSettings(url=dead, binds=(LdapBind("o=grid"),), timeout_s=2), ("mds-vo-name=local,o=grid",
                    "GLUE2GroupID=grid,o=glue"), None, retry_min_s=5, retry_max_s=60, clock=clock)
    federation = Federation(SiteStore(str(tmp_path / "state")), senders, ldap=ldap, clock=clock)
    federation.take("glue.ldif.SITE-A", message(encoding="gzip"), gzip.compress(site_documents["ldif"]))
    federation.take("glue21.json.SITE-A", message(), site_documents["json"])
    federation.tick()
    assert ldap.state.failing_since == clock.now and "cannot reach the LDAP server" in (ldap.state.last_error or "")
    assert ldap.next_attempt_at == clock.now + 5
    assert "the JSON view goes on; next attempt in 5 s" in caplog.text
    routes = FederationRoutes(federation, lambda: None, lambda: {})
    answer = routes.answer(Request("GET", "/sites/SITE-A/glue21.json", {}, "127.0.0.1"))
    assert (answer.status, answer.body) == (200, site_documents["json"])
    health = routes.answer(Request("GET", "/health", {}, "127.0.0.1"))
    assert health.status == 503 and json.loads(health.body)["ldap"]["url"] == dead
    clock.now += 5
    federation.tick()  # tried again, failing again: the wait doubles
    assert ldap.next_attempt_at == clock.now + 10


def test_a_flood_of_refused_messages_is_counted_but_not_logged_line_by_line(senders, tmp_path, caplog):
    clock = Clock()
    federation = Federation(SiteStore(str(tmp_path / "state")), senders, clock=clock)
    for _ in range(1000):
        federation.take("glue21.json.SITE-A", message(user="mallory"), b"{}")
    assert federation.counts()["refused_total"]["untrusted"] == 1000
    assert caplog.text.count("refused 'glue21.json.SITE-A' from mallory") == 10
    clock.now += 61
    federation.take("glue21.json.SITE-A", message(user="mallory"), b"{}")
    assert "990 more refusals from mallory in the last minute not logged" in caplog.text
    assert caplog.text.count("refused 'glue21.json.SITE-A' from mallory") == 11


def test_a_site_that_changed_a_few_entries_has_only_those_parsed_and_judged_again(site_documents):
    from glueinfo.federate.receive import parse_blocks

    ldif = site_documents["ldif"]
    entries, blocks, new = parse_blocks(ldif, {})
    assert len(new) == len(entries) == len(parse_ldif(ldif.decode()))
    changed = ldif.replace(b"GlueCEStateStatus: Production", b"GlueCEStateStatus: Closed", 1)
    assert changed != ldif
    again, _blocks, new = parse_blocks(changed, blocks)
    assert [e.dn for e in again] == [e.dn for e in entries]
    assert len(new) == 1 and new[0].get("GlueCEStateStatus") == ["Closed"]
