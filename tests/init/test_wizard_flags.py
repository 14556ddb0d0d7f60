"""`orchestrator init --non-interactive`: every answer from flags, for scripts; same checks, same writes."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.init import DISCORD_PERMISSIONS, slack_manifest
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]


async def init(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, list[str]]:
    """Run `orchestrator init --non-interactive` off this loop; return (code, stdout, stderr lines)."""
    code = await asyncio.to_thread(cli.main, ["init", "--non-interactive", *args])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def token_file(folder: Path, name: str, value: str) -> str:
    path = folder / name
    path.write_text(value + "\n", encoding="utf-8")
    return str(path)


async def test_discord_needs_the_message_content_intent_and_gets_an_invite_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    given = tmp_path / "given"
    given.mkdir()
    config = tmp_path / "config.toml"
    async with FakeOpenAI() as llm, FakeDiscord() as dc:
        monkeypatch.setenv("ORCHESTRATOR_DISCORD_API", dc.api_base_url)
        args = ("--config", str(config), "--provider-url", llm.base_url,
                "--discord-token-file", token_file(given, "dc", dc.token), "--discord-sender", "555")
        dc.refuse_privileged_intents = True  # the newcomer skipped the intent switch
        code, out, err = await init(capsys, *args)
        assert code == 1
        assert err == [
            "error: discord: the Message Content intent is off, so the gateway would refuse the bot (close 4014): "
            "enable it under Developer Portal -> your application -> Bot -> Privileged Gateway Intents -> "
            "Message Content Intent (nothing written)"
        ]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["given"]

        dc.refuse_privileged_intents = False
        code, out, err = await init(capsys, *args)
        assert (code, err) == (0, [])
        invite = f"https://discord.com/oauth2/authorize?client_id={dc.bot_id}&scope=bot&permissions={DISCORD_PERMISSIONS}"
        assert f"  {invite}" in out.splitlines()
        assert out.splitlines()[-2:] == [
            f"{config}: ok (1 agents, 1 providers, 1 channels, 1 routes)",
            f"next: orchestrator run --config {config}, then write to the bot",
        ]
        assert not dc.gateway_connections
    text = config.read_text(encoding="utf-8")
    assert dc.token not in text and 'token = "file:secrets/discord_token"' in text
    assert stat.S_IMODE((tmp_path / "secrets" / "discord_token").stat().st_mode) == 0o600
    # View Channels, Send Messages, Read Message History, Attach Files, Send Messages in Threads
    assert DISCORD_PERMISSIONS == 1024 + 2048 + 65536 + 32768 + 274877906944


async def test_slack_writes_the_manifest_and_checks_both_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    async with FakeOpenAI() as llm, FakeSlack() as slack:
        monkeypatch.setenv("ORCHESTRATOR_SLACK_API", slack.api_base_url)
        bot = token_file(tmp_path, "bot", slack.app_token)  # the two tokens swapped by mistake
        app = token_file(tmp_path, "app", slack.bot_token)
        args = ["--config", str(config), "--provider-url", llm.base_url, "--slack-sender", "U0ADA"]
        code, _, err = await init(capsys, *args, "--slack-bot-token-file", bot, "--slack-app-token-file", app)
        assert code == 1
        # named from the tokens' prefixes: Slack is not asked; the manifest was written before the
        # tokens were asked (the app is made from it): said, not "nothing written"
        manifest_path = tmp_path / "slack-app-manifest.yaml"
        assert err == [
            "error: slack: bot_token: this token starts with 'xapp-': bot_token is the Bot User OAuth Token "
            f"(OAuth & Permissions), which starts with 'xoxb-' (no config written; kept {manifest_path} for the next try)"
        ]
        assert [c.method for c in slack.requests] == []
        assert not config.exists() and manifest_path.exists()
        code, out, err = await init(
            capsys, *args, "--slack-bot-token-file", app, "--slack-app-token-file", bot
        )
        assert (code, err) == (0, [])
        assert "connected as bot in Fake" in out
    manifest = (tmp_path / "slack-app-manifest.yaml").read_text(encoding="utf-8")
    assert manifest == slack_manifest() == (ROOT / "examples" / "slack-app-manifest.yaml").read_text(encoding="utf-8")
    for needed in ("app_mentions:read", "chat:write", "im:history", "- message.im", "socket_mode_enabled: true",
                   "interactivity:\n    is_enabled: true"):
        assert needed in manifest
    route = ["route", "slack", "--chat", "D1", "--sender", "U0ADA", "--config", str(config)]
    assert await asyncio.to_thread(cli.main, route) == 0


async def test_an_existing_config_is_never_replaced_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("# mine\n", encoding="utf-8")
    async with FakeOpenAI(models=("a", "b")) as llm:
        args = ("--config", str(config), "--provider-url", llm.base_url)
        code, _, err = await init(capsys, *args)
        assert (code, err) == (1, [f"error: {config} exists; pass --force to replace it (nothing written)"])
        assert config.read_text(encoding="utf-8") == "# mine\n"
        code, _, err = await init(capsys, *args, "--model", "c", "--force")
        assert (code, err) == (1, [f"error: --model c: {llm.base_url} does not serve it (it serves: a, b) (nothing written)"])
        code, out, err = await init(capsys, *args, "--model", "b", "--force")
        assert (code, err) == (0, [])
    text = config.read_text(encoding="utf-8")
    assert 'model = "b"' in text and '[channels.terminal]' in text and 'senders = ["local"]' in text
    assert not (tmp_path / "secrets").exists()  # no key, no token: no secret files


async def test_a_provider_key_is_a_0600_file_or_an_environment_reference_never_literal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    async with FakeOpenAI() as llm:
        key = token_file(tmp_path, "key", "sk-test-123")
        code, _, err = await init(capsys, "--config", str(config), "--provider-url", llm.base_url, "--api-key-file", key)
        assert (code, err) == (0, [])
        assert llm.model_list_authorizations[-1] == "Bearer sk-test-123"
        text = config.read_text(encoding="utf-8")
        assert "sk-test-123" not in text and 'api_key = "file:secrets/provider_api_key"' in text
        monkeypatch.setenv("MY_KEY", "sk-env-456")
        code, _, err = await init(
            capsys, "--config", str(config), "--provider-url", llm.base_url, "--api-key-env", "MY_KEY", "--force"
        )
        assert (code, err) == (0, [])
        assert llm.model_list_authorizations[-1] == "Bearer sk-env-456"
        assert 'api_key = "env:MY_KEY"' in config.read_text(encoding="utf-8")


async def test_an_unreachable_model_server_names_the_url_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unused_tcp_port: int
) -> None:
    config = tmp_path / "config.toml"
    url = f"http://127.0.0.1:{unused_tcp_port}/v1"
    code, _, err = await init(capsys, "--config", str(config), "--provider-url", url)
    assert code == 1 and len(err) == 1
    assert err[0].startswith(f"error: {url}: cannot connect (")
    assert err[0].endswith("; pass --model to write the config anyway (nothing written)")
    assert list(tmp_path.iterdir()) == []


async def test_a_model_server_that_is_down_still_gets_a_config_with_the_model_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unused_tcp_port: int
) -> None:
    config = tmp_path / "config.toml"
    url = f"http://127.0.0.1:{unused_tcp_port}/v1"
    code, out, err = await init(capsys, "--config", str(config), "--provider-url", url, "--model", "llama3.2")
    assert code == 1  # the doctor at the end cannot reach the server either
    lines = out.splitlines()
    assert any(line.startswith(f"  {url}: cannot connect (") for line in lines)
    assert "  the model server could not be reached: the config names 'llama3.2' as typed; start the server," in lines
    assert lines[-1] == f"fix the lines above in {config}, then run `orchestrator check --connect --config {config}` again"
    text = config.read_text(encoding="utf-8")
    assert f'base_url = "{url}"' in text and 'model = "llama3.2"' in text
    # the config is valid: `check` (offline) passes it
    assert await asyncio.to_thread(cli.main, ["check", "--config", str(config)]) == 0


async def test_a_telegram_webhook_is_deleted_only_when_a_flag_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.init.test_wizard_terminal import CONFLICT, HOOK, set_webhook

    given = tmp_path / "given"
    given.mkdir()
    config = tmp_path / "config.toml"
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        await set_webhook(tg, HOOK)
        monkeypatch.setenv("ORCHESTRATOR_TELEGRAM_API", tg.api_base_url)
        args = ("--config", str(config), "--provider-url", llm.base_url,
                "--telegram-token-file", token_file(given, "tg", tg.token), "--wait-s", "5")
        code, out, err = await init(capsys, *args)
        assert code == 1
        assert f"  {CONFLICT}" in out.splitlines() and "Traceback" not in out + "\n".join(err)
        assert out.splitlines()[-1] == (
            "  webhook left as it is: type your user id instead (@userinfobot in Telegram tells it); "
            "or pass --telegram-delete-webhook"
        )
        assert err == ["error: Your Telegram user id (for `senders`): no answer; pass --telegram-sender (nothing written)"]
        assert tg.webhook() == {"url": HOOK} and sorted(p.name for p in tmp_path.iterdir()) == ["given"]

        tg.push_message(chat_id=42, user_id=7, text="hi", first_name="Ada")  # waits behind the webhook
        code, out, err = await init(capsys, *args, "--telegram-delete-webhook")
        assert (code, err) == (0, [])
        assert "  webhook deleted; waiting for your message again ..." in out.splitlines()
        assert tg.webhook() is None
    assert 'senders = ["7"]' in config.read_text(encoding="utf-8")


async def test_a_sender_flag_of_the_wrong_shape_stops_the_wizard_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    async with FakeOpenAI() as llm, FakeTelegram() as tg:
        monkeypatch.setenv("ORCHESTRATOR_TELEGRAM_API", tg.api_base_url)
        code, _, err = await init(
            capsys, "--config", str(config), "--provider-url", llm.base_url,
            "--telegram-token-file", token_file(tmp_path, "tg", tg.token), "--telegram-sender", "@alice",
        )
    assert code == 1
    assert err == [
        "error: --telegram-sender: '@alice' is not a user id: Telegram senders are numeric user ids (like 123456789): "
        "`orchestrator run` logs `no route ... sender ID` for each message it refuses, and @userinfobot in Telegram "
        "tells you yours (nothing written)"
    ]
    assert not config.exists()
