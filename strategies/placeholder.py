"""Placeholders that say what was replaced and how to get it back, and stable ref ids; their text is redacted when made."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conversation.messages import text_key
from redaction.redact import redact, redact_value
from strategies.base import ARGS_PREFIX, CONTENT, Replacement

if TYPE_CHECKING:
    from conversation.messages import Call
    from strategies.base import StrategyContext
    from strategies.conversation import Conversation

KEEP_ARGUMENT_CHARS = 80
WRAPPER_LINE = re.compile(r"^\s*(?:</?[\w-]+>|<returncode>-?\d+</returncode>|\((?:Open file|Current directory): .*\)|bash-\$)\s*$")
"""A line an agent wraps every output in (mini-swe-agent's `<returncode>0</returncode>` and `<output>`,
SWE-agent's `(Open file: …)` footer and prompt): it says nothing of the output itself."""
LABEL_CHARS = 60
"""A placeholder names its call by at most this many characters of its command."""
"""An argument value whose JSON is at most this long (a path, a line number) is kept as it is."""

HASH_PIECE_CHARS = 1 << 20
"""An original is hashed this many characters at a time (the same digest as hashing it whole)."""


def ref_id(identity: str, target: str, original: str) -> str:
    """A short stable id of an original: a hash of its text and where it sits (tool_call_id, target)."""
    digest = hashlib.sha256(f"{identity}\x00{target}\x00".encode("utf-8", "surrogatepass"))
    for start in range(0, len(original), HASH_PIECE_CHARS):  # never a second whole copy of a huge original
        digest.update(original[start : start + HASH_PIECE_CHARS].encode("utf-8", "surrogatepass"))
    return "r" + digest.hexdigest()[:12]


def kept_as(ref: str, tool: str | None = None) -> str:
    """How a placeholder names its original: with Ruyi's recall tool offered, the call that brings it back; else the
    ref id is said to be for a person or a tool (``GET /ruyi/v1/refs/<id>``), after what the model itself can do."""
    if tool:
        return f"original kept: call {tool} with id {ref} to get it back"
    return f"original kept for a person or tool as ref {ref}"


def placeholder(what: str, label: str, tokens: int, why: str, how: str, ref: str, first_line: str | None = None, tool: str | None = None) -> str:
    """`[ruyi: older output of `cmd` (1,240 tokens) replaced: why; how; original kept for a person or tool as
    ref r…]`, nothing session-dependent; ``how`` is what the model can do to get the content back.

    The label is clipped to LABEL_CHARS: a placeholder stays in every later request, so its every
    token is paid for again and again. Label and first line are redacted first (a command's key must not
    reach the store, nor survive half-clipped).
    """
    first = f", first line `{first_line}`" if first_line else ""
    label = redact(label)
    label = label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"
    return f"[ruyi: {what} of `{label}` ({tokens:,} tokens{first}) replaced: {why}; {how}; {kept_as(ref, tool)}]"


def first_line(text: str, label: str, limit: int = 40) -> str | None:
    """The first non-empty line of text, redacted and clipped, for a placeholder; None when it adds nothing."""
    line = next((ln.strip() for ln in text.split("\n", 8)[:8] if ln.strip() and not WRAPPER_LINE.match(ln)), "")
    line = redact(line).replace("`", "'")
    if not line or line == label:
        return None
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _identity(conversation: Conversation, call: Call, index: int) -> str:
    return call.call_id or f"#{index}"


Built = tuple[str, int, int, str]
"""A replacement's text, tokens before and after, and ref id: what building it costs, remembered."""


def remembered(ctx: StrategyContext, key: tuple[Any, ...], build: Callable[[], Built | None]) -> Built | None:
    """build(), remembered in ctx.memo under key (every input of build is in the key; texts by text_key)."""
    if ctx.memo is None:
        return build()
    key = (*key, ctx.min_saving_tokens, ctx.count_tokens, ctx.recall_tool)
    found: Built | bool | None = ctx.memo.get(key)
    if found is None:
        found = ctx.memo[key] = build() or False  # False: nothing worth replacing, remembered too
    return found if isinstance(found, tuple) else None


def replace_output(
    conversation: Conversation,
    call: Call,
    ctx: StrategyContext,
    strategy: str,
    why: str,
    how: str = "run it again if you need it",
    what: str = "older output",
) -> Replacement | None:
    """The whole result of call replaced by a placeholder, if that saves at least ctx.min_saving_tokens."""
    if call.result is None or call.result in conversation.protected:
        return None
    original = conversation.texts[call.result]
    if not original:
        return None
    identity, label = _identity(conversation, call, call.result), call.action.label

    def build() -> Built | None:
        ref = ref_id(identity, CONTENT, original)
        before = ctx.count_tokens(original)
        if before < ctx.min_saving_tokens:
            return None
        text = placeholder(what, label, before, why, how, ref, first_line(original, label), ctx.recall_tool)
        after = ctx.count_tokens(text)
        return (text, before, after, ref) if before - after >= ctx.min_saving_tokens else None

    built = remembered(ctx, ("output", identity, text_key(original), label, why, how, what), build)
    if built is None:
        return None
    text, before, after, ref = built
    return Replacement(call.result, CONTENT, text, original, before, after, ref, strategy, why)


def replace_arguments(conversation: Conversation, call: Call, ctx: StrategyContext, strategy: str, why: str, how: str) -> Replacement | None:
    """The call's long argument values replaced by placeholder strings; every key kept, JSON stays valid."""
    if call.call_id is None or call.index in conversation.protected or not call.arguments:
        return None
    call_id, arguments, label = call.call_id, call.arguments, call.action.label
    target = ARGS_PREFIX + call_id
    built = remembered(
        ctx, ("arguments", call_id, text_key(arguments), label, why, how), lambda: _arguments_placeholder(arguments, target, label, ctx, why, how)
    )
    if built is None:
        return None
    text, before, after, ref = built
    return Replacement(call.index, target, text, arguments, before, after, ref, strategy, why)


def _arguments_placeholder(arguments: str, target: str, label: str, ctx: StrategyContext, why: str, how: str) -> Built | None:
    try:
        args = json.loads(arguments)
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    before = ctx.count_tokens(arguments)
    if before < ctx.min_saving_tokens:
        return None
    ref = ref_id(target[len(ARGS_PREFIX) :], target, arguments)
    new: dict[str, Any] = {}
    for key, value in args.items():
        encoded = json.dumps(value, ensure_ascii=False)
        if len(encoded) <= KEEP_ARGUMENT_CHARS:
            new[key] = value
            continue
        tokens = ctx.count_tokens(value if isinstance(value, str) else encoded)
        new[key] = placeholder(f"`{key}` argument", label, tokens, why, how, ref, tool=ctx.recall_tool)
    if new == args:
        return None
    new = redact_value(new)  # the values kept as they were are Ruyi's text now: redacted like the rest
    text = json.dumps(new, ensure_ascii=False)
    after = ctx.count_tokens(text)
    return (text, before, after, ref) if before - after >= ctx.min_saving_tokens else None
