"""ACP image and resource blocks: advertised from the agent's media policy, taken in like a chat's."""

from __future__ import annotations

import base64

import pytest

from tests.acp.test_acp_protocol_edges import initialized, wire
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text
from tests.media.samples import JPEG, PNG, PDF, PDF_TEXT

pytestmark = pytest.mark.slow

CONFIG = """
[providers.fake]
base_url = "{base_url}"
max_retries = 0

[agents.dev]
provider = "fake"
model = "dev-model"
vision = true

[agents.dev.media]
accept = ["image", "document"]
max_bytes = 20000
"""


async def test_an_agent_that_sees_advertises_images_and_gets_them(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    config = write_config(CONFIG.format(base_url=fake_llm.base_url))
    fake_llm.script(text("a pixel"), text("a report"))
    async with wire(config) as w:
        init = await initialized(w)
        capabilities = init["result"]["agentCapabilities"]["promptCapabilities"]
        assert capabilities["image"] is True and capabilities["audio"] is False
        new = await w.answer(await w.request("session/new", {"cwd": str(config.parent), "mcpServers": []}))
        session = new["result"]["sessionId"]
        picture = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(PNG).decode()}
        done = await w.answer(await w.request(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "look"}, picture]}
        ))
        assert done["result"]["stopReason"] == "end_turn"
        (image,) = [p for p in fake_llm.parts[-1] if p["type"] == "image_url"]
        assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
        blob = {"type": "resource", "resource": {"uri": "file:///tmp/q3.pdf", "mimeType": "application/pdf",
                                                 "blob": base64.b64encode(PDF).decode()}}
        done = await w.answer(await w.request("session/prompt", {"sessionId": session, "prompt": [blob]}))
        assert done["result"]["stopReason"] == "end_turn"
    user = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]
    assert "uploads/" in user and "q3.pdf.txt" in user
    (extract,) = (config.parent / "state-workspaces" / "dev").glob("uploads/*/q3.pdf.txt")
    assert PDF_TEXT in extract.read_text()


async def test_an_oversize_or_damaged_image_is_refused_in_one_line(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    config = write_config(CONFIG.format(base_url=fake_llm.base_url))
    async with wire(config) as w:
        await initialized(w)
        new = await w.answer(await w.request("session/new", {"cwd": str(config.parent), "mcpServers": []}))
        session = new["result"]["sessionId"]
        big = {"type": "image", "mimeType": "image/jpeg", "data": base64.b64encode(JPEG + b"\x00" * 30_000).decode()}
        fake = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(b"GIF89a not a png").decode()}
        said = []
        for block in (big, fake):
            request = await w.request("session/prompt", {"sessionId": session, "prompt": [block]})
            while True:
                message = await w.read()
                if message.get("method") == "session/update":
                    said.append(message["params"]["update"]["content"]["text"])
                elif message.get("id") == request:
                    assert message["result"]["stopReason"] == "refusal"
                    break
    assert said == [
        "That picture is too large: the limit is 20,000 bytes.",
        "That picture looks damaged (it is not the image it claims to be); I could not read it.",
    ]
    assert fake_llm.requests == []
    assert not list((config.parent / "state-workspaces" / "dev").glob("uploads/*/*"))
