"""What every wire dialect provides: body ⇄ canonical messages, whether it streams, an assembler; the canonical form.

The canonical form is OpenAI Chat Completions messages; strategies work on nothing else. What a dialect
carries that strategies do not understand travels opaquely, so the Anthropic dialect and the archive fit
without a second redesign:

- A non-text content part (an image, audio, a file, Anthropic's ``thinking`` / ``redacted_thinking`` with its
  signature, ``server_tool_use`` and its result, any block type a newer client sends) stays in the message's
  ``content`` list as the dialect's own part, untouched. Strategies read only text parts
  (``memory.chain.text_parts``); a replacement puts its text in the first text part and keeps every other
  part in place (``strategies.pipeline.apply_replacements``), so such parts are never pruned. They are counted
  (``proxy.know.tokens``: images at a per-family estimate, other parts by their JSON).
- Keys on a part (``cache_control``) ride with the part: a replaced text part keeps its other keys.
- A message-level native field (Ollama's ``images``, ``thinking``, ``tool_name``) stays on the native message:
  a dialect writes changes back onto a copy of the client's own message (``Dialect.with_messages``), and a
  message no step changed goes back as the very object the client sent — byte for byte once dumped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Literal, Protocol

Wire = Literal["openai", "ollama", "anthropic", "responses"]
Messages = list[dict[str, Any]]


@dataclass
class Assembled:
    """The assistant message a stream carried, and what the upstream reported about it."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None
    error: Any = None
    done: bool = False
    applied_edits: list[dict[str, Any]] = field(default_factory=list)
    """What Anthropic's own context management cleared before the model saw the prompt (``applied_edits``)."""
    answer_id: str | None = None
    """The answer's own id where a later request may chain from it (a Responses API response's ``id``)."""

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg


class Assembler(Protocol):
    """Builds an ``Assembled`` from a dialect's stream lines or from one whole answer object."""

    result: Assembled

    def feed_lines(self, data: bytes) -> None: ...

    def feed_object(self, obj: dict[str, Any]) -> None: ...


def sse_data(data: bytes) -> Iterator[bytes]:
    """The payload of each SSE ``data:`` line in ``data`` (stripped); every other line (``event:``, blank) skipped."""
    for raw in data.splitlines():
        line = raw.strip()
        if line.startswith(b"data:"):
            yield line[5:].strip()


@dataclass(frozen=True)
class Dialect:
    """How one endpoint's body carries messages, whether it streams, and how its answer is assembled."""

    name: str
    wire: Wire

    def is_stream(self, body: dict[str, Any]) -> bool:
        raise NotImplementedError

    def to_canonical(self, body: dict[str, Any]) -> Messages | None:
        """The OpenAI-style messages strategies work on; ``None`` when the body has none."""
        raise NotImplementedError

    def with_messages(self, body: dict[str, Any], before: Messages, after: Messages, positions: Sequence[int] | None = None) -> dict[str, Any]:
        """A new body carrying ``after``; messages the pipeline left alone keep their exact native form.
        ``positions``: each of ``after``'s messages' position in ``before`` (-1: added), when messages were removed or added."""
        raise NotImplementedError

    def server_context(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """What the client asked its provider to clear on its side (Anthropic's ``context_management``), if anything."""
        return None


def message_dicts(body: dict[str, Any]) -> Messages | None:
    """The body's ``messages`` when it is a list of objects, else None."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(map(isinstance, messages, repeat(dict))):  # no Python frame per message
        return None
    return messages


def added_into_previous(after: Messages, positions: Sequence[int] | None) -> tuple[Messages, Sequence[int] | None]:
    """The messages as they go on the wire: a system message Ruyi added after a user or system message (the archive
    block after the task, ``archive.block: after_task``) rides at the end of that message's content, a text part of
    its own when the content is a list of parts. Roles stay as the client sent them (every chat template accepts
    them: no system message after the first user message), and every token before the block (the system text, the
    task) is what the provider cached, since caches match token prefixes. ``positions`` as ``with_messages`` takes
    them; both returned unchanged when nothing was added there."""
    if positions is None or not any(p < 0 for p in positions[1:]):
        return after, positions
    out: Messages = []
    where: list[int] = []
    for message, p in zip(after, positions, strict=True):
        text = message.get("content")
        if p < 0 and out and message.get("role") == "system" and isinstance(text, str) and out[-1].get("role") in ("user", "system"):
            out[-1] = _with_text(out[-1], text)
            continue
        out.append(message)
        where.append(p)
    return out, where


def _with_text(message: dict[str, Any], text: str) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        return {**message, "content": [*content, {"type": "text", "text": text}]}
    if isinstance(content, str) and content:
        return {**message, "content": content + "\n\n" + text}
    return {**message, "content": text}
