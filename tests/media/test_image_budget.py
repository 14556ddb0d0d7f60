"""The image budget: what concurrent vision turns hold of encoded images, through the real engine path.

Each turn is `run_tool_call_loop` on a resolved vision agent against FakeOpenAI (through the
openai SDK); the budget is the running loop's, replaced per test with a small one so a few
small images contend for it.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.checks import load_config
from orchestrator.engine import StopReason, Transcript, TurnResult, run_tool_call_loop
from orchestrator.media import (
    IMAGE_BUDGET_BYTES,
    ImageBudget,
    encoded_size,
    image_budget,
    model_messages,
    use_image_budget,
)
from orchestrator.seam import ConstructionPath, ResolvedAgentExecution, Services, resolve
from tests.conftest import WriteConfig, provider_toml
from tests.fakes.openai_server import FakeOpenAI, status, text, tool_call
from tests.media.samples import jpeg_of_size

SIZE = 30_000
ENCODED = encoded_size("image/jpeg", SIZE)


def _seer(write_config: WriteConfig, base_url: str, services: Services, *, tools: str = "[]") -> ResolvedAgentExecution:
    path = write_config(provider_toml(base_url) + f"""
[agents.seer]
provider = "fake"
model = "seer-model"
autonomy = "full"
vision = true
tools = {tools}

[agents.seer.media]
accept = ["image"]
""")
    return resolve(load_config(path), "seer", path=ConstructionPath.GATEWAY_CHAT, services=services)


def _upload(execution: ResolvedAgentExecution, name: str, data: bytes) -> dict[str, Any]:
    folder = execution.security.workspace / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return {"kind": "image", "mime": "image/jpeg", "size": len(data), "path": f"uploads/{name}"}


async def _turns(execution: ResolvedAgentExecution, refs: list[dict[str, Any]]) -> list[TurnResult]:
    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(run_tool_call_loop(execution, Transcript(session=f"s{i}"), "what is it?", media=[ref]))
            for i, ref in enumerate(refs)
        ]
    return [task.result() for task in tasks]


UseBudget = Callable[..., ImageBudget]


@pytest.fixture
async def use_budget() -> AsyncIterator[UseBudget]:
    """Give the test's loop a fresh budget (`use_budget(limit=...)`), the one before restored after."""
    before = image_budget()

    def use(**limit: int) -> ImageBudget:
        budget = ImageBudget(**limit)
        use_image_budget(budget)
        return budget

    yield use
    use_image_budget(before)


async def _until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.005)


async def test_concurrent_image_turns_never_hold_more_than_the_budget(
    write_config: WriteConfig, services: Services, use_budget: UseBudget
) -> None:
    budget = use_budget(limit=2 * ENCODED)
    # a model that takes a moment, so the eight turns' requests are all wanted at once
    async with FakeOpenAI(default=text("a picture"), latency_s=0.05) as fake:
        execution = _seer(write_config, fake.base_url, services)
        refs = [_upload(execution, f"p{i}.jpg", jpeg_of_size(SIZE)) for i in range(8)]
        results = await _turns(execution, refs)
    assert [r.text for r in results] == ["a picture"] * 8
    assert len(fake.requests) == 8
    assert all(len([p for p in parts if p["type"] == "image_url"]) == 1 for parts in fake.parts)
    assert budget.peak <= budget.limit  # never more than two images' data URLs in flight
    assert budget.peak >= ENCODED
    assert budget.waited >= 1  # the budget did make some turn wait
    assert budget.held == 0 and budget.waiting == 0


