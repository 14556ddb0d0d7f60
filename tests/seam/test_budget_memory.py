"""The budgets' runtime state stays bounded in a daemon that runs for weeks: the action ledger
keeps the senders of the last hour, the token meter one entry per minute of a key's day and
only the keys with calls in that day (the soak saw both grow with every call and sender)."""

from __future__ import annotations

from orchestrator.providers import ModelBinding, Usage
from orchestrator.seam import ActionLedger, UsageMeter, budget_key

BINDING = ModelBinding(
    provider="fake", kind="openai", base_url="http://127.0.0.1:9/v1", model="m", temperature=None,
    api_key=None, api_key_env=None, base_url_env=None, model_env=None, base_url_from_env=False,
    timeout_s=5.0, max_retries=0,
)


def test_the_ledger_forgets_senders_quiet_for_an_hour_and_still_counts_the_busy_one() -> None:
    now = [0.0]
    ledger = ActionLedger(clock=lambda: now[0])
    for sender in range(1_000):  # a thousand people, one tool call each
        assert ledger.try_consume(f"a:tg:{sender}", 120)
        now[0] += 1.0
    assert ledger.size() == 1_000  # all within the hour: each still counts
    now[0] += 3_600.0
    for _ in range(3):
        assert ledger.try_consume("a:tg:busy", 3)
    assert not ledger.try_consume("a:tg:busy", 3)  # the budget still holds
    assert ledger.size() == 1  # the quiet thousand are gone


def _record(meter: UsageMeter, sender: str, tokens: int = 10) -> None:
    meter.record(binding=BINDING, provider="fake", model="m", usage=Usage(input_tokens=tokens, output_tokens=0),
                 estimated=False, agent="a", path="channel", sender=sender, session="s")


def test_the_meter_keeps_one_entry_per_minute_and_still_counts_every_token() -> None:
    now = [1_000_000.0]
    meter = UsageMeter(clock=lambda: now[0])
    for _ in range(6 * 3_600):  # six hours of one call every second
        _record(meter, "tg:1")
        now[0] += 1.0
    key = budget_key("a", "tg:1")
    assert meter.day_entries()[key] <= 6 * 60 + 1
    assert meter.spent_today(key) == 6 * 3_600 * 10
    now[0] += 24 * 3_600 + 61  # the day has passed every call, the last minute's included
    assert meter.spent_today(key) == 0


def test_the_meter_drops_keys_with_nothing_left_in_the_day() -> None:
    now = [1_000_000.0]
    meter = UsageMeter(clock=lambda: now[0])
    for sender in range(500):
        _record(meter, f"tg:{sender}")
    assert len(meter.day_entries()) == 500
    now[0] += 24 * 3_600 + 61
    _record(meter, "tg:new")
    assert set(meter.day_entries()) == {budget_key("a", "tg:new")}
