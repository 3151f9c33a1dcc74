"""The usual answers to a full context, as rewrites the replay harness can measure beside Ruyi.

Each ``make_*(window)`` returns a fresh rewrite for one trace: ``(messages, tools) -> messages``.
Budget for the trimmers and trigger for clearing: ``window - reserve``, reserve = max(2000, 15 % of
the window) (LongCtx's reserveRatio / reserveMinTokens). Anthropic's own default trigger is 100,000
input tokens, meant for 200k windows; scaling it to the usable window keeps the comparison fair.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from proxy.replay.metrics import canonical
from proxy.replay.run import Cl100kCounter, Message, Rewrite, Tools
from summaries.extractive import Extractor
from summaries.render import compact

CLEARED = "[cleared]"
"""What Anthropic-style clearing leaves of a tool result (LangChain's ClearToolUsesEdit default)."""
_TOOL_OUTPUT = re.compile(r"^\s*(<returncode>|OBSERVATION:)|\(Current directory: [^)\n]*\)\s*bash-\$\s*$")


def reserve(window: int) -> int:
    """Tokens kept free for the reply: 15 % of the window, at least 2000."""
    return max(2000, int(0.15 * window))


def budget(window: int) -> int:
    """Tokens a request may use: the window less the reserve."""
    return window - reserve(window)


def is_observation(messages: Sequence[Message], i: int) -> bool:
    """An environment output: a ``tool`` message, or a ``user`` message right after an assistant message
    that looks like tool output (mini-swe-agent ``<returncode>…``, SWE-agent ``OBSERVATION:`` or its
    ``(Current directory: …) bash-$`` footer). The needles metric still counts such user messages."""
    m = messages[i]
    if m.get("role") == "tool":
        return True
    content = m.get("content")
    follows_assistant = i > 0 and messages[i - 1].get("role") == "assistant"
    return m.get("role") == "user" and follows_assistant and isinstance(content, str) and bool(_TOOL_OUTPUT.search(content))


def _replace_observations(messages: list[Message], keep: int, placeholder: Callable[[Message], str]) -> list[Message]:
    """All observations but the last ``keep`` with their content replaced (new dicts; input untouched)."""
    found = [i for i in range(len(messages)) if is_observation(messages, i)]
    old = set(found[: max(0, len(found) - keep)])
    return [{**m, "content": placeholder(m)} if i in old else m for i, m in enumerate(messages)]


def _lines_omitted(message: Message) -> str:
    return "[old observation omitted]"


def send_everything(window: int) -> Rewrite:
    """The request unchanged."""
    return lambda messages, tools: messages


def make_masking(window: int, keep: int = 10) -> Rewrite:
    """Observation masking (SWE-agent's LastNObservations): every request, observations older than the
    last ``keep`` become a one-line placeholder. Never over budget by design; it does not look."""
    return lambda messages, tools: _replace_observations(messages, keep, _lines_omitted)


def make_clearing(window: int, keep: int = 3, trigger: int | None = None) -> Rewrite:
    """Anthropic's ``clear_tool_uses_20250919``: when the request's input tokens exceed ``trigger``,
    clear the content of all tool results but the most recent ``keep``; recomputed on every request
    (server-side, from the client's full history), clear_at_least = 0, tool inputs kept."""
    limit = budget(window) if trigger is None else trigger
    count = Cl100kCounter()

    def rewrite(messages: list[Message], tools: Tools) -> list[Message]:
        if count(messages, tools).total <= limit:
            return messages
        return _replace_observations(messages, keep, lambda m: CLEARED)

    return rewrite


def make_langchain_trim(window: int) -> Rewrite:
    """langchain_core's ``trim_messages``: strategy "last", include_system, start_on "human",
    cl100k counter, max_tokens = budget. Messages it keeps unchanged go back as the original dicts
    (its converter's round trip re-spaces tool-call arguments, which would read as a rewrite)."""
    from langchain_core.messages import BaseMessage, convert_to_messages, convert_to_openai_messages, trim_messages

    count = Cl100kCounter()

    def rewrite(messages: list[Message], tools: Tools) -> list[Message]:
        converted = convert_to_messages(messages)
        originals = {id(lc): m for lc, m in zip(converted, messages)}

        def as_dict(lc: BaseMessage) -> Message:
            return originals.get(id(lc)) or convert_to_openai_messages(lc)

        def counter(batch: list[BaseMessage]) -> int:
            return count([as_dict(lc) for lc in batch], None).total

        kept = trim_messages(converted, max_tokens=budget(window), token_counter=counter, strategy="last",
                             include_system=True, start_on="human")  # fmt: skip
        return [as_dict(lc) for lc in kept]

    return rewrite


def make_litellm_trim(window: int) -> Rewrite:
    """litellm's ``trim_messages(messages, max_tokens=budget)``: keeps the newest messages that fit
    (shortening one if needed), merges system messages, re-appends trailing tool results.

    Its algorithm is unchanged, but while it runs its module's ``token_counter`` is our cached cl100k
    counter: litellm re-tokenises the whole kept list once per message considered (seconds per large
    request, ~10 minutes per window on our traces); ours gives the same kind of count in milliseconds
    and is the one the window is measured with."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import
    from unittest import mock

    import litellm.utils

    count = Cl100kCounter()

    def token_counter(model: str | None = None, messages: list[Message] | None = None, **_: object) -> int:
        return count(messages or [], None).total

    def rewrite(messages: list[Message], tools: Tools) -> list[Message]:
        with mock.patch.object(litellm.utils, "token_counter", token_counter):
            trimmed = litellm.utils.trim_messages(messages, max_tokens=budget(window))
        return list(trimmed[0] if isinstance(trimmed, tuple) else trimmed)

    return rewrite


class SummarizeEverything:
    """Codex / Claude Code style compaction: when a request reaches ``trigger`` of the budget, one summary replaces
    the whole history; what stays is the system messages, the newest user messages up to min(20k tokens, half the
    window) and the summary (a user message). Later requests continue from that history until the next compaction.

    The summarizer call is priced like a request (``side_requests``): the history it reads, cached as far as it
    repeats the previous request, plus its instruction. Its summary here is Ruyi's extractive digest with a
    2,000-token budget, standing in for an LLM's (their size, not their wording, is what the measures see)."""

    INSTRUCTION = {"role": "user", "content": "Summarize the conversation so far so that the work can continue from the summary alone."}

    def __init__(self, window: int, trigger: float = 0.92, keep_user_tokens: int = 20_000, summary_tokens: int = 2_000) -> None:
        self.limit = trigger * budget(window)
        self.keep_user = min(keep_user_tokens, window // 2)
        self.summary_tokens = summary_tokens
        self.count = Cl100kCounter()
        self.extractor = Extractor()
        self.history: list[Message] | None = None
        self.cut = 0
        self.compactions = 0
        self.previous: list[Message] = []
        self.calls: list[tuple[int, int]] = []

    def __call__(self, messages: list[Message], tools: Tools) -> list[Message]:
        sent = messages if self.history is None else self.history + messages[self.cut :]
        if self.count(sent, tools).total >= self.limit:
            self.calls.append(self._summarizer_call(sent + [self.INSTRUCTION], tools))
            sent = self.history = self._compacted(messages)
            self.cut = len(messages)
        self.previous = sent
        return sent

    def side_requests(self) -> list[tuple[int, int]]:
        calls, self.calls = self.calls, []
        return calls

    def _summarizer_call(self, request: list[Message], tools: Tools) -> tuple[int, int]:
        count = self.count(request, tools)
        cached = count.tools if self.previous else 0
        for before, now, n in zip(self.previous, request, count.messages):
            if canonical(before) != canonical(now):
                break
            cached += n
        return count.total, cached

    def _compacted(self, messages: list[Message]) -> list[Message]:
        self.compactions += 1
        system = [m for m in messages if m.get("role") in ("system", "developer")]
        users: list[Message] = []
        total = 0
        for m in reversed([m for m in messages if m.get("role") == "user"]):
            n = self.count.message(m)
            if total + n > self.keep_user:
                break
            users.insert(0, m)
            total += n
        task = next((m.get("content") for m in messages if m.get("role") == "user"), None)
        digest = self.extractor.digest(messages)
        text = compact(digest, task if isinstance(task, str) else None, self.summary_tokens, self.count.text)
        summary = {"role": "user", "content": f'<compacted-history n="{self.compactions}">\n{text}\n</compacted-history>'}
        return system + users + [summary]


def make_summarize_everything(window: int) -> Rewrite:
    """One summary of everything at 92 % of the budget (Codex / Claude Code style); see SummarizeEverything."""
    return SummarizeEverything(window)
