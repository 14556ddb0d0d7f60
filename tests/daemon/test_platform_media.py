"""Pictures and files through the daemon on Slack and Discord: the real adapters, their fakes, the fake LLM.

The intake and its policy are tested on Telegram (test_telegram_media.py); these check that the
Slack and Discord halves carry them end to end: a captionless picture reaches a vision agent,
an agent without media fetches nothing, and `send_file` posts back into the same chat.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from orchestrator.daemon import Runtime
from tests.conftest import WriteConfig, provider_toml
from tests.daemon.chats import DISCORD_ALICE, DISCORD_DM, SLACK_ALICE, SLACK_DM, posts, texts, wait_post, wait_text
from tests.daemon.platforms import daemon
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, text, tool_call
from tests.fakes.slack_api import FakeSlack
from tests.media.samples import JPEG, PDF

pytestmark = pytest.mark.slow


def agents_toml(fake_llm: FakeOpenAI, channel: str, *, media: bool) -> str:
    """Return one agent `seer` answering `channel`: vision and media when `media`, neither otherwise."""
    media_table = '\nvision = true\n\n[agents.seer.media]\naccept = ["image", "document"]\n' if media else "\n"
    return (
        provider_toml(fake_llm.base_url)
        + f"""
[agents.seer]
provider = "fake"
model = "seer-model"
autonomy = "full"
tools = ["file_read", "send_file"]
{media_table}
[[routes]]
channel = "{channel}"
agent = "seer"
senders = ["*"]
"""
    )


def slack_toml(fake_llm: FakeOpenAI, slack: FakeSlack, *, media: bool) -> str:
    return agents_toml(fake_llm, "work", media=media) + f"""
[channels.work]
kind = "slack"
bot_token = "env:SLACK_BOT"
app_token = "env:SLACK_APP"
api_base_url = "{slack.api_base_url}"
socket_ping_interval_s = 0.5
"""


def discord_toml(fake_llm: FakeOpenAI, discord: FakeDiscord, *, media: bool) -> str:
    return agents_toml(fake_llm, "guild_bot", media=media) + f"""
