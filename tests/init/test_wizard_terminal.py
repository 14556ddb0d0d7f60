"""`orchestrator init` as a newcomer runs it: on a pseudo-terminal, against the loopback fakes.

The pty is the child's controlling terminal (a new session), so Ctrl-C is the byte a
keyboard sends (\\x03), turned into SIGINT by the terminal driver, as for a person.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
import sys
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from orchestrator import cli
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_api import FakeTelegram
from tests.pty_screen import Pty

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _controlling_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@asynccontextmanager
async def wizard(
    config: Path, env: dict[str, str], *args: str
) -> AsyncIterator[tuple[Pty, asyncio.subprocess.Process]]:
    master, slave = os.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator.cli", "init", "--config", str(config), *args,
        stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "ORCHESTRATOR_BASE_URL"} | env,
        start_new_session=True, preexec_fn=_controlling_terminal,
    )
    os.close(slave)
    pty = Pty(master)
    try:
        yield pty, proc
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        asyncio.get_running_loop().remove_reader(master)
        os.close(master)


async def answer(pty: Pty, question: str, line: str) -> None:
    await pty.wait_for(question)
    pty.shown = pty.shown.split(question, 1)[1]  # the next wait looks only at what follows
    pty.type(line)


async def test_the_telegram_flow_ends_with_a_config_check_accepts_admitting_the_user_who_wrote(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    async with FakeOpenAI(models=("llama3.2", "qwen3")) as llm, FakeTelegram(username="ops_bot") as tg:
        async with wizard(config, {"ORCHESTRATOR_TELEGRAM_API": tg.api_base_url}) as (pty, proc):
            await answer(pty, "base URL (usually ends in /v1) [http://127.0.0.1:11434/v1]: ", llm.base_url)
            await answer(pty, "Enter for none): ", "")
            await pty.wait_for("2) qwen3")
            await answer(pty, "model (number or name) [llama3.2]: ", "2")
            await answer(pty, "Add a Telegram bot? [y/N]: ", "y")
            await answer(pty, "Telegram bot token (not shown): ", tg.token)
            await pty.wait_for("connected as @ops_bot")
            assert tg.token not in pty.shown  # the terminal did not echo it
            await pty.wait_for("Now send any message to @ops_bot in Telegram")
            tg.push_message(chat_id=42, user_id=7, text="hello?", first_name="Ada", username="ada")
            await answer(pty, "a message from Ada (@ada) (user id 7): let this user talk to the bot? [Y/n]: ", "")
            await answer(pty, "Add a Slack app? [y/N]: ", "")
            await answer(pty, "Add a Discord bot? [y/N]: ", "")
            await pty.wait_for("channel telegram (telegram): connected as @ops_bot")
            await pty.wait_for(f"{config}: ok (1 agents, 1 providers, 1 channels, 1 routes)")
            assert await proc.wait() == 0
        assert tg.pending() == []  # the first message was taken: the daemon will not answer it later

        text = config.read_text(encoding="utf-8")
        assert tg.token not in text and 'token = "file:secrets/telegram_token"' in text
        assert 'model = "qwen3"' in text
        secret = tmp_path / "secrets" / "telegram_token"
        assert secret.read_text(encoding="utf-8").strip() == tg.token
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
        # `orchestrator check` accepts it, and its route admits the user id the fake sent, nobody else.
        assert await asyncio.to_thread(cli.main, ["check", "--config", str(config)]) == 0
        route = ["route", "telegram", "--chat", "42", "--config", str(config), "--sender"]
        assert await asyncio.to_thread(cli.main, [*route, "7"]) == 0
        assert await asyncio.to_thread(cli.main, [*route, "8"]) == 1


async def test_ctrl_c_while_waiting_for_the_first_message_leaves_the_old_config_and_nothing_else(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("# the admin's own config\n", encoding="utf-8")
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        async with wizard(config, {"ORCHESTRATOR_TELEGRAM_API": tg.api_base_url}) as (pty, proc):
            await answer(pty, f"{config} exists: replace it? [y/N]: ", "y")
            await answer(pty, "[http://127.0.0.1:11434/v1]: ", llm.base_url)
            await answer(pty, "Enter for none): ", "")
            await answer(pty, "model (number or name) [fake-model]: ", "")
            await answer(pty, "Add a Telegram bot? [y/N]: ", "yes")
            await answer(pty, "Telegram bot token (not shown): ", tg.token)
            await pty.wait_for("Now send any message to @fake_bot")
            os.write(pty.master, b"\x03")  # Ctrl-C
            await pty.wait_for("interrupted: nothing written")
            assert await proc.wait() == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]
    assert config.read_text(encoding="utf-8") == "# the admin's own config\n"


async def test_a_refused_token_is_asked_again_and_the_user_id_can_be_typed(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        env = {"ORCHESTRATOR_TELEGRAM_API": tg.api_base_url}
        async with wizard(config, env, "--wait-s", "0.5") as (pty, proc):
            await answer(pty, "[http://127.0.0.1:11434/v1]: ", llm.base_url)
            await answer(pty, "Enter for none): ", "")
            await answer(pty, "model (number or name) [fake-model]: ", "")
            await answer(pty, "Add a Telegram bot? [y/N]: ", "y")
            # pasted with the API URL's `bot`: named before Telegram is asked
            await answer(pty, "Telegram bot token (not shown): ", f"bot{tg.token}")
            await pty.wait_for("telegram: the token starts with 'bot': that is part of the API URL")
            await answer(pty, "try another token? [Y/n]: ", "")
            await answer(pty, "Telegram bot token (not shown): ", "123:" + "A" * 35)  # the shape, not a bot
            await pty.wait_for("getMe refused the token (401")
            await answer(pty, "try another token? [Y/n]: ", "")
            await answer(pty, "Telegram bot token (not shown): ", tg.token)
            await pty.wait_for("Now send any message")
            await pty.wait_for("no message arrived")
            await answer(pty, "Your Telegram user id (for `senders`): ", "abc")
            await pty.wait_for("'abc' is not a user id: Telegram senders are numeric user ids")
            await answer(pty, "Your Telegram user id (for `senders`): ", "99")
            await answer(pty, "Add a Slack app? [y/N]: ", "n")
            await answer(pty, "Add a Discord bot? [y/N]: ", "n")
            assert await proc.wait() == 0
    route = ["route", "telegram", "--chat", "1", "--sender", "99", "--config", str(config)]
    assert await asyncio.to_thread(cli.main, route) == 0


async def set_webhook(tg: FakeTelegram, url: str) -> None:
    """Set a webhook the way another deployment of the same bot did: through the Bot API."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.post(f"{tg.api_base_url}/bot{tg.token}/setWebhook", data={"url": url}) as response:
            assert (await response.json())["ok"] is True


