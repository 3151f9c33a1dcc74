"""Sub-agents (seed 004): task calls waiting for their child, the child recognised by its first message, its snapshot."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from conversation.task import stripped, task_text
from memory.anchors.anchor import Anchor
from memory.anchors.render import compact as anchor_compact
from memory.lru import LRU

TASK_TOOLS = frozenset({"Task", "task", "Agent", "agent", "dispatch_agent", "spawn_agent", "subagent", "delegate", "new_task"})
"""Tools whose call starts a sub-agent (Claude Code's Task and Agent, opencode's task, Cline's new_task, and the like)."""
PROMPT_KEYS = ("prompt", "task", "instructions", "message")
SPAWNS_KEPT = 1000
SPAWN_TTL_S = 3600.0
SNAPSHOT_HEADER = '<ruyi-snapshot parent="{parent}">'
SNAPSHOT_FOOTER = "</ruyi-snapshot>"


def prompt_hash(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def task_prompts(tool_calls: Sequence[Mapping[str, Any]]) -> list[str]:
    """The prompts of the sub-agent calls among these tool calls."""
    found = []
    for call in tool_calls or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping) or fn.get("name") not in TASK_TOOLS:
            continue
        args = fn.get("arguments")
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            continue
        if isinstance(args, Mapping):
            prompt = next((args[k] for k in PROMPT_KEYS if isinstance(args.get(k), str) and args[k].strip()), None)
            if prompt:
                found.append(prompt)
    return found


def prompt_candidates(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a child's opening may hold of its parent's task-call prompt: its first user message whole, without the
    agent's wrappers (Claude Code's and opencode's ``<system-reminder>`` blocks before or after the prompt), each of
    its text parts, and the request the head carries (after an agent's environment preamble)."""
    found: list[str] = []
    first = next((m for m in messages if m.get("role") == "user"), None)
    if first is None:
        return found
    whole = first_user_text(messages) or ""
    content = first.get("content")
    parts = (
        [p["text"] for p in content if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str)]
        if isinstance(content, list)
        else []
    )
    for text in (whole, stripped(whole), *parts, *(stripped(p) for p in parts), task_text(messages) or ""):
        if text.strip() and text not in found:
            found.append(text)
    return found


def first_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for msg in messages:
        if msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text")
            return None
    return None


class Spawns:
    """Sub-agent calls seen in answers and not yet claimed: (agent, prompt hash) → the parent session and when (wall
    clock). Held in memory for the request path, bounded; the keeper keeps them in the store too and restores them at
    start-up, so a restart between a parent's call and its child's first request still recognises the child."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: LRU[tuple[str, str], tuple[str, float]] = LRU(SPAWNS_KEPT)
        """Written oldest first, read with peek: the newest SPAWNS_KEPT calls kept."""

    def add(self, agent_id: str, parent_id: str, prompts: Sequence[str]) -> list[str]:
        """Remember these prompts' calls; returns their hashes (what the store keeps: never the prompt)."""
        hashes = [prompt_hash(p) for p in prompts]
        self.restore([(agent_id, h, parent_id, self._clock()) for h in hashes])
        return hashes

    def restore(self, rows: Iterable[tuple[str, str, str, float]]) -> None:
        """(agent, prompt hash, parent, when) rows, oldest first: from the store at start-up, or just seen."""
        with self._lock:
            for agent_id, hashed, parent_id, at in rows:
                self._pending[(agent_id, hashed)] = (parent_id, at)

    def parent_of(self, agent_id: str, first_user: str | Sequence[str] | None) -> str | None:
        """The session whose pending task call has this prompt, or one of these (the same agent's only), if one is waiting."""
        texts = [first_user] if isinstance(first_user, str) else list(first_user or ())
        now = self._clock()
        with self._lock:
            for text in texts:
                found = self._pending.peek((agent_id, prompt_hash(text))) if text else None
                if found is not None and now - found[1] <= SPAWN_TTL_S:
                    return found[0]
        return None


def snapshot_text(parent_id: str, compact_form: str, anchors: Sequence[Anchor]) -> str:
    """What every child of a parent state receives, byte for byte: the parent's compact form and its active anchors."""
    active = [anchor_compact(a) for a in anchors if a.status == "active"]
    parts = [SNAPSHOT_HEADER.format(parent=parent_id), compact_form.strip()]
    if active:
        parts += ["", "## Active anchors", *active]
    parts.append(SNAPSHOT_FOOTER)
    return "\n".join(parts)


def with_snapshot(messages: list[dict[str, Any]], snapshot: str) -> list[dict[str, Any]]:
    """The messages with the snapshot first: at the head of the leading system message, or as a system message of its own."""
    head = messages[0] if messages else None
    if head is not None and head.get("role") == "system" and isinstance(head.get("content"), str):
        return [{**head, "content": snapshot + "\n\n" + head["content"]}, *messages[1:]]
    return [{"role": "system", "content": snapshot}, *messages]
