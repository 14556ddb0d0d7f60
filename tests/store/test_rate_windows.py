"""RateWindows: a sliding window per key; a limited message is not counted; one notice per window."""

from __future__ import annotations

from orchestrator.store import RateWindows


def test_the_window_slides_and_the_notice_is_sent_once_per_window() -> None:
    windows = RateWindows()
    verdicts = [windows.hit("k", now=float(t), messages=5, per_s=60) for t in range(15)]
    assert [v.allowed for v in verdicts] == [True] * 5 + [False] * 10
    assert [v.notify for v in verdicts] == [False] * 5 + [True] + [False] * 9
    assert verdicts[5].retry_in_s == 55.0  # the first counted message (t=0) ages out at 60
    assert windows.hit("other", now=14.0, messages=5, per_s=60).allowed  # per key
    assert windows.hit("k", now=60.0, messages=5, per_s=60).allowed  # t=0 aged out: one slot
    late = windows.hit("k", now=60.5, messages=5, per_s=60)
    assert (late.allowed, late.notify) == (False, True)  # a new window: told again, once


def test_idle_windows_are_swept() -> None:
    windows = RateWindows()
    for i in range(2000):
        windows.hit(i, now=float(i) * 10, messages=1, per_s=1)
    assert len(windows) < 1100
