"""Where a session's transcript lives between turns: the session store, or memory."""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final, Protocol

from orchestrator.engine import Summary, Transcript
from orchestrator.store import SessionStore

__all__ = ["HeldTranscript", "MemoryTranscripts", "StoredTranscripts", "TranscriptSource"]

_CACHE: Final = 2048


class HeldTranscript(Protocol):
    """A transcript a source handed out for one turn; give it back with `save`."""

    @property
    def transcript(self) -> Transcript:
        """Return the in-memory transcript (the history window)."""
        ...


class TranscriptSource(Protocol):
    """Loads a session's transcript before a turn and keeps what the turn added after it."""

    def open(self, key: str, agent: str, *, keep: int) -> HeldTranscript:
        """Return the transcript of session `key` for `agent`, its last `keep` messages in memory."""
        ...

    def save(self, held: HeldTranscript, *, keep: int) -> None:
        """Keep the messages the turn added, then hold only the last `keep` in memory."""
        ...


@dataclass(eq=False)
class StoredSession:
    """The open stored session of a key: its id, transcript, and how much of it is persisted."""

    session_id: int
    transcript: Transcript
    persisted: int
    summary: Summary | None = None  # the summary as stored


class StoredTranscripts:
    """Transcripts in the daemon's `SessionStore`, the most recent ones cached in memory."""

    def __init__(self, store: SessionStore, *, cache: int = _CACHE) -> None:
        self._store = store
        self._cache_size = cache
        self._cached: OrderedDict[str, StoredSession] = OrderedDict()

    def open(self, key: str, agent: str, *, keep: int) -> StoredSession:
        """Return the open session of `key` for `agent`, loading its last `keep` messages once."""
        cached = self._cached.get(key)
        session_id = self._store.open_session(key, agent)
        if cached is not None and cached.session_id == session_id:
            self._cached.move_to_end(key)
            return cached
        stored = self._store.load_summary(session_id)
        summary = Summary(text=stored[0], covers=stored[1]) if stored is not None else None
        messages, total = self._store.load_messages(session_id, last=keep)
        transcript = Transcript(
            session=str(session_id), messages=messages, dropped=total - len(messages), summary=summary,
            backlog=functools.partial(self._store.load_range, session_id),  # what left memory, to fold it
        )
        transcript.compact(keep)  # never start the window on an orphan tool result
        entry = StoredSession(session_id=session_id, transcript=transcript, persisted=total, summary=summary)
        self._cached[key] = entry
        if len(self._cached) > self._cache_size:
            self._cached.popitem(last=False)
        return entry

    def save(self, held: HeldTranscript, *, keep: int) -> None:
        """Write the messages not yet stored, then hold only the last `keep` in memory."""
        if not isinstance(held, StoredSession):
            raise TypeError(f"not a stored session: {held!r}")
        transcript = held.transcript
        fresh = transcript.messages[held.persisted - transcript.dropped :]
        self._store.append_messages(held.session_id, held.persisted, fresh)
        held.persisted = transcript.total
        if transcript.summary is not None and transcript.summary != held.summary:
            self._store.save_summary(held.session_id, transcript.summary.text, transcript.summary.covers)
            held.summary = transcript.summary
        transcript.compact(keep)

    def forget(self, key: str) -> None:
        """Close the open session of `key`; the next message starts afresh."""
        self._store.close_session(key)
        self._cached.pop(key, None)

    def cached(self) -> tuple[StoredSession, ...]:
        """Return the sessions held in memory, least recently used first."""
        return tuple(self._cached.values())


@dataclass(eq=False)
class _MemorySession:
    transcript: Transcript


class MemoryTranscripts:
    """Transcripts that live as long as this object (the library's sessions)."""

    def __init__(self, *, prefix: str) -> None:
        self._prefix = prefix
        self._held: dict[str, _MemorySession] = {}

    def open(self, key: str, agent: str, *, keep: int) -> HeldTranscript:
        """Return the transcript of `key`, empty the first time."""
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _MemorySession(Transcript(session=f"{self._prefix}{key}"))
        return held

    def save(self, held: HeldTranscript, *, keep: int) -> None:
        """Hold only the last `keep` messages."""
        held.transcript.compact(keep)
