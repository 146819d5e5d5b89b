"""What the publish layer keeps true when something goes wrong (a review of issue 24 found each):
nothing already published is withdrawn by a failure or a setting, a reload that fails switches
nothing, an output's record follows what is really on its server, and a broken plugin's
declarations cannot take every command down."""

from __future__ import annotations

import json

import pytest
from glue_sites import synthetic_site

from glueinfo.core.config import parse_text
from glueinfo.core.errors import ConfigurationError, PublicationError
from glueinfo.core.model import QueueState
from glueinfo.core.options import Option
from glueinfo.publish.documents import Publisher
from glueinfo.publish.outputs import Publication
from glueinfo.publish.outputs.ldap import LdapOutcome, LdapOutput, LdapSync, publish_bases
from glueinfo.run.provider import Provider
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import LdapSettings, PublishSettings, publish_settings

T0 = 1_800_000_000.0
GLUE2 = "GLUE2GroupID=resource,o=glue"
GLUE13 = "mds-vo-name=resource,o=grid"


@pytest.mark.parametrize("versions, kept", [(("1.3",), (GLUE13,)), (("2.0",), (GLUE2,)), (("1.3", "2.0"), (GLUE13, GLUE2))])
def test_an_extra_base_in_a_tree_the_versions_leave_out_is_never_synchronised(versions, kept):
    # Synchronising it would make the server's tree equal to nothing glueinfo publishes there: deleted whole.
    settings = PublishSettings(versions=versions, site_id="SITE",
                               ldap=LdapSettings(extra_bases=(GLUE2, "mds-vo-name=other,o=grid")))
    bases = publish_bases(settings)
    assert [b for b in bases if b in (GLUE13, GLUE2)] == list(kept)
    assert ("mds-vo-name=other,o=grid" in bases) == ("1.3" in versions)


def site_config(tmp_path, extra_run: str = ""):
    hosts = synthetic_site(20)[:2]
    for host in hosts:
        host.collected_at = T0
    snapshots = tmp_path / "hosts.json"
    snapshots.write_text(json.dumps([h.to_dict() for h in hosts]))
    (tmp_path / "state").mkdir(exist_ok=True)
    return (f"[site]\nid = SITE\n[cluster:main]\nunique_id = ce01.example.org\n"
            f"[ce:grid]\nhost = ce01.example.org\nlrms = slurm\naccess = VO:dteam\n"
            f"[node]\nsite_snapshots = {snapshots}\nstale_after = 300\n[sources]\nenabled =\n"
            f"[ldap]\nurl = ldap://127.0.0.1:1\n"
            f"[run]\nstate_dir = {tmp_path / 'state'}\nldif_file = {tmp_path / 'glue.ldif'}\n"
            f"node_xml_file = {tmp_path / 'nodes.xml'}\n{extra_run}")


def queue_state(lrms, ctx):
    return QueueState(lrms_type="slurm", total_cpus=8, free_cpus=3, running_jobs=0, waiting_jobs=0, total_jobs=0,
                      status="Production")


def refusing_sync(settings, clock):
    return lambda entries: LdapOutcome(added=1, rejected=["GLUE2ServiceID=x,o=glue: add refused: insufficientAccessRights (50)"])


def make_provider(tmp_path, extra_run: str = "") -> Provider:
    return Provider(parse_text(site_config(tmp_path, extra_run)), clock=lambda: T0 + 10, queue_state=queue_state,
                    ldap_sync_factory=refusing_sync)


def test_a_reload_that_cannot_make_an_output_switches_nothing(tmp_path):
    provider = make_provider(tmp_path)
    before = (provider.plan, provider.assembler, provider.publisher, provider.outputs)
    other = tmp_path / "other.ldif"
    with pytest.raises(ConfigurationError, match="unknown output 'nosuch'"):
        provider.reload(parse_text(site_config(tmp_path, f"outputs = nosuch\nldif_file = {other}\n").replace(
            f"ldif_file = {tmp_path / 'glue.ldif'}\n", "")))
    assert (provider.plan, provider.assembler, provider.publisher, provider.outputs) == before
    provider.publish("after a refused reload")
    assert (tmp_path / "glue.ldif").exists() and not other.exists()
    provider.close()


def test_a_reload_turning_serve_off_keeps_feeding_the_server_it_cannot_stop(tmp_path):
    provider = make_provider(tmp_path, "serve = yes\n")
    assert [o.name for o in provider.outputs] == ["file", "http"]
    provider.reload(parse_text(site_config(tmp_path, "serve = no\n")))
    assert [o.name for o in provider.outputs] == ["file", "http"]  # "takes effect at the next restart"
    provider.close()


