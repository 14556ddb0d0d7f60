"""PeripheralTool: one declared command of one serial peripheral, as a tool `<name>__<command>`."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final

from pydantic import Field

from orchestrator.errors import ToolFailure
from orchestrator.peripherals.port import PeripheralFault
from orchestrator.tools import Tool, ToolArguments, ToolSource, ToolSpec

if TYPE_CHECKING:
    from orchestrator.config import PeripheralConfig
    from orchestrator.peripherals.pool import PeripheralPool

__all__ = ["PeripheralArguments", "PeripheralTool", "peripheral_tools"]

SEPARATOR: Final = "__"


class PeripheralArguments(ToolArguments):
    """A peripheral command tool's arguments (the same for every command)."""

    args: dict[str, Any] = Field(
        default_factory=dict, description="Arguments for the device command (a JSON object)."
    )

    refusals: ClassVar[Mapping[tuple[str, str], Callable[[Any], str]]] = MappingProxyType({
        ("args", "dict_type"): lambda _: "argument 'args' must be a JSON object",
        ("", "extra_forbidden"): lambda names: f"unknown parameter(s) {names}; pass {{\"args\": {{...}}}}",
    })


@dataclass(frozen=True, slots=True, kw_only=True)
class PeripheralTool:
    """Sends one command to one device through the pool; output is untrusted data."""

    spec: ToolSpec
    pool: PeripheralPool
    peripheral: str
    settings: PeripheralConfig
    command: str

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Send the command; raises `ToolFailure` for bad arguments and every device fault."""
        args = PeripheralArguments.parse(self.spec.name, arguments).args
        try:
            result = await self.pool.call(self.peripheral, self.settings, self.command, args)
        except PeripheralFault as exc:
            raise ToolFailure(self.spec.name, str(exc)) from exc
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)


def peripheral_tools(name: str, settings: PeripheralConfig, *, pool: PeripheralPool) -> dict[str, Tool]:
    """Return one tool per declared command, named `<name>__<command>`; opens nothing."""
    tools: dict[str, Tool] = {}
    for command in settings.commands:
        qualified = f"{name}{SEPARATOR}{command}"
        spec = ToolSpec(
            name=qualified,
            description=f"Send the command {command!r} to the serial device {name!r} and return its reply.",
            contract=PeripheralArguments,
            read_only=command in settings.read_only_commands,
            untrusted_output=True,
            source=ToolSource.PERIPHERAL,
        )
        tools[qualified] = PeripheralTool(spec=spec, pool=pool, peripheral=name, settings=settings, command=command)
    return tools
