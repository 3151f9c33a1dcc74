"""Offline replay of a recorded trace as the requests its agent made, measuring savings, cache and safety.

A trace (OpenAI chat format: ``{"model", "messages", "tools"}``, or Anthropic's ``{"system", "messages", "tools"}``,
converted as the Anthropic dialect does) is replayed as its requests: every
prefix ending just before an assistant message, then the whole trace (unless it ends with an
assistant message). Each request goes through ``rewrite`` (one stateful session per trace) and is
measured. Definitions (they reproduce the table in DESIGN.md):

- tokens: cl100k_base; per message 3 + role + content text + each tool call's name and arguments
  (+ name if present); per request + the ``tools`` JSON + 3 for reply priming.
- over the window: a request's tokens > ``window`` (``32_000`` for "32k").
- cached tokens: the common prefix, message by message, of this rewritten request and the previous
  one (identical canonical JSON: sorted keys), counted in tokens, plus the tools schema (one per
  trace, sent first). The first request of a trace has none.
- cache hit rate: cached tokens / the previous request's messages + tools tokens (summed over the
  requests that have one): the share of what was sent last time that the cache serves again.
- cost: each request's tokens at ``prices.input`` except its cached tokens at ``prices.cache_read``
  (default 10 %). ``cost_ratio`` divides by the same for the original requests (1.00× = unchanged).
- needles: system messages, every user message and the last 4 turns of the ORIGINAL request (a turn
  = an assistant message and everything up to the next one); once the rewritten request carries an
  archive, of the user messages only the task (those before the first assistant message). Kept if an identical message is in the
  rewritten request (each rewritten message matches one needle); a system message also counts as
  kept when its text appears verbatim in a rewritten system message (a layout may add to it).
- orphans: in the rewritten request, a ``tool`` message whose tool_call_id is not among the
  tool_calls of the nearest preceding assistant message, plus each tool call with no result before
  the next assistant message.
- invalid args: tool calls in the rewritten request whose ``arguments`` are not valid JSON.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from proxy.dialects.anthropic import convert
from proxy.know.tokens import encoder
from proxy.replay.metrics import archive_in, cached_prefix, canonical, invalid_arguments, needles_kept, orphans, request_ends

Message = dict[str, Any]
Tools = list[dict[str, Any]] | None
ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use"})
Rewrite = Callable[[list[Message], Tools], list[Message]]
"""One session's rewrite: called once per request, in order; must not mutate its input."""
Progress = Callable[[int, int], None]

REPLY_PRIMING = 3
TOKENS_PER_MESSAGE = 3


class PromptCount(Protocol):
    """What a token counter reports for one request (proxy.know.tokens.PromptTokens fits)."""

    @property
    def total(self) -> int: ...
    @property
    def messages(self) -> Sequence[int]: ...
    @property
    def tools(self) -> int: ...


CountTokens = Callable[[Sequence[Message], Tools], PromptCount]


@dataclass(frozen=True)
class Count:
    """A request's tokens: total, per message, and the tools schema."""

    total: int
    messages: tuple[int, ...]
    tools: int


class Cl100kCounter:
    """Counts a request in cl100k_base tokens (offline), caching each text; the definition above.

    proxy.know.tokens.TokenCounter also fits ``CountTokens`` but adds 3 per tool call and 3 to the tools
    schema: on the public traces it finds 128 requests over 32k where this counter, like DESIGN.md, finds 125."""

    def __init__(self) -> None:
        self._encode = encoder("cl100k_base")  # sets TIKTOKEN_CACHE_DIR to litellm's bundled files
        self._texts: dict[str, int] = {}

    def text(self, text: str) -> int:
        n = self._texts.get(text)
        if n is None:
            n = self._texts[text] = len(self._encode(text))
        return n

    def message(self, message: Message) -> int:
        content = message.get("content")
        if isinstance(content, list):
            parts = [p.get("text", "") if isinstance(p, dict) and p.get("type") == "text" else json.dumps(p) for p in content]
            content = "".join(parts)
        n = TOKENS_PER_MESSAGE + self.text(str(message.get("role", ""))) + self.text(content or "")
        if message.get("name"):
            n += self.text(str(message["name"]))
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            args = fn.get("arguments")
            n += self.text(str(fn.get("name") or "")) + self.text(args if isinstance(args, str) else json.dumps(args))
        return n

    def __call__(self, messages: Sequence[Message], tools: Tools) -> Count:
        per = tuple(self.message(m) for m in messages)
        tools_n = self.text(json.dumps(tools)) if tools else 0
        return Count(sum(per) + tools_n + (REPLY_PRIMING if per else 0), per, tools_n)


