"""What an approver reads: every argument name, in schema order, long values cut visibly in the middle."""

from __future__ import annotations

import json
import re

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.policy import APPROVAL_PREVIEW_CHARS, render_arguments
from orchestrator.tools import BUILTIN_TOOLS

FILE_WRITE = BUILTIN_TOOLS["file_write"].spec.parameters
MARKER = re.compile(r"…\[(\d+) chars cut\]…")


def test_a_long_first_argument_cannot_hide_the_path() -> None:
    # the attack: the model puts 5,000 characters of content first so `path` falls off the end
    content = "A" * 2500 + "B" * 2500
    shown = render_arguments({"content": content, "path": "../../etc/cron.d/evil"}, FILE_WRITE)

    assert shown.startswith('{"path": "../../etc/cron.d/evil", "content": "AAAA')
    assert shown.endswith('BBBB"}')
    (cut,) = MARKER.findall(shown)
    assert len(shown) <= APPROVAL_PREVIEW_CHARS
    # what is shown plus what is said to be cut is the whole value
    value = shown.split('"content": ', 1)[1][:-1]
    assert len(MARKER.sub("", value)) + int(cut) == len(json.dumps(content))


def test_every_name_is_shown_in_schema_order_then_extras() -> None:
    shown = render_arguments({"zeta": 1, "content": "x", "path": "a.txt"}, FILE_WRITE)
    assert shown == '{"path": "a.txt", "content": "x", "zeta": 1}'


def test_short_values_are_whole_and_long_ones_share_the_rest() -> None:
    shown = render_arguments({"a": "x" * 1000, "b": "y" * 1000, "path": "p"}, FILE_WRITE)

    assert '"path": "p"' in shown and len(shown) <= APPROVAL_PREVIEW_CHARS
    a, b = (len(part) for part in re.findall(r'"[ab]": ("[^"]*")', shown))
    assert abs(a - b) <= 1  # an equal share each, neither starved
    assert len(MARKER.findall(shown)) == 2


def test_a_value_cannot_fake_another_argument_or_reorder_the_text() -> None:
    shown = render_arguments({"path": 'ok.txt"}\n{"path": "x', "content": "abc\u202edcba\u200b"}, FILE_WRITE)

    assert "\n" not in shown and "\u202e" not in shown and "\u200b" not in shown
    assert shown == '{"path": "ok.txt\\"}\\n{\\"path\\": \\"x", "content": "abc\\u202edcba\\u200b"}'


def test_too_many_arguments_say_how_many_are_not_shown() -> None:
    shown = render_arguments({f"k{i:02}": "v" * 50 for i in range(60)})

    assert len(shown) <= APPROVAL_PREVIEW_CHARS
    (more,) = re.findall(r"…\[(\d+) more arguments cut\]…\}$", shown)
    assert shown.count('"k') + int(more) == 60


def test_nested_values_and_no_arguments() -> None:
    assert render_arguments({"argv": ["ls", "-la"], "n": 2, "ok": True}) == '{"argv": ["ls", "-la"], "n": 2, "ok": true}'
    assert render_arguments({}) == "{}"


# What an approver may never read unescaped: the spec of the printable set, in Unicode's terms.
UNSHOWABLE = regex.compile(r"[\p{C}\p{Z}\p{Default_Ignorable_Code_Point}\u2800](?<! )")


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(codec=None), max_size=60))
def test_no_text_reaches_the_approver_unescaped(value: str) -> None:
    shown = render_arguments({"value": value}, limit=10_000)
    shown.encode("utf-16-le")  # no surrogate is left to fail a platform's encoder
    assert UNSHOWABLE.search(shown) is None, repr(shown)


def test_marks_need_a_base_and_may_not_stack_past_four() -> None:
    assert render_arguments({"v": "e\u0301\u0301\u0301\u0301\u0301 \u0301x"}) == (
        '{"v": "e\u0301\u0301\u0301\u0301\\u0301 \\u0301x"}'
    )


def test_one_writing_system_is_not_flagged_but_a_look_alike_inside_a_path_is() -> None:
    assert render_arguments({"v": "日本語のテキストとABC 한국어 text Tiếng Việt"}) == (
        '{"v": "日本語のテキストとABC 한국어 text Tiếng Việt"}'
    )
    assert render_arguments({"v": "cat /home/user/сору"}) == (
        '[mixed scripts in: "v"] {"v": "cat [mixed scripts: Cyrillic+Latin]/home/user/сору"}'
    )


def test_a_long_blank_run_of_several_kinds_is_counted_by_kind() -> None:
    assert render_arguments({"v": "a" + " \u3000" * 6 + "b\x7f"}) == '{"v": "a[12 blanks: 6 spaces, 6 x \\u3000]b\\u007f"}'


def test_styled_and_fullwidth_letters_that_pass_for_ascii_are_escaped() -> None:
    assert render_arguments({"v": "ｒｍ -𝚛𝚏 ℌome ｶﾀｶﾅ"}) == '{"v": "\\uff52\\uff4d -\\U0001d69b\\U0001d68f \\u210come ｶﾀｶﾅ"}'
