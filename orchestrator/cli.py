"""The `orchestrator` command line; imports stay lazy so `--help` is fast."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.config import Config
    from orchestrator.errors import ConfigProblem
    from orchestrator.policy import ApprovalDecision, ApprovalRequest

__all__ = ["main"]

_PATH_CHOICES = (
    "channel", "cli_run", "gateway_chat", "listing", "library", "delegate", "sop_step", "acp", "schedule",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    # `--config` and `-v` may come before the command too; the one after it wins
    args.config = args.config or args.global_config or os.environ.get("ORCHESTRATOR_CONFIG", "config.toml")
    args.verbose = args.verbose or args.global_verbose
    if args.command == "run":  # before anything heavy is imported: see `_hold_hangups`
        _hold_hangups()
    from orchestrator.errors import OrchestratorError

    _configure_logging(args.verbose)
    try:
        code: int = args.handler(args)
        return code
    except OrchestratorError as exc:
        _report(exc)
        return 1
    except BaseExceptionGroup as group:  # raised through a TaskGroup: report ours as above
        ours, rest = group.split(OrchestratorError)
        if ours is None or rest is not None:
            raise
        for leaf in _leaves(ours):
            _report(leaf)
        return 1
    except KeyboardInterrupt:
        # A stop asked for (Ctrl-C, SIGTERM) is how `run` ends, before it serves as after: 0,
        # as systemd expects of a clean stop. Any other command was cut short: 130.
        return 0 if args.command == "run" else 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orchestrator", description="Chat-channel agent daemon with one policy seam."
    )
    parser.add_argument("--version", action=_Version, help="print the package version and exit")
    config_help = "config file (default: $ORCHESTRATOR_CONFIG, else ./config.toml)"
    parser.add_argument("--config", dest="global_config", metavar="CONFIG", help=config_help)
    parser.add_argument(
        "-v", "--verbose", dest="global_verbose", action="store_true", help="log debug details to stderr"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--config", default=None, help=config_help)
        p.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
        return p

    run = command("run", "run the daemon: channels, routing, sessions (SIGHUP reloads, SIGTERM drains)")
    run.set_defaults(handler=_cmd_run)

    status = command("status", "ask the running daemon for its status document; exit 3 when none runs")
    status.add_argument("--json", action="store_true", help="print the document as JSON (docs/status.md)")
    status.set_defaults(handler=_cmd_status)

    route = command("route", "explain which route and agent a message would get, and its chat commands and SOPs")
    route.add_argument("channel", help="channel name")
    route.add_argument("--chat", required=True, help="chat id")
    route.add_argument("--sender", required=True, help="sender id")
    route.add_argument("--json", action="store_true", help="print JSON")
    route.set_defaults(handler=_cmd_route)

    pairing = command(
        "pairing", "list, approve or deny strangers' pairing codes, or revoke a paired sender (daemon running or not)"
    )
    pairing_actions = pairing.add_subparsers(dest="action", metavar="ACTION", required=True)
    pairing_list = pairing_actions.add_parser("list", help="pending codes and paired senders")
    pairing_list.add_argument("--json", action="store_true", help="print JSON")
    for verb in ("approve", "deny"):
        pairing_actions.add_parser(verb, help=f"{verb} a pending code").add_argument("code", help="the pairing code")
    revoke = pairing_actions.add_parser("revoke", help="unpair a sender (from every route, or --route)")
    revoke.add_argument("channel", help="channel name")
    revoke.add_argument("sender", help="sender id")
    revoke.add_argument("--route", help="only this route id (as `pairing list` shows it)")
    pairing.set_defaults(handler=_cmd_pairing)

    check = command("check", "validate the config; one line per problem, exit 1 if any")
    check.add_argument(
        "--connect",
        action="store_true",
        help="the doctor: also resolve every secret here, connect every MCP server, provider and channel "
        "once, and check the names only they can match; `ok` is printed last, only if all passed",
    )
    check.set_defaults(handler=_cmd_check)

    init = command(
        "init",
        "write a first config.toml by asking (model server, then Telegram, Slack, Discord), checking each "
        "answer against its endpoint; secrets go to 0600 files; ends with the doctor",
    )
    init.add_argument("--non-interactive", action="store_true", help="ask nothing: take every answer from flags")
    init.add_argument("--force", action="store_true", help="replace an existing config file without asking")
    init.add_argument(
        "--provider-url", help="OpenAI-compatible base URL (default $ORCHESTRATOR_BASE_URL, else http://127.0.0.1:11434/v1)"
    )
    init.add_argument("--api-key-env", metavar="NAME", help="the provider key is in this environment variable")
    init.add_argument("--api-key-file", metavar="PATH", help="the provider key is in this file (copied to secrets/)")
    init.add_argument("--model", help="the model (default: the first the server lists)")
    for platform, what in (("telegram", "bot token"), ("discord", "bot token")):
        init.add_argument(f"--{platform}-token-file", metavar="PATH", help=f"add {platform}: the {what} file")
        init.add_argument(f"--{platform}-sender", metavar="ID", help=f"the {platform} user id allowed to talk to it")
    init.add_argument(
        "--telegram-delete-webhook", action="store_true",
        help="if the bot has a webhook set (getUpdates then answers 409), delete it to read your first message",
    )
    init.add_argument("--slack-bot-token-file", metavar="PATH", help="add slack: the xoxb- bot token file")
    init.add_argument("--slack-app-token-file", metavar="PATH", help="the xapp- app-level token file")
    init.add_argument("--slack-sender", metavar="ID", help="the slack member id allowed to talk to it")
    init.add_argument(
        "--wait-s", type=float, default=120.0,
        help="how long to wait for your first Telegram message, which names your user id (default 120)",
    )
    init.set_defaults(handler=_cmd_init)

    agent = command("agent", "run one turn of an agent (the cli-run path) and print the reply")
    agent.add_argument("name", help="agent name")
    agent.add_argument("-m", "--message", required=True, help="the user message")
    agent.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="TOOL[,TOOL]",
        help="narrow this run to these tools (names or globs); never adds a tool",
    )
    agent.set_defaults(handler=_cmd_agent)

    tools = command("tools", "list the tools an agent's registry holds on a construction path")
    tools.add_argument("name", help="agent name")
    tools.add_argument("--path", choices=_PATH_CHOICES, default="listing", help="construction path")
    tools.add_argument("--json", action="store_true", help="print JSON")
    tools.set_defaults(handler=_cmd_tools)

    policy = command(
        "policy",
        "show an agent's resolved execution (tools, approvals, budgets, ...); "
        "`policy matrix` prints the (setting x path) parity grid",
    )
    policy.add_argument("name", help="agent name, or `matrix` for the parity grid of every agent")
    policy.add_argument("--path", choices=_PATH_CHOICES, default="cli_run", help="construction path")
    policy.add_argument("--agent", help="with `matrix`: only this agent")
    policy.add_argument("--json", action="store_true", help="print JSON")
    policy.set_defaults(handler=_cmd_policy)

    sop = command("sop", "run a standard operating procedure ([sops.NAME]) step by step; print the result")
    sop.add_argument("name", help="SOP name")
    sop.add_argument("-m", "--message", default="", help="extra context for the first step")
    sop.set_defaults(handler=_cmd_sop)

    schedules = command("schedules", "list every [[schedules]] entry with its next run time")
    schedules.add_argument("--json", action="store_true", help="print JSON")
    schedules.set_defaults(handler=_cmd_schedules)

    usage = command("usage", "sum the model tokens and cost recorded in state_dir (read-only; the daemon may run)")
    usage.add_argument("--agent", help="only this agent's calls")
    usage.add_argument("--sender", help="only calls for this sender (e.g. telegram:42, cli:alice)")
    usage.add_argument("--since", default="7d", help="how far back: 30m, 12h, 7d, 2w or all (default 7d)")
    usage.add_argument("--by", default="agent", choices=("agent", "sender", "model"), help="group by (default agent)")
    usage.add_argument("--json", action="store_true", help="print JSON")
    usage.set_defaults(handler=_cmd_usage)

    service = command(
        "service",
        "`service install`: the systemd install of docs/operations.md (code, credentials, config, unit), "
        "ending with the doctor; refuses an empty or invalid config before writing anything",
    )
    service.add_argument("action", choices=("install",), help="what to do (install)")
    service.add_argument("--dry-run", action="store_true", help="print each step's commands; write nothing")
    service.add_argument("--root", default="/", metavar="DIR", help="install under DIR instead of / (tests, images)")
    service.set_defaults(handler=_cmd_service)

    acp = command("acp", "serve one agent over the Agent Client Protocol on stdio (for editors)")
    acp.add_argument("--agent", required=True, help="agent name")
    acp.set_defaults(handler=_cmd_acp)
    return parser


class _Version(argparse.Action):
    """Print the installed package's version; importlib.metadata is imported only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from importlib.metadata import version

        print(f"orchestrator {version('orchestrator')}")
        parser.exit()