@dataclass(frozen=True)
class Prices:
    """Relative prices per input token; only their ratio matters for ``cost_ratio``."""

    input: float = 1.0
    """Price of an input token the cache does not serve."""
    cache_read: float = 0.1
    """Price of an input token served from the prompt cache (10 % of input by default)."""

    def cost(self, tokens: int, cached: int) -> float:
        return (tokens - cached) * self.input + cached * self.cache_read


@dataclass(frozen=True)
class RequestRow:
    """One replayed request."""

    trace: str
    index: int
    messages: int
    tokens_original: int
    tokens_sent: int
    cached: int
    previous: int
    cost: float
    cost_original: float
    needles: int
    needles_kept: int
    orphans: int
    invalid_args: int
    over_window: bool
    archive: int = 0
    """The number of the archive the rewritten request carries (0: none)."""
    archived: bool = False
    """Whether this request made a new archive."""
    summarizer_tokens: int = 0
    """Tokens of summarizer calls made for this request (priced like requests, in ``cost``)."""
    layout: dict[str, int] = field(default_factory=dict)
    """Tokens each layout section added to this request (notebook, anchors, rules, compact, metadata, cards, delta)."""


@dataclass(frozen=True)
class Totals:
    """Totals over replayed requests (definitions in the module docstring; ratios 0..1)."""

    requests: int
    window: int
    tokens_original: int
    tokens_sent: int
    saved: float
    peak: int
    peak_original: int
    over_window: int
    cache_hit_rate: float
    cost_ratio: float
    needles_kept: float
    orphans: int
    invalid_args: int
    archives: int = 0
    summarizer_tokens: int = 0

    @classmethod
    def of(cls, window: int, rows: Sequence[RequestRow]) -> Totals:
        def total(name: str) -> Any:
            return sum(getattr(r, name) for r in rows)

        def ratio(part: float, whole: float) -> float:
            return part / whole if whole else 1.0

        original, sent = total("tokens_original"), total("tokens_sent")
        return cls(
            len(rows), window, original, sent, 1 - ratio(sent, original),
            max((r.tokens_sent for r in rows), default=0), max((r.tokens_original for r in rows), default=0),
            total("over_window"), ratio(total("cached"), total("previous")), ratio(total("cost"), total("cost_original")),
            ratio(total("needles_kept"), total("needles")), total("orphans"), total("invalid_args"),
            total("archived"), total("summarizer_tokens"),
        )  # fmt: skip


@dataclass(frozen=True)
class ReplayResult:
    """Rows of one or more replayed traces, and their totals."""

    window: int
    rows: list[RequestRow] = field(default_factory=list)

    @cached_property
    def totals(self) -> Totals:
        return Totals.of(self.window, self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"totals": asdict(self.totals), "requests": [asdict(r) for r in self.rows]}


@dataclass(frozen=True)
class Trace:
    """A recorded conversation: its model, messages and tools schema."""

    name: str
    model: str
    messages: list[Message]
    tools: Tools


def public_traces() -> Path | None:
    """Where the public traces are: ``RUYI_TRACE_DIR`` if set, else ``shared/traces`` beside the checkout; None if absent."""
    named = os.environ.get("RUYI_TRACE_DIR")
    where = Path(named) if named else Path(__file__).resolve().parents[3] / "shared" / "traces"
    return where if where.is_dir() else None


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file: OpenAI chat (``{"model", "messages", "tools"}``) or Anthropic Messages (``{"system",
    "messages", "tools"}``, its blocks as the Anthropic dialect makes them canonical)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    messages = list(data["messages"])
    if is_anthropic(data):
        found = convert(data)
        messages = found[0] if found is not None else messages
    return Trace(os.path.basename(os.fspath(path)), str(data.get("model") or ""), messages, data.get("tools"))


def is_anthropic(data: dict[str, Any]) -> bool:
    """A trace in Anthropic's shape: a top-level ``system``, or content blocks only Anthropic has."""
    if "system" in data:
        return True
    return any(
        isinstance(b, dict) and b.get("type") in ANTHROPIC_BLOCKS
        for m in data.get("messages") or ()
        if isinstance(m, dict)
        for b in (m.get("content") if isinstance(m.get("content"), list) else ())
    )


def merge(results: Sequence[ReplayResult]) -> ReplayResult:
    """All rows of several replays (same window) as one result: totals over every request."""
    return ReplayResult(results[0].window if results else 0, [r for res in results for r in res.rows])


