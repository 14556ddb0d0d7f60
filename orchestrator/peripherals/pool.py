"""PeripheralPool: the daemon's serial ports, one per configured peripheral, opened on first call."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from orchestrator.peripherals.port import PeripheralFault, SerialPort

if TYPE_CHECKING:
    from orchestrator.config import PeripheralConfig

__all__ = ["PeripheralPool"]


class PeripheralPool:
    """Serial ports shared by every turn of one process; an async context manager.

    Entering opens nothing: a port opens when a peripheral tool is first called, so
    assembling (or listing) an agent's tools never touches hardware. Outside its
    `async with` the pool refuses every call, so a pool handed to a listing cannot open
    a port even by mistake. Exiting closes every open port.
    """

    def __init__(self) -> None:
        self._ports: dict[str, SerialPort] = {}
        self._entered = False

    async def __aenter__(self) -> PeripheralPool:
        self._entered = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._entered = False
        ports, self._ports = self._ports, {}
        for port in ports.values():
            port.close("the daemon is shutting down")

    def port(self, name: str) -> SerialPort | None:
        """Return the port of peripheral `name` if it was ever used, else None."""
        return self._ports.get(name)

    async def call(self, name: str, settings: PeripheralConfig, command: str, args: Mapping[str, Any]) -> Any:
        """Run `command` on peripheral `name` and return the device's `result`.

        Raises `PeripheralFault` for every failure, including an `ok: false` reply.
        """
        if not self._entered:
            raise PeripheralFault(name, "serial peripherals are not connected on this path")
        port = self._ports.get(name)
        if port is None or port.settings != settings:
            if port is not None:  # reloaded config changed the port or its settings
                port.close("the peripheral was reconfigured")
            port = self._ports[name] = SerialPort(name=name, settings=settings)
        reply = await port.request(command, args)
        if not reply.ok:
            raise PeripheralFault(name, f"the device refused {command!r}: {reply.error}")
        return reply.result
