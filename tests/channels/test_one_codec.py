"""One approval codec: no adapter module spells or parses an approval button or command by hand.

Read from the source with `ast`: outside `channels/approval_codec.py`, no module under
`channels/` holds a string (constants, f-string parts and `+` of constants folded) that is the
codec's button prefix (`ap`, `ap:...`), an approval command (`/approve`, `/deny`, `/show`, any
case, alone or leading a string), or a bare answer word of a button (`approve`, `deny`, `show`,
as the old Slack buttons were spelled). The self-test plants hand-written parsers in
`channels/slack.py` and sees the rule fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from typing import Final

from channels import APPROVAL_COMMANDS
from tests.source_files import product_sources

CODEC: Final = "channels/approval_codec.py"
_WORDS: Final = frozenset(command.lstrip("/") for command in APPROVAL_COMMANDS)


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Yield (line, text) of every string in `tree`: constants, f-string parts, and `+` chains folded."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            folded = _fold(node)
            if folded is not None:
                yield node.lineno, folded


def _fold(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(node.left), _fold(node.right)
        return None if left is None or right is None else left + right
    return None


def _hand_written(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered == "ap" or lowered.startswith("ap:") or "ap:(" in lowered or r"ap\:" in lowered:
        return True
    if any(lowered.startswith(command) for command in APPROVAL_COMMANDS):
        return True
    return text.strip() in _WORDS


def hand_written(sources: Mapping[str, str]) -> list[str]:
    """Return `path:line: text` of every approval spelling outside the codec in `sources` (path: text)."""
    found: list[str] = []
    for path, source in sorted(sources.items()):
        if path == CODEC:
            continue
        tree = ast.parse(source, filename=path)
        found.extend(f"{path}:{line}: {text[:40]!r}" for line, text in sorted(set(_strings(tree))) if _hand_written(text))
    return found


def test_no_adapter_spells_an_approval_by_hand() -> None:
    assert hand_written(product_sources("channels")) == []


def test_the_codec_itself_holds_every_spelling() -> None:
    codec = product_sources("channels")[CODEC]
    assert hand_written({"channels/elsewhere.py": codec})  # the same text anywhere else fails the rule


PLANTED: Final = {
    "split": "def parse(value):\n    parts = value.split(':')\n"
    "    return (parts[1], parts[2] == 'y') if parts[0] == 'ap' else None\n",
    "old slack dialect": "def parse(action):\n    if action['action_id'] in ('approve', 'deny'):\n"
    "        return action['value'], action['action_id'] == 'approve'\n",
    "regex": "import re\nBUTTON = re.compile(r'ap:([^:]+):([yn])')\n",
    "built": "def button(rid):\n    return f'ap:{rid}:y'\n",
    "folded": "PREFIX = 'a' + 'p:'\n",
    "command text": "def parse(text):\n    if text.lower().startswith('/approve '):\n        return text.split()[1], True\n",
    "show": "def parse(text):\n    return text.split()[1] if text.startswith('/SHOW') else None\n",
}


def test_the_rule_fails_on_a_parser_planted_in_the_slack_adapter() -> None:
    planted_at = "channels/slack.py"
    for how, text in PLANTED.items():
        sources = product_sources("channels")
        sources[planted_at] += "\n\n" + text
        found = hand_written(sources)
        assert found and all(entry.startswith(f"{planted_at}:") for entry in found), how