def replay(
    messages: list[Message],
    tools: Tools,
    rewrite: Rewrite,
    window: int,
    count_tokens: CountTokens,
    prices: Prices = Prices(),
    *,
    trace: str = "",
    progress: Progress | None = None,
) -> ReplayResult:
    """Replay one trace's requests through ``rewrite`` (a fresh session) and measure each.

    A rewrite with a ``side_requests()`` method (an LLM summarizer's calls: (tokens, cached tokens) each) has
    those calls priced like requests, in the cost of the request that made them."""
    rows: list[RequestRow] = []
    canon = [canonical(m) for m in messages]
    ends = request_ends(messages)
    prev_canon: list[str] | None = None
    prev_tokens, prev_archive = 0, 0
    side_requests = getattr(rewrite, "side_requests", None)
    layout_sections = getattr(rewrite, "layout_sections", None)
    for index, end in enumerate(ends):
        original = messages[:end]
        sent = rewrite(list(original), tools)
        side = side_requests() if side_requests is not None else ()
        sent_canon = [canonical(m) for m in sent]
        before, after = count_tokens(original, tools), count_tokens(sent, tools)
        cached = cached_prefix(prev_canon, sent_canon, after.messages, after.tools)
        cached_original = cached_prefix(canon[: ends[index - 1]] if index else None, canon[:end], before.messages, before.tools)
        number = archive_in(sent)
        needles, kept = needles_kept(original, canon, sent, sent_canon, archived=number > 0)
        cost = prices.cost(after.total, cached) + sum(prices.cost(n, c) for n, c in side)
        rows.append(RequestRow(
            trace, index, end, before.total, after.total, cached, prev_tokens,
            cost, prices.cost(before.total, cached_original),
            needles, kept, orphans(sent), invalid_arguments(sent), after.total > window,
            number, number != prev_archive and number > 0, sum(n for n, _ in side),
            layout_sections() if layout_sections is not None else {},
        ))  # fmt: skip
        prev_archive = number
        prev_canon, prev_tokens = sent_canon, sum(after.messages) + after.tools
        if progress is not None:
            progress(index + 1, len(ends))
    return ReplayResult(window, rows)


class StderrProgress:
    """A one-line progress bar on stderr, drawn only on a terminal and for long runs."""

    def __init__(self, label: str, min_total: int = 50, width: int = 30) -> None:
        self.label, self.min_total, self.width = label, min_total, width
        self.enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total < self.min_total:
            return
        filled = self.width * done // total
        end = "\n" if done >= total else ""
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}{end}")
        sys.stderr.flush()


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def format_table(result: ReplayResult) -> str:
    """Per-request table and totals, as fixed-width text."""
    head = (
        f"{'#':>4} {'msgs':>5} {'tokens':>8} {'sent':>8} {'cached':>8} {'needles':>9} {'orph':>4} {'badargs':>7} {'archive':>7} {'layout':>6}  over"
    )
    lines = [head, "-" * len(head)]
    for r in result.rows:
        archive = (f"new {r.archive}" if r.archived else str(r.archive)) if r.archive else ""
        lines.append(
            f"{r.index:>4} {r.messages:>5} {r.tokens_original:>8} {r.tokens_sent:>8} {r.cached:>8} "
            f"{f'{r.needles_kept}/{r.needles}':>9} {r.orphans:>4} {r.invalid_args:>7} {archive:>7} {sum(r.layout.values()) or '':>6}"
            f"  {'yes' if r.over_window else ''}"
        )
    t = result.totals
    lines += [
        "",
        f"requests            {t.requests}",
        f"tokens without Ruyi {t.tokens_original:,}",
        f"tokens with Ruyi    {t.tokens_sent:,}  (saved {_pct(t.saved)})",
        f"peak request        {t.peak:,}  (without Ruyi {t.peak_original:,})",
        f"over the window     {t.over_window} of {t.requests} (window {t.window:,})",
        f"prefix-cache hits   {_pct(t.cache_hit_rate)} of the previous request",
        f"cost with caching   {t.cost_ratio:.2f}x  (1.00x = sending everything unchanged)",
        f"needles kept        {_pct(t.needles_kept)}",
        f"orphans             {t.orphans}",
        f"invalid tool args   {t.invalid_args}",
        f"archives            {t.archives}" + (f"  (summarizer calls: {t.summarizer_tokens:,} tokens, in the cost)" if t.summarizer_tokens else ""),
    ]
    sections: dict[str, int] = {}
    for r in result.rows:
        for name, n in r.layout.items():
            sections[name] = sections.get(name, 0) + n
    if sections:
        lines.append("layout sections     " + " · ".join(f"{name} {n:,}" for name, n in sections.items()) + " tokens in all requests")
    return "\n".join(lines)