async def test_an_image_bigger_than_the_budget_still_runs_alone(
    write_config: WriteConfig, services: Services, use_budget: UseBudget
) -> None:
    budget = use_budget(limit=ENCODED // 2)
    async with FakeOpenAI(default=text("big"), latency_s=0.02) as fake:
        execution = _seer(write_config, fake.base_url, services)
        refs = [_upload(execution, f"big{i}.jpg", jpeg_of_size(SIZE)) for i in range(3)]
        results = await _turns(execution, refs)
    assert [r.text for r in results] == ["big"] * 3
    assert budget.peak == ENCODED  # admitted one at a time, each when nothing else was held
    assert budget.held == 0


async def test_a_failing_provider_call_gives_the_budget_back(
    write_config: WriteConfig, services: Services, use_budget: UseBudget
) -> None:
    budget = use_budget(limit=ENCODED)
    async with FakeOpenAI(default=None) as fake:
        fake.script(status(500, message="model crashed", should_retry=False), text("second try seen"))
        execution = _seer(write_config, fake.base_url, services)
        ref = _upload(execution, "p.jpg", jpeg_of_size(SIZE))
        failed = await run_tool_call_loop(execution, Transcript(session="a"), "what is it?", media=[ref])
        assert failed.stop is StopReason.PROVIDER_ERROR
        assert budget.held == 0
        again = await run_tool_call_loop(execution, Transcript(session="b"), "and now?", media=[ref])
    assert again.text == "second try seen"
    assert budget.held == 0 and budget.peak == ENCODED


async def test_cancelled_turns_give_back_what_they_held_and_their_place(
    write_config: WriteConfig, services: Services, use_budget: UseBudget
) -> None:
    budget = use_budget(limit=ENCODED)
    async with FakeOpenAI(default=text("finally"), latency_s=30) as fake:
        execution = _seer(write_config, fake.base_url, services)
        ref = _upload(execution, "p.jpg", jpeg_of_size(SIZE))
        in_flight = asyncio.create_task(run_tool_call_loop(execution, Transcript(session="a"), "1", media=[ref]))
        await _until(lambda: len(fake.requests) == 1)
        assert budget.held == ENCODED
        queued = asyncio.create_task(run_tool_call_loop(execution, Transcript(session="b"), "2", media=[ref]))
        await _until(lambda: budget.waiting == 1)
        queued.cancel()
        await asyncio.gather(queued, return_exceptions=True)
        assert queued.cancelled() and budget.waiting == 0 and budget.held == ENCODED
        in_flight.cancel()
        await asyncio.gather(in_flight, return_exceptions=True)
        assert in_flight.cancelled() and budget.held == 0
        fake.latency_s = 0
        after = await run_tool_call_loop(execution, Transcript(session="c"), "3", media=[ref])
    assert after.text == "finally"
    assert len(fake.requests) == 2  # the queued turn never sent its request
    assert budget.held == 0 and budget.waiting == 0


async def test_each_request_of_a_turn_encodes_its_images_afresh_and_keeps_none_after(
    write_config: WriteConfig, services: Services, use_budget: UseBudget
) -> None:
    budget = use_budget()
    async with FakeOpenAI(default=None) as fake:
        execution = _seer(write_config, fake.base_url, services, tools='["list_dir"]')
        data = jpeg_of_size(SIZE)
        ref = _upload(execution, "p.jpg", data)
        fake.script(tool_call("list_dir", {"path": "."}), text("two looks"))
        transcript = Transcript(session="s")
        result = await run_tool_call_loop(execution, transcript, "look twice", media=[ref])
    assert result.text == "two looks"
    url = "data:image/jpeg;base64," + base64.b64encode(data).decode()
    sent = [[p["image_url"]["url"] for p in parts if p["type"] == "image_url"] for parts in fake.parts]
    assert sent == [[url], [url]]  # the same picture in both requests of the turn
    assert budget.held == 0 and budget.peak == ENCODED
    assert "base64" not in repr(transcript.messages)  # the transcript keeps the reference only


async def test_a_large_image_is_encoded_exactly_in_pieces(tmp_path: Path) -> None:
    data = bytes(range(256)) * 4000 + b"tail"  # over one read piece, not a multiple of 3
    (tmp_path / "uploads").mkdir()
    (tmp_path / "uploads" / "x.png").write_bytes(data)
    ref = {"kind": "image", "mime": "image/png", "size": len(data), "path": "uploads/x.png"}
    window = [{"role": "user", "content": "a", "media": [ref]}, {"role": "user", "content": "b", "media": [ref]}]
    budget = ImageBudget()
    async with model_messages(window, tmp_path, vision=True, detail="low", budget=budget) as messages:
        assert budget.held == encoded_size("image/png", len(data))  # the one file, counted once
        first, second = (m["content"][1]["image_url"]["url"] for m in messages)
    assert first == "data:image/png;base64," + base64.b64encode(data).decode()
    assert first is second  # one string for both parts
    assert budget.held == 0


async def test_an_image_that_grew_or_left_the_workspace_is_not_sent(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "uploads").mkdir(parents=True)
    (tmp_path / "secret.png").write_bytes(b"outside")
    (workspace / "uploads" / "x.png").write_bytes(b"\x89PNG small")
    refs = [
        {"kind": "image", "mime": "image/png", "size": 10, "path": "uploads/x.png"},
        {"kind": "image", "mime": "image/png", "size": 7, "path": "../secret.png"},
    ]
    window = [{"role": "user", "content": "a", "media": refs}]
    budget = ImageBudget()
    async with model_messages(window, workspace, vision=True, detail="low", budget=budget) as messages:
        assert budget.held == encoded_size("image/png", 10)  # the jailbreak is not even measured
        (workspace / "uploads" / "x.png").write_bytes(b"\x89PNG small" + b"\x00" * 1000)
    async with model_messages(window, workspace, vision=True, detail="low", budget=budget) as messages:
        parts = messages[0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text"]
    assert "no longer available" in parts[2]["text"]


async def test_the_budget_admits_in_order_and_a_big_request_is_not_overtaken() -> None:
    budget = ImageBudget(limit=100)
    order: list[str] = []
    first = budget.hold(60)
    await first.__aenter__()

    async def want(name: str, size: int) -> None:
        async with budget.hold(size):
            order.append(name)
            await asyncio.sleep(0)

    big = asyncio.create_task(want("big", 60))
    await _until(lambda: budget.waiting == 1)
    small = asyncio.create_task(want("small", 10))  # would fit beside the first, but big is ahead
    await _until(lambda: budget.waiting == 2)
    assert order == [] and budget.held == 60
    await first.__aexit__(None, None, None)
    await asyncio.gather(big, small)
    assert order == ["big", "small"]
    assert budget.held == 0 and budget.peak == 70


async def test_each_event_loop_has_its_own_budget() -> None:
    mine = image_budget()
    assert image_budget() is mine
    assert mine.limit == IMAGE_BUDGET_BYTES
    other = await asyncio.to_thread(lambda: asyncio.run(_budget_of_new_loop()))
    assert other is not mine


async def _budget_of_new_loop() -> ImageBudget:
    return image_budget()
