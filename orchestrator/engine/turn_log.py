"""The one log line per turn, the same wherever the turn came from (a chat, the gateway)."""

from __future__ import annotations

from loguru import logger

from orchestrator.engine.loop import TurnResult
from orchestrator.engine.tokens import TurnUsage

__all__ = ["log_turn"]


def log_turn(*, channel: str, chat: str, sender: str, agent: str, result: TurnResult | None, seconds: float) -> None:
    """Log one line for an answered turn (never the message text); JSON logs carry the fields too.

    `result` None is a turn stopped by `/stop`. The line reads `turn <channel>:<chat> from
    <sender> by <agent>: <stop> in <s>, tokens ..., tools run: ...`.
    """
    stop = "stopped by /stop" if result is None else result.stop.value
    tools = ",".join(result.executed) if result is not None and result.executed else "none"
    incident = result.incident if result is not None else None
    failed_over = result is not None and result.failed_over
    fallback = f" (answered by fallback {result.provider}/{result.model})" if result is not None and failed_over else ""
    usage = result.usage if result is not None else TurnUsage()
    logger.bind(
        channel=channel, chat=chat, sender=sender, agent=agent, stop=stop,
        seconds=round(seconds, 3), tools=tools, incident=incident,
        provider=result.provider if result is not None else None,
        model=result.model if result is not None else None, failed_over=failed_over,
        input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cached_tokens=usage.cached_tokens,
        cache_write_tokens=usage.cache_write_tokens, cost=usage.cost,
    ).info(
        "turn {}:{} from {} by {}: {}{}{} in {:.2f}s, {}, tools run: {}",
        channel, chat, sender, agent, stop,
        f" (incident {incident})" if incident else "", fallback, seconds, _describe_usage(usage), tools,
    )


def _describe_usage(usage: TurnUsage) -> str:
    """Return a turn's tokens for its log line: `tokens 1200 in (1000 cached, 200 cache write) + 80 out, cost 0.0045`."""
    parts = [f"{usage.cached_tokens} cached"] if usage.cached_tokens else []
    if usage.cache_write_tokens:
        parts.append(f"{usage.cache_write_tokens} cache write")
    cache = f" ({', '.join(parts)})" if parts else ""
    cost = f", cost {usage.cost:.4f}" if usage.cost is not None else ""
    return f"tokens {usage.input_tokens} in{cache} + {usage.output_tokens} out{cost}"
