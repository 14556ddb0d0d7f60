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
    ContextConfig,
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
    PricesConfig,
    ProviderConfig,
    SecretRef,
    ShellConfig,
    SkillsConfig,
)
from orchestrator.config.channels import (
    API_ENVS,
    ChannelConfig,
    DiscordChannelConfig,
    RateLimitConfig,
    RouteConfig,
    SlackChannelConfig,
    TelegramChannelConfig,
    TerminalChannelConfig,
    webhook_secret_problem,
)
from orchestrator.config.gateway import (
    GatewayConfig,
    check_gateway,
    gateway_token_problems,
    is_loopback,
    token_problem,
)
from orchestrator.config.schedules import DeliverTo, ScheduleConfig
from orchestrator.config.telemetry import TelemetryConfig
from orchestrator.config.secrets import resolve_secret, secret_file

__all__ = [
    "AGENTS_DIR_NAME",
    "API_ENVS",
    "AgentConfig",
    "ApprovalConfig",
    "Autonomy",
    "BudgetConfig",
    "ContextConfig",
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
    "PricesConfig",
    "ProviderConfig",
    "RateLimitConfig",
    "RouteConfig",
    "SecretRef",
    "ScheduleConfig",
    "DeliverTo",
    "ShellConfig",
    "SkillsConfig",
    "SlackChannelConfig",
    "TelegramChannelConfig",
    "TelemetryConfig",
    "TerminalChannelConfig",
    "check_gateway",
    "dotted",
    "gateway_token_problems",
    "is_loopback",
    "read_config",
    "resolve_secret",
    "token_problem",
    "secret_file",
    "validate_config",
    "webhook_secret_problem",
]
