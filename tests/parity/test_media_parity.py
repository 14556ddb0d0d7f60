"""Parity for `media`: every path resolves the agent's media policy as written, minus what it declares.

The paths that can bring attachments (channel, gateway, ACP, library) take exactly the written
`accept`, caps, vision and transcription; the others take none (`no_media`). `send_file`
is offered only where a chat is answered (a channel turn, a schedule with `deliver_to`;
`no_chat` elsewhere). L2 is checked on the
resolved values and the live matrix, and through the CLI (`orchestrator agent`), whose
request to the model must not offer `send_file`; L1 (the engine shows images only to an
execution whose policy says its model can see) is checked by running the engine.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.seam import (
    PATH_PROFILES,
    ConstructionPath,
    ResolvedAgentExecution,
    Services,
    build_on_path,
    build_schedule,
    media_as_written,
    resolve,
)
from tests.conftest import WriteConfig
from tests.fakes.openai_server import FakeOpenAI, text
from tests.media.samples import JPEG

TOML = """
[providers.fake]
base_url = "{base_url}"
max_retries = 0
transcription_model = "whisper-small"

[agents.seer]
provider = "fake"
model = "seer-model"
autonomy = "full"
vision = true
tools = ["file_read", "send_file"]

[agents.seer.media]
accept = ["image", "voice", "document"]
max_bytes = 123456
max_message_bytes = 654321
image_detail = "high"
echo_transcript = true

[agents.blind]
provider = "fake"
model = "blind-model"
tools = ["file_read"]

[agents.blind.media]
accept = ["document"]

[agents.muted]
provider = "fake"
model = "muted-model"
autonomy = "full"
tools = ["send_file", "file_read"]
excluded_tools = ["send_*"]
"""

CARRY = {ConstructionPath.CHANNEL, ConstructionPath.GATEWAY_CHAT, ConstructionPath.ACP, ConstructionPath.LIBRARY}


@pytest.fixture(name="services")
async def _services() -> AsyncIterator[Services]:
    """Services whose provider clients are closed in the test's own loop (not left to the GC)."""
    opened = Services()
    yield opened
    await opened.providers.aclose()


@pytest.mark.parametrize("agent", ["seer", "blind"])
def test_every_path_resolves_the_written_media_policy_minus_its_declared_knobs(
    agent: str, write_config: WriteConfig
) -> None:
    config = load_config(write_config(TOML.format(base_url="http://127.0.0.1:9/v1")))
    written = media_as_written(config, agent)
    assert written is not None
    services = Services()
    for path in ConstructionPath:
        # through each path's production builder, with its default call-site inputs
        execution = build_on_path(config, agent, path, services)
        media = execution.media
        profile = PATH_PROFILES[path]
        assert profile.carries_media is (path in CARRY)
        assert media.accept == (written.accept if profile.carries_media else frozenset()), path
        assert (media.max_bytes, media.max_message_bytes, media.image_detail, media.vision, media.echo_transcript) == (
            written.max_bytes, written.max_message_bytes, written.image_detail, written.vision, written.echo_transcript
        ), path
        assert (media.transcription_provider, media.transcription_model) == (
            written.transcription_provider, written.transcription_model
        ), path
        assert media.send_file is (written.send_file and path is ConstructionPath.CHANNEL), path
        assert ("send_file" in execution.tools.names) is media.send_file, path
    # a schedule with a `deliver_to` answers that chat: send_file as written, still no attachments in
    delivered = build_schedule(config, agent, services, deliver_to=True)
    assert delivered.media.send_file is written.send_file
    assert ("send_file" in delivered.tools.names) is written.send_file
    assert delivered.media.accept == frozenset() and not delivered.assembly.no_chat
    # and its `tools` still narrow it: a schedule that does not name send_file never gets it
    narrowed = build_schedule(config, agent, services, tools=["file_read"], deliver_to=True)
    assert not narrowed.media.send_file and "send_file" not in narrowed.tools.names
    # the values are the agent's own, not defaults
    if agent == "seer":
        assert written.describe() == [
            "accept:document", "accept:image", "accept:voice", "max_bytes:123456", "max_message_bytes:654321",
            "image_detail:high", "vision:yes", "echo_transcript:yes", "transcription:fake/whisper-small", "send_file",
            *written.pdf.describe(),
        ]
    else:
        assert written.accept == {"document"} and not written.vision and not written.send_file


