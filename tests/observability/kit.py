"""Observability test kit: a terminal-channel daemon with its gateway, and a real scrape of /metrics."""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from orchestrator.daemon import Runtime
from orchestrator.gateway import GatewayAddress, open_gateway
from tests.daemon.harness import Terminal, running
from tests.fakes.openai_server import FakeOpenAI

TOKEN = "s3cret-gateway-token-for-the-tests-0123"
SCRAPE = "scrape-only-token-for-the-metrics-4567"


def closed_port() -> int:
    """Return a loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def gateway_port(log: str) -> int:
    """Return the port a real daemon's gateway bound (`port = 0`: any free one), from its log line."""
    found = re.search(r"gateway listening on http://127\.0\.0\.1:(\d+)", log)
    assert found is not None, log[-2000:]
    return int(found[1])


def daemon_toml(
    fake: FakeOpenAI, *, gateway: str = "metrics = true", extra: str = "", telemetry: str = "", route: str = ""
) -> str:
    """Return a config: agent `helper` on a terminal channel (alice), a provider that is down, a gateway.

    `route` adds keys to the route (`sops = [...]`).
    """
    return f"""
[providers.fake]
base_url = "{fake.base_url}"
max_retries = 0

[providers.down]
base_url = "http://127.0.0.1:{closed_port()}/v1"
max_retries = 0
timeout_s = 5

[agents.helper]
provider = "fake"
model = "m"
tools = ["file_write", "list_dir"]

[agents.helper.approval]
timeout_s = 1.5
auto_approve = ["list_dir"]

[agents.offline]
provider = "down"
model = "gone"

[channels.term]
kind = "terminal"
user = "alice"

[[routes]]
channel = "term"
agent = "helper"
senders = ["alice"]
{route}

[gateway]
port = 0
token = "file:gateway.token"
metrics_token = "file:scrape.token"
{gateway}
{telemetry}
{extra}
"""


def write(tmp_path: Path, text: str) -> Path:
    """Write the config and both token files; return the config path."""
    (tmp_path / "gateway.token").write_text(TOKEN + "\n", encoding="utf-8")
    (tmp_path / "scrape.token").write_text(SCRAPE + "\n", encoding="utf-8")
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@asynccontextmanager
async def daemon(path: Path) -> AsyncIterator[tuple[Runtime, Terminal, GatewayAddress]]:
    """Run the daemon on `path`: its terminal channel on a pipe and its gateway on a free port."""
    async with running(path) as (runtime, terminals), open_gateway(runtime) as address:
        assert address is not None
        yield runtime, terminals["term"], address


async def scrape(address: GatewayAddress, token: str | None = SCRAPE) -> tuple[int, str, str]:
    """GET /metrics over HTTP; return (status, content type, body)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with aiohttp.ClientSession() as session:
        async with session.get(address.url + "/metrics", headers=headers) as response:
            return response.status, response.headers.get("Content-Type", ""), await response.text()


def samples(body: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Parse an exposition into {(sample name, labels): value} with the official parser."""
    found: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(body: str, name: str, labels: Mapping[str, str] | None = None) -> float | None:
    """Return one sample's value from an exposition, or None when the series is absent."""
    return samples(body).get((name, frozenset((labels or {}).items())))
