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
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, status, text, tool_call

pytestmark = pytest.mark.slow

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


def test_version_prints_the_package_version_and_imports_nothing_heavy() -> None:
    from importlib.metadata import version

    done = orchestrator("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"orchestrator {version('orchestrator')}\n", "")
    probe = subprocess.run(
        [sys.executable, "-c", (
            "import sys, orchestrator.cli\n"
            "try:\n    orchestrator.cli.main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('openai', 'pydantic', 'aiohttp', 'loguru') if m in sys.modules))"
        )],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )
    assert probe.stdout.splitlines()[-1] == "[]"


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


def test_check_reports_discord_channels_that_disagree_on_endpoints(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # discord.py holds one API base and gateway URL per process: `check` says so, not the daemon's start
    discord = '[channels.{}]\nkind = "discord"\ntoken = "env:DC_TOKEN"\n'
    path = write_config(
        discord.format("main")
        + discord.format("mirror") + 'api_base_url = "http://127.0.0.1:9/api/v10/"\n'
        + discord.format("same")
        + discord.format("relay") + 'gateway_url = "ws://127.0.0.1:9"\n'
    )

    assert cli.main(["check", "--config", str(path)]) == 1

    assert capsys.readouterr().err.splitlines() == [
        f"{path}: channels.mirror.api_base_url: all Discord channels in one daemon must share api_base_url "
        "and gateway_url (channels.main differs)",
        f"{path}: channels.relay.gateway_url: all Discord channels in one daemon must share api_base_url "
        "and gateway_url (channels.main differs)",
    ]
    agreeing = write_config(
        '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\n'
        + discord.format("main") + 'api_base_url = "http://127.0.0.1:9/api/v10"\n'
        + discord.format("mirror") + 'api_base_url = "http://127.0.0.1:9/api/v10/"\n'  # a trailing slash is the same base
    )
    assert cli.main(["check", "--config", str(agreeing)]) == 0


def test_config_from_environment_variable(write_config: WriteConfig) -> None:
    path = write_config('[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\n')
    done = orchestrator("check", env={"ORCHESTRATOR_CONFIG": str(path)})
    assert done.returncode == 0 and str(path) in done.stdout


def test_config_and_verbose_may_come_before_the_command(write_config: WriteConfig) -> None:
    path = write_config('[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\n')
    done = orchestrator("--config", str(path), "-v", "check")
    assert (done.returncode, done.stdout) == (0, f"{path}: ok (1 agents, 1 providers, 0 channels, 0 routes)\n")
    # after the command it still works, and wins over one before it
    done = orchestrator("--config", "/nonexistent.toml", "check", "--config", str(path))
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


def test_a_refused_port_is_reported_as_refused(write_config: WriteConfig, unused_tcp_port: int) -> None:
    # the provider's default retries: a refused connection is not one of the failures they wait out
    url = f"http://127.0.0.1:{unused_tcp_port}/v1"
    path = write_config(f'[providers.local]\nbase_url = "{url}"\n[agents.a]\nprovider = "local"\nmodel = "m"\n')
    done = orchestrator("agent", "a", "-m", "hi", "--config", str(path))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot reach provider 'local' at {url} (connection refused by 127.0.0.1:{unused_tcp_port});")
    assert "ConnectTimeout" not in line


def test_unreachable_provider_names_its_base_url_env(write_config: WriteConfig, unused_tcp_port: int) -> None:
    # the newcomer's step: the model server runs elsewhere; the error must say which variable moves it
    url = f"http://127.0.0.1:{unused_tcp_port}/v1"
    path = write_config(
        f'[providers.local]\nbase_url = "{url}"\nbase_url_env = "ORCHESTRATOR_BASE_URL"\nmax_retries = 0\n'
        '[agents.a]\nprovider = "local"\nmodel = "m"\n'
    )
    done = orchestrator("agent", "a", "-m", "hi", "--config", str(path), env={"ORCHESTRATOR_BASE_URL": ""})
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot reach provider 'local' at {url} (")
    assert line.endswith(
        "; start it, or point [providers.local] base_url (or set ORCHESTRATOR_BASE_URL, its base_url_env) "
        "at a running OpenAI-compatible endpoint"
    )


def test_unreachable_url_from_the_environment_says_so(write_config: WriteConfig, unused_tcp_port: int) -> None:
    url = f"http://127.0.0.1:{unused_tcp_port}/v1"
    path = write_config(
        '[providers.local]\nbase_url = "http://127.0.0.1:9/v1"\nbase_url_env = "ORCHESTRATOR_BASE_URL"\n'
        'max_retries = 0\n[agents.a]\nprovider = "local"\nmodel = "m"\n'
    )
    done = orchestrator("agent", "a", "-m", "hi", "--config", str(path), env={"ORCHESTRATOR_BASE_URL": url})
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot reach provider 'local' at {url} (")
    assert line.endswith(
        "; start it, or point ORCHESTRATOR_BASE_URL (base_url_env; this URL came from it) or "
        "[providers.local] base_url at a running OpenAI-compatible endpoint"
    )


async def test_base_url_without_v1_gets_the_v1_hint(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    # the newcomer's step: `base_url = "http://host:port"` (no /v1), and the server answers a bare 404
    origin = fake_llm.base_url.removesuffix("/v1")
    path = write_config(
        f'[providers.local]\nbase_url = "{origin}"\nbase_url_env = "ORCHESTRATOR_BASE_URL"\nmax_retries = 0\n'
        '[agents.a]\nprovider = "local"\nmodel = "m"\n'
    )
    done = await asyncio.to_thread(
        orchestrator, "agent", "a", "-m", "hi", "--config", str(path), env={"ORCHESTRATOR_BASE_URL": ""}
    )
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: provider 'local' at {origin} answered 404: is the base URL missing /v1? (HTTP 404")
    assert line.endswith(
        f"; try {origin}/v1 in [providers.local] base_url (or set ORCHESTRATOR_BASE_URL, its base_url_env)"
    )


async def test_base_url_with_v1_that_404s_gets_no_v1_hint(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    path = write_config(
        f'[providers.local]\nbase_url = "{fake_llm.base_url}"\nmodel_env = "ORCHESTRATOR_MODEL"\nmax_retries = 0\n'
        '[agents.a]\nprovider = "local"\nmodel = "m"\n'
    )
    fake_llm.script(status(404, message="model 'm' not found"))
    done = await asyncio.to_thread(
        orchestrator, "agent", "a", "-m", "hi", "--config", str(path), env={"ORCHESTRATOR_MODEL": ""}
    )
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "/v1?" not in line
    assert line == (
        f"error: provider 'local' at {fake_llm.base_url}: HTTP 404: model 'm' not found; "
        "check the model (ORCHESTRATOR_MODEL, its model_env, overrides it)"
    )


def test_unreachable_anthropic_provider_names_its_variables(write_config: WriteConfig, unused_tcp_port: int) -> None:
    url = f"http://127.0.0.1:{unused_tcp_port}"
    path = write_config(
        f'[providers.claude]\nkind = "anthropic"\nbase_url = "{url}"\nbase_url_env = "ANTHROPIC_BASE_URL"\n'
        'max_retries = 0\n[agents.a]\nprovider = "claude"\nmodel = "m"\n'
    )
    done = orchestrator("agent", "a", "-m", "hi", "--config", str(path), env={"ANTHROPIC_BASE_URL": ""})
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot reach provider 'claude' at {url} (")
    assert line.endswith(
        "; start it, or point [providers.claude] base_url (or set ANTHROPIC_BASE_URL, its base_url_env) "
        "at a running Anthropic Messages API endpoint"
    )


async def test_rejected_anthropic_key_names_api_key_env(write_config: WriteConfig) -> None:
    async with FakeAnthropic(api_key="sk-ant-right-0123456789") as fake:
        path = write_config(
            f'[providers.claude]\nkind = "anthropic"\nbase_url = "{fake.base_url}"\n'
            'api_key_env = "ANTHROPIC_API_KEY"\nmax_retries = 0\n[agents.a]\nprovider = "claude"\nmodel = "m"\n'
        )
        done = await asyncio.to_thread(
            orchestrator, "agent", "a", "-m", "hi", "--config", str(path),
            env={"ANTHROPIC_API_KEY": "sk-ant-wrong-0123456789"},
        )
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.endswith("; check [providers.claude] api_key (or ANTHROPIC_API_KEY, its api_key_env)")
    assert "sk-ant-wrong" not in done.stderr


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


def _answer_on_a_tty(argv: list[str], answer: str) -> tuple[int, str, str]:
    """Run the CLI with stdin and stderr on a pseudo-terminal; answer its prompt; return (code, stdout, tty text)."""
    import pty
    import select

    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *argv],
        stdin=slave, stderr=slave, stdout=subprocess.PIPE, cwd=ROOT, text=True,
    )
    os.close(slave)
    shown = b""
    try:
        while b"[y/N] " not in shown:
            ready, _, _ = select.select([master], [], [], 30)
            assert ready, f"no prompt; the terminal showed {shown!r}"
            shown += os.read(master, 65536)
        os.write(master, answer.encode() + b"\n")
        stdout, _ = process.communicate(timeout=30)
    finally:
        process.kill()
        os.close(master)
    return process.returncode, stdout, shown.decode().replace("\r\n", "\n")


async def test_tty_approval_prompt_shows_the_path_a_long_first_argument_would_hide(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    from orchestrator.policy import render_arguments
    from orchestrator.tools import BUILTIN_TOOLS

    path = write_config(provider_toml(fake_llm.base_url) + '[agents.a]\nprovider = "fake"\nmodel = "m"\ntools = ["file_write"]\n')
    arguments = {"content": "A" * 5000, "path": "hidden.txt"}
    fake_llm.script(tool_call("file_write", arguments), text("refused"))

    code, stdout, shown = await asyncio.to_thread(
        _answer_on_a_tty, ["agent", "a", "-m", "write", "--config", str(path)], "n"
    )

    assert (code, stdout) == (0, "refused\n")
    preview = render_arguments(arguments, BUILTIN_TOOLS["file_write"].spec.parameters)
    assert f"approve file_write?\n{preview}\n[y/N] " in shown  # the same text as every channel
    assert preview.startswith('{"path": "hidden.txt", ') and "chars cut]…" in preview
    assert not (path.parent / "state" / "workspaces" / "a" / "hidden.txt").exists()


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
    table = capsys.readouterr().out.splitlines()
    assert table[1].startswith("shell      builtin    writes     approval: ask  ")
    # the description is in the table too, not only in --json
    assert table[0].endswith("  Read a UTF-8 text file from the agent workspace.")
    assert cli.main(["policy", "a", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert 'tools: ["file_read", "shell"]' in out and "  interactivity: \"non_interactive\"" in out


def test_route_explains_the_decision(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(
        '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[agents.ops]\nprovider = "p"\nmodel = "m"\n[agents.pub]\nprovider = "p"\nmodel = "m"\n'
        '[sops.maint]\nagent = "ops"\n[[sops.maint.steps]]\nprompt = "fix"\n'
        '[sops.faq]\nagent = "pub"\n[[sops.faq.steps]]\nprompt = "answer"\n[[sops.faq.steps]]\nprompt = "check"\nagent = "ops"\n'
        '[channels.tg]\nkind = "telegram"\ntoken = "env:TG_TOKEN"\n'
        '[[routes]]\nchannel = "tg"\nchat = "-100*"\nagent = "ops"\nsenders = ["42"]\napprovers = ["7"]\nsops = ["maint"]\n'
        '[[routes]]\nchannel = "tg"\nagent = "pub"\nsenders = ["*"]\nsession = "per_chat"\nsops = ["faq"]\n'
    )
    assert cli.main(["route", "tg", "--chat", "-1001", "--sender", "42", "--config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "routes[0]: matches -> agent 'ops', session per_sender, approvers ['7']",
        "  groups: reply_in_groups mention (the default): takes mentions of the bot, replies to it, commands to it; DMs: every message",
        "  commands: /new /stop /usage /help /compact /sop /approve /deny /show /whoami",
        "  sop maint: steps run as ops; approvals: ops by ['42', '7']",
    ]
    # a stranger on the open route: only the SOP it lists; ops's step approvals are nobody's
    assert cli.main(["route", "tg", "--chat", "-1001", "--sender", "9", "--config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "routes[0]: skipped (sender '9' is not in its senders list)",
        "routes[1]: matches -> agent 'pub', session per_chat",
        "  groups: reply_in_groups mention (the default): takes mentions of the bot, replies to it, commands to it; DMs: every message",
        "  commands: /new /stop /usage /help /compact /sop /approve /deny /show /whoami",
        "  sop faq: steps run as pub, ops; approvals: pub by ['9']; ops by nobody (the route has no approvers: denied)",
    ]
    assert cli.main(["route", "tg", "--chat", "c2", "--sender", "9", "--json", "--config", str(path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["route"], shown["agent"], shown["commands"], shown["sops"]) == (
        1, "pub", ["/new", "/stop", "/usage", "/help", "/compact", "/sop", "/approve", "/deny", "/show", "/whoami"], {"faq": {"agents": ["pub", "ops"], "answerers": {"pub": ["9"], "ops": []}}}
    )
    path.write_text(path.read_text().replace('sops = ["faq"]\n', ""))  # routes[1] lists no SOP now
    assert cli.main(["route", "tg", "--chat", "-1001", "--sender", "9", "--json", "--config", str(path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["route"], shown["commands"], shown["sops"]) == (1, ["/new", "/stop", "/usage", "/help", "/compact", "/approve", "/deny", "/show", "/whoami"], {})
    assert shown["groups"] == {"reply_in_groups": "mention", "wake_words": [], "source": "the default"}
    assert shown["explain"][-1] == '  sops: none (`/sop NAME` is answered "not available here")'
    assert cli.main(["route", "slack", "--chat", "c", "--sender", "9", "--config", str(path)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "no route matches: the message would be ignored and logged"
    assert cli.main(["route", "slack", "--chat", "c", "--sender", "9", "--json", "--config", str(path)]) == 1
    assert json.loads(capsys.readouterr().out)["route"] is None


def test_route_shows_the_group_gate_and_check_names_the_deprecated_mention_only(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(
        '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.ops]\nprovider = "p"\nmodel = "m"\n'
        '[channels.dc]\nkind = "discord"\ntoken = "env:DC_TOKEN"\nmention_only = false\n'
        '[[routes]]\nchannel = "dc"\nagent = "ops"\nsenders = ["42"]\n'
        '[[routes]]\nchannel = "dc"\nagent = "ops"\nsenders = ["7"]\nreply_in_groups = "mention"\nwake_words = ["ops"]\n'
    )
    assert cli.main(["check", "--config", str(path)]) == 0
    err = capsys.readouterr().err
    assert f"{path}: deprecated: channels.dc.mention_only is deprecated: set reply_in_groups = \"all\"" in err
    assert cli.main(["route", "dc", "--chat", "1", "--sender", "42", "--config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "  groups: reply_in_groups all (channels.dc.mention_only (deprecated)): takes every message; DMs: every message"
    )
    assert cli.main(["route", "dc", "--chat", "1", "--sender", "7", "--json", "--config", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["groups"] == {
        "reply_in_groups": "mention", "wake_words": ["ops"], "source": "routes[1].reply_in_groups",
    }


async def test_a_provider_echoing_its_key_never_prints_it_even_with_verbose(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    key = "sk-cli-echo-31313131"
    path = write_config(
        provider_toml(fake_llm.base_url).replace("max_retries = 0\n", 'max_retries = 0\napi_key = "env:ORCH_TEST_CLI_KEY"\n')
        + '[agents.a]\nprovider = "fake"\nmodel = "m"\n'
    )
    fake_llm.refuse_key = True
    env = {"ORCH_TEST_CLI_KEY": key}
    quiet = await asyncio.to_thread(orchestrator, "agent", "a", "-m", "hi", "--config", str(path), env=env)
    loud = await asyncio.to_thread(orchestrator, "agent", "a", "-m", "hi", "-v", "--config", str(path), env=env)
    assert fake_llm.authorizations == [f"Bearer {key}"] * 2  # the key went out both times
    assert quiet.returncode == loud.returncode == 1
    # the operator's line keeps the detail (provider, URL, status) with the key redacted
    assert quiet.stderr == f"error: provider 'fake' at {fake_llm.base_url}: HTTP 401: Incorrect API key provided: [redacted]\n"
    assert key not in loud.stderr and "DEBUG" in loud.stderr and "incident " in loud.stderr


def test_an_allow_matching_no_tool_is_an_error_with_a_suggestion(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # The newcomer's step: `--allow fiel_read` used to run the turn silently with zero tools.
    path = write_config(
        '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[agents.a]\nprovider = "p"\nmodel = "m"\ntools = ["file_read", "shell"]\n'
    )
    assert cli.main(["agent", "a", "-m", "hi", "--allow", "file_read,fiel_read", "--config", str(path)]) == 1
    assert capsys.readouterr().err == (
        "error: --allow 'fiel_read' matches no tool agent 'a' holds (did you mean 'file_read'?)\n"
    )
    assert cli.main(["agent", "a", "-m", "hi", "--allow", "web_*", "--config", str(path)]) == 1
    assert capsys.readouterr().err == "error: --allow 'web_*' matches no tool agent 'a' holds\n"


def test_python_dash_m_orchestrator_is_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: orchestrator ")