def test_the_matrix_shows_the_media_row_with_its_declared_knobs(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(TOML.format(base_url="http://127.0.0.1:9/v1"))
    assert cli.main(["policy", "matrix", "--json", "--agent", "seer", "--config", str(path)]) == 0
    grid = json.loads(capsys.readouterr().out)
    assert grid["gaps"] == []
    row = grid["agents"]["seer"]["media"]
    assert row["channel"] == "enforced"
    for column in ("gateway_chat", "acp", "library", "library+approver"):
        assert row[column] == "narrowed: no_chat", column
    for column in ("cli_run", "listing", "delegate", "sop_step", "schedule"):
        assert row[column] == "narrowed: no_chat, no_media", column


@pytest.mark.parametrize("deliver_to", [True, False])
def test_the_matrix_schedule_column_offers_send_file_only_with_deliver_to(
    deliver_to: bool, write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    target = 'deliver_to = { channel = "term", chat = "terminal" }\n' if deliver_to else ""
    schedule = (
        '\n[channels.term]\nkind = "terminal"\n\n[[schedules]]\nname = "daily"\nagent = "seer"\n'
        f'cron = "0 0 1 1 *"\nprompt = "report"\n{target}'
    )
    path = write_config(TOML.format(base_url="http://127.0.0.1:9/v1") + schedule)
    assert cli.main(["policy", "matrix", "--json", "--agent", "seer", "--config", str(path)]) == 0
    grid = json.loads(capsys.readouterr().out)
    assert grid["gaps"] == []
    row = grid["agents"]["seer"]["media"]
    assert row["schedule"] == ("narrowed: no_media" if deliver_to else "narrowed: no_chat, no_media")


def test_an_excluded_send_file_is_offered_nowhere(write_config: WriteConfig, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(TOML.format(base_url="http://127.0.0.1:9/v1"))
    config = load_config(path)
    written = media_as_written(config, "muted")
    assert written is not None and not written.send_file
    assert "send_file" not in resolve(config, "muted", path=ConstructionPath.CHANNEL, services=Services()).tools
    assert cli.main(["policy", "matrix", "--json", "--agent", "muted", "--config", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["gaps"] == []


async def test_send_file_is_not_offered_on_the_cli_path(
    write_config: WriteConfig, fake_llm: FakeOpenAI, seen: list[ResolvedAgentExecution],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_config(TOML.format(base_url=fake_llm.base_url))
    fake_llm.script(text("no chat here"))
    code = await asyncio.to_thread(cli.main, ["agent", "seer", "-m", "send me the file", "--config", str(path)])
    assert (code, capsys.readouterr().out) == (0, "no chat here\n")
    (execution,) = seen
    assert execution.identity.path is ConstructionPath.CLI_RUN and "send_file" not in execution.tools
    assert [t["function"]["name"] for t in fake_llm.requests[0]["tools"]] == ["file_read"]


@pytest.mark.parametrize("agent", ["seer", "blind"])
async def test_the_engine_shows_images_only_to_a_model_that_can_see(
    agent: str, write_config: WriteConfig, fake_llm: FakeOpenAI, services: Services
) -> None:
    config = load_config(write_config(TOML.format(base_url=fake_llm.base_url)))
    execution = resolve(config, agent, path=ConstructionPath.GATEWAY_CHAT, services=services)
    workspace = execution.security.workspace
    (workspace / "uploads").mkdir(parents=True, exist_ok=True)
    (workspace / "uploads" / "dot.jpg").write_bytes(JPEG)
    ref = {"kind": "image", "mime": "image/jpeg", "size": len(JPEG), "path": "uploads/dot.jpg"}
    fake_llm.script(text("seen"))
    transcript = Transcript(session="s")
    await run_tool_call_loop(execution, transcript, "look", media=[ref])
    (user,) = [m for m in fake_llm.requests[0]["messages"] if m["role"] == "user"]
    assert "media" not in user  # references never reach a provider
    if agent == "seer":
        url = "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()
        assert user["content"] == [{"type": "text", "text": "look"},
                                   {"type": "image_url", "image_url": {"url": url, "detail": "high"}}]
    else:
        assert user["content"] == "look"
    assert transcript.messages[0]["media"] == [ref]  # the transcript keeps the reference only


async def test_a_reference_outside_the_workspace_is_never_read(
    write_config: WriteConfig, fake_llm: FakeOpenAI, tmp_path: Path, services: Services
) -> None:
    config = load_config(write_config(TOML.format(base_url=fake_llm.base_url)))
    execution = resolve(config, "seer", path=ConstructionPath.GATEWAY_CHAT, services=services)
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(JPEG)
    fake_llm.script(text("nothing"))
    ref = {"kind": "image", "mime": "image/jpeg", "size": 1, "path": "../../secret.jpg"}
    await run_tool_call_loop(execution, Transcript(session="s"), "look", media=[ref])
    parts = fake_llm.parts[0]
    assert [p["type"] for p in parts] == ["text", "text"] and "no longer available" in parts[1]["text"]
