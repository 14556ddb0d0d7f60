"""A fake serial device behind a stable port path, unplugged after each test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.serial_device import FakeDevice


@pytest.fixture
async def device(tmp_path: Path) -> AsyncIterator[FakeDevice]:
    """A device slot at `tmp_path/arm` (nothing plugged in until the test calls `plug`)."""
    fake = FakeDevice(tmp_path / "arm")
    try:
        yield fake
    finally:
        await fake.unplug()