def _configure_logging(verbose: bool) -> None:
    from orchestrator.logs import configure_logging

    configure_logging(level="DEBUG" if verbose else "ERROR", fmt="cli")


def _report(exc: BaseException) -> None:
    from orchestrator.redaction import redact

    for line in redact(str(exc)).splitlines():
        print(f"error: {line}" if not _is_config_line(exc) else line, file=sys.stderr)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def _is_config_line(exc: BaseException) -> bool:
    from orchestrator.errors import ConfigError

    return isinstance(exc, ConfigError)


def _load(args: argparse.Namespace) -> Config:
    from orchestrator.checks import load_config

    return load_config(args.config)


_hangups: list[int] = []


def _hold_hangups() -> None:
    """Keep a SIGHUP that comes before the daemon's own handler (its default action would kill it);
    a SIGTERM then stops the start cleanly.

    systemd does not restart a daemon killed by SIGHUP, and `systemctl reload` right after a
    start sends one while the config is still loading: it is remembered, and the daemon
    reloads once it serves (the config it loaded may predate the edit the reload was for).
    """
    import signal

    signal.signal(signal.SIGHUP, lambda signum, frame: _hangups.append(signum))
    # A SIGTERM before the daemon's own handler stops the start as Ctrl-C does (exit 0, above),
    # instead of killing the process with the signal.
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def _cmd_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from orchestrator.daemon import run_daemon

    return run_daemon(Path(args.config), verbose=args.verbose, hangup_seen=lambda: bool(_hangups))


