"""The gateway over real HTTP, in a running Runtime on 127.0.0.1:0, with the fake LLM."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.config import Config, GatewayConfig, SecretRef
from orchestrator.errors import ConfigError
from orchestrator.gateway import GatewayError, open_gateway
from orchestrator.policy import Interactivity
from orchestrator.daemon import Runtime
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.openai_server import status as status_reply
from tests.gateway.kit import AUTH, TOKEN, call, gateway_toml, serving, write


async def test_every_endpoint_needs_the_bearer_token_and_errors_are_json(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with serving(write(tmp_path, gateway_toml(fake_llm.base_url))) as (_, gw):
        for path in ("/health", "/api/agents", "/api/agents/ops/tools", "/api/agents/ops/policy"):
            status, body, headers = await call(gw, "GET", path, headers={})
            assert (status, body["error"]) == (401, "unauthorized"), path
            assert headers["WWW-Authenticate"].startswith("Bearer")
        for wrong in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN):
            status, body, _ = await call(gw, "POST", "/api/agents/ops/messages",
                                         headers={"Authorization": wrong}, json={"text": "hi"})
            assert status == 401, wrong
        status, body, _ = await call(gw, "GET", "/api/agents")
        assert status == 200
        assert body == {"agents": [
            {"agent": "intern", "provider": "fake", "model": "intern-model", "autonomy": "read_only"},
            {"agent": "ops", "provider": "fake", "model": "ops-model", "autonomy": "supervised"},
        ]}
        assert (await call(gw, "GET", "/api/agents/nobody/tools"))[:2] == (
            404, {"error": "unknown_agent", "detail": "unknown agent 'nobody' (configured: intern, ops)"}
        )
        status, body, _ = await call(gw, "GET", "/nope")
        assert (status, body["error"]) == (404, "not_found")
        status, body, headers = await call(gw, "DELETE", "/api/agents")
        assert (status, body["error"]) == (405, "method_not_allowed") and "GET" in headers["Allow"]
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", data=b"{not json")
        assert (status, body["error"]) == (400, "bad_request")
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": "hi", "admin": True})
        assert (status, body["error"]) == (400, "bad_request")
        status, body, _ = await call(gw, "GET", "/api/agents/ops/policy?path=bogus")
        assert (status, body["error"]) == (400, "bad_request")
    assert fake_llm.requests == []  # no turn ran


async def test_listing_is_the_cli_run_registry_minus_peripherals_with_deferred_mcp_marked(
    tmp_path: Path, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, gateway_toml(fake_llm.base_url, mcp=True))
    code = await asyncio.to_thread(cli.main, ["tools", "ops", "--path", "cli_run", "--json", "--config", str(path)])
    assert code == 0
    cli_run = json.loads(capsys.readouterr().out)
    async with serving(path) as (_, gw):
        status, body, _ = await call(gw, "GET", "/api/agents/ops/tools")
        status_intern, intern, _ = await call(gw, "GET", "/api/agents/intern/tools")
    assert status == status_intern == 200
    listed = body["tools"]
    # the declared listing knob: connect_peripherals=False withholds exactly the peripheral tools
    assert [r["name"] for r in listed] == [r["name"] for r in cli_run if not r["name"].startswith("arm__")]
    assert "arm__status" in [r["name"] for r in cli_run]
    by_name = {r["name"]: r for r in listed}
    # deferred MCP tools are listed as activatable, the excluded one is absent, tool_search is there
    assert {n for n, r in by_name.items() if r["deferred"]} == {"kit__echo", "kit__env_value"}
    assert "kit__write_note" not in by_name and "tool_search" in by_name
    assert by_name["shell"]["approval"] == "ask" and by_name["file_read"]["approval"] == "allow"
    for row in cli_run:  # same rows as the CLI where both show them
        if row["name"] in by_name:
            assert {k: by_name[row["name"]][k] for k in row} == row
    # the read_only intern is listed only read-only built-ins: nothing its policy denies
    assert [r["name"] for r in intern["tools"]] == ["file_read", "http_fetch", "list_dir"]


async def test_policy_endpoint_is_the_resolved_gateway_chat_execution(
    tmp_path: Path, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, gateway_toml(fake_llm.base_url))
    code = await asyncio.to_thread(cli.main, ["policy", "ops", "--path", "cli_run", "--json", "--config", str(path)])
    assert code == 0
    cli_run = json.loads(capsys.readouterr().out)
    async with serving(path) as (_, gw):
        status, chat, _ = await call(gw, "GET", "/api/agents/ops/policy")
        _, listing, _ = await call(gw, "GET", "/api/agents/ops/policy?path=listing")
    assert status == 200
    assert chat["path"] == "gateway_chat" and chat["approval"]["interactivity"] == "non_interactive"
    same = {k: v for k, v in cli_run.items() if k not in ("path", "approval")}
    assert {k: v for k, v in chat.items() if k not in ("path", "approval")} == same
    assert {k: v for k, v in chat["approval"].items() if k != "interactivity"} == {
        k: v for k, v in cli_run["approval"].items() if k != "interactivity"
    }
    assert chat["knobs"]["max_tool_iterations"] == 4 and "arm__status" in chat["tools"]
    assert listing["path"] == "listing" and "arm__status" not in listing["tools"]


async def test_chat_turn_is_non_interactive_and_denies_what_needs_approval(
    tmp_path: Path, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution]
) -> None:
    fake_llm.script(tool_call("shell", {"argv": ["echo", "pwned"]}), text("could not run it"), text("second"))
    async with serving(write(tmp_path, gateway_toml(fake_llm.base_url))) as (runtime, gw):
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": "run echo", "session": "s1"})
        assert status == 200
        assert body == {"agent": "ops", "session": "s1", "reply": "could not run it", "stop": "completed", "executed": []}
        status, again, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": "and now?", "session": "s1"})
        assert (status, again["reply"]) == (200, "second")
        assert runtime.services.audit is not None
        decisions = runtime.services.audit.decisions(agent="ops")
    assert [(d["tool"], d["verdict"]) for d in decisions] == [("shell", "no_decision")]
    execution = seen[0]
    assert execution.identity.path is ConstructionPath.GATEWAY_CHAT
    assert execution.approvals.interactivity is Interactivity.NON_INTERACTIVE
    first, second, third = fake_llm.requests
    assert first["tools"] == list(execution.tools.provider_specs())
    assert (first["model"], first["temperature"]) == ("ops-model", 0.2)
    denial = second["messages"][-1]
    assert denial["role"] == "tool" and "no operator decided" in denial["content"]
    # the session's transcript was kept: the second turn carries the first exchange
    assert [m["content"] for m in third["messages"] if m["role"] == "user"] == ["run echo", "and now?"]
    # persisted like channel sessions, under the gateway's own key
    async with serving(tmp_path / "config.toml") as (runtime, _):
        sessions = {key: count for key, _, count in runtime.store.sessions()}
    assert sessions == {"@gateway:ops:s1": 6}  # user, call, denial, reply, user, reply


async def test_idempotency_key_returns_the_first_response_even_after_a_restart(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    path = write(tmp_path, gateway_toml(fake_llm.base_url))
    fake_llm.script(text("only once"))
    headers = {**AUTH, "Idempotency-Key": "order-42"}
    async with serving(path) as (_, gw):
        replies = await asyncio.gather(*(
            call(gw, "POST", "/api/agents/ops/messages", headers=headers, json={"text": "hi"}) for _ in range(3)
        ))
        status, changed, _ = await call(gw, "POST", "/api/agents/ops/messages", headers=headers, json={"text": "other"})
    assert len(fake_llm.requests) == 1  # three concurrent deliveries, one turn
    bodies = [body for _, body, _ in replies]
    assert all(s == 200 for s, _, _ in replies) and bodies[0] == bodies[1] == bodies[2]
    assert bodies[0]["reply"] == "only once" and len(bodies[0]["session"]) == 32
    assert sorted(h.get("Idempotent-Replayed", "-") for _, _, h in replies) == ["-", "true", "true"]
    assert (status, changed["error"]) == (422, "idempotency_key_reused")
    async with serving(path) as (_, gw):  # a new process: the stored answer survives
        status, body, headers_out = await call(gw, "POST", "/api/agents/ops/messages", headers=headers, json={"text": "hi"})
    assert (status, body, headers_out["Idempotent-Replayed"]) == (200, bodies[0], "true")
    assert len(fake_llm.requests) == 1


async def test_oversized_body_is_413_and_runs_nothing(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    gateway = 'port = 0\ntoken = "file:gateway.token"\nmax_body_bytes = 1024\n'
    async with serving(write(tmp_path, gateway_toml(fake_llm.base_url, gateway=gateway))) as (_, gw):
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": "x" * 2000})
        assert (status, body["error"]) == (413, "payload_too_large")
        fake_llm.script(text("fits"))
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": "x" * 900})
        assert (status, body["reply"]) == (200, "fits")
    assert len(fake_llm.requests) == 1


async def test_health_reports_channels_and_mcp_servers(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    from tests.daemon.harness import running

    path = write(tmp_path, gateway_toml(fake_llm.base_url, mcp=True) + '\n[channels.term]\nkind = "terminal"\n')
    async with running(path) as (runtime, _), open_gateway(runtime) as gw:
        assert gw is not None
        status, body, _ = await call(gw, "GET", "/health")
        assert status == 200
        assert body == {
            "status": "ok",
            "channels": {"term": {"kind": "terminal", "state": "ready", "ready": True, "error": None}},
            "mcp": [{"server": "kit", "agent": None, "state": "ready", "ready": True, "error": None}],
        }
        runtime.stop_accepting()  # stopping: health says so and chat refuses
        status, body, _ = await call(gw, "GET", "/health")
        assert (status, body["status"]) == (503, "stopping")
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": "hi"})
        assert (status, body["error"]) == (503, "unavailable")
    assert fake_llm.requests == []


async def test_non_loopback_without_token_is_refused_by_check_and_at_start(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    path = write(tmp_path, gateway_toml(fake_llm.base_url, gateway='listen = "0.0.0.0"\nport = 0\n'))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert [p.path for p in caught.value.problems] == ["gateway.listen"]
    assert "not a loopback address" in str(caught.value)
    # a config built without the loader's checks still cannot open the gateway
    config = Config(gateway=GatewayConfig(listen="0.0.0.0", port=0), daemon={"state_dir": str(tmp_path / "state")})
    async with Runtime.open(config) as runtime:
        with pytest.raises(GatewayError, match="non-loopback address without gateway.token"):
            async with open_gateway(runtime):
                pass
    # nor with a token shorter than 32 characters (read when the gateway opens)
    (tmp_path / "short.token").write_text("y" * 31 + "\n", encoding="utf-8")
    short = Config(
        gateway=GatewayConfig(listen="0.0.0.0", port=0, token=SecretRef("file:short.token")),
        daemon={"state_dir": str(tmp_path / "state")},
    )
    async with Runtime.open(short, config_path=tmp_path / "config.toml") as runtime:
        with pytest.raises(GatewayError, match="gateway.token: the token is 31 characters; use at least 32"):
            async with open_gateway(runtime):
                pass
    # loopback without a token is allowed and needs no Authorization header
    write(tmp_path, gateway_toml(fake_llm.base_url, gateway="port = 0\n"))
    async with serving(path) as (_, gw):
        status, body, _ = await call(gw, "GET", "/api/agents", headers={})
    assert status == 200 and len(body["agents"]) == 2


async def test_json_nested_too_deep_to_parse_is_400_and_runs_nothing(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with serving(write(tmp_path, gateway_toml(fake_llm.base_url))) as (_, gw):
        deep = '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}"
        status, body, _ = await call(
            gw, "POST", "/api/agents/ops/messages", data=deep, headers={**AUTH, "Content-Type": "application/json"}
        )
        assert (status, body["error"]) == (400, "bad_request")
    assert fake_llm.requests == []


async def test_a_provider_echoing_its_key_is_a_502_with_an_incident_id_only(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-gateway-echo-42424242"
    monkeypatch.setenv("ORCH_TEST_GATEWAY_KEY", key)
    toml = gateway_toml(fake_llm.base_url).replace("max_retries = 0\n", 'max_retries = 0\napi_key = "env:ORCH_TEST_GATEWAY_KEY"\n', 1)
    fake_llm.refuse_key = True
    async with serving(write(tmp_path, toml)) as (runtime, gw):
        headers = {**AUTH, "Idempotency-Key": "k1"}
        status, body, _ = await call(gw, "POST", "/api/agents/ops/messages", json={"text": "hi", "session": "s1"}, headers=headers)
        state = runtime.config.state_path()
        stored = b"".join(p.read_bytes() for p in state.rglob("*.sqlite3*") if p.is_file())
    assert fake_llm.authorizations == [f"Bearer {key}"]
    assert (status, body["error"], body["stop"]) == (502, "provider_error", "provider_error")
    incident = body["incident"]
    assert body["detail"] == body["reply"] == (
        f"Sorry, the model provider failed (incident {incident}); the operator can find the details in the log."
    )
    assert key not in json.dumps(body) and fake_llm.base_url not in json.dumps(body)
    # the stored idempotent response and the session transcript hold the generic line only
    assert incident.encode() in stored and key.encode() not in stored and b"Incorrect API key" not in stored


async def test_a_failed_turns_apology_is_not_sent_to_the_model_on_the_next_turn(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(status_reply(500), text("fine now"))
    async with serving(write(tmp_path, gateway_toml(fake_llm.base_url))) as (_, gw):
        for key, message in (("k1", "first"), ("k2", "second")):
            headers = {**AUTH, "Idempotency-Key": key}
            code, body, _ = await call(
                gw, "POST", "/api/agents/ops/messages", json={"text": message, "session": "s1"}, headers=headers
            )
    assert (code, body["reply"]) == (200, "fine now")
    said = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] in ("user", "assistant")]
    assert said == ["first", "second"]
