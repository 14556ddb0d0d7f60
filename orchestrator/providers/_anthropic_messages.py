"""Translate the engine's OpenAI-shaped chat into an Anthropic Messages request, and answers back.

The engine keeps transcripts and tool specs in the chat-completions shape (`system`,
`user`, `assistant` with `tool_calls`, `tool` results; `{"type": "function", ...}` specs).
The Messages API wants the system prompt apart, tools as `{name, description,
input_schema}`, tool calls as `tool_use` blocks, tool results as `tool_result` blocks in
a user turn, strictly alternating user/assistant turns that open with a user turn.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from orchestrator.providers.base import Completion, ToolCall, Usage

__all__ = ["MessagesRequest", "StreamedMessage", "to_completion", "to_request", "tool_id"]

# Sent when the window opens on an assistant turn (its user turn fell out of the history):
# the API refuses a conversation that does not start with the user.
OMITTED: Final = "(earlier conversation omitted)"
_EMPTY_SCHEMA: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}
# What the API accepts as a `tool_use` id; ids another provider wrote (a failover replays
# them) may hold anything, e.g. `functions.search:0`.
_TOOL_ID: Final = re.compile(r"[a-zA-Z0-9_-]+")
_NOT_ID: Final = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_TOOL_ID: Final = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagesRequest:
    """The parts of a Messages request that come from the chat: `system`, `messages`, `tools`."""

    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


def to_request(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> MessagesRequest:
    """Map an OpenAI-shaped chat and tool specs, with cache breakpoints on the system prompt and last tool.

    Raises TypeError or ValueError for a message the mapping does not know.
    """
    system: list[str] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            if message.get("content"):
                system.append(_plain_text(message.get("content")))
            continue
        if role == "user":
            blocks = _user_blocks(message.get("content"))
        elif role == "tool":
            blocks = [_tool_result(message)]
            role = "user"
        elif role == "assistant":
            blocks = _assistant_blocks(message)
        else:
            raise ValueError(f"unsupported message role {role!r}")
        if not blocks:  # an empty assistant answer: the API refuses empty content
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    if not turns or turns[0][0] != "user":
        turns.insert(0, ("user", [{"type": "text", "text": OMITTED}]))
    wire = [{"role": role, "content": _results_first(blocks)} for role, blocks in turns]
    system_blocks: list[dict[str, Any]] = []
    if system:
        system_blocks.append({"type": "text", "text": "\n\n".join(system), "cache_control": {"type": "ephemeral"}})
    specs = [_tool_spec(spec) for spec in tools]
    if specs:
        specs[-1]["cache_control"] = {"type": "ephemeral"}
    return MessagesRequest(system=system_blocks, messages=wire, tools=specs)


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    raise TypeError(f"unsupported message content {type(content).__name__}")


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise TypeError(f"unsupported message content {type(content).__name__}")
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            if part.get("text"):
                blocks.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            blocks.append(_image(part["image_url"]["url"]))
        else:
            raise ValueError(f"unsupported content part {kind!r}")
    return blocks


def _image(url: str) -> dict[str, Any]:
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header.removeprefix("data:").removesuffix(";base64")
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool_result(message: Mapping[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id(message["tool_call_id"])}
    content = message.get("content")
    if content:
        block["content"] = _plain_text(content)
    return block


def _assistant_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    content = message.get("content")
    if content:
        blocks.append({"type": "text", "text": _plain_text(content)})
    for call in message.get("tool_calls") or ():
        function = call["function"]
        blocks.append(
            {"type": "tool_use", "id": tool_id(call["id"]), "name": function["name"], "input": _input(function.get("arguments"))}
        )
    return blocks


def _input(arguments: Any) -> Any:
    # `input` must be an object; a call the model garbled (or another provider wrote) goes back as-is, wrapped.
    if not arguments:
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"arguments": value}


def tool_id(raw: Any) -> str:
    """Return `raw` when the API accepts it as a tool id, else one derived from it, the same every time.

    The derived id keeps the allowed characters and adds a digest of the whole id, so two
    ids that differ only in refused characters never collide, and a call and its result
    (mapped separately) still match.
    """
    text = raw if isinstance(raw, str) else str(raw)
    if len(text) <= _MAX_TOOL_ID and _TOOL_ID.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    kept = _NOT_ID.sub("_", text)[: _MAX_TOOL_ID - len(digest) - 1]
    return f"{kept}_{digest}" if kept else f"id_{digest}"


def _results_first(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The API wants a user turn's tool_result blocks before any other content.
    results = [b for b in blocks if b["type"] == "tool_result"]
    if not results or len(results) == len(blocks):
        return blocks
    return results + [b for b in blocks if b["type"] != "tool_result"]


def _tool_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    function = spec.get("function", spec)
    out: dict[str, Any] = {"name": function["name"], "input_schema": function.get("parameters") or _EMPTY_SCHEMA}
    if function.get("description"):
        out["description"] = function["description"]
    return out


def to_completion(message: Any) -> Completion:
    """Map a `Message` answer; raise AttributeError or TypeError when it is malformed."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input)))
    usage = getattr(message, "usage", None)
    cut = getattr(message, "stop_reason", None) == "max_tokens"  # a tool_use it was writing is partial
    return Completion(
        text="".join(texts) if texts else None, tool_calls=() if cut else tuple(calls),
        usage=to_usage(usage, output=getattr(usage, "output_tokens", None)), cut=cut,
        response_id=_said(getattr(message, "id", None)), response_model=_said(getattr(message, "model", None)),
        finish_reason=_said(getattr(message, "stop_reason", None)),
    )


