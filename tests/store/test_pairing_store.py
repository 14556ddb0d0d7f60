"""PairingStore: one code per sender, at most N pending per channel, expiry after the TTL by the clock passed in."""

from __future__ import annotations

from pathlib import Path

from orchestrator.seam import CODE_ALPHABET, CODE_LENGTH, CODE_TTL_S
from orchestrator.store import PairingStore

T0 = 1_800_000_000.0


def store(tmp_path: Path) -> PairingStore:
    return PairingStore(tmp_path / "pairing.sqlite3", alphabet=CODE_ALPHABET, length=CODE_LENGTH, ttl_s=CODE_TTL_S)


def offer(s: PairingStore, sender: str, now: float, *, channel: str = "tg") -> str | None:
    made = s.offer(channel=channel, route="r", sender=sender, chat=sender, sender_name=None, now=now, max_pending=3)
    return made.code.code if made.code is not None else None


def test_a_code_expires_after_an_hour_and_the_stranger_then_gets_a_new_one(tmp_path: Path) -> None:
    with store(tmp_path) as s:
        first = offer(s, "99", T0)
        assert first is not None and len(first) == CODE_LENGTH and set(first) <= set(CODE_ALPHABET)
        assert offer(s, "99", T0 + CODE_TTL_S - 1) == first  # asking again: the same code
        assert s.find(first.lower(), now=T0 + CODE_TTL_S - 1) is not None
        assert s.find(first, now=T0 + CODE_TTL_S) is None and s.pending(now=T0 + CODE_TTL_S) == []
        again = offer(s, "99", T0 + CODE_TTL_S)
        assert again is not None and again != first


def test_three_pending_per_channel_fill_it_until_one_expires_or_is_decided(tmp_path: Path) -> None:
    with store(tmp_path) as s:
        codes = [offer(s, sender, T0 + i) for i, sender in enumerate(("1", "2", "3"))]
        assert None not in codes and offer(s, "4", T0 + 10) is None
        assert offer(s, "4", T0 + 10, channel="other") is not None  # per channel
        pending = s.pending(now=T0 + 10)
        assert [c.sender for c in pending if c.channel == "tg"] == ["1", "2", "3"]
        assert s.deny(pending[0]) and not s.deny(pending[0])
        assert offer(s, "4", T0 + 11) is not None
        assert offer(s, "5", T0 + 12) is None
        assert offer(s, "5", T0 + 1 + CODE_TTL_S) is not None  # "2" expired


def test_an_approval_pairs_with_its_route_only_and_a_revoke_removes_it(tmp_path: Path) -> None:
    with store(tmp_path) as s:
        code = s.find(offer(s, "99", T0) or "", now=T0)
        assert code is not None
        paired = s.approve(code, by="tg:7", now=T0 + 5)
        assert (paired.route, paired.approved_by) == ("r", "tg:7")
        assert s.routes_of("tg", "99") == frozenset({"r"}) and s.routes_of("other", "99") == frozenset()
        assert s.pending(now=T0 + 5) == []  # the code is used up
        assert [p.sender for p in s.revoke(channel="tg", sender="99")] == ["99"]
        assert s.routes_of("tg", "99") == frozenset() and s.revoke(channel="tg", sender="99") == []


def test_counts_slide_over_the_last_hour(tmp_path: Path) -> None:
    with store(tmp_path) as s:
        for i in range(3):
            s.note(channel="tg", sender="99", kind="answer", now=T0 + i)
        assert s.count(channel="tg", sender="99", kind="answer", now=T0 + 10) == 3
        assert s.count(channel="tg", sender="99", kind="attempt", now=T0 + 10) == 0
        assert s.count(channel="tg", sender="99", kind="answer", now=T0 + 3600.5) == 2
