"""Where ACP sessions outlive the process: the daemon's session store, keyed `acp:<agent>:<id>`."""

from __future__ import annotations

import functools
import re
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from loguru import logger

from orchestrator.engine import Transcript

if TYPE_CHECKING:
    from orchestrator.store import SessionStore

__all__ = ["AcpHistory", "StoredTranscript"]

# The ids `session/new` hands out (uuid4 hex); anything else was never stored by us.
_SESSION_ID: Final = re.compile(r"[0-9a-f]{32}")


@dataclass(eq=False, kw_only=True)
class StoredTranscript:
    """A session's transcript, its store row and how much of it is stored."""

    transcript: Transcript
    row: int
    persisted: int = 0


class AcpHistory:
    """The ACP sessions of one agent in `store`."""

    def __init__(self, *, agent: str, store: SessionStore) -> None:
        self._agent = agent
        self._store = store

    def start(self, session_id: str) -> StoredTranscript:
        """Create the stored session for a new id."""
        row = self._store.open_session(self._key(session_id), self._agent)
        backlog = functools.partial(self._store.load_range, row)
        return StoredTranscript(transcript=Transcript(session=f"acp:{session_id}", backlog=backlog), row=row)

    def load(self, session_id: str, *, keep: int) -> tuple[StoredTranscript, list[dict[str, Any]]] | None:
        """Return the stored session (its last `keep` messages in memory) and its whole conversation.

        None when this agent has no stored session with that id (another agent's never matches).
        """
        if not _SESSION_ID.fullmatch(session_id):
            return None
        row = self._store.find_session(self._key(session_id), self._agent)
        if row is None:
            return None
        messages, total = self._store.load_messages(row)
        backlog = functools.partial(self._store.load_range, row)  # what left memory, to fold it
        transcript = Transcript(session=f"acp:{session_id}", messages=messages, backlog=backlog)
        transcript.compact(keep)  # only the history window stays in memory
        return StoredTranscript(transcript=transcript, row=row, persisted=total), messages

    def save(self, stored: StoredTranscript, *, keep: int) -> None:
        """Write the messages not yet stored, then hold only the last `keep` in memory.

        A failed write is logged and leaves everything in memory, so the next turn retries it.
        """
        transcript = stored.transcript
        fresh = transcript.messages[stored.persisted - transcript.dropped :]
        try:
            self._store.append_messages(stored.row, stored.persisted, fresh)
        except sqlite3.Error as exc:  # the session goes on in memory; losing it now helps nobody
            logger.error("acp: could not store session {}: {}", transcript.session, exc)
            return
        stored.persisted = transcript.total
        transcript.compact(keep)

    def _key(self, session_id: str) -> str:
        return f"acp:{self._agent}:{session_id}"