def _cmd_status(args: argparse.Namespace) -> int:
    import json

    from orchestrator.status_client import DaemonNotRunning, ask_status, status_lines  # not the daemon: a fast start

    try:
        document = ask_status(_load(args).state_path())
    except DaemonNotRunning as exc:
        print(f"orchestrator status: {exc}", file=sys.stderr)
        return 3
    print(json.dumps(document, indent=2) if args.json else "\n".join(status_lines(document)))
    return 0


def _cmd_route(args: argparse.Namespace) -> int:
    import json

    from orchestrator.daemon import explain_route, match_route, paired_routes
    from orchestrator.seam import resolve_admission, resolve_chat_commands, resolve_group_gate

    config = _load(args)
    paired = paired_routes(config, channel=args.channel, sender=args.sender)  # the stored approvals
    lines = explain_route(config, channel=args.channel, chat=args.chat, sender=args.sender, paired=paired)
    match = match_route(config, channel=args.channel, chat=args.chat, sender=args.sender, paired=paired)
    if not args.json:
        for line in lines:
            print(line)
    else:
        from orchestrator.daemon import shadowed_routes

        shadowed = {str(later): list(earlier) for later, earlier in shadowed_routes(config).items()}
        shown: dict[str, object] = {"route": None, "explain": lines, "shadowed": shadowed}
        if match is not None:
            shown |= {
                "route": match.index, "session": match.route.session,
                **resolve_chat_commands(config, match.route).describe(args.sender),
                **resolve_admission(match.route).describe(), "paired": sorted(paired),
                "groups": resolve_group_gate(config, match.route).describe(),
            }
        print(json.dumps(shown, indent=2))
    return 0 if match is not None else 1


