"""The terminal channel's line editing: the typed text is ours, so a log line can go above it.

In the terminal's own (canonical) mode the kernel keeps what a person is typing until Enter
and echoes it itself: a log line printed meanwhile lands in the middle of it, and nothing
can redraw it. So while a person chats, the terminal is switched to non-canonical mode
without echo (signals stay on: Ctrl-C is still SIGINT) and `LineEditor` echoes and edits
the line: printable text, Backspace, Ctrl-U (the whole line), Ctrl-W (the last word), Enter,
and Ctrl-D on an empty line (end of input). Escape sequences (arrow keys) are dropped.
`restore` puts the terminal back as it was; it runs when the channel stops and at exit.
"""

from __future__ import annotations

import atexit
import codecs
import os
import termios
from collections.abc import Callable
from typing import Final

__all__ = ["EOF", "LineEditor", "is_same_terminal", "raw_input_mode"]

EOF: Final = object()  # what `next_line` returns for Ctrl-D on an empty line

_ERASE: Final = frozenset({"\x7f", "\x08"})
_KILL_LINE: Final = "\x15"
_KILL_WORD: Final = "\x17"
_END: Final = "\x04"


def raw_input_mode(fd: int) -> Callable[[], None]:
    """Switch terminal `fd` to non-canonical input without echo; return the (idempotent) restore.

    The restore is also registered to run at exit, so a daemon stopped by a signal leaves
    the person's terminal as it found it (only kill -9 cannot: `stty sane` then repairs it).
    """
    saved = termios.tcgetattr(fd)
    mode = termios.tcgetattr(fd)
    mode[3] &= ~(termios.ICANON | termios.ECHO)
    mode[6] = list(mode[6])
    mode[6][termios.VMIN] = 1
    mode[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSADRAIN, mode)
    done = False

    def restore() -> None:
        nonlocal done
        if done:
            return
        done = True
        atexit.unregister(restore)
        try:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        except (termios.error, OSError):  # the terminal went away first (a closed window)
            pass

    atexit.register(restore)
    return restore


class LineEditor:
    """The line being typed, built from the bytes a terminal sends; `echo` draws each change.

    `feed` takes bytes, `next_line` returns each finished line (and `EOF`); `echo(text)` is
    called with what to write to show each edit, only while `shown()` says the prompt and
    line are on the screen.
    """

    __slots__ = ("_decoder", "_echo", "_escape", "_pending", "_shown", "typed")

    def __init__(self, *, echo: Callable[[str], None], shown: Callable[[], bool]) -> None:
        self.typed = ""
        self._echo, self._shown = echo, shown
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._escape = ""  # an escape sequence being skipped
        self._pending = ""  # typed, not yet edited with

    def feed(self, data: bytes) -> None:
        """Take the bytes a terminal sent; `next_line` then edits with them."""
        self._pending += self._decoder.decode(data)

    def next_line(self) -> str | object | None:
        """Edit with the pending input up to the next Enter; return that line, `EOF` (Ctrl-D), or None.

        One line at a time, so what follows a line (a paste of several) is echoed after the
        prompt drawn for it, not after the line just finished.
        """
        while self._pending:
            char, self._pending = self._pending[0], self._pending[1:]
            if self._escape:
                self._escape += char
                # ESC [ ... final byte, or ESC and one character
                if (self._escape[1:2] != "[" and len(self._escape) >= 2) or (
                    len(self._escape) > 2 and "@" <= char <= "~"
                ):
                    self._escape = ""
                continue
            if char == "\x1b":
                self._escape = char
            elif char in ("\n", "\r"):
                line, self.typed = self.typed, ""
                self._draw("\n")
                return line
            elif char in _ERASE:
                if self.typed:
                    self.typed = self.typed[:-1]
                    self._draw("\b \b")
            elif char == _KILL_LINE:
                self._replace("")
            elif char == _KILL_WORD:
                kept = self.typed.rstrip()
                self._replace(kept.rpartition(" ")[0] + " " if " " in kept else "")
            elif char == _END:
                if not self.typed:
                    self._pending = ""
                    return EOF
            elif char >= " ":
                self.typed += char
                self._draw(char)
        return None

    def _replace(self, typed: str) -> None:
        old, self.typed = self.typed, typed
        if old != typed:
            # back over the old text, blank it, back again, then the new text
            self._draw("\b" * len(old) + " " * len(old) + "\b" * len(old) + typed)

    def _draw(self, text: str) -> None:
        if self._shown():
            self._echo(text)


def is_same_terminal(a: int, b: int) -> bool:
    """Return True when descriptors `a` and `b` are the same terminal (logs and chat share a screen)."""
    try:
        return os.isatty(a) and os.isatty(b) and os.fstat(a).st_rdev == os.fstat(b).st_rdev
    except OSError:
        return False