def test_refusals_stay_reported_through_unchanged_publishes_and_a_removed_output_reports_nothing(tmp_path):
    provider = make_provider(tmp_path, "ldap_sync = yes\n")
    assert provider.publish("first")
    assert provider.output_stats["ldap"].last_error.startswith("1 writes refused, first: GLUE2ServiceID=x")
    assert not provider.publish("nothing new")  # unchanged: nothing rendered, nothing written
    assert provider.output_stats["ldap"].last_error is not None, "the entry is still missing on the server"
    assert provider.job_stats["publish"].last_error is not None
    provider.reload(parse_text(site_config(tmp_path, "ldap_sync = no\n")))
    assert "ldap" not in provider.write_errors and "ldap" not in provider.output_stats
    provider.publish("after the reload")
    assert provider.job_stats["publish"].last_error is None
    provider.close()


def test_a_daemon_keeps_its_last_good_glue2_tree_through_a_failure(tmp_path, monkeypatch):
    config = parse_text(site_config(tmp_path))
    site = assemble_snapshots(config, [], lambda: T0, local_fqdn="ce01.example.org", states={})
    publisher = Publisher(publish_settings(config), daemon=True, keep_entries=True, check_health=False)
    good = publisher.documents(site)
    assert good.glue2 is not None and good.glue2.entries
    good_tail = good.ldif.split(b"\n\n\ndn: ", 1)[-1] if b"\n\n\n" in good.ldif else good.ldif
    import glueinfo.publish.documents as documents_module

    def broken(*args, **kwargs):
        raise RuntimeError("GLUE20.schema unreadable for a moment")

    monkeypatch.setattr(documents_module, "build_glue2", broken)
    failed = publisher.documents(site)
    assert failed.glue2 is good.glue2  # the LDAP sync still holds o=glue; the file keeps its o=glue tree
    assert failed.glue2_error == "RuntimeError: GLUE20.schema unreadable for a moment"
    assert failed.ldif.endswith(good_tail)
    assert {e.dn for e in failed.entries() if e.dn.endswith(GLUE2)} == {e.dn for e in good.glue2.entries}


def test_entries_are_refused_by_a_publisher_that_keeps_texts_only(tmp_path):
    config = parse_text(site_config(tmp_path))
    site = assemble_snapshots(config, [], lambda: T0, local_fqdn="ce01.example.org", states={})
    documents = Publisher(publish_settings(config), daemon=True, check_health=False).documents(site)
    with pytest.raises(PublicationError, match="needs_entries=True"):
        documents.entries()
    assert documents.entry_count() > 0  # what it publishes is whole; only the objects are not kept


def test_an_ldap_output_reports_the_last_refusal_while_nothing_changes():
    sync = LdapSync(refusing_sync(None, None), 5, 30, clock=lambda: T0, url="ldap://x")
    output = LdapOutput(sync)
    output.last_entries = ["e"]
    sync.maybe_sync(["e"])
    assert output.publish(Publication(None)).error.startswith("1 writes refused")


def test_a_plugins_bad_key_declarations_are_reported_and_ignored_not_a_crash():
    from glueinfo.commands.plugin_keys import checked_keys

    said: list[str] = []
    assert checked_keys({"mybin": Option("path", "", "d")}, "p", said.append) == {"mybin": Option("path", "", "d")}
    assert checked_keys({"mybin": "path"}, "LRMS plugin x (pkg)", said.append) == {}
    assert checked_keys({"MyBin": Option("path", "", "d")}, "p", said.append) == {}  # configparser lower-cases keys
    assert checked_keys({"n": Option("dict", {}, "d")}, "p", said.append) == {}
    assert checked_keys(["mybin"], "p", said.append) == {}
    assert len(said) == 4 and said[0].startswith("LRMS plugin x (pkg): config key 'mybin' is not a lower-case name")


def test_a_streamed_ldif_is_the_same_bytes_and_is_not_asked_for_again(tmp_path):
    import io

    config = parse_text(site_config(tmp_path))
    site = assemble_snapshots(config, [], lambda: T0, local_fqdn="ce01.example.org", states={})
    settings = publish_settings(config)
    stream = io.BytesIO()
    streamed = Publisher(settings, check_health=False).documents(site)
    streamed.write_ldif(stream)  # `glueinfo ldif`: the GLUE 1.3 tree never held whole
    assert stream.getvalue() == Publisher(settings, check_health=False).documents(site).ldif
    assert b"\n\ndn: GLUE2" in stream.getvalue()  # o=glue after o=grid
    with pytest.raises(PublicationError, match="not kept"):
        streamed.entries()
