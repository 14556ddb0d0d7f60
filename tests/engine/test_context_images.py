"""Images in the history count in the context estimate, at a flat cost per image and `image_detail`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from orchestrator.config import Config
from orchestrator.engine import StopReason, Transcript, run_tool_call_loop
from orchestrator.engine.context import IMAGE_TOKENS, LOW_DETAIL_IMAGE_TOKENS, estimate_message
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, resolve
from tests.conftest import provider_toml
from tests.engine.test_context import request_tokens
from tests.fakes.openai_server import FakeOpenAI, text
from tests.media.samples import JPEG

LIMIT = 2_000


def seer_toml(fake: FakeOpenAI, detail: str, *, vision: bool = True) -> str:
    return provider_toml(fake.base_url) + (
        '\n[agents.a]\nprovider = "fake"\nmodel = "m"\nsystem_prompt = "You are terse."\n'
        f"vision = {'true' if vision else 'false'}\n"
        f'[agents.a.media]\naccept = ["image"]\nimage_detail = "{detail}"\n'
        f"[agents.a.context]\nmax_context_tokens = {LIMIT}\n"
    )


def with_pictures(execution: ResolvedAgentExecution, count: int) -> tuple[Transcript, dict[str, Any]]:
    """Return a transcript of `count` short exchanges, each user message with a picture, and the ref of one."""
    workspace = execution.security.workspace
    (workspace / "uploads").mkdir(parents=True, exist_ok=True)
    (workspace / "uploads" / "dot.jpg").write_bytes(JPEG)
    ref = {"kind": "image", "mime": "image/jpeg", "size": len(JPEG), "path": "uploads/dot.jpg"}
    transcript = Transcript(session="s")
    for n in range(count):
        transcript.append({"role": "user", "content": f"picture {n}", "media": [ref]})
        transcript.append({"role": "assistant", "content": f"a dot {n}"})
    return transcript, ref


def images_sent(body: dict[str, Any]) -> int:
    return sum(
        1 for m in body["messages"] if isinstance(m["content"], list)
        for part in m["content"] if part["type"] == "image_url"
    )


@pytest.mark.parametrize(("detail", "cost"), [("auto", IMAGE_TOKENS), ("high", IMAGE_TOKENS), ("low", LOW_DETAIL_IMAGE_TOKENS)])
async def test_l1_images_in_the_window_count_so_the_request_stays_within_the_budget(
    detail: str, cost: int, load: Callable[..., Config], services: Services
) -> None:
    async with FakeOpenAI(default=text("seen")) as fake:
        config = load(seer_toml(fake, detail))
        execution = resolve(config, "a", path=ConstructionPath.CHANNEL, services=services)
        transcript, ref = with_pictures(execution, 30)
        result = await run_tool_call_loop(execution, transcript, "and this one?", media=[ref])
    assert result.stop is StopReason.COMPLETED
    [body] = fake.requests
    assert request_tokens(body) <= LIMIT  # the parts as sent, each at its flat cost
    sent = images_sent(body)
    assert sent >= 1 and "and this one?" in json.dumps(body["messages"][-1])
    # as many pictures as fit: one more exchange would have passed the budget
    assert LIMIT - request_tokens(body) < cost + 30
    if detail == "low":
        assert sent > 10  # cheap pictures are not crowded out as if each were a large one


async def test_a_model_that_cannot_see_pays_nothing_for_pictures(load: Callable[..., Config], services: Services) -> None:
    async with FakeOpenAI(default=text("ok")) as fake:
        config = load(seer_toml(fake, "auto", vision=False))
        execution = resolve(config, "a", path=ConstructionPath.CHANNEL, services=services)
        transcript, ref = with_pictures(execution, 15)
        await run_tool_call_loop(execution, transcript, "hi", media=[ref])
    [body] = fake.requests
    assert images_sent(body) == 0
    assert len(body["messages"]) == 1 + 31  # the whole short history fits: pictures not sent cost nothing


def test_the_estimate_of_a_sent_part_follows_its_detail() -> None:
    def part(detail: str) -> dict[str, Any]:
        return {"role": "user", "content": [
            {"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": "data:,", "detail": detail}},
        ]}
    assert estimate_message(part("low")) - estimate_message({"role": "user", "content": "x"}) == LOW_DETAIL_IMAGE_TOKENS
    assert estimate_message(part("high")) - estimate_message({"role": "user", "content": "x"}) == IMAGE_TOKENS
    ref = {"role": "user", "content": "x", "media": [{"kind": "image"}, {"kind": "voice"}]}
    assert estimate_message(ref, image_cost=IMAGE_TOKENS) - estimate_message(ref) == IMAGE_TOKENS  # images only


async def test_the_token_budget_counts_a_picture_by_its_flat_cost_not_its_base64(
    load: Callable[..., Config], services: Services
) -> None:
    async with FakeOpenAI(default=text("seen")) as fake:
        config = load(seer_toml(fake, "high") + "[agents.a.budget]\nmax_tokens_per_turn = 6000\n")
        execution = resolve(config, "a", path=ConstructionPath.CHANNEL, services=services)
        workspace = execution.security.workspace
        (workspace / "uploads").mkdir(parents=True, exist_ok=True)
        (workspace / "uploads" / "big.jpg").write_bytes(JPEG + b"\0" * 200_000)  # 270 kB of base64
        ref = {"kind": "image", "mime": "image/jpeg", "size": len(JPEG) + 200_000, "path": "uploads/big.jpg"}
        result = await run_tool_call_loop(execution, Transcript(session="s"), "look", media=[ref])
    assert result.stop is StopReason.COMPLETED, result.text
    [body] = fake.requests
    assert images_sent(body) == 1
