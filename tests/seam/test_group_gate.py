"""Group gates are route policy resolved in the seam: omission means "mention", the decision is one pure function."""

from __future__ import annotations

import ast
import tomllib
from typing import Any, Literal

import pytest

from orchestrator.config import Config
from orchestrator.seam import GroupGate, group_gate_deprecations, resolve_group_gate
from tests.seam.test_architecture import POLICY_OWNERS, modules

TOML = """
[providers.p]
base_url = "http://127.0.0.1:9/v1"
[agents.ops]
provider = "p"
model = "m"
[channels.tg]
kind = "telegram"
token = "env:TG"
[channels.old_discord]
kind = "discord"
token = "env:DC"
mention_only = false
[[routes]]
channel = "tg"
agent = "ops"
senders = ["*"]
[[routes]]
channel = "tg"
agent = "ops"
chat = "-100*"
senders = ["*"]
reply_in_groups = "all"
wake_words = ["Hey Ops", "ops"]
[[routes]]
channel = "old_discord"
agent = "ops"
senders = ["*"]
[[routes]]
channel = "old_discord"
agent = "ops"
senders = ["*"]
reply_in_groups = "mention"
"""
# Route and channel keys the gate reads; only the seam (and config/, which validates them) may.
GATE_KEYS = {"reply_in_groups", "wake_words", "mention_only"}


@pytest.fixture
def gates() -> list[GroupGate]:
    config = Config.model_validate(tomllib.loads(TOML))
    return [resolve_group_gate(config, route) for route in config.routes]


def facts(text: str = "hello", **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"is_direct": False, "mentions_bot": False, "reply_to_bot": False, "command_target": None}
    return base | {"text": text} | overrides


def test_omission_is_mention_and_the_legacy_discord_key_still_applies_unless_the_route_says(gates: list[GroupGate]) -> None:
    default, open_route, legacy, explicit = gates
    assert (default.reply_in_groups, default.source, default.wake_words) == ("mention", "the default", ())
    assert (open_route.reply_in_groups, open_route.source) == ("all", "routes[1].reply_in_groups")
    assert (legacy.reply_in_groups, legacy.source) == ("all", "channels.old_discord.mention_only (deprecated)")
    assert (explicit.reply_in_groups, explicit.source) == ("mention", "routes[3].reply_in_groups")


def test_under_mention_only_what_is_addressed_to_the_bot_is_taken(gates: list[GroupGate]) -> None:
    gate = gates[0]
    assert gate.decide(**facts("lunch at noon, anyone?")) is None
    assert gate.decide(**facts("what time is it?", mentions_bot=True)) == "mention"
    assert gate.decide(**facts("thanks", reply_to_bot=True)) == "reply"
    assert gate.decide(**facts("/help", command_target="bot")) == "command"
    assert gate.decide(**facts("/help", command_target="other")) is None
    assert gate.decide(**facts("/help", command_target="other", mentions_bot=True)) is None  # another bot's command
    assert gate.decide(**facts("anything", is_direct=True)) == "direct"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("ops, deploy", "wake_word"), ("  OPS deploy", "wake_word"), ("hey ops what now", "wake_word"),
     ("opsie daisy", "all"), ("the ops team", "all"), ("ops", "wake_word"), ("ops_team here", "all")],
)
def test_wake_words_match_a_whole_word_at_the_start_in_any_case(
    gates: list[GroupGate], text: str, expected: Literal["wake_word", "all"]
) -> None:
    assert gates[1].decide(**facts(text)) == expected  # the "all" route: what is no wake word is still taken


def test_reply_in_groups_all_takes_everything_but_another_bots_command(gates: list[GroupGate]) -> None:
    gate = gates[1]
    assert gate.decide(**facts("lunch at noon, anyone?")) == "all"
    assert gate.decide(**facts("/help@otherbot", command_target="other")) is None


def test_the_deprecated_key_is_named_for_check_and_a_bad_reply_in_groups_names_its_key() -> None:
    config = Config.model_validate(tomllib.loads(TOML))
    (line,) = group_gate_deprecations(config)
    assert line.startswith("channels.old_discord.mention_only is deprecated: set reply_in_groups = \"all\"")
    with pytest.raises(ValueError, match=r"routes\.0\.reply_in_groups"):
        Config.model_validate(tomllib.loads(TOML.replace('senders = ["*"]\n', 'senders = ["*"]\nreply_in_groups = "some"\n', 1)))


def test_the_gate_is_shown_by_orchestrator_route(gates: list[GroupGate]) -> None:
    assert gates[1].describe() == {
        "reply_in_groups": "all", "wake_words": ["hey ops", "ops"], "source": "routes[1].reply_in_groups",
    }
    assert gates[0].explain().startswith("  groups: reply_in_groups mention (the default): takes mentions of the bot")


def test_group_gate_keys_are_read_only_in_the_seam() -> None:
    """Outside seam/ and config/, nobody reads `reply_in_groups`, `wake_words` or `mention_only` to decide."""
    bad = []
    for rel, tree in modules("orchestrator", "channels"):
        if rel.startswith(POLICY_OWNERS):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in GATE_KEYS:
                bad.append(f"{rel}:{node.lineno}: reads .{node.attr} (ask resolve_group_gate)")
    assert bad == []
