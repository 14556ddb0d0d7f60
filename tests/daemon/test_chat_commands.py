"""Chat commands are authorised by the route: a stranger on an open route vs `/sop` and approvals.

The daemon runs real Telegram adapters against the fake Bot API. The route admits anyone
(`senders = ["*"]`) to the read-only agent `public`; the SOP `maint` runs agent `ops`,
which may write files. What a stranger types must never make `ops` act on their say-so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orchestrator.store import AuditLog
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.platforms import daemon
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.telegram_api import FakeTelegram

TOKEN = "333333:CCC-public-bot"
STRANGER, APPROVER, GROUP = 99, 7, -1001


def open_route_toml(fake_llm: FakeOpenAI, tg: FakeTelegram, *, route_extra: str = "", ops_autonomy: str = "supervised") -> str:
    return provider_toml(fake_llm.base_url) + f"""
[agents.public]
provider = "fake"
model = "public-model"
autonomy = "read_only"
tools = ["file_read"]

[agents.ops]
provider = "fake"
model = "ops-model"
autonomy = "{ops_autonomy}"
tools = ["file_write"]

[agents.ops.approval]
timeout_s = 20

[sops.maint]
agent = "ops"
[[sops.maint.steps]]
prompt = "Write the maintenance file."

[sops.deploy]
agent = "ops"
[[sops.deploy.steps]]
prompt = "Deploy."
requires_confirmation = true

[sops.faq]
agent = "public"
[[sops.faq.steps]]
prompt = "Answer from the FAQ."

[channels.tg]
kind = "telegram"
token = "env:TG_PUBLIC"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1

