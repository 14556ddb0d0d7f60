"""Logging: loguru for our code, the SDKs' stdlib logging routed into it."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from loguru import logger

__all__ = ["configure_logging"]


class _Intercept(logging.Handler):
    """Forward stdlib log records (discord, telegram, slack, httpx, mcp) to loguru."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=6, exception=record.exc_info).log(level, record.getMessage())


def configure_logging(*, level: str, fmt: str, sink: TextIO | None = None) -> None:
    """Send logs to stderr (or `sink`) as text (journald adds timestamps) or one JSON object per line."""
    logger.remove()
    out = sink if sink is not None else sys.stderr
    if fmt == "json":
        logger.add(out, level=level, serialize=True)
    else:
        logger.add(out, level=level, format="{level: <7} {name}: {message}", colorize=False)
    # third-party INFO chatter (one line per HTTP request) only when debugging
    sdk_level = logging.DEBUG if level in ("TRACE", "DEBUG") else logging.WARNING
    logging.basicConfig(handlers=[_Intercept()], level=sdk_level, force=True)
    # HTTP client request lines carry URLs, and Telegram puts the bot token in the URL
    for name in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
