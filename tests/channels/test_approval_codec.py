"""The approval codec: buttons and `/approve` text round-trip; a stranger's input never parses wrong."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from channels import (
    APPROVAL_COMMANDS,
    approval_command,
    encode_approval_button,
    parse_approval_button,
    parse_approval_command,
    parse_show_command,
    show_command,
)
from channels.approval_codec import MAX_REQUEST_ID_CHARS, encode_show_button, is_request_id, parse_show_button
from orchestrator.seam import APPROVAL_COMMANDS as CHAT_COMMANDS

request_ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"), blacklist_characters=":"),
    min_size=1,
    max_size=MAX_REQUEST_ID_CHARS,
)


@given(request_ids, st.booleans())
def test_a_button_round_trips(request_id: str, approved: bool) -> None:
    assert parse_approval_button(encode_approval_button(request_id, approved=approved)) == (request_id, approved)


@given(request_ids, st.booleans())
def test_a_command_round_trips(request_id: str, approved: bool) -> None:
    assert parse_approval_command(approval_command(request_id, approved=approved)) == (request_id, approved)


def test_the_wire_formats() -> None:
    assert [encode_approval_button("1a2b3c4d", approved=flag) for flag in (True, False)] == ["ap:1a2b3c4d:y", "ap:1a2b3c4d:n"]
    assert [approval_command("1a2b3c4d", approved=flag) for flag in (True, False)] == ["/approve 1a2b3c4d", "/deny 1a2b3c4d"]
    assert APPROVAL_COMMANDS is CHAT_COMMANDS  # defined once, by the codec; the seam lists what a route offers


@pytest.mark.parametrize(
    "data",
    [
        None, "", "ap", "ap:", "ap::y", "ap:req:", "ap:req:yes", "ap:req:Y", "xx:req:y", "AP:req:y",
        "ap:a:b:y",  # extra parts: not an id the core issues
        "ap:req:y:", ":ap:req:y", "ap:re q:y", "ap:req\u202e:y", "ap:req\n:y", "ap:\u200b:y",
        "ap:" + "x" * (MAX_REQUEST_ID_CHARS + 1) + ":y", "ap:" + "x" * 1_000_000 + ":n",
    ],
)
def test_a_malformed_button_is_no_answer(data: str | None) -> None:
    assert parse_approval_button(data) is None


@pytest.mark.parametrize(
    "text",
    [
        "", "/approve", "/deny", "approve req", "/approved req", "/approve req extra", "/approve req /deny req",
        "please /approve req", "/approve re:q",  # ':' would let a button payload hide in an id
        "/approve req\u202e", "/approve \u200b", "/approve " + "x" * (MAX_REQUEST_ID_CHARS + 1),
        "/approve " + "x" * 1_000_000, "/approve@somebot req",  # addressed to a bot, none named here
    ],
)
def test_malformed_text_is_no_answer(text: str) -> None:
    assert parse_approval_command(text) is None


def test_text_commands_from_people() -> None:
    assert parse_approval_command("  /APPROVE   1a2b3c4d \n") == ("1a2b3c4d", True)
    assert parse_approval_command("/Deny req-7") == ("req-7", False)
    assert parse_approval_command("/approve käse") == ("käse", True)  # unicode letters are printable
    assert parse_approval_command("/deny@Fake_Bot req", bot_username="fake_bot") == ("req", False)
    assert parse_approval_command("/deny@other_bot req", bot_username="fake_bot") is None
    assert parse_approval_command("/approve req", bot_username="fake_bot") == ("req", True)


def test_an_impossible_id_is_never_encoded() -> None:
    for bad in ("", "a:b", "a b", "x" * (MAX_REQUEST_ID_CHARS + 1), "a\u202eb"):
        assert not is_request_id(bad)
        with pytest.raises(ValueError, match="not a request id"):
            encode_approval_button(bad, approved=True)


@given(request_ids)
def test_show_all_and_show_round_trip_and_never_pass_for_an_answer(request_id: str) -> None:
    button = encode_show_button(request_id)
    assert parse_show_button(button) == request_id and parse_approval_button(button) is None
    assert parse_show_command(show_command(request_id)) == request_id
    assert parse_approval_command(show_command(request_id)) is None
    assert parse_show_button(encode_approval_button(request_id, approved=True)) is None


def test_show_wire_formats_and_who_it_is_addressed_to() -> None:
    assert (encode_show_button("1a2b3c4d"), show_command("1a2b3c4d")) == ("ap:1a2b3c4d:s", "/show 1a2b3c4d")
    assert parse_show_command("/SHOW@Ops_Bot 1a2b3c4d", bot_username="ops_bot") == "1a2b3c4d"
    for text in ("/show@other_bot 1a2b3c4d", "/show", "/show a b", "/show a:b", "/shown 1a2b3c4d"):
        assert parse_show_command(text, bot_username="ops_bot") is None, text
    assert parse_show_button("ap:1a2b3c4d:x") is None and parse_show_button(None) is None
