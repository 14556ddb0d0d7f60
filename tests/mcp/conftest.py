"""MCP fixtures: one kit HTTP server per test module. The helpers are in tests/mcp/kit.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mcp.kit import HttpKit, free_port


@pytest.fixture(scope="module")
def http_kit_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpKit]:
    """One kit HTTP server for a test module (its counters are shared by that module's tests)."""
    server = HttpKit(free_port(), tmp_path_factory.mktemp("kit-http") / "server.log")
    server.start()
    yield server
    server.stop()
