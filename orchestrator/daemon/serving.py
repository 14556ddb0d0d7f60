"""`orchestrator run`: the long-running daemon with signals, readiness and graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import signal
import sys
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Final, TypeVar

from loguru import logger

from channels import ChannelUnusable

from orchestrator.checks import load_config
from orchestrator.config import Config, gateway_token_problems, resolve_secret
from orchestrator.daemon.collector import freeze_start_up
from orchestrator.daemon.inbox import hold_replayed, replay_unfinished, start_channel_set, start_channels, stop_channel
from orchestrator.daemon.runtime import Runtime
from orchestrator.daemon.secrets import channel_secret_problems
from orchestrator.daemon.status_socket import serve_status_socket
from orchestrator.daemon.systemd import notify, watchdog_interval_s
from orchestrator.errors import ConfigError, ConfigProblem
from orchestrator.logs import configure_logging
from orchestrator.observability import heap_trace_from_env
from orchestrator.providers import warm_provider_sdk
from orchestrator.seam import sandbox_notices
from orchestrator.store import hold_state_lock
from orchestrator.threads import in_thread

__all__ = ["log_level", "reload_config", "run_daemon", "serve"]

_T = TypeVar("_T")

# How long a reload waits for the channels it starts (a slower one keeps connecting).
_RELOAD_READY_S: Final = 30.0


def run_daemon(config_path: Path, *, verbose: bool = False, hangup_seen: Callable[[], bool] = lambda: False) -> int:
    """Load the config (raises ConfigError), then serve until SIGTERM/SIGINT; return 0 (1: the
    state files failed while serving: corrupt, an I/O error, no longer writable).

    `verbose` (`run -v`) logs at DEBUG whatever the config says. Raises `StateDirLocked`
    when another daemon serves the same state directory: two would replay each other's
    inbox and answer messages twice.
    """
    # A crash no Python code can catch (SIGBUS: a state file's shared memory truncated under
    # SQLite, SIGSEGV) still leaves one line and the Python stack in the log, not silence.
    if sys.__stderr__ is not None:  # fd 2 itself (sys.stderr may be a capture without a file)
        faulthandler.enable(file=sys.__stderr__)
    config = load_config(config_path)
    chatting = _chat_shares_the_screen(config)
    configure_logging(level=log_level(config, verbose=verbose, chat_on_screen=chatting), fmt=config.daemon.log_format)
    # ORCHESTRATOR_TRACEMALLOC=FILE: a soak's diagnostic (SIGUSR2 dumps what grew), off by default
    with hold_state_lock(config.state_path()), heap_trace_from_env():
        return asyncio.run(serve(config, config_path, hangup_seen=hangup_seen))


_QUIETER: Final = frozenset({"TRACE", "DEBUG", "INFO"})


def log_level(config: Config, *, verbose: bool, chat_on_screen: bool) -> str:
    """Return the daemon's log level: DEBUG when verbose, WARNING at most while a chat shares the screen.

    INFO lines (one per turn, `ready`, reloads) printed between a terminal chat's replies
    bury them; a person chatting sees only what needs them (warnings, errors), and `-v`
    still shows everything.
    """
    if verbose:
        return "DEBUG"
    if chat_on_screen and config.daemon.log_level in _QUIETER:
        return "WARNING"
    return config.daemon.log_level


def _chat_shares_the_screen(config: Config) -> bool:
    # A terminal channel with a person on stdin, and logs going to that same screen
    # (stderr a terminal too): `2>daemon.log` or journald keep the configured level.
    if not any(settings.kind == "terminal" for settings in config.channels.values()):
        return False
    return all(_isatty(stream) for stream in (sys.stdin, sys.stderr))


def _isatty(stream: Any) -> bool:
    try:
        return stream is not None and bool(stream.isatty())
    except (AttributeError, ValueError):  # closed
        return False


def _channel_secret_problems(config: Config, config_path: Path) -> list[ConfigProblem]:
    return channel_secret_problems(config, lambda ref: resolve_secret(ref, base=config_path.parent))


def _start_secret_problems(config: Config, config_path: Path) -> list[ConfigProblem]:
    gateway = gateway_token_problems(
        config.gateway, lambda ref: resolve_secret(ref, base=config_path.parent),
        shown=str(config.source or config_path),
    )
    return _channel_secret_problems(config, config_path) + gateway


async def serve(config: Config, config_path: Path, *, hangup_seen: Callable[[], bool] = lambda: False) -> int:
    """Run channels until told to stop; SIGHUP reloads the config if it is valid.

    `hangup_seen` tells whether a SIGHUP came before this handler was installed (the CLI
    holds them from its first instant): the daemon then reloads once it serves.

    Raises `ConfigError` before opening anything when a channel secret does not resolve
    or the gateway token is unreadable, blank or shorter than 32 characters.
    """
    # The handlers come first: reading a secret may block (a FIFO, a slow mount), and a stop
    # meanwhile must reach `signals.stop`, not asyncio.run's own SIGINT handler (which only
    # cancels this task once it awaits, and the start then called itself ready).
    loop = asyncio.get_running_loop()
    signals = _Signals()
    loop.add_signal_handler(signal.SIGTERM, signals.stop_now)
    loop.add_signal_handler(signal.SIGINT, signals.stop_now)
    loop.add_signal_handler(signal.SIGHUP, signals.reload.set)
    problems = _start_secret_problems(config, config_path)
    if problems:
        raise ConfigError(problems)
    if hangup_seen():
        signals.reload.set()
    try:
        async with Runtime.open(config, config_path=config_path) as runtime, AsyncExitStack() as gateway:
            # Start-up races the signals: a channel that cannot connect must not hold off a
            # SIGTERM for its whole ready timeout, and nothing is called ready that is not.
            runtime.spawn(_stop_on_failure(runtime, signals), name="state-watch")
            await _open_status_socket(runtime)
            runtime.spawn(_stop_when_the_chat_ends(runtime, signals), name="chat-end-watch")
            if await _until_stopped(_start_up(runtime, gateway, signals.stop), signals.stop):
                await _serve_until_stopped(runtime, config_path, signals)
            notify("STOPPING=1")
            grace = runtime.config.daemon.shutdown_grace_s
            if runtime.inflight:  # shown even where INFO is hidden (a terminal chat): the wait is explained
                logger.warning(
                    "finishing {} running turn(s) (up to {:g} s); Ctrl-C again (or a second SIGTERM) to stop now",
                    runtime.inflight, grace,
                )
            else:
                logger.info("stopping: no new messages; draining up to {}s", grace)
            # stop intake: new messages are still stored (pending, answered after the next
            # start) while adapters stay connected so in-flight turns can still reply
            runtime.stop_accepting()
            drained = await _until_stopped(runtime.drain(runtime.config.daemon.shutdown_grace_s), signals.hurry)
            if drained is None:
                logger.warning("second stop signal: {} turn(s) interrupted now", runtime.inflight)
            elif not drained:
                logger.warning("grace period over: {} turn(s) interrupted", runtime.inflight)
            failure = runtime.failure
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)
    logger.info("stopped")
    return 1 if failure is not None else 0


async def _open_status_socket(runtime: Runtime) -> None:
    """Serve `orchestrator status` from the start (a channel still connecting shows as such)."""
    try:
        await runtime.enter_async_context(serve_status_socket(runtime))
    except OSError as exc:  # the daemon serves on; only `orchestrator status` cannot reach it
        logger.error("the status socket could not be opened ({}); `orchestrator status` will not answer", exc)


async def _stop_when_the_chat_ends(runtime: Runtime, signals: _Signals) -> None:
    """Stop the daemon (as Ctrl-C would, exit 0) when its person closed the terminal chat
    (Ctrl-D) and nothing else serves; otherwise say what still serves and how to stop it."""
    while True:
        await runtime.channels.ended.wait()
        runtime.channels.ended.clear()
        if signals.stop.is_set():
            return
        closed = runtime.channels.closed_by_user[-1]
        others = runtime.channels.serving() + (["the gateway"] if runtime.config.gateway is not None else [])
        if not others:
            # a warning: shown even where a terminal chat hides INFO lines
            logger.warning("chat {} ended (Ctrl-D) and nothing else serves: stopping", closed)
            signals.stop_now()
            return
        logger.warning(
            "chat {} ended (Ctrl-D); still serving {}: Ctrl-C (or SIGTERM) stops the daemon", closed, ", ".join(others)
        )


async def _stop_on_failure(runtime: Runtime, signals: _Signals) -> None:
    """Stop the daemon (as a SIGTERM would, then exit 1) once the state files failed for good."""
    await runtime.failed.wait()
    if not signals.stop.is_set():
        signals.stop_now()



class _Signals:
    """What the daemon was told: stop (a second stop: hurry, do not wait for turns), reload."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.hurry = asyncio.Event()
        self.reload = asyncio.Event()

    def stop_now(self) -> None:
        (self.hurry if self.stop.is_set() else self.stop).set()


