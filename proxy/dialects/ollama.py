"""Ollama's native API: ``/api/chat`` (messages without call ids) and ``/api/generate``; answers as NDJSON lines."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy import json_codec
from proxy.dialects.base import Assembled, Dialect, Messages, added_into_previous, message_dicts


@dataclass(frozen=True)
class OllamaChat(Dialect):
    """``/api/chat``: converted to canonical messages with synthetic call ids; changes written back in place."""

    def is_stream(self, body: dict[str, Any]) -> bool:
        return body.get("stream", True) is not False  # Ollama streams unless told not to

    def to_canonical(self, body: dict[str, Any]) -> Messages | None:
        messages = message_dicts(body)
        return None if messages is None else ollama_to_canonical(messages)

    def with_messages(self, body: dict[str, Any], before: Messages, after: Messages, positions: Sequence[int] | None = None) -> dict[str, Any]:
        if after is before:
            return body
        native = body["messages"]
        after, positions = added_into_previous(after, positions)
        if positions is not None:  # messages removed (an archive) or added: pair each with its native form
            before = [before[p] if p >= 0 else {} for p in positions]
            native = [native[p] if p >= 0 else {"role": m.get("role"), "content": ""} for p, m in zip(positions, after)]
        return {**body, "messages": canonical_to_ollama(native, before, after)}


@dataclass(frozen=True)
class OllamaGenerate(OllamaChat):
    """``/api/generate``: a prompt, no messages; measured, never rewritten."""

    def to_canonical(self, body: dict[str, Any]) -> Messages | None:
        return None

    def with_messages(self, body: dict[str, Any], before: Messages, after: Messages, positions: Sequence[int] | None = None) -> dict[str, Any]:
        return body


OLLAMA_CHAT = OllamaChat("ollama_chat", "ollama")
OLLAMA_GENERATE = OllamaGenerate("ollama_generate", "ollama")


def error_body(status: int, code: str, message: str) -> dict[str, object]:
    """Ollama's error shape: ``{"error": "..."}``."""
    return {"error": message}


def stream_error(body: bytes) -> bytes:
    """An error that ends an NDJSON stream: one more line."""
    return body + b"\n"


def ollama_to_canonical(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ollama messages (arguments as objects, no call ids) as OpenAI messages with stable synthetic ids;
    ``images`` stay, so they are counted and fingerprinted (and go back untouched with the native message)."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for i, msg in enumerate(messages):
        canon = {k: v for k, v in msg.items() if k not in ("tool_calls", "tool_name", "thinking")}
        calls = msg.get("tool_calls")
        if msg.get("role") == "assistant" and isinstance(calls, list):
            pending = []
            canon["tool_calls"] = []
            for j, call in enumerate(calls):
                fn = (call or {}).get("function") or {}
                call_id = call.get("id") or f"ollama_{i}_{j}"
                pending.append(call_id)
                args = fn.get("arguments", {})
                canon["tool_calls"].append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": fn.get("name", ""), "arguments": args if isinstance(args, str) else json.dumps(args)},
                    }
                )
        elif msg.get("role") == "tool":
            canon["tool_call_id"] = msg.get("tool_call_id") or (pending.pop(0) if pending else f"ollama_{i}_orphan")
            if msg.get("tool_name"):
                canon["name"] = msg["tool_name"]
        out.append(canon)
    return out


