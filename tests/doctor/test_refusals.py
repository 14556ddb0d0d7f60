"""`orchestrator check` in a real process refuses each config that cannot work: exit 1, one line naming the
file, the dotted key and the fix (issue 27). Each test is a newcomer's mistake it used to call `ok`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.store import hold_state_lock
from tests.conftest import WriteConfig
from tests.fakes.telegram_api import DEFAULT_TOKEN

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BASE = '[providers.p]\nbase_url = "http://127.0.0.1:9/v1"\n[agents.a]\nprovider = "p"\nmodel = "m"\n'
TG = '[channels.tg]\nkind = "telegram"\ntoken = "env:ORCH_TEST_TG"\n'


def orchestrator(*args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "orchestrator.cli", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={**os.environ, "ORCH_TEST_TG": DEFAULT_TOKEN, **(env or {})},
    )


def check(path: Path, *more: str, env: dict[str, str] | None = None) -> tuple[int, list[str], list[str]]:
    done = orchestrator("check", *more, "--config", str(path), env=env)
    assert "Traceback" not in done.stderr
    return done.returncode, done.stdout.splitlines(), done.stderr.splitlines()


def route(channel: str, chat: str, sender: str, *, agent: str = "a") -> str:
    return f'[[routes]]\nchannel = "{channel}"\nchat = "{chat}"\nagent = "{agent}"\nsenders = [{sender}]\n'


def test_an_empty_config_is_refused_with_what_to_add(write_config: WriteConfig) -> None:
    path = write_config("# nothing yet\n")
    assert check(path) == (1, [], [
        f"{path}: agents: the config defines no agent (0 providers, 0 channels, 0 routes), so nothing could "
        "answer: run `orchestrator init` to write a first config, or add a [providers.NAME] (base_url), an "
        "[agents.NAME] (provider, model), a [channels.NAME] and a [[routes]] entry (see docs/configuration.md)"
    ])


def test_a_route_an_earlier_one_shadows_is_refused_naming_both(write_config: WriteConfig) -> None:
    path = write_config(
        BASE + TG + '[channels.term]\nkind = "terminal"\n'
        + route("tg", "*", '"*"') + route("term", "*", '"local"') + route("tg", "-100*", '"42"')
    )
    code, out, err = check(path)
    assert (code, out) == (1, [])
    assert err == [
        f"{path}: routes[2]: route shadowed by an earlier one: routes[0] matches every message this route could "
        "(channel 'tg', chat '-100*', senders 42) and the first match wins, so routes[2] never matches: move it "
        "above routes[0], narrow the earlier route's chat or senders, or remove it"
    ]
    # `orchestrator route` marks it too, in its lines and its JSON
    done = orchestrator("route", "tg", "--chat", "-1001", "--sender", "42", "--config", str(path))
    assert done.returncode == 0
    assert done.stdout.splitlines()[0] == "routes[0]: matches -> agent 'a', session per_sender"
    assert done.stdout.splitlines()[-1] == "routes[2]: shadowed by routes[0], so it never matches"
    done = orchestrator("route", "tg", "--chat", "-1001", "--sender", "42", "--json", "--config", str(path))
    assert json.loads(done.stdout)["shadowed"] == {"2": [0]}


def test_senders_split_over_earlier_routes_shadow_and_a_narrower_chat_does_not(write_config: WriteConfig) -> None:
    # 7 goes to routes[0] and 8 to routes[1] in every chat: routes[2] takes neither, ever
    path = write_config(BASE + TG + route("tg", "*", '"7"') + route("tg", "-100?*", '"8"') + route("tg", "-1001", '"7", "8"'))
    code, _, err = check(path)
    assert code == 1 and [line.split(": ")[1] for line in err] == ["routes[2]"]
    assert "routes[0] and routes[1] match every message" in err[0]
    # an earlier route in fewer chats, or for fewer senders, leaves the later one its messages
    for routes in (
        route("tg", "-100*", '"*"') + route("tg", "*", '"7"'),
        route("tg", "*", '"7"') + route("tg", "*", '"7", "8"'),
        route("tg", "[0-9]*", '"*"') + route("tg", "-5", '"7"'),
        route("tg", "*", '"7"') + route("tg", "*", '"*"'),
    ):
        path.write_text(BASE + TG + routes)
        assert check(path)[0] == 0, routes
    path.write_text(BASE + TG + route("tg", "[0-9]*", '"*"') + route("tg", "4[2-3]", '"7"'))
    assert check(path)[2][0].startswith(f"{path}: routes[1]: route shadowed by an earlier one: routes[0] ")


def test_sender_ids_of_the_wrong_shape_for_their_platform_are_refused(write_config: WriteConfig) -> None:
    path = write_config(
        BASE + TG
        + '[channels.sl]\nkind = "slack"\nbot_token = "env:ORCH_TEST_SLACK"\napp_token = "env:ORCH_TEST_SLACK"\n'
        + '[channels.dc]\nkind = "discord"\ntoken = "env:ORCH_TEST_DC"\n'
        + route("tg", "*", '"@alice", "123456789"') + route("sl", "*", '"alice", "U0123ABCDEF"')
        + route("dc", "*", '"W0123"') + '[channels.term]\nkind = "terminal"\n' + route("term", "*", '"me"')
    )
    code, out, err = check(path)
    assert (code, out) == (1, [])
    assert err == [
        f"{path}: routes[0].senders[0]: '@alice' is not a user id: Telegram senders are numeric user ids (like "
        "123456789): `orchestrator run` logs `no route ... sender ID` for each message it refuses, and "
        "@userinfobot in Telegram tells you yours",
        f"{path}: routes[1].senders[0]: 'alice' is not a user id: Slack senders are member ids (U0123ABCDEF or "
        "W0123ABCDEF): the profile's ... menu -> Copy member ID",
        f"{path}: routes[2].senders[0]: 'W0123' is not a user id: Discord senders are numeric user ids (a long "
        "number): Settings -> Advanced -> Developer Mode on, then right-click the name -> Copy User ID",
    ]


@pytest.mark.parametrize(("token", "message"), [
    (f"bot{DEFAULT_TOKEN}", "the token starts with 'bot': that is part of the API URL "
     "(https://api.telegram.org/bot<token>/), not of the token; remove it"),
    ("123456:abc", "a Telegram bot token is the bot id, ':' and 35 characters (like 123456789:AAF...), this one has "
     "3 characters after ':': copy it again from @BotFather (/mybots -> the bot -> API Token)"),
    ("AAFakeTestTokenOfTheLoopbackFake_01", "a Telegram bot token is the bot id, ':' and 35 characters (like "
     "123456789:AAF...), this one has no ':': copy it again from @BotFather (/mybots -> the bot -> API Token)"),
], ids=["bot-prefix", "short", "no-colon"])
def test_a_telegram_token_of_the_wrong_shape_is_refused_before_any_request(
    write_config: WriteConfig, token: str, message: str
) -> None:
    # api_base_url names nothing that listens: no request is made, so none can fail
    path = write_config(BASE + TG + 'api_base_url = "http://127.0.0.1:9"\n' + route("tg", "*", '"42"'))
    for more in ((), ("--connect",)):
        code, _, err = check(path, *more, env={"ORCH_TEST_TG": token})
        assert code == 1 and f"{path}: channels.tg.token: {message}" in err, more
        assert not any(line.startswith(f"{path}: channels.tg: ") for line in err)  # Telegram was not asked
        assert token not in "\n".join(err)


def test_slack_tokens_swapped_are_named(write_config: WriteConfig) -> None:
    path = write_config(
        BASE + '[channels.sl]\nkind = "slack"\nbot_token = "env:ORCH_TEST_APP"\napp_token = "env:ORCH_TEST_BOT"\n'
        + route("sl", "*", '"U0123ABCDEF"')
    )
    code, _, err = check(path, env={"ORCH_TEST_BOT": "xoxb-1-2-abc", "ORCH_TEST_APP": "xapp-1-A1-2-abc"})
    assert code == 1
    assert err == [
        f"{path}: channels.sl.bot_token: this token starts with 'xapp-': bot_token is the Bot User OAuth Token "
        "(OAuth & Permissions), which starts with 'xoxb-'",
        f"{path}: channels.sl.app_token: this token starts with 'xoxb-': app_token is the app-level token "
        "(Basic Information -> App-Level Tokens), which starts with 'xapp-'",
    ]


# bubblewrap gone, as on a machine without the package: /dev/null (not executable) bound over it
WITHOUT_BWRAP = '[ ! -e /usr/bin/bwrap ] || mount --bind /dev/null /usr/bin/bwrap || exit 99; exec "$@"'


def test_a_written_bwrap_sandbox_without_bubblewrap_is_refused_install_first(write_config: WriteConfig) -> None:
    path = write_config(BASE + '[agents.a.shell]\nallowed_commands = ["ls"]\nsandbox = "bwrap"\n')
    done = orchestrator(
        "check", "--config", str(path), prefix=("unshare", "--mount", "sh", "-c", WITHOUT_BWRAP, "sh")
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""  # the refused notice is not repeated: the problem says it, with the fix
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        f"{path}: agents.a.shell.sandbox: 'bwrap' cannot run here (/usr/bin/bwrap is not installed), so every "
        "command would be refused: install it: `apt install bubblewrap` (Debian, Ubuntu; "
    )
    assert line.endswith('or sandbox = "none" to run commands unconfined')
    assert line.index("apt install bubblewrap") < line.index('"none"')


@pytest.fixture
def listening() -> Iterator[int]:
    """A port this test process listens on (what an old daemon or another server would hold)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        yield server.getsockname()[1]


