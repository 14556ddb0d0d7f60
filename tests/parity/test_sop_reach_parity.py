"""SOP reach on the channel path: `/sop` starts exactly what the admitting route's `sops` lists.

Driven through `process_message` (the channel path, ConstructionPath.CHANNEL) from every
route and sender, and read back from `orchestrator policy matrix` (the `sop_reach` row).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from channels import Inbound
from orchestrator import cli
from orchestrator.daemon import Disposition, process_message
from orchestrator.peripherals import PeripheralPool
from orchestrator.seam import ConstructionPath, Services, build_channel
from orchestrator.seam.matrix import MatrixColumn, parity_matrix
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.harness import running
from tests.fakes.openai_server import FakeOpenAI, Reply, text

SOPS = """
[agents.public]
provider = "fake"
model = "public-model"
autonomy = "read_only"
tools = ["file_read"]

[agents.ops]
provider = "fake"
model = "ops-model"
tools = ["file_write"]

[sops.faq]
agent = "public"
[[sops.faq.steps]]
prompt = "STEP faq"

[sops.maint]
agent = "ops"
[[sops.maint.steps]]
prompt = "STEP maint"

[sops.audit]
agent = "public"
[[sops.audit.steps]]
prompt = "STEP audit"
[[sops.audit.steps]]
prompt = "STEP audit by ops"
agent = "ops"

[channels.term]
kind = "terminal"
user = "42"

[[routes]]
channel = "term"
chat = "ops-room"
agent = "ops"
senders = ["42"]
approvers = ["42"]
sops = ["maint", "audit"]

[[routes]]
channel = "term"
agent = "public"
senders = ["*"]
sops = ["faq"]
"""


def steps(request: dict[str, Any]) -> Reply:
    last = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return text(f"ran {last.splitlines()[0]}")


async def test_sop_reach_on_the_channel_path_is_the_routes_sops(
    write_config: WriteConfig, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(provider_toml(fake_llm.base_url) + SOPS)
    fake_llm.default = steps
    started: dict[tuple[str, str], list[str]] = {}
    async with running(path) as (runtime, _):
        for chat, sender in (("ops-room", "42"), ("ops-room", "99"), ("lobby", "99")):
            for sop in ("faq", "maint", "audit"):
                before = len(fake_llm.requests)
                inbound = Inbound(is_direct=True, channel="term", chat=chat, sender=sender, text=f"/sop {sop}", event_id=f"{chat}-{sender}-{sop}")
                assert await process_message(runtime, inbound) is Disposition.COMMAND
                if len(fake_llm.requests) > before:
                    started.setdefault((chat, sender), []).append(sop)
        channel = build_channel(runtime.config, "public", Services(peripherals=PeripheralPool()))
    assert channel.identity.path is ConstructionPath.CHANNEL
    # 42 in ops-room takes routes[0]; 99 there (not on its senders) and anyone elsewhere take routes[1]
    assert started == {("ops-room", "42"): ["maint", "audit"], ("ops-room", "99"): ["faq"], ("lobby", "99"): ["faq"]}
    assert await asyncio.to_thread(cli.main, ["policy", "matrix", "--json", "--config", str(path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["gaps"] == []
    for agent in ("ops", "public"):
        row = shown["agents"][agent]["sop_reach"]
        assert row.pop("channel") == "enforced"
        assert set(row.values()) == {"narrowed: no_chat_commands"}  # no other path takes chat commands


def test_a_channel_reaching_an_sop_its_route_does_not_list_is_a_gap(write_config: WriteConfig) -> None:
    """A dispatch that let `/sop maint` through an open route shows as a gap (fabricated reach, real execution)."""
    from orchestrator.checks import load_config

    config = load_config(write_config(provider_toml("http://127.0.0.1:9/v1") + SOPS))
    services = Services(peripherals=PeripheralPool())
    execution = build_channel(config, "public", services)
    granted = ("routes[1]:faq",)
    honest = MatrixColumn(label="channel", execution=execution, declared=frozenset(), chat_sops=granted)
    leaky = MatrixColumn(label="channel", execution=execution, declared=frozenset(), chat_sops=(*granted, "routes[1]:maint"))
    none = MatrixColumn(label="channel", execution=execution, declared=frozenset(), chat_sops=())
    verdict = {
        name: parity_matrix(execution, [column], (), granted=granted)["sop_reach"]["channel"]
        for name, column in (("honest", honest), ("leaky", leaky), ("none", none))
    }
    # a narrower reach without the declared knob is a gap too: only the channel path answers `/sop`
    assert verdict == {"honest": "enforced", "leaky": "gap", "none": "gap"}
