"""PeripheralPool against a fake device on a pty: lazy open, faults, unplug/replug, exclusivity."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from orchestrator.config.models import PeripheralConfig
from orchestrator.errors import ToolFailure
from orchestrator.peripherals import PeripheralFault, PeripheralPool, peripheral_tools
from tests.fakes.serial_device import FakeDevice

COMMANDS = ("status", "move", "fail", "inject", "nope")


def settings(device: FakeDevice, *, timeout_s: float = 3.0) -> PeripheralConfig:
    return PeripheralConfig(
        port=str(device.link), baud=9600, commands=COMMANDS, read_only_commands=("status",), timeout_s=timeout_s
    )


async def test_port_opens_on_first_call_and_stays_open(device: FakeDevice) -> None:
    await device.plug(label="first")
    conf = settings(device)
    async with PeripheralPool() as pool:
        tools = peripheral_tools("arm", conf, pool=pool)
        assert sorted(tools) == [f"arm__{c}" for c in sorted(COMMANDS)]
        await asyncio.sleep(0.05)
        assert (device.opens, pool.port("arm")) == (0, None)  # registering opened nothing
        assert json.loads(await tools["arm__status"].invoke({})) == {"label": "first", "position": 0}
        assert json.loads(await tools["arm__move"].invoke({"args": {"to": 7}})) == {"label": "first", "position": 7}
        assert json.loads(await tools["arm__status"].invoke({"args": {}})) == {"label": "first", "position": 7}
        port = pool.port("arm")
        assert port is not None and port.is_open and port.opens == 1
        assert await device.wait_opens(1) == 1
    assert not port.is_open  # the pool closed it on exit


async def test_tool_specs_declare_read_only_and_untrusted_output(device: FakeDevice) -> None:
    tools = peripheral_tools("arm", settings(device), pool=PeripheralPool())
    status, move = tools["arm__status"].spec, tools["arm__move"].spec
    assert (status.read_only, move.read_only) == (True, False)
    assert status.untrusted_output and move.untrusted_output
    assert status.source.value == "peripheral"
    assert status.openai_spec()["function"]["parameters"]["properties"]["args"]["type"] == "object"


async def test_device_errors_and_bad_arguments_are_tool_failures(device: FakeDevice) -> None:
    await device.plug()
    async with PeripheralPool() as pool:
        tools = peripheral_tools("arm", settings(device), pool=pool)
        with pytest.raises(ToolFailure, match="refused 'fail': motor stalled"):
            await tools["arm__fail"].invoke({})
        with pytest.raises(ToolFailure, match="unknown command 'nope'"):
            await tools["arm__nope"].invoke({})
        with pytest.raises(ToolFailure, match="'args' must be a JSON object"):
            await tools["arm__move"].invoke({"args": [1, 2]})
        with pytest.raises(ToolFailure, match="unknown parameter"):
            await tools["arm__move"].invoke({"to": 3})
        # the line is still good after every refusal
        assert json.loads(await tools["arm__status"].invoke({}))["label"] == "first"


async def test_garbage_reply_is_a_tool_failure(device: FakeDevice) -> None:
    await device.plug(mode="garbage")
    async with PeripheralPool() as pool:
        tools = peripheral_tools("arm", settings(device), pool=pool)
        for _ in range(2):  # and the port keeps working (no crash, no stuck lock)
            with pytest.raises(ToolFailure, match="answered garbage .*not a JSON line"):
                await tools["arm__status"].invoke({})


async def test_silent_device_times_out(device: FakeDevice) -> None:
    await device.plug(mode="silent")
    async with PeripheralPool() as pool:
        tools = peripheral_tools("arm", settings(device, timeout_s=0.3), pool=pool)
        started = time.monotonic()
        with pytest.raises(ToolFailure, match=r"no reply from the device within 0.3s"):
            await tools["arm__status"].invoke({})
        assert time.monotonic() - started < 2


async def test_replies_are_matched_by_id(device: FakeDevice) -> None:
    await device.plug(mode="stale")  # a reply to a wrong id precedes every real one
    async with PeripheralPool() as pool:
        tools = peripheral_tools("arm", settings(device), pool=pool)
        assert json.loads(await tools["arm__move"].invoke({"args": {"to": 3}}))["position"] == 3
        assert json.loads(await tools["arm__status"].invoke({}))["position"] == 3


async def test_unplug_then_replug_reopens_the_port(device: FakeDevice) -> None:
    await device.plug(label="first")
    async with PeripheralPool() as pool:
        status = peripheral_tools("arm", settings(device), pool=pool)["arm__status"]
        assert json.loads(await status.invoke({}))["label"] == "first"
        await device.unplug()
        for _ in range(2):  # calls while unplugged fail cleanly, never crash
            with pytest.raises(ToolFailure, match="arm"):
                await status.invoke({})
        port = pool.port("arm")
        assert port is not None and not port.is_open
        with pytest.raises(ToolFailure, match="is not present"):
            await status.invoke({})
        await device.plug(label="second")  # a new pty behind the same path
        assert json.loads(await status.invoke({}))["label"] == "second"
        assert port.opens == 2


async def test_unplug_is_noticed_between_calls(device: FakeDevice) -> None:
    await device.plug()
    async with PeripheralPool() as pool:
        status = peripheral_tools("arm", settings(device), pool=pool)["arm__status"]
        await status.invoke({})
        port = pool.port("arm")
        assert port is not None and port.is_open
        await device.unplug()
        async with asyncio.timeout(5):
            while port.is_open:  # the reader sees end-of-file without any call running
                await asyncio.sleep(0.01)


async def test_a_second_daemon_cannot_take_a_held_port(device: FakeDevice) -> None:
    await device.plug()
    conf = settings(device)
    async with PeripheralPool() as first:
        async with PeripheralPool() as second:
            await first.call("arm", conf, "status", {})
            with pytest.raises(PeripheralFault, match="held by another process"):
                await second.call("arm", conf, "status", {})
            assert await first.call("arm", conf, "status", {}) == {"label": "first", "position": 0}
    async with PeripheralPool() as third:  # released on close
        assert (await third.call("arm", conf, "status", {}))["label"] == "first"


async def test_a_pool_outside_its_context_never_opens_a_port(device: FakeDevice) -> None:
    await device.plug()
    pool = PeripheralPool()
    status = peripheral_tools("arm", settings(device), pool=pool)["arm__status"]
    with pytest.raises(ToolFailure, match="not connected on this path"):
        await status.invoke({})
    await asyncio.sleep(0.05)
    assert device.opens == 0 and pool.port("arm") is None


async def test_missing_port_is_a_clear_failure(device: FakeDevice) -> None:
    async with PeripheralPool() as pool:
        with pytest.raises(PeripheralFault, match=r"is not present \(device unplugged or wrong port\)"):
            await pool.call("arm", settings(device), "status", {})


async def test_an_oversized_line_fails_one_call_and_the_line_recovers(device: FakeDevice) -> None:
    await device.plug(mode="huge")
    async with PeripheralPool() as pool:
        status = peripheral_tools("arm", settings(device), pool=pool)["arm__status"]
        with pytest.raises(ToolFailure, match="answered garbage .*longer than"):
            await status.invoke({})
        assert json.loads(await status.invoke({}))["label"] == "first"