async def _until_stopped(work: Coroutine[Any, Any, _T], stop: asyncio.Event) -> _T | None:
    """Run `work` until it returns (its value) or `stop` is set first (None; `work` is cancelled)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


async def _start_up(runtime: Runtime, gateway: AsyncExitStack, stop: asyncio.Event) -> bool:
    """Open the gateway, start the channels, replay what a crash left, start schedules; log ready.

    False, with nothing called ready, when a stop came meanwhile (its task may run on for a
    moment after `stop` is set, before `_until_stopped` cancels it).
    """
    if runtime.config.gateway is not None:  # aiohttp's server side is imported only then
        from orchestrator.gateway import open_gateway

        await gateway.enter_async_context(open_gateway(runtime))
    unfinished = runtime.store.unfinished()
    held = hold_replayed(runtime, unfinished)  # their session places before any new message's
    await start_channels(runtime)
    for name, error in runtime.channels.failures().items():
        if not isinstance(error, ChannelUnusable):  # a disabled channel said so in its one line
            logger.error("channel {} is down: {}", name, error)
    if unfinished and runtime.config.providers:
        # After a crash there are replies to send and turns to run at once. Import the
        # provider SDK first (off the loop, but awaited): done beside those sends, the
        # import starves the loop of the CPU, a send the platform took is recorded
        # late, and a kill in that window sends it again.
        await in_thread(warm_provider_sdk, _provider_kinds(runtime))
    await replay_unfinished(runtime, unfinished, held=held)
    runtime.store.prune_inbox()
    if runtime.config.schedules:  # else the scheduler is not even imported (reload starts it)
        await _start_schedules(runtime)  # after channels: a run may deliver to one
    # only channels that are receiving: one still connecting was logged as such by the start
    up = [n for n, status in runtime.channels.status().items() if status.ready]
    if stop.is_set():
        return False
    logger.info("ready: channels {}", ", ".join(up) or "none")
    for notice in sandbox_notices(runtime.config):
        logger.log("WARNING" if notice.attention else "INFO", "{}", notice.text)
    # Everything loaded so far lives for the whole run: move it out of the cyclic
    # GC's reach, or each full collection walks it and stalls every channel. No
    # gc.collect() first: measured, it found 9 unreachable objects and took 30 ms;
    # one after it keeps later full collections at their pace (see collector.py).
    freeze_start_up()
    notify(f"READY=1\nSTATUS=serving {len(up)} channel(s)")
    if runtime.config.providers:
        # the provider SDK is imported on the first turn; do it now, off the loop
        runtime.spawn(in_thread(warm_provider_sdk, _provider_kinds(runtime)), name="warm-provider")
    interval = watchdog_interval_s()
    if interval:
        runtime.spawn(_watchdog(interval), name="watchdog")
    return True


async def _serve_until_stopped(runtime: Runtime, config_path: Path, signals: _Signals) -> None:
    """Serve; on SIGHUP reload the config (a reload in progress is cut short by a stop)."""
    while not signals.stop.is_set():
        waiters = [asyncio.ensure_future(signals.stop.wait()), asyncio.ensure_future(signals.reload.wait())]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
        if signals.reload.is_set() and not signals.stop.is_set():
            signals.reload.clear()
            notify("RELOADING=1")
            await _until_stopped(reload_config(runtime, config_path), signals.stop)
            notify("READY=1")


async def reload_config(runtime: Runtime, config_path: Path) -> bool:
    """Re-read the config; swap it in only if valid, restarting channels whose settings changed."""
    try:
        new = load_config(config_path)
    except ConfigError as exc:
        for problem in exc.problems:
            logger.error("reload rejected, keeping the running config: {}", problem)
        return False
    secrets = _channel_secret_problems(new, config_path)
    for problem in secrets:
        logger.error("reload rejected, keeping the running config: {}", problem)
    if secrets:
        return False
    old_channels = runtime.config.channels
    servers_changed = new.mcp.servers != runtime.config.mcp.servers
    if new.gateway != runtime.config.gateway:  # its socket and token are bound at start
        logger.warning("[gateway] changed: restart the daemon to apply it (agents reload now)")
    if new.telemetry != runtime.config.telemetry:  # the tracer provider is built at start
        logger.warning("[telemetry] changed: restart the daemon to apply it (agents reload now)")
    runtime.swap_config(new)  # a running scheduler follows it
    if new.schedules and not _scheduling(runtime):  # the first schedules: started without a scheduler
        await _start_schedules(runtime)
    if servers_changed:  # the pool was built for the old server table
        logger.warning("[mcp.servers] changed: restart the daemon to connect the new servers")
    else:
        await runtime.connect_mcp()
    for name in list(runtime.channels):
        if name not in new.channels or new.channels[name] != old_channels.get(name):
            await stop_channel(runtime, name)
    fresh = [(n, s) for n, s in new.channels.items() if n not in runtime.channels]
    for name in await start_channel_set(runtime, fresh, ready_timeout_s=_RELOAD_READY_S):
        logger.info("channel {} started after reload", name)
    for name, error in runtime.channels.failures().items():
        if name in dict(fresh):
            logger.error("channel {} is down: {}", name, error)
    logger.info("config reloaded: {} agents, {} channels", len(new.agents), len(new.channels))
    return True


async def _start_schedules(runtime: Runtime) -> None:
    from orchestrator.scheduler import start_schedules  # APScheduler only for a config with schedules

    await start_schedules(runtime)


def _scheduling(runtime: Runtime) -> bool:
    from orchestrator.scheduler import ScheduleRunner

    return runtime.component(ScheduleRunner) is not None


def _provider_kinds(runtime: Runtime) -> frozenset[str]:
    """The provider kinds the config uses (only their SDKs are warmed)."""
    return frozenset(provider.kind for provider in runtime.config.providers.values())


async def _watchdog(interval: float) -> None:
    while True:
        notify("WATCHDOG=1")
        await asyncio.sleep(interval)
