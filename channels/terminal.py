"""The terminal channel: a local chat on stdin/stdout for trying agents without a platform."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import termios
import time
from collections.abc import Sequence
from typing import IO, Any, Final, TextIO

from channels.approval_codec import approval_command, parse_approval_command, show_command
from channels.base import (
    ApprovalAnswer,
    ApprovalPrompt,
    ChannelEnded,
    ChannelUnusable,
    Deliver,
    Inbound,
    Outbound,
    Ready,
    ReplyProgress,
    is_tool_progress_line,
)
from channels.terminal_line import EOF, LineEditor, is_same_terminal, raw_input_mode
from orchestrator.logs import share_screen

__all__ = ["PROMPT", "REPLY_LABEL", "TerminalAdapter", "create"]

# One line a person reads at a glance, as the CLI's y/N prompt.
_PREVIEW_CHARS: Final = 500
# Shown only when a person types on a terminal; piped input and output stay plain lines.
PROMPT: Final = "you> "
REPLY_LABEL: Final = "bot> "
# Back to the line's start and clear it: a reply arriving while the prompt waits replaces it.
_CLEAR_LINE: Final = "\r\x1b[K"


def create(name: str, config: Any, *, secrets: Any) -> TerminalAdapter:
    """Build the terminal adapter from its `[channels.<name>]` table."""
    return TerminalAdapter(name=name, user=config.user, chat=config.chat)


def _no_input(stdin: IO[bytes]) -> str | None:
    """Say why nobody can type into `stdin` (closed, or a device that is not a terminal), else None.

    A terminal, a pipe and a file all carry input (scripts pipe lines in); /dev/null, as
    systemd's `StandardInput=null` gives, or a closed descriptor carries none.
    """
    try:
        mode = os.fstat(stdin.fileno()).st_mode
    except (OSError, ValueError):
        return "stdin is closed"
    if stat.S_ISCHR(mode) and not os.isatty(stdin.fileno()):
        return "stdin is not a terminal (e.g. /dev/null under systemd)"
    return None


def _is_terminal(out: IO[str]) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # a stand-in without one, or a closed stream
        return False


def _fileno(stream: object) -> int | None:
    try:
        return int(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):  # a stand-in without one, or a closed stream
        return None


def _shares_a_terminal(stream: object, fd: int | None) -> bool:
    """Return True when `stream` writes to the terminal `fd` is (a log and the chat on one screen)."""
    own = _fileno(stream)
    return own is not None and fd is not None and is_same_terminal(own, fd)


class TerminalAdapter:
    """Reads one message per line from stdin and prints replies to stdout.

    With no input at all (stdin closed, or /dev/null as under systemd) the channel is
    disabled with one warning line and the daemon serves its other channels; at the end of
    piped input it stays up and quiet. Ctrl-D typed at a terminal ends the chat
    (`ChannelEnded`): the daemon stops when nothing else serves, or says what still does.
    On a terminal it shows `PROMPT` while it waits for a line and labels what it prints with
    `REPLY_LABEL`; a pipe or file gets neither.
    """

    max_message_chars = 1_000_000

    def __init__(
        self, *, name: str, user: str, chat: str, stdin: IO[bytes] | None = None, stdout: IO[str] | None = None
    ) -> None:
        self.name, self.user, self.chat = name, user, chat
        self._stdin = stdin if stdin is not None else sys.stdin.buffer
        self._stdout = stdout if stdout is not None else sys.stdout
        # event ids must not repeat across restarts, or de-duplication would drop new lines
        self._boot = f"{time.time_ns():x}"
        self._count = 0
        self._interactive = False  # stdin is a terminal: prompt and labels
        self._reading = False  # waiting for the next line (not past the end of input)
        self._prompt_shown = False
        self._live: _TerminalStream | None = None  # the reply being printed as it streams
        # the line being typed (on a terminal only: piped input is read by lines)
        self._editor = LineEditor(echo=self._echo, shown=lambda: self._prompt_shown)

    async def run(self, deliver: Deliver, ready: Ready) -> None:
        why = _no_input(self._stdin)
        if why is not None:
            raise ChannelUnusable(self.name, f"{why}; run the daemon in a terminal to chat on it")
        # a person at a terminal: stdin and stdout both one (`run > file` gets plain lines)
        self._interactive = os.isatty(self._stdin.fileno()) and _is_terminal(self._stdout)
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), self._stdin
            )
        except (ValueError, OSError):  # a regular file on stdin: read it whole
            reader.feed_data(self._stdin.read())
            reader.feed_eof()
            transport = None
        restore = None
        if self._interactive:
            try:
                restore = raw_input_mode(self._stdin.fileno())
            except termios.error:  # a terminal that refuses the mode: the kernel edits lines, as before
                restore = None
            if restore is not None and _shares_a_terminal(self._stdout, 2):
                share_screen(self._paint_log)
        ready()
        try:
            self._reading = True
            if restore is not None:
                await self._read_typed(reader, deliver)
            else:
                await self._read_lines(reader, deliver)
            self._reading = False
            if self._interactive:  # Ctrl-D typed by the person: the chat is over
                self._echo("\n")
                self._prompt_shown = False
                raise ChannelEnded(self.name, "the chat was ended (Ctrl-D)")
            await asyncio.Event().wait()  # the end of piped input: stay quiet until cancelled
        finally:
            if restore is not None:
                share_screen(None)
                restore()
            if transport is not None:
                transport.close()

    async def _read_lines(self, reader: asyncio.StreamReader, deliver: Deliver) -> None:
        # piped input, or a terminal in its own line mode (the prompt is shown, the kernel echoes)
        self._show_prompt()
        while line := await reader.readline():
            self._prompt_shown = False  # the typed Enter moved the cursor past it
            text = line.decode("utf-8", errors="replace").strip()
            if text:
                await deliver(self._parse(text))
            self._show_prompt()

    async def _read_typed(self, reader: asyncio.StreamReader, deliver: Deliver) -> None:
        self._show_prompt()
        while data := await reader.read(4096):
            self._editor.feed(data)
            while (line := self._editor.next_line()) is not None:
                if line is EOF:
                    return
                self._prompt_shown = False  # the typed Enter moved the cursor past it
                text = str(line).strip()
                if text:
                    await deliver(self._parse(text))
                self._show_prompt()

    def _echo(self, text: str) -> None:
        self._stdout.write(text)
        self._stdout.flush()

    def _paint_log(self, text: str, out: TextIO) -> None:
        """Write a log line above the prompt and the typed text (or a reply's open line), then redraw them."""
        shared = _shares_a_terminal(out, _fileno(self._stdout))
        live = self._live
        redraw = self._prompt_line() if self._prompt_shown else live.open_line() if live is not None else None
        if not shared or redraw is None:
            out.write(text)
            out.flush()
            return
        self._stdout.write(_CLEAR_LINE)
        self._stdout.flush()
        out.write(text if text.endswith("\n") else text + "\n")
        out.flush()
        self._stdout.write(redraw)
        self._stdout.flush()

    def _prompt_line(self) -> str:
        return PROMPT + self._editor.typed

    def _parse(self, text: str) -> Inbound | ApprovalAnswer:
        answer = parse_approval_command(text)
        if answer is not None:
            request_id, approved = answer
            return ApprovalAnswer(
                channel=self.name, request_id=request_id, sender=self.user, approved=approved, chat=self.chat
            )
        self._count += 1
        return Inbound(
            channel=self.name,
            chat=self.chat,
            sender=self.user,
            text=text,
            event_id=f"{self._boot}-{self._count}",
            is_direct=True,
        )

    def _show_prompt(self) -> None:
        if self._interactive and self._reading and not self._prompt_shown:
            self._stdout.write(self._prompt_line())  # with what was typed while it was away
            self._stdout.flush()
            self._prompt_shown = True

    def _write(self, text: str) -> None:
        if self._live is not None:
            self._live.interrupt()  # its half-printed line ends; it goes on below what we print
        if not self._interactive:
            self._stdout.write(text + "\n")
            self._stdout.flush()
            return
        # continuation lines align under the first, so a reply reads as one block
        labelled = REPLY_LABEL + text.replace("\n", "\n" + " " * len(REPLY_LABEL))
        self._stdout.write((_CLEAR_LINE if self._prompt_shown else "") + labelled + "\n")
        self._prompt_shown = False
        self._stdout.flush()
        self._show_prompt()

    async def send(self, message: Outbound, *, progress: ReplyProgress | None = None) -> None:
        if progress is not None and progress.done:
            return  # the one chunk was written before
        self._write(message.text)
        if progress is not None:
            progress.advance()

    async def prompt_approval(self, prompt: ApprovalPrompt) -> None:
        shown = prompt.arguments.fit(_PREVIEW_CHARS)
        cut = f"; {show_command(prompt.request_id)} prints the whole call" if shown != prompt.arguments.whole else ""
        self._write(
            f"[approval {prompt.request_id}] {prompt.tool} {shown}\n"
            f"  reply {approval_command(prompt.request_id, approved=True)} or "
            f"{approval_command(prompt.request_id, approved=False)} "
            f"(within {prompt.timeout_s:g}s){cut}"
        )

    async def typing(self, chat: str, thread: str | None) -> None:
        """Do nothing: a terminal has no typing indicator."""

    def open_stream(self, message: Outbound) -> _TerminalStream | None:
        """Print the reply as it streams on a terminal; a pipe or file gets the final text once."""
        if not self._interactive:
            return None
        return _TerminalStream(self)

    def reopen_stream(self, message: Outbound, message_ids: Sequence[str]) -> None:
        """Return None: nothing printed before a restart can be taken back."""
        return None

    async def close_abandoned(self, chat: str, thread: str | None, message_ids: Sequence[str], ending: str) -> None:
        """Print `ending` (nothing printed before a restart can be taken back)."""
        self._write(ending)

    async def aclose(self) -> None:
        return None


class _TerminalStream:
    """One reply printed as it streams: full lines once, the last line redrawn in place.

    The last line is the one that may still change (the `running tool...` line, a word
    being written), so it is redrawn with a carriage return and clear-line; the lines above
    it are final on the screen. A terminal cannot take lines back, so when the text starts
    over (the model's next answer after its tools) it continues below, and `finish` prints
    the final text whole only when it does not continue what is on the screen (a reply cut
    to its limit, a failure line).
    """

    __slots__ = ("_adapter", "_lines", "_line", "_open_is_first", "_shown_any")

    message_ids: Sequence[str] = ()

    def __init__(self, adapter: TerminalAdapter) -> None:
        self._adapter = adapter
        self._lines: list[str] = []  # this answer's lines printed in full
        self._line: str | None = None  # its last line as shown, not yet ended (None: none open)
        self._open_is_first = False  # the open line is the reply's first (it carries the label)
        self._shown_any = False

    def _continues(self, lines: list[str]) -> bool:
        """Return True when `lines` only add to what this answer shows (its open line grows)."""
        done = len(self._lines)
        if lines[:done] != self._lines or len(lines) <= done:
            return False
        return self._line is None or lines[done].startswith(self._line) or _is_tool_line(self._line)

    def _shows_all_but_open_line(self, text: str) -> bool:
        """Return True when `text` is what the screen shows above the open line (a tool line went)."""
        return self._line is not None and "\n".join(self._lines).rstrip() == text.rstrip()

    def _draw(self, lines: list[str]) -> None:
        """Show `lines`, the last one left open; the screen already shows `self._lines` of them."""
        out = self._adapter._stdout
        labelled = self._open_is_first if self._line is not None else not self._shown_any
        if self._line is not None:
            out.write(_CLEAR_LINE)  # the open line is redrawn
        new = lines[len(self._lines) :]
        indent = " " * len(REPLY_LABEL)
        for index, line in enumerate(new):
            out.write((REPLY_LABEL if index == 0 and labelled else indent) + line)
            if index < len(new) - 1:
                out.write("\n")
                self._lines.append(line)
        self._open_is_first = labelled and len(new) == 1
        self._line, self._shown_any = new[-1], True

    def _start(self) -> None:
        adapter = self._adapter
        adapter._live = self
        if adapter._prompt_shown:  # the reply replaces the prompt on its line
            adapter._stdout.write(_CLEAR_LINE)
            adapter._prompt_shown = False

    async def update(self, text: str) -> None:
        self._start()
        lines = text.split("\n")
        if self._shows_all_but_open_line(text):
            self._adapter._stdout.write(_CLEAR_LINE)  # the tool line goes; the text above stays
            self._line = None
        else:
            if not self._continues(lines):  # the text started over: the new answer goes below
                self._end_line(keep=not _is_tool_line(self._line))
            self._draw(lines)
        self._adapter._stdout.flush()

    def _end_line(self, *, keep: bool) -> None:
        """Close this answer's open line (kept on screen, or cleared) and start a new answer below."""
        if self._line is not None:
            self._adapter._stdout.write("\n" if keep else "\r\x1b[K")
        self._lines, self._line = [], None

    def open_line(self) -> str | None:
        """Return the open line as drawn (label or indent included), None when no line is open."""
        if self._line is None:
            return None
        return (REPLY_LABEL if self._open_is_first else " " * len(REPLY_LABEL)) + self._line

    def interrupt(self) -> None:
        """End the open line so another message prints below it (the stream draws after it)."""
        if self._line is not None:
            self._adapter._stdout.write("\n")
            self._lines.append(self._line)
            self._line = None

    async def finish(self, text: str, *, progress: ReplyProgress | None = None) -> None:
        adapter = self._adapter
        if progress is not None and progress.done:
            return
        self._start()
        adapter._live = None
        lines = text.split("\n")
        if self._line is not None and lines == [*self._lines, self._line]:
            adapter._stdout.write("\n")  # the screen shows it already
        elif self._shows_all_but_open_line(text) or (self._line is None and self._lines and
                                                     "\n".join(self._lines).rstrip() == text.rstrip()):
            if self._line is not None:
                adapter._stdout.write(_CLEAR_LINE)  # only the tool line was left to go
        else:
            if not (self._shown_any and self._continues(lines)):
                # not a continuation of what is shown: the final text, whole, below it
                self._end_line(keep=not _is_tool_line(self._line))
            self._draw(lines)
            adapter._stdout.write("\n")
        adapter._stdout.flush()
        if progress is not None:
            progress.advance()
        adapter._show_prompt()

    async def abort(self, ending: str) -> None:
        adapter = self._adapter
        self._start()
        adapter._live = None
        self._end_line(keep=not _is_tool_line(self._line))
        self._draw([ending])
        adapter._stdout.write("\n")
        adapter._stdout.flush()
        adapter._show_prompt()


def _is_tool_line(line: str | None) -> bool:
    return is_tool_progress_line(line)
