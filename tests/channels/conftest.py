"""Fixtures the adapter tests share."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from channels import OutboundFile

Outbound = Callable[..., OutboundFile]


@pytest.fixture
def outbound() -> Iterator[Outbound]:
    """Make `OutboundFile`s for files on disk, each opened once as `send_file` does (closed after the test)."""
    with ExitStack() as stack:

        def make(*, chat: str, path: Path, **fields: Any) -> OutboundFile:
            content = stack.enter_context(path.open("rb"))
            return OutboundFile(chat=chat, content=content, size=path.stat().st_size, **fields)

        yield make
