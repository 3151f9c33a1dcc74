"""The agent's own newest archived messages, verbatim: what it wrote and ran is what its next steps repeat.

On the public traces two thirds of the terms an agent's next message reuses from archived history come from its own
archived messages (the scripts it wrote and rewrote, the commands it ran), and a summary of a stretch keeps few of
them (a bag of identifiers would keep the names and lose what was done with them). This keeps lines of those
messages as they were — their words and their calls' arguments, decoded — within a budget: a line is kept only where
it names something (an identifier, a path, a dotted name, a printed range like ``870p``) that no other kept line, nor
what the request holds anyway, names, and the lines chosen are those naming the most such things for their length (a
name counting more the more archived messages name it), newer messages first among equals (each message back weighs ``DECAY`` as much): a long script written once, 30
messages back, whose names the next step repeats, wins over the one-word lines of the newest messages, and a script
rewritten five times costs its lines once. Tool outputs are not kept here (tried: a few novel lines of each archived
output took the room of the agent's lines and kept fewer of the terms its next steps used)."""

from __future__ import annotations

import heapq
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conversation.messages import message_text
from summaries.evidence import terms

CHARS_PER_TOKEN = 3
"""Characters per token the budget is counted with (code and paths run about 3 to the token in cl100k)."""
LINE_CHARS = 240
"""A kept line is cut to this many characters."""
DECAY = 0.98
"""A line of a message one assistant message older weighs this much of the same line in the newer one (BENCHMARKS.md,
"fifth pass": 0.9–1.0 tried)."""
SPAN = 20
"""Lines are chosen among the newest messages holding about this many times the budget of candidate lines (bounds the
work on a long archived stretch; far older lines weigh too little to be chosen anyway)."""
COUNTED_CHARS = 50_000
"""How much of each archived message is read for how often a name comes back (a huge output costs no more than this)."""
_DIGIT_LED = re.compile(r"(?<![\w.])\d+[A-Za-z_][A-Za-z0-9_]{0,5}(?!\w)")
"""Short words led by digits (``870p`` of ``sed -n '850,870p'``, ``2to3``): where the agent was looking (a long run
of letters and digits, a hash or a key, is no such word)."""


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


def _named(text: str) -> set[str]:
    """What a line names: its terms and its digit-led words."""
    return terms(text) | set(_DIGIT_LED.findall(text))


def _named_in(messages: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each name's weight: 1 + log2 of how many of ``messages`` (the agent's words and calls, the tools' outputs) name
    it. A name the stretch came back to is one its next steps come back to (BENCHMARKS.md, "seventh pass": +0.8 point
    at 8k)."""
    count: Counter[str] = Counter()
    for m in messages:
        text = said(m) if m.get("role") == "assistant" else message_text(m) or ""
        count.update(_named(text[:COUNTED_CHARS]))
    return {name: 1 + math.log2(n) for name, n in count.items() if n > 1}


def _cut(line: str) -> str:
    return line.rstrip() if len(line) <= LINE_CHARS else line.rstrip()[: LINE_CHARS - 1] + "…"


def recent_work(
    messages: Sequence[Mapping[str, Any]], first: int, budget_tokens: int, known: str = "", clean: Callable[[str], str] | None = None
) -> str:
    """Lines of the assistant messages of ``messages`` (client positions from ``first``), grouped by message, oldest
    first, each group as ``[n] its lines`` (in their order), within ``budget_tokens``. A line is kept when it names
    something (an identifier, a path, a dotted name, a printed range) that neither another kept line nor ``known`` (what
    the request holds anyway: the summary, the head, the newest turns) names; among those, greedily, the lines naming
    the most new things per character (the ``[n]`` label counted with the first line of a message), a message's weight
    ``DECAY`` times that of the assistant message after it. Deterministic: ties go to the newer line. Empty when none
    fits. ``clean`` (redaction) is applied to each message's whole text before it is cut into lines: a line taken
    alone must not lose the context that shows it is a secret (a private key's body without its armour, a value
    whose label is on the line above)."""
    budget = budget_tokens * CHARS_PER_TOKEN
    if budget <= 0:
        return ""
    seen = _named(known)
    weight = _named_in(messages)
    lines: list[tuple[float, int, int, str, frozenset[str]]] = []  # weight, message, line, text, what it names anew
    size, age = 0, 0
    for k in range(len(messages) - 1, -1, -1):
        if messages[k].get("role") != "assistant" or size > SPAN * budget:
            continue
        whole = said(messages[k])
        for i, line in enumerate((clean(whole) if clean else whole).splitlines()):
            text = _cut(line)
            new = _named(text) - seen
            if new:
                lines.append((DECAY**age, k, i, text, frozenset(new)))
                size += len(text) + 1
        age += 1
    chosen: dict[int, list[tuple[int, str]]] = {}
    held: set[str] = set()
    used = 0

    def cost(n: int) -> int:
        _, k, _, text, _ = lines[n]
        return len(text) + 1 + (0 if k in chosen else len(f"[{first + k}] "))

    def value(n: int) -> float:
        return lines[n][0] * sum(weight.get(name, 1.0) for name in lines[n][4] - held) / cost(n)

    heap = [(-value(n), n) for n in range(len(lines))]
    heapq.heapify(heap)
    # lazy greedy: a line's value falls as lines naming the same things are chosen, so one still on top once its value
    # is brought up to date is taken; it rises only when its message's label is paid by another of its lines, and such a
    # line is then merely taken a little later than it could have been
    while heap:
        _, n = heapq.heappop(heap)
        now = value(n)
        if now <= 0:
            continue
        if heap and now < -heap[0][0]:
            heapq.heappush(heap, (-now, n))
            continue
        if used + cost(n) > budget:
            continue
        used += cost(n)
        _, k, i, line_text, named = lines[n]
        chosen.setdefault(k, []).append((i, line_text))
        held |= named
    return "\n".join(f"[{first + k}] " + "\n".join(text for _, text in sorted(chosen[k])) for k in sorted(chosen))
