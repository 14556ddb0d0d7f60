"""The status socket in process: a state dir whose socket path is longer than a unix address holds."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from orchestrator.checks import load_config
from orchestrator.daemon import Runtime, ask_status, serve_status_socket, status_socket_path
from tests.conftest import WriteConfig, provider_toml


async def test_a_state_dir_past_the_unix_address_limit_still_answers(write_config: WriteConfig, tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    path = write_config(provider_toml("http://127.0.0.1:9/v1") + f'[daemon]\nstate_dir = "{deep}"\n'
                        + '[agents.a]\nprovider = "fake"\nmodel = "m"\n')
    config = load_config(path)
    socket_path = status_socket_path(config.state_path())
    assert len(os.fsencode(socket_path)) > 107  # sockaddr_un could not hold it
    async with Runtime.open(config, config_path=path) as runtime:
        async with serve_status_socket(runtime) as served:
            assert served == socket_path and socket_path.exists()
            document = await asyncio.to_thread(ask_status, config.state_path())
            assert document["channels"] == [] and document["config"]["path"] == str(path)
            assert document["uptime_s"] >= 0 and document["instance"]["pid"] == os.getpid()
        assert not socket_path.exists()  # removed at exit
