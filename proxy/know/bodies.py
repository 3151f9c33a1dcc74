"""What Ruyi counts of a body its dialect gives no canonical messages for: a prompt, or a chained body's new items.

``/api/generate`` has a prompt (and the token ids of the conversation so far), not messages. A Responses body chained
by ``previous_response_id`` holds only the new items, its history at the provider: they are counted, and the request
is marked as one whose upstream usage counts a history Ruyi never saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.dialects.responses import RESPONSES, chained, chained_messages

Messages = list[dict[str, Any]]


def body_messages(dialect_name: str, body: Mapping[str, Any]) -> tuple[Messages, bool]:
    """The messages to count, and whether the request's history is elsewhere (a chained Responses body)."""
    if dialect_name == RESPONSES.name and chained(body):
        return chained_messages(body) or [], True
    return generate_messages(body), False


def generate_messages(body: Mapping[str, Any]) -> Messages:
    """``/api/generate`` has a prompt, not messages: measure it as system + user (with its images)."""
    out = [{"role": "system", "content": body["system"]}] if isinstance(body.get("system"), str) else []
    user: dict[str, Any] = {"role": "user", "content": body.get("prompt") if isinstance(body.get("prompt"), str) else ""}
    if isinstance(body.get("images"), list) and body["images"]:
        user["images"] = body["images"]
    return [*out, user]


def context_tokens(body: Mapping[str, Any]) -> int:
    """``/api/generate``'s ``context``: the token ids of the conversation so far, counted exactly."""
    context = body.get("context")
    return len(context) if isinstance(context, list) else 0
