"""Anthropic's Messages API (``/v1/messages``): blocks ⇄ canonical messages, its SSE events assembled, its error shape.

The body (``system`` as a string or text blocks, ``messages`` of content blocks) becomes canonical messages:
the system prompt one system message (without Claude Code's ``x-anthropic-billing-header`` line, whose value
changes per request); each ``tool_result`` block a ``tool`` message (``is_error`` kept); a user message's
other blocks one user message; an assistant message one assistant message whose ``tool_use`` blocks are
``tool_calls`` and whose every other block (text, ``thinking`` and ``redacted_thinking`` with their signatures,
``server_tool_use`` with its ``web_search_tool_result``, any newer type) stays in ``content`` in its order, as the
block itself. Strategies change only text and tool-call arguments; a change is written back onto a copy of
the one native block it came from, its other keys (``cache_control``, ``is_error``, ``citations``) kept. Every
other key of the body (``tools``, ``thinking``, ``context_management``, ``metadata``…) is never looked at.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy.dialects.base import Assembled, Dialect, Messages, message_dicts, sse_data

BILLING_LINE = "x-anthropic-billing-header:"
"""Claude Code's attribution line in the system prompt (``cc_version=…; cc_entrypoint=…; cch=…;``): its value
changes from request to request, so it is not part of the canonical form (nor sent to another provider)."""
Origin = tuple[str, int, tuple[int, ...]]
"""Where a canonical message came from: its kind (system, tool, user, assistant, other), the native message's
index (-1 for the system prompt) and the indices of its blocks there."""


@dataclass(frozen=True)
class AnthropicMessages(Dialect):
    """``/v1/messages``: streams only when asked; changes written back onto copies of the native blocks."""

    def is_stream(self, body: dict[str, Any]) -> bool:
        return body.get("stream") is True

    def to_canonical(self, body: dict[str, Any]) -> Messages | None:
        found = convert(body)
        return None if found is None else found[0]

    def with_messages(self, body: dict[str, Any], before: Messages, after: Messages, positions: Sequence[int] | None = None) -> dict[str, Any]:
        if after is before:
            return body
        found = convert(body)
        if positions is not None and found is not None:
            from proxy.dialects.anthropic_groups import with_positions  # it builds on this module's write-back

            return with_positions(body, found[1], before, after, positions)
        if found is None or not len(found[1]) == len(before) == len(after):
            raise ValueError("the pipeline changed the number of messages; Anthropic bodies are rewritten block by block")
        return {**body, "messages": write_back(body["messages"], found[1], before, after)}

    def server_context(self, body: dict[str, Any]) -> dict[str, Any] | None:
        return context_management_summary(body)


ANTHROPIC_MESSAGES = AnthropicMessages("anthropic_messages", "anthropic")


def without_billing_line(text: str) -> str:
    """The text without Claude Code's billing line (the same string when it has none)."""
    if BILLING_LINE not in text:
        return text
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(BILLING_LINE)).strip("\n")


def system_without_billing(system: Any) -> Any:
    """The ``system`` value without the billing line: a block holding only it goes (for another provider)."""
    if isinstance(system, str):
        return without_billing_line(system)
    if not isinstance(system, list):
        return system
    out = []
    for block in system:
        if _is_text(block) and BILLING_LINE in block["text"]:
            text = without_billing_line(block["text"])
            if not text:
                continue
            block = {**block, "text": text}
        out.append(block)
    return out


def _is_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)


