"""OpenAI's Responses API (``/v1/responses``): ``input`` items ⇄ canonical messages, its SSE events assembled, its errors.

``instructions`` is the system message. A ``message`` item of role user, system or developer is one message (developer
and system as ``system``: an agent's standing instructions, protected as such), its ``input_text`` / ``output_text``
parts as text parts and any other part (``input_image``, ``input_file``) carried untouched. The items an assistant turn
is made of — ``reasoning`` (opaque: ``encrypted_content`` and summaries never read), an assistant ``message``,
``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call`` and any item type Ruyi does not know —
in a row are one assistant message: calls as ``tool_calls`` (``call_id`` is the id their outputs answer), every other
item as an opaque part in its place. ``function_call_output``, ``custom_tool_call_output`` and ``local_shell_call_output``
are ``tool`` messages. Strategies change only text and call arguments; a change is written onto a copy of the one item it
came from. Removed messages take all their items with them, so a call and its output go together; a message Ruyi adds
(an archive's summary) is a ``developer`` message in its place, after the kept head: ``instructions`` and ``tools`` stay
byte for byte, and so does the provider's cached prefix up to the archive.

A body chained by ``previous_response_id`` holds only the new items (the history is at the provider): Ruyi rewrites
nothing (``to_canonical`` answers None), so the chain is never broken; it counts the new items (``chained_messages``),
finds the session by the response it chains from (the answer's id, ``Assembled.answer_id``), and takes the provider's
usage as the session's size without calibrating by it (it counts a history Ruyi never saw).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from proxy.dialects.base import Assembled, Dialect, Messages, added_into_previous, sse_data

TOOL_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
USER_ROLES = {"user", "system", "developer"}
TEXT_PARTS = {"input_text", "output_text"}
LOCAL_SHELL = "local_shell"
Origin = tuple[str, tuple[int, ...]]
"""Where a canonical message came from: its kind (instructions, message, assistant, tool) and its items' indices."""


@dataclass(frozen=True)
class Responses(Dialect):
    """``/v1/responses``: streams when asked; changes written back onto copies of the native items."""

    def is_stream(self, body: dict[str, Any]) -> bool:
        return body.get("stream") is True

    def to_canonical(self, body: dict[str, Any]) -> Messages | None:
        found = convert(body)
        return None if found is None else found[0]

    def with_messages(self, body: dict[str, Any], before: Messages, after: Messages, positions: Sequence[int] | None = None) -> dict[str, Any]:
        if after is before:
            return body
        found = convert(body)
        if found is None:
            raise ValueError("a Responses body without input items cannot be rewritten")
        if positions is None:
            if not len(found[1]) == len(before) == len(after):
                raise ValueError("the pipeline changed the number of messages without saying where they came from")
            positions = list(range(len(after)))
        after, positions = added_into_previous(after, positions)
        assert positions is not None
        return rebuilt(body, found[1], before, after, positions)


RESPONSES = Responses("openai_responses", "responses")


def items_of(body: dict[str, Any]) -> list[Any] | None:
    """The body's input as a list of items (a plain string input is one user message); None when there is none."""
    given = body.get("input")
    if isinstance(given, str):
        return [{"type": "message", "role": "user", "content": given}]
    if isinstance(given, list):
        return given
    return None


def chained(body: Any) -> bool:
    """Whether a body continues a response stored at the provider (``previous_response_id``)."""
    return isinstance(body, dict) and bool(body.get("previous_response_id"))


def chained_messages(body: Mapping[str, Any]) -> Messages | None:
    """The canonical messages of a chained body's new items (to count what Ruyi sees; never rewritten); None for a body
    that is not chained."""
    if not chained(body):
        return None
    found = convert({k: v for k, v in body.items() if k != "previous_response_id"})
    return found[0] if found is not None else []