def canonical_to_ollama(native: list[dict[str, Any]], before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Carry content and argument changes back onto the native messages; the rest stays byte-identical."""
    if len(after) != len(native) or len(before) != len(native):
        raise ValueError("the pipeline changed the number of messages; Ollama bodies are rewritten in place")
    out = []
    for orig, old, new in zip(native, before, after):
        if new is old:
            out.append(orig)
            continue
        msg = copy.deepcopy(orig)
        if new.get("content") != old.get("content"):
            msg["content"] = new.get("content") or ""
        for j, (o_call, n_call) in enumerate(zip(old.get("tool_calls") or (), new.get("tool_calls") or ())):
            n_args = n_call["function"]["arguments"]
            if n_args != o_call["function"]["arguments"]:
                native_args = msg["tool_calls"][j]["function"].get("arguments")
                msg["tool_calls"][j]["function"]["arguments"] = n_args if isinstance(native_args, str) else json.loads(n_args)
        out.append(msg)
    return out


class OllamaAssembler:
    """Builds the message from Ollama's NDJSON objects (``/api/chat`` or ``/api/generate``)."""

    def __init__(self) -> None:
        self.result = Assembled()

    def feed_lines(self, data: bytes) -> None:
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                self.feed_object(json_codec.loads(line))
            except (ValueError, TypeError, AttributeError):
                continue

    def feed_object(self, obj: dict[str, Any]) -> None:
        if "error" in obj:
            self.result.error = obj["error"]
        message = obj.get("message") or {}
        self.result.content += message.get("content") or obj.get("response") or ""
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            args = fn.get("arguments")
            self.result.tool_calls.append(
                {
                    "id": call.get("id") or f"call_{len(self.result.tool_calls)}",
                    "type": "function",
                    "function": {"name": fn.get("name", ""), "arguments": json.dumps(args) if not isinstance(args, str) else args},
                }
            )
        if obj.get("done"):
            self.result.done = True
            self.result.finish_reason = obj.get("done_reason")
            self.result.usage = {k: obj[k] for k in ("prompt_eval_count", "eval_count") if k in obj}


_IMAGE_TYPES = (("/9j/", "image/jpeg"), ("iVBOR", "image/png"), ("R0lGOD", "image/gif"), ("UklGR", "image/webp"))
_OPTIONS = {"num_predict": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "stop": "stop", "seed": "seed"}


def as_openai_request(body: dict[str, Any], generate: bool) -> dict[str, Any]:
    """An Ollama chat or generate body as OpenAI chat arguments (for litellm to translate to another provider):
    messages with stable call ids, images as data-URL parts, ``options`` as sampling arguments."""
    if generate:
        messages: list[dict[str, Any]] = [{"role": "system", "content": body["system"]}] if isinstance(body.get("system"), str) else []
        messages.append({"role": "user", "content": body.get("prompt") or "", "images": body.get("images") or []})
    else:
        messages = ollama_to_canonical(message_dicts(body) or [])
    out: dict[str, Any] = {"messages": [_with_image_parts(m) for m in messages]}
    options = body.get("options") if isinstance(body.get("options"), dict) else {}
    out.update({name: options[key] for key, name in _OPTIONS.items() if key in options})
    tools = [t for t in body.get("tools") or () if isinstance(t, dict) and t.get("type", "function") == "function"]
    if tools:  # function tools only: litellm turns other kinds (``mcp``) into calls of its own
        out["tools"] = tools
    if body.get("format") == "json":
        out["response_format"] = {"type": "json_object"}
    return out


def _with_image_parts(message: dict[str, Any]) -> dict[str, Any]:
    images = message.get("images")
    if not images:
        return {k: v for k, v in message.items() if k != "images"}
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.get("content") or ""}]
    for image in images:
        media = next((kind for prefix, kind in _IMAGE_TYPES if str(image).startswith(prefix)), "image/png")
        parts.append({"type": "image_url", "image_url": {"url": f"data:{media};base64,{image}"}})
    return {**{k: v for k, v in message.items() if k != "images"}, "content": parts}


def ollama_object(
    model: str,
    generate: bool,
    text: str,
    calls: list[dict[str, Any]] | None = None,
    *,
    done: bool = False,
    reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One Ollama answer object (a stream line, or the whole answer): OpenAI calls' arguments as objects."""
    out: dict[str, Any] = {"model": model, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if generate:
        out["response"] = text
    else:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [
                {"function": {"name": c["function"]["name"], "arguments": _arguments(c["function"]["arguments"])}} for c in calls
            ]
        out["message"] = message
    out["done"] = done
    if done:
        out["done_reason"] = {"tool_calls": "stop", "length": "length"}.get(reason or "stop", "stop")
        usage = usage or {}
        out.update({"prompt_eval_count": usage.get("prompt_tokens", 0), "eval_count": usage.get("completion_tokens", 0)})
    return out


def _arguments(raw: Any) -> Any:
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw
