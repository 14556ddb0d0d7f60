"""What the model is shown of a tool result or a pinned resource: redacted, then cut, then wrapped.

The order is the guarantee: a cut that falls inside a secret would leave a prefix the
redactor no longer recognises whole, so the redactor sees the whole text first
(`orchestrator.redaction`), and only what it returned is cut to `max_tool_result_chars`
and framed as untrusted data.
"""

from __future__ import annotations

from orchestrator.engine.untrusted import wrap_untrusted
from orchestrator.redaction import redact

__all__ = ["cut_to", "shape_for_model"]


def cut_to(text: str, cap: int) -> str:
    """Return `text`, or its first `cap` characters and a note saying how many were cut."""
    if len(text) <= cap:
        return text
    return f"{text[:cap]}\n[truncated {len(text) - cap} characters]"


def shape_for_model(text: str, *, cap: int | None, untrusted: str | None = None) -> str:
    """Return `text` as the model may see it: redacted, cut to `cap` (None: uncut), framed if `untrusted` names a source."""
    shown = redact(text)
    if cap is not None:
        shown = cut_to(shown, cap)
    return wrap_untrusted(untrusted, shown) if untrusted is not None else shown
