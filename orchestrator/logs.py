"""Logging: loguru for our code, the SDKs' stdlib logging routed into it, one redacting sink."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable
from typing import Final, TextIO

from loguru import logger

from orchestrator.redaction import redact, touches_secret

__all__ = ["RedactingStream", "ScreenPainter", "configure_logging", "share_screen"]

_TEXT_FORMATS: Final = {"text": "{level: <7} {name}: {message}", "cli": "{level}: {message}"}


class _Intercept(logging.Handler):
    """Forward stdlib log records (discord, telegram, slack, httpx, mcp) to loguru."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=6, exception=record.exc_info).log(level, record.getMessage())


class _DropRepeatedFaults(logging.Filter):
    """Drop SDK records that repeat per bad line; we log those faults once, rate-limited.

    The MCP SDK logs a full traceback for every stdout line of a stdio server that is not
    JSON-RPC (a library's stray print): 7 KB per line, hundreds of MB from one noisy server.
    `McpConnection` reports such output once per connection, with a count.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "mcp.client.stdio" and record.msg == "Failed to parse JSONRPC message from server")


# Writes `text` to `out` around what an interactive screen shows on its current line.
ScreenPainter = Callable[[str, TextIO], None]

_screen_lock = threading.Lock()
_painter: ScreenPainter | None = None


def share_screen(painter: ScreenPainter | None) -> None:
    """Route log lines through `painter` while a chat shares the log's terminal (None: stop).

    The terminal channel sets it while a person types at its prompt on the terminal the
    logs go to: the painter clears the prompt line, writes the log line, and redraws the
    prompt with the typed text, so a log line never lands in the middle of either.
    """
    global _painter
    with _screen_lock:
        _painter = painter


class RedactingStream:
    """A loguru sink writing each finished line to `out` with every secret redacted.

    It sees the line as loguru formatted it, exception text and traceback included, so
    what any library logged, at any level, passes through the one `redact`. A JSON line
    (`serialized`) is redacted as the text it encodes: a secret that a newline split is
    two characters `\\n` apart in the JSON, whole again once decoded. While a chat shares
    the screen (`share_screen`), the line goes through its painter.
    """

    __slots__ = ("_out", "_redact")

    def __init__(self, out: TextIO, *, serialized: bool = False) -> None:
        self._out = out
        self._redact = _redact_json_line if serialized else redact

    def write(self, message: str) -> None:
        text = self._redact(message)
        with _screen_lock:
            painter = _painter
            if painter is not None:
                painter(text, self._out)
                return
        self._out.write(text)

    def flush(self) -> None:
        self._out.flush()


def _redact_json_line(line: str) -> str:
    """Redact one serialized record: decoded, each string redacted, encoded again as loguru does."""
    # Most lines hold no secret: the decode is paid only when the line, with its escaped
    # whitespace taken as whitespace, touches one.
    probe = line.replace("\\n", "\n").replace("\\r", "\n").replace("\\t", "\n")
    if not touches_secret(probe):
        return line
    try:
        record = json.loads(line)
    except ValueError:  # not one of loguru's lines: redact it as text
        return redact(line)
    return json.dumps(_redacted(record), default=str, ensure_ascii=False) + "\n"


def _redacted(value: object) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(key): _redacted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return value


def configure_logging(*, level: str, fmt: str, sink: TextIO | None = None) -> None:
    """Send logs to stderr (or `sink`), redacted, as text (journald adds timestamps) or JSON lines.

    `fmt` is "text", "json" (one object per line) or "cli" (`LEVEL: message`, for commands).
    """
    logger.remove()
    out = RedactingStream(sink if sink is not None else sys.stderr, serialized=fmt == "json")
    # diagnose=False: loguru would otherwise print local variables' values in tracebacks.
    if fmt == "json":
        logger.add(out, level=level, serialize=True, diagnose=False)
    else:
        logger.add(out, level=level, format=_TEXT_FORMATS[fmt], colorize=False, diagnose=False)
    # third-party INFO chatter (one line per HTTP request) only when debugging
    sdk_level = logging.DEBUG if level in ("TRACE", "DEBUG") else logging.WARNING
    intercept = _Intercept()
    intercept.addFilter(_DropRepeatedFaults())
    logging.basicConfig(handlers=[intercept], level=sdk_level, force=True)
    # HTTP client request lines are noise at DEBUG too (the sink would redact their tokens)
    for name in ("httpx", "httpx2", "httpcore", "httpcore2"):
        logging.getLogger(name).setLevel(logging.WARNING)
