"""PeripheralTool: one declared command of one serial peripheral, as a tool `<name>__<command>`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from orchestrator.errors import ToolFailure
from orchestrator.peripherals.port import PeripheralFault
from orchestrator.tools import Tool, ToolSource, ToolSpec

if TYPE_CHECKING:
    from orchestrator.config import PeripheralConfig
    from orchestrator.peripherals.pool import PeripheralPool

__all__ = ["PeripheralTool", "peripheral_tools"]

SEPARATOR: Final = "__"

_PARAMETERS: Final = MappingProxyType(
    {
        "type": "object",
        "properties": MappingProxyType(
            {
                "args": MappingProxyType(
                    {"type": "object", "description": "Arguments for the device command (a JSON object)."}
                )
            }
        ),
        "additionalProperties": False,
    }
)


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
        unknown = sorted(set(arguments) - {"args"})
        if unknown:
            raise ToolFailure(self.spec.name, f"unknown parameter(s) {', '.join(unknown)}; pass {{\"args\": {{...}}}}")
        args = arguments.get("args", {})
        if not isinstance(args, Mapping):
            raise ToolFailure(self.spec.name, "'args' must be a JSON object")
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
            parameters=_PARAMETERS,
            read_only=command in settings.read_only_commands,
            untrusted_output=True,
            source=ToolSource.PERIPHERAL,
        )
        tools[qualified] = PeripheralTool(spec=spec, pool=pool, peripheral=name, settings=settings, command=command)
    return tools