def convert(body: dict[str, Any]) -> tuple[Messages, list[Origin]] | None:
    """The canonical messages of a Responses body and where each came from; None for a chained body or no input."""
    items = items_of(body)
    if items is None or body.get("previous_response_id"):
        return None
    out: Messages = []
    origins: list[Origin] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        out.append({"role": "system", "content": instructions})
        origins.append(("instructions", ()))
    group: list[int] = []

    def close() -> None:
        if group:
            out.append(_assistant([items[i] for i in group]))
            origins.append(("assistant", tuple(group)))
            group.clear()

    for i, item in enumerate(items):
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message" and isinstance(item, dict) and item.get("role") in USER_ROLES:
            close()
            role = "system" if item["role"] in ("system", "developer") else "user"
            out.append({"role": role, "content": _content(item.get("content"))})
            origins.append(("message", (i,)))
        elif kind in TOOL_OUTPUTS and isinstance(item, dict):
            close()
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _output(item.get("output"))})
            origins.append(("tool", (i,)))
        else:  # an assistant turn's item, or one Ruyi does not know: carried in the assistant message, untouched
            group.append(i)
    close()
    return out, origins


def _content(content: Any) -> Any:
    if isinstance(content, list):
        return [{"type": "text", "text": p["text"]} if _is_text(p) else p for p in content]
    return content


def _is_text(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str)


def _output(output: Any) -> Any:
    if isinstance(output, list):  # input_text / input_image parts of a tool's output
        return [{"type": "text", "text": p["text"]} if _is_text(p) else p for p in output]
    return "" if output is None else output


