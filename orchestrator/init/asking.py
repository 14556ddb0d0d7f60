"""Questions on a terminal, or their answers taken from flags when `--non-interactive`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TextIO

from orchestrator.errors import OrchestratorError

__all__ = ["Asker", "InitAborted", "written_note"]


class InitAborted(OrchestratorError):
    """The wizard stopped before writing the config; `reason` says why and what to do.

    `kept` names what it had written on the way (the Slack app manifest), which stays.
    """

    def __init__(self, reason: str, *, kept: tuple[str, ...] = ()) -> None:
        super().__init__(f"{reason} ({written_note(kept)})")
        self.reason = reason
        self.kept = kept


def written_note(kept: Sequence[str]) -> str:
    """Say what a stopped wizard wrote: `nothing written`, or the files it keeps."""
    if not kept:
        return "nothing written"
    return f"no config written; kept {', '.join(kept)} for the next try"


class Asker:
    """Ask one question at a time on `out`, reading answers from `stdin`.

    Non-interactive, every question takes its default, and one with no default stops the
    wizard naming the flag that answers it. End of input stops the wizard too.
    """

    def __init__(self, *, interactive: bool, stdin: TextIO, out: TextIO) -> None:
        self.interactive = interactive
        self._in = stdin
        self.out = out

    def say(self, text: str = "") -> None:
        """Print a line for the person running the wizard."""
        print(text, file=self.out, flush=True)

    def ask(
        self, question: str, *, default: str | None = None, flag: str | None = None,
        check: Callable[[str], str | None] | None = None,
    ) -> str:
        """Return the answer, or `default` for an empty one; one `check` says is wrong is asked again."""
        if not self.interactive:
            if default is None:
                raise InitAborted(f"{question}: no answer; pass {flag}" if flag else f"{question}: no answer")
            return default
        shown = f" [{default}]" if default else ""
        while True:
            answer = self._line(f"{question}{shown}: ")
            problem = check(answer) if answer and check is not None else None
            if problem:
                self.say(f"  {problem}")
                continue
            if answer:
                return answer
            if default is not None:
                return default
            self.say("  an answer is needed (Ctrl-C stops; nothing is written until the end)")

    def confirm(self, question: str, *, default: bool) -> bool:
        """Return a yes/no answer; an empty one is `default`."""
        if not self.interactive:
            return default
        while True:
            answer = self._line(f"{question} [{'Y/n' if default else 'y/N'}]: ").lower()
            if not answer:
                return default
            if answer in ("y", "yes", "n", "no"):
                return answer.startswith("y")
            self.say("  answer y or n")

    def choose(self, question: str, options: Sequence[str], *, default: str) -> str:
        """Offer numbered options; return the one picked (by number or name), or any other name typed."""
        if self.interactive:
            for number, option in enumerate(options, 1):
                self.say(f"  {number}) {option}")
        answer = self.ask(question, default=default)
        if answer.isdigit() and 1 <= int(answer) <= len(options):
            return options[int(answer) - 1]
        return answer

    def secret(self, question: str, *, flag: str, required: bool = True) -> str:
        """Read a secret without echoing it on a terminal; non-interactive, its flag must give it."""
        if not self.interactive:
            raise InitAborted(f"{question}: no answer; pass {flag}")
        while True:
            answer = self._line(f"{question}: ", echo=False)
            if answer or not required:
                return answer
            self.say("  an answer is needed (Ctrl-C stops; nothing is written until the end)")

    def _line(self, prompt: str, *, echo: bool = True) -> str:
        # echo goes off before the prompt shows: what is typed (or pasted) the moment the
        # prompt appears must not be echoed
        restore = None if echo else _echo_off(self._in)
        try:
            print(prompt, end="", file=self.out, flush=True)
            line = self._in.readline()
        finally:
            if restore is not None:
                restore()
                print(file=self.out, flush=True)  # the Enter that was not echoed
        if not line:
            raise InitAborted("end of input before the wizard finished")
        return line.strip()


def _echo_off(stream: TextIO) -> Callable[[], None] | None:
    """Turn the terminal's echo off; return a function restoring it (None when not a terminal)."""
    if not stream.isatty():
        return None
    import termios

    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    quiet = termios.tcgetattr(fd)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSADRAIN, quiet)

    def restore() -> None:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    return restore
