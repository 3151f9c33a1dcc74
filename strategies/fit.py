"""Fitting a request into its window when pruning and archiving could not: its newest turns' biggest texts cut.

Each is cut in the middle (head and tail kept, the original kept as a ref): the last resort before anything goes over."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from redaction.redact import redact
from strategies.base import CONTENT, Replacement
from strategies.placeholder import kept_as, ref_id

STRATEGY = "fit"
SHARES = (0.3, 0.1, 0.03)
"""Each pass cuts a text to at most this share of the usable window (the first pass is truncation's own cap), the next
pass only when the ones before did not free enough: a pure function of the texts and the window, so the same request
is cut the same way in every process and on every retry."""
MIN_CAP = 64
_RANK = {"tool": 0, "assistant": 1, "user": 2}
"""Tool outputs go first, then the agent's own words, then later user messages; the head (system text, preambles,
the task) is never cut."""


def cuttable_text(message: Any) -> str | None:
    """The text of a message that can be cut whole: a string, or a list of text parts only (a message carrying an
    image, a thinking block or anything opaque is left as it is)."""
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content or None
    if (
        isinstance(content, list)
        and content
        and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content)
    ):
        return "\n".join(p["text"] for p in content) or None
    return None


def fit(
    messages: Sequence[dict[str, Any]],
    head: int,
    over_by: int,
    usable: int,
    count_text: Callable[[str], int],
    window: int,
    recall_tool: str | None = None,
    over_window: int | None = None,
) -> list[Replacement]:
    """Replacements that cut the biggest texts after ``head`` until ``over_by`` tokens are saved, or nothing is left to
    cut; ``usable``: the window less the answer's reserve (the caps' base), ``window``: what the marker names.

    ``over_window``: what must be saved for the request not to be over the whole window; the tighter passes (after the
    first) run only for that, so the answer's reserve alone never costs more than truncation's own cap."""
    found: list[tuple[int, int, int, str]] = []
    for i in range(head, len(messages)):
        rank = _RANK.get(str(messages[i].get("role")))
        text = cuttable_text(messages[i]) if rank is not None else None
        if rank is not None and text is not None:
            found.append((rank, -count_text(text), i, text))
    found.sort()
    cut: dict[int, Replacement] = {}
    need = over_by
    for n, share in enumerate(SHARES):
        if n == 1 and over_window is not None:
            need -= over_by - over_window  # what is still to save for the whole window, no longer the usable part
        cap = max(MIN_CAP, int(share * usable))
        for _, minus_tokens, i, text in found:
            if need <= 0:
                return sorted(cut.values(), key=lambda r: r.index)
            tokens = -minus_tokens
            now = cut[i].tokens_after if i in cut else tokens
            if now <= cap:
                continue
            identity = str(messages[i].get("tool_call_id") or messages[i].get("role"))
            replacement = _cut(i, identity, text, tokens, cap, count_text, window, recall_tool)
            if replacement is None or replacement.tokens_after >= now:
                continue
            need -= now - replacement.tokens_after
            cut[i] = replacement
    return sorted(cut.values(), key=lambda r: r.index)


def _cut(
    index: int, identity: str, text: str, tokens: int, cap: int, count_text: Callable[[str], int], window: int, recall_tool: str | None
) -> Replacement | None:
    """The text cut in its middle to about ``cap`` tokens, with a first line that says so and where the whole is."""
    ref = ref_id(identity, CONTENT, text)
    shown = redact(text)  # what is kept is Ruyi's text: redacted whole before it is clipped
    header = f"[ruyi: cut from {tokens:,} tokens to fit the {window:,}-token window (kept its start and end); {kept_as(ref, recall_tool)}]"
    budget = cap - count_text(header) - 8
    if budget <= 0:
        return None
    chars = max(1, int(len(shown) * budget / max(1, tokens)))
    for _ in range(8):
        start, end = _snap(shown, chars // 2, len(shown) - chars // 2)
        if end <= start:
            return None
        new_text = f"{header}\n{shown[:start]}\n[… {end - start:,} characters cut …]\n{shown[end:]}"
        after = count_text(new_text)
        if after <= cap:
            return Replacement(index, CONTENT, new_text, text, tokens, after, ref, STRATEGY, f"over the {window:,}-token window")
        chars = int(chars * min(0.9, cap / after))  # at least a tenth less each time: past the line it snapped to
    return None


def _snap(text: str, start: int, end: int) -> tuple[int, int]:
    """The cut's bounds moved back to whole lines where a line ends near them (within a fifth of what is kept)."""
    slack = max(1, start // 5)
    newline = text.rfind("\n", max(0, start - slack), start)
    start = newline if newline > 0 else start
    newline = text.find("\n", end, end + slack)
    end = newline + 1 if newline >= 0 else end
    return start, end