def _assistant(items: list[Any]) -> dict[str, Any]:
    content: list[Any] = []
    calls: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or ():
                content.append({"type": "text", "text": part["text"]} if _is_text(part) else part)
        elif kind in CALLS:
            calls.append(_call(item))
        else:
            content.append(item)  # reasoning, web_search_call, an unknown item: opaque, never pruned
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _call(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "function_call":
        name, arguments = item.get("name") or "", item.get("arguments") or ""
    elif kind == "custom_tool_call":
        name, arguments = item.get("name") or "", item.get("input") or ""
    else:
        name, arguments = LOCAL_SHELL, json.dumps(item.get("action") or {}, ensure_ascii=False)
    return {"id": item.get("call_id"), "type": "function", "function": {"name": name, "arguments": arguments}}


def rebuilt(body: dict[str, Any], origins: list[Origin], before: Messages, after: Messages, positions: Sequence[int]) -> dict[str, Any]:
    """The body carrying ``after``: kept messages' items as sent unless changed (then a copy with the change), removed
    messages' items gone, added messages as developer messages in their place."""
    items = items_of(body) or []
    out_items: list[Any] = []
    out = dict(body)
    for p, new in zip(positions, after):
        if p < 0:
            out_items.append({"type": "message", "role": "developer", "content": _native_text(new.get("content"))})
            continue
        kind, indices = origins[p]
        old = before[p]
        if kind == "instructions":
            if new is not old and new.get("content") != old.get("content"):
                out["instructions"] = new.get("content") if isinstance(new.get("content"), str) else _plain(new.get("content"))
            continue
        if new is old or new == old:
            out_items.extend(items[i] for i in indices)
            continue
        if kind == "tool":
            (i,) = indices
            out_items.append({**items[i], "output": _native_output(items[i].get("output"), new.get("content"))})
        elif kind == "message":
            (i,) = indices
            out_items.append({**items[i], "content": _native_parts(items[i].get("content"), new.get("content"), "input_text")})
        else:
            out_items.extend(_assistant_items([items[i] for i in indices], old, new))
    out["input"] = out_items
    return out


def _plain(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or () if isinstance(p, dict))


def _native_text(content: Any) -> Any:
    if isinstance(content, list):
        return [{"type": "input_text", "text": p["text"]} if isinstance(p, dict) and p.get("type") == "text" else p for p in content]
    return content


def _native_output(original: Any, content: Any) -> Any:
    if isinstance(original, list) or isinstance(content, list):
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if not isinstance(original, list):
            return _plain(parts)
        return [{"type": "input_text", "text": p["text"]} if isinstance(p, dict) and p.get("type") == "text" else p for p in parts]
    return content


def _native_parts(original: Any, content: Any, text_type: str) -> Any:
    """New canonical content in the item's own shape: a string for a string; text parts back as the item's own text
    parts (their type kept where a text part took an old one's place), other parts as they were."""
    if not isinstance(original, list):
        return content if isinstance(content, str) else _plain(content)
    kinds = [p.get("type") for p in original if _is_text(p)] or [text_type]
    out, k = [], 0
    for part in content if isinstance(content, list) else [{"type": "text", "text": content}]:
        if isinstance(part, dict) and part.get("type") == "text":
            out.append({"type": kinds[min(k, len(kinds) - 1)], "text": part["text"]})
            k += 1
        else:
            out.append(part)
    return out


def _assistant_items(items: list[Any], old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
    """An assistant turn's items with a change written back: text into its message item, arguments into its call."""
    out = list(items)
    if new.get("content") != old.get("content"):
        texts = [p for p in new.get("content") or () if isinstance(p, dict) and p.get("type") == "text"]
        for j, item in enumerate(out):
            if isinstance(item, dict) and item.get("type") == "message":
                count = sum(1 for p in item.get("content") or () if _is_text(p))
                mine, texts = texts[:count], texts[count:]
                parts, k = [], 0
                for part in item.get("content") or ():
                    if _is_text(part):
                        if k < len(mine):
                            parts.append({**part, "text": mine[k]["text"]})
                        k += 1
                    else:
                        parts.append(part)
                out[j] = {**item, "content": parts}
    old_calls = {c.get("id"): c for c in old.get("tool_calls") or ()}
    for call in new.get("tool_calls") or ():
        before = old_calls.get(call.get("id"))
        if before is None or before["function"]["arguments"] == call["function"]["arguments"]:
            continue
        for j, item in enumerate(out):
            if isinstance(item, dict) and item.get("call_id") == call.get("id") and item.get("type") in CALLS:
                key = "arguments" if item["type"] == "function_call" else "input" if item["type"] == "custom_tool_call" else None
                if key is not None:
                    out[j] = {**item, key: call["function"]["arguments"]}
    return out


def error_body(status: int, code: str, message: str) -> dict[str, object]:
    """The Responses API's error shape (the same as chat completions'): ``{"error": {"message", "type", "code"}}``."""
    kind = "invalid_request_error" if 400 <= status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


def stream_error(body: bytes) -> bytes:
    """An ``error`` event that ends a Responses stream (the SDK raises it)."""
    error = json.loads(body).get("error") or {}
    event = {"type": "error", "code": error.get("code"), "message": error.get("message"), "param": None, "sequence_number": 0}
    return b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n"


class ResponsesAssembler:
    """Builds the answer from the SSE events (``response.output_text.delta``, ``response.output_item.done``,
    ``response.completed``, ``response.failed``, ``error``) or from one whole Response object."""

    def __init__(self) -> None:
        self.result = Assembled()

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
        if kind == "response.output_text.delta":
            result.content += obj.get("delta") or ""
        elif kind == "response.output_item.done":
            item = obj.get("item") or {}
            if isinstance(item, dict) and item.get("type") in CALLS:
                result.tool_calls.append(_call(item))
        elif kind in ("response.completed", "response.incomplete"):
            response = obj.get("response") or {}
            result.answer_id = _answer_id(response)
            result.usage = dict(response.get("usage") or {})
            result.finish_reason = response.get("status")
            result.done = True
        elif kind in ("response.failed", "error"):
            result.error = obj.get("code") or ((obj.get("response") or {}).get("error") or {}).get("code") or "error"
            result.done = True

    def feed_object(self, obj: dict[str, Any]) -> None:
        if obj.get("error"):
            self.result.error = obj["error"]
            return
        for item in obj.get("output") or ():
            if not isinstance(item, dict):
                continue
            if item.get("type") == "message":
                self.result.content += "".join(p.get("text", "") for p in item.get("content") or () if isinstance(p, dict))
            elif item.get("type") in CALLS:
                self.result.tool_calls.append(_call(item))
        self.result.answer_id = _answer_id(obj)
        self.result.usage = dict(obj.get("usage") or {})
        self.result.finish_reason = obj.get("status")


def _answer_id(response: Any) -> str | None:
    """A Response's id (what a later request names as ``previous_response_id``)."""
    found = response.get("id") if isinstance(response, dict) else None
    return found if isinstance(found, str) and found else None
