"""`orchestrator init`: ask, check each answer against the real endpoint, write once, run the doctor."""

from __future__ import annotations

import asyncio
import os
import sys
import tomllib
from pathlib import Path
from types import MappingProxyType
from typing import Final, TextIO

from orchestrator.checks import load_config, parse_config
from orchestrator.doctor import ProbeRefused, openai_models, run_doctor
from orchestrator.errors import ConfigError
from orchestrator.init.asking import Asker, InitAborted, written_note
from orchestrator.init.online import TIMEOUT_S
from orchestrator.init.options import InitOptions, read_token_file
from orchestrator.init.platforms import discord_step, slack_step, telegram_step
from orchestrator.init.writing import SECRET_FILES, ChannelPlan, ConfigPlan, render_config, secret_ref, write_plan

__all__ = ["run_init"]

DEFAULT_BASE_URL: Final = "http://127.0.0.1:11434/v1"  # a local Ollama
BASE_URL_ENV: Final = "ORCHESTRATOR_BASE_URL"  # the example config's override, here the default answer


def run_init(
    options: InitOptions, *, stdin: TextIO | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the wizard; return the doctor's exit code (0: the config works), or raise `InitAborted`.

    Nothing is written before the last question is answered but the Slack app manifest (the
    person needs it to make the app whose tokens are asked next); Ctrl-C or a refused answer
    before then writes no config, and the line saying so names the manifest when it was
    written (KeyboardInterrupt propagates after that line).
    """
    stdin, out, err = stdin or sys.stdin, out or sys.stdout, err or sys.stderr
    asker = Asker(interactive=not options.non_interactive, stdin=stdin, out=out)
    path = Path(options.config)
    written: list[Path] = []  # what the questions wrote on the way (the Slack app manifest)
    try:
        plan = _ask_everything(asker, options, path, written)
        text = render_config(plan)
        try:  # a bug guard: what init writes must be a config `check` accepts
            parse_config(tomllib.loads(text), source=path.resolve(), shown=str(path))
        except ConfigError as exc:
            raise InitAborted(f"the config it would write is invalid: {exc}") from None
    except KeyboardInterrupt:
        print(f"\ninterrupted: {written_note([str(p) for p in written])}", file=err, flush=True)
        raise
    except InitAborted as exc:
        if not written:
            raise
        raise InitAborted(exc.reason, kept=tuple(str(p) for p in written)) from None
    write_plan(path, text, plan.all_secrets())
    count = len(plan.all_secrets())
    asker.say(f"wrote {path}" + (f" and {count} secret file(s) in {path.parent / 'secrets'} (mode 0600)" if count else ""))
    asker.say(f"checking it: orchestrator check --connect --config {path}")
    config = load_config(path)
    ok = (
        f"{path}: ok ({len(config.agents)} agents, {len(config.providers)} providers, "
        f"{len(config.channels)} channels, {len(config.routes)} routes)"
    )
    code = asyncio.run(run_doctor(config, shown=str(path), out=out, err=err, ok_line=ok))
    if code == 0:
        asker.say(f"next: orchestrator run --config {path}, then write to the bot")
    else:
        asker.say(f"fix the lines above in {path}, then run `orchestrator check --connect --config {path}` again")
    return code


def _ask_everything(asker: Asker, options: InitOptions, path: Path, written: list[Path]) -> ConfigPlan:
    if path.exists() and not options.force and not asker.confirm(f"{path} exists: replace it?", default=False):
        raise InitAborted(f"{path} exists; pass --force to replace it")
    if path.parent != Path() and not path.parent.is_dir():
        raise InitAborted(f"{path.parent}: no such folder")
    asker.say("The model server (any OpenAI-compatible API: Ollama, vLLM, llama.cpp, OpenAI, ...)")
    base_url, key_ref, model, provider_secrets = _provider(asker, options)
    found = (telegram_step(asker, options), slack_step(asker, options, path.parent, written=written), discord_step(asker, options))
    channels = [channel for channel in found if channel is not None]
    if not channels:
        asker.say("No chat platform: the config gets the terminal channel (chat in the shell with `orchestrator run`).")
        channels.append(ChannelPlan(name="terminal", kind="terminal", keys=(("user", "local"),), senders=("local",)))
    return ConfigPlan(
        base_url=base_url, api_key=key_ref, model=model, channels=tuple(channels),
        secrets=MappingProxyType(provider_secrets),
    )


def _provider(asker: Asker, options: InitOptions) -> tuple[str, str | None, str, dict[str, str]]:
    """Return (base URL, key reference, model, secrets to write) once the server answered, or
    once the person chose to write the config without it (a server not started yet)."""
    models: list[str] | None
    while True:
        base_url = options.provider_url or asker.ask(
            "  base URL (usually ends in /v1)", default=os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        )
        key_ref, key, secrets = _api_key(asker, options)
        asker.say(f"  asking {base_url} for its models")
        try:
            models = sorted(asyncio.run(openai_models(base_url, key, timeout_s=TIMEOUT_S)))
            break
        except ProbeRefused as exc:
            message = f"  {base_url}: {exc.reason}"
            if not asker.interactive:
                if options.model is None:
                    raise InitAborted(f"{message.strip()}; pass --model to write the config anyway") from None
                asker.say(message)
                models = None
                break
            asker.say(message)
            if options.provider_url is None and asker.confirm("  try another URL or key?", default=True):
                continue
            if not asker.confirm("  write the config anyway, with a model name you type?", default=True):
                raise InitAborted(f"the model server at {base_url} did not answer") from None
            models = None
            break
    if models is None:  # the server could not be asked: the model is the one typed, unchecked
        model = options.model or asker.ask("  model name (e.g. llama3.2)", flag="--model")
        asker.say(f"  the model server could not be reached: the config names {model!r} as typed; start the server,")
        asker.say("  and the doctor at the end (orchestrator check --connect) passes once it answers")
        return base_url, key_ref, model, secrets
    if options.model is not None:
        if models and options.model not in models:
            raise InitAborted(f"--model {options.model}: {base_url} does not serve it (it serves: {', '.join(models)})")
        model = options.model
    elif models:
        asker.say(f"  {base_url} serves {len(models)} model(s):")
        model = asker.choose("  model (number or name)", models, default=models[0])
    else:
        model = asker.ask("  model name (the server lists none)", flag="--model")
    return base_url, key_ref, model, secrets


def _api_key(asker: Asker, options: InitOptions) -> tuple[str | None, str | None, dict[str, str]]:
    """Return (reference for the config, value for the probe, secret files): an env name is kept as a reference."""
    if options.api_key_env is not None:
        return f"env:{options.api_key_env}", os.environ.get(options.api_key_env), {}
    if options.api_key_file is not None:
        key = read_token_file(options.api_key_file, "--api-key-file")
        return secret_ref(SECRET_FILES["provider key"]), key, {SECRET_FILES["provider key"]: key}
    if not asker.interactive:
        return None, None, {}
    answer = asker.secret(
        "  API key (not shown; env:NAME reads it from the environment; Enter for none)",
        flag="--api-key-file or --api-key-env", required=False,
    )
    if answer.startswith("env:") and len(answer) > 4:
        return answer, os.environ.get(answer[4:]), {}
    if answer:
        return secret_ref(SECRET_FILES["provider key"]), answer, {SECRET_FILES["provider key"]: answer}
    return None, None, {}