def _cmd_pairing(args: argparse.Namespace) -> int:
    from orchestrator.daemon import run_pairing_admin

    return run_pairing_admin(
        _load(args), args.action, code=getattr(args, "code", None), channel=getattr(args, "channel", None),
        sender=getattr(args, "sender", None), route=getattr(args, "route", None), as_json=getattr(args, "json", False),
        out=sys.stdout, err=sys.stderr,
    )


def _cmd_check(args: argparse.Namespace) -> int:
    config = _load(args)
    ok = (
        f"{args.config}: ok ({len(config.agents)} agents, {len(config.providers)} providers, "
        f"{len(config.channels)} channels, {len(config.routes)} routes)"
    )
    from orchestrator.checks import tracked_secret_warnings
    from orchestrator.seam import group_gate_deprecations

    for warning in tracked_secret_warnings(config, shown=args.config):  # a warning: the exit code stays
        print(f"warning: {warning}", file=sys.stderr)
    for line in group_gate_deprecations(config):
        print(f"{args.config}: deprecated: {line}", file=sys.stderr)
    problems, notes = _local_problems(config, shown=args.config)
    from orchestrator.seam import sandbox_notices

    refused = {p.path for p in problems}
    # an agent whose written sandbox cannot run has a problem line saying so, with the fix
    notes.extend(n.text for n in sandbox_notices(config) if f"agents.{n.agent}.shell.sandbox" not in refused)
    if not args.connect:
        from orchestrator.checks import telemetry_problems

        # `run` refuses to start on these: `check` must not call the same file ok
        problems.extend(telemetry_problems(config, shown=args.config))
        for problem in problems:
            print(problem, file=sys.stderr)
        if not problems:
            print(ok)
    for note in notes:
        print(note)
    if args.connect:
        import asyncio

        from orchestrator.doctor import run_doctor

        return asyncio.run(
            run_doctor(config, shown=args.config, out=sys.stdout, err=sys.stderr, ok_line=ok, local=problems)
        )
    return 1 if problems else 0


def _local_problems(config: Config, *, shown: str) -> tuple[list[ConfigProblem], list[str]]:
    """Return what `check` finds here without the network (problems, notes): every config that cannot work."""
    from orchestrator.checks import empty_config_problems, permission_problems, port_problems, shape_problems
    from orchestrator.daemon import shadow_problems
    from orchestrator.seam import sandbox_problems

    ports, notes = port_problems(config, shown=shown)
    problems = [
        *empty_config_problems(config, shown=shown), *shape_problems(config, shown=shown),
        *shadow_problems(config, shown=shown), *sandbox_problems(config), *ports,
        *permission_problems(config, shown=shown),
    ]
    return problems, notes


def _cmd_service(args: argparse.Namespace) -> int:
    from pathlib import Path

    from orchestrator.service import ServiceLayout, plan_install, run_steps, source_checkout

    layout = ServiceLayout(root=Path(args.root).resolve())
    steps = plan_install(_load(args), layout=layout, checkout=source_checkout())
    run_steps(steps, dry_run=args.dry_run, out=sys.stdout)
    return 0


def _cmd_init(args: argparse.Namespace) -> int:
    from orchestrator.init import InitOptions, run_init

    return run_init(InitOptions.from_arguments(args))


