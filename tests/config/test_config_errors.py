"""Config errors: one line per problem, naming the file and the dotted key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.config import Config, resolve_secret
from orchestrator.errors import ConfigError, SecretError
from tests.conftest import WriteConfig

BASE = """
[providers.local]
base_url = "http://127.0.0.1:9/v1"
"""


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value).splitlines()


def test_unknown_tool_names_file_dotted_path_and_suggestion(write_config: WriteConfig) -> None:
    path = write_config(
        BASE
        + """
        [agents.ops]
        provider = "local"
        model = "m"
        tools = ["file_read", "list_dir", "serach", "shel"]
        """
    )
    assert problems(path) == [
        f"{path}: agents.ops.tools[2]: unknown tool 'serach'",
        f"{path}: agents.ops.tools[3]: unknown tool 'shel' (did you mean 'shell'?)",
    ]


def test_unknown_key_is_rejected_with_suggestion(write_config: WriteConfig) -> None:
    path = write_config(
        BASE
        + """
        [agents.ops]
        provider = "local"
        model = "m"
        toolz = ["file_read"]

        [agents.ops.budget]
        max_tool_iteration = 3
        """
    )
    assert sorted(problems(path)) == [
        f"{path}: agents.ops.budget.max_tool_iteration: unknown key 'max_tool_iteration' "
        "(did you mean 'max_tool_iterations'?)",
        f"{path}: agents.ops.toolz: unknown key 'toolz' (did you mean 'tools'?)",
    ]


def test_unknown_top_level_section_is_rejected(write_config: WriteConfig) -> None:
    path = write_config(BASE + "\n[agentz.x]\nmodel = 'm'\n")
    assert problems(path) == [f"{path}: agentz: unknown key 'agentz' (did you mean 'agents'?)"]


def test_dangling_references_are_errors(write_config: WriteConfig) -> None:
    path = write_config(
        BASE
        + """
        [agents.ops]
        provider = "locl"
        model = "m"
        mcp_bundles = ["nope"]
        skills = ["ghost"]
        delegates = ["ops", "opz"]
        peripherals = ["arm"]

        [agents.ops.memory]
        read_from = ["nobody"]
        """
    )
    assert problems(path) == [
        f"{path}: agents.ops.provider: unknown provider 'locl' (did you mean 'local'?)",
        f"{path}: agents.ops.mcp_bundles[0]: unknown MCP bundle 'nope'",
        f"{path}: agents.ops.skills[0]: unknown skill 'ghost'",
        f"{path}: agents.ops.peripherals[0]: unknown peripheral 'arm'",
        f"{path}: agents.ops.delegates[1]: unknown agent 'opz' (did you mean 'ops'?)",
        f"{path}: agents.ops.memory.read_from[0]: unknown agent 'nobody'",
    ]


def test_literal_secret_is_rejected(write_config: WriteConfig) -> None:
    path = write_config(
        """
        [providers.cloud]
        base_url = "https://api.example.invalid/v1"
        api_key = "sk-live-1234"
        """
    )
    assert problems(path) == [
        f"{path}: providers.cloud.api_key: secrets must be references ('env:NAME' or "
        "'file:PATH'), not literal values"
    ]


def test_type_and_range_errors_name_the_key(write_config: WriteConfig) -> None:
    path = write_config(
        BASE
        + """
        [agents.ops]
        provider = "local"
        model = "m"
        autonomy = "yolo"
        temperature = 7
        """
    )
    lines = problems(path)
    assert len(lines) == 2
    assert lines[0].startswith(f"{path}: agents.ops.temperature: input should be less than or equal to 2")
    assert lines[1].startswith(f"{path}: agents.ops.autonomy: input should be 'read_only', 'supervised' or 'full'")
    assert "(got 'yolo')" in lines[1]


def test_missing_required_key(write_config: WriteConfig) -> None:
    path = write_config(BASE + "\n[agents.ops]\nprovider = 'local'\n")
    assert problems(path) == [f"{path}: agents.ops.model: missing required key"]


def test_glob_matching_nothing_and_mcp_name_in_tools(write_config: WriteConfig) -> None:
    path = write_config(
        BASE
        + """
        [agents.ops]
        provider = "local"
        model = "m"
        tools = ["file_*", "net_*", "github__create_issue"]
        excluded_tools = ["github__*"]
        """
    )
    assert problems(path) == [
        f"{path}: agents.ops.tools[1]: pattern 'net_*' matches no built-in tool",
        f"{path}: agents.ops.tools[2]: 'github__create_issue' looks like an MCP/skill/peripheral "
        "tool; those are granted through mcp_bundles, skills and peripherals, not tools",
        f"{path}: agents.ops.excluded_tools[0]: 'github__*' names no configured MCP server, skill "
        "or peripheral 'github'",
    ]


def test_agents_d_errors_name_the_agent_file(write_config: WriteConfig) -> None:
    path = write_config(
        BASE,
        agents={"ops": 'provider = "local"\nmodel = "m"\ntools = ["file_reed"]\n'},
    )
    agent_file = path.parent / "agents.d" / "ops.toml"
    assert problems(path) == [
        f"{agent_file}: agents.ops.tools[0]: unknown tool 'file_reed' (did you mean 'file_read'?)"
    ]


def test_agents_d_duplicate_agent_is_an_error(write_config: WriteConfig) -> None:
    path = write_config(
        BASE + '\n[agents.ops]\nprovider = "local"\nmodel = "m"\n',
        agents={"ops": 'provider = "local"\nmodel = "m"\n'},
    )
    agent_file = path.parent / "agents.d" / "ops.toml"
    assert problems(path) == [f"{agent_file}: agents.ops: agent 'ops' is also defined in {path}"]


def test_agents_d_loads_one_agent_per_file(load: Callable[..., Config]) -> None:
    config = load(BASE, agents={"alpha": 'provider = "local"\nmodel = "a"\n', "beta": 'provider = "local"\nmodel = "b"\n'})
    assert sorted(config.agents) == ["alpha", "beta"]
    assert config.agents["beta"].model == "b"
    assert config.origin_of("alpha").endswith("agents.d/alpha.toml")


def test_invalid_toml_and_missing_file(write_config: WriteConfig, tmp_path: Path) -> None:
    path = write_config("[agents\n")
    (line,) = problems(path)
    assert line.startswith(f"{path}: invalid TOML: ")
    missing = tmp_path / "nope.toml"
    (line,) = problems(missing)
    assert line.startswith(f"{missing}: file not found") and "orchestrator init" in line


def test_mcp_bundle_references_are_checked(write_config: WriteConfig) -> None:
    path = write_config(
        """
        [mcp.servers.files]
        transport = "stdio"

        [mcp.servers.web]
        transport = "http"
        url = "http://127.0.0.1:9/mcp"

        [mcp.bundles.b]
        servers = ["files", "wbe"]
        tools = { web = ["*"] }
        """
    )
    assert problems(path) == [
        f"{path}: mcp.servers.files.command: required for transport 'stdio'",
        f"{path}: mcp.bundles.b.servers[1]: unknown MCP server 'wbe' (did you mean 'web'?)",
        f"{path}: mcp.bundles.b.tools.web: server 'web' is not in this bundle's servers",
    ]


def test_defaults_narrow_never_grant(load: Callable[..., Config]) -> None:
    config = load(BASE + '\n[agents.bare]\nprovider = "local"\nmodel = "m"\n')
    agent = config.agents["bare"]
    assert agent.tools == ()
    assert agent.mcp_bundles == ()
    assert agent.autonomy == "supervised"
    assert agent.memory.scope == "none"
    assert agent.shell.allowed_commands == ()
    assert agent.http_fetch.allow_private_addresses is False


def test_example_config_is_valid() -> None:
    example = Path(__file__).resolve().parents[2] / "config.example.toml"
    config = load_config(example)
    assert {"assistant", "researcher"} <= set(config.agents)


def test_secret_references_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.config import SecretRef

    monkeypatch.setenv("ORCH_TEST_TOKEN", "t0k")
    assert resolve_secret(SecretRef("env:ORCH_TEST_TOKEN")) == "t0k"
    (tmp_path / "tok").write_text("from-file\n")
    assert resolve_secret(SecretRef("file:tok"), base=tmp_path) == "from-file"
    monkeypatch.delenv("ORCH_TEST_TOKEN")
    with pytest.raises(SecretError, match="environment variable ORCH_TEST_TOKEN is not set"):
        resolve_secret(SecretRef("env:ORCH_TEST_TOKEN"))


def test_channel_and_route_errors(write_config: WriteConfig) -> None:
    path = write_config(
        BASE
        + """
        [agents.ops]
        provider = "local"
        model = "m"

        [channels.tg]
        kind = "telegram"
        token = "123456:ABC-literal"

        [channels.sl]
        kind = "slack"
        bot_token = "env:SLACK_BOT"

        [channels.irc]
        kind = "irc"

        [[routes]]
        channel = "tgg"
        agent = "opz"
        """
    )
    assert problems(path) == [
        f"{path}: channels.tg.token: secrets must be references ('env:NAME' or 'file:PATH'), not literal values",
        f"{path}: channels.irc.kind: unknown kind 'irc'; expected one of 'telegram', 'slack', 'discord', 'terminal'",
    ]
    path = write_config(
        BASE
        + """
        [agents.ops]
        provider = "local"
        model = "m"

        [channels.sl]
        kind = "slack"
        bot_token = "env:SLACK_BOT"

        [[routes]]
        channel = "tgg"
        agent = "opz"
        """
    )
    assert problems(path) == [
        f"{path}: channels.sl.app_token: required for mode 'socket'",
        f"{path}: routes[0].channel: unknown channel 'tgg'",
        f"{path}: routes[0].agent: unknown agent 'opz' (did you mean 'ops'?)",
    ]


def test_a_route_granting_an_unknown_sop_names_the_entry_and_suggests(write_config: WriteConfig) -> None:
    path = write_config(
        BASE
        + """
        [agents.ops]
        provider = "local"
        model = "m"

        [sops.maint]
        agent = "ops"
        [[sops.maint.steps]]
        prompt = "go"

        [channels.term]
        kind = "terminal"

        [[routes]]
        channel = "term"
        agent = "ops"
        senders = ["*"]
        sops = ["maint", "mant", "deploy"]
        """
    )
    assert problems(path) == [
        f"{path}: routes[0].sops[1]: unknown SOP 'mant' (did you mean 'maint'?)",
        f"{path}: routes[0].sops[2]: unknown SOP 'deploy'",
    ]
