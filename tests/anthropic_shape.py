"""A validator of Anthropic Messages request bodies, written from Anthropic's documentation (Messages API, tool use,
extended thinking, server tools, prompt caching): what the API answers 400 for.

- ``model`` a string; ``max_tokens`` a positive integer (not for count_tokens); ``messages`` a non-empty list of
  ``user`` / ``assistant`` messages whose ``content`` is a string or a list of typed blocks.
- ``system``: a string or a list of ``text`` blocks.
- ``tool_use`` (id, name, object input), ``thinking`` (thinking + signature), ``redacted_thinking`` (data) and
  ``server_tool_use`` only in assistant messages; ``tool_result`` only in user messages, before any other block.
- Every ``tool_use`` of an assistant message has its ``tool_result`` in the very next (user) message, and every
  ``tool_result`` answers a ``tool_use`` of the message right before it (ids unique).
- A server tool's result (``web_search_tool_result``, ``*_tool_result`` with a ``tool_use_id``) follows its
  ``server_tool_use`` in the same assistant message.
- ``cache_control`` is ``{"type": "ephemeral"}`` (optional ``ttl``), on at most 4 blocks over tools, system and
  messages.
"""

from __future__ import annotations

from typing import Any

MAX_BREAKPOINTS = 4
ASSISTANT_ONLY = {"tool_use", "thinking", "redacted_thinking", "server_tool_use"}
SERVER_RESULTS_SUFFIX = "_tool_result"


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where the body's ``cache_control`` markers are, as paths (``system[1]``, ``messages[3].content[0]``…)."""
    found = []
    for i, tool in enumerate(body.get("tools") or ()):
        if isinstance(tool, dict) and "cache_control" in tool:
            found.append(f"tools[{i}]")
    system = body.get("system")
    if isinstance(system, list):
        found += [f"system[{i}]" for i, b in enumerate(system) if isinstance(b, dict) and "cache_control" in b]
    for i, msg in enumerate(body.get("messages") or ()):
        content = msg.get("content") if isinstance(msg, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict) and "cache_control" in block:
                found.append(f"messages[{i}].content[{j}]")
            inner = block.get("content") if isinstance(block, dict) and block.get("type") == "tool_result" else None
            for k, part in enumerate(inner if isinstance(inner, list) else ()):
                if isinstance(part, dict) and "cache_control" in part:
                    found.append(f"messages[{i}].content[{j}].content[{k}]")
    return found


def problems(body: Any, *, count_tokens: bool = False) -> list[str]:
    """Everything the Messages API would refuse in ``body`` (empty: valid)."""
    out: list[str] = []
    if not isinstance(body, dict):
        return ["the body must be a JSON object"]
    if not isinstance(body.get("model"), str) or not body["model"]:
        out.append("model: a string is required")
    if not count_tokens and not (isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0):
        out.append("max_tokens: a positive integer is required")
    out += _system(body.get("system"))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return out + ["messages: a non-empty list is required"]
    for i, msg in enumerate(messages):
        out += _message(i, msg)
    out += _pairing(messages)
    marks = breakpoints(body)
    for path in marks:
        out += _cache_control(body, path)
    if len(marks) > MAX_BREAKPOINTS:
        out.append(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marks)}.")
    return out


def _system(system: Any) -> list[str]:
    if system is None or isinstance(system, str):
        return []
    if not isinstance(system, list):
        return ["system: a string or a list of text blocks"]
    return [
        f"system[{i}]: only text blocks"
        for i, b in enumerate(system)
        if not (isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
    ]


def _message(i: int, msg: Any) -> list[str]:
    where = f"messages[{i}]"
    if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
        return [f"{where}: role must be user or assistant"]
    content, role = msg.get("content"), msg["role"]
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"{where}.content: a string or a list of blocks"]
    out = []
    seen_other = False
    for j, block in enumerate(content):
        at = f"{where}.content[{j}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            out.append(f"{at}: a block needs a type")
            continue
        kind = block["type"]
        if kind in ASSISTANT_ONLY and role != "assistant":
            out.append(f"{at}: {kind} blocks are only allowed in assistant messages")
        if kind == "tool_result":
            if role != "user":
                out.append(f"{at}: tool_result blocks are only allowed in user messages")
            if seen_other:
                out.append(f"{at}: tool_result blocks must come first in the content")
        else:
            seen_other = True
        out += _block(at, block)
    return out


