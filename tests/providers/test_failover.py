"""Failover chains through real entry points: real providers of both kinds against their loopback fakes."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from collections.abc import AsyncIterator

import pytest

import orchestrator
from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.engine import StopReason
from orchestrator.errors import ConfigError, ProviderUnavailable
from orchestrator.providers import ProviderPool
from orchestrator.seam import Services, build_cli_run
from tests.conftest import WriteConfig
from tests.fakes import anthropic_api, openai_server
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.providers.kit import Pieces

KEY = "sk-ant-failover-key"
KEY_ENV = "ORCHESTRATOR_FAILOVER_TEST_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def chain_toml(
    primary: str,
    local: str,
    *,
    primary_timeout_s: float = 30.0,
    turn_timeout_s: float = 30.0,
    extra_links: str = "",
) -> str:
    """An Anthropic primary (`claude`) falling back to an OpenAI-compatible one (`local`)."""
    return f"""
[providers.claude]
kind = "anthropic"
base_url = "{primary}"
api_key_env = "{KEY_ENV}"
max_retries = 0
timeout_s = {primary_timeout_s}

[providers.local]
base_url = "{local}"
max_retries = 0

{extra_links}

[agents.ops]
provider = "claude"
model = "claude-x"
fallback = [{{ provider = "local", model = "qwen" }}]
system_prompt = "Be brief."