def _said(value: Any) -> str | None:
    """Return what a response member said when it is a non-empty string (None otherwise)."""
    return value if isinstance(value, str) and value else None


def to_usage(usage: Any, *, output: Any) -> Usage | None:
    """Map the API's `usage`: cache reads and writes count as input, as OpenAI's `prompt_tokens` does.

    The reads are `cached_tokens`, the writes `cache_write_tokens` (billed above the input price).
    """
    if usage is None:
        return None
    plain = _member(usage, "input_tokens")
    if not isinstance(plain, int) or not isinstance(output, int):
        return None
    read = _member(usage, "cache_read_input_tokens")
    written = _member(usage, "cache_creation_input_tokens")
    read = read if isinstance(read, int) and read > 0 else 0
    written = written if isinstance(written, int) and written > 0 else 0
    return Usage(
        input_tokens=max(0, plain) + read + written, output_tokens=max(0, output), cached_tokens=read,
        cache_write_tokens=written,
    )


def _member(value: Any, name: str) -> Any:
    """`value.name` of an SDK model, or `value[name]` of an event kept as plain JSON."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


@dataclass(slots=True)
class _Block:
    kind: str
    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)


class StreamedMessage:
    """Assemble raw stream events (their JSON objects) into the `Completion` the unstreamed answer gives."""

    __slots__ = ("_blocks", "_cut", "_ending", "_id", "_model", "_on_error", "_output", "_reason", "_started", "_usage")

    def __init__(self, *, on_error: Callable[[Any], Exception]) -> None:
        self._blocks: dict[int, _Block] = {}
        self._started = False
        self._ending = False  # message_delta came: only message_stop follows
        self._cut = False  # its stop reason was max_tokens: the answer is partial
        self._on_error = on_error  # builds what an `event: error` raises, from its body
        self._usage: Any = None  # message_start's usage: the input side
        self._output: Any = None  # message_delta's usage: the final output count
        self._id: str | None = None  # message_start's id and model, message_delta's stop reason
        self._model: str | None = None
        self._reason: str | None = None

    def ending(self) -> bool:
        """Return True once the answer said it is finished (its stop reason came)."""
        return self._ending

    def take(self, event: str | None, data: Any) -> str:
        """Take one server-sent event's data, as the SDK reads them (no name or `ping`: skipped).

        Raises ValueError for data that is not JSON, what `on_error` builds for an error event.
        """
        if event is None or event == "ping" or data == b"":
            return ""
        if event == "error":
            raise self._on_error(data)
        if isinstance(data, bytes):
            raise ValueError(f"an event whose data is not JSON: {data[:80]!r}")
        return self.add(data)

    def add(self, event: Mapping[str, Any]) -> str:
        """Take one event; return the text it adds ("" when none)."""
        kind = event["type"]
        if kind == "message_start":
            self._started = True
            message = event["message"]
            self._usage = message.get("usage")
            self._id, self._model = _said(message.get("id")), _said(message.get("model"))
        elif kind == "message_delta":
            self._ending = True
            self._reason = _said((event.get("delta") or {}).get("stop_reason"))
            self._cut = self._reason == "max_tokens"
            usage = event.get("usage")
            if usage is not None:
                self._output = usage.get("output_tokens")
        elif kind == "content_block_start":
            block = event["content_block"]
            index = event["index"]
            if block["type"] == "tool_use":
                self._blocks[index] = _Block("tool_use", id=block["id"], name=block["name"])
            else:
                self._blocks[index] = _Block(block["type"])
                text = block.get("text")
                if block["type"] == "text" and text:
                    self._blocks[index].pieces.append(text)
                    return str(text)
        elif kind == "content_block_delta":
            delta = event["delta"]
            target = self._blocks[event["index"]]
            if delta["type"] == "text_delta":
                target.pieces.append(delta["text"])
                return str(delta["text"])
            if delta["type"] == "input_json_delta":
                target.pieces.append(delta["partial_json"])
        return ""

    def completion(self) -> Completion:
        """Return the assembled answer; raise ValueError or TypeError when it is incomplete."""
        if not self._started:
            raise ValueError("the stream ended before message_start")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for _, block in sorted(self._blocks.items()):
            if block.kind == "text":
                texts.append("".join(block.pieces))
            elif block.kind == "tool_use" and not self._cut:  # a cut answer's tool input is partial
                # Re-encoded so the arguments read exactly as the unstreamed answer's.
                value = json.loads("".join(block.pieces) or "{}")
                calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(value)))
        output = self._output if self._output is not None else _member(self._usage, "output_tokens")
        return Completion(
            text="".join(texts) if texts else None, tool_calls=tuple(calls), usage=to_usage(self._usage, output=output),
            cut=self._cut, response_id=self._id, response_model=self._model, finish_reason=self._reason,
        )