def convert(body: dict[str, Any]) -> tuple[Messages, list[Origin]] | None:
    """The canonical messages of a Messages body and where each came from; None without a list of messages."""
    native = message_dicts(body)
    if native is None:
        return None
    out: Messages = []
    origins: list[Origin] = []
    system = system_without_billing(body.get("system"))
    if system not in (None, "", []):
        out.append({"role": "system", "content": system})
        origins.append(("system", -1, ()))
    for i, msg in enumerate(native):
        role, content = msg.get("role"), msg.get("content")
        if role == "user" and isinstance(content, list):
            others, results = [], 0
            for j, block in enumerate(content):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    tool: dict[str, Any] = {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": _tool_content(block)}
                    if block.get("is_error") is True:
                        tool["is_error"] = True
                    out.append(tool)
                    origins.append(("tool", i, (j,)))
                    results += 1
                else:
                    others.append(j)
            if others or not results:
                out.append({"role": "user", "content": [content[j] for j in others]})
                origins.append(("user", i, tuple(others)))
        elif role == "assistant" and isinstance(content, list):
            kept = [j for j, b in enumerate(content) if not (isinstance(b, dict) and b.get("type") == "tool_use")]
            canon: dict[str, Any] = {"role": "assistant", "content": [content[j] for j in kept] or None}
            calls = [_tool_call(b) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
            if calls:
                canon["tool_calls"] = calls
            out.append(canon)
            origins.append(("assistant", i, tuple(kept)))
        else:  # a string (or any other) content: a change replaces it whole
            out.append({"role": role, "content": content})
            origins.append(("plain" if role in ("user", "assistant") else "other", i, ()))
    return out, origins


def _tool_content(block: dict[str, Any]) -> Any:
    content = block.get("content")
    return "" if content is None else content


def _tool_call(block: dict[str, Any]) -> dict[str, Any]:
    args = block.get("input")
    return {
        "id": block.get("id"),
        "type": "function",
        "function": {"name": block.get("name") or "", "arguments": json.dumps({} if args is None else args, ensure_ascii=False)},
    }


def write_back(native: list[dict[str, Any]], origins: list[Origin], before: Messages, after: Messages) -> list[dict[str, Any]]:
    """The native messages with each changed canonical message written onto a copy of its blocks; the rest the
    very objects the client sent."""
    out = list(native)
    copied: set[int] = set()
    for (kind, i, blocks), old, new in zip(origins, before, after):
        if new is old:
            continue
        if kind in ("system", "other"):
            if new != old:
                raise ValueError(f"a {kind} message cannot be rewritten in an Anthropic body")
            continue
        if kind == "plain":
            out[i] = {**native[i], "content": new.get("content")}
            continue
        if i not in copied:
            out[i] = {**native[i], "content": list(native[i]["content"])}
            copied.add(i)
        content = out[i]["content"]
        if kind == "tool":
            (j,) = blocks
            if new.get("content") != old.get("content"):
                content[j] = {**content[j], "content": _kept_markers(old.get("content"), new.get("content"))}
            continue
        if new.get("content") != old.get("content"):
            placed = _aligned(_parts(old.get("content")), _parts(_kept_markers(old.get("content"), new.get("content"))))
            slots: list[Any] = [[b] for b in content]
            for j, parts in zip(blocks, placed):
                slots[j] = parts
            out[i]["content"] = content = [b for parts in slots for b in parts]
        if kind == "assistant":
            _write_calls(content, old.get("tool_calls") or [], new.get("tool_calls") or [])
    return out


def _parts(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if isinstance(content, str) and content else []


def _aligned(old: list[Any], new: list[Any]) -> list[list[Any]]:
    """For each old part, what takes its place: itself when untouched (the same object), the new text part in
    place of a replaced text part, nothing when dropped; new parts left over go after the last old part."""
    out: list[list[Any]] = []
    rest = [p for p in new if not any(p is o for o in old)]
    for part in old:
        if any(part is n for n in new):
            out.append([part])
        elif _is_text(part) and rest:
            out.append([rest.pop(0)])
        else:
            out.append([])
    if rest:
        if not out:
            raise ValueError("replacement text for a message without blocks")
        out[-1].extend(rest)
    return out


def _kept_markers(old: Any, new: Any) -> Any:
    """New content that keeps a ``cache_control`` marker of a text part the replacement dropped (on the text part
    that took its place): a breakpoint stays on the block where the client put it, and none is added."""
    if not isinstance(old, list) or not isinstance(new, list):
        return new
    lost = [p["cache_control"] for p in old if _is_text(p) and "cache_control" in p and not any(p is n for n in new)]
    kept = sum(1 for p in new if isinstance(p, dict) and "cache_control" in p)
    had = sum(1 for p in old if isinstance(p, dict) and "cache_control" in p)
    if not lost or kept >= had:
        return new
    out = list(new)
    for k in range(len(out) - 1, -1, -1):
        if _is_text(out[k]) and not any(out[k] is o for o in old) and "cache_control" not in out[k]:
            out[k] = {**out[k], "cache_control": lost[-1]}
            break
    return out


def _write_calls(content: list[Any], old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    for o_call, n_call in zip(old, new):
        args = n_call["function"]["arguments"]
        if args == o_call["function"]["arguments"]:
            continue
        for j, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id") == n_call.get("id"):
                content[j] = {**block, "input": json.loads(args)}


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
"""Anthropic's error types by HTTP status (other 4xx: invalid_request_error; other 5xx: api_error)."""


def error_body(status: int, code: str, message: str) -> dict[str, object]:
    """Anthropic's error shape: ``{"type": "error", "error": {"type", "message"}}``."""
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def stream_error(body: bytes) -> bytes:
    """An error that ends an SSE stream: an ``error`` event, which the SDKs raise."""
    return b"event: error\ndata: " + body + b"\n\n"


class AnthropicAssembler:
    """Builds the message from the SSE events (``message_start``, ``content_block_*``, ``message_delta``,
    ``message_stop``, ``ping``, ``error``) or from one whole Message object."""

    def __init__(self) -> None:
        self.result = Assembled()
        self._calls: dict[int, dict[str, Any]] = {}

    def feed_lines(self, data: bytes) -> None:
        for payload in sse_data(data):
            try:
                obj = json.loads(payload)
            except ValueError:
                continue
            if isinstance(obj, dict):
                self._event(obj)

    def _event(self, obj: dict[str, Any]) -> None:
        kind, result = obj.get("type"), self.result
        if kind == "message_start":
            message = obj.get("message") or {}
            result.usage = dict(message.get("usage") or {})
        elif kind == "content_block_start":
            block = obj.get("content_block") or {}
            if block.get("type") == "tool_use":
                self._calls[obj.get("index", len(self._calls))] = {
                    "id": block.get("id") or "",
                    "type": "function",
                    "function": {"name": block.get("name") or "", "arguments": ""},
                }
            elif block.get("type") == "text":
                result.content += block.get("text") or ""
        elif kind == "content_block_delta":
            delta = obj.get("delta") or {}
            if delta.get("type") == "text_delta":
                result.content += delta.get("text") or ""
            elif delta.get("type") == "input_json_delta" and obj.get("index") in self._calls:
                self._calls[obj["index"]]["function"]["arguments"] += delta.get("partial_json") or ""
        elif kind == "message_delta":
            result.finish_reason = (obj.get("delta") or {}).get("stop_reason") or result.finish_reason
            result.usage.update({k: v for k, v in (obj.get("usage") or {}).items() if v is not None})
            self._edits(obj.get("context_management"))
        elif kind == "message_stop":
            result.done = True
        elif kind == "error":
            result.error = obj.get("error")
        result.tool_calls = [self._calls[i] for i in sorted(self._calls)]

    def _edits(self, management: Any) -> None:
        if isinstance(management, dict) and isinstance(management.get("applied_edits"), list):
            self.result.applied_edits = [e for e in management["applied_edits"] if isinstance(e, dict)]

    def feed_object(self, obj: dict[str, Any]) -> None:
        if obj.get("type") == "error":
            self.result.error = obj.get("error")
            return
        for block in obj.get("content") or ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                self.result.content += block.get("text") or ""
            elif block.get("type") == "tool_use":
                self.result.tool_calls.append(_tool_call(block))
        self.result.usage = dict(obj.get("usage") or {})
        self.result.finish_reason = obj.get("stop_reason")
        self._edits(obj.get("context_management"))


def context_management_summary(body: dict[str, Any]) -> dict[str, Any] | None:
    """What the client asked Anthropic to clear on its side (``context_management.edits``), for the DCP report."""
    management = body.get("context_management")
    if not isinstance(management, dict):
        return None
    edits = [e for e in management.get("edits") or () if isinstance(e, dict)]
    return {"edits": [{k: v for k, v in e.items() if k in ("type", "trigger", "keep", "clear_at_least", "clear_tool_inputs")} for e in edits]}
