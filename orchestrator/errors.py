"""One root error for the project; each leaf keeps its structured fields as attributes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "AllowMatchesNothing",
    "ConfigError",
    "ConfigProblem",
    "EmptySecret",
    "OrchestratorError",
    "ProviderError",
    "ProviderOverrides",
    "ProviderUnavailable",
    "SealViolation",
    "SecretError",
    "StateCorrupt",
    "StateError",
    "ToolFailure",
    "UnknownAgent",
    "WorkspaceEscape",
]


class OrchestratorError(Exception):
    """Root of every error this project raises on purpose."""


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One problem in one config file at one dotted key path."""

    file: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        return f"{where}: {self.message}"


class ConfigError(OrchestratorError):
    """The configuration is invalid; `problems` holds one entry per problem."""

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class SecretError(OrchestratorError):
    """A secret reference could not be resolved."""

    def __init__(self, ref: str, reason: str) -> None:
        self.ref, self.reason = ref, reason
        super().__init__(f"secret {ref!r}: {reason}")


class EmptySecret(SecretError):
    """A secret reference resolved to an empty or whitespace-only value."""


class UnknownAgent(OrchestratorError):
    """The named agent is not configured."""

    def __init__(self, agent: str, known: Sequence[str]) -> None:
        self.agent, self.known = agent, tuple(known)
        super().__init__(f"unknown agent {agent!r} (configured: {', '.join(self.known) or 'none'})")


class AllowMatchesNothing(OrchestratorError):
    """An `--allow` pattern matches no tool the agent holds (the run would silently have none)."""

    def __init__(self, agent: str, pattern: str, hint: str = "") -> None:
        self.agent, self.pattern, self.hint = agent, pattern, hint
        super().__init__(f"--allow {pattern!r} matches no tool agent {agent!r} holds{hint}")


class SealViolation(OrchestratorError):
    """A sealed object was constructed outside the resolve seam."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        super().__init__(f"{kind} can only be created by orchestrator.seam")


class WorkspaceEscape(OrchestratorError):
    """A path would leave the agent's workspace."""

    def __init__(self, path: str, workspace: str) -> None:
        self.path, self.workspace = path, workspace
        super().__init__(f"path {path!r} is outside the workspace {workspace}")


class ToolFailure(OrchestratorError):
    """A tool could not do what was asked; the message goes back to the model."""

    def __init__(self, tool: str, reason: str) -> None:
        self.tool, self.reason = tool, reason
        super().__init__(f"{tool}: {reason}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderOverrides:
    """Name a provider's environment overrides (`[providers.X] *_env`) for its error texts."""

    base_url_env: str | None = None
    api_key_env: str | None = None
    model_env: str | None = None
    url_from_env: bool = False  # the URL in use is `base_url_env`'s value, not the config's

    def url_hint(self, provider: str) -> str:
        """Return where the URL is set: the config key, its override, and which one is in use."""
        where = f"[providers.{provider}] base_url"
        if self.base_url_env is None:
            return where
        if self.url_from_env:
            return f"{self.base_url_env} (base_url_env; this URL came from it) or {where}"
        return f"{where} (or set {self.base_url_env}, its base_url_env)"


class ProviderError(OrchestratorError):
    """The model provider answered with an error that retrying did not fix.

    `status` is the HTTP status of the answer (None when there was none) and `error_type`
    the API's own error kind (`rate_limit_error`, ...) when it named one: a failover
    decides on them, never on the text. `overrides` names the variables the text points
    at; `missing_v1` (an OpenAI-kind 404 whose base URL does not end in /v1) adds that hint.
    """

    def __init__(
        self,
        provider: str,
        url: str,
        reason: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        overrides: ProviderOverrides | None = None,
        missing_v1: bool = False,
    ) -> None:
        self.provider, self.url, self.reason = provider, url, reason
        self.status, self.error_type = status, error_type
        self.overrides, self.missing_v1 = overrides or ProviderOverrides(), missing_v1
        if missing_v1:
            super().__init__(
                f"provider {provider!r} at {url} answered {status}: is the base URL missing /v1? "
                f"({reason}); try {url.rstrip('/')}/v1 in {self.overrides.url_hint(provider)}"
            )
            return
        super().__init__(f"provider {provider!r} at {url}: {reason}{self._status_hint()}")

    def _status_hint(self) -> str:
        env = self.overrides
        if self.status in (401, 403) and env.api_key_env:
            return f"; check [providers.{self.provider}] api_key (or {env.api_key_env}, its api_key_env)"
        if self.status == 404 and env.model_env:
            return f"; check the model ({env.model_env}, its model_env, overrides it)"
        if self.status == 404 and env.url_from_env:
            return f"; this URL came from {env.base_url_env} (base_url_env)"
        return ""


class ProviderUnavailable(ProviderError):
    """The model provider could not be reached, or stayed overloaded or rate-limited (`status` set).

    `timed_out` is True when it was reached but gave no answer within its `timeout_s`.
    """

    def __init__(
        self,
        provider: str,
        url: str,
        reason: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        api: str = "OpenAI-compatible endpoint",
        timed_out: bool = False,
        overrides: ProviderOverrides | None = None,
    ) -> None:
        super().__init__(provider, url, reason, status=status, error_type=error_type, overrides=overrides)
        self.timed_out = timed_out
        if status is not None:
            self.args = (f"provider {provider!r} at {url} is unavailable ({reason}) after its retries",)
            return
        self.args = (
            f"cannot reach provider {provider!r} at {url} ({reason}); start it, or point "
            f"{self.overrides.url_hint(provider)} at a running {api}",
        )


class StateError(OrchestratorError):
    """A state file under `[daemon] state_dir` cannot be created or opened."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f"cannot open {path} ({reason}); make [daemon] state_dir a directory this user can write"
        )


class StateCorrupt(OrchestratorError):
    """A state file is damaged (SQLite found malformed pages)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(
            f"{path} is damaged ({reason}); stop every orchestrator using it, then move it aside "
            f"(a new one is created: its data is lost) or repair it with `sqlite3 {path} .recover`"
        )
