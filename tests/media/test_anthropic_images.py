"""An image reference in the transcript reaches an Anthropic-kind vision agent as an image block."""

from __future__ import annotations

import base64

import pytest

from orchestrator.checks import load_config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.seam import ConstructionPath, Services, resolve
from tests.conftest import WriteConfig
from tests.fakes.anthropic_api import FakeAnthropic, text
from tests.media.samples import PNG

KEY = "sk-ant-test-media-0123456789"


async def test_an_image_part_becomes_a_base64_image_block(write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDIA_ANTHROPIC_KEY", KEY)
    async with FakeAnthropic(default=None, api_key=KEY) as fake:
        path = write_config(f"""
[providers.claude]
kind = "anthropic"
base_url = "{fake.base_url}"
api_key = "env:MEDIA_ANTHROPIC_KEY"
max_retries = 0

[agents.seer]
provider = "claude"
model = "claude-x"
vision = true

[agents.seer.media]
accept = ["image"]
""")
        execution = resolve(load_config(path), "seer", path=ConstructionPath.GATEWAY_CHAT, services=Services())
        workspace = execution.security.workspace
        (workspace / "uploads").mkdir(parents=True, exist_ok=True)
        (workspace / "uploads" / "dot.png").write_bytes(PNG)
        fake.script(text("a dot"))
        ref = {"kind": "image", "mime": "image/png", "size": len(PNG), "path": "uploads/dot.png"}
        result = await run_tool_call_loop(execution, Transcript(session="s"), "what is it?", media=[ref])
        await execution.provider.aclose()
    assert result.text == "a dot"
    (user,) = fake.requests[0]["messages"]
    assert user["content"] == [
        {"type": "text", "text": "what is it?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}},
    ]