[channels.guild_bot]
kind = "discord"
token = "env:DISCORD_TOKEN"
api_base_url = "{discord.api_base_url}"
guild_ready_timeout_s = 0.05
"""


def workspace(runtime: Runtime) -> Path:
    return runtime.config.state_path().with_name("state-workspaces") / "seer"


def image_urls(fake_llm: FakeOpenAI) -> list[str]:
    return [p["image_url"]["url"] for p in fake_llm.parts[-1] if p["type"] == "image_url"]


async def test_slack_a_captionless_photo_is_seen_and_a_file_goes_back(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    async with daemon(write_config(slack_toml(fake_llm, slack, media=True))) as runtime:
        workspace(runtime).mkdir(parents=True, exist_ok=True)
        (workspace(runtime) / "report.pdf").write_bytes(PDF)
        fake_llm.script(tool_call("send_file", {"path": "report.pdf", "caption": "the report"}), text("a white square; sent"))
        photo = slack.files.add("photo.jpg", JPEG, mimetype="image/jpeg")
        await slack.push_message("", files=[photo], subtype="file_share", user=SLACK_ALICE, channel=SLACK_DM)
        await wait_text(slack, "a white square; sent", timeout=15)
        assert image_urls(fake_llm) == ["data:image/jpeg;base64," + base64.b64encode(JPEG).decode()]
    assert slack.files.downloads == 1 and slack.files.served[0].completed
    (upload,) = slack.files.uploads
    assert (upload.filename, upload.content, upload.channel, upload.initial_comment) == (
        "report.pdf", PDF, SLACK_DM, "the report"
    )


@pytest.mark.parametrize("connect", [False, True], ids=["hosted", "slack-connect-stub"])
async def test_slack_an_agent_without_media_downloads_nothing(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack, connect: bool
) -> None:
    async with daemon(write_config(slack_toml(fake_llm, slack, media=False))):
        add = slack.files.add_connect if connect else slack.files.add
        photo = add("photo.jpg", JPEG, mimetype="image/jpeg")
        await slack.push_message("look", files=[photo], subtype="file_share", user=SLACK_ALICE, channel=SLACK_DM)
        await slack.wait_posted(1, timeout=15)
    assert slack.calls("files.info") == [] and slack.files.downloads == 0 and fake_llm.requests == []
    assert texts(slack) == ["I can't take files here."]  # one polite refusal, no turn, no lookup


async def test_slack_connect_a_stub_file_is_looked_up_then_seen(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    async with daemon(write_config(slack_toml(fake_llm, slack, media=True))):
        fake_llm.script(text("a white square"))
        stub = slack.files.add_connect("photo.jpg", JPEG, mimetype="image/jpeg")
        await slack.push_message("", files=[stub], subtype="file_share", user=SLACK_ALICE, channel=SLACK_DM)
        await wait_text(slack, "a white square", timeout=15)
        assert image_urls(fake_llm) == ["data:image/jpeg;base64," + base64.b64encode(JPEG).decode()]
    assert [c.args["file"] for c in slack.calls("files.info")] == [stub["id"]]
    assert slack.files.downloads == 1 and slack.files.served[0].completed


async def test_slack_connect_a_file_not_shared_with_the_app_is_answered_like_a_failed_download(
    write_config: WriteConfig, fake_llm: FakeOpenAI, slack: FakeSlack
) -> None:
    async with daemon(write_config(slack_toml(fake_llm, slack, media=True))):
        denied = slack.files.add_connect("plan.pdf", PDF, mimetype="application/pdf", access="access_denied")
        gone = slack.files.add_connect("photo.jpg", JPEG, mimetype="image/jpeg")
        slack.files.missing_scope = True  # files.info without files:read
        await slack.push_message("", files=[denied], subtype="file_share", user=SLACK_ALICE, channel=SLACK_DM)
        await slack.wait_posted(1, timeout=15)
        await slack.push_message("", files=[gone], subtype="file_share", user=SLACK_ALICE, channel=SLACK_DM)
        await slack.wait_posted(2, timeout=15)
    assert texts(slack) == ["I could not fetch the file; please send it again."] * 2
    assert len(slack.calls("files.info")) == 1  # the denied one is refused without asking
    assert slack.files.downloads == 0 and fake_llm.requests == []


async def test_discord_a_captionless_photo_is_seen_and_a_file_goes_back(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    async with daemon(write_config(discord_toml(fake_llm, discord, media=True))) as runtime:
        workspace(runtime).mkdir(parents=True, exist_ok=True)
        (workspace(runtime) / "report.pdf").write_bytes(PDF)
        fake_llm.script(tool_call("send_file", {"path": "report.pdf", "caption": "the report"}), text("a white square; sent"))
        photo = discord.cdn.attachment(channel_id=DISCORD_DM, filename="photo.jpg", content=JPEG, content_type="image/jpeg")
        await discord.push_message(DISCORD_DM, DISCORD_ALICE, "", attachments=[photo])
        await wait_post(discord, "a white square; sent", timeout=15)
        assert image_urls(fake_llm) == ["data:image/jpeg;base64," + base64.b64encode(JPEG).decode()]
    assert discord.cdn.downloads == 1 and discord.cdn.served[0].completed
    (post,) = [p for p in posts(discord) if "files" in p]
    assert (post["channel_id"], post["content"]) == (DISCORD_DM, "the report")
    assert [(f.filename, f.content) for f in post["files"]] == [("report.pdf", PDF)]


async def test_discord_an_agent_without_media_downloads_nothing(
    write_config: WriteConfig, fake_llm: FakeOpenAI, discord: FakeDiscord
) -> None:
    async with daemon(write_config(discord_toml(fake_llm, discord, media=False))):
        photo = discord.cdn.attachment(channel_id=DISCORD_DM, filename="photo.jpg", content=JPEG, content_type="image/jpeg")
        await discord.push_message(DISCORD_DM, DISCORD_ALICE, "", attachments=[photo])
        await discord.wait_until(lambda: len(posts(discord)) == 1, timeout=15)
    assert discord.cdn.downloads == 0 and fake_llm.requests == []
