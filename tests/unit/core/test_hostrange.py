"""Host list expansion: the SSS Range form, lists, host files, targets."""

from __future__ import annotations

import pytest

from glueinfo.core.hostrange import HostRangeError, Target, expand, expand_list, parse_target, read_host_file


def test_plain_name_is_itself():
    assert expand("ce01.example.org") == ["ce01.example.org"]
    assert expand("ce01.example.org:8650") == ["ce01.example.org:8650"]


def test_zero_padding_is_kept_and_port_applies_to_every_host():
    hosts = expand("wn[001-250].example.org:8650")
    assert len(hosts) == 250
    assert hosts[:3] == ["wn001.example.org:8650", "wn002.example.org:8650", "wn003.example.org:8650"]
    assert hosts[98:101] == ["wn099.example.org:8650", "wn100.example.org:8650", "wn101.example.org:8650"]
    assert hosts[-1] == "wn250.example.org:8650"


def test_unpadded_range_crosses_digit_widths():
    assert expand("n[8-11]") == ["n8", "n9", "n10", "n11"]


def test_comma_list_inside_bracket_as_in_the_sss_spec():
    assert expand("node[5-7,77]") == ["node5", "node6", "node7", "node77"]
    assert expand("node[01-02,10]") == ["node01", "node02", "node10"]


def test_several_brackets_make_a_product_leftmost_slowest():
    assert expand("r[1-2]-wn[01-03]") == ["r1-wn01", "r1-wn02", "r1-wn03", "r2-wn01", "r2-wn02", "r2-wn03"]


def test_list_splits_outside_brackets_only_and_drops_repeats():
    text = "wn[1-3,7], gpu[01-02].example.org:9000  wn2 login"
    assert expand_list(text) == ["wn1", "wn2", "wn3", "wn7", "gpu01.example.org:9000", "gpu02.example.org:9000", "login"]


def test_ipv6_literal_is_not_a_range():
    assert expand("[::1]:8650") == ["[::1]:8650"]
    assert parse_target("[::1]:8650", 1) == Target("::1", 8650)
    assert parse_target("fe80::1", 8650) == Target("fe80::1", 8650)


def test_targets_take_the_default_port():
    assert parse_target("wn001.example.org", 8650) == Target("wn001.example.org", 8650)
    assert parse_target("127.0.0.2:9001", 8650) == Target("127.0.0.2", 9001)
    assert str(Target("127.0.0.2", 9001)) == "127.0.0.2:9001"


@pytest.mark.parametrize("pattern, words", [
    ("wn[10-2]", "runs backwards"),
    ("wn[a-c]", "not N or N-M"),
    ("wn[1-3", "unclosed"),
    ("wn1-3]", "unbalanced"),
    ("wn[1-[2]]", "nested"),
    ("wn[1-3]:http", "port 'http'"),
    ("wn[1-3]:70000", "port '70000'"),
    ("w n;rm", "not part of a host name"),
    ("wn[1-1000000]", "more than"),
    ("a[1-1000]b[1-1000]", "more than"),
])
def test_bad_patterns_are_named_in_the_error(pattern, words):
    with pytest.raises(HostRangeError) as info:
        expand_list(pattern)
    assert words in str(info.value)


def test_host_file_one_per_line_with_comments(tmp_path):
    path = tmp_path / "workers"
    path.write_text("# worker nodes\nwn[01-03]  # rack 1\n\n   \ngpu1:9000\nwn02\n", encoding="utf-8")
    assert read_host_file(str(path)) == ["wn01", "wn02", "wn03", "gpu1:9000"]


def test_host_file_error_names_file_and_line(tmp_path):
    path = tmp_path / "workers"
    path.write_text("wn[01-03]\nwn[05-04]\n", encoding="utf-8")
    with pytest.raises(HostRangeError) as info:
        read_host_file(str(path))
    assert str(info.value).startswith(f"{path}:2: ")


def test_missing_host_file_is_a_clear_error(tmp_path):
    with pytest.raises(HostRangeError, match="cannot read host file"):
        read_host_file(str(tmp_path / "nope"))


@pytest.mark.parametrize("call", [
    lambda: expand("wn[1-" + "9" * 5000 + "]"),  # past int()'s 4,300-digit limit
    lambda: expand("wn[" + "1" * 64 + "]"),
    lambda: expand("wn1:" + "9" * 5000),
    lambda: parse_target("wn1:" + "9" * 5000, 8649),
    lambda: expand("wn1:\u00b2"),  # a superscript two: isdigit() says yes, int() says no
    lambda: parse_target("wn1:\u00b2", 8649),
    lambda: expand("wn[\u0663-\u0665]"),  # Arabic-Indic digits would make ASCII names from other digits
])
def test_numbers_no_host_or_port_can_have_are_a_one_line_error(call):
    with pytest.raises(HostRangeError) as caught:
        call()
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


def test_a_range_of_numbers_as_long_as_a_label_still_expands():
    big = "1" * 63
    assert expand(f"wn[{big}]") == [f"wn{big}"]
