"""Message fingerprints: a canonical digest per message, chained so each link names a whole prefix."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

DIGEST_SIZE = 16
"""Bytes in a message digest and in a chain link (128 bits: collisions are not a practical concern)."""

SYSTEM_ROLES = frozenset({"system", "developer"})
"""Roles that carry instructions rather than conversation; the first other message is the task."""

_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


@dataclass(frozen=True, slots=True)
class MessageChain:
    """The fingerprint of a request's messages: one content digest and one chain link per message."""

    digests: tuple[bytes, ...]
    """Per message, the digest of its canonical form alone (what token counts are cached by)."""
    links: tuple[str, ...]
    """Per message, hex digest of that message chained to the previous link: names the prefix ending there."""
    first_non_system: int
    """Index of the first message whose role is not system/developer (len(links) if there is none)."""

    def __len__(self) -> int:
        return len(self.links)

    def shared_prefix(self, other: Sequence[str]) -> int:
        """How many leading messages this chain shares with another chain's links."""
        n = min(len(self.links), len(other))
        if n and self.links[n - 1] == other[n - 1]:
            return n  # links chain, so an equal link at n-1 means the whole prefix is equal
        lo, hi = 0, n - 1  # links[:lo] shared, links[hi] not: bisect on the chain property
        while lo < hi:
            mid = (lo + hi) // 2
            if self.links[mid] == other[mid]:
                lo = mid + 1
            else:
                hi = mid
        return lo


def canonical_arguments(arguments: Any) -> str:
    """Tool-call arguments as canonical JSON (sorted keys) whether given as a JSON string or an object."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments  # not JSON: its raw text is canonical (and cannot equal valid JSON)
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def part_digest(part: Any) -> str:
    """A stable hash of a non-text content part, ignoring its `cache_control` marker and key order."""
    if isinstance(part, Mapping) and "cache_control" in part:
        part = {k: v for k, v in part.items() if k != "cache_control"}
    data = json.dumps(part, sort_keys=True, separators=(",", ":"), default=str)
    return blake2b(data.encode("utf-8", "surrogatepass"), digest_size=DIGEST_SIZE).hexdigest()


def text_parts(content: Any) -> tuple[list[str], list[Any]]:
    """Split message content into its text parts and its other parts (images, audio, files…)."""
    if isinstance(content, str):
        return ([content] if content else []), []
    texts: list[str] = []
    others: list[Any] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and part.get("type", "text") in _TEXT_PART_TYPES and isinstance(
                part.get("text"), str
            ):
                if part["text"]:
                    texts.append(part["text"])
            elif isinstance(part, str):
                if part:
                    texts.append(part)
            else:
                others.append(part)
    elif content is not None:
        others.append(content)
    return texts, others


def canonical_message(message: Mapping[str, Any]) -> list[Any]:
    """What identifies a message: role, name, text, other parts, tool calls and tool_call_id.

    Null and empty fields, key order and `cache_control` markers do not matter; tool-call arguments
    hash the same as a JSON string (OpenAI) or an object (Ollama native).
    """
    texts, others = text_parts(message.get("content"))
    canon: list[Any] = [message.get("role"), message.get("name") or None, texts]
    extra = [part_digest(p) for p in others]
    images = message.get("images")  # Ollama native messages carry base64 images beside the text
    if images:
        extra.extend(part_digest(img) for img in images)
    calls = []
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            fn = {}
        calls.append([fn.get("name"), canonical_arguments(fn.get("arguments"))])
    canon += [extra, calls, message.get("tool_call_id") or None]
    return canon


def message_digest(message: Mapping[str, Any]) -> bytes:
    """The digest of a message's canonical form."""
    data = json.dumps(canonical_message(message), separators=(",", ":"), ensure_ascii=False, default=str)
    return blake2b(data.encode("utf-8", "surrogatepass"), digest_size=DIGEST_SIZE).digest()


def chain_of(messages: Sequence[Mapping[str, Any]]) -> MessageChain:
    """Fingerprint a request's messages: link i = H(link i-1 ‖ digest i)."""
    digests: list[bytes] = []
    links: list[str] = []
    first_non_system = -1
    previous = b""
    for i, message in enumerate(messages):
        digest = message_digest(message)
        link = blake2b(previous + digest, digest_size=DIGEST_SIZE).digest()
        digests.append(digest)
        links.append(link.hex())
        previous = link
        if first_non_system < 0 and message.get("role") not in SYSTEM_ROLES:
            first_non_system = i
    if first_non_system < 0:
        first_non_system = len(links)
    return MessageChain(tuple(digests), tuple(links), first_non_system)
