"""The chat a schedule's `deliver_to` names, as the `send_file` tool's outlet for the run."""

from __future__ import annotations

import io

from channels import FileAdapter, OutboundFile
from orchestrator.config import DeliverTo

__all__ = ["DeliverToOutlet"]


class DeliverToOutlet:
    """Posts `send_file`'s files into the schedule's `deliver_to` chat, and nowhere else."""

    __slots__ = ("_adapter", "_target")

    def __init__(self, *, adapter: FileAdapter, target: DeliverTo) -> None:
        self._adapter = adapter
        self._target = target

    @property
    def max_file_bytes(self) -> int:
        return self._adapter.max_file_bytes

    async def send_file(self, content: io.BufferedReader, *, size: int, name: str, mime: str, caption: str | None) -> str:
        """Post the open file to the `deliver_to` chat; raises `ChannelError` when the platform fails or refuses it."""
        file = OutboundFile(chat=self._target.chat, content=content, size=size, name=name, mime=mime, caption=caption)
        return await self._adapter.send_file(file)
