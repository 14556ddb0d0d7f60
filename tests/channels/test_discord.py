"""The Discord adapter through real discord.py against the loopback fake Discord."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from channels import (
    ApprovalAnswer,
    ApprovalPrompt,
    ChannelAdapter,
    ChannelAuthError,
    ChannelError,
    Inbound,
    Outbound,
    create_adapter,
)
from channels.supervisor import supervise
from orchestrator.config.channels import DiscordChannelConfig
from orchestrator.errors import ConfigError
from orchestrator.lifecycle import Lifecycle
from orchestrator.policy import ApprovalArguments
from tests.fakes.discord_api import FakeDiscord

pytestmark = pytest.mark.slow

TOKEN = "good-token"
USER = "424242424242424242"
OTHER = "777777777777777777"
DM = "500000000000000001"
CHANNEL = "600000000000000001"
THREAD = "600000000000000002"
GUILD = "700000000000000001"

MakeAdapter = Callable[..., ChannelAdapter]


class Inbox:
    """Collects what the adapter delivers; `fail` makes deliver raise for matching items."""

    def __init__(self) -> None:
        self.items: list[Inbound | ApprovalAnswer] = []
        self.fail: Callable[[Inbound | ApprovalAnswer], bool] = lambda item: False
        self._queue: asyncio.Queue[Inbound | ApprovalAnswer] = asyncio.Queue()

    async def deliver(self, item: Inbound | ApprovalAnswer) -> None:
        if self.fail(item):
            raise RuntimeError("store is down")
        self.items.append(item)
        self._queue.put_nowait(item)

    async def next(self, timeout: float = 5.0) -> Inbound | ApprovalAnswer:
        async with asyncio.timeout(timeout):
            return await self._queue.get()


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(token=TOKEN) as server:
        yield server


@pytest.fixture
async def make_adapter(fake: FakeDiscord) -> AsyncIterator[MakeAdapter]:
    made: list[ChannelAdapter] = []

    def make(*, token: str = TOKEN, **overrides: Any) -> ChannelAdapter:
        fields: dict[str, Any] = {
            "kind": "discord",
            "token": "env:DISCORD_BOT_TOKEN",
            "api_base_url": fake.api_base_url,
            "guild_ready_timeout_s": 0.05,
        }
        config = DiscordChannelConfig.model_validate(fields | overrides)
        adapter = create_adapter("dc", config, secrets=lambda ref: token)
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        await adapter.aclose()


@asynccontextmanager
async def connected(adapter: ChannelAdapter) -> AsyncIterator[Inbox]:
    """Run the adapter in the background until the block ends; enter once it is ready."""
    inbox = Inbox()
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tasks:
        task = tasks.create_task(adapter.run(inbox.deliver, ready.set))
        try:
            async with asyncio.timeout(10):
                await ready.wait()
            yield inbox
        finally:
            task.cancel()


async def test_dm_is_delivered_with_its_fields(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    async with connected(make_adapter()) as inbox:
        message_id = await fake.push_message(DM, USER, "hello there", username="alice")
        got = await inbox.next()
    assert got == Inbound(
        channel="dc",
        chat=DM,
        sender=USER,
        text="hello there",
        event_id=message_id,
        message_id=message_id,
        thread=None,
        sender_name="alice",
        is_direct=True,
    )
    # no gateway_url configured: the URL came from GET /gateway/bot; JSON encoding
    assert any(r.path == "/gateway/bot" for r in fake.requests)
    assert fake.gateway_connections[0]["query"]["encoding"] == "json"
    assert fake.gateway_connections[0]["query"]["v"] == "10"
    # discord.py's Client always asks for transport compression; the fake answers in kind
    assert fake.gateway_connections[0]["query"]["compress"] == "zlib-stream"
    intents = int(fake.identify_payloads[0]["intents"])
    assert intents & (1 << 15) and intents & (1 << 12) and intents & (1 << 9) and intents & 1


async def test_guild_messages_carry_their_mention_which_is_stripped(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    # the adapter reports facts; the route's group gate (the core) decides what a guild message needs
    async with connected(make_adapter()) as inbox:
        plain = await fake.push_message(CHANNEL, USER, "no mention here", guild_id=GUILD)
        await fake.push_message(CHANNEL, OTHER, f"<@{fake.bot_id}> from a bot", guild_id=GUILD,
                                mentions=[fake.bot_id], bot=True)
        await fake.push_message(CHANNEL, fake.bot_id, "my own echo", guild_id=GUILD)
        await fake.push_message(DM, OTHER, "dm from another bot", bot=True)
        mentioned = await fake.push_message(CHANNEL, USER, f"<@!{fake.bot_id}> what is up?", guild_id=GUILD,
                                            mentions=[fake.bot_id])
        first, second = await inbox.next(), await inbox.next()
        assert isinstance(first, Inbound) and isinstance(second, Inbound)
        assert (first.event_id, first.text, first.mentions_bot, first.is_direct) == (plain, "no mention here", False, False)
        assert (second.event_id, second.text, second.chat, second.mentions_bot) == (mentioned, "what is up?", CHANNEL, True)
        await asyncio.sleep(0.1)
    assert len(inbox.items) == 2


async def test_a_reply_to_the_bot_and_a_command_are_reported(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter()
    async with connected(adapter) as inbox:
        await adapter.send(Outbound(chat=CHANNEL, text="the bot said this"))
        (said,) = fake.created_messages
        await fake.push_message(CHANNEL, USER, "and a reply", guild_id=GUILD, reply_to=said["id"])
        await fake.push_message(CHANNEL, USER, "/help", guild_id=GUILD)
        reply, command = await inbox.next(), await inbox.next()
    assert isinstance(reply, Inbound) and (reply.reply_to_bot, reply.mentions_bot, reply.command_target) == (True, False, None)
    assert isinstance(command, Inbound) and (command.reply_to_bot, command.command_target) == (False, "bot")


async def test_thread_message_names_parent_chat_and_thread(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    await fake.add_guild(GUILD, text_channels=[CHANNEL], threads={THREAD: CHANNEL})
    adapter = make_adapter()
    async with connected(adapter) as inbox:
        await fake.push_message(THREAD, USER, f"<@{fake.bot_id}> in a thread", guild_id=GUILD, mentions=[fake.bot_id])
        got = await inbox.next()
        assert isinstance(got, Inbound)
        assert (got.chat, got.thread, got.text) == (CHANNEL, THREAD, "in a thread")
        await adapter.send(Outbound(chat=got.chat, thread=got.thread, text="answer in thread"))
    assert [(m["channel_id"], m["content"]) for m in fake.created_messages] == [(THREAD, "answer in thread")]


async def test_send_chunks_to_2000_chars_keeping_code_fences(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    code = "\n".join(f"print({i})  # line {i}" for i in range(300))
    text = "Here is the script:\n\n```python\n" + code + "\n```\n\nThat is all."
    adapter = make_adapter()
    async with connected(adapter):
        await adapter.send(Outbound(chat=DM, text=text, reply_to="123456789012345678"))
    sent = fake.created_messages
    assert len(sent) >= 3
    assert all(m["channel_id"] == DM and len(m["content"]) <= 2000 for m in sent)
    for message in sent:
        assert message["content"].count("```") % 2 == 0  # every chunk renders on its own
    assert sent[1]["content"].startswith("```python\n")
    assert "print(299)" in sent[-1]["content"] and sent[-1]["content"].endswith("That is all.")
    assert str(sent[0]["message_reference"]["message_id"]) == "123456789012345678"
    assert all("message_reference" not in m for m in sent[1:])
    assert sent[0]["allowed_mentions"]["parse"] == ["users"]  # never @everyone or roles


async def test_approval_prompt_has_buttons_and_a_click_is_an_answer(
    fake: FakeDiscord, make_adapter: MakeAdapter
) -> None:
    adapter = make_adapter()
    async with connected(adapter) as inbox:
        await adapter.prompt_approval(
            ApprovalPrompt(request_id="req-7", chat=DM, thread=None, requester=USER, tool="shell",
                           arguments=ApprovalArguments.of({"command": "ls -la"}), timeout_s=120)
        )
        prompt = fake.created_messages[0]
        buttons = prompt["components"][0]["components"]
        assert [(b["label"], b["custom_id"]) for b in buttons] == [("Approve", "ap:req-7:y"), ("Deny", "ap:req-7:n")]
        assert "shell" in prompt["content"] and "ls -la" in prompt["content"]

        interaction = await fake.click("ap:req-7:y", user_id=OTHER, channel_id=DM)
        approved = await inbox.next()
        await fake.click("ap:req-7:n", user_id=USER, channel_id=CHANNEL, guild_id=GUILD)
        denied = await inbox.next()
        await fake.wait_until(lambda: len(fake.interaction_responses) == 2)
    assert approved == ApprovalAnswer(channel="dc", request_id="req-7", sender=OTHER, approved=True, chat=DM)
    assert denied == ApprovalAnswer(channel="dc", request_id="req-7", sender=USER, approved=False, chat=CHANNEL)
    assert fake.interaction_responses[0]["interaction_id"] == interaction
    assert [r["type"] for r in fake.interaction_responses] == [6, 6]  # deferred update: no spinner


async def test_a_long_argument_is_fitted_to_one_message_not_refused(
    fake: FakeDiscord, make_adapter: MakeAdapter
) -> None:
    # the fake refuses content over 2,000 characters, as Discord does; fences grow when defused
    arguments = ApprovalArguments.of({"command": "```" * 3000, "cwd": "/srv"})
    adapter = make_adapter()
    async with connected(adapter):
        await adapter.prompt_approval(
            ApprovalPrompt(request_id="req-3", chat=DM, thread=None, requester=USER, tool="shell",
                           arguments=arguments, timeout_s=120)
        )
    (prompt,) = fake.created_messages
    assert 1900 < len(prompt["content"]) <= 2000 and prompt["content"].count("```") == 2
    assert "chars cut]…" in prompt["content"] and ', "cwd": "/srv"}\n```' in prompt["content"]


async def test_click_is_acknowledged_at_once_whatever_its_delivery_does(
    fake: FakeDiscord, make_adapter: MakeAdapter
) -> None:
    # Discord fails an interaction not answered within 3 s (10062); an approval answer is
    # not durable state, so the press is acknowledged before it is delivered.
    async with connected(make_adapter()) as inbox:
        inbox.fail = lambda item: isinstance(item, ApprovalAnswer)
        interaction = await fake.click("ap:req-1:y", user_id=USER, channel_id=DM)
        await fake.push_message(DM, USER, "after the failed click")
        got = await inbox.next()
        await fake.wait_until(lambda: bool(fake.interaction_responses))
    assert isinstance(got, Inbound) and got.text == "after the failed click"
    assert [(r["interaction_id"], r["type"]) for r in fake.interaction_responses] == [(interaction, 6)]


async def test_text_approve_and_deny_commands(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    async with connected(make_adapter()) as inbox:
        await fake.push_message(DM, USER, "/approve req-1")
        await fake.push_message(CHANNEL, OTHER, "/deny req-2", guild_id=GUILD)  # no mention needed
        first, second = await inbox.next(), await inbox.next()
    assert first == ApprovalAnswer(channel="dc", request_id="req-1", sender=USER, approved=True, chat=DM)
    assert second == ApprovalAnswer(channel="dc", request_id="req-2", sender=OTHER, approved=False, chat=CHANNEL)


async def test_typing_sends_one_indicator(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter()
    async with connected(adapter):
        await adapter.typing(DM, None)
        await adapter.typing(CHANNEL, THREAD)
        with pytest.raises(ChannelError, match="not a Discord channel id"):
            await adapter.typing("general", None)
    assert fake.typing == [DM, THREAD]


async def test_send_waits_out_a_429_and_retries(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter()
    async with connected(adapter):
        fake.fail_next("POST", "/channels/{id}/messages", status=429, retry_after=0.3)
        started = time.monotonic()
        await adapter.send(Outbound(chat=DM, text="eventually"))
        elapsed = time.monotonic() - started
    posts = [r for r in fake.requests if r.method == "POST" and r.path == f"/channels/{DM}/messages"]
    assert len(posts) == 2
    assert elapsed >= 0.3
    assert [m["content"] for m in fake.created_messages] == ["eventually"]


async def test_send_gives_up_with_channel_error(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter()
    async with connected(adapter):
        fake.fail_next("POST", "/channels/{id}/messages", status=429, retry_after=0.01, times=5)
        with pytest.raises(ChannelError, match="429"):
            await adapter.send(Outbound(chat=DM, text="never"))
        fake.fail_next("POST", "/channels/{id}/messages", status=403)
        with pytest.raises(ChannelError, match="403") as forbidden:
            await adapter.send(Outbound(chat=DM, text="no permission"))
    posts = [r for r in fake.requests if r.method == "POST" and r.path.endswith("/messages")]
    assert len(posts) == 5 + 1  # discord.py's bounded retries, then one 403 without retry
    assert not isinstance(forbidden.value, ChannelAuthError)
    assert fake.created_messages == []


async def test_bad_token_is_an_auth_error_without_retries(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter(token="wrong-token")
    started = time.monotonic()
    with pytest.raises(ChannelAuthError, match="token"):
        await adapter.run(Inbox().deliver, lambda: None)
    assert time.monotonic() - started < 2
    assert [(r.method, r.path) for r in fake.requests] == [("GET", "/users/@me")]
    assert fake.gateway_connections == []


async def test_missing_privileged_intent_is_an_auth_error(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    fake.refuse_privileged_intents = True
    with pytest.raises(ChannelAuthError, match="MESSAGE CONTENT"):
        await make_adapter(gateway_url=fake.gateway_url).run(Inbox().deliver, lambda: None)
    assert len(fake.gateway_connections) == 1
    assert not any(r.path == "/gateway/bot" for r in fake.requests)  # gateway_url given: not asked


async def test_gateway_refusing_the_token_is_an_auth_error(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    fake.gateway_rejects_token = True
    started = time.monotonic()
    with pytest.raises(ChannelAuthError, match="4004"):
        await make_adapter().run(Inbox().deliver, lambda: None)
    assert time.monotonic() - started < 2
    assert len(fake.gateway_connections) == 1  # discord.py did not retry


async def test_unreachable_api_is_a_channel_error(make_adapter: MakeAdapter) -> None:
    async with FakeDiscord() as gone:
        base = gone.api_base_url
    adapter = make_adapter(api_base_url=base)
    with pytest.raises(ChannelError) as raised:
        await adapter.run(Inbox().deliver, lambda: None)
    assert not isinstance(raised.value, ChannelAuthError)


async def test_gateway_drop_is_resumed_and_later_messages_arrive(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    async with connected(make_adapter()) as inbox:
        await fake.push_message(DM, USER, "before the drop")
        assert (await inbox.next()).text == "before the drop"  # type: ignore[union-attr]
        await fake.drop_gateway()
        missed = await fake.push_message(DM, USER, "sent while disconnected")
        got = await inbox.next()
        await fake.wait_until(lambda: fake.gateway_connections[-1].get("op") == "resume")
        await fake.push_message(DM, USER, "after the resume")
        later = await inbox.next()
    assert isinstance(got, Inbound) and got.event_id == missed
    assert isinstance(later, Inbound) and later.text == "after the resume"
    assert [c.get("op") for c in fake.gateway_connections] == ["identify", "resume"]
    assert fake.gateway_connections[1]["path"] == "/gateway-resume"  # READY's resume_gateway_url


async def test_a_zombie_gateway_is_resumed_at_the_first_missed_heartbeat_ack(
    fake: FakeDiscord, make_adapter: MakeAdapter
) -> None:
    fake.heartbeat_interval_ms = 2_000  # Discord's is ~41 s; discord.py alone waits 60 s of silence
    async with connected(make_adapter()) as inbox:
        await fake.wait_until(lambda: sum(acked for _, acked in fake.heartbeats) >= 2)
        fake.zombie_gateway()  # the socket stays open, but nothing is ACKed or dispatched on it
        zombied = time.monotonic()
        missed = await fake.push_message(DM, USER, "sent to the zombie")
        await fake.wait_until(lambda: fake.gateway_connections[-1].get("op") == "resume", timeout=20)
        noticed = time.monotonic() - zombied
        got = await inbox.next()
        await fake.push_message(DM, USER, "after the resume")
        later = await inbox.next()
    unacked = [at for at, acked in fake.heartbeats if not acked]
    print(f"\nzombie noticed and resumed after {noticed:.2f}s (interval 2s), unACKed heartbeats: {len(unacked)}")
    assert len(unacked) == 1  # reconnected at the first missed ACK, before another beat was due
    assert [c.get("op") for c in fake.gateway_connections] == ["identify", "resume"]
    assert isinstance(got, Inbound) and got.event_id == missed  # replayed on RESUME
    assert isinstance(later, Inbound) and later.text == "after the resume"


async def test_redelivery_keeps_the_event_id(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    async with connected(make_adapter()) as inbox:
        first_id = await fake.push_message(DM, USER, "same message")
        await fake.push_message(DM, USER, "same message", message_id=first_id)
        first, again = await inbox.next(), await inbox.next()
    assert isinstance(first, Inbound) and isinstance(again, Inbound)
    assert first.event_id == again.event_id == first_id


async def test_second_run_after_a_failure_works(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    adapter = make_adapter()
    await fake.drop_gateway()  # nothing connected yet: a no-op
    async with connected(adapter) as inbox:
        await fake.push_message(DM, USER, "one")
        assert isinstance(await inbox.next(), Inbound)
    async with connected(adapter) as inbox:
        await fake.push_message(DM, USER, "two")
        got = await inbox.next()
    assert isinstance(got, Inbound) and got.text == "two"
    assert [c.get("op") for c in fake.gateway_connections] == ["identify", "identify"]


async def test_send_before_run_is_a_channel_error(make_adapter: MakeAdapter) -> None:
    with pytest.raises(ChannelError, match="not connected"):
        await make_adapter().send(Outbound(chat=DM, text="too early"))


async def test_one_api_base_per_process(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    first = make_adapter()
    with pytest.raises(ConfigError, match="api_base_url"):
        make_adapter(api_base_url="http://127.0.0.1:9/api/v10")
    same = make_adapter()  # the same endpoints are fine
    await first.aclose()
    await same.aclose()
    make_adapter(api_base_url="http://127.0.0.1:9/api/v10")  # nothing live any more


async def test_a_dropped_gateway_is_reconnecting_until_it_is_resumed(fake: FakeDiscord, make_adapter: MakeAdapter) -> None:
    changes: list[tuple[Lifecycle, str | None]] = []
    readies: list[int] = []
    async with asyncio.TaskGroup() as tasks:
        task = tasks.create_task(supervise(
            make_adapter(), Inbox().deliver, on_ready=lambda: readies.append(1), on_fatal=lambda exc: None,
            on_change=lambda state, reason: changes.append((state, reason)),
        ))
        async with asyncio.timeout(10):
            while not readies:
                await asyncio.sleep(0.02)
        await fake.drop_gateway()
        await fake.wait_until(lambda: fake.gateway_connections[-1].get("op") == "resume")
        async with asyncio.timeout(10):
            while not changes or changes[-1][0] is not Lifecycle.READY:
                await asyncio.sleep(0.02)
        task.cancel()
    assert changes[0] == (Lifecycle.RECONNECTING, "the gateway connection closed; discord.py is reconnecting")
    assert {state for state, _ in changes[1:]} == {Lifecycle.READY}  # back (said on connect and on RESUMED)
    assert readies == [1]  # resumed in place: the channel was never torn down
