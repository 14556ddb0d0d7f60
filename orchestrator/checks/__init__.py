"""Whole-config checks: every cross-reference between config sections and the domain packages.

`config` validates each model on its own; this package, above config and the packages the
references name (tools, memory, skills, peripherals, MCP), checks that the names point at
something, and `load_config` composes both into the one public way to load a config.
"""

from orchestrator.checks.connected import ModelUse, empty_config_problems, models_in_use, route_problems, tool_name_problems
from orchestrator.checks.loading import load_config, parse_config
from orchestrator.checks.permissions import permission_problems
from orchestrator.checks.ports import port_problems
from orchestrator.checks.references import RESERVED_AGENT_NAMES, check_references
from orchestrator.checks.shapes import sender_problem, shape_problems, token_shape_problem
from orchestrator.checks.secret_files import secret_references, tracked_secret_warnings
from orchestrator.checks.telemetry import TELEMETRY_INSTALL, missing_telemetry_package, telemetry_problems

__all__ = [
    "RESERVED_AGENT_NAMES",
    "TELEMETRY_INSTALL",
    "ModelUse",
    "check_references",
    "empty_config_problems",
    "load_config",
    "missing_telemetry_package",
    "models_in_use",
    "parse_config",
    "permission_problems",
    "port_problems",
    "route_problems",
    "secret_references",
    "sender_problem",
    "shape_problems",
    "telemetry_problems",
    "token_shape_problem",
    "tool_name_problems",
    "tracked_secret_warnings",
]