def _cmd_agent(args: argparse.Namespace) -> int:
    import asyncio

    from orchestrator.engine import StopReason
    from orchestrator.seam import ConstructionPath, build_cli_run, open_services
    from orchestrator.sessions import MemoryTranscripts, Sessions

    config = _load(args)
    allowed = frozenset(t.strip() for item in args.allow for t in item.split(",") if t.strip())
    interactive = sys.stdin.isatty() and sys.stderr.isatty()

    async def run() -> int:
        # What the agent and every agent it can delegate to need; ports open on first call.
        async with open_services(config, [args.name], ConstructionPath.CLI_RUN) as services:
            if args.allow:
                held = build_cli_run(config, args.name, services, interactive=interactive).tools.names
                _check_allow(args.name, allowed, held)
            execution = build_cli_run(
                config, args.name, services,
                caller_allowed=allowed if args.allow else None, interactive=interactive,
            )
            # the one turn runner, as every path (its transcript's session is "cli")
            turn = await Sessions(transcripts=MemoryTranscripts(prefix="")).run_turn(
                "cli", agent=args.name, execution=execution, text=args.message,
                approver=_tty_approver if interactive else None, actor=_cli_user(),
            )
            result = turn.completed()
        if result.stop is StopReason.PROVIDER_ERROR:
            print(f"error: {result.error}", file=sys.stderr)
            return 1
        if result.failed_over:
            print(f"note: answered by the fallback {result.provider}/{result.model}", file=sys.stderr)
        print(result.text)
        return 0 if result.stop is StopReason.COMPLETED else 1

    return asyncio.run(run())


def _check_allow(agent: str, patterns: frozenset[str], held: Sequence[str]) -> None:
    """Raise `AllowMatchesNothing` for the first `--allow` pattern that names no tool held."""
    from orchestrator.errors import AllowMatchesNothing
    from orchestrator.policy import matches_any
    from orchestrator.text import suggest

    for pattern in sorted(patterns):
        if not any(matches_any(name, (pattern,)) for name in held):
            raise AllowMatchesNothing(agent, pattern, suggest(pattern, held))


def _cmd_sop(args: argparse.Namespace) -> int:
    import asyncio

    from orchestrator.policy import Interactivity
    from orchestrator.sop import SopStatus, run_sop_standalone

    config = _load(args)
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    result = asyncio.run(
        run_sop_standalone(
            config, args.name, context=args.message,
            approver=_tty_approver if interactive else None,
            interactivity=Interactivity.INTERACTIVE if interactive else Interactivity.NON_INTERACTIVE,
            actor=_cli_user(),
        )
    )
    if result.status is not SopStatus.COMPLETED:
        print(f"error: {result.message}", file=sys.stderr)
        return 1
    print(result.output)
    return 0


async def _tty_approver(request: ApprovalRequest) -> ApprovalDecision:
    import getpass

    from orchestrator.policy import ApprovalDecision, Verdict
    from orchestrator.threads import in_thread

    print(f"approve {request.tool}?\n{request.preview}\n[y/N] ", end="", file=sys.stderr, flush=True)
    answer = (await in_thread(sys.stdin.readline)).strip().lower()
    user = f"cli:{getpass.getuser()}"
    if answer in ("y", "yes"):
        return ApprovalDecision(verdict=Verdict.APPROVED, decided_by=user, reason="approved at the terminal")
    return ApprovalDecision(verdict=Verdict.DENIED, decided_by=user, reason="refused at the terminal")


def _execution(args: argparse.Namespace) -> Any:
    import asyncio

    from orchestrator.seam import ConstructionPath, build_on_path, open_services

    config = _load(args)
    path = ConstructionPath(args.path)

    async def listing() -> Any:
        # Opened as a turn would (memory, MCP listings) and closed at once: no turn runs, and
        # the peripheral pool is never entered, so no port can open.
        async with open_services(config, [args.name], path, connect_peripherals=False) as services:
            return build_on_path(config, args.name, path, services)

    return asyncio.run(listing())


def _cli_user() -> str | None:
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name (e.g. an unnamed container uid)
        return None


def _cmd_tools(args: argparse.Namespace) -> int:
    import json

    execution = _execution(args)
    rows = execution.tool_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"{args.name} has no tools on path {args.path}")
    else:
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            ro = "read-only" if r["read_only"] else "writes"
            deferred = "  (deferred: via tool_search)" if r["deferred"] else ""
            described = (r.get("description") or "").strip().splitlines()
            about = f"  {described[0]}" if described else ""  # the first line; --json has all of it
            print(f"{r['name']:<{width}}  {r['source']:<10} {ro:<9}  approval: {r['approval']}{deferred}{about}")
    return 0


