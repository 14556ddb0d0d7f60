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
    tracking: str  # where the guarantee is described (docs/architecture.md or the issue)
    evidence: str  # "tests/parity/test_x.py::test_name"


_F: Final = "#2 Foundation"
_D4: Final = "docs/architecture.md"
_H: Final = "#7 Parity harness"
_I7: Final = "issue #7 item 1"
_C: Final = "#11 Isolation at the edges"
_I11: Final = "issue #11 item 1"
_X: Final = "#16 Context, providers and usage"
_I16: Final = "issue #16 item 1"
_M: Final = "#15 Pictures, files and voice"
_I15: Final = "issue #15 items 2, 4 and 7"
_P: Final = "#24 The daemon never trusts a workspace"
_I24: Final = "issue #24 build item 2"
_B: Final = "#32 Budgets on every path"
_I32: Final = "issue #32 items 1 and 2"
_R: Final = "#28 Bots among people"
_I28: Final = "issue #28 items 5 and 6"
_G: Final = "#28 Bots among people"
_I28G: Final = "issue #28 build item 1"

INDEX: Final[tuple[ParityRow, ...]] = (
    # Issue 15: media as a resolved surface (the matrix row `media`), on every path that takes uploads.
    ParityRow(surface="media", setting="[agents.X.media] as written on every path's builder, minus no_media / "
              "no_chat; send_file on a schedule only with deliver_to", owner=_M, tracking=_I15,
              evidence="tests/parity/test_media_parity.py::"
              "test_every_path_resolves_the_written_media_policy_minus_its_declared_knobs"),
    ParityRow(surface="media", setting="library, gateway JSON and gateway multipart: the same attachments reach "
              "the model as the same content parts", owner=_M, tracking=_I15,
              evidence="tests/parity/test_media_paths_parity.py::"
              "test_the_same_attachments_reach_the_model_alike_on_library_and_gateway"),
    ParityRow(surface="media", setting="library, gateway JSON and gateway multipart: a refused attachment gets "
              "the same line, no turn, nothing kept", owner=_M, tracking=_I15,
              evidence="tests/parity/test_media_paths_parity.py::"
              "test_a_refused_attachment_gets_the_same_line_on_library_and_gateway"),
    # Issue 24: the PDF parser child's limits and sandbox, one value on every path.
    ParityRow(surface="media", setting="[agents.X.media] pdf_timeout_s / pdf_cpu_s / pdf_memory_mb and the "
              "parser's sandbox (the host's strongest) on every path's builder, never narrowed",
              owner=_P, tracking=_I24,
              evidence="tests/parity/test_parser_parity.py::"
              "test_every_path_resolves_the_written_parser_limits_under_the_strongest_sandbox"),
    ParityRow(surface="media", setting="library, gateway JSON and gateway multipart: a PDF past its limits gets "
              "the same line, no turn, nothing kept", owner=_P, tracking=_I24,
              evidence="tests/parity/test_parser_parity.py::"
              "test_a_costly_pdf_gets_the_same_line_on_library_and_gateway"),
    ParityRow(surface="media", setting="channel: a PDF past its limits gets one line; /stop kills its parser; "
              "SIGTERM mid-parse ends the daemon and its parser", owner=_P, tracking=_I24,
              evidence="tests/daemon/test_pdf_limits.py::"
              "test_a_costly_pdf_gets_one_line_stop_ends_its_parse_and_sigterm_ends_the_daemon_mid_parse"),
    ParityRow(surface="media", setting="schedule with deliver_to: send_file offered and posted into that chat",
              owner=_M, tracking=_I15,
              evidence="tests/scheduler/test_schedule_send_file.py::"
              "test_a_schedule_with_deliver_to_sends_a_file_to_that_chat"),
    ParityRow(surface="media", setting="schedule without deliver_to: send_file not offered (no_chat)",
              owner=_M, tracking=_I15,
              evidence="tests/scheduler/test_schedule_send_file.py::"
              "test_a_schedule_without_deliver_to_is_not_offered_send_file"),
    ParityRow(surface="media", setting="L1: the engine shows images only to an execution whose model can see",
              owner=_M, tracking=_I15,
              evidence="tests/parity/test_media_parity.py::test_the_engine_shows_images_only_to_a_model_that_can_see"),
    ParityRow(surface="tools", setting="tools (built-in grant)", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_cli_run_and_listing_resolve_the_same_policy"),
    ParityRow(surface="tools", setting="excluded_tools", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l1_engine.py::test_excluded_tool_never_executes_on_any_turn_path"),
    ParityRow(surface="tools", setting="caller_allowed knob (--allow)", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_cli_allow_only_narrows"),
    ParityRow(surface="tools", setting="provider specs equal the registry", owner=_F, tracking="docs/architecture.md",
              evidence="tests/parity/test_l2_paths.py::test_provider_is_sent_exactly_the_registry"),
    ParityRow(surface="tools", setting="knobs only narrow (property)", owner=_F, tracking=_D4,
              evidence="tests/parity/test_property.py::test_knobs_never_widen_the_grant"),
    ParityRow(surface="tools", setting="model calling an unknown tool (property)", owner=_F, tracking="docs/architecture.md",
              evidence="tests/parity/test_property.py::test_no_tool_outside_the_registry_ever_runs"),
    ParityRow(surface="approval", setting="autonomy / auto_approve / always_ask", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_every_path_resolves_identical_policy_modulo_knobs"),
    ParityRow(surface="approval", setting="interactivity per path", owner=_F, tracking=_D4,
              evidence="tests/parity/test_l2_paths.py::test_interactivity_is_declared_per_path"),
    ParityRow(surface="approval", setting="no operator = deny", owner=_F, tracking="docs/architecture.md",
              evidence="tests/parity/test_l1_engine.py::test_no_operator_denies_on_every_non_interactive_path"),
    ParityRow(surface="budget", setting="max_tool_iterations, timeouts, result cap, history, actions/hour",
              owner=_F, tracking="docs/architecture.md",
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
    ParityRow(surface="memory", setting="memory tools per scope / read_only / excluded_tools: cli run = listing "
              "= channel = provider specs", owner="#5 Memory", tracking="issue #5 item 1",
              evidence="tests/parity/test_memory_parity.py::test_memory_scope_is_identical_on_cli_run_listing_and_channel"),
    ParityRow(surface="memory", setting="memory tools on every seam path; ACP strips them (exclude_memory)",
              owner="#5 Memory", tracking="issue #5 item 1",
              evidence="tests/parity/test_memory_parity.py::"
              "test_every_seam_path_binds_the_same_memory_tools_modulo_exclude_memory"),
    ParityRow(surface="memory", setting="read_from: recall reads self + read_from only; forget only own rows",
              owner="#5 Memory", tracking="issue #5 item 1",
              evidence="tests/parity/test_memory_parity.py::"
              "test_memory_written_on_cli_run_is_read_on_the_channel_only_within_scope"),
    ParityRow(surface="memory", setting="two agents, one store, concurrent writes, zero cross-reads",
              owner="#5 Memory", tracking="issue #5 item 1",
              evidence="tests/memory/test_store.py::test_concurrent_writes_by_two_agents_never_cross_read"),
    ParityRow(surface="memory", setting="knobs only narrow memory tools; no store = no tools (property)",
              owner="#5 Memory", tracking="issue #5 item 5",
              evidence="tests/parity/test_property.py::test_knobs_never_widen_memory_tools"),
    ParityRow(surface="budget", setting="max_actions_per_hour per (agent, sender): engine and channel path",
              owner="#5 Security", tracking="issue #5 item 4",
              evidence="tests/parity/test_action_budget_parity.py::test_channel_senders_each_get_their_own_budget"),
    ParityRow(surface="mcp", setting="mcp scope (servers per mcp_bundles; cli run = listing = provider specs)",
              owner="#3 MCP", tracking="docs/architecture.md, issue #3",
              evidence="tests/parity/test_mcp_parity.py::test_mcp_scope_is_the_same_on_cli_run_and_listing"),
    ParityRow(surface="mcp", setting="per-tool gating (names/globs, readOnlyHint, excluded_tools, connect_mcp)",
              owner="#3 MCP", tracking="docs/architecture.md, issue #3",
              evidence="tests/parity/test_mcp_parity.py::test_mcp_per_tool_gating_is_identical_on_every_path"),
    ParityRow(surface="mcp", setting="deferred tool_search scope (finds and runs only the agent's gated tools)",
              owner="#3 MCP", tracking="issue #3 item 3",
              evidence="tests/parity/test_mcp_parity.py::test_deferred_tool_search_scope_is_identical_on_every_path"),
    ParityRow(surface="peripherals", setting="peripheral tools per agent `peripherals`; listing withholds them "
              "(connect_peripherals=False, declared difference)", owner="#5 Peripherals", tracking="issue #5 item 3",
              evidence="tests/parity/test_l2_paths.py::test_every_path_resolves_identical_policy_modulo_knobs"),
    ParityRow(surface="peripherals", setting="listing never opens the port; cli run opens it on first call; "
              "output wrapped as untrusted", owner="#5 Peripherals", tracking="issue #5 items 3-4",
              evidence="tests/parity/test_peripheral_parity.py::"
              "test_listing_never_opens_the_port_and_cli_run_opens_it_on_first_call"),
    ParityRow(surface="peripherals", setting="channel path registers the same tools and reaches the device",
              owner="#5 Peripherals", tracking="issue #5 item 3",
              evidence="tests/parity/test_peripheral_parity.py::"
              "test_channel_path_registers_the_same_tools_and_calls_the_device"),
    ParityRow(surface="peripherals", setting="excluded_tools / caller_allowed / read_only / other agent: "
              "a withheld command never reaches the device", owner="#5 Peripherals", tracking="issue #5 item 3",
              evidence="tests/parity/test_peripheral_parity.py::test_a_withheld_peripheral_tool_never_reaches_the_device"),
    ParityRow(surface="peripherals", setting="knobs only narrow peripheral tools; resolving opens nothing (property)",
              owner="#5 Peripherals", tracking="issue #5 item 5",
              evidence="tests/parity/test_property.py::test_knobs_never_widen_peripheral_tools"),
    ParityRow(surface="peripherals", setting="no call outside the registry reaches a device (property)",
              owner="#5 Peripherals", tracking="issue #5 item 5",
              evidence="tests/parity/test_property.py::test_no_peripheral_call_outside_the_registry_reaches_a_device"),
    ParityRow(surface="skills", setting="skills (prompt sections + <skill>__<tool>): cli run = listing = channel "
              "= provider", owner="#5 Skills", tracking="issue #5 item 2",
              evidence="tests/parity/test_skills_parity.py::test_skills_are_the_same_on_cli_run_listing_and_channel"),
    ParityRow(surface="skills", setting="skill scope identical on every path (seam)", owner="#5 Skills",
              tracking="issue #5 items 2, 5",
              evidence="tests/parity/test_skills_parity.py::test_skill_scope_is_identical_on_every_path"),
    ParityRow(surface="skills", setting="excluded_tools / caller_allowed / read_only on skill tools",
              owner="#5 Skills", tracking="docs/architecture.md, issue #5 item 2",
              evidence="tests/skills/test_gating.py::test_excluded_tools_subtract_skill_tools"),
    ParityRow(surface="skills", setting="approval, no-operator deny and tool timeout on skill tools",
              owner="#5 Skills", tracking="issue #5 item 2",
              evidence="tests/skills/test_gating.py::test_engine_denies_unapproved_skill_calls_and_times_them_out"),
    ParityRow(surface="skills", setting="argument injection refused (dash, newline, NUL, type, pattern)",
              owner="#5 Skills", tracking="issue #5 item 2",
              evidence="tests/skills/test_tools.py::test_injection_is_refused_before_anything_runs"),
    ParityRow(surface="skills", setting="knobs only narrow skill tools and sections (property)", owner="#5 Skills",
              tracking="issue #5 item 5",
              evidence="tests/parity/test_skills_property.py::test_knobs_never_widen_the_skill_grant"),
    ParityRow(surface="skills", setting="no skill call outside the registry runs (property)", owner="#5 Skills",
              tracking="issue #5 item 5",
              evidence="tests/parity/test_skills_property.py::test_no_skill_tool_outside_the_registry_ever_runs"),
    ParityRow(surface="shell", setting="[agents.X.shell] denied_args (built-in shell and skill shell tools)",
              owner="#5 Security", tracking="issue #5 item 4",
              evidence="tests/skills/test_tools.py::test_denied_args_refuse_the_builtin_shell_and_skill_tools_alike"),
    ParityRow(surface="shell", setting="[agents.X.shell] sandbox / network: one resolved sandbox (kind, network, "
              "limits, workspace) on every path; each path's shell runs under it", owner="#11 Isolation",
              tracking="issue #11 items 2, 10",
              evidence="tests/parity/test_sandbox_parity.py::test_every_path_runs_shell_in_the_same_sandbox"),
    ParityRow(surface="shell", setting="no sandbox works = every command refused (omission is not a grant)",
              owner="#11 Isolation", tracking="issue #11 item 2",
              evidence="tests/tools/test_sandbox.py::test_no_working_sandbox_refuses_every_command_and_runs_nothing"),
    ParityRow(surface="shell", setting="[agents.X.shell] cpu_seconds / memory_mb / file_size_mb / tmp_mb / "
              "max_processes / max_output_kb and [agents.X] workspace_max_mb: the written limits on every path; "
              "each path's shell runs under them", owner="#24 Hardening", tracking="issue #24 build item 4",
              evidence="tests/parity/test_sandbox_parity.py::test_every_path_runs_shell_under_the_written_limits"),
    ParityRow(surface="shell", setting="auto never picks a Landlock with holes (no seccomp, ABI < 6); a written "
              "landlock names them", owner="#24 Hardening", tracking="issue #24 build item 3",
              evidence="tests/seam/test_sandbox.py::test_auto_refuses_a_landlock_with_holes"),
    ParityRow(surface="shell", setting="a workspace over workspace_max_mb refuses every command",
              owner="#24 Hardening", tracking="issue #24 build item 4",
              evidence="tests/tools/test_sandbox_limits.py::"
              "test_a_workspace_over_workspace_max_refuses_the_next_command"),
    ParityRow(surface="tools", setting="ACP path (`orchestrator acp`) = cli run modulo connect_mcp/exclude_memory; "
              "provider sent exactly the listing", owner="#6 ACP", tracking="issue #6 item 5",
              evidence="tests/parity/test_acp_parity.py::test_acp_turn_resolves_cli_run_policy_modulo_its_knobs"),
    ParityRow(surface="tools", setting="ACP fast boot: no memory or MCP tools sent; acp_enable_mcp grants the "
              "bundles", owner="#6 ACP", tracking="issue #6 item 5",
              evidence="tests/acp/test_acp.py::test_acp_enable_mcp_connects_the_agents_bundles"),
    ParityRow(surface="approval", setting="ACP approvals via session/request_permission (allow, reject, audited)",
              owner="#6 ACP", tracking="issue #6 item 5",
              evidence="tests/acp/test_acp.py::test_approval_through_request_permission_allow_and_reject"),
    ParityRow(surface="engine", setting="ACP session/cancel ends the turn; pending tool calls are closed",
              owner="#6 ACP", tracking="issue #6 item 5",
              evidence="tests/acp/test_acp.py::test_cancel_while_approval_is_pending_closes_the_tool_call"),
    ParityRow(surface="tools", setting="schedule path (fired by APScheduler) = cli run modulo caller_allowed "
              "(`tools`) and non-interactivity; provider sent exactly the registry", owner="#6 Schedules",
              tracking="issue #6 item 6",
              evidence="tests/parity/test_schedule_parity.py::test_schedule_path_resolves_cli_run_policy_modulo_narrowing"),
    ParityRow(surface="approval", setting="schedule runs have no operator: approval-needing calls denied",
              owner="#6 Schedules", tracking="issue #6 item 6",
              evidence="tests/scheduler/test_schedules.py::test_fired_run_is_narrowed_non_interactive_and_delivered"),
    ParityRow(surface="tools", setting="gateway chat (POST /api/agents/{a}/messages) and library (Agent.from_config) "
              "= cli run; provider sent the same tools and binding", owner="#6 Gateway/Library",
              tracking="issue #6 items 1-2",
              evidence="tests/parity/test_gateway_library_parity.py::"
              "test_gateway_chat_and_library_resolve_the_cli_run_policy"),
    ParityRow(surface="mcp", setting="gateway chat and library get the agent's MCP bundles (deferred included)",
              owner="#6 Gateway/Library", tracking="issue #6 items 1-2",
              evidence="tests/parity/test_gateway_library_parity.py::"
              "test_library_opens_the_agents_mcp_bundles_like_cli_run"),
    ParityRow(surface="tools", setting="gateway listing (GET /api/agents/{a}/tools) = cli run minus peripherals "
              "(connect_peripherals=False); deferred MCP tools listed", owner="#6 Gateway", tracking="issue #6 item 1",
              evidence="tests/gateway/test_gateway.py::"
              "test_listing_is_the_cli_run_registry_minus_peripherals_with_deferred_mcp_marked"),
    ParityRow(surface="approval", setting="gateway chat is non-interactive: approval-needing calls denied, audited",
              owner="#6 Gateway", tracking="issue #6 item 1",
              evidence="tests/gateway/test_gateway.py::test_chat_turn_is_non_interactive_and_denies_what_needs_approval"),
    ParityRow(surface="approval", setting="library: default deny; a supplied approver makes it interactive",
              owner="#6 Library", tracking="issue #6 item 2",
              evidence="tests/library/test_library.py::test_supplied_approver_makes_the_turn_interactive_and_decides"),
    ParityRow(surface="tools", setting="delegate path = the target's own cli-run policy modulo parent and the "
              "caller's remaining budgets (ceiling); provider sent exactly the target's registry",
              owner="#6 Delegation", tracking="issue #6 item 3",
              evidence="tests/parity/test_delegate_sop_parity.py::"
              "test_delegate_path_resolves_the_targets_cli_run_policy_modulo_ceiling"),
    ParityRow(surface="memory", setting="delegate from `orchestrator agent`: the target's memory/MCP are opened "
              "for it (same policy as its cli run)", owner="#6 Delegation", tracking="issue #6 item 3",
              evidence="tests/parity/test_delegate_sop_parity.py::"
              "test_delegate_from_orchestrator_agent_opens_what_the_target_needs"),
    ParityRow(surface="tools", setting="delegated agent never uses a tool only its caller has; parent "
              "conversation never reaches its provider", owner="#6 Delegation", tracking="issue #6 items 3, 7",
              evidence="tests/seam/test_delegate.py::test_delegate_runs_the_target_under_its_own_narrower_policy"),
    ParityRow(surface="tools", setting="delegate only towards `delegates`; only by exact grant; filters apply",
              owner="#6 Delegation", tracking="issue #6 item 3",
              evidence="tests/seam/test_delegate.py::test_delegate_refuses_a_target_outside_delegates"),
    ParityRow(surface="budget", setting="max_delegation_depth; each level capped by its caller's iterations",
              owner="#6 Delegation", tracking="issue #6 item 3",
              evidence="tests/seam/test_delegate.py::test_delegation_depth_is_limited"),
    ParityRow(surface="approval", setting="delegated agent asks through the caller surface's approver and mode",
              owner="#6 Delegation", tracking="issue #6 item 3",
              evidence="tests/seam/test_delegate.py::test_delegated_agent_asks_through_the_callers_channel_approver"),
    ParityRow(surface="tools", setting="SOP step path = the step agent's own cli-run policy modulo parent and "
              "step `tools` (caller_allowed); provider sent exactly the step registry", owner="#6 SOPs",
              tracking="issue #6 item 4",
              evidence="tests/parity/test_delegate_sop_parity.py::"
              "test_sop_step_path_resolves_the_step_agents_cli_run_policy_modulo_step_tools"),
    ParityRow(surface="tools", setting="SOP step naming a narrower agent cannot use the SOP agent's tools; "
              "child transcript gets only the previous step's output", owner="#6 SOPs", tracking="issue #6 items 4, 7",
              evidence="tests/sop/test_sop.py::test_cli_sop_step_runs_as_a_second_agent_with_its_narrower_policy"),
    ParityRow(surface="approval", setting="SOP requires_confirmation: non-interactive surface stops the SOP",
              owner="#6 SOPs", tracking="issue #6 item 4",
              evidence="tests/sop/test_sop.py::test_confirmation_on_a_non_interactive_surface_stops_the_sop"),
    ParityRow(surface="approval", setting="SOP from a chat: confirmation asked in the chat (channel mode); "
              "chat history never reaches a step", owner="#6 SOPs", tracking="issue #6 item 4",
              evidence="tests/sop/test_sop.py::test_sop_from_a_chat_asks_in_the_chat_and_never_sees_the_chat_history"),
    ParityRow(surface="tools", setting="SOP step that cannot be re-assembled fails the SOP closed",
              owner="#6 SOPs", tracking="issue #6 item 4",
              evidence="tests/sop/test_sop.py::test_a_step_that_cannot_be_reassembled_fails_the_sop_closed"),
    # Issue 7: every budget, approval timeout and model setting as its own row; the seal; the live matrix.
    *(
        ParityRow(surface="budget", setting=f"{budget} on every path (delegate: capped by the caller's ceiling)",
                  owner=_H, tracking=_I7,
                  evidence="tests/parity/test_l2_paths.py::test_every_path_resolves_identical_policy_modulo_knobs")
        for budget in ("max_tool_iterations", "turn_timeout_s", "tool_timeout_s", "max_tool_result_chars",
                       "max_history_messages", "max_actions_per_hour")
    ),
    ParityRow(surface="mcp", setting="two agents never share an MCP tool neither bundle grants; caller_allowed "
              "only narrows (property, random bundles/paths)", owner=_H, tracking="issue #7 item 2",
              evidence="tests/parity/test_mcp_property.py::test_two_agents_never_share_an_mcp_tool_neither_bundle_grants"),
    ParityRow(surface="approval", setting="approval timeout_s on every path", owner=_H, tracking=_I7,
              evidence="tests/parity/test_l2_paths.py::test_every_path_resolves_identical_policy_modulo_knobs"),
    ParityRow(surface="model", setting="provider binding (provider, base_url, model) sent to the provider",
              owner=_H, tracking=_I7,
              evidence="tests/parity/test_gateway_library_parity.py::"
              "test_gateway_chat_and_library_resolve_the_cli_run_policy"),
    ParityRow(surface="model", setting="temperature sent to the provider on every turn path", owner=_H,
              tracking=_I7,
              evidence="tests/parity/test_delegate_sop_parity.py::"
              "test_sop_step_path_resolves_the_step_agents_cli_run_policy_modulo_step_tools"),
    ParityRow(surface="matrix", setting="every setting x every path built through the production path builders: "
              "enforced or narrowed by a declared knob, never a gap", owner=_H, tracking="docs/architecture.md, issue #7 item 4",
              evidence="tests/parity/test_matrix.py::test_matrix_names_every_declared_knob_on_the_parity_config"),
    ParityRow(surface="matrix", setting="an undeclared difference is a gap; a knob only narrows", owner=_H,
              tracking="issue #7 item 4",
              evidence="tests/parity/test_matrix.py::test_classifier_separates_declared_narrowing_from_gaps"),
    ParityRow(surface="seal", setting="sealed objects refuse construction without the seam's token", owner=_H,
              tracking="docs/architecture.md, issue #7 item 3",
              evidence="tests/seam/test_architecture.py::test_sealed_objects_refuse_construction_without_the_seam_token"),
    ParityRow(surface="seal", setting="sealed values refuse subclasses, copies, pickles and __new__; the engine runs "
              "only an execution a sealed constructor finished (not one forged around it)", owner=_H,
              tracking="issue #24 item 6",
              evidence="tests/seam/test_seal_runtime.py::test_the_engine_refuses_an_execution_made_around_the_constructor"),
    ParityRow(surface="seal", setting="the source scanner catches every planted bypass of the seal", owner=_H,
              tracking="issue #24 item 6",
              evidence="tests/seam/test_architecture.py::test_the_rules_catch_planted_violations"),
    ParityRow(surface="seal", setting="no module outside the seam reads agent policy from config", owner=_H,
              tracking="issue #7 item 3",
              evidence="tests/seam/test_architecture.py::test_agent_policy_is_read_only_in_the_seam"),
    # Issue 11 item 3: one way to open a turn's services, so a delegate target gets the same on every path.
    ParityRow(surface="services", setting="delegate target's tools (its memory + MCP bundle) identical on channel, "
              "cli_run, gateway_chat, library, sop_step, acp, schedule and delegate", owner="#11 Services",
              tracking="issue #11 item 3",
              evidence="tests/parity/test_delegate_services_parity.py::"
              "test_a_delegate_target_gets_its_own_memory_and_mcp_tools_on_every_delegating_path"),
    ParityRow(surface="services", setting="policy matrix opens each column's services as its entry point does",
              owner="#11 Services", tracking="issue #11 item 3",
              evidence="tests/parity/test_delegate_services_parity.py::"
              "test_policy_matrix_opens_each_column_as_its_entry_point_does"),
    ParityRow(surface="services", setting="open_services: reach = agents + transitive delegates + SOP steps; "
              "nothing opened for nobody; a failed opening closes what it opened", owner="#11 Services",
              tracking="issue #11 item 3",
              evidence="tests/seam/test_services.py::"
              "test_a_broken_server_for_the_named_agent_fails_the_opening_and_closes_what_it_opened"),
    ParityRow(surface="seal", setting="entry points construct no audit log, memory store, MCP pool or peripheral "
              "pool themselves (only open_services)", owner="#11 Services", tracking="issue #11 item 3",
              evidence="tests/seam/test_services.py::test_entry_points_open_services_only_through_open_services"),
    ParityRow(surface="seal", setting="production enters resolve() only through the path builders", owner=_H,
              tracking="issue #7 items 3-4",
              evidence="tests/seam/test_architecture.py::test_production_enters_resolve_only_through_the_path_builders"),
    # Issue 28 item 1: group gates are route policy, resolved in the seam (`resolve_group_gate`).
    ParityRow(surface="group gate", setting="reply_in_groups omitted = \"mention\"; Discord's deprecated "
              "mention_only applies only where the route does not set it", owner=_G, tracking=_I28G,
              evidence="tests/seam/test_group_gate.py::"
              "test_omission_is_mention_and_the_legacy_discord_key_still_applies_unless_the_route_says"),
    ParityRow(surface="group gate", setting="reply_in_groups, wake_words, mention_only read only in the seam",
              owner=_G, tracking=_I28G,
              evidence="tests/seam/test_group_gate.py::test_group_gate_keys_are_read_only_in_the_seam"),
    ParityRow(surface="group gate", setting="the same gate on every platform: chatter and mentions of others make "
              "no model call, a mention one (stripped), a reply to the bot one", owner=_G, tracking=_I28G,
              evidence="tests/daemon/test_group_gates.py::"
              "test_people_talking_among_themselves_make_no_model_call_and_a_mention_makes_one"),
    ParityRow(surface="group gate", setting="/cmd@thisbot taken, /cmd@otherbot never (also under \"all\")",
              owner=_G, tracking=_I28G,
              evidence="tests/daemon/test_group_gates.py::test_a_command_to_the_bot_is_taken_and_one_to_another_bot_is_not"),
    # Issue 11 item 1: chat commands are authorised by the route that admitted the message.
    ParityRow(surface="chat commands", setting="SOP reach on the channel path: `/sop` starts exactly the admitting "
              "route's `sops`; policy matrix `sop_reach` row", owner=_C, tracking=_I11,
              evidence="tests/parity/test_sop_reach_parity.py::test_sop_reach_on_the_channel_path_is_the_routes_sops"),
    ParityRow(surface="chat commands", setting="sop_reach: a channel reaching an SOP its route does not list is a gap",
              owner=_C, tracking=_I11,
              evidence="tests/parity/test_sop_reach_parity.py::"
              "test_a_channel_reaching_an_sop_its_route_does_not_list_is_a_gap"),
    ParityRow(surface="chat commands", setting="an unlisted `/sop` from an open route never runs a step (no model "
              "request, no file)", owner=_C, tracking=_I11,
              evidence="tests/daemon/test_chat_commands.py::test_a_sop_the_route_does_not_list_never_runs_a_step"),
    ParityRow(surface="chat commands", setting="route grants (`sops`, `approvers`) read only in the seam; omission "
              "grants no SOP", owner=_C, tracking=_I11,
              evidence="tests/seam/test_chat_commands.py::test_route_grants_are_read_only_in_the_seam"),
    ParityRow(surface="approval", setting="another agent's SOP step: route approvers only, the requester refused",
              owner=_C, tracking=_I11,
              evidence="tests/daemon/test_chat_commands.py::test_another_agents_step_is_approved_by_the_route_approvers_only"),
    ParityRow(surface="approval", setting="another agent's SOP step, route without approvers: nobody asked, denied "
              "(tool calls and confirmations)", owner=_C, tracking=_I11,
              evidence="tests/daemon/test_chat_commands.py::"
              "test_without_route_approvers_another_agents_step_is_denied_and_nobody_is_asked"),
    # Issue 28 items 5 and 6: whom a route admits (its senders, paired strangers) and how fast, resolved in the seam.
    ParityRow(surface="admission", setting="[[routes]] strangers (absent = ignore: no code, a stored pairing opens "
              "nothing) and rate_limit (absent = none) resolved in the seam", owner=_R, tracking=_I28,
              evidence="tests/seam/test_admission.py::test_omission_pairs_nobody_and_limits_nothing"),
    ParityRow(surface="admission", setting="a pairing admits through its own route only; codes only in DMs",
              owner=_R, tracking=_I28,
              evidence="tests/seam/test_admission.py::"
              "test_a_pairing_admits_through_its_own_route_only_and_only_in_dms_are_codes_given"),
    ParityRow(surface="admission", setting="route `strangers`, `rate_limit` read only in the seam",
              owner=_R, tracking=_I28,
              evidence="tests/seam/test_admission.py::test_admission_fields_are_read_only_in_the_seam"),
    ParityRow(surface="admission", setting="L2 channel path: an approver's `/pairing approve` admits the stranger "
              "from the next message; the stranger's own is refused", owner=_R, tracking=_I28,
              evidence="tests/daemon/test_pairing.py::"
              "test_an_approver_approves_in_chat_the_stranger_cannot_and_is_answered_next"),
    ParityRow(surface="admission", setting="L2 channel path: `orchestrator pairing` approve/deny/revoke, a revoke "
              "holds on the next message", owner=_R, tracking=_I28,
              evidence="tests/daemon/test_pairing.py::test_the_cli_lists_approves_denies_and_revokes_while_the_daemon_runs"),
    ParityRow(surface="admission", setting="L2 channel path: rate_limit 5/60 -> 5 turns, one slow-down line, the "
              "rest kept `limited`; /stop and /new never limited", owner=_R, tracking=_I28,
              evidence="tests/daemon/test_rate_limit.py::"
              "test_fifteen_messages_in_a_row_get_five_turns_and_one_slow_down_line_and_stop_still_works"),
    ParityRow(surface="network", setting="[http_fetch] allowed_hosts (absent/[] = no host), private guard, "
              "max_bytes: identical on every path (matrix row `network`)", owner="#11 Isolation at the edges",
              tracking="issue #11 item 4",
              evidence="tests/parity/test_network_parity.py::test_every_path_refuses_a_host_outside_the_allowed_hosts"),
    ParityRow(surface="approval", setting="approval prompt text: every argument, schema order, visible cut; "
              "same on terminal, Slack, Discord, Telegram", owner="#11 Isolation at the edges",
              tracking="issue #11 item 6",
              evidence="tests/daemon/test_dispatch.py::"
              "test_terminal_approval_prompt_shows_the_path_despite_a_long_first_argument"),
    ParityRow(surface="approval", setting="approval prompt text: printable set (fillers, joiners, selectors, "
              "non-ASCII spaces, surrogates escaped), blank runs counted, mixed scripts flagged",
              owner="#32 Budgets, redaction and approval text", tracking="issue #32 item 4",
              evidence="tests/daemon/test_approval_trust.py::"
              "test_look_alikes_are_escaped_padding_counted_and_mixed_scripts_flagged"),
    ParityRow(surface="chat commands", setting="`/show ID` and Show all: the whole call, to the approval's "
              "answerers only (`ChatCommands.may_show`), in pieces the platform carries",
              owner="#32 Budgets, redaction and approval text", tracking="issue #32 item 4",
              evidence="tests/daemon/test_approval_trust.py::"
              "test_show_sends_the_whole_call_in_pieces_and_only_to_who_may_answer"),
    ParityRow(surface="approval", setting="a prompt the chat cannot be shown: denied, audited and told as not "
              "shown, never as no answer", owner="#32 Budgets, redaction and approval text",
              tracking="issue #32 item 4",
              evidence="tests/daemon/test_approval_trust.py::"
              "test_a_prompt_the_chat_refuses_is_denied_as_not_shown_never_as_no_answer"),
    ParityRow(surface="budget", setting="max_tokens_per_turn: every turn path stops before a call that would pass it "
              "(matrix row `budget.max_tokens_per_turn`)", owner="#16 Usage", tracking="issue #16 item 4",
              evidence="tests/parity/test_token_budget_parity.py::"
              "test_every_turn_path_stops_before_a_call_that_would_pass_the_turn_budget"),
    ParityRow(surface="budget", setting="max_tokens_per_day per (agent, sender): engine and channel path",
              owner="#16 Usage", tracking="issue #16 item 4",
              evidence="tests/parity/test_token_budget_parity.py::test_the_channel_path_keeps_each_senders_day_and_records_the_sender"),
    ParityRow(surface="budget", setting="delegate: the child's per-turn tokens are capped by the caller's remainder "
              "and count for the caller", owner="#16 Usage", tracking="issue #16 item 4",
              evidence="tests/parity/test_token_budget_parity.py::"
              "test_a_delegated_turn_runs_on_what_is_left_of_its_callers_tokens_and_counts_for_it"),
    # Issue 32 items 1-2: one budget ledger per (agent, sender); output bounded by what is left.
    ParityRow(surface="budget", setting="max_tokens_per_day: a delegated turn's tokens spend the caller's day too, "
              "on every path that can delegate (channel, cli, gateway, library, SOP step, ACP, schedule, delegate)",
              owner=_B, tracking=_I32,
              evidence="tests/parity/test_delegation_budget_parity.py::"
              "test_a_delegated_turns_tokens_spend_the_callers_day_on_every_delegating_path"),
    ParityRow(surface="budget", setting="L1: nested delegation (a->b->c) charges a's, b's and c's days, read back "
              "after a restart", owner=_B, tracking=_I32,
              evidence="tests/engine/test_token_bounds.py::"
              "test_nested_delegation_charges_every_caller_up_the_chain_and_survives_a_restart"),
    ParityRow(surface="budget", setting="L1: a spent caller's day stops the delegate before its model call",
              owner=_B, tracking=_I32,
              evidence="tests/engine/test_token_bounds.py::test_a_spent_callers_day_stops_the_delegate_before_its_model_call"),
    ParityRow(surface="budget", setting="L1: a delegate's answer is bounded by its caller's day", owner=_B,
              tracking=_I32,
              evidence="tests/engine/test_token_bounds.py::test_a_delegates_answer_is_bounded_by_its_callers_day"),
    ParityRow(surface="budget", setting="every turn path asks for no more output (max_tokens) than the turn leaves",
              owner=_B, tracking=_I32,
              evidence="tests/parity/test_token_budget_parity.py::"
              "test_every_turn_path_asks_for_no_more_output_than_the_turn_leaves"),
    ParityRow(surface="budget", setting="L1: OpenAI-compatible, streamed and not: one long reply passes the turn "
              "budget only by the input estimate's error", owner=_B, tracking=_I32,
              evidence="tests/engine/test_token_bounds.py::"
              "test_openai_one_long_reply_passes_the_turn_budget_only_by_the_input_estimates_error"),
    ParityRow(surface="budget", setting="L1: Anthropic, streamed and not: one long reply passes the turn budget "
              "only by the input estimate's error", owner=_B, tracking=_I32,
              evidence="tests/engine/test_token_bounds.py::"
              "test_anthropic_one_long_reply_passes_the_turn_budget_only_by_the_input_estimates_error"),
    ParityRow(surface="budget", setting="L1: a call asks for no more than what is left of the day", owner=_B,
              tracking=_I32,
              evidence="tests/engine/test_token_bounds.py::test_a_reply_asks_for_no_more_than_what_is_left_of_the_day"),
    ParityRow(surface="budget", setting="L1: a day met twice up a delegation chain (a->b->a) is charged once",
              owner=_B, tracking=_I32,
              evidence="tests/engine/test_token_bounds.py::test_a_day_met_twice_up_the_chain_is_charged_once"),
    ParityRow(surface="budget", setting="L1: a summary call asks for its share of the window and no more than the "
              "day leaves", owner=_B, tracking=_I32,
              evidence="tests/engine/test_summary_usage.py::"
              "test_a_summary_call_asks_for_its_share_of_the_window_and_no_more_than_the_day_leaves"),
    ParityRow(surface="budget", setting="orchestrator run + Telegram: the 40,138-token reply cut at what the turn "
              "leaves; a cheap front agent's day spent by its costly delegate", owner=_B, tracking=_I32,
              evidence="tests/faults/test_budget_attack.py::"
              "test_a_long_reply_and_a_costly_delegate_are_held_by_the_budgets_through_orchestrator_run"),
    ParityRow(surface="budget", setting="L1: two calls in flight for one (agent, sender) are not each allowed "
              "what is left of the same day", owner=_B, tracking=_I32,
              evidence="tests/engine/test_token_bounds.py::"
              "test_two_calls_in_flight_for_one_sender_are_not_each_allowed_the_same_day"),
    ParityRow(surface="provider_binding", setting="[providers.X] max_output_tokens in every link of the binding on "
              "every path (matrix row `provider_binding`, describe())", owner=_B, tracking=_I32,
              evidence="tests/parity/test_token_budget_parity.py::"
              "test_max_output_tokens_is_resolved_into_the_binding_on_every_path"),
    ParityRow(surface="usage", setting="one usage row per model call on every turn path, naming the path",
              owner="#16 Usage", tracking="issue #16 item 4",
              evidence="tests/parity/test_token_budget_parity.py::test_every_turn_path_records_one_row_per_call_with_its_path"),
    # Issue 16 item 1: context as a resolved surface.
    ParityRow(surface="context", setting="[agents.X.context] (max_context_tokens, strategy, keep_recent, summary "
              "model, summary timeout) identical on every path; delegate and SOP step: the target's own "
              "(matrix row `context`)", owner=_X, tracking=_I16,
              evidence="tests/parity/test_context_parity.py::"
              "test_every_path_resolves_the_agents_own_context_never_the_callers"),
    ParityRow(surface="context", setting="a path resolved with another agent's context is a gap", owner=_X,
              tracking=_I16,
              evidence="tests/parity/test_context_parity.py::test_a_path_resolved_with_another_agents_context_is_a_gap"),
    ParityRow(surface="context", setting="L1: no turn path sends more than max_context_tokens by the estimate",
              owner=_X, tracking=_I16,
              evidence="tests/parity/test_context_parity.py::test_l1_no_turn_path_sends_more_than_max_context_tokens"),
    ParityRow(surface="context", setting="a delegated child turn gets its own context: none of the parent's "
              "history or summary", owner=_X, tracking=_I16,
              evidence="tests/parity/test_context_parity.py::"
              "test_a_delegated_child_gets_its_own_context_not_the_parents_history_or_summary"),
    ParityRow(surface="context", setting="summarize: a 500-message session stays within max_context_tokens and "
              "still sees its beginning; a failing summarizer keeps the window", owner=_X, tracking=_I16,
              evidence="tests/engine/test_context.py::"
              "test_a_500_message_session_stays_within_the_budget_and_still_sees_its_beginning"),
)
