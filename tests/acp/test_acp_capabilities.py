"""What `initialize` advertises: `promptCapabilities.image` only when the agent takes images and can see them."""

from __future__ import annotations

import pytest

from tests.acp.test_acp_protocol_edges import initialized, wire
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.slow

CONFIG = """
[providers.fake]
base_url = "{base_url}"
max_retries = 0

[agents.dev]
provider = "fake"
model = "dev-model"
vision = {vision}
{media}
"""


@pytest.mark.parametrize(
    ("vision", "accept", "image"),
    [
        ("true", '["image", "document"]', True),
        ("false", '["image", "document"]', False),  # it takes pictures, but its model cannot look at them
        ("true", '["document"]', False),  # its model can see, but the policy takes no pictures
        ("true", None, False),  # no [media] at all
    ],
)
async def test_image_is_advertised_only_when_the_agent_accepts_images_and_can_see(
    vision: str, accept: str | None, image: bool, write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    media = f"\n[agents.dev.media]\naccept = {accept}\n" if accept is not None else ""
    config = write_config(CONFIG.format(base_url=fake_llm.base_url, vision=vision, media=media))
    async with wire(config) as w:
        init = await initialized(w)
    capabilities = init["result"]["agentCapabilities"]["promptCapabilities"]
    assert capabilities.get("image", False) is image
    assert capabilities.get("audio", False) is False  # no voice accepted, no transcription model
    assert capabilities["embeddedContext"] is True