[agents.ops.budget]
turn_timeout_s = {turn_timeout_s}
"""


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=KEY, default=None) as fake:
        yield fake


@pytest.fixture
async def local() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(default=None) as fake:
        yield fake


def closed_port_url() -> str:
    # A port nothing listens on: bound, then released, so connecting is refused.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("status", [429, 500, 529])
async def test_a_structured_failure_of_the_primary_fails_over_to_the_next_link(
    status: int, write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    claude.script(anthropic_api.error(status, message="overloaded, try later"))
    local.script(openai_server.text("from the local model"))
    path = write_config(chain_toml(claude.base_url, local.base_url))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        result = await agent.run("hello")
    assert (result.text, result.stop) == ("from the local model", StopReason.COMPLETED)
    assert (result.provider, result.model, result.failed_over) == ("local", "qwen", True)
    assert len(claude.requests) == 1 and claude.requests[0]["model"] == "claude-x"
    [asked] = local.requests
    assert asked["model"] == "qwen"  # the link's own model
    assert asked["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]


async def test_an_answering_primary_is_named_and_no_fallback_is_asked(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    claude.script(anthropic_api.text("from claude"))
    path = write_config(chain_toml(claude.base_url, local.base_url))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        result = await agent.run("hello")
    assert (result.text, result.provider, result.model, result.failed_over) == ("from claude", "claude", "claude-x", False)
    assert local.requests == []


async def test_a_turn_without_a_chain_names_its_own_provider(write_config: WriteConfig, local: FakeOpenAI) -> None:
    local.script(openai_server.text("alone"))
    path = write_config(f'[providers.local]\nbase_url = "{local.base_url}"\nmax_retries = 0\n'
                        '[agents.solo]\nprovider = "local"\nmodel = "qwen"\n')
    async with orchestrator.Agent.from_config(path, "solo") as agent:
        result = await agent.run("hello")
    assert (result.text, result.provider, result.model, result.failed_over) == ("alone", "local", "qwen", False)


@pytest.mark.parametrize("status", [400, 401, 403])
async def test_a_refused_request_never_fails_over(
    status: int, write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    claude.script(anthropic_api.error(status))
    path = write_config(chain_toml(claude.base_url, local.base_url))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        result = await agent.run("hello")
    assert result.stop is StopReason.PROVIDER_ERROR and f"HTTP {status}" in (result.error or "")
    assert (result.provider, result.model, result.failed_over) == (None, None, False)
    assert local.requests == []  # the fallback would have answered: it was never asked


async def test_a_wrong_key_is_refused_without_asking_the_fallback(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    claude.refuse_key = True  # every request gets the API's 401 authentication_error
    path = write_config(chain_toml(claude.base_url, local.base_url))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        result = await agent.run("hello")
    assert result.stop is StopReason.PROVIDER_ERROR and "HTTP 401" in (result.error or "")
    assert local.requests == []


async def test_a_refused_connection_fails_over(write_config: WriteConfig, local: FakeOpenAI) -> None:
    local.script(openai_server.text("still here"))
    path = write_config(chain_toml(closed_port_url(), local.base_url))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        result = await agent.run("hello")
    assert (result.text, result.provider, result.failed_over) == ("still here", "local", True)


async def test_a_primary_that_times_out_fails_over(write_config: WriteConfig, local: FakeOpenAI) -> None:
    async with FakeAnthropic(api_key=KEY, latency_s=5.0) as slow:
        local.script(openai_server.text("in time"))
        path = write_config(chain_toml(slow.base_url, local.base_url, primary_timeout_s=0.2))
        async with orchestrator.Agent.from_config(path, "ops") as agent:
            result = await agent.run("hello")
    assert (result.text, result.provider, result.failed_over) == ("in time", "local", True)


async def test_the_whole_chain_stays_inside_the_turn_timeout(write_config: WriteConfig, local: FakeOpenAI) -> None:
    # The primary would answer after 5 s and its own timeout is 60 s: the turn's 0.3 s ends the chain.
    async with FakeAnthropic(api_key=KEY, latency_s=5.0) as slow:
        path = write_config(chain_toml(slow.base_url, local.base_url, primary_timeout_s=60, turn_timeout_s=0.3))
        async with orchestrator.Agent.from_config(path, "ops") as agent:
            result = await agent.run("hello")
    assert result.stop is StopReason.TIMEOUT and "0.3s" in result.text
    assert local.requests == []  # cancelled inside the primary: no link outlives the turn


async def test_links_are_tried_in_their_order_until_one_answers(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    async with FakeOpenAI(default=None) as hosted:
        extra = f'[providers.hosted]\nbase_url = "{hosted.base_url}"\nmax_retries = 0\n'
        toml = chain_toml(claude.base_url, local.base_url, extra_links=extra).replace(
            'fallback = [{ provider = "local", model = "qwen" }]',
            'fallback = [{ provider = "local", model = "qwen" }, { provider = "hosted", model = "big" }]',
        )
        claude.script(anthropic_api.error(529))
        local.script(openai_server.status(503))
        hosted.script(openai_server.text("third time lucky"))
        async with orchestrator.Agent.from_config(write_config(toml), "ops") as agent:
            result = await agent.run("hello")
        assert (result.text, result.provider, result.model) == ("third time lucky", "hosted", "big")
        assert [len(f.requests) for f in (claude, local, hosted)] == [1, 1, 1]
        # a chain that is spent returns the last link's error, structured
        claude.script(anthropic_api.error(429))
        local.script(openai_server.status(500))
        hosted.script(openai_server.status(502))
        async with orchestrator.Agent.from_config(write_config(toml), "ops") as agent:
            spent = await agent.run("again")
        assert spent.stop is StopReason.PROVIDER_ERROR and "'hosted'" in (spent.error or "")
        assert [len(f.requests) for f in (claude, local, hosted)] == [2, 2, 2]


async def test_a_fallback_of_another_kind_replays_the_tool_calls_of_the_turn(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    """An OpenAI-compatible primary's tool ids (any characters) reach an Anthropic fallback it accepts."""
    toml = f"""
[providers.claude]
kind = "anthropic"
base_url = "{claude.base_url}"
api_key_env = "{KEY_ENV}"
max_retries = 0

[providers.local]
base_url = "{local.base_url}"
max_retries = 0

[agents.ops]
provider = "local"
model = "qwen"
fallback = [{{ provider = "claude", model = "claude-x" }}]
"""
    local.script(
        openai_server.tool_call("no_such_tool", {"q": 1}, id="functions.no_such_tool:0"),
        openai_server.status(500),
    )
    claude.script(anthropic_api.text("done by claude"))
    async with orchestrator.Agent.from_config(write_config(toml), "ops") as agent:
        result = await agent.run("look it up")
    assert (result.text, result.provider, result.failed_over) == ("done by claude", "claude", True)
    assert claude.rejected == []
    [asked] = claude.requests
    use = asked["messages"][1]["content"][0]
    answer = asked["messages"][2]["content"][0]
    assert use["type"] == "tool_use" and answer["type"] == "tool_result"
    assert use["id"] == answer["tool_use_id"] and use["id"].startswith("functions_no_such_tool_0_")


