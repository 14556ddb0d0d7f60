"""Shared fixtures: config files written to tmp dirs, a fresh Services per test."""

from __future__ import annotations

import io
import logging
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from loguru import logger

from orchestrator import redaction
from orchestrator.checks import load_config
from orchestrator.config import Config
from orchestrator.engine import add_turn_observer
from orchestrator.logs import configure_logging
from orchestrator.seam import ResolvedAgentExecution, Services


@pytest.fixture(autouse=True)
def _secrets_of_this_test_only() -> Iterator[None]:
    """Forget the secrets a test resolved: the registry is per process, and one test's
    token ("x" * 32) must not redact another test's file contents."""
    registry = redaction._REDACTOR
    saved = (registry._values, registry._matcher)
    yield
    registry._values, registry._matcher = saved
from tests.fakes.openai_server import FakeOpenAI

WriteConfig = Callable[..., Path]


@pytest.fixture
def write_config(tmp_path: Path) -> WriteConfig:
    """Return a function writing `config.toml` (and optional agents.d files) into tmp_path."""

    def write(text: str, *, agents: dict[str, str] | None = None) -> Path:
        path = tmp_path / "config.toml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        for name, body in (agents or {}).items():
            folder = tmp_path / "agents.d"
            folder.mkdir(exist_ok=True)
            (folder / f"{name}.toml").write_text(textwrap.dedent(body), encoding="utf-8")
        return path

    return write


@pytest.fixture
def load(write_config: WriteConfig) -> Callable[..., Config]:
    """Return a function writing a config and loading it."""

    def _load(text: str, **kwargs: dict[str, str]) -> Config:
        return load_config(write_config(text, **kwargs))

    return _load


@pytest.fixture
async def services() -> AsyncIterator[Services]:
    """A fresh Services whose provider clients are closed after the test."""
    svc = Services()
    yield svc
    await svc.providers.aclose()


@pytest.fixture
def seen() -> Iterator[list[ResolvedAgentExecution]]:
    """Collect, in order, every execution a turn starts with during this test (a fresh list each test)."""
    executions: list[ResolvedAgentExecution] = []
    remove = add_turn_observer(executions.append)
    try:
        yield executions
    finally:
        remove()


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    """A strict loopback fake OpenAI server: an unscripted request is an error."""
    async with FakeOpenAI(default=None) as fake:
        yield fake


def provider_toml(base_url: str) -> str:
    """Return a `[providers.fake]` table pointing at a fake server."""
    return f'[providers.fake]\nbase_url = "{base_url}"\nmax_retries = 0\n'


def priced_claude_toml(base_url: str, key_env: str) -> str:
    """Return a `[providers.claude]` Anthropic table at `base_url`, priced as Claude Sonnet is."""
    return f"""
[providers.claude]
kind = "anthropic"
base_url = "{base_url}"
api_key_env = "{key_env}"
max_retries = 0

[providers.claude.prices]
input = 3.0
output = 15.0
cached_input = 0.3
cache_write = 3.75
"""


@pytest.fixture
def debug_log() -> Iterator[io.StringIO]:
    """Log everything at DEBUG through the daemon's own sink into a buffer; restore afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    quiet = {name: logging.getLogger(name).level for name in ("httpx", "httpx2", "httpcore", "httpcore2")}
    buffer = io.StringIO()
    configure_logging(level="DEBUG", fmt="text", sink=buffer)
    try:
        yield buffer
    finally:
        logger.remove()
        logger.add(sys.stderr)
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, was in quiet.items():
            logging.getLogger(name).setLevel(was)
