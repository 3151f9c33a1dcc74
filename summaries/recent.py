"""The agent's own newest archived messages, verbatim: what it wrote and ran is what its next steps repeat.

On the public traces two thirds of the terms an agent's next message reuses from archived history come from its own
archived messages (the scripts it wrote and rewrote, the commands it ran), and a summary of a stretch keeps few of
them (a bag of identifiers would keep the names and lose what was done with them). This keeps the newest of those
messages line by line as they were — their words and their calls' arguments, decoded — within a budget, a line kept
only where it names something no newer kept line, nor what the request holds anyway, names: a script rewritten five
times costs its lines once, and the lines that changed with the message they changed in. Tool outputs are not kept
here (tried: a few novel lines of each archived output took the room of the agent's lines and kept fewer of the
terms its next steps used)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from conversation.messages import message_text
from summaries.evidence import terms

CHARS_PER_TOKEN = 3
"""Characters per token the budget is counted with (code and paths run about 3 to the token in cl100k)."""
LINE_CHARS = 240
"""A kept line is cut to this many characters."""
MIN_PART = 120
"""Older messages are looked at while at least this many characters of the budget are left."""


def _arguments(arguments: Any) -> str:
    """A call's arguments as the text they hold: JSON strings decoded (a ``\\n`` inside is a line break)."""
    if isinstance(arguments, str):
        text: str = arguments
        try:
            arguments = json.loads(text)
        except ValueError:
            return text
    if isinstance(arguments, Mapping):
        return "\n".join(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in arguments.values())
    return "" if arguments is None else str(arguments)


def said(message: Mapping[str, Any]) -> str:
    """An assistant message's words and its calls (``name: arguments``), as the lines the agent wrote."""
    parts = [message_text(message) or ""]
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            function = call.get("function") or {}
            parts.append(f"{function.get('name', '')}: {_arguments(function.get('arguments'))}")
    return "\n".join(p for p in parts if p.strip())


def recent_work(messages: Sequence[Mapping[str, Any]], first: int, budget_tokens: int, known: str = "") -> str:
    """The newest assistant messages of ``messages`` (client positions from ``first``), oldest first, each as
    ``[n] its lines``, within ``budget_tokens``. A line is kept when it names something (an identifier, a path, a
    dotted name) that neither a newer kept line nor ``known`` (what the request holds anyway: the summary, the head,
    the newest turns) names; so a script rewritten five times is kept once, its lines that changed with the version they
    changed in. Empty when none fits."""
    budget = budget_tokens * CHARS_PER_TOKEN
    seen = terms(known)
    picked: list[str] = []
    used = 0
    for k in range(len(messages) - 1, -1, -1):
        if messages[k].get("role") != "assistant" or budget - used < MIN_PART:
            continue
        lines: list[str] = []
        label = f"[{first + k}] "
        size = len(label)
        for line in said(messages[k]).splitlines():
            new = terms(line) - seen
            if not new:
                continue
            text = line.rstrip() if len(line) <= LINE_CHARS else line.rstrip()[: LINE_CHARS - 1] + "…"
            if used + size + len(text) + 1 > budget:
                break
            lines.append(text)
            size += len(text) + 1
            seen |= new
        if lines:
            picked.append(label + "\n".join(lines))
            used += size
    return "\n".join(reversed(picked))
