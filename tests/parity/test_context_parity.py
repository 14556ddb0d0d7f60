"""`[agents.X.context]` is resolved in the seam: the same on every path; a delegate or SOP step gets its own.

L2: every column of the matrix (channel, CLI, gateway, listing, library, delegate, SOP
step, ACP, schedule) resolves the agent's own context settings; a column resolved with
another agent's context is a gap. L1: on every path that runs turns, the request the
engine sends stays within `max_context_tokens` by the estimate, and a delegated child
turn is sent none of its parent's history or summary.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.engine import Summary, Transcript, run_tool_call_loop
from orchestrator.engine.context import estimate_message, estimate_specs
from orchestrator.seam import PATH_PROFILES, Services, build_channel, build_cli_run, resolve
from orchestrator.seam.matrix import COLUMNS, SETTINGS, MatrixColumn, matrix_columns, parity_matrix, settings_of
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.media.samples import JPEG
from tests.parity.conftest import parity_toml

TURN_PATHS = [p for p, profile in PATH_PROFILES.items() if profile.runs_turns]
OPS_CONTEXT = """
[agents.ops.context]
max_context_tokens = 1500
strategy = "summarize"
keep_recent = 3
summary_model = "ops-summarizer"
summary_timeout_s = 9

[agents.lead]
provider = "fake"
model = "lead-model"
autonomy = "full"
tools = ["delegate"]
delegates = ["ops"]

