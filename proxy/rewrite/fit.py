"""The last step: what is still over the usable window is cut to fit; what cannot fit at all is refused, never sent.

Once pruned, archived and laid out, a request still over the usable window has the biggest texts of its turns cut
(``strategies.fit``); one still over the whole window even so is refused with the provider's own context-length error,
saying what did not fit (``refusal``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from conversation.task import head_end
from proxy.context import RequestContext
from proxy.dialects.errors import ProxyError
from proxy.know.options import TierOptions, WindowOptions
from proxy.rewrite.pruning import Outcome
from proxy.rewrite.results import Fitted
from strategies.fit import cuttable_text, fit
from strategies.pipeline import apply_replacements

Messages = list[dict[str, Any]]
MARGIN = 0.98
"""The tighter cuts aim this far below the whole window: room for an estimate that is a little short of the server's
count (calibration corrects it once the server has answered)."""


class FitStep:
    """Cuts what must be cut for the request to fit its usable window; notes a request that cannot fit at all."""

    name = "fit"

    def __init__(self, options: WindowOptions, tiers: TierOptions, cut: bool = True, archive: bool = True) -> None:
        self.options = options
        self.tiers = tiers
        self.cut = cut
        """Whether texts may be cut (``pruning.enabled``): with pruning off nothing is, and only the refusal remains."""
        self.archive = archive
        """Whether archives are on (``archive.enabled``): then whatever is still over the window is refused; with them off
        (a person's choice to keep every turn), only a request whose head and newest message alone are over it."""

    def apply(self, messages: Messages, ctx: RequestContext, outcome: Outcome | None, requested: str | None) -> Fitted:
        """The request cut to fit (a copy of ``outcome`` made smaller by what is cut), and its parts when it cannot fit at all;
        as it was when a person said pass (``requested``)."""
        m = ctx.measurement
        if m is None or outcome is None or m.count_text is None or requested == "pass":
            return Fitted(messages, outcome)
        scale = m.scale if m.scale > 0 else 1.0
        usable, window = m.budget.usable / scale, m.budget.window / scale
        tokens = outcome.raw_tokens_after or m.raw_tokens
        if tokens <= usable:
            return Fitted(messages, outcome)
        head = head_end(messages)
        over = int(tokens - usable) + 1, int(tokens - MARGIN * window) + 1
        cuts = fit(messages, head, over[0], m.budget.usable, m.count_text, m.window.tokens, ctx.recall_tool, over[1]) if self.cut else []
        out = apply_replacements(messages, cuts) if cuts else messages
        if cuts:
            saved = sum(r.tokens_saved for r in cuts)
            tokens -= saved
            outcome = outcome.copy()
            outcome.shrunk(tokens, m.calibrated(tokens), m.budget, self.tiers)
            outcome.refs.update({r.ref_id: r.kept_original for r in cuts})
            outcome.report["fit"] = {"items": len(cuts), "tokens_saved": round(saved * scale)}
        if tokens > window and self.options.refuse_over and m.window.source != "default":
            parts = _parts(out, head, tokens, scale, m.count_text)
            if self.archive or parts["tokens"] - parts["turns"] > m.budget.window:  # else even with no turn between
                return Fitted(out, outcome, parts)
        return Fitted(out, outcome)


def _parts(messages: Messages, head: int, tokens: int, scale: float, count_text: Callable[[str], int]) -> dict[str, int]:
    """The request's parts on the upstream's scale: its head (system text, preambles, the task), the turns after it but
    the newest message, the newest message, and the rest (the tools, what the layout added to the system text)."""

    def size(ms: Messages) -> int:
        return round(sum(count_text(_all_text(x)) for x in ms) * scale)

    newest = size(messages[-1:]) if len(messages) > head else 0
    first, turns, total = size(messages[:head]), size(messages[head:-1]), round(tokens * scale)
    return {"tokens": total, "head": first, "turns": turns, "newest": newest, "rest": max(0, total - first - turns - newest)}


def refusal(ctx: RequestContext, unfit: dict[str, int] | None) -> ProxyError | None:
    """The error for a request that cannot fit (``unfit``: its parts, ``FitStep``'s), in words the client's agent already
    acts on: OpenAI's ``context_length_exceeded``, Anthropic's "prompt is too long", then what did not fit."""
    m = ctx.measurement
    if unfit is None or m is None or ctx.mode != "on":
        return None
    window, total = m.window.tokens, unfit["tokens"]
    why = (
        f"Ruyi could not fit this request into the {window:,}-token window of {ctx.model or 'this model'} (source: "
        f"{m.window.source}) even after pruning, archiving and cutting the newest turns: the system text and the task "
        f"are {unfit['head']:,} tokens, the turns kept after them {unfit['turns']:,}, the newest message {unfit['newest']:,}, "
        f"the tools and the rest {unfit['rest']:,}. "
        "Shorten the system prompt or the task, or give the model a larger window (window.models)."
    )
    if ctx.wire == "anthropic":
        return ProxyError(400, "context_length_exceeded", f"prompt is too long: {total} tokens > {window} maximum. {why}")
    return ProxyError(
        400,
        "context_length_exceeded",
        f"This model's maximum context length is {window} tokens. However, your messages resulted in {total} tokens. {why}",
    )


def _all_text(message: dict[str, Any]) -> str:
    """What a message's size is counted on: its text (or its content's JSON), and its calls' names and arguments."""
    text = cuttable_text(message)
    if text is None:
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""
    calls = message.get("tool_calls") or ()
    fns = [c.get("function") or {} for c in calls if isinstance(c, dict)]
    return "\n".join([text, *(f"{f.get('name', '')} {f.get('arguments', '')}" for f in fns if isinstance(f, dict))])
