"""The daemon's ChannelSet: explicit states, start that returns once ready or raises, awaited stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from channels import ChannelAuthError, ChannelError, Outbound
from orchestrator.checks import load_config
from orchestrator.daemon import ChannelState, Runtime, start_channel, start_channels, stop_channel
from orchestrator.daemon.channels import Channel
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.telegram_api import FakeTelegram

AGENT = '[agents.a]\nprovider = "fake"\nmodel = "m"\n'


async def test_a_refused_token_fails_the_start_and_leaves_the_channel_failed(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_TEST_TG_BAD", "999:wrong-token")
    async with FakeTelegram() as tg:
        channel = f'\n[channels.tg]\nkind = "telegram"\ntoken = "env:ORCH_TEST_TG_BAD"\napi_base_url = "{tg.api_base_url}"\n'
        path = write_config(provider_toml("http://127.0.0.1:9/v1") + AGENT + channel)
        config = load_config(path)
        async with Runtime.open(config, config_path=path) as runtime:
            await start_channels(runtime)  # logs it, serves on without it
            failed = runtime.channels.get("tg")
            assert failed is not None and failed.state is ChannelState.STOPPED and failed.refused
            assert isinstance(failed.error, ChannelAuthError)
            status = runtime.channels.status()["tg"]
            assert (status.kind, status.ready) == ("telegram", False) and status.error == str(failed.error)
            assert runtime.channels.adapter("tg") is None  # nothing is sent through a failed channel
            await stop_channel(runtime, "tg")
            with pytest.raises(ChannelAuthError):  # started on its own, the start raises the failure
                await start_channel(runtime, "tg", config.channels["tg"])
            assert "tg" in runtime.channels


async def test_stop_waits_until_the_channel_has_stopped(write_config: WriteConfig) -> None:
    path = write_config(provider_toml("http://127.0.0.1:9/v1") + AGENT + '\n[channels.term]\nkind = "terminal"\n')
    async with running(path) as (runtime, _):
        channel = runtime.channels.get("term")
        assert channel is not None and channel.state is ChannelState.READY
        assert runtime.channels.status()["term"].ready
        tasks = runtime.task_count()
        await stop_channel(runtime, "term")
        assert channel.state is ChannelState.STOPPED and "term" not in runtime.channels
        assert runtime.task_count() == tasks - 1  # its supervisor has ended, not just been told to
        await stop_channel(runtime, "term")  # stopping a channel that is gone does nothing
        assert list(runtime.channels) == []


LEASE_TOKEN = "123:lease-token"


def _telegram_config(write_config: WriteConfig, tg: FakeTelegram) -> Path:
    channel = f'\n[channels.tg]\nkind = "telegram"\ntoken = "env:ORCH_TEST_TG_LEASE"\napi_base_url = "{tg.api_base_url}"\n'
    return write_config(provider_toml("http://127.0.0.1:9/v1") + AGENT + channel)


async def _started_tg(runtime: Runtime) -> Channel:
    """Start the config's channels; return the Telegram one."""
    await start_channels(runtime)
    held = runtime.channels.get("tg")
    assert held is not None
    return held


async def test_a_leased_channel_stopped_keeps_its_adapter_open_until_the_release(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_TEST_TG_LEASE", LEASE_TOKEN)
    async with FakeTelegram(token=LEASE_TOKEN) as tg:
        path = _telegram_config(write_config, tg)
        async with Runtime.open(load_config(path), config_path=path) as runtime:
            held = await _started_tg(runtime)
            runtime.channels.lease(held)  # a reply streams through it
            await stop_channel(runtime, "tg")  # a reload restarts the channel
            assert "tg" not in runtime.channels and held.retired and held.state is ChannelState.STOPPED
            await held.adapter.send(Outbound(chat="7", text="still open"))  # the stream can still end
            assert [p["text"] for p in tg.sent] == ["still open"]
            await runtime.channels.release(held)  # the last release closes it
            with pytest.raises(ChannelError):
                await held.adapter.send(Outbound(chat="7", text="closed now"))
            assert [p["text"] for p in tg.sent] == ["still open"]


async def test_an_adapter_still_leased_when_the_runtime_closes_is_closed_with_it(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_TEST_TG_LEASE", LEASE_TOKEN)
    async with FakeTelegram(token=LEASE_TOKEN) as tg:
        path = _telegram_config(write_config, tg)
        async with Runtime.open(load_config(path), config_path=path) as runtime:
            held = await _started_tg(runtime)
            runtime.channels.lease(held)
            await stop_channel(runtime, "tg")
        # the turn holding it was cut off by the stop: the runtime's close still closed the adapter
        with pytest.raises(ChannelError):
            await held.adapter.send(Outbound(chat="7", text="after the close"))
        await runtime.channels.release(held)  # a late release closes nothing twice
        assert tg.sent == []
