"""The parity INDEX: one row per (surface, setting), each backed by an evidence test.

The index encodes no per-path verdicts (those would go stale silently); the claims live in
the evidence tests, and `test_index.py` checks only the bookkeeping: every field present and
every evidence test existing. Add a row whenever a surface or setting starts being resolved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["INDEX", "ParityRow"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParityRow:
    """One (surface, setting) pair, who owns it, and the test that proves it."""

    surface: str
    setting: str
    owner: str  # the issue that owns the surface, e.g. "#2 Foundation"
    tracking: str  # where the guarantee is described (DESIGN.md section or issue)
    evidence: str  # "tests/parity/test_x.py::test_name"


_F: Final = "#2 Foundation"
_D4: Final = "DESIGN.md §4-5"

INDEX: Final[tuple[ParityRow, ...]] = (
    ParityRow(surface="tools", setting="tools (built-in grant)", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_cli_run_and_listing_resolve_the_same_policy"),
    ParityRow(surface="tools", setting="excluded_tools", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l1_engine.py::test_excluded_tool_never_executes_on_any_turn_path"),
    ParityRow(surface="tools", setting="caller_allowed knob (--allow)", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_cli_allow_only_narrows"),
    ParityRow(surface="tools", setting="provider specs equal the registry", owner=_F, tracking="DESIGN.md §7",
              evidence="tests/parity/test_l2_paths.py::test_provider_is_sent_exactly_the_registry"),
    ParityRow(surface="tools", setting="knobs only narrow (property)", owner=_F, tracking=_D4,
              evidence="tests/parity/test_property.py::test_knobs_never_widen_the_grant"),
    ParityRow(surface="tools", setting="model calling an unknown tool (property)", owner=_F, tracking="DESIGN.md §6",
              evidence="tests/parity/test_property.py::test_no_tool_outside_the_registry_ever_runs"),
    ParityRow(surface="approval", setting="autonomy / auto_approve / always_ask", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_every_path_resolves_identical_policy_modulo_knobs"),
    ParityRow(surface="approval", setting="interactivity per path", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_interactivity_is_declared_per_path"),
    ParityRow(surface="approval", setting="no operator = deny", owner=_F, tracking="DESIGN.md §5",
              evidence="tests/parity/test_l1_engine.py::test_no_operator_denies_on_every_non_interactive_path"),
    ParityRow(surface="budget", setting="max_tool_iterations, timeouts, result cap, history, actions/hour",
              owner=_F, tracking="DESIGN.md §6",
              evidence="tests/parity/test_l2_paths.py::test_every_path_resolves_identical_policy_modulo_knobs"),
    ParityRow(surface="model", setting="provider binding and temperature", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_cli_run_and_listing_resolve_the_same_policy"),
    ParityRow(surface="prompt", setting="system prompt sections", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_every_path_resolves_identical_policy_modulo_knobs"),
    ParityRow(surface="tools", setting="channel path (process_message) = cli run", owner="#4 Channels",
              tracking=_D4, evidence="tests/parity/test_l2_paths.py::test_channel_path_resolves_the_same_policy"),
    ParityRow(surface="approval", setting="channel prompt: requester/approvers only, timeout = deny",
              owner="#4 Channels", tracking="issue #4 item 5",
              evidence="tests/daemon/test_dispatch.py::test_in_channel_approval_approve_deny_outsider_and_timeout"),
    ParityRow(surface="memory", setting="memory scope (exclude_memory knob)", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_every_path_resolves_identical_policy_modulo_knobs"),
    ParityRow(surface="mcp", setting="mcp scope (servers per mcp_bundles; cli run = listing = provider specs)",
              owner="#3 MCP", tracking="DESIGN.md §4-5, issue #3",
              evidence="tests/parity/test_mcp_parity.py::test_mcp_scope_is_the_same_on_cli_run_and_listing"),
    ParityRow(surface="mcp", setting="per-tool gating (names/globs, readOnlyHint, excluded_tools, connect_mcp)",
              owner="#3 MCP", tracking="DESIGN.md §5, issue #3",
              evidence="tests/parity/test_mcp_parity.py::test_mcp_per_tool_gating_is_identical_on_every_path"),
    ParityRow(surface="mcp", setting="deferred tool_search scope (finds and runs only the agent's gated tools)",
              owner="#3 MCP", tracking="issue #3 item 3",
              evidence="tests/parity/test_mcp_parity.py::test_deferred_tool_search_scope_is_identical_on_every_path"),
)