def _cmd_acp(args: argparse.Namespace) -> int:
    import asyncio

    config = _load(args)  # a config error is reported on stderr before any protocol traffic
    from orchestrator.acp import serve_acp

    return asyncio.run(serve_acp(config, args.agent))


def _cmd_schedules(args: argparse.Namespace) -> int:
    import json

    from orchestrator.scheduler import schedule_rows

    rows = [row.describe() for row in schedule_rows(_load(args))]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no schedules")
    for row in rows:
        runs = f"sop {row['sop']}" if row["sop"] else f"agent {row['agent']}"
        line = f"{row['name']}  {runs}  {row['trigger']}  next {row['next_run'] or 'never'}"
        if row["last_run"]:
            line += f"  last {row['last_run']} ({row['last_status']})"
        if row["deliver_to"]:
            line += f"  -> {row['deliver_to']}"
        print(line)
    return 0


def _cmd_usage(args: argparse.Namespace) -> int:
    import json
    import time

    from orchestrator.store import UsageReport, parse_grouping, parse_since, read_usage

    config = _load(args)
    since, by = parse_since(args.since, now=time.time()), parse_grouping(args.by)
    rows = read_usage(config.state_path() / "usage.sqlite3", by=by, since=since, agent=args.agent, sender=args.sender)
    report = UsageReport(by=by, since=since, agent=args.agent, sender=args.sender, rows=tuple(rows))
    if args.json:
        print(json.dumps(report.describe(), indent=2))
    else:
        print("\n".join(report.lines()))
    return 0


def _cmd_policy(args: argparse.Namespace) -> int:
    import json

    if args.name == "matrix":  # a reserved agent name (config check), so never ambiguous
        return _cmd_policy_matrix(args)
    if args.agent is not None:
        print("error: --agent is only for `orchestrator policy matrix`", file=sys.stderr)
        return 2
    from orchestrator.seam import route_admissions

    described = _execution(args).describe()
    if routes := route_admissions(_load(args), args.name):  # routes that pair strangers or limit the rate
        described["routes"] = routes
    if args.json:
        print(json.dumps(described, indent=2))
        return 0
    for key, value in described.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"  {k}: {json.dumps(v)}")
        else:
            print(f"{key}: {json.dumps(value)}")
    return 0


def _cmd_policy_matrix(args: argparse.Namespace) -> int:
    import asyncio
    import json
    import tempfile
    from pathlib import Path

    from orchestrator.seam import agent_matrix

    config = _load(args)
    agents = [args.agent] if args.agent else sorted(config.agents)

    async def grids_of() -> dict[str, dict[str, dict[str, str]]]:
        # Each column's services are opened as its entry point opens them, isolated: state in
        # a throwaway directory, no MCP server started, no port opened.
        with tempfile.TemporaryDirectory(prefix="orchestrator-matrix-") as tmp:
            return {agent: await agent_matrix(config, agent, state_dir=Path(tmp)) for agent in agents}

    grids = asyncio.run(grids_of())
    gaps = [
        f"{agent}: {setting} on {path}"
        for agent, grid in grids.items()
        for setting, row in grid.items()
        for path, verdict in row.items()
        if verdict == "gap"
    ]
    if args.json:
        print(json.dumps({"agents": grids, "gaps": gaps}, indent=2))
    else:
        for agent, grid in grids.items():
            print(f"agent {agent}")
            columns = list(next(iter(grid.values())))
            width = max(len(s) for s in grid)
            widths = [max(len(c), *(len(row[c]) for row in grid.values())) for c in columns]
            print("  " + " " * width + "  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
            for setting, row in grid.items():
                cells = "  ".join(row[c].ljust(w) for c, w in zip(columns, widths))
                print(f"  {setting.ljust(width)}  {cells}".rstrip())
            print()
        print(f"{len(gaps)} gap(s)" + "".join(f"\n  gap: {g}" for g in gaps))
    return 1 if gaps else 0


if __name__ == "__main__":
    raise SystemExit(main())
