"""Anthropic bodies whose messages were removed (an archive) or added: whole block groups dropped, additions appended."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.dialects.anthropic import Origin, _is_text, _parts, write_back
from proxy.dialects.base import Messages


def with_positions(body: dict[str, Any], origins: list[Origin], before: Messages, after: Messages, positions: Sequence[int]) -> dict[str, Any]:
    """The body once messages were removed (an archive) or added: a removed message's blocks go as whole groups
    (a tool_use with its tool_result), the rest stay the very objects sent; what was appended to a kept message
    (the archive block, a recall block) goes after its last block, so after its last breakpoint, adding none. A system
    message added after a user message (the archive block after the task) goes after that message's last block (the
    top-level ``system`` and the task stay as sent, so cached); added first, it goes after the ``system``'s last block."""
    out = dict(body)
    full, tails = list(before), {}
    after_task: dict[int, list[Any]] = {}
    prev = None
    for p, new in zip(positions, after):
        if p < 0:
            if new.get("role") != "system":
                raise ValueError("only a system message can be added to an Anthropic body")
            if prev is not None and origins[prev][0] in ("user", "plain") and before[prev].get("role") == "user":
                after_task.setdefault(prev, []).extend(_parts(new.get("content")))  # the archive block after the task
            else:
                tails[-1] = _parts(new.get("content"))
            continue
        prev = p
        old = before[p]
        grown = _appended(old.get("content"), new.get("content"))
        if grown is not None and {**new, "content": old.get("content")} == old:
            tails[p] = grown
        else:
            full[p] = new
    native = write_back(body["messages"], origins, before, full)
    kept = set(p for p in positions if p >= 0)
    drop: dict[int, set[int]] = {}
    for p, (kind, i, blocks) in enumerate(origins):
        if p in kept or kind == "system":
            continue
        if kind in ("tool", "user"):
            drop.setdefault(i, set()).update(blocks)
        else:
            drop[i] = set(range(len(native[i]["content"]) if isinstance(native[i].get("content"), list) else 0)) | {-1}
    for p, parts in tails.items():
        if p == -1 or origins[p][0] == "system":
            system = out.get("system")
            text = "".join(x.get("text", "") for x in parts)
            out["system"] = (system + BLOCK_GAP + text if system else text) if isinstance(system, str) or not system else [*system, *parts]
        elif isinstance(native[origins[p][1]].get("content"), list):
            i = origins[p][1]
            native[i] = {**native[i], "content": [*native[i]["content"], *parts]}
        else:
            full[p] = after[positions.index(p)]
            native = write_back(native, origins, before, full)
    for p, parts in after_task.items():  # after the user message's last block: its breakpoints, and the system, stay as sent
        i = origins[p][1]
        content = native[i].get("content")
        if isinstance(content, str) and all(_is_text(x) and set(x) == {"type", "text"} for x in parts):
            native[i] = {**native[i], "content": content + BLOCK_GAP + BLOCK_GAP.join(x["text"] for x in parts)}
        else:
            native[i] = {**native[i], "content": [*_parts(content), *parts]}
    messages = []
    for i, msg in enumerate(native):
        if i in drop:
            if -1 in drop[i]:
                continue
            msg = {**msg, "content": [b for j, b in enumerate(msg["content"]) if j not in drop[i]]}
        messages.append(msg)
    out["messages"] = _valid(_paired(messages))
    return out


BLOCK_GAP = "\n\n"


def _appended(old: Any, new: Any) -> list[Any] | None:
    """The parts appended to old content (None when it changed otherwise)."""
    if isinstance(old, list) and isinstance(new, list) and len(new) > len(old) and new[: len(old)] == old:
        return new[len(old) :]
    if isinstance(old, str) and isinstance(new, str) and old and len(new) > len(old) and new.startswith(old):
        return [{"type": "text", "text": new[len(old) :].lstrip("\n")}]
    return None


def _paired(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without tool_use blocks whose tool_result went, nor results whose call went; emptied messages dropped."""

    def ids(kind: str, key: str) -> set[Any]:
        return {
            b.get(key) for m in messages if isinstance(m.get("content"), list) for b in m["content"] if isinstance(b, dict) and b.get("type") == kind
        }

    uses, results = ids("tool_use", "id"), ids("tool_result", "tool_use_id")
    out = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            keep = [
                b
                for b in content
                if not (
                    isinstance(b, dict)
                    and (
                        (b.get("type") == "tool_use" and b.get("id") not in results)
                        or (b.get("type") == "tool_result" and b.get("tool_use_id") not in uses)
                    )
                )
            ]
            if not keep:
                continue
            if len(keep) != len(content):
                msg = {**msg, "content": keep}
        out.append(msg)
    return out


def _valid(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Roles alternating from a user message: a leading assistant message goes, same-role neighbours merge."""
    while messages and messages[0].get("role") != "user":
        messages = messages[1:]
    out: list[dict[str, Any]] = []
    for msg in messages:
        if out and out[-1].get("role") == msg.get("role"):
            out[-1] = {**out[-1], "content": _parts(out[-1].get("content")) + _parts(msg.get("content"))}
        else:
            out.append(msg)
    return out
