"""http_fetch refuses private addresses, foreign hosts and odd schemes, and caps bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from orchestrator.errors import ToolFailure
from orchestrator.policy import SecurityPolicy
from orchestrator.tools import BUILTIN_TOOLS, Tool
from tests.fakes.loopback import start_app


def _fetch(
    tmp_path: Path,
    *,
    allow_private: bool = False,
    hosts: tuple[str, ...] = ("*",),
    max_bytes: int = 4096,
) -> Tool:
    policy = SecurityPolicy(
        agent="ops",
        autonomy="read_only",
        workspace=tmp_path,
        shell_allowed_commands=frozenset(),
        http_allowed_hosts=hosts,
        http_allow_private_addresses=allow_private,
        http_max_bytes=max_bytes,
    )
    return BUILTIN_TOOLS["http_fetch"].bind(policy)


async def _failure(tool: Tool, arguments: dict[str, Any]) -> ToolFailure:
    with pytest.raises(ToolFailure) as caught:
        await tool.invoke(arguments)
    assert caught.value.tool == "http_fetch"
    return caught.value


async def _hello(request: web.Request) -> web.Response:
    return web.Response(text="hello from loopback", content_type="text/plain")


async def _big(request: web.Request) -> web.Response:
    return web.Response(text="x" * 10_000, content_type="text/plain")


async def _redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound("/secret")


async def _secret(request: web.Request) -> web.Response:
    return web.Response(text="the secret page")


@pytest.fixture
async def port() -> AsyncIterator[int]:
    app = web.Application()
    app.router.add_get("/", _hello)
    app.router.add_get("/big", _big)
    app.router.add_get("/redirect", _redirect)
    app.router.add_get("/secret", _secret)
    runner, port = await start_app(app)
    try:
        yield port
    finally:
        await runner.cleanup()


def test_spec_is_read_only_and_untrusted() -> None:
    spec = BUILTIN_TOOLS["http_fetch"].spec
    assert spec.read_only and spec.untrusted_output
    assert spec.parameters["required"] == ("url",)
    assert spec.parameters["additionalProperties"] is False


async def test_loopback_address_is_refused_by_default(tmp_path: Path, port: int) -> None:
    failure = await _failure(_fetch(tmp_path), {"url": f"http://127.0.0.1:{port}/"})
    assert "non-public address 127.0.0.1" in failure.reason


async def test_localhost_name_is_refused_after_resolution(tmp_path: Path, port: int) -> None:
    failure = await _failure(_fetch(tmp_path), {"url": f"http://localhost:{port}/"})
    assert "localhost resolves to non-public address" in failure.reason


@pytest.mark.parametrize(
    "host",
    ["10.1.2.3", "192.168.0.1", "169.254.169.254", "[::1]", "[::ffff:127.0.0.1]", "0.0.0.0",
     "224.0.0.1", "100.64.0.1", "[fe80::1]"],
)
async def test_private_and_special_literals_are_refused(tmp_path: Path, host: str) -> None:
    failure = await _failure(_fetch(tmp_path), {"url": f"http://{host}/"})
    assert "non-public address" in failure.reason


async def test_private_address_is_fetched_when_allowed(tmp_path: Path, port: int) -> None:
    tool = _fetch(tmp_path, allow_private=True)

    result = await tool.invoke({"url": f"http://127.0.0.1:{port}/", "method": "GET"})

    assert result == "HTTP 200\ntext/plain; charset=utf-8\n\nhello from loopback"


async def test_localhost_name_is_fetched_when_private_allowed(tmp_path: Path, port: int) -> None:
    result = await _fetch(tmp_path, allow_private=True).invoke({"url": f"http://localhost:{port}/"})
    assert result.endswith("\n\nhello from loopback")


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}/", "http://localhost:{port}/", "https://example.com/"])
async def test_no_allowed_hosts_refuses_every_url(tmp_path: Path, port: int, url: str) -> None:
    # the attack: an agent whose [http_fetch] table is absent (or allowed_hosts = [])
    # tries to reach a server; even with private addresses allowed, nothing is fetched
    tool = _fetch(tmp_path, allow_private=True, hosts=())
    shown = url.format(port=port)

    failure = await _failure(tool, {"url": shown})

    assert failure.reason == (
        f"refused {shown!r}: no host is allowed ([agents.ops.http_fetch] allowed_hosts is empty)"
    )


async def test_star_admits_any_host_but_keeps_the_private_address_guard(
    tmp_path: Path, port: int
) -> None:
    guarded = await _failure(_fetch(tmp_path, hosts=("*",)), {"url": f"http://127.0.0.1:{port}/"})
    fetched = await _fetch(tmp_path, hosts=("*",), allow_private=True).invoke(
        {"url": f"http://127.0.0.1:{port}/"}
    )

    assert "non-public address 127.0.0.1" in guarded.reason
    assert fetched.endswith("hello from loopback")


async def test_host_outside_allowlist_is_refused(tmp_path: Path, port: int) -> None:
    tool = _fetch(tmp_path, allow_private=True, hosts=("example.com", "*.example.org"))

    failure = await _failure(tool, {"url": f"http://127.0.0.1:{port}/"})

    assert "not in the allowed hosts (example.com, *.example.org)" in failure.reason


async def test_glob_allowlist_match_is_fetched(tmp_path: Path, port: int) -> None:
    tool = _fetch(tmp_path, allow_private=True, hosts=("example.com", "127.0.0.*"))
    result = await tool.invoke({"url": f"http://127.0.0.1:{port}/"})
    assert result.startswith("HTTP 200\n")


async def test_allowlisted_host_still_gets_the_private_address_guard(
    tmp_path: Path, port: int
) -> None:
    tool = _fetch(tmp_path, hosts=("127.0.0.1",))
    failure = await _failure(tool, {"url": f"http://127.0.0.1:{port}/"})
    assert "non-public address" in failure.reason


async def test_body_is_capped(tmp_path: Path, port: int) -> None:
    tool = _fetch(tmp_path, allow_private=True, max_bytes=100)

    result = await tool.invoke({"url": f"http://127.0.0.1:{port}/big"})

    head, _, body = result.partition("\n\n")
    assert head == "HTTP 200\ntext/plain; charset=utf-8"
    assert body == "x" * 100 + "\n[body truncated at 100 bytes]"


async def test_redirect_is_reported_not_followed(tmp_path: Path, port: int) -> None:
    tool = _fetch(tmp_path, allow_private=True)

    result = await tool.invoke({"url": f"http://127.0.0.1:{port}/redirect"})

    assert result.startswith("HTTP 302\n")
    assert f"redirect to http://127.0.0.1:{port}/secret not followed" in result
    assert "the secret page" not in result


async def test_connection_failure_is_a_tool_failure(tmp_path: Path) -> None:
    tool = _fetch(tmp_path, allow_private=True)
    failure = await _failure(tool, {"url": "http://127.0.0.1:1/"})
    assert "127.0.0.1:1" in failure.reason


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com", "example.com"]
)
async def test_non_http_schemes_are_refused(tmp_path: Path, url: str) -> None:
    failure = await _failure(_fetch(tmp_path, allow_private=True), {"url": url})
    assert "only http and https" in failure.reason


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "missing required argument 'url'"),
        ({"url": 5}, "must be a string"),
        ({"url": "http://example.com", "method": "POST"}, "only GET"),
        ({"url": "http://example.com", "headers": {}}, "unexpected argument(s): headers"),
        ({"url": "http:///nohost"}, "names no host"),
        ({"url": "http://example.com:99999/"}, "invalid port"),
        ({"url": "http://[::1/"}, "refused 'http://[::1/': Invalid IPv6 URL"),
    ],
)
async def test_bad_arguments_are_tool_failures(
    tmp_path: Path, arguments: dict[str, Any], expected: str
) -> None:
    failure = await _failure(_fetch(tmp_path), arguments)
    assert expected in failure.reason
