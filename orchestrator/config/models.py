"""Frozen pydantic models for the TOML config; unknown keys are errors everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr

from orchestrator.config.channels import Channels, RouteConfig
from orchestrator.config.gateway import GatewayConfig
from orchestrator.config.telemetry import TelemetryConfig
from orchestrator.config.schedules import ScheduleConfig
from orchestrator.config.sops import SopConfig
from orchestrator.config.secrets import SecretRef

__all__ = [
    "AgentConfig",
    "ApprovalConfig",
    "Autonomy",
    "BudgetConfig",
    "Config",
    "ContextConfig",
    "DaemonConfig",
    "FallbackConfig",
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
    "SecretRef",
    "ShellConfig",
    "SkillsConfig",
]

Autonomy = Literal["read_only", "supervised", "full"]
NonEmptyStr = Annotated[str, Field(min_length=1)]
Names = tuple[NonEmptyStr, ...]
# A shell variable name; PATH and HOME stay the daemon's (an agent-relative PATH would run
# what the agent planted in its workspace).
def _env_name(name: str) -> str:
    if name in ("PATH", "HOME"):
        raise ValueError(f"the daemon sets {name} for every command; it cannot be configured")
    return name


EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"), AfterValidator(_env_name)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class DaemonConfig(_Model):
    """`[daemon]`: process-wide settings."""

    state_dir: str = "./state"
    log_level: Literal["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    shutdown_grace_s: float = Field(default=30.0, ge=0, strict=True)
    # how deep `delegate` calls may nest (a top-level turn is depth 0)
    max_delegation_depth: int = Field(default=3, ge=1, le=10, strict=True)
    # chat messages that may wait behind a session's running turn; more are answered "busy"
    max_queued_per_session: int = Field(default=10, ge=1, strict=True)
    # how long a turn waits on its reply's sends (5xx, network, timeouts) before the reply moves to the delivery queue
    reply_deadline_s: float = Field(default=120.0, ge=1, le=3600, strict=True)
    # how long the delivery queue keeps retrying a reply the platform has not accepted before giving it up
    reply_give_up_s: float = Field(default=86_400.0, ge=60, le=30 * 86_400, strict=True)
    # a chat reply longer than this is cut with a note (a 1 MB answer is not 245 messages)
    max_reply_chars: int = Field(default=20_000, ge=1_000, le=1_000_000, strict=True)


class PricesConfig(_Model):
    """`[providers.<name>.prices]`: what a million tokens cost (any one currency); usage becomes cost."""

    input: float = Field(ge=0, strict=True)
    output: float = Field(ge=0, strict=True)
    # absent = the `input` price (a provider without a prompt-cache discount)
    cached_input: float | None = Field(default=None, ge=0, strict=True)
    # absent = the `input` price (nothing is silently free; Anthropic bills a 5-minute cache write at 1.25x input)
    cache_write: float | None = Field(default=None, ge=0, strict=True)


class ProviderConfig(_Model):
    """`[providers.<name>]`: an OpenAI-compatible endpoint, or Anthropic's Messages API."""

    kind: Literal["openai", "anthropic"] = "openai"
    base_url: NonEmptyStr
    api_key: SecretRef | None = None
    base_url_env: NonEmptyStr | None = None
    api_key_env: NonEmptyStr | None = None
    model_env: NonEmptyStr | None = None
    timeout_s: float = Field(default=120.0, gt=0, strict=True)
    max_retries: int = Field(default=2, ge=0, le=10, strict=True)
    # OpenAI kind: ask streamed answers for their usage; false for a server that rejects `stream_options`
    stream_usage: bool = Field(default=True, strict=True)
    # the most output tokens one call asks for (every call asks for less when a token budget leaves less)
    max_output_tokens: int = Field(default=4096, ge=16, le=1_000_000, strict=True)
    # OpenAI kind: the member that carries it; OpenAI's reasoning models take only `max_completion_tokens`
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    prices: PricesConfig | None = None
    # the model its OpenAI-compatible `/audio/transcriptions` runs voice notes through (absent = none)
    transcription_model: NonEmptyStr | None = None


class FallbackConfig(_Model):
    """One entry of `[agents.X] fallback`: a provider and model tried when the ones before it fail."""

    provider: NonEmptyStr
    model: NonEmptyStr


class ApprovalConfig(_Model):
    """`[agents.X.approval]`: which calls need a human."""

    auto_approve: Names = ()
    always_ask: Names = ()
    timeout_s: float = Field(default=120.0, gt=0, strict=True)


