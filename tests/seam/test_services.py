"""open_services(): what an entry point opens is what its turns (and their delegates) reach, no more.

Attacks: a config that makes an entry point open less for a delegate target than another
entry point would (the parity defect), a broken server that must not leave a live server
process or an open store behind, and a service opened for nobody.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.config import Config
from orchestrator.mcp import McpServerUnavailable
from orchestrator.peripherals import PeripheralFault
from orchestrator.seam import ConstructionPath, build_delegate, build_listing, open_services, service_reach
from tests.conftest import provider_toml
from tests.mcp.kit import bundle, stdio_kit, wait_for

ROOT = Path(__file__).resolve().parents[2]
BROKEN = '[mcp.servers.broken]\ntransport = "stdio"\ncommand = "/nonexistent/mcp-server"\n'
# Where production code may construct what open_services opens (and the owning packages).
OPENERS = {
    "AuditLog": ("orchestrator/seam/opening.py", "orchestrator/store/"),
    "MemoryStore": ("orchestrator/seam/opening.py", "orchestrator/memory/"),
    "McpPool": ("orchestrator/seam/opening.py", "orchestrator/mcp/"),
    "PeripheralPool": ("orchestrator/seam/opening.py", "orchestrator/peripherals/"),
}


def chain_toml(spawns: Path, *, helper_bundle: str = "echoing", extra: str = "") -> str:
    """Return `lead` (delegate only) -> `helper` (memory + an MCP bundle), and `solo` (nothing)."""
    return (
        provider_toml("http://127.0.0.1:9/v1")
        + stdio_kit("kit", spawn_log=spawns)
        + bundle("echoing", servers={"kit": ["echo"]})
        + extra
        + '\n[agents.lead]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\ntools = ["delegate"]\n'
        'delegates = ["helper"]\n'
        f'\n[agents.helper]\nprovider = "fake"\nmodel = "m"\ntools = ["list_dir"]\nmcp_bundles = ["{helper_bundle}"]\n'
        '[agents.helper.memory]\nscope = "agent"\n'
        '\n[agents.solo]\nprovider = "fake"\nmodel = "m"\ntools = ["list_dir"]\n'
        '\n[sops.handoff]\nagent = "solo"\n[[sops.handoff.steps]]\nprompt = "p"\n'
        '[[sops.handoff.steps]]\nprompt = "q"\nagent = "lead"\n'
    )


def test_reach_follows_delegation_and_sop_steps(load: Callable[..., Config], tmp_path: Path) -> None:
    config = load(chain_toml(tmp_path / "kit.spawns"))
    reach = service_reach(config, ["lead"], ConstructionPath.LIBRARY)
    assert [(t.agent, t.path, t.required) for t in reach] == [
        ("lead", ConstructionPath.LIBRARY, True), ("helper", ConstructionPath.DELEGATE, False),
    ]
    steps = service_reach(config, (), ConstructionPath.SOP_STEP, sops=["handoff"])
    assert [(t.agent, t.path) for t in steps] == [
        ("solo", ConstructionPath.SOP_STEP), ("lead", ConstructionPath.SOP_STEP), ("helper", ConstructionPath.DELEGATE),
    ]
    # names nobody configured reach nothing (resolve() and the SOP runner report them)
    assert service_reach(config, (), ConstructionPath.SOP_STEP, sops=["nope"]) == ()
    assert [t.agent for t in service_reach(config, ["solo"], ConstructionPath.CHANNEL)] == ["solo"]


async def test_an_agent_its_target_delegates_back_to_is_reached_on_the_delegate_path(
    load: Callable[..., Config],
) -> None:
    # on ACP `a` has no memory of its own, but the turn `b` hands back to it runs on the delegate path
    config = load(
        provider_toml("http://127.0.0.1:9/v1")
        + '[agents.a]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\ntools = ["delegate"]\ndelegates = ["b"]\n'
        '[agents.a.memory]\nscope = "agent"\n'
        '[agents.b]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\ntools = ["delegate"]\ndelegates = ["a"]\n'
    )
    reach = service_reach(config, ["a"], ConstructionPath.ACP)
    assert [(t.agent, t.path) for t in reach] == [
        ("a", ConstructionPath.ACP), ("b", ConstructionPath.DELEGATE), ("a", ConstructionPath.DELEGATE),
    ]
    async with open_services(config, ["a"], ConstructionPath.ACP) as services:
        assert services.memory is not None  # for a's delegated turn, not its own ACP one
        assert "memory_recall" in build_delegate(config, "a", services, parent="b").tools


async def test_a_delegating_entry_point_opens_what_its_target_needs(
    load: Callable[..., Config], tmp_path: Path
) -> None:
    config = load(chain_toml(tmp_path / "kit.spawns"))
    async with open_services(config, ["lead"], ConstructionPath.LIBRARY) as services:
        assert services.memory is not None and services.mcp is not None
        helper = build_delegate(config, "helper", services, parent="lead")
        assert helper.tools.names == ("kit__echo", "list_dir", "memory_forget", "memory_recall", "memory_store")


async def test_an_entry_point_opens_nothing_nobody_it_reaches_uses(
    load: Callable[..., Config], tmp_path: Path
) -> None:
    config = load(chain_toml(tmp_path / "kit.spawns"))
    async with open_services(config, ["solo"], ConstructionPath.CLI_RUN) as services:
        assert services.memory is None and services.mcp is None  # no store, no pool: no tools
    assert not (config.state_path() / "memory.sqlite3").exists()
    assert not (tmp_path / "kit.spawns").exists()  # no server process was ever started


async def test_a_broken_server_for_the_named_agent_fails_the_opening_and_closes_what_it_opened(
    load: Callable[..., Config], tmp_path: Path
) -> None:
    # helper's bundle needs the working kit AND a broken server: the kit is started first
    config = load(chain_toml(
        tmp_path / "kit.spawns", helper_bundle="both", extra=BROKEN + bundle("both", servers={"kit": ["echo"], "broken": ["x"]}),
    ))
    with pytest.raises(McpServerUnavailable) as caught:
        async with open_services(config, ["helper"], ConstructionPath.CLI_RUN):
            pytest.fail("opened despite a server the agent needs being down")
    assert [server for server, _ in caught.value.failures] == ["broken"]
    (pid,) = (int(line) for line in (tmp_path / "kit.spawns").read_text().split())
    await wait_for(lambda: not _alive(pid))  # the kit it had started is stopped again


async def test_a_broken_server_of_a_delegate_target_never_stops_the_caller(
    load: Callable[..., Config], tmp_path: Path
) -> None:
    config = load(chain_toml(
        tmp_path / "kit.spawns", helper_bundle="both", extra=BROKEN + bundle("both", servers={"kit": ["echo"], "broken": ["x"]}),
    ))
    async with open_services(config, ["lead"], ConstructionPath.CLI_RUN) as services:
        helper = build_delegate(config, "helper", services, parent="lead")
        assert "kit__echo" in helper.tools and not any(n.startswith("broken__") for n in helper.tools.names)


async def test_a_listing_never_enters_the_peripheral_pool(load: Callable[..., Config], tmp_path: Path) -> None:
    config = load(
        provider_toml("http://127.0.0.1:9/v1")
        + '[peripherals.arm]\nport = "/dev/orchestrator-services-arm"\ncommands = ["status"]\n'
        '\n[agents.ops]\nprovider = "fake"\nmodel = "m"\nautonomy = "full"\nperipherals = ["arm"]\n'
    )
    async with open_services(config, ["ops"], ConstructionPath.CLI_RUN, connect_peripherals=False) as services:
        assert services.peripherals is not None
        with pytest.raises(PeripheralFault, match="not connected on this path"):
            await services.peripherals.call("arm", config.peripherals["arm"], "status", {})
        assert build_listing(config, "ops", services).tools.names == ()  # and the listing path withholds them


def test_entry_points_open_services_only_through_open_services() -> None:
    """Nobody outside the seam's opener (and each service's own package) constructs a service."""
    bad = []
    for path in sorted((ROOT / "orchestrator").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in OPENERS and not rel.startswith(OPENERS[name]):
                    bad.append(f"{rel}:{node.lineno}: constructs {name} (use open_services)")
    assert bad == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
