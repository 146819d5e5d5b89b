"""The federation view's LDAP writer: what it hands glueinfo.glue.ldapsync.write_delta for a changed site."""

from __future__ import annotations

from glueinfo.core.ldif import Entry
from glueinfo.federate.ldap_view import narrowed
from glueinfo.glue.ldap_diff import changes_for

CE = "GlueCEUniqueID=ce:9619/atlas,mds-vo-name=SITE-A,mds-vo-name=local,o=grid"
SHARE = "GLUE2ShareID=atlas,GLUE2ServiceID=ce,GLUE2GroupID=resource,GLUE2DomainID=SITE-A,GLUE2GroupID=grid,o=glue"


def held(entry: Entry) -> dict[str, list[bytes]]:
    """An entry as write_delta hands it to changes_for: what the server holds, as raw values."""
    return {name: [str(v).encode() for v in values] for name, values in entry.attributes.items()}


def ce(**changes: object) -> Entry:
    attributes: dict[str, object] = {"objectClass": ["GlueCETop", "GlueCE", "GlueCEState"],
                                     "GlueCEUniqueID": "ce:9619/atlas", "GlueCEStateWaitingJobs": "3",
                                     "GlueCEStateRunningJobs": "10", "GlueCEStateStatus": "Production",
                                     "GlueCEAccessControlBaseRule": ["VO:atlas", "VO:ops"]}
    attributes.update(changes)
    return Entry(CE, {name: value for name, value in attributes.items() if value is not None})  # type: ignore[misc]


def test_a_changed_entry_is_cut_to_what_differs_and_writes_what_the_whole_entry_writes():
    before = ce()
    after = ce(GlueCEStateWaitingJobs="4", GlueCEStateStatus=None, GlueCEStateFreeJobSlots="2",
               GlueCEAccessControlBaseRule=["VO:ops", "VO:atlas"])  # the last: the same values in another order
    old, new = narrowed({CE: before}, {CE: after})
    assert new[CE].attributes == {"GlueCEStateWaitingJobs": ["4"], "GlueCEStateFreeJobSlots": ["2"],
                                  "GlueCEAccessControlBaseRule": ["VO:ops", "VO:atlas"],
                                  "objectClass": ["GlueCETop", "GlueCE", "GlueCEState"]}
    assert set(old[CE].attributes) == {"GlueCEStateWaitingJobs", "GlueCEStateStatus", "GlueCEAccessControlBaseRule",
                                       "objectClass"}
    whole = changes_for(after, held(before))
    assert whole == changes_for(new[CE], held(old[CE]))
    assert sorted(whole) == ["GlueCEStateFreeJobSlots", "GlueCEStateStatus", "GlueCEStateWaitingJobs"]


def test_entries_added_deleted_unchanged_or_of_other_classes_are_passed_whole():
    same = ce()
    share = Entry(SHARE, {"objectClass": ["GLUE2Entity", "GLUE2Share"], "GLUE2ShareID": "atlas"})
    restructured = Entry(SHARE, {"objectClass": ["GLUE2Entity", "GLUE2ComputingShare"], "GLUE2ShareID": "atlas"})
    old, new = narrowed({CE: same, SHARE: share}, {CE: same, SHARE: restructured})
    assert old == {CE: same, SHARE: share} and new == {CE: same, SHARE: restructured}
    assert changes_for(restructured, held(share)) is None  # a delete and a whole add, as without the cut
    added = ce()
    old, new = narrowed({SHARE: share}, {CE: added})
    assert old == {SHARE: share} and new == {CE: added}


def test_an_entry_whose_values_only_moved_between_spellings_writes_nothing():
    before = ce()
    after = Entry(CE, {"objectclass": ["GlueCETop", "GlueCE", "GlueCEState"], "gluecestatewaitingjobs": "3",
                       **{name: values for name, values in before.attributes.items()
                          if name not in ("objectClass", "GlueCEStateWaitingJobs")}})
    old, new = narrowed({CE: before}, {CE: after})
    assert changes_for(new[CE], held(old[CE])) == {} == changes_for(after, held(before))
