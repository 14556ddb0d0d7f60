"""Every `console` block of the quickstarts runs, as written, against the loopback fakes.

A block's `$ ` lines are commands, run one by one with bash in a fresh folder, with the
package's `orchestrator` first on PATH; the platforms are reached through the environment
variables the pages document (`ORCHESTRATOR_BASE_URL`, `ORCHESTRATOR_TELEGRAM_API`, ...),
pointing at the fakes, whose tokens and names are the pages' examples. Each command must
exit 0, and the lines shown under it must appear in its output in that order (`...` marks
lines left out). So a quickstart that drifts from the program fails here.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.init import API_ENVS
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "docs"
FENCE = re.compile(r"^```(\w*)\s*$")
ELIDED = "..."

# The pages' example values, which the fakes take as their own.
TELEGRAM_TOKEN = "110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
TELEGRAM_USER = 123456789
SLACK_BOT = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_APP = "xapp-1-A0123ABCD-1234567890-0123456789abcdef"
DISCORD_TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GhIjKl.an-example-discord-bot-token"


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One `$ ` command of a block and the output lines the page shows under it."""

    command: str
    shown: tuple[str, ...]
    line: int  # where the command is on the page


def console_steps(text: str) -> list[Step]:
    """Return the commands of every ```console block, in page order."""
    steps: list[Step] = []
    language: str | None = None
    current: tuple[str, int, list[str]] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        fence = FENCE.match(raw)
        if fence and language is None:
            language = fence[1]
            continue
        if fence:
            language = None
        if language != "console" or fence:
            if current is not None:
                steps.append(Step(command=current[0], shown=tuple(current[2]), line=current[1]))
                current = None
            continue
        if raw.startswith("$ "):
            if current is not None:
                steps.append(Step(command=current[0], shown=tuple(current[2]), line=current[1]))
            current = (raw[2:], number, [])
        elif current is not None:
            current[2].append(raw.rstrip())
    return steps


def follows(shown: Sequence[str], output: Sequence[str]) -> bool:
    """Whether the lines `shown` (less `...`) appear in `output` in this order."""
    rest = iter(line.rstrip() for line in output)
    return all(any(line == got for got in rest) for line in shown if line != ELIDED)


def test_follows_is_strict_about_order_and_content() -> None:
    output = ["a", "b", "c"]
    assert follows(["a", "...", "c"], output)
    assert not follows(["c", "a"], output)
    assert not follows(["a", "B"], output)
    steps = console_steps("x\n```console\n$ echo hi\nhi\n...\n$ true\n```\n```sh\n$ not run\n```\n")
    assert [(s.command, s.shown) for s in steps] == [("echo hi", ("hi", "...")), ("true", ())]


async def run_page(page: Path, folder: Path, env: dict[str, str]) -> None:
    steps = console_steps(page.read_text(encoding="utf-8"))
    assert any("orchestrator init" in step.command for step in steps), f"{page.name}: no `console` block runs init"
    base = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    base |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}", "HOME": str(folder)}
    for step in steps:
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", step.command, cwd=folder, env=base | env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        output = out.decode().splitlines()
        where = f"{page.name}:{step.line}: `{step.command}`"
        assert proc.returncode == 0, f"{where} exited {proc.returncode}:\n{out.decode()}"
        assert follows(step.shown, output), f"{where}: the page shows\n{step.shown}\nbut it printed\n{out.decode()}"


@asynccontextmanager
async def model_server() -> AsyncIterator[dict[str, str]]:
    async with FakeOpenAI(models=("llama3.2", "qwen3")) as llm:
        yield {"ORCHESTRATOR_BASE_URL": llm.base_url}


async def test_the_telegram_quickstart(tmp_path: Path) -> None:
    async with model_server() as env, FakeTelegram(token=TELEGRAM_TOKEN, username="my_assistant_bot") as tg:
        # "Now send any message to @my_assistant_bot": the newcomer does, from their account.
        tg.push_message(chat_id=TELEGRAM_USER, user_id=TELEGRAM_USER, text="hello", first_name="Ada")
        await run_page(DOCS / "quickstart-telegram.md", tmp_path, env | {API_ENVS["telegram"]: tg.api_base_url})
    assert 'senders = ["123456789"]' in (tmp_path / "config.toml").read_text(encoding="utf-8")


async def test_the_slack_quickstart(tmp_path: Path) -> None:
    async with model_server() as env, FakeSlack(bot_token=SLACK_BOT, app_token=SLACK_APP) as slack:
        await run_page(DOCS / "quickstart-slack.md", tmp_path, env | {API_ENVS["slack"]: slack.api_base_url})
        assert [c.method for c in slack.requests][:2] == ["auth.test", "apps.connections.open"]


async def test_the_discord_quickstart(tmp_path: Path) -> None:
    async with model_server() as env, FakeDiscord(token=DISCORD_TOKEN, bot_name="my-assistant") as dc:
        await run_page(DOCS / "quickstart-discord.md", tmp_path, env | {API_ENVS["discord"]: dc.api_base_url})
        assert not dc.gateway_connections


@pytest.mark.parametrize("platform", sorted(API_ENVS))
def test_each_quickstart_documents_its_api_variable_and_is_linked_from_the_readme(platform: str) -> None:
    page = DOCS / f"quickstart-{platform}.md"
    assert API_ENVS[platform] in page.read_text(encoding="utf-8")
    assert f"(docs/quickstart-{platform}.md)" in (DOCS.parent / "README.md").read_text(encoding="utf-8")