class BudgetConfig(_Model):
    """`[agents.X.budget]`: runtime limits; defaults are limits, never grants."""

    max_tool_iterations: int = Field(default=10, ge=1, le=1000, strict=True)
    turn_timeout_s: float = Field(default=300.0, gt=0, strict=True)
    tool_timeout_s: float = Field(default=60.0, gt=0, strict=True)
    max_tool_result_chars: int = Field(default=16_000, ge=100, strict=True)
    max_history_messages: int = Field(default=40, ge=1, strict=True)
    max_actions_per_hour: int = Field(default=120, ge=0, strict=True)
    # model tokens (input + output, every call of the turn) one turn may use
    max_tokens_per_turn: int = Field(default=1_000_000, ge=1, strict=True)
    # model tokens per (agent, sender) over a sliding 24 hours
    max_tokens_per_day: int = Field(default=20_000_000, ge=1, strict=True)


class ContextConfig(_Model):
    """`[agents.X.context]`: how much history is sent, and what happens to what no longer fits."""

    # the estimated tokens of one request: system prompt, tool specs, summary and history
    max_context_tokens: int = Field(default=32_000, ge=1_000, le=10_000_000, strict=True)
    # "window": drop the oldest messages that do not fit; "summarize": fold them into a running summary
    strategy: Literal["window", "summarize"] = "window"
    # the newest messages, never folded into the summary
    keep_recent: int = Field(default=8, ge=0, le=1_000, strict=True)
    # the model (on `summary_provider`, default the agent's own provider) that writes summaries
    summary_model: NonEmptyStr | None = None
    summary_provider: NonEmptyStr | None = None
    # a turn's folding, all its summarizing calls together; past it the turn goes on with the window
    summary_timeout_s: float = Field(default=30.0, gt=0, le=600, strict=True)


class MemoryConfig(_Model):
    """`[agents.X.memory]`: whose memories an agent may write and read."""

    scope: Literal["agent", "none"] = "none"
    read_from: Names = ()


class ShellConfig(_Model):
    """`[agents.X.shell]`: the commands the `shell` tool may run (absent = none)."""

    allowed_commands: Names = ()
    # globs refused as any whole argv element (built-in `shell` and skill shell tools)
    denied_args: Names = ()
    # which sandbox every command runs under: "auto" = the strongest that works here,
    # refused when none does; only a written "none" runs commands unconfined
    sandbox: Literal["auto", "bwrap", "landlock", "none"] = "auto"
    # network inside the sandbox (absent = none)
    network: bool = Field(default=False, strict=True)
    # variables every command gets besides PATH, HOME and LANG (absent = none)
    env: dict[EnvName, str] = Field(default_factory=dict)
    # limits of one command and everything it starts (see docs/security.md#the-shell-sandbox)
    cpu_seconds: int = Field(default=60, ge=1, le=86_400, strict=True)
    memory_mb: int = Field(default=4096, ge=16, le=1_048_576, strict=True)  # address space
    file_size_mb: int = Field(default=256, ge=1, le=1_048_576, strict=True)  # per written file
    tmp_mb: int = Field(default=64, ge=1, le=65_536, strict=True)  # bwrap's private /tmp (host memory)
    max_processes: int = Field(default=256, ge=1, le=65_536, strict=True)  # processes and threads at once
    max_output_kb: int = Field(default=64, ge=1, le=65_536, strict=True)  # captured per stream


class HttpFetchConfig(_Model):
    """`[agents.X.http_fetch]`: where `http_fetch` (and skill http tools) may go."""

    # names or globs; empty (the default) = no host, ["*"] = any public host
    allowed_hosts: Names = ()
    allow_private_addresses: bool = Field(default=False, strict=True)
    max_bytes: int = Field(default=1_000_000, ge=1, strict=True)


MediaKind = Literal["image", "document", "voice", "audio", "video"]


class MediaConfig(_Model):
    """`[agents.X.media]`: which attachments an agent takes (absent = none) and their caps."""

    accept: tuple[MediaKind, ...] = ()
    max_bytes: int = Field(default=10_000_000, ge=1, strict=True)  # per attachment
    max_message_bytes: int = Field(default=25_000_000, ge=1, strict=True)  # all of one message's
    image_detail: Literal["auto", "low", "high"] = "auto"
    # quote a voice note's transcription back to the sender before the answer
    echo_transcript: bool = Field(default=False, strict=True)
    # the child that reads a PDF's text: wall clock, CPU seconds and address space, then killed
    pdf_timeout_s: float = Field(default=30.0, gt=0, le=600, strict=True)
    pdf_cpu_s: int = Field(default=20, ge=1, le=600, strict=True)
    pdf_memory_mb: int = Field(default=512, ge=128, le=16384, strict=True)