[agents.lead.context]
max_context_tokens = 90000
strategy = "window"
keep_recent = 20
"""
OPS_OWN = {
    "max_context_tokens": 1500, "strategy": "summarize", "keep_recent": 3,
    "summary_timeout_s": 9.0, "hold_messages": 17 * 4,
}


def context_toml(base_url: str) -> str:
    return parity_toml(base_url) + OPS_CONTEXT


def request_tokens(body: dict[str, Any]) -> int:
    return sum(estimate_message(m) for m in body["messages"]) + estimate_specs(body.get("tools", []))


def test_the_matrix_has_a_context_row_enforced_on_every_path(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(context_toml("http://127.0.0.1:9/v1"))
    assert cli.main(["policy", "matrix", "--json", "--config", str(path)]) == 0
    grid = json.loads(capsys.readouterr().out)
    assert grid["gaps"] == []
    for agent in ("ops", "intern", "lead"):
        assert grid["agents"][agent]["context"] == dict.fromkeys(COLUMNS, "enforced"), agent


async def test_every_path_resolves_the_agents_own_context_never_the_callers(write_config: WriteConfig) -> None:
    config = load_config(write_config(context_toml("http://127.0.0.1:9/v1")))
    services = Services()
    try:
        baseline = build_cli_run(config, "ops", services)
        _, columns = matrix_columns(
            config, "ops", dict.fromkeys(COLUMNS, services), parent="lead", ceiling=baseline.knobs, schedule_tools=None,
        )
        for column in columns:
            context = settings_of(column.execution, ())["context"]
            assert isinstance(context, dict)
            # the delegate and SOP-step columns run under `lead` (90000 tokens, window): ops's own values win
            assert {k: context[k] for k in OPS_OWN} == OPS_OWN, column.label
            assert context["summary_model"] == "fake http://127.0.0.1:9/v1 ops-summarizer", column.label
            assert column.execution.context.summarizer is services.providers.get(column.execution.context.summary_model)
    finally:
        await services.providers.aclose()


def test_a_path_resolved_with_another_agents_context_is_a_gap(write_config: WriteConfig) -> None:
    body = context_toml("http://127.0.0.1:9/v1") + (
        '\n[agents.twin]\nprovider = "fake"\nmodel = "ops-model"\ntemperature = 0.3\nsystem_prompt = "You are ops."\n'
    )
    config = load_config(write_config(body))
    services = Services()
    every_knob = frozenset().union(*SETTINGS.values())
    baseline = build_cli_run(config, "ops", services)
    twin = build_channel(config, "twin", services)
    grid = parity_matrix(baseline, [MatrixColumn(label="channel", execution=twin, declared=every_knob)], ())
    assert grid["context"]["channel"] == "gap"


async def test_l1_no_turn_path_sends_more_than_max_context_tokens(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = load_config(write_config(context_toml(fake_llm.base_url).replace("strategy = \"summarize\"", "strategy = \"window\"")))
    services = Services()
    try:
        for path in TURN_PATHS:
            execution = resolve(config, "ops", path=path, services=services)
            transcript = Transcript(session=path.value)
            for n in range(15):  # far more than 1500 tokens, inside the 17-message cap
                transcript.append({"role": "user", "content": f"q{n} " + "z" * 900})
                transcript.append({"role": "assistant", "content": f"a{n} " + "w" * 900})
            fake_llm.script(tool_call("list_dir", {}), text("ok"))
            await run_tool_call_loop(execution, transcript, "list it")
            for body in fake_llm.requests[-2:]:
                assert request_tokens(body) <= 1500, path
                assert body["messages"][1]["role"] == "user", path
            assert "list it" in json.dumps(fake_llm.requests[-1]["messages"]), path
    finally:
        await services.providers.aclose()


async def test_a_delegated_child_gets_its_own_context_not_the_parents_history_or_summary(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    config = load_config(write_config(context_toml(fake_llm.base_url)))
    services = Services()
    try:
        lead = build_cli_run(config, "lead", services)
        history = Transcript(session="lead-chat", summary=Summary(text="the parent's secret plan", covers=4))
        for n in range(6):
            history.append({"role": "user", "content": f"parent-line-{n} " + "p" * 2000})
            history.append({"role": "assistant", "content": "noted"})
        fake_llm.script(tool_call("delegate", {"agent": "ops", "task": "child task"}), text("child ok"), text("done"))
        result = await run_tool_call_loop(lead, history, "delegate it")
        assert result.text == "done"
    finally:
        await services.providers.aclose()
    parent_first, child, _ = fake_llm.requests
    assert "the parent's secret plan" in parent_first["messages"][0]["content"]  # the parent's own summary
    sent_to_child = json.dumps(child["messages"])
    assert "parent-line" not in sent_to_child and "secret plan" not in sent_to_child
    assert child["model"] == "ops-model" and "child task" in sent_to_child
    assert request_tokens(child) <= 1500  # the child's own budget, not the parent's 90000


async def test_l1_a_turn_with_pictures_stays_within_max_context_tokens_on_every_path(
    fake_llm: FakeOpenAI, write_config: WriteConfig
) -> None:
    body = context_toml(fake_llm.base_url).replace('strategy = "summarize"', 'strategy = "window"')
    body = body.replace("[agents.ops]\n", "[agents.ops]\nvision = true\n", 1)
    body += '\n[agents.ops.media]\naccept = ["image"]\nimage_detail = "low"\n'
    config = load_config(write_config(body))
    services = Services()
    shown: dict[str, int] = {}
    try:
        for path in TURN_PATHS:
            execution = resolve(config, "ops", path=path, services=services)
            workspace = execution.security.workspace
            (workspace / "uploads").mkdir(parents=True, exist_ok=True)
            (workspace / "uploads" / "dot.jpg").write_bytes(JPEG)
            ref = {"kind": "image", "mime": "image/jpeg", "size": len(JPEG), "path": "uploads/dot.jpg"}
            transcript = Transcript(session=path.value)
            for n in range(8):  # each picture 85 tokens at `low`, with text: far more than 1500 in all
                transcript.append({"role": "user", "content": f"q{n} " + "z" * 300, "media": [ref, ref]})
                transcript.append({"role": "assistant", "content": f"a{n} " + "w" * 300})
            fake_llm.script(text("ok"))
            await run_tool_call_loop(execution, transcript, "and these?", media=[ref] * 3)
            sent = fake_llm.requests[-1]
            assert request_tokens(sent) <= 1500, path
            shown[path.value] = sum(
                1 for m in sent["messages"] if isinstance(m["content"], list)
                for part in m["content"] if part["type"] == "image_url"
            )
    finally:
        await services.providers.aclose()
    assert shown["channel"] >= 3  # where the model is shown pictures, they were counted, not left out
