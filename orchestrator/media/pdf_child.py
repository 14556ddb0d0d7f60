"""The confined PDF parser's own program: run as `python -I -S -B pdf_child.py ...`, never imported.

It imports the standard library and pypdf only (the daemon's packages are not even
readable in its sandbox). Started ahead of need, it imports pypdf, then waits on its
stdin, a unix socket, for one open PDF descriptor (SCM_RIGHTS); EOF there (the daemon
is gone, or it closes its spare) ends it. It writes the text page by page to stdout and
exits: 0 with the text whole, 3 when pypdf cannot read the file, 4 past its memory limit
(RLIMIT_AS); the CPU limit (RLIMIT_CPU) and the daemon's wall clock kill it by signal.

argv: the directory holding pypdf, the page limit, the character limit, a tag (the
limits it was started with, so an operator can tell the children apart in `ps`).
"""

from __future__ import annotations

import array
import contextlib
import io
import os
import socket
import sys
from collections.abc import Callable
from typing import BinaryIO

UNREADABLE = 3
OUT_OF_MEMORY = 4
_PR_SET_PDEATHSIG = 1


def _receive(control: socket.socket) -> int | None:
    fds = array.array("i")
    data, ancillary, _flags, _address = control.recvmsg(1, socket.CMSG_SPACE(fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if not data or not fds:
        return None
    for extra in fds[1:]:
        os.close(extra)
    return fds[0]


# One page of text: parsed while the spare waits, so pypdf's lazy imports are done before a document arrives.
_WARM_UP = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj 2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj "
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 99 99]/Contents 4 0 R/Resources<</Font<</F1 5 0 R>>>>>>endobj "
    b"4 0 obj<</Length 28>>stream\nBT /F1 9 Tf 9 9 Td (w) Tj ET\nendstream endobj "
    b"5 0 obj<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>endobj trailer<</Root 1 0 R>>\n%%EOF\n"
)


def _extract(source: BinaryIO, max_pages: int, max_chars: int, write: Callable[[bytes], object]) -> None:
    import pypdf

    with source:
        reader = pypdf.PdfReader(source)
        size = 0
        for index, page in enumerate(reader.pages):
            if index >= max_pages or size >= max_chars:
                write(f"\n[extract stopped after page {index}]".encode())
                break
            text = page.extract_text() or ""
            write(f"--- page {index + 1} ---\n{text}\n".encode("utf-8", "replace"))
            size += len(text)


def _die_with_the_daemon() -> None:
    # Killed when the process that started it dies (the daemon; under bwrap, bwrap's init),
    # even mid-parse: a SIGKILLed daemon leaves no parser burning its CPU limit.
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def main() -> int:
    """Import pypdf, wait for one descriptor, write its text; return the exit code."""
    _die_with_the_daemon()
    sys.path.insert(0, sys.argv[1])
    max_pages, max_chars = int(sys.argv[2]), int(sys.argv[3])
    import logging

    logging.disable(logging.CRITICAL)  # pypdf warns about damaged files on stderr: nobody reads it
    with contextlib.suppress(Exception):  # imported and run while the spare waits, not while a document does
        _extract(io.BytesIO(_WARM_UP), 1, 100, lambda _text: None)

    control = socket.socket(fileno=0)
    fd = _receive(control)
    if fd is None:
        return 0
    out = io.BufferedWriter(io.FileIO(1, "wb", closefd=False), buffer_size=1 << 16)
    try:
        _extract(os.fdopen(fd, "rb"), max_pages, max_chars, out.write)
    except MemoryError:
        return OUT_OF_MEMORY
    except Exception:  # pypdf raises many kinds for a damaged file
        out.flush()
        return UNREADABLE
    out.flush()
    return 0


if __name__ == "__main__":
    # No interpreter teardown (tens of milliseconds with pypdf loaded): the exit closes stdout.
    os._exit(main())
