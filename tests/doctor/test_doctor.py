"""`orchestrator check --connect`, the doctor: each test is a newcomer's step it used to pass."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from orchestrator import cli
from tests.conftest import WriteConfig
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.mcp.kit import bundle, stdio_kit

AGENT = '[agents.a]\nprovider = "p"\nmodel = "{model}"\n'


def provider(url: str, *, kind: str = "openai", extra: str = "") -> str:
    return f'[providers.p]\nkind = "{kind}"\nbase_url = "{url}"\nmax_retries = 0\n{extra}'


async def doctor(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], list[str]]:
    """Run `check --connect` off this loop (it runs its own); return (code, stdout lines, stderr lines)."""
    code = await asyncio.to_thread(cli.main, ["check", "--connect", "--config", str(path)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def ok_line(path: Path, *, channels: int = 0, routes: int = 0) -> str:
    return f"{path}: ok (1 agents, 1 providers, {channels} channels, {routes} routes)"


async def test_no_model_server_running_is_a_problem_naming_the_override_variables(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], unused_tcp_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ORCHESTRATOR_BASE_URL", raising=False)
    # The newcomer ran `check --connect` with no model server up: it printed `ok`.
    url = f"http://127.0.0.1:{unused_tcp_port}/v1"
    path = write_config(
        provider(url, extra=(
            'base_url_env = "ORCHESTRATOR_BASE_URL"\napi_key_env = "ORCHESTRATOR_API_KEY"\nmodel_env = "ORCHESTRATOR_MODEL"\n'
        ))
        + AGENT.format(model="m")
    )
    code, out, err = await doctor(path, capsys)
    assert code == 1 and out == []
    (line,) = err
    assert line.startswith(f"{path}: providers.p: openai endpoint {url}: cannot connect (")
    assert line.endswith(
        "(check [providers.p] base_url and api_key; environment overrides: ORCHESTRATOR_BASE_URL (base_url), "
        "ORCHESTRATOR_API_KEY (api_key), ORCHESTRATOR_MODEL (model))"
    )
    # With the URL from the environment, the line says where it came from.
    monkeypatch.setenv("ORCHESTRATOR_BASE_URL", url.replace("/v1", "/v2"))
    code, out, err = await doctor(path, capsys)
    assert code == 1 and err[0].startswith(f"{path}: providers.p: openai endpoint {url.replace('/v1', '/v2')}: ")
    assert err[0].endswith("; this URL came from ORCHESTRATOR_BASE_URL)")


async def test_a_base_url_without_v1_gets_a_hint_not_a_bare_404(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI
) -> None:
    origin = fake_llm.base_url.removesuffix("/v1")
    path = write_config(provider(origin) + AGENT.format(model="fake-model"))
    code, out, err = await doctor(path, capsys)
    assert (code, out) == (1, [])
    assert err == [
        f"{path}: providers.p: openai endpoint {origin}: GET /models answered 404; OpenAI-compatible base URLs "
        f"usually end in /v1: try {origin}/v1 (check [providers.p] base_url and api_key)"
    ]


async def test_a_model_the_server_does_not_serve_names_the_agent_key(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI(models=("llama3.2", "qwen3")) as fake:
        path = write_config(provider(fake.base_url, extra='model_env = "ORCHESTRATOR_MODEL"\n') + AGENT.format(model="llama3.3"))
        code, out, err = await doctor(path, capsys)
        assert (code, out) == (1, [])
        assert err == [
            f"{path}: agents.a.model: model 'llama3.3' is not served by provider 'p' at {fake.base_url} "
            "(did you mean 'llama3.2'?); ORCHESTRATOR_MODEL overrides it"
        ]
        # The override the message names is what the doctor asks about.
        monkeypatch.setenv("ORCHESTRATOR_MODEL", "qwen3")
        code, out, err = await doctor(path, capsys)
        assert (code, err) == (0, [])
        assert out == [f"provider p (openai) at {fake.base_url}: serves qwen3", ok_line(path)]


async def test_the_anthropic_kind_is_asked_for_its_model_with_the_key(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeAnthropic(api_key="sk-ant-test", models=("claude-sonnet-4-5",)) as fake:
        monkeypatch.setenv("ANT_KEY", "sk-ant-test")
        extra = 'api_key = "env:ANT_KEY"\n'
        path = write_config(provider(fake.base_url, kind="anthropic", extra=extra) + AGENT.format(model="claude-sonnet-4-5"))
        code, out, err = await doctor(path, capsys)
        assert (code, err) == (0, [])
        assert out == [f"provider p (anthropic) at {fake.base_url}: serves claude-sonnet-4-5", ok_line(path)]

        path = write_config(provider(fake.base_url, kind="anthropic", extra=extra) + AGENT.format(model="claude-sonet-4-5"))
        code, out, err = await doctor(path, capsys)
        assert (code, out) == (1, [])
        assert err == [
            f"{path}: agents.a.model: model 'claude-sonet-4-5' is not served by provider 'p' at {fake.base_url}"
        ]

        monkeypatch.setenv("ANT_KEY", "sk-ant-wrong")
        code, out, err = await doctor(path, capsys)
        assert (code, out) == (1, [])
        assert err == [
            f"{path}: providers.p: anthropic endpoint {fake.base_url}: GET /v1/models answered 401 "
            "(check [providers.p] base_url and api_key)"
        ]


async def test_every_secret_is_resolved_here_and_a_missing_variable_names_the_key(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NO_SUCH_TG_TOKEN", raising=False)
    path = write_config(
        provider(fake_llm.base_url, extra='api_key = "file:missing.key"\n') + AGENT.format(model="fake-model")
        + '[channels.tg]\nkind = "telegram"\ntoken = "env:NO_SUCH_TG_TOKEN"\n'
    )
    code, out, err = await doctor(path, capsys)
    assert (code, out) == (1, [])
    assert err == [
        f"{path}: providers.p.api_key: 'file:missing.key': cannot read {path.parent / 'missing.key'}: "
        "No such file or directory",
        f"{path}: channels.tg.token: 'env:NO_SUCH_TG_TOKEN': environment variable NO_SUCH_TG_TOKEN is not set",
    ]


async def test_each_channel_is_connected_once_with_its_token(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with FakeTelegram(username="ops_bot") as tg, FakeSlack() as slack, FakeDiscord() as dc:
        monkeypatch.setenv("TG", tg.token)
        monkeypatch.setenv("SLACK_BOT", slack.bot_token)
        monkeypatch.setenv("SLACK_APP", slack.app_token)
        monkeypatch.setenv("DC", dc.token)
        channels = (
            f'[channels.tg]\nkind = "telegram"\ntoken = "env:TG"\napi_base_url = "{tg.api_base_url}"\n'
            f'[channels.sl]\nkind = "slack"\nbot_token = "env:SLACK_BOT"\napp_token = "env:SLACK_APP"\n'
            f'api_base_url = "{slack.api_base_url}"\n'
            f'[channels.dc]\nkind = "discord"\ntoken = "env:DC"\napi_base_url = "{dc.api_base_url}"\n'
            '[[routes]]\nchannel = "tg"\nagent = "a"\nsenders = ["*"]\n'
        )
        path = write_config(provider(fake_llm.base_url) + AGENT.format(model="fake-model") + channels)
        code, out, err = await doctor(path, capsys)
        assert (code, err) == (0, [])
        assert out == [
            f"provider p (openai) at {fake_llm.base_url}: serves fake-model",
            "channel tg (telegram): connected as @ops_bot",
            "channel sl (slack): connected as bot in Fake",
            "channel dc (discord): connected as fakebot",
            ok_line(path, channels=3, routes=1),
        ]
        assert [c.method for c in slack.requests] == ["auth.test", "apps.connections.open"]

        # Tokens of the right shape the platforms refuse: each refusal is one line naming the channel.
        monkeypatch.setenv("TG", "123:" + "A" * 35)
        monkeypatch.setenv("SLACK_BOT", "xoxb-revoked")
        monkeypatch.setenv("DC", "wrong")
        code, out, err = await doctor(path, capsys)
        assert code == 1 and ok_line(path, channels=3, routes=1) not in out
        assert [line.split(": ", 2)[1] for line in err] == ["channels.tg", "channels.sl", "channels.dc"]
        assert "getMe refused the token (401" in err[0] and "@BotFather" in err[0]
        assert "auth.test refused bot_token (invalid_auth): use the xoxb- token" in err[1]
        assert "/users/@me refused the token (401" in err[2]
        # An app token pasted as the bot token is named before any request: Slack is not asked.
        monkeypatch.setenv("SLACK_BOT", slack.app_token)
        asked = len(slack.requests)
        code, out, err = await doctor(path, capsys)
        assert code == 1 and len(slack.requests) == asked
        assert err[1] == (
            f"{path}: channels.sl.bot_token: this token starts with 'xapp-': bot_token is the Bot User OAuth Token "
            "(OAuth & Permissions), which starts with 'xoxb-'"
        )


async def test_a_route_without_senders_admits_nobody(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI
) -> None:
    path = write_config(
        provider(fake_llm.base_url) + AGENT.format(model="fake-model")
        + '[channels.terminal]\nkind = "terminal"\n[[routes]]\nchannel = "terminal"\nagent = "a"\n'
    )
    code, out, err = await doctor(path, capsys)
    assert (code, out) == (1, [f"provider p (openai) at {fake_llm.base_url}: serves fake-model"])
    assert err == [
        f"{path}: routes[0].senders: empty, so this route admits nobody: list the user ids allowed "
        "(\"*\" = anyone); `orchestrator run` logs `no route ... sender ID` with the id of each sender it refuses"
    ]


async def test_a_route_without_senders_that_pairs_strangers_is_no_problem(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI
) -> None:
    path = write_config(
        provider(fake_llm.base_url) + AGENT.format(model="fake-model")
        + '[channels.terminal]\nkind = "terminal"\n[[routes]]\nchannel = "terminal"\nagent = "a"\nstrangers = "pair"\n'
    )
    code, out, err = await doctor(path, capsys)
    assert (code, err) == (0, [])


async def test_approval_and_exclusion_names_are_matched_against_connected_mcp_tools(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI
) -> None:
    # `auto_approve = ["kit__ecko"]` (an MCP typo) passed every check before.
    path = write_config(
        provider(fake_llm.base_url) + stdio_kit() + bundle("b", servers={"kit": ["*"]})
        + AGENT.format(model="fake-model") + 'mcp_bundles = ["b"]\ntools = ["file_read"]\n'
        + 'excluded_tools = ["kit__wipe_*", "kit__nuke*"]\n'
        + '[agents.a.approval]\nauto_approve = ["kit__ecko", "file_read"]\nalways_ask = ["kit__write_note"]\n'
        + '[sops.s]\nagent = "a"\n[[sops.s.steps]]\nprompt = "go"\ntools = ["kit__echo", "kit__cont"]\n'
        + '[[schedules]]\nname = "n"\nagent = "a"\nprompt = "hi"\ninterval_s = 60\ntools = ["kit__pid", "kit__pdi"]\n'
    )
    code, out, err = await doctor(path, capsys)
    assert code == 1 and out[-1] == f"provider p (openai) at {fake_llm.base_url}: serves fake-model"
    assert err == [
        f"{path}: agents.a.excluded_tools[1]: pattern 'kit__nuke*' matches no tool",
        f"{path}: agents.a.approval.auto_approve[0]: name 'kit__ecko' matches no tool (did you mean 'kit__echo'?)",
        f"{path}: sops.s.steps[0].tools[1]: name 'kit__cont' matches no tool (did you mean 'kit__counts'?)",
        f"{path}: schedules[0].tools[1]: name 'kit__pdi' matches no tool (did you mean 'kit__pid'?)",
    ]


async def test_a_tool_name_is_matched_against_the_agent_that_runs_with_it(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI
) -> None:
    # A SOP step run by agent b named a tool only agent a has: it passed, because every name
    # was matched against all the tools of all the agents; the step then ran with none.
    path = write_config(
        provider(fake_llm.base_url) + AGENT.format(model="fake-model") + 'tools = ["file_read", "list_dir"]\n'
        + '[agents.b]\nprovider = "p"\nmodel = "fake-model"\ntools = ["list_dir"]\nexcluded_tools = ["shell"]\n'
        + '[agents.b.approval]\nauto_approve = ["file_read", "list_dir"]\n'
        + '[sops.s]\nagent = "a"\n[[sops.s.steps]]\nprompt = "go"\ntools = ["file_read"]\n'
        + '[[sops.s.steps]]\nprompt = "sum up"\nagent = "b"\ntools = ["list_dir", "file_read"]\n'
        + '[[schedules]]\nname = "n"\nagent = "b"\nprompt = "hi"\ninterval_s = 60\ntools = ["file_*"]\n'
    )
    code, out, err = await doctor(path, capsys)
    assert code == 1 and not any(": ok (" in line for line in out)
    assert err == [
        f"{path}: agents.b.excluded_tools[0]: name 'shell' matches no tool agent 'b' holds (no agent is granted it)",
        f"{path}: agents.b.approval.auto_approve[0]: name 'file_read' matches no tool agent 'b' holds "
        "(agent 'a' holds it)",
        f"{path}: sops.s.steps[1].tools[1]: name 'file_read' matches no tool agent 'b' holds (agent 'a' holds it)",
        f"{path}: schedules[0].tools[0]: pattern 'file_*' matches no tool agent 'b' holds (agent 'a' holds it)",
    ]


async def test_ok_is_printed_last_and_only_when_everything_passed(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI
) -> None:
    # `--connect` printed `ok` first, then the problems it found, then exited 1.
    broken = '[mcp.servers.broken]\ntransport = "stdio"\ncommand = "/nonexistent/mcp-server"\n'
    path = write_config(provider(fake_llm.base_url) + broken + AGENT.format(model="fake-model"))
    code, out, err = await doctor(path, capsys)
    assert code == 1
    assert not any(": ok (" in line for line in out)
    assert err == [f"{path}: mcp.servers.broken: cannot connect: cannot start the command: No such file or directory"]
    path = write_config(provider(fake_llm.base_url) + AGENT.format(model="fake-model"))
    code, out, err = await doctor(path, capsys)
    assert (code, err) == (0, [])
    assert out[-1] == ok_line(path)


async def test_a_fallback_link_is_a_provider_in_use_and_its_model_is_checked(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI
) -> None:
    async with FakeAnthropic(models=("claude-haiku-4-5",)) as hosted:
        path = write_config(
            provider(fake_llm.base_url)
            + f'[providers.hosted]\nkind = "anthropic"\nbase_url = "{hosted.base_url}"\n'
            + AGENT.format(model="fake-model")
            + '[[agents.a.fallback]]\nprovider = "hosted"\nmodel = "claude-haiku-4-6"\n'
        )
        code, out, err = await doctor(path, capsys)
        url = hosted.base_url
    assert (code, out) == (1, [f"provider p (openai) at {fake_llm.base_url}: serves fake-model"])
    assert err == [f"{path}: agents.a.fallback[0].model: model 'claude-haiku-4-6' is not served by provider 'hosted' at {url}"]


async def test_a_discord_bot_without_the_message_content_intent_is_a_problem(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], fake_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The doctor never opens a gateway session, so an intent left off passed it; the daemon then
    # failed at start with close 4014. The application's flags tell without connecting.
    async with FakeDiscord() as dc:
        monkeypatch.setenv("DC", dc.token)
        path = write_config(
            provider(fake_llm.base_url) + AGENT.format(model="fake-model")
            + f'[channels.dc]\nkind = "discord"\ntoken = "env:DC"\napi_base_url = "{dc.api_base_url}"\n'
        )
        code, out, err = await doctor(path, capsys)
        assert (code, err) == (0, [])
        assert out[-2:] == ["channel dc (discord): connected as fakebot", ok_line(path, channels=1)]
        assert [r.path for r in dc.requests] == ["/users/@me", "/applications/@me"]
        assert not dc.gateway_connections

        dc.refuse_privileged_intents = True  # the switch left off on the Developer Portal
        code, out, err = await doctor(path, capsys)
        assert code == 1 and not any(": ok (" in line for line in out)
        assert err == [
            f"{path}: channels.dc: discord: the Message Content intent is off, so the gateway would refuse the "
            "bot (close 4014): enable it under Developer Portal -> your application -> Bot -> Privileged Gateway "
            "Intents -> Message Content Intent"
        ]
        assert not dc.gateway_connections