# A loopback port nothing listens on: the fake's pushes to it fail, as to a dead deployment.
HOOK = "https://127.0.0.1:9/telegram"
CONFLICT = (
    "telegram: getUpdates answered 409 (Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first)"
)


async def test_a_bot_with_a_webhook_set_is_explained_and_the_webhook_deleted_when_asked(tmp_path: Path) -> None:
    # The wizard stopped on Telegram's 409 ("can't use getUpdates method while webhook is active").
    config = tmp_path / "config.toml"
    async with FakeOpenAI() as llm, FakeTelegram(username="ops_bot") as tg:
        await set_webhook(tg, HOOK)
        async with wizard(config, {"ORCHESTRATOR_TELEGRAM_API": tg.api_base_url}) as (pty, proc):
            await answer(pty, "[http://127.0.0.1:11434/v1]: ", llm.base_url)
            await answer(pty, "Enter for none): ", "")
            await answer(pty, "model (number or name) [fake-model]: ", "")
            await answer(pty, "Add a Telegram bot? [y/N]: ", "y")
            await answer(pty, "Telegram bot token (not shown): ", tg.token)
            await pty.wait_for(CONFLICT)
            await pty.wait_for(f"The bot has a webhook set to {HOOK}")
            assert tg.webhook() is not None  # nothing deleted before the person says so
            await answer(pty, "delete the webhook now? [y/N]: ", "y")
            await pty.wait_for("webhook deleted; waiting for your message again")
            tg.push_message(chat_id=42, user_id=7, text="hi", first_name="Ada")
            await answer(pty, "a message from Ada (user id 7): let this user talk to the bot? [Y/n]: ", "")
            await answer(pty, "Add a Slack app? [y/N]: ", "")
            await answer(pty, "Add a Discord bot? [y/N]: ", "")
            await pty.wait_for(f"{config}: ok (1 agents, 1 providers, 1 channels, 1 routes)")
            assert await proc.wait() == 0
            assert "Traceback" not in pty.shown
        assert tg.webhook() is None and len(tg.calls("deleteWebhook")) == 1
        assert tg.pending() == []
    route = ["route", "telegram", "--chat", "42", "--sender", "7", "--config", str(config)]
    assert await asyncio.to_thread(cli.main, route) == 0


async def test_a_webhook_kept_lets_the_user_id_be_typed(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        await set_webhook(tg, HOOK)
        async with wizard(config, {"ORCHESTRATOR_TELEGRAM_API": tg.api_base_url}) as (pty, proc):
            await answer(pty, "[http://127.0.0.1:11434/v1]: ", llm.base_url)
            await answer(pty, "Enter for none): ", "")
            await answer(pty, "model (number or name) [fake-model]: ", "")
            await answer(pty, "Add a Telegram bot? [y/N]: ", "y")
            await answer(pty, "Telegram bot token (not shown): ", tg.token)
            await pty.wait_for(CONFLICT)
            await answer(pty, "delete the webhook now? [y/N]: ", "")
            await pty.wait_for("webhook left as it is: type your user id instead")
            await answer(pty, "Your Telegram user id (for `senders`): ", "99")
            await answer(pty, "Add a Slack app? [y/N]: ", "n")
            await answer(pty, "Add a Discord bot? [y/N]: ", "n")
            assert await proc.wait() == 0
            assert "Traceback" not in pty.shown
        assert tg.webhook() == {"url": HOOK} and tg.calls("deleteWebhook") == []
    route = ["route", "telegram", "--chat", "1", "--sender", "99", "--config", str(config)]
    assert await asyncio.to_thread(cli.main, route) == 0
