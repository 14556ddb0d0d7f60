"""Strict TOML configuration: frozen models, one-line-per-problem errors, secret references.

This package validates each model on its own; `orchestrator.checks.load_config` adds the
cross-reference checks and is the public way to load a config.
"""

from orchestrator.config.loader import AGENTS_DIR_NAME, ConfigDocument, dotted, read_config, validate_config
from orchestrator.config.models import (
    AgentConfig,
    ApprovalConfig,
    Autonomy,
    BudgetConfig,
    Config,
    DaemonConfig,
    HttpFetchConfig,
    McpBundleConfig,
    McpConfig,
    McpServerConfig,
    MemoryConfig,
    PeripheralConfig,
    ProviderConfig,
    SecretRef,
    ShellConfig,
    SkillsConfig,
)
from orchestrator.config.gateway import GatewayConfig, check_gateway
from orchestrator.config.schedules import DeliverTo, ScheduleConfig
from orchestrator.config.secrets import resolve_secret

__all__ = [
    "AGENTS_DIR_NAME",
    "AgentConfig",
    "ApprovalConfig",
    "Autonomy",
    "BudgetConfig",
    "Config",
    "ConfigDocument",
    "DaemonConfig",
    "GatewayConfig",
    "HttpFetchConfig",
    "McpBundleConfig",
    "McpConfig",
    "McpServerConfig",
    "MemoryConfig",
    "PeripheralConfig",
    "ProviderConfig",
    "SecretRef",
    "ScheduleConfig",
    "DeliverTo",
    "ShellConfig",
    "SkillsConfig",
    "check_gateway",
    "dotted",
    "read_config",
    "resolve_secret",
    "validate_config",
]