[[routes]]
channel = "tg"
agent = "public"
senders = ["*"]
{route_extra}
"""


@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_PUBLIC", TOKEN)
    async with FakeTelegram(token=TOKEN, username="public_bot") as fake:
        yield fake


def said(tg: FakeTelegram) -> list[str]:
    return [p["text"] for p in tg.calls("sendMessage")]


def written(workspace: Path) -> list[str]:
    return sorted(p.name for p in workspace.iterdir()) if workspace.is_dir() else []


async def test_a_sop_the_route_does_not_list_never_runs_a_step(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    # ops needs no approval at all here: only the route stands between the stranger and a write
    path = write_config(open_route_toml(fake_llm, tg, ops_autonomy="full"))
    fake_llm.script(tool_call("file_write", {"path": "pwned.txt", "content": "x"}), text("written"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        tg.push_message(STRANGER, STRANGER, "/sop maint please")
        await tg.wait_for(lambda: len(said(tg)) == 1, timeout=10)
        tg.push_message(STRANGER, STRANGER, "/sop nope")  # an unknown name gets the same answer
        tg.push_message(STRANGER, STRANGER, "/sop")
        await tg.wait_for(lambda: len(said(tg)) == 3, timeout=10)
    assert said(tg) == [
        "SOP 'maint' is not available here (no SOP is available here).",
        "SOP 'nope' is not available here (no SOP is available here).",
        "Usage: /sop NAME [context] (no SOP is available here)",
    ]
    assert fake_llm.requests == [] and written(workspace) == []


async def test_a_listed_sop_runs_and_the_answer_names_only_what_the_route_grants(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(open_route_toml(fake_llm, tg, route_extra='sops = ["faq"]'))
    fake_llm.script(text("the FAQ says yes"))
    async with daemon(path):
        tg.push_message(STRANGER, STRANGER, "/sop faq can I?")
        await tg.wait_for(lambda: "the FAQ says yes" in said(tg), timeout=10)
        tg.push_message(STRANGER, STRANGER, "/sop maint")
        await tg.wait_for(lambda: len(said(tg)) == 2, timeout=10)
    assert said(tg)[1] == "SOP 'maint' is not available here (available here: faq)."
    assert [r["model"] for r in fake_llm.requests] == ["public-model"]
    assert fake_llm.requests[0]["messages"][-1]["content"].endswith("can I?")


async def test_another_agents_step_is_approved_by_the_route_approvers_only(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(open_route_toml(fake_llm, tg, route_extra=f'approvers = ["{APPROVER}"]\nsops = ["maint"]'))
    fake_llm.script(tool_call("file_write", {"path": "maint.txt", "content": "done"}), text("maintenance written"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        tg.push_message(GROUP, STRANGER, "/sop maint please", chat_type="group")
        await tg.wait_for(lambda: any("reply_markup" in p for p in tg.calls("sendMessage")), timeout=10)
        prompt = next(p for p in tg.calls("sendMessage") if "reply_markup" in p)
        assert prompt["chat_id"] == GROUP and "file_write" in prompt["text"]
        request = prompt["text"].split("/approve ")[1].split()[0]
        assert f"Approval {request} is for agent 'ops': only a route approver ({APPROVER}) can answer it." in said(tg)
        refused = "Only a route approver can answer this approval: it is for a step of agent 'ops'."
        tg.press_button(STRANGER, "Approve")  # the requester's own button press ...
        await tg.wait_for(lambda: said(tg).count(refused) == 1, timeout=10)
        tg.push_message(GROUP, STRANGER, f"/approve {request}", chat_type="group")  # ... and typed /approve
        await tg.wait_for(lambda: said(tg).count(refused) == 2, timeout=10)
        assert written(workspace) == []
        tg.press_button(APPROVER, "Approve")
        await tg.wait_for(lambda: "maintenance written" in said(tg), timeout=10)
        assert (workspace / "maint.txt").read_text() == "done"
    with AuditLog(runtime.config.state_path() / "audit.sqlite3") as audit:
        decided = [(r["verdict"], r["decided_by"]) for r in audit.decisions(agent="ops")]
    assert decided == [("approved", f"tg:{APPROVER}")]


async def test_without_route_approvers_another_agents_step_is_denied_and_nobody_is_asked(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(open_route_toml(fake_llm, tg, route_extra='sops = ["maint", "deploy"]'))
    fake_llm.script(tool_call("file_write", {"path": "maint.txt", "content": "x"}), text("could not write"))
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        tg.push_message(STRANGER, STRANGER, "/sop maint")
        await tg.wait_for(lambda: "could not write" in said(tg), timeout=10)
        tg.push_message(STRANGER, STRANGER, "/sop deploy now")
        await tg.wait_for(lambda: any(t.startswith("SOP 'deploy' stopped") for t in said(tg)), timeout=10)
    assert not any("reply_markup" in p for p in tg.calls("sendMessage"))  # no prompt anyone could press
    assert any("only a route approver may answer it and this route has none" in t for t in said(tg))
    assert "not run" in fake_llm.requests[1]["messages"][-1]["content"]  # the tool result the model saw
    assert "nobody confirmed it" in said(tg)[-1]
    assert len(fake_llm.requests) == 2 and written(workspace) == []  # deploy's step never reached ops's model
    with AuditLog(runtime.config.state_path() / "audit.sqlite3") as audit:
        decided = [(r["verdict"], r["decided_by"]) for r in audit.decisions(agent="ops")]
    assert decided == [("no_decision", None), ("no_decision", None)]


async def test_help_lists_what_this_route_grants_and_nothing_more(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(open_route_toml(fake_llm, tg, route_extra='sops = ["faq"]'))
    async with daemon(path):
        tg.push_message(STRANGER, STRANGER, "/help")
        await tg.wait_for(lambda: len(said(tg)) == 1, timeout=10)
    [shown] = said(tg)
    assert shown.splitlines() == [
        "Commands here:",
        "/new - start a new session",
        "/stop - stop what is running in this session",
        "/usage - your token usage with this agent",
        "/help - this list",
        "/compact - fold older messages into a summary now",
        "/sop NAME [context] - run an SOP",
        "/approve ID - allow a tool call you were asked about",
        "/deny ID - refuse it",
        "/show ID - the whole call of an approval you may answer",
        "/whoami - your user id and this chat's id",
        "SOPs here: faq",
        "Anything else is a message to the agent.",
    ]
    assert "maint" not in shown and "deploy" not in shown  # SOPs the route does not list stay unnamed
    assert fake_llm.requests == []


async def test_a_route_without_sops_offers_no_sop_in_help(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(open_route_toml(fake_llm, tg))
    async with daemon(path):
        tg.push_message(STRANGER, STRANGER, "/help")
        await tg.wait_for(lambda: len(said(tg)) == 1, timeout=10)
    assert "/sop" not in said(tg)[0] and "SOPs here" not in said(tg)[0]


@pytest.mark.parametrize("typed", ["/approve", "/deny", "/approve a b", "/approve \u200bx", "/DENY"])
async def test_a_malformed_approve_gets_a_usage_line_and_never_reaches_the_model(
    typed: str, write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(open_route_toml(fake_llm, tg))
    async with daemon(path):
        tg.push_message(STRANGER, STRANGER, typed)
        await tg.wait_for(lambda: len(said(tg)) == 1, timeout=10)
    assert said(tg) == ["Usage: /approve ID or /deny ID, with the ID from the approval prompt."]
    assert fake_llm.requests == []
