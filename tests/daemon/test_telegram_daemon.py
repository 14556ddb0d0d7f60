"""The daemon with real Telegram adapters (PTB) against the fake Bot API and the fake LLM.

What Telegram shares with the other platforms runs in test_chat_platforms.py; this is Telegram's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.conftest import WriteConfig, provider_toml
from tests.daemon.platforms import daemon, echo_model
from tests.fakes.openai_server import FakeOpenAI, Reply, text, tool_call
from tests.fakes.telegram_api import FakeTelegram

TOKEN_A = "111111:AAA-ops-bot"
TOKEN_B = "222222:BBB-intern-bot"


def two_bots_toml(fake_llm: FakeOpenAI, tg: FakeTelegram) -> str:
    return (
        provider_toml(fake_llm.base_url)
        + """
[agents.ops]
provider = "fake"
model = "ops-model"
system_prompt = "ops"
autonomy = "full"
tools = ["file_write", "list_dir"]

[agents.intern]
provider = "fake"
model = "intern-model"
system_prompt = "intern"
autonomy = "supervised"
tools = ["file_read"]
"""
        + f"""
[channels.ops_bot]
kind = "telegram"
token = "env:TG_OPS"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1

[channels.intern_bot]
kind = "telegram"
token = "env:TG_INTERN"
api_base_url = "{tg.api_base_url}"
poll_timeout_s = 1

[[routes]]
channel = "ops_bot"
agent = "ops"
senders = ["10", "11"]

