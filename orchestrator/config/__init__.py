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
    MediaConfig,
    MediaKind,
    MemoryConfig,
    PeripheralConfig,
    ProviderConfig,
    SecretRef,
    ShellConfig,
    SkillsConfig,
)
from orchestrator.config.channels import (
    ChannelConfig,
    DiscordChannelConfig,
    RouteConfig,
    SlackChannelConfig,
    TelegramChannelConfig,
    TerminalChannelConfig,
)
from orchestrator.config.gateway import (
    GatewayConfig,
    check_gateway,
    gateway_token_problems,
    is_loopback,
    token_problem,
)
from orchestrator.config.schedules import DeliverTo, ScheduleConfig
from orchestrator.config.secrets import resolve_secret

__all__ = [
    "AGENTS_DIR_NAME",
    "AgentConfig",
    "ApprovalConfig",
    "Autonomy",
    "BudgetConfig",
    "ChannelConfig",
    "Config",
    "ConfigDocument",
    "DaemonConfig",
    "DiscordChannelConfig",
    "GatewayConfig",
    "HttpFetchConfig",
    "McpBundleConfig",
    "McpConfig",
    "McpServerConfig",
    "MediaConfig",
    "MediaKind",
    "MemoryConfig",
    "PeripheralConfig",
    "ProviderConfig",
    "RouteConfig",
    "SecretRef",
    "ScheduleConfig",
    "DeliverTo",
    "ShellConfig",
    "SkillsConfig",
    "SlackChannelConfig",
    "TelegramChannelConfig",
    "TerminalChannelConfig",
    "check_gateway",
    "dotted",
    "gateway_token_problems",
    "is_loopback",
    "read_config",
    "resolve_secret",
    "token_problem",
    "validate_config",
]
