"""ACP input lines as long as the agent's media caps allow: two 7 MB PNGs are one prompt the agent
takes, and a longer line is answered with an error naming the limit while the agent keeps serving."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.acp.test_acp_protocol_edges import Wire, initialized, wire
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text
from tests.media.samples import PNG

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
accept = ["image"]
"""
# The default caps: 25,000,000 bytes of files a message, base64-encoded, plus 1 MiB.
LIMIT = 4 * -(-25_000_000 // 3) + (1 << 20)


def prompt_line(request: int, session: str, blocks: list[dict[str, Any]], *, id_last: bool = False) -> str:
    params = {"sessionId": session, "prompt": blocks}
    if id_last:
        return json.dumps({"jsonrpc": "2.0", "method": "session/prompt", "params": params, "id": request})
    return json.dumps({"jsonrpc": "2.0", "id": request, "method": "session/prompt", "params": params})


async def new_session(w: Wire, cwd: str) -> str:
    new = await w.answer(await w.request("session/new", {"cwd": cwd, "mcpServers": []}))
    session: str = new["result"]["sessionId"]
    return session


@pytest.mark.timeout(180)
async def test_two_7_mb_pictures_fit_and_a_longer_line_is_an_error_naming_the_limit(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    config = write_config(CONFIG.format(base_url=fake_llm.base_url))
    fake_llm.script(text("two pictures"), text("still here"))
    picture = base64.b64encode(PNG + b"\x00" * (7_000_000 - len(PNG))).decode()
    pictures = [{"type": "image", "mimeType": "image/png", "data": picture}] * 2
    async with wire(config) as w:
        await initialized(w)
        session = await new_session(w, str(config.parent))
        await w.line(prompt_line(101, session, [{"type": "text", "text": "compare"}, *pictures]))
        assert (await w.answer(101))["result"]["stopReason"] == "end_turn"
        assert len([p for p in fake_llm.parts[-1] if p["type"] == "image_url"]) == 2
        # one byte over the limit, the id in the line's head; then with the id after the prompt
        filler = "x" * LIMIT
        await w.line(prompt_line(102, session, [{"type": "text", "text": filler}]))
        await w.line(prompt_line(103, session, [{"type": "text", "text": filler}], id_last=True))
        refused = [await w.read(), await w.read()]
        assert [r["id"] for r in refused] == [102, None]
        for answer in refused:
            assert answer["error"]["code"] == -32600
            assert f"this agent takes at most {LIMIT:,} bytes a line" in answer["error"]["message"]
            assert answer["error"]["data"]["limit"] == LIMIT and answer["error"]["data"]["size"] > LIMIT
        # still serving, in the same session
        await w.line(prompt_line(104, session, [{"type": "text", "text": "and now?"}]))
        assert (await w.answer(104))["result"]["stopReason"] == "end_turn"
        assert w.proc.stderr is not None
    stderr = (await w.proc.stderr.read()).decode()
    assert w.proc.returncode == 0 and "Traceback" not in stderr
    assert len(fake_llm.requests) == 2
