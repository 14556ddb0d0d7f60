"""`/usage` in chat: the sender's own usage with the routed agent, never another sender's, never the model."""

from __future__ import annotations

from channels import Inbound
from orchestrator.daemon import process_message
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, text, tool_call, with_usage


def usage_toml(fake: FakeOpenAI) -> str:
    return provider_toml(fake.base_url) + (
        '[providers.fake.prices]\ninput = 1000.0\noutput = 2000.0\n'
        '[agents.a]\nprovider = "fake"\nmodel = "m"\n'
        "[agents.a.budget]\nmax_tokens_per_day = 5000\n"
        '[channels.term]\nkind = "terminal"\nuser = "alice"\n'
        '[[routes]]\nchannel = "term"\nagent = "a"\nsenders = ["alice", "bob"]\n'
    )


async def test_usage_shows_only_the_senders_own_figures_and_budget(write_config: WriteConfig, fake_llm: FakeOpenAI) -> None:
    path = write_config(usage_toml(fake_llm))
    async with running(path) as (runtime, terminals):
        screen = terminals["term"].screen
        for n, (sender, prompt) in enumerate((("alice", 300), ("alice", 400), ("bob", 900))):
            fake_llm.script(with_usage(text(f"answer {n}"), prompt=prompt, completion=50))
            await process_message(runtime, Inbound(is_direct=True, channel="term", chat="terminal", sender=sender, text="hi", event_id=f"e{n}"))
        asked = len(fake_llm.requests)
        mark = len(screen.lines)
        await process_message(runtime, Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text="/usage", event_id="u1"))
        lines = await screen.wait_for(lambda lines: any("daily budget" in line for line in lines[mark:]))
    shown = [line for line in lines[mark:] if line.strip()]
    cost = (700 * 1000.0 + 100 * 2000.0) / 1e6
    assert any(line.endswith("Your usage with a:") for line in shown), shown
    assert any(f"last 24 hours: 800 tokens in 2 model calls, cost {cost:.4f}" in line for line in shown), shown
    assert any(f"last 30 days: 800 tokens in 2 model calls, cost {cost:.4f}" in line for line in shown), shown
    assert any("daily budget: 4200 of 5000 tokens left" in line for line in shown), shown
    assert not any("950" in line for line in shown)  # bob's figures stay bob's
    assert len(fake_llm.requests) == asked  # a command, never a turn


async def test_usage_counts_what_the_agents_delegates_spent_for_the_sender(
    write_config: WriteConfig, fake_llm: FakeOpenAI
) -> None:
    # issue 32: /usage with `a` showed 780 used while the sender's delegated turns had cost 7,530 more
    toml = usage_toml(fake_llm).replace(
        '[agents.a]\nprovider = "fake"\nmodel = "m"\n',
        '[agents.a]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\ntools = ["delegate"]\ndelegates = ["b"]\n',
    )
    path = write_config(toml.replace("max_tokens_per_day = 5000", "max_tokens_per_day = 10000")
                        + '[agents.b]\nprovider = "fake"\nmodel = "b"\n')
    fake_llm.script(
        with_usage(tool_call("delegate", {"agent": "b", "task": "t"}), prompt=300, completion=20),
        with_usage(text("helped"), prompt=7_000, completion=530),
        with_usage(text("done"), prompt=440, completion=20),
    )
    async with running(path) as (runtime, terminals):
        screen = terminals["term"].screen
        await process_message(runtime, Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text="go", event_id="g"))
        mark = len(screen.lines)
        await process_message(runtime, Inbound(is_direct=True, channel="term", chat="terminal", sender="alice", text="/usage", event_id="u"))
        lines = await screen.wait_for(lambda lines: any("daily budget" in line for line in lines[mark:]))
    shown = [line for line in lines[mark:] if line.strip()]
    assert any("last 24 hours: 780 tokens in 2 model calls" in line for line in shown), shown
    assert any(
        "daily budget: 1690 of 10000 tokens left (7530 of the day's tokens went to agents a delegated to)" in line
        for line in shown
    ), shown
