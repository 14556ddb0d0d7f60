"""Peripheral tools at the seam: granted by `peripherals`, narrowed like every tool; config errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.errors import ConfigError
from orchestrator.peripherals import PeripheralPool
from orchestrator.seam import ConstructionPath, ScopedAssembly, Services, resolve
from tests.conftest import WriteConfig

BASE = """
[providers.local]
base_url = "http://127.0.0.1:9/v1"

[peripherals.arm]
port = "/dev/orchestrator-test-arm"
commands = ["status", "move", "home"]
read_only_commands = ["status"]

[peripherals.lamp]
port = "/dev/orchestrator-test-lamp"
commands = ["on", "off"]
"""


def agent(name: str, body: str) -> str:
    return f'\n[agents.{name}]\nprovider = "local"\nmodel = "m"\n{body}\n'


def names(config_path: Path, agent_name: str, *, path: ConstructionPath = ConstructionPath.CLI_RUN,
          assembly: ScopedAssembly | None = None, pool: PeripheralPool | None = None) -> list[str]:
    services = Services(peripherals=pool if pool is not None else PeripheralPool())
    execution = resolve(load_config(config_path), agent_name, path=path, services=services, assembly=assembly)
    return list(execution.tools.names)


def test_an_agent_gets_only_the_peripherals_it_lists(write_config: WriteConfig) -> None:
    path = write_config(
        BASE
        + agent("ops", 'peripherals = ["arm"]\nexcluded_tools = ["arm__home"]')
        + agent("lights", 'peripherals = ["lamp"]')
        + agent("plain", 'tools = ["*"]\nexcluded_tools = ["shell", "file_write", "http_fetch"]')
    )
    assert names(path, "ops") == ["arm__move", "arm__status"]
    assert names(path, "lights") == ["lamp__off", "lamp__on"]
    assert names(path, "plain") == ["file_read", "list_dir"]  # tools = ["*"] grants no peripheral


def test_read_only_autonomy_keeps_only_read_only_commands(write_config: WriteConfig) -> None:
    path = write_config(BASE + agent("ro", 'autonomy = "read_only"\nperipherals = ["arm", "lamp"]'))
    assert names(path, "ro") == ["arm__status"]


def test_knobs_only_narrow_peripheral_tools(write_config: WriteConfig) -> None:
    path = write_config(BASE + agent("ops", 'peripherals = ["arm", "lamp"]'))
    assert names(path, "ops", assembly=ScopedAssembly(caller_allowed=frozenset({"arm__*", "shell"}))) == [
        "arm__home", "arm__move", "arm__status",
    ]
    assert names(path, "ops", assembly=ScopedAssembly(connect_peripherals=False)) == []
    assert names(path, "ops", path=ConstructionPath.LISTING) == []
    # no pool (nothing to call through) grants nothing
    execution = resolve(load_config(path), "ops", path=ConstructionPath.CLI_RUN, services=Services())
    assert execution.tools.names == ()


def test_supervised_peripheral_calls_need_approval_unless_auto_approved(write_config: WriteConfig) -> None:
    path = write_config(
        BASE + agent("ops", 'peripherals = ["arm"]\n[agents.ops.approval]\nauto_approve = ["arm__status"]')
    )
    execution = resolve(
        load_config(path), "ops", path=ConstructionPath.CLI_RUN, services=Services(peripherals=PeripheralPool())
    )
    rules = {}
    for name in execution.tools.names:
        tool = execution.tools.get(name)
        assert tool is not None
        rules[name] = execution.approvals.rule_for(tool.spec).value
    assert rules == {"arm__home": "ask", "arm__move": "ask", "arm__status": "allow"}


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value).splitlines()


def test_peripheral_config_errors_name_the_key(write_config: WriteConfig) -> None:
    path = write_config(
        """
        [providers.local]
        base_url = "http://127.0.0.1:9/v1"

        [peripherals.arm]
        port = "/dev/ttyUSB0"
        commands = ["status", "go home"]
        read_only_commands = ["stats"]

        [peripherals.my__arm]
        port = "/dev/ttyUSB0"
        commands = ["x"]
        """
    )
    assert problems(path) == [
        f"{path}: peripherals.arm.commands[1]: tool name 'arm__go home' is not a valid function name "
        "(letters, digits, '_' and '-', at most 64 characters)",
        f"{path}: peripherals.arm.read_only_commands[0]: 'stats' is not one of this peripheral's commands "
        "(did you mean 'status'?)",
        f"{path}: peripherals.my__arm: peripheral names may not contain '__'",
        f"{path}: peripherals.my__arm.port: '/dev/ttyUSB0' is already peripherals.arm's port",
    ]


def test_unknown_peripheral_keys_and_bad_values_are_rejected(write_config: WriteConfig) -> None:
    path = write_config(
        """
        [providers.local]
        base_url = "http://127.0.0.1:9/v1"

        [peripherals.arm]
        port = "/dev/ttyUSB0"
        protocol = "modbus"
        timeout_s = 0
        """
    )
    found = problems(path)
    assert [line.split(":")[1].strip() for line in found] == [
        "peripherals.arm.protocol", "peripherals.arm.timeout_s",
    ]
