"""Serial peripherals: devices speaking one JSON line per request, pooled per daemon, opened on first call.

Importing this package is cheap: pyserial is imported only when a port opens.
"""

from orchestrator.peripherals.pool import PeripheralPool
from orchestrator.peripherals.port import PeripheralFault, SerialPort
from orchestrator.peripherals.protocol import GarbageLine, Reply, encode_request, parse_reply
from orchestrator.peripherals.tools import PeripheralTool, peripheral_tools

__all__ = [
    "GarbageLine",
    "PeripheralFault",
    "PeripheralPool",
    "PeripheralTool",
    "Reply",
    "SerialPort",
    "encode_request",
    "parse_reply",
    "peripheral_tools",
]