def _block(at: str, block: dict[str, Any]) -> list[str]:
    kind = block["type"]
    need: dict[str, tuple[str, type]] = {
        "text": ("text", str),
        "thinking": ("signature", str),
        "redacted_thinking": ("data", str),
        "tool_use": ("name", str),
        "server_tool_use": ("name", str),
        "tool_result": ("tool_use_id", str),
    }
    out = []
    if kind in need and not isinstance(block.get(need[kind][0]), need[kind][1]):
        out.append(f"{at}.{need[kind][0]}: required for a {kind} block")
    if kind == "thinking" and not isinstance(block.get("thinking"), str):
        out.append(f"{at}.thinking: required")
    if kind in ("tool_use", "server_tool_use") and (not isinstance(block.get("id"), str) or not isinstance(block.get("input"), dict)):
        out.append(f"{at}: {kind} needs an id and an object input")
    if kind == "image":
        source = block.get("source")
        if not isinstance(source, dict) or source.get("type") not in ("base64", "url", "file"):
            out.append(f"{at}.source: base64, url or file")
    if kind == "tool_result":
        content = block.get("content")
        if content is not None and not isinstance(content, (str, list)):
            out.append(f"{at}.content: a string or a list of blocks")
    return out


def _pairing(messages: list[Any]) -> list[str]:
    out = []
    ids: set[str] = set()
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), list):
            continue
        blocks = [b for b in msg["content"] if isinstance(b, dict)]
        if msg.get("role") == "assistant":
            server = set()
            for b in blocks:
                if b.get("type") in ("tool_use", "server_tool_use"):
                    if b.get("id") in ids:
                        out.append(f"messages[{i}]: tool_use ids must be unique ({b.get('id')})")
                    ids.add(b.get("id"))
                if b.get("type") == "server_tool_use":
                    server.add(b.get("id"))
                elif b.get("type", "").endswith(SERVER_RESULTS_SUFFIX) and b.get("tool_use_id") not in server:
                    out.append(f"messages[{i}]: {b['type']} must follow its server_tool_use ({b.get('tool_use_id')})")
            uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            if uses and nxt is not None:
                answered = {
                    b.get("tool_use_id")
                    for b in (nxt.get("content") if isinstance(nxt.get("content"), list) else ())
                    if isinstance(b, dict) and b.get("type") == "tool_result"
                }
                missing = [u for u in uses if u not in answered]
                if nxt.get("role") != "user" or missing:
                    out.append(f"messages[{i}]: tool_use ids were found without tool_result blocks immediately after: {missing}")
        else:
            prev = messages[i - 1] if i else {}
            asked = {
                b.get("id")
                for b in (prev.get("content") if isinstance(prev, dict) and isinstance(prev.get("content"), list) else ())
                if isinstance(b, dict) and b.get("type") == "tool_use"
            }
            for b in blocks:
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in asked:
                    out.append(f"messages[{i}]: unexpected tool_use_id in tool_result: {b.get('tool_use_id')}")
    return out


def _cache_control(body: dict[str, Any], path: str) -> list[str]:
    node: Any = body
    for part in path.replace("]", "").replace(".", "[").split("["):
        node = node[int(part)] if part.isdigit() else node[part]
    marker = node.get("cache_control")
    if not isinstance(marker, dict) or marker.get("type") != "ephemeral" or marker.get("ttl", "5m") not in ("5m", "1h"):
        return [f'{path}.cache_control: {{"type": "ephemeral"}} with an optional ttl of 5m or 1h']
    return []