class AgentConfig(_Model):
    """`[agents.<name>]` or `agents.d/<name>.toml`: one agent's whole policy."""

    provider: NonEmptyStr
    model: NonEmptyStr
    temperature: float | None = Field(default=None, ge=0, le=2, strict=True)
    # tried in order when the provider above is rate-limited, down or too slow (never on a refused request)
    fallback: tuple[FallbackConfig, ...] = ()
    system_prompt: str = ""
    autonomy: Autonomy = "supervised"
    workspace: NonEmptyStr | None = None
    # commands are refused while the workspace holds more (the daemon's own writes past it too)
    workspace_max_mb: int = Field(default=1024, ge=1, le=16_777_216, strict=True)
    tools: Names = ()
    excluded_tools: Names = ()
    approval: ApprovalConfig = ApprovalConfig()
    budget: BudgetConfig = BudgetConfig()
    context: ContextConfig = ContextConfig()
    memory: MemoryConfig = MemoryConfig()
    shell: ShellConfig = ShellConfig()
    http_fetch: HttpFetchConfig = HttpFetchConfig()
    skills: Names = ()
    mcp_bundles: Names = ()
    peripherals: Names = ()
    delegates: Names = ()
    acp_enable_mcp: bool = Field(default=False, strict=True)
    # the model can look at pictures (images are sent to it as content parts)
    vision: bool = Field(default=False, strict=True)
    media: MediaConfig = MediaConfig()


class McpServerConfig(_Model):
    """`[mcp.servers.<name>]`: one MCP server (stdio process or streamable HTTP)."""

    transport: Literal["stdio", "http"]
    command: NonEmptyStr | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: NonEmptyStr | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    tool_timeout_s: float = Field(default=60.0, gt=0, strict=True)
    # How long a call (or the first turn after start-up) waits for the server while it
    # (re)connects before the call fails as a tool error (or the turn goes on without its tools).
    ready_wait_s: float = Field(default=5.0, ge=0, strict=True)
    isolation: Literal["shared", "per_agent"] = "shared"


class McpBundleConfig(_Model):
    """`[mcp.bundles.<name>]`: servers and, per server, the tools granted."""

    servers: Names = ()
    tools: dict[str, Names] = Field(default_factory=dict)
    mode: Literal["eager", "deferred"] = "eager"
    pinned_resources: dict[str, Names] = Field(default_factory=dict)


class McpConfig(_Model):
    """`[mcp]`: server definitions and the bundles agents reference."""

    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    bundles: dict[str, McpBundleConfig] = Field(default_factory=dict)


class SkillsConfig(_Model):
    """`[skills]`: where skill directories live."""

    dirs: tuple[str, ...] = ()
    allow_scripts: bool = Field(default=False, strict=True)


class PeripheralConfig(_Model):
    """`[peripherals.<name>]`: a serial device speaking one JSON line per request."""

    port: NonEmptyStr
    baud: int = Field(default=115_200, gt=0, strict=True)
    protocol: Literal["jsonl"] = "jsonl"
    commands: Names = ()
    # Commands that only read (allowed under autonomy "read_only"); absent = none.
    read_only_commands: Names = ()
    timeout_s: float = Field(default=5.0, gt=0, strict=True)


class Config(_Model):
    """The whole validated configuration of one generation."""

    daemon: DaemonConfig = DaemonConfig()
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    mcp: McpConfig = McpConfig()
    skills: SkillsConfig = SkillsConfig()
    peripherals: dict[str, PeripheralConfig] = Field(default_factory=dict)
    channels: Channels = Field(default_factory=dict)
    routes: tuple[RouteConfig, ...] = ()
    gateway: GatewayConfig | None = None
    telemetry: TelemetryConfig | None = None
    schedules: tuple[ScheduleConfig, ...] = ()
    sops: dict[str, SopConfig] = Field(default_factory=dict)

    _source: Path | None = PrivateAttr(default=None)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def source(self) -> Path | None:
        """The main config file this generation was loaded from."""
        return self._source

    def origin_of(self, agent: str) -> str:
        """Return the file an agent was defined in (for error messages)."""
        return self._origins.get(agent, str(self._source or "<config>"))

    def state_path(self) -> Path:
        """Return the state directory, relative paths taken from the config file's folder."""
        base = self._source.parent if self._source else Path.cwd()
        return (base / self.daemon.state_dir).expanduser().resolve()

    def with_origins(self, source: Path | None, origins: dict[str, str]) -> Config:
        """Attach where each part came from (set once by the loader)."""
        self._source = source
        self._origins = dict(origins)
        return self

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: Any) -> bool:
        return self is other
