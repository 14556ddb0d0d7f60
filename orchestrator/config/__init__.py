"""Strict TOML configuration: frozen models, one-line-per-problem errors, secret references."""

from orchestrator.config.loader import AGENTS_DIR_NAME, dotted, load_config, parse_config
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
from orchestrator.config.gateway import GatewayConfig
from orchestrator.config.references import find_skill_dirs
from orchestrator.config.schedules import DeliverTo, ScheduleConfig
from orchestrator.config.secrets import resolve_secret

__all__ = [
    "AGENTS_DIR_NAME",
    "AgentConfig",
    "ApprovalConfig",
    "Autonomy",
    "BudgetConfig",
    "Config",
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
    "dotted",
    "find_skill_dirs",
    "load_config",
    "parse_config",
    "resolve_secret",
]
