"""SerialPort: one peripheral's serial line, opened on first use and reopened after an unplug.

I/O design: pyserial opens and configures the port (baud, 8N1, raw termios) and takes the
exclusive `flock` before touching any setting (`exclusive=True`), so a second daemon gets a
clear error instead of sharing the line. The bytes themselves move through the event loop:
the file descriptor is non-blocking, `loop.add_reader` delivers reply lines as they arrive
and `loop.add_writer` waits out a full output buffer. That costs no thread per port, makes
timeouts and cancellation plain asyncio, and notices an unplugged device at once (its fd
becomes readable and reads fail with EIO or end of file), even between calls. POSIX only,
as is the daemon.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loguru import logger

from orchestrator.errors import OrchestratorError
from orchestrator.peripherals.protocol import MAX_LINE_BYTES, GarbageLine, Reply, encode_request, parse_reply

if TYPE_CHECKING:
    import serial

    from orchestrator.config import PeripheralConfig

__all__ = ["PeripheralFault", "SerialPort"]

_READ_CHUNK = 4096


class PeripheralFault(OrchestratorError):
    """A peripheral could not complete a request; the reason is meant for the model."""

    def __init__(self, peripheral: str, reason: str) -> None:
        self.peripheral, self.reason = peripheral, reason
        super().__init__(f"peripheral {peripheral!r}: {reason}")


class SerialPort:
    """One peripheral's line: one request in flight at a time, replies matched by id.

    Nothing is opened at construction; `request` opens the port when it is closed (first
    use, or after the device went away), so a registry holding this port's tools never
    touches hardware until a tool is called.
    """

    def __init__(self, *, name: str, settings: PeripheralConfig) -> None:
        self.name = name
        self.settings = settings
        self.opens = 0
        self._serial: serial.Serial | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buffer = bytearray()
        self._discarding = False
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._ids = itertools.count(1)
        # Serial devices answer one request at a time; with one in flight, a garbage line
        # can be charged to the request that provoked it.
        self._lock = asyncio.Lock()

    @property
    def is_open(self) -> bool:
        """Return whether the port is open now."""
        return self._serial is not None

    async def request(self, command: str, args: Mapping[str, Any]) -> Reply:
        """Send one request and return its reply; raises `PeripheralFault` on any fault.

        Faults: the port cannot be opened (absent, held by another process), the device
        disappears, answers garbage, or does not answer within `timeout_s`.
        """
        async with self._lock:
            fd = self._ensure_open()
            request_id = next(self._ids)
            waiter: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
            self._pending[request_id] = waiter
            try:
                async with asyncio.timeout(self.settings.timeout_s):
                    await self._write(fd, encode_request(request_id, command, args))
                    return await waiter
            except TimeoutError:
                raise PeripheralFault(
                    self.name, f"no reply from the device within {self.settings.timeout_s:g}s"
                ) from None
            finally:
                self._pending.pop(request_id, None)

    def close(self, reason: str = "the port was closed") -> None:
        """Close the port (if open) and fail any request waiting on it."""
        port, self._serial = self._serial, None
        if port is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(port.fileno())
            try:
                port.close()
            except Exception as exc:  # an unplugged device can fail its close; it is gone anyway
                logger.debug("peripheral {}: close failed: {}", self.name, exc)
        self._buffer.clear()
        self._discarding = False
        self._fail_pending(reason)

    def _ensure_open(self) -> int:
        if self._serial is not None:
            return int(self._serial.fileno())
        import serial

        settings = self.settings
        try:
            # A tty opens non-blocking at once, so this does not stall the loop.
            port = serial.Serial(
                port=settings.port, baudrate=settings.baud, timeout=0, write_timeout=0, exclusive=True
            )
        except serial.SerialException as exc:
            raise PeripheralFault(self.name, _open_failure(settings.port, exc)) from exc
        except (OSError, ValueError) as exc:
            raise PeripheralFault(self.name, f"cannot open {settings.port}: {exc}") from exc
        try:
            port.reset_input_buffer()  # bytes from before this open answer nothing of ours
        except (serial.SerialException, OSError) as exc:
            port.close()
            raise PeripheralFault(self.name, f"cannot open {settings.port}: {exc}") from exc
        self._serial = port
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(port.fileno(), self._on_readable)
        self.opens += 1
        logger.info("peripheral {}: opened {} at {} baud", self.name, settings.port, settings.baud)
        return int(port.fileno())

    async def _write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        loop = asyncio.get_running_loop()
        while view:
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                ready: asyncio.Future[None] = loop.create_future()
                loop.add_writer(fd, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(fd)
                continue
            except OSError as exc:
                self._lost(f"write failed: {exc.strerror or exc}")
                raise PeripheralFault(self.name, f"the device went away ({exc.strerror or exc})") from exc
            view = view[written:]

    def _on_readable(self) -> None:
        port = self._serial
        if port is None:
            return
        try:
            chunk = os.read(port.fileno(), _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:
            self._lost(f"read failed: {exc.strerror or exc}")
            return
        if not chunk:
            self._lost("end of file")
            return
        self._buffer += chunk
        while (end := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:end]).strip()
            del self._buffer[: end + 1]
            if self._discarding:
                self._discarding = False
                continue
            if line:
                self._on_line(line)
        if len(self._buffer) > MAX_LINE_BYTES:
            self._buffer.clear()
            self._discarding = True  # the rest of this line, up to its newline
            self._garbage(GarbageLine(b"", f"a reply longer than {MAX_LINE_BYTES} bytes"))

    def _on_line(self, line: bytes) -> None:
        try:
            reply = parse_reply(line)
        except GarbageLine as exc:
            self._garbage(exc)
            return
        waiter = self._pending.get(reply.id)
        if waiter is None or waiter.done():
            # Typically the late answer to a request that already timed out.
            logger.warning("peripheral {}: dropped a reply to no waiting request (id {})", self.name, reply.id)
            return
        waiter.set_result(reply)

    def _garbage(self, exc: GarbageLine) -> None:
        logger.warning("peripheral {}: garbage from the device: {}", self.name, exc)
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(PeripheralFault(self.name, f"the device answered garbage ({exc})"))

    def _lost(self, why: str) -> None:
        logger.warning("peripheral {}: device disconnected ({}); reopening on the next call", self.name, why)
        self.close(f"the device disconnected ({why})")

    def _fail_pending(self, reason: str) -> None:
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(PeripheralFault(self.name, reason))


def _open_failure(port: str, exc: Exception) -> str:
    code = getattr(exc, "errno", None)
    if code in (errno.EAGAIN, errno.EWOULDBLOCK) or "exclusively lock" in str(exc):
        return (
            f"{port} is held by another process (exclusive lock); "
            "only one daemon may use a serial peripheral at a time"
        )
    if code == errno.ENOENT:
        return f"{port} is not present (device unplugged or wrong port)"
    if code in (errno.EACCES, errno.EPERM):
        return f"no permission to open {port} (add the daemon's user to the device's group, e.g. dialout)"
    return f"cannot open {port}: {exc}"
