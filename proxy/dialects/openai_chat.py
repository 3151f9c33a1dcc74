"""OpenAI Chat Completions: the canonical form itself; answers streamed as SSE ``data:`` lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy import json_codec
from proxy.dialects.base import Assembled, Dialect, Messages, added_into_previous, message_dicts, sse_data


@dataclass(frozen=True)
class OpenAIChat(Dialect):
    """``/v1/chat/completions``: messages are already canonical; streams only when asked."""

    def is_stream(self, body: dict[str, Any]) -> bool:
        return body.get("stream") is True

    def to_canonical(self, body: dict[str, Any]) -> Messages | None:
        return message_dicts(body)

    def with_messages(self, body: dict[str, Any], before: Messages, after: Messages, positions: Sequence[int] | None = None) -> dict[str, Any]:
        return body if after is before else {**body, "messages": added_into_previous(after, positions)[0]}


OPENAI_CHAT = OpenAIChat("openai_chat", "openai")

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    431: "invalid_request_error",
    502: "upstream_error",
    503: "upstream_error",
    504: "upstream_error",
}


def error_body(status: int, code: str, message: str) -> dict[str, object]:
    """OpenAI's error shape: ``{"error": {"message", "type", "code", "param"}}``."""
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "api_error"), "code": code, "param": None}}


def stream_error(body: bytes) -> bytes:
    """An error that ends an SSE stream: an event the SDKs raise, then ``[DONE]``."""
    return b"data: " + body + b"\n\ndata: [DONE]\n\n"


class OpenAIAssembler:
    """Builds the message from OpenAI chat-completion chunks (``data: {...}`` lines)."""

    def __init__(self) -> None:
        self.result = Assembled()
        self._calls: dict[int, dict[str, Any]] = {}

    def feed_lines(self, data: bytes) -> None:
        for payload in sse_data(data):
            if payload == b"[DONE]":
                self.result.done = True
                continue
            try:
                self.feed_object(json_codec.loads(payload))
            except (ValueError, TypeError, AttributeError):
                continue

    def feed_object(self, obj: dict[str, Any]) -> None:
        if "error" in obj:
            self.result.error = obj["error"]
        if obj.get("usage"):
            self.result.usage = obj["usage"]
        for choice in obj.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if delta.get("content"):
                self.result.content += delta["content"]
            for call in delta.get("tool_calls") or ():
                self._merge_call(call)
            if choice.get("finish_reason"):
                self.result.finish_reason = choice["finish_reason"]
        self.result.tool_calls = [self._calls[i] for i in sorted(self._calls)]

    def _merge_call(self, call: dict[str, Any]) -> None:
        slot = self._calls.setdefault(call.get("index", len(self._calls)), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        if call.get("id"):
            slot["id"] = call["id"]
        fn = call.get("function") or {}
        if fn.get("name"):
            slot["function"]["name"] += fn["name"]
        if fn.get("arguments"):
            slot["function"]["arguments"] += fn["arguments"]