async def test_an_anthropic_primary_hands_its_tool_loop_to_an_openai_fallback(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    claude.script(anthropic_api.tool_use("no_such_tool", {"q": 1}, id="toolu_abc"), anthropic_api.error(529))
    local.script(openai_server.text("finished locally"))
    path = write_config(chain_toml(claude.base_url, local.base_url))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        result = await agent.run("look it up")
    assert (result.text, result.provider, result.failed_over) == ("finished locally", "local", True)
    roles = [(m["role"], m.get("tool_call_id")) for m in local.requests[0]["messages"]]
    assert roles == [("system", None), ("user", None), ("assistant", None), ("tool", "toolu_abc")]


async def test_every_attempt_is_logged_with_its_reason_and_nothing_else(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI, debug_log: io.StringIO
) -> None:
    claude.script(anthropic_api.error(429, message="quota of org-secret exceeded"))
    local.script(openai_server.text("ok"))
    path = write_config(chain_toml(claude.base_url, local.base_url))
    async with orchestrator.Agent.from_config(path, "ops") as agent:
        await agent.run("the private question")
    lines = [line for line in debug_log.getvalue().splitlines() if "failover:" in line]
    assert len(lines) == 2
    assert "claude/claude-x failed (HTTP 429 rate_limit_error); trying local/qwen (link 2 of 2)" in lines[0]
    assert "answered by local/qwen (link 2 of 2)" in lines[1]
    log = "\n".join(lines)
    assert KEY not in log and "org-secret" not in log and "private question" not in log


async def test_no_failover_once_part_of_a_streamed_answer_went_out(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI
) -> None:
    # A fallback would send the answer again from its start: the break is the turn's error.
    config = load_config(write_config(chain_toml(claude.base_url, local.base_url)))
    services = Services(providers=ProviderPool())
    claude.script(anthropic_api.cut_off(anthropic_api.text("half of a long answer"), after=5))
    pieces = Pieces()
    try:
        execution = build_cli_run(config, "ops", services)
        with pytest.raises(ProviderUnavailable):
            await execution.provider.complete(
                model=execution.model.model, messages=[{"role": "user", "content": "hi"}], tools=(),
                temperature=None, on_text=pieces,
            )
        # before any text went out, a stream that fails still fails over
        claude.script(anthropic_api.stream_error(529))
        local.script(openai_server.text("streamed locally"))
        completion = await execution.provider.complete(
            model=execution.model.model, messages=[{"role": "user", "content": "hi"}], tools=(),
            temperature=None, on_text=pieces,
        )
    finally:
        await services.providers.aclose()
    assert pieces.pieces and local.requests and local.requests[0]["stream"] is True
    assert (completion.text, completion.provider, completion.model) == ("streamed locally", "local", "qwen")


async def test_the_cli_names_the_fallback_that_answered(
    write_config: WriteConfig, claude: FakeAnthropic, local: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    claude.script(anthropic_api.error(500))
    local.script(openai_server.text("from the local model"))
    path = write_config(chain_toml(claude.base_url, local.base_url))
    code = await asyncio.to_thread(cli.main, ["agent", "ops", "-m", "hello", "--config", str(path)])
    out, err = capsys.readouterr()
    assert (code, out) == (0, "from the local model\n")
    assert "answered by the fallback local/qwen" in err


def test_an_unknown_fallback_provider_names_the_file_and_the_dotted_key(write_config: WriteConfig) -> None:
    toml = chain_toml("http://127.0.0.1:9", "http://127.0.0.1:9/v1").replace(
        'fallback = [{ provider = "local", model = "qwen" }]',
        'fallback = [{ provider = "local", model = "qwen" }, { provider = "locl", model = "q" },'
        ' { provider = "local", model = "qwen" }]',
    )
    path = write_config(toml)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).splitlines() == [
        f"{path}: agents.ops.fallback[1].provider: unknown provider 'locl' (did you mean 'local'?)",
        f"{path}: agents.ops.fallback[2]: 'local' / 'qwen' repeats fallback[0]; list each link once",
    ]


def test_a_fallback_entry_takes_only_provider_and_model(write_config: WriteConfig) -> None:
    toml = chain_toml("http://127.0.0.1:9", "http://127.0.0.1:9/v1").replace(
        '{ provider = "local", model = "qwen" }', '{ provider = "local", model = "qwen", temprature = 1 }'
    )
    path = write_config(toml)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert f"{path}: agents.ops.fallback[0].temprature: " in str(caught.value)


def test_policy_shows_the_chain(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(chain_toml("http://127.0.0.1:9", "http://127.0.0.1:8/v1"))
    assert cli.main(["policy", "ops", "--json", "--config", str(path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["provider"], shown["model"]) == ("claude", "claude-x")
    assert shown["fallback"] == [
        {"provider": "local", "base_url": "http://127.0.0.1:8/v1", "model": "qwen", "max_output_tokens": 4096}
    ]
    assert cli.main(["policy", "ops", "--config", str(path)]) == 0
    assert 'fallback: [{"provider": "local"' in capsys.readouterr().out


async def test_the_seam_binds_the_chain_and_the_pool_shares_it(write_config: WriteConfig) -> None:
    toml = chain_toml("http://127.0.0.1:9", "http://127.0.0.1:8/v1") + (
        '\n[agents.solo]\nprovider = "local"\nmodel = "qwen"\n'
    )
    config = load_config(write_config(toml))
    pool = ProviderPool()
    services = Services(providers=pool)
    try:
        ops = build_cli_run(config, "ops", services)
        solo = build_cli_run(config, "solo", services)
        assert build_cli_run(config, "ops", Services(providers=pool)).provider is ops.provider  # one chain
        assert [(b.provider, b.model) for b in ops.model.chain] == [("claude", "claude-x"), ("local", "qwen")]
        assert solo.model.chain == (solo.model,)
        assert ops.provider is not solo.provider
    finally:
        await pool.aclose()


async def test_a_pool_watcher_sees_each_link_of_a_chain_with_its_failure(write_config: WriteConfig, local: FakeOpenAI) -> None:
    from collections.abc import Iterator
    from contextlib import contextmanager

    from orchestrator.engine import Transcript, run_tool_call_loop
    from orchestrator.providers import ModelBinding

    seen: list[tuple[str, str, str | None]] = []

    @contextmanager
    def watcher(binding: ModelBinding, model: str) -> Iterator[None]:
        try:
            yield
        except BaseException as exc:
            seen.append((binding.provider, model, type(exc).__name__))
            raise
        seen.append((binding.provider, model, None))

    local.script(openai_server.text("still here"), openai_server.text("unwatched"))
    config = load_config(write_config(chain_toml(closed_port_url(), local.base_url)))
    services = Services(providers=ProviderPool())
    remove = services.providers.watch(watcher)
    execution = build_cli_run(config, "ops", services)
    result = await run_tool_call_loop(execution, Transcript(session="s"), "hello")
    remove()
    await run_tool_call_loop(execution, Transcript(session="s2"), "again")
    await services.providers.aclose()
    assert result.provider == "local"
    assert seen == [("claude", "claude-x", "ProviderUnavailable"), ("local", "qwen", None)]