def test_a_gateway_or_webhook_port_in_use_is_refused_naming_its_holder(write_config: WriteConfig, listening: int) -> None:
    path = write_config(BASE + f"[gateway]\nport = {listening}\n")
    code, out, err = check(path)
    assert (code, out) == (1, [])
    (line,) = err
    assert line.startswith(f"{path}: gateway.port: 127.0.0.1:{listening} is in use by pid {os.getpid()} (")
    assert line.endswith("): stop it, or choose another port")
    path.write_text(
        BASE + TG + f'mode = "webhook"\nwebhook_url = "https://example.invalid/hook"\nwebhook_secret = "env:ORCH_TEST_HOOK"\n'
        f"webhook_port = {listening}\n" + route("tg", "*", '"42"')
    )
    code, out, err = check(path, env={"ORCH_TEST_HOOK": "hook-secret"})
    assert (code, out, len(err)) == (1, [], 1)
    (line,) = err
    assert line.startswith(f"{path}: channels.tg.webhook_port: 127.0.0.1:{listening} is in use by pid {os.getpid()} (")


def test_the_port_the_running_daemon_of_this_state_dir_holds_is_a_note(write_config: WriteConfig, listening: int) -> None:
    # `check` before a reload: the daemon holding the state directory's lock holds the port too
    path = write_config(BASE + f"[gateway]\nport = {listening}\n")
    with hold_state_lock(path.parent / "state"):
        code, out, err = check(path)
    assert (code, err) == (0, [])
    assert out[1] == (
        f"note: {path}: gateway.port: 127.0.0.1:{listening} is held by the daemon running on this state "
        f"directory (pid {os.getpid()}); it keeps the port across a reload"
    )


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder everyone may enter (pytest's own tmp folders are 0700: nothing in them is in others' reach)."""
    folder = Path(tempfile.mkdtemp(prefix="orchestrator-modes-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def test_secret_and_state_files_others_can_read_are_refused(open_folder: Path) -> None:
    path = open_folder / "config.toml"
    path.write_text(BASE + TG.replace("env:ORCH_TEST_TG", "file:tg.token") + route("tg", "*", '"42"'))
    secret = open_folder / "tg.token"
    secret.write_text(DEFAULT_TOKEN + "\n")
    secret.chmod(0o644)
    state = open_folder / "state"
    state.mkdir()
    state.chmod(0o755)
    (state / "sessions.sqlite3").touch()
    (state / "sessions.sqlite3").chmod(0o640)
    code, out, err = check(path)
    assert (code, out) == (1, [])
    assert err == [
        f"{path}: channels.tg.token: 'file:tg.token' is readable by others (mode 0644): `chmod 600 {secret}`",
        f"{path}: daemon.state_dir: {state} holds files others can read: state (0755), state/sessions.sqlite3 "
        f"(0640): `chmod -R go= {state}`",
    ]
    # behind a folder nobody else may enter, a file is out of their reach whatever its own mode
    state.chmod(0o700)
    assert check(path)[2] == [err[0]]
    secret.chmod(0o600)
    assert check(path)[0] == 0


def test_a_provider_url_with_nothing_listening_is_connection_refused(
    write_config: WriteConfig, unused_tcp_port: int
) -> None:
    path = write_config(BASE.replace("127.0.0.1:9", f"127.0.0.1:{unused_tcp_port}"))
    code, _, err = check(path, "--connect")
    assert code == 1
    assert err == [
        f"{path}: providers.p: openai endpoint http://127.0.0.1:{unused_tcp_port}/v1: cannot connect (connection "
        f"refused: nothing listens on 127.0.0.1:{unused_tcp_port}; start the model server there, or fix base_url) "
        "(check [providers.p] base_url and api_key)"
    ]
