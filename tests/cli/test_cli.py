"""The CLI through its real entry points: subprocesses for start-up behaviour, main() for the rest."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import cli
from tests.conftest import WriteConfig, provider_toml
from tests.fakes.openai_server import FakeOpenAI, text, tool_call

ROOT = Path(__file__).resolve().parents[2]


def orchestrator(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        input=stdin,
        timeout=30,
    )


def test_help_is_fast_and_imports_nothing_heavy() -> None:
    done = orchestrator("--help")
    assert done.returncode == 0 and "agent" in done.stdout
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, orchestrator.cli; print(sorted(m for m in ('openai', 'pydantic', 'aiohttp', 'loguru') if m in sys.modules))"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )
    assert probe.stdout.strip() == "[]"


def test_check_ok_and_errors(write_config: WriteConfig) -> None:
    good = write_config('[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\n')
    done = orchestrator("check", "--config", str(good))
    assert (done.returncode, done.stdout) == (0, f"{good}: ok (1 agents, 1 providers, 0 channels, 0 routes)\n")
    bad = write_config('[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "q"\nmodel = "m"\ntools = ["nope"]\n')
    done = orchestrator("check", "--config", str(bad))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"{bad}: agents.a.provider: unknown provider 'q'",
        f"{bad}: agents.a.tools[0]: unknown tool 'nope'",
    ]
    assert "Traceback" not in done.stderr


def test_config_from_environment_variable(write_config: WriteConfig) -> None:
    path = write_config('[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n')
    done = orchestrator("check", env={"ORCHESTRATOR_CONFIG": str(path)})
    assert done.returncode == 0 and str(path) in done.stdout


def test_unreachable_provider_is_one_clear_line(write_config: WriteConfig, unused_tcp_port: int) -> None:
    url = f"http://127.0.0.1:{unused_tcp_port}/v1"
    path = write_config(f'[providers.local]\nbase_url = "{url}"\nmax_retries = 0\n[agents.a]\nprovider = "local"\nmodel = "m"\n')
    done = orchestrator("agent", "a", "-m", "hi", "--config", str(path))
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot reach provider 'local' at {url}")
    assert "base_url" in line


def test_unknown_agent_is_an_error_line(write_config: WriteConfig) -> None:
    path = write_config('[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\n')
    done = orchestrator("tools", "ghost", "--config", str(path))
    assert (done.returncode, done.stderr) == (1, "error: unknown agent 'ghost' (configured: a)\n")


async def test_agent_turn_in_a_real_process(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    path = write_config(
        provider_toml(fake_llm.base_url)
        + '[agents.a]\nprovider = "fake"\nmodel = "m"\ntools = ["file_write"]\n'
    )
    fake_llm.script(tool_call("file_write", {"path": "note.txt", "content": "x"}), text("could not write"))
    done = await asyncio.to_thread(orchestrator, "agent", "a", "-m", "write a note", "--config", str(path))
    assert (done.returncode, done.stdout) == (0, "could not write\n")
    # not a TTY: supervised file_write needs approval, nobody can give it, so it never ran
    assert not (path.parent / "state-workspaces" / "a" / "note.txt").exists()
    tool_msg = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "no operator decided" in tool_msg["content"]


def test_tools_and_policy_output(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(
        '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[agents.a]\nprovider = "p"\nmodel = "m"\ntools = ["file_read", "shell"]\n'
        '[agents.a.approval]\nauto_approve = ["file_read"]\n'
    )
    assert cli.main(["tools", "a", "--json", "--config", str(path)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [{k: r[k] for k in ("name", "source", "read_only", "approval", "deferred")} for r in rows] == [
        {"name": "file_read", "source": "builtin", "read_only": True, "approval": "allow", "deferred": False},
        {"name": "shell", "source": "builtin", "read_only": False, "approval": "ask", "deferred": False},
    ]
    assert rows[0]["description"] == "Read a UTF-8 text file from the agent workspace."
    assert cli.main(["tools", "a", "--config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "shell      builtin    writes     approval: ask"
    assert cli.main(["policy", "a", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert 'tools: ["file_read", "shell"]' in out and "  interactivity: \"non_interactive\"" in out


def test_route_explains_the_decision(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(
        '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[agents.ops]\nprovider = "p"\nmodel = "m"\n[agents.pub]\nprovider = "p"\nmodel = "m"\n'
        '[channels.tg]\nkind = "telegram"\ntoken = "env:TG_TOKEN"\n'
        '[[routes]]\nchannel = "tg"\nchat = "-100*"\nagent = "ops"\nsenders = ["42"]\napprovers = ["7"]\n'
        '[[routes]]\nchannel = "tg"\nagent = "pub"\nsenders = ["*"]\nsession = "per_chat"\n'
    )
    assert cli.main(["route", "tg", "--chat", "-1001", "--sender", "42", "--config", str(path)]) == 0
    assert capsys.readouterr().out == "routes[0]: matches -> agent 'ops', session per_sender, approvers ['7']\n"
    assert cli.main(["route", "tg", "--chat", "-1001", "--sender", "9", "--config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "routes[0]: skipped (sender '9' is not in its senders list)",
        "routes[1]: matches -> agent 'pub', session per_chat",
    ]
    assert cli.main(["route", "slack", "--chat", "c", "--sender", "9", "--config", str(path)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "no route matches: the message would be ignored and logged"
