"""Logging: loguru for our code, the SDKs' stdlib logging routed into it, one redacting sink."""

from __future__ import annotations

import logging
import sys
from typing import Final, TextIO

from loguru import logger

from orchestrator.redaction import redact

__all__ = ["RedactingStream", "configure_logging"]

_TEXT_FORMATS: Final = {"text": "{level: <7} {name}: {message}", "cli": "{level}: {message}"}


class _Intercept(logging.Handler):
    """Forward stdlib log records (discord, telegram, slack, httpx, mcp) to loguru."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=6, exception=record.exc_info).log(level, record.getMessage())


class RedactingStream:
    """A loguru sink writing each finished line to `out` with every secret redacted.

    It sees the line as loguru formatted it, exception text and traceback included, so
    what any library logged, at any level, passes through the one `redact`.
    """

    __slots__ = ("_out",)

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, message: str) -> None:
        self._out.write(redact(message))

    def flush(self) -> None:
        self._out.flush()


def configure_logging(*, level: str, fmt: str, sink: TextIO | None = None) -> None:
    """Send logs to stderr (or `sink`), redacted, as text (journald adds timestamps) or JSON lines.

    `fmt` is "text", "json" (one object per line) or "cli" (`LEVEL: message`, for commands).
    """
    logger.remove()
    out = RedactingStream(sink if sink is not None else sys.stderr)
    # diagnose=False: loguru would otherwise print local variables' values in tracebacks.
    if fmt == "json":
        logger.add(out, level=level, serialize=True, diagnose=False)
    else:
        logger.add(out, level=level, format=_TEXT_FORMATS[fmt], colorize=False, diagnose=False)
    # third-party INFO chatter (one line per HTTP request) only when debugging
    sdk_level = logging.DEBUG if level in ("TRACE", "DEBUG") else logging.WARNING
    logging.basicConfig(handlers=[_Intercept()], level=sdk_level, force=True)
    # HTTP client request lines are noise at DEBUG too (the sink would redact their tokens)
    for name in ("httpx", "httpx2", "httpcore", "httpcore2"):
        logging.getLogger(name).setLevel(logging.WARNING)
