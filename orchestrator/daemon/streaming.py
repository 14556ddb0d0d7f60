"""A streamed reply: the engine's text deltas and tool progress, handed to a channel's `ReplyStream`.

Only a streamed turn makes a `StreamFeed`; a turn of a channel with `stream = false` (or an
adapter that cannot stream) costs nothing of this. The feed is the turn's `TurnEvents`
observer, which only appends (the engine never waits for the platform), and a pump task
that hands the stream the whole visible text whenever it changed. The stream decides when
the platform sees it; while it waits (an edit interval, a rate limit) the text grows, so a
slow platform gets fewer, longer updates, never a queue of stale ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Final

from loguru import logger

from channels import ReplyStream, StreamStatus
from orchestrator.engine import TextDelta, ToolCallApproval, ToolCallStarted, TurnEvent
from orchestrator.redaction import redact

__all__ = ["THINKING", "StreamFeed", "tool_line"]

# The least time between two updates the feed hands the stream: the text is joined once per
# update, so a fast model's thousands of deltas cost a bounded number of joins.
_MIN_GAP_S: Final = 0.02
# The status a stream that shows one (`StreamStatus`) gets back when a tool is done.
THINKING: Final = "is thinking..."


def tool_line(tool: str, *, waiting: bool = False) -> str:
    """Return the one short line shown while `tool` runs, or while its call waits for approval."""
    return f"waiting for approval of {tool}..." if waiting else f"running {tool}..."


class StreamFeed:
    """One streamed turn's visible text, fed by its engine events and pumped into `stream`.

    The visible text is the current model answer: the text a model wrote before calling
    tools stays shown (with the tool line under it) until the next answer starts, which
    replaces it, so what the stream shows last is what the final text says.

    While a person is asked to approve the call, the line says "waiting for approval of X...";
    "running X..." only once it may run.

    A stream that shows a status (`StreamStatus`, Slack in a thread) gets the tool line there
    instead, and "is thinking..." when the tool is done; its text never carries the line.

    `cap` bounds the text kept (the reply is cut to `max_reply_chars` at the end anyway);
    `on_messages` is called with the stream's `message_ids` whenever it posted another
    message, so the inbox row knows what a restart must close. Lifecycle: the caller runs
    `pump()` in its task group and hands the task to `started`, then calls `close()` after the engine stopped: it lets an update in flight complete
    (a message the platform is posting must not be cut off unrecorded) and ends the pump.
    """

    __slots__ = (
        "stream", "_cap", "_on_messages", "_text", "_pending", "_size", "_tool", "_waiting", "_after_tool",
        "_changed", "_shown", "_recorded", "_closing", "_task", "_updating", "_status", "_status_shown",
    )

    def __init__(self, *, stream: ReplyStream, cap: int, on_messages: Callable[[Sequence[str]], None]) -> None:
        self.stream = stream
        self._cap = cap
        self._on_messages = on_messages
        self._text = ""
        self._pending: list[str] = []
        self._size = 0
        self._tool: str | None = None
        self._waiting = False  # the call of `_tool` waits for a person's approval
        self._after_tool = False
        self._changed = asyncio.Event()
        self._shown = ""
        self._recorded = 0
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._updating = False
        self._status = stream if isinstance(stream, StreamStatus) else None
        self._status_shown: str | None = None  # None: never set (the typing hook said "is thinking...")

    async def __call__(self, event: TurnEvent) -> None:
        """Take one engine event (the turn's `events` observer); never waits for the platform."""
        if isinstance(event, TextDelta):
            if self._size >= self._cap or not event.text:
                return
            if self._after_tool:  # the next answer of the turn: it replaces the one before its tools
                self._text, self._size = "", 0
                self._pending.clear()
                self._after_tool = False
            self._pending.append(event.text)
            self._size += len(event.text)
        elif isinstance(event, ToolCallStarted):
            self._tool, self._waiting = event.tool, False
        elif isinstance(event, ToolCallApproval):
            self._waiting = event.waiting
        else:  # ToolCallFinished
            self._tool, self._waiting = None, False
            self._after_tool = True
        self._changed.set()

    @property
    def shown(self) -> str:
        """Return the model text the stream was last handed (without the tool line)."""
        text = self._shown
        if self._tool is not None:
            for line in (tool_line(self._tool), tool_line(self._tool, waiting=True)):
                if text.endswith(line):
                    text = text[: -len(line)]
                    break
        return text.rstrip()

    def visible(self) -> str:
        """Return the text to show now: the model's text so far, and the tool line while one runs."""
        if self._pending:
            self._text += "".join(self._pending)
            self._pending.clear()
            if len(self._text) > self._cap:
                self._text = self._text[: self._cap]
        if self._tool is None or (self._status is not None and self._status.shows_status):
            return self._text
        line = tool_line(self._tool, waiting=self._waiting)
        return f"{self._text.rstrip()}\n\n{line}" if self._text.strip() else line

    def started(self, task: asyncio.Task[None]) -> None:
        """Record the pump's task (the caller runs `pump()` in its task group)."""
        self._task = task

    async def pump(self) -> None:
        """Hand the stream the visible text each time it changed, until `close`."""
        while not self._closing:
            await self._changed.wait()
            self._changed.clear()
            if self._closing:
                break
            await self._show_status()
            text = self.visible()
            if text.strip() and text != self._shown:
                self._shown = text
                self._updating = True
                try:
                    await self.stream.update(redact(text))  # the whole text so far: a secret split across deltas too
                except Exception as exc:  # the stream must not raise here; a bug in one costs the preview only
                    logger.opt(exception=exc).warning("a streamed reply update failed")
                finally:
                    self._updating = False
                self._record()
            await asyncio.sleep(_MIN_GAP_S)

    async def _show_status(self) -> None:
        """Hand a stream that shows a status the running tool (or "is thinking..." after one)."""
        status = self._status
        if status is None or not status.shows_status:
            return
        if self._tool is not None:
            wanted: str | None = tool_line(self._tool, waiting=self._waiting)
        else:
            wanted = THINKING if self._status_shown else None
        if wanted is None or wanted == self._status_shown:
            return
        self._status_shown = wanted
        self._updating = True
        try:
            await status.status(wanted)
        except Exception as exc:  # `status` must not raise; a bug in one costs the status only
            logger.opt(exception=exc).warning("a streamed reply status failed")
        finally:
            self._updating = False

    async def close(self) -> None:
        """End the pump once an update in flight completed; record the messages it posted."""
        self._closing = True
        self._changed.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            if not self._updating:
                task.cancel()  # waiting for text or pausing: nothing to lose
            await asyncio.wait([task])
        self._record()

    def _record(self) -> None:
        ids = self.stream.message_ids
        if len(ids) != self._recorded:
            self._recorded = len(ids)
            self._on_messages(tuple(ids))
