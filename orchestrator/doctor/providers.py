"""Ask each provider in use for its models, once: the endpoint answers, the key works, the model exists.

Foreign errors (openai, anthropic) are translated here into problems that name the
`[providers.X]` keys and the environment variables overriding them.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from orchestrator.checks import ModelUse, models_in_use
from orchestrator.config import Config, ProviderConfig, SecretRef, resolve_secret
from orchestrator.doctor.refused import ProbeRefused
from orchestrator.errors import ConfigProblem, SecretError
from orchestrator.text import suggest

__all__ = ["ProviderProbe", "openai_models", "probe_provider", "providers_in_use"]

# What the SDKs insist on when no key is configured (local servers ignore it).
_PLACEHOLDER_KEY: Final = "unused"
_SHOWN_MODELS: Final = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderProbe:
    """One provider's endpoint and key as the daemon would use them, and the models its agents name."""

    name: str
    config: ProviderConfig
    base_url: str
    api_key: str | None
    models: tuple[ModelUse, ...]  # one per agent using this provider


def providers_in_use(config: Config) -> Iterator[ProviderProbe]:
    """Yield a probe per provider some agent uses, env overrides applied (not one whose key will not resolve)."""
    for name, provider in config.providers.items():
        models = models_in_use(config, name)
        if not models:
            continue
        url = provider.base_url
        if provider.base_url_env and os.environ.get(provider.base_url_env):
            url = os.environ[provider.base_url_env]
        try:
            key = _api_key(provider, config)
        except SecretError:
            continue  # the secrets check names the key
        yield ProviderProbe(name=name, config=provider, base_url=url, api_key=key, models=models)


def _api_key(provider: ProviderConfig, config: Config) -> str | None:
    if provider.api_key_env and os.environ.get(provider.api_key_env):
        return resolve_secret(SecretRef(f"env:{provider.api_key_env}"))
    if provider.api_key is not None:
        return resolve_secret(provider.api_key, base=config.source.parent if config.source else None)
    return None


async def probe_provider(probe: ProviderProbe, *, shown: str, timeout_s: float) -> tuple[str | None, list[ConfigProblem]]:
    """List the provider's models (one request); return a line saying what it serves, or the problems."""
    where = f"providers.{probe.name}"
    try:
        offered = await (_anthropic_has if probe.config.kind == "anthropic" else _openai_models)(probe, timeout_s)
    except ProbeRefused as exc:
        return None, [ConfigProblem(shown, where, f"{probe.config.kind} endpoint {probe.base_url}: {exc}{_overrides(probe)}")]
    problems = []
    for use in dict.fromkeys(probe.models):
        model = use.model
        if model not in offered:
            listed = sorted(offered)
            shown_models = ", ".join(listed[:_SHOWN_MODELS]) + (", ..." if len(listed) > _SHOWN_MODELS else "")
            env = f"; {probe.config.model_env} overrides it" if probe.config.model_env else ""
            problems.append(ConfigProblem(
                use.file, use.key,
                f"model {model!r} is not served by provider {probe.name!r} at {probe.base_url}"
                + (suggest(model, listed) or (f" (it serves: {shown_models})" if listed else "")) + env,
            ))
    if problems:
        return None, problems
    served = ", ".join(dict.fromkeys(use.model for use in probe.models))
    return f"provider {probe.name} ({probe.config.kind}) at {probe.base_url}: serves {served}", []


def _overrides(probe: ProviderProbe) -> str:
    """Name the keys, and the environment variables that override the URL, key and model."""
    config = probe.config
    envs = [
        f"{env} ({what})"
        for env, what in ((config.base_url_env, "base_url"), (config.api_key_env, "api_key"), (config.model_env, "model"))
        if env
    ]
    text = f" (check [providers.{probe.name}] base_url and api_key"
    if envs:
        text += f"; environment overrides: {', '.join(envs)}"
    if config.base_url_env and os.environ.get(config.base_url_env):
        text += f"; this URL came from {config.base_url_env}"
    return text + ")"


def _no_v1_hint(base_url: str, status: int) -> str:
    path = urlsplit(base_url).path.rstrip("/")
    if status == 404 and not path.endswith("/v1"):
        return f"; OpenAI-compatible base URLs usually end in /v1: try {base_url.rstrip('/')}/v1"
    return ""


async def _openai_models(probe: ProviderProbe, timeout_s: float) -> frozenset[str]:
    return await openai_models(probe.base_url, probe.api_key, timeout_s=timeout_s)


async def openai_models(base_url: str, api_key: str | None, *, timeout_s: float) -> frozenset[str]:
    """Return the model ids an OpenAI-compatible endpoint serves; raise `ProbeRefused` naming why not."""
    import openai

    client = openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key or _PLACEHOLDER_KEY, timeout=timeout_s, max_retries=0
    )
    try:
        page = await client.models.list()
        return frozenset(m.id for m in page.data)
    except openai.APIStatusError as exc:
        raise ProbeRefused(f"GET /models answered {exc.status_code}{_no_v1_hint(base_url, exc.status_code)}") from None
    except openai.APIConnectionError as exc:
        raise ProbeRefused(f"cannot connect ({_connect_failure(exc, base_url, timeout_s)})") from None
    except openai.OpenAIError as exc:
        raise ProbeRefused(f"cannot list models ({exc})") from None
    finally:
        await client.close()


async def _anthropic_has(probe: ProviderProbe, timeout_s: float) -> frozenset[str]:
    """Ask for each model by id (the API resolves aliases); return the ids it knows."""
    import anthropic

    origin = probe.base_url.rstrip("/").removesuffix("/v1")
    client = anthropic.AsyncAnthropic(
        base_url=origin, api_key=probe.api_key or _PLACEHOLDER_KEY, timeout=timeout_s, max_retries=0
    )
    known: set[str] = set()
    try:
        for model in dict.fromkeys(use.model for use in probe.models):
            try:
                await client.models.retrieve(model)
            except anthropic.NotFoundError:
                continue
            known.add(model)
    except anthropic.APIStatusError as exc:
        raise ProbeRefused(f"GET /v1/models answered {exc.status_code}") from None
    except anthropic.APIConnectionError as exc:
        raise ProbeRefused(f"cannot connect ({_connect_failure(exc, probe.base_url, timeout_s)})") from None
    except anthropic.AnthropicError as exc:
        raise ProbeRefused(f"cannot look up models ({exc})") from None
    finally:
        await client.close()
    return frozenset(known)


def _connect_failure(exc: BaseException, base_url: str, timeout_s: float) -> str:
    """Say why a connection failed: refused (nothing listens), timed out, or the deepest cause's own words."""
    url = urlsplit(base_url)
    where = f"{url.hostname}:{url.port or (443 if url.scheme == 'https' else 80)}"
    chain = list(_chain(exc))
    refused = f"[Errno {errno.ECONNREFUSED}]"
    if any(isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED for e in chain) or (
        refused in str(chain[-1])
    ):
        return f"connection refused: nothing listens on {where}; start the model server there, or fix base_url"
    if any("timeout" in type(e).__name__.lower() for e in chain):
        return f"no answer from {where} within {timeout_s:g} s (connect timed out): is the host reachable?"
    return _cause(exc)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        cause = cause.__cause__ or cause.__context__
    text = str(cause or exc).strip()
    return text or type(cause or exc).__name__
