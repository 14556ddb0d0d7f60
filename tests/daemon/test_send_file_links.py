"""`send_file` posts the file it checked: hard links refused, a link swapped in after the check never followed.

The tool opens the file once beneath the workspace; the real Telegram adapter (against
FakeTelegram) is driven through the daemon's `ChatFileOutlet` with that open file. The
swap happens where it hurt before: after the tool's check, before the adapter reads.
"""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels import FileAdapter, Inbound, create_adapter
from orchestrator.config import SecretRef
from orchestrator.config.channels import TelegramChannelConfig
from orchestrator.daemon.media import ChatFileOutlet
from orchestrator.errors import ToolFailure
from orchestrator.policy import SecurityPolicy
from orchestrator.tools import SendFileTool, bind_outlet
from tests.fakes.telegram_api import FakeTelegram

SECRET = b"TELEGRAM_TOKEN=123456:the-bot-token\n"
REPORT = b"quarterly numbers\n"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def adapter(tg: FakeTelegram) -> AsyncIterator[FileAdapter]:
    config = TelegramChannelConfig.model_validate(
        {"kind": "telegram", "token": "env:TG", "api_base_url": tg.api_base_url, "poll_timeout_s": 1.0}
    )

    def secrets(ref: SecretRef) -> str:
        return tg.token

    made = create_adapter("tg", config, secrets=secrets)
    assert isinstance(made, FileAdapter)
    yield made
    await made.aclose()  # type: ignore[attr-defined]


def tool(workspace: Path) -> SendFileTool:
    security = SecurityPolicy(
        agent="a", autonomy="full", workspace=workspace, shell_allowed_commands=frozenset(),
        http_allowed_hosts=(), http_allow_private_addresses=False, http_max_bytes=1024,
    )
    return SendFileTool(security=security)


class SwapsFirst:
    """The daemon's outlet, with an attacker's move just before it runs: the checked path becomes a link."""

    def __init__(self, outlet: ChatFileOutlet, swap: Path, to: Path) -> None:
        self._outlet, self._swap, self._to = outlet, swap, to

    @property
    def max_file_bytes(self) -> int:
        return self._outlet.max_file_bytes

    async def send_file(self, content: io.BufferedReader, *, size: int, name: str, mime: str, caption: str | None) -> str:
        os.unlink(self._swap)
        self._swap.symlink_to(self._to)
        return await self._outlet.send_file(content, size=size, name=name, mime=mime, caption=caption)


async def test_send_file_refuses_a_hard_link_and_a_link_and_never_follows_a_swapped_one(
    tg: FakeTelegram, adapter: FileAdapter, tmp_path: Path
) -> None:
    secret = tmp_path / "secrets" / "telegram"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    workspace = tmp_path / "ws"
    (workspace / "out").mkdir(parents=True)
    (workspace / "out" / "planted.txt").hardlink_to(secret)
    (workspace / "out" / "linked.txt").symlink_to(secret)
    (workspace / "out" / "report.txt").write_bytes(REPORT)
    inbound = Inbound(channel="tg", chat="42", sender="42", text="send it", event_id="1")
    outlet = ChatFileOutlet(adapter=adapter, inbound=inbound)
    send = tool(workspace)

    with bind_outlet(outlet):
        for planted, why in (("out/planted.txt", "2 hard links"), ("out/linked.txt", "symbolic link")):
            with pytest.raises(ToolFailure, match=why):
                await send.invoke({"path": planted})
    assert tg.uploads == []

    with bind_outlet(SwapsFirst(outlet, workspace / "out" / "report.txt", secret)):
        result = await send.invoke({"path": "out/report.txt"})
    assert result.startswith("sent out/report.txt (18 bytes)")
    (upload,) = tg.uploads
    assert upload["data"] == REPORT and upload["filename"] == "report.txt"  # the checked file's bytes
    assert SECRET not in upload["data"]
