"""The floor a turn is measured against: the same requests from a bare `openai.AsyncOpenAI`, nothing else."""

from __future__ import annotations

__bench__ = False  # imported by the benches, not one: tests/test_benches.py runs no --quick of it

from collections.abc import Sequence
from typing import Any

import openai

__all__ = ["FloorSession"]


class FloorSession:
    """One session of `user -> one tool call -> final text` turns, the history kept as a plain list.

    The tool is never run: its result is `tool_output`, what the orchestrator's tool returns in
    the bench, so both sides send the same bytes.
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        tools: list[dict[str, Any]],
        model: str,
        temperature: float,
        system_prompt: str,
        tool_output: str,
        window: int,
        history: Sequence[dict[str, Any]] = (),
    ) -> None:
        self._create = client.chat.completions.create
        self._system = {"role": "system", "content": system_prompt}
        self._tools = tools
        self._model = model
        self._temperature = temperature
        self._tool_output = tool_output
        self._window = window
        self.messages: list[dict[str, Any]] = list(history)

    def _request_messages(self) -> list[dict[str, Any]]:
        window = self.messages[-self._window :]
        start = 0
        while start < len(window) and window[start]["role"] == "tool":
            start += 1
        return [self._system, *window[start:]]

    async def turn(self, message: str) -> str:
        self.messages.append({"role": "user", "content": message})
        first = await self._create(
            model=self._model, messages=self._request_messages(), tools=self._tools, temperature=self._temperature
        )
        reply = first.choices[0].message
        call = reply.tool_calls[0]
        self.messages.append(
            {
                "role": "assistant",
                "content": reply.content,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.function.name, "arguments": call.function.arguments},
                    }
                ],
            }
        )
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": self._tool_output})
        second = await self._create(
            model=self._model, messages=self._request_messages(), tools=self._tools, temperature=self._temperature
        )
        final = second.choices[0].message.content or ""
        self.messages.append({"role": "assistant", "content": final})
        return final