[[routes]]
channel = "intern_bot"
agent = "intern"
senders = ["*"]
"""
    )




@pytest.fixture
async def tg(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeTelegram]:
    monkeypatch.setenv("TG_OPS", TOKEN_A)
    monkeypatch.setenv("TG_INTERN", TOKEN_B)
    async with FakeTelegram(token=TOKEN_A, username="ops_bot") as fake:
        fake.add_bot(TOKEN_B, username="intern_bot")
        yield fake


def replies(tg: FakeTelegram, token: str) -> list[tuple[int, str]]:
    return [(p["chat_id"], p["text"]) for p in tg.calls("sendMessage", token=token)]


async def test_two_agents_two_bots_no_cross_talk(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    path = write_config(two_bots_toml(fake_llm, tg))
    fake_llm.default = echo_model
    async with daemon(path):
        for i in range(4):
            tg.push_message(10, 10, f"ops question {i}", token=TOKEN_A)
            tg.push_message(20 + i, 20 + i, f"intern question {i}", token=TOKEN_B)
        tg.push_message(99, 99, "stranger to ops", token=TOKEN_A)  # not on the ops allowlist
        await tg.wait_for(lambda: len(replies(tg, TOKEN_A)) == 4 and len(replies(tg, TOKEN_B)) == 4, timeout=20)
    assert sorted(t for _, t in replies(tg, TOKEN_A)) == [f"ops-model: ops question {i}" for i in range(4)]
    assert sorted(replies(tg, TOKEN_B)) == [(20 + i, f"intern-model: intern question {i}") for i in range(4)]
    for request in fake_llm.requests:
        tools = sorted(t["function"]["name"] for t in request.get("tools", []))
        system = request["messages"][0]["content"]
        user_texts = " ".join(m["content"] for m in request["messages"] if m["role"] == "user")
        if request["model"] == "ops-model":
            assert (tools, system) == (["file_write", "list_dir"], "ops") and "intern" not in user_texts
        else:
            assert (tools, system) == (["file_read"], "intern") and "ops question" not in user_texts
    assert all("stranger" not in str(r["messages"]) for r in fake_llm.requests)


async def test_approval_with_telegram_buttons(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    toml = two_bots_toml(fake_llm, tg).replace('autonomy = "full"', 'autonomy = "supervised"')
    path = write_config(toml + '[agents.ops.approval]\ntimeout_s = 20\n')
    async with daemon(path) as runtime:
        workspace = runtime.config.state_path().with_name("state-workspaces") / "ops"
        fake_llm.script(tool_call("file_write", {"path": "ok.txt", "content": "1"}), text("wrote it"))
        tg.push_message(10, 10, "please write", token=TOKEN_A)
        await tg.wait_for(lambda: any("reply_markup" in p for p in tg.calls("sendMessage", token=TOKEN_A)))
        tg.press_button(11, "Deny", token=TOKEN_A)  # 11 may talk to ops but is not an approver
        await tg.wait_for(lambda: any("Only the person who asked" in t for _, t in replies(tg, TOKEN_A)))
        tg.press_button(10, "Approve", token=TOKEN_A)
        await tg.wait_for(lambda: ("wrote it" in [t for _, t in replies(tg, TOKEN_A)]), timeout=10)
        assert (workspace / "ok.txt").read_text() == "1"
    assert tg.calls("answerCallbackQuery", token=TOKEN_A)


async def test_restart_does_not_answer_twice(write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram) -> None:
    path = write_config(two_bots_toml(fake_llm, tg))
    fake_llm.default = echo_model
    async with daemon(path):
        tg.push_message(10, 10, "only once", token=TOKEN_A)
        await tg.wait_for(lambda: len(replies(tg, TOKEN_A)) == 1, timeout=10)
    async with daemon(path):
        tg.push_message(10, 10, "next", token=TOKEN_A)
        await tg.wait_for(lambda: len(replies(tg, TOKEN_A)) == 2, timeout=10)
    assert [t for _, t in replies(tg, TOKEN_A)] == ["ops-model: only once", "ops-model: next"]
    assert len([r for r in fake_llm.requests if r["model"] == "ops-model"]) == 2


async def test_two_agents_with_different_mcp_bundles_never_cross(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    from tests.mcp.kit import bundle, stdio_kit

    toml = two_bots_toml(fake_llm, tg).replace(
        'tools = ["file_write", "list_dir"]', 'tools = ["list_dir"]\nmcp_bundles = ["ops_kit"]'
    ).replace('tools = ["file_read"]', 'tools = ["file_read"]\nmcp_bundles = ["intern_kit"]')
    toml += stdio_kit("kit") + bundle("ops_kit", servers={"kit": ["write_note", "counts"]})
    toml += bundle("intern_kit", servers={"kit": ["echo"]})
    path = write_config(toml)

    def model(request: dict[str, Any]) -> Reply:
        last = request["messages"][-1]
        names = sorted(t["function"]["name"] for t in request.get("tools", []))
        if last["role"] == "tool":
            return text(f"{request['model']} saw: {last['content'][:60]}")
        if request["model"] == "ops-model":
            assert names == ["kit__counts", "kit__write_note", "list_dir"]
            if "count" in last["content"]:
                return tool_call("kit__counts", {})
            return tool_call("kit__write_note", {"text": last["content"]})
        assert names == ["file_read", "kit__echo"]
        # the intern's model tries the ops agent's tool by its exact name
        return tool_call("kit__write_note", {"text": "intern sneaking in"})

    fake_llm.default = model
    async with daemon(path):
        for i in range(3):
            tg.push_message(10, 10, f"note {i}", token=TOKEN_A)
            tg.push_message(30 + i, 30 + i, f"hi {i}", token=TOKEN_B)
        await tg.wait_for(lambda: len(replies(tg, TOKEN_A)) == 3 and len(replies(tg, TOKEN_B)) == 3, timeout=30)
        tg.push_message(10, 10, "count please", token=TOKEN_A)
        await tg.wait_for(lambda: len(replies(tg, TOKEN_A)) == 4, timeout=15)
    intern_replies = [t for _, t in replies(tg, TOKEN_B)]
    assert all("is not available to this agent" in t for t in intern_replies)
    final = [t for _, t in replies(tg, TOKEN_A)][-1]
    assert '"write_note": 3' in final  # the server ran write_note for ops only, never for the intern


async def test_the_daemon_talks_to_the_bot_api_the_environment_names(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/quickstart-telegram.md: init *and the daemon* use ORCHESTRATOR_TELEGRAM_API when set;
    # a config without `api_base_url` is then served there, not by api.telegram.org
    from orchestrator.config import API_ENVS

    monkeypatch.setenv(API_ENVS["telegram"], tg.api_base_url)
    toml = two_bots_toml(fake_llm, tg).replace(f'api_base_url = "{tg.api_base_url}"\n', "")
    assert "api_base_url" not in toml
    fake_llm.default = echo_model
    async with daemon(write_config(toml)):
        tg.push_message(10, 10, "through the variable", token=TOKEN_A)
        await tg.wait_for(lambda: len(replies(tg, TOKEN_A)) == 1, timeout=10)
    assert replies(tg, TOKEN_A) == [(10, "ops-model: through the variable")]
