"""Omission is never a grant: blank secrets, short gateway tokens, hostless fetches and literal credentials are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.config import SecretRef, resolve_secret
from orchestrator.errors import ConfigError, EmptySecret, SecretError
from tests.conftest import WriteConfig

BASE = """
[providers.local]
base_url = "http://127.0.0.1:9/v1"
"""
GOOD_TOKEN = "g" * 32


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value).splitlines()


@pytest.mark.parametrize(
    "table",
    [
        "",  # no [http_fetch] table at all
        "[agents.reader.http_fetch]\nallowed_hosts = []\n",
        "[agents.reader.http_fetch]\nallow_private_addresses = true\n",
    ],
)
@pytest.mark.parametrize("tools", ['["http_fetch"]', '["*"]', '["http_*", "file_read"]'])
def test_http_fetch_granted_without_hosts_is_a_config_error(
    write_config: WriteConfig, table: str, tools: str
) -> None:
    path = write_config(
        BASE + f'[agents.reader]\nprovider = "local"\nmodel = "m"\nautonomy = "read_only"\ntools = {tools}\n' + table
    )
    assert problems(path) == [
        f"{path}: agents.reader.http_fetch.allowed_hosts: http_fetch is granted but no host is "
        'allowed, so every fetch would be refused: list the hosts (names or globs; ["*"] = any '
        "public host), or add http_fetch to excluded_tools"
    ]


def test_http_fetch_with_hosts_or_not_granted_is_accepted(write_config: WriteConfig) -> None:
    path = write_config(
        BASE
        + '[agents.star]\nprovider = "local"\nmodel = "m"\ntools = ["http_fetch"]\n'
        + '[agents.star.http_fetch]\nallowed_hosts = ["*"]\n'
        + '[agents.excluded]\nprovider = "local"\nmodel = "m"\ntools = ["*"]\nexcluded_tools = ["http_fetch"]\n'
        + '[agents.none]\nprovider = "local"\nmodel = "m"\ntools = ["file_read"]\n'
    )
    config = load_config(path)
    assert config.agents["star"].http_fetch.allowed_hosts == ("*",)
    assert config.agents["none"].http_fetch.allowed_hosts == ()


@pytest.mark.parametrize("content", ["", "\n", "  \t\n\n"])
def test_blank_secret_file_is_refused(tmp_path: Path, content: str) -> None:
    (tmp_path / "token").write_text(content, encoding="utf-8")
    with pytest.raises(EmptySecret) as caught:
        resolve_secret(SecretRef("file:token"), base=tmp_path)
    assert str(caught.value) == f"secret 'file:token': {tmp_path / 'token'} is empty (or only whitespace)"


@pytest.mark.parametrize("value", ["", " ", "\n"])
def test_blank_environment_secret_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("ORCH_TEST_BLANK", value)
    with pytest.raises(SecretError, match="^secret 'env:ORCH_TEST_BLANK': environment variable ORCH_TEST_BLANK is empty$"):
        resolve_secret(SecretRef("env:ORCH_TEST_BLANK"))


def gateway_config(write_config: WriteConfig, token_file: str | None, *, listen: str = "0.0.0.0") -> Path:
    path = write_config(BASE + f'[gateway]\nlisten = "{listen}"\nport = 0\ntoken = "file:gateway.token"\n')
    if token_file is not None:
        (path.parent / "gateway.token").write_text(token_file, encoding="utf-8")
    return path


def test_blank_gateway_token_file_is_a_config_error_at_check(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    # the attack: the token file holds a newline, so the gateway would accept "Bearer "
    path = gateway_config(write_config, "\n")

    assert cli.main(["check", "--config", str(path)]) == 1

    err = capsys.readouterr().err.strip()
    assert err == (
        f"{path}: gateway.token: secret 'file:gateway.token': {path.parent / 'gateway.token'} "
        "is empty (or only whitespace)"
    )


@pytest.mark.parametrize("length", [1, 16, 31])
def test_short_gateway_token_is_a_config_error(write_config: WriteConfig, length: int) -> None:
    # resolving registers the value for redaction in this whole process: no run of a
    # common character, or later tests' "xxx..." tool results come back redacted
    path = gateway_config(write_config, "short-gateway-token-0123456789abcdef"[:length] + "\n")
    assert problems(path) == [
        f"{path}: gateway.token: the token is {length} characters; use at least 32 "
        "(e.g. `openssl rand -hex 32`)"
    ]


def test_gateway_token_of_32_characters_is_accepted(write_config: WriteConfig) -> None:
    path = gateway_config(write_config, GOOD_TOKEN + "\n")
    assert load_config(path).gateway is not None


def test_unreadable_gateway_token_waits_for_the_daemon(write_config: WriteConfig) -> None:
    # `check` may run where the daemon's secrets are not: only the start refuses it
    path = gateway_config(write_config, None)
    assert load_config(path).gateway is not None


def mcp_server(entries: str, *, transport: str = "http") -> str:
    where = 'url = "http://127.0.0.1:9/mcp"' if transport == "http" else 'command = "true"'
    table = "headers" if transport == "http" else "env"
    return BASE + f'[mcp.servers.gh]\ntransport = "{transport}"\n{where}\n[mcp.servers.gh.{table}]\n{entries}\n'


@pytest.mark.parametrize(
    "header",
    ["Authorization", "authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "X-Auth-User",
     "PRIVATE-TOKEN", "X-Client-Secret", "Password"],
)
def test_literal_credential_header_is_a_config_error(write_config: WriteConfig, header: str) -> None:
    path = write_config(mcp_server(f'"{header}" = "Bearer abc"'))
    key = header if header.replace("-", "").isalnum() else f'"{header}"'
    assert problems(path) == [
        f"{path}: mcp.servers.gh.headers.{key}: '{header}' looks like a secret: give it as a "
        "reference ('env:NAME' or 'file:PATH'), not a literal value"
    ]


@pytest.mark.parametrize("name", ["GITHUB_TOKEN", "apitoken", "OpenAIKey", "DB_PASSWD", "MY_AUTH", "aws_secret"])
def test_literal_credential_env_is_a_config_error(write_config: WriteConfig, name: str) -> None:
    path = write_config(mcp_server(f'{name} = "hunter2"', transport="stdio"))
    assert problems(path) == [
        f"{path}: mcp.servers.gh.env.{name}: '{name}' looks like a secret: give it as a "
        "reference ('env:NAME' or 'file:PATH'), not a literal value"
    ]


@pytest.mark.parametrize(
    ("name", "value"),
    [("DATABASE_URL", "postgres://app:hunter2@db.internal/app"), ("UPSTREAM", "https://:pat@git.example.com/")],
)
def test_url_with_a_password_is_a_config_error(write_config: WriteConfig, name: str, value: str) -> None:
    path = write_config(mcp_server(f'{name} = "{value}"', transport="stdio"))
    assert problems(path) == [
        f"{path}: mcp.servers.gh.env.{name}: the value is a URL with a password: give the whole "
        "URL as a reference ('env:NAME' or 'file:PATH'), not a literal value"
    ]


def test_references_and_plain_values_are_accepted(write_config: WriteConfig) -> None:
    headers = write_config(mcp_server('Authorization = "file:gh.header"\n"X-Api-Key" = "env:GH_KEY"\nAccept = "application/json"'))
    assert load_config(headers).mcp.servers["gh"].headers["Authorization"] == "file:gh.header"
    env = write_config(
        mcp_server('GITHUB_TOKEN = "env:GH_TOKEN"\nLOG_LEVEL = "debug"\nHOME_URL = "https://user@example.com/"', transport="stdio")
    )
    assert load_config(env).mcp.servers["gh"].env["LOG_LEVEL"] == "debug"


def test_mcp_server_url_with_a_password_is_a_config_error(write_config: WriteConfig) -> None:
    path = write_config(BASE + '[mcp.servers.gh]\ntransport = "http"\nurl = "https://bot:hunter2@mcp.example.com/mcp"\n')
    assert problems(path) == [
        f"{path}: mcp.servers.gh.url: a URL with a password: drop the credentials and send them as a "
        'header given as a reference (e.g. Authorization = "file:PATH")'
    ]
