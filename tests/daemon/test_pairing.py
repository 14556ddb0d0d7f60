"""Pairing codes for strangers, through a real daemon with the Telegram adapter against FakeTelegram (and Slack's).

The route lists one sender (7, also its approver) and pairs strangers. A stranger's DM gets a
code (the same one while it is pending), an approver decides it in their own chat or an admin
with `orchestrator pairing`, and the stored approval admits the stranger from their next
message; a revoke holds from the next one too.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.seam import CODE_ALPHABET, CODE_LENGTH
from orchestrator.store import PairingAudit
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.chats import SLACK_CAROL, slack_toml, wait_text
from tests.daemon.platforms import daemon, echo_model
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram

TOKEN = "444444:DDD-pairing-bot"
OWNER, STRANGER = 7, 99
_CODE = re.compile(rf"pairing code is ([{CODE_ALPHABET}]{{{CODE_LENGTH}}}):")


def pairing_toml(fake_llm: FakeOpenAI, tg: FakeTelegram, *, strangers: str = "pair") -> str:
    return provider_toml(fake_llm.base_url) + f"""
[agents.bot]
provider = "fake"
model = "bot-model"
autonomy = "read_only"

[channels.tg]
kind = "telegram"
token = "env:TG_PAIRING"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1

[[routes]]
channel = "tg"
agent = "bot"
senders = ["{OWNER}"]
approvers = ["{OWNER}"]
strangers = "{strangers}"
"""


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_PAIRING", TOKEN)
    async with FakeTelegram(token=TOKEN, username="pairing_bot") as fake:
        yield fake


def said(tg: FakeTelegram, chat: int) -> list[str]:
    return [p["text"] for p in tg.calls("sendMessage") if p["chat_id"] == chat]


def codes(lines: list[str]) -> list[str]:
    return [m.group(1) for line in lines if (m := _CODE.search(line))]


def audit_actions(path: Path) -> list[tuple[object, object]]:
    with PairingAudit(path.parent / "state" / "audit.sqlite3") as audit:
        return [(row["action"], row["sender"]) for row in audit.decisions()]


async def test_a_stranger_gets_one_code_and_the_same_code_when_asking_again(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(pairing_toml(fake_llm, tg))
    async with daemon(path):
        tg.push_message(STRANGER, STRANGER, "hello, who are you?")
        await tg.wait_for(lambda: len(said(tg, STRANGER)) == 1, timeout=10)
        tg.push_message(STRANGER, STRANGER, "hello again")
        await tg.wait_for(lambda: len(said(tg, STRANGER)) == 2, timeout=10)
    first, again = codes(said(tg, STRANGER))
    assert first == again and len(first) == CODE_LENGTH and set(first) <= set(CODE_ALPHABET)
    assert fake_llm.requests == []  # a stranger never reaches the model
    assert audit_actions(path) == [("offered", str(STRANGER))]  # one code, offered once


async def test_a_stranger_in_a_group_gets_no_code_and_a_route_that_ignores_strangers_answers_nobody(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(pairing_toml(fake_llm, tg))
    async with daemon(path):
        tg.push_message(-1001, STRANGER, "code please", chat_type="supergroup")  # everyone would read it
        tg.push_message(98, 98, "and me?")  # polled after the group message: its answer means both were handled
        await tg.wait_for(lambda: len(said(tg, 98)) == 1, timeout=10)
    assert said(tg, -1001) == [] and len(codes(said(tg, 98))) == 1
    path = write_config(pairing_toml(fake_llm, tg, strangers="ignore"))
    async with daemon(path):
        tg.push_message(97, 97, "hello?")
        tg.push_message(OWNER, OWNER, "/new")  # the owner's answer comes after the stranger was handled
        await tg.wait_for(lambda: len(said(tg, OWNER)) == 1, timeout=10)
    assert said(tg, 97) == []


async def test_a_fourth_stranger_while_three_codes_are_pending_is_told_to_try_later(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(pairing_toml(fake_llm, tg))
    async with daemon(path):
        for stranger in (91, 92, 93, 94):
            tg.push_message(stranger, stranger, "hi")
        await tg.wait_for(lambda: all(said(tg, s) for s in (91, 92, 93, 94)), timeout=10)
        for _ in range(3):  # a few answers per hour, then silence
            tg.push_message(94, 94, "hi?")
        # Each stranger's answer (or silence) is decided as its task starts, in arrival order: once
        # the owner's later /new is answered and 94 has its three lines, the fourth try was silent.
        tg.push_message(OWNER, OWNER, "/new")
        await tg.wait_for(lambda: len(said(tg, OWNER)) == 1 and len(said(tg, 94)) >= 3, timeout=10)
    assert [len(codes(said(tg, s))) for s in (91, 92, 93)] == [1, 1, 1]
    assert len(set(codes(said(tg, 91) + said(tg, 92) + said(tg, 93)))) == 3
    assert said(tg, 94) == ["I cannot take new pairing requests right now. Please try again later."] * 3


async def test_an_approver_approves_in_chat_the_stranger_cannot_and_is_answered_next(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(pairing_toml(fake_llm, tg))
    fake_llm.default = echo_model
    async with daemon(path):
        tg.push_message(STRANGER, STRANGER, "let me in")
        await tg.wait_for(lambda: codes(said(tg, STRANGER)), timeout=10)
        (code,) = codes(said(tg, STRANGER))
        tg.push_message(STRANGER, STRANGER, f"/pairing approve {code}")  # approving themselves
        await tg.wait_for(lambda: len(said(tg, STRANGER)) == 2, timeout=10)
        tg.push_message(STRANGER, STRANGER, "still a stranger?")
        await tg.wait_for(lambda: len(said(tg, STRANGER)) == 3, timeout=10)
        tg.push_message(OWNER, OWNER, f"/pairing approve {code.lower()}")
        await tg.wait_for(lambda: len(said(tg, STRANGER)) == 4 and said(tg, OWNER), timeout=10)
        tg.push_message(STRANGER, STRANGER, "now may I?")
        await tg.wait_for(lambda: len(said(tg, STRANGER)) == 5, timeout=10)
    lines = said(tg, STRANGER)
    assert lines[1] == "Only an approver of this bot can approve a pairing code."
    assert codes(lines[2:3]) == [code]  # refused: still pending, still theirs
    assert said(tg, OWNER) == [f"Approved User{STRANGER} ({STRANGER}): they may now talk to 'bot' here."]
    assert lines[3:] == ["You were approved. Send your message again.", "bot-model: now may I?"]
    assert audit_actions(path) == [
        ("offered", str(STRANGER)), ("refused", str(STRANGER)), ("approved", str(STRANGER)),
    ]


async def test_an_admitted_sender_who_is_no_approver_cannot_decide_a_code(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    toml = pairing_toml(fake_llm, tg).replace(f'senders = ["{OWNER}"]', f'senders = ["{OWNER}", "8"]')
    path = write_config(toml)
    async with daemon(path):
        tg.push_message(STRANGER, STRANGER, "let me in")
        await tg.wait_for(lambda: codes(said(tg, STRANGER)), timeout=10)
        (code,) = codes(said(tg, STRANGER))
        tg.push_message(8, 8, f"/pairing approve {code}")
        tg.push_message(8, 8, "/pairing approve ZZZZZZZZ")  # a guess gets the very same line
        await tg.wait_for(lambda: len(said(tg, 8)) == 2, timeout=10)
        tg.push_message(STRANGER, STRANGER, "in yet?")
        await tg.wait_for(lambda: len(said(tg, STRANGER)) == 2, timeout=10)
    assert said(tg, 8) == [
        f"There is no pending pairing code {code} that you may decide.",
        "There is no pending pairing code ZZZZZZZZ that you may decide.",
    ]
    assert codes(said(tg, STRANGER)) == [code, code] and fake_llm.requests == []


async def test_the_cli_lists_approves_denies_and_revokes_while_the_daemon_runs(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(pairing_toml(fake_llm, tg))
    fake_llm.default = echo_model

    def pairing(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = cli.main(["pairing", "--config", str(path), *args])
        return code, capsys.readouterr().out

    async with daemon(path):
        for stranger in (STRANGER, 98):
            tg.push_message(stranger, stranger, "hi")
        await tg.wait_for(lambda: codes(said(tg, STRANGER)) and codes(said(tg, 98)), timeout=10)
        (mine,), (theirs,) = codes(said(tg, STRANGER)), codes(said(tg, 98))
        rc, out = pairing("list", "--json")
        listed = json.loads(out)
        assert rc == 0 and {c["code"]: c["sender"] for c in listed["pending"]} == {mine: str(STRANGER), theirs: "98"}
        assert pairing("approve", mine)[0] == 0 and pairing("deny", theirs)[0] == 0
        assert pairing("approve", theirs)[0] == 1  # decided: no longer pending
        tg.push_message(STRANGER, STRANGER, "paired now")
        await tg.wait_for(lambda: "bot-model: paired now" in said(tg, STRANGER), timeout=10)
        rc, out = pairing("list")
        assert rc == 0 and "pending codes: 0" in out and f"tg:{STRANGER}  route tg|*|bot" in out
        assert cli.main(["route", "tg", "--chat", str(STRANGER), "--sender", str(STRANGER), "--config", str(path)]) == 0
        assert "sender: paired by an approver; strangers: pair" in capsys.readouterr().out
        assert pairing("revoke", "tg", str(STRANGER))[0] == 0
        tg.push_message(STRANGER, STRANGER, "and now?")  # revoked: a stranger again, at once
        await tg.wait_for(lambda: len(codes(said(tg, STRANGER))) == 2, timeout=10)
        assert pairing("revoke", "tg", str(STRANGER))[0] == 1
        assert cli.main(["route", "tg", "--chat", str(STRANGER), "--sender", str(STRANGER), "--config", str(path)]) == 1
        assert 'routes[0] (strangers = "pair") answers with a pairing code' in capsys.readouterr().out
    assert [r["messages"][-1]["content"] for r in fake_llm.requests] == ["paired now"]
    assert audit_actions(path) == [
        ("offered", str(STRANGER)), ("offered", "98"), ("approved", str(STRANGER)), ("denied", "98"),
        ("revoked", str(STRANGER)), ("offered", str(STRANGER)),
    ]


async def test_slack_a_stranger_is_paired_by_the_route_approver_in_their_own_dm(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    toml = slack_toml(fake_llm, slack).replace(
        f'approvers = ["{SLACK_CAROL}"]\n', f'approvers = ["{SLACK_CAROL}"]\nstrangers = "pair"\n'
    )
    path = write_config(toml)
    fake_llm.default = echo_model
    async with daemon(path):
        await slack.push_message("hello?", user="U0DAVE", channel="D0DAVE")
        asked = await wait_text(slack, "pairing code is")
        (code,) = codes([asked["text"]])
        await slack.push_message(f"/pairing approve {code}", user="U0DAVE", channel="D0DAVE")
        await wait_text(slack, "Only an approver of this bot")
        await slack.push_message(f"/pairing approve {code}", user=SLACK_CAROL, channel="D0CAROL")
        approved = await wait_text(slack, "Approved U0DAVE")
        await wait_text(slack, "You were approved")
        await slack.push_message("now?", user="U0DAVE", channel="D0DAVE")
        answer = await wait_text(slack, "ops-model: now?")
    assert (asked["channel"], approved["channel"], answer["channel"]) == ("D0DAVE", "D0CAROL", "D0DAVE")
    assert [r["messages"][-1]["content"] for r in fake_llm.requests] == ["now?"]
