"""Message fingerprints: a canonical digest per message, chained so each link names a whole prefix."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
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
        raw = arguments
        try:
            arguments = json.loads(raw)
        except ValueError:
            return raw  # not JSON: its raw text is canonical (and cannot equal valid JSON)
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
            if isinstance(part, Mapping) and part.get("type", "text") in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
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


def canonical_message(message: Mapping[str, Any]) -> list[tuple[bytes, str]]:
    """What identifies a message, as tagged strings: role, name, text parts, other parts (hashed),
    tool-call names and arguments, tool_call_id.

    Null and empty fields, key order and `cache_control` markers do not matter; tool-call arguments
    hash the same as a JSON string (OpenAI) or an object (Ollama native).
    """
    canon: list[tuple[bytes, str]] = []
    for tag, field in ((b"r", "role"), (b"n", "name")):
        value = message.get(field)
        if value:
            canon.append((tag, str(value)))
    texts, others = text_parts(message.get("content"))
    canon.extend((b"t", text) for text in texts)
    canon.extend((b"x", part_digest(part)) for part in others)
    canon.extend((b"x", part_digest(image)) for image in message.get("images") or ())  # Ollama native
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            fn = {}
        canon.append((b"f", str(fn.get("name") or "")))
        canon.append((b"a", canonical_arguments(fn.get("arguments"))))
    tool_call_id = message.get("tool_call_id")
    if tool_call_id:
        canon.append((b"i", str(tool_call_id)))
    return canon


HASH_PIECE_CHARS = 1 << 20
"""An ASCII text longer than this is hashed a piece at a time (the same digest as hashing it whole)."""


def message_digest(message: Mapping[str, Any]) -> bytes:
    """The digest of a message's canonical form (each tagged string length-prefixed: unambiguous)."""
    h = blake2b(digest_size=DIGEST_SIZE)
    content = message.get("content")
    if type(content) is str and not message.get("tool_calls") and "images" not in message:
        fields = [(b"r", message.get("role")), (b"n", message.get("name")), (b"t", content)]
        fields.append((b"i", message.get("tool_call_id")))  # the common case, without the general walk
        canon = [(tag, str(value)) for tag, value in fields if value]
    else:
        canon = canonical_message(message)
    for tag, text in canon:
        if len(text) > HASH_PIECE_CHARS and text.isascii():  # a huge tool output: never a second whole copy of it
            h.update(tag + len(text).to_bytes(8, "little"))
            for start in range(0, len(text), HASH_PIECE_CHARS):
                h.update(text[start : start + HASH_PIECE_CHARS].encode("ascii"))
            continue
        data = text.encode("utf-8", "surrogatepass")
        h.update(tag + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


@dataclass(frozen=True)
class FingerprintOptions:
    """What the fingerprinter remembers of recent requests to skip re-hashing their messages."""

    recent_max: int = 128
    """Recent requests kept (a key per message, texts as hash and length: never the messages) to compare the
    next request against."""
    per_start: int = 4
    """Recent requests kept per conversation start (system messages + task): parallel runs of a task."""
    messages_max: int = 32768
    """Messages kept across those requests (about 190 bytes each: key, digest, link; ≈6 MiB): past it the least recently
    fingerprinted starts go too, never the one just fingerprinted. ``recent_max`` alone let 128 requests of 2,000
    messages hold ~49 MB, kept after their conversations ended (a finished task's latest request stays until 128
    newer ones push it out)."""


def first_non_system(messages: Sequence[Mapping[str, Any]]) -> int:
    """Index of the first message whose role is not system/developer (len(messages) if none)."""
    return next((i for i, m in enumerate(messages) if m.get("role") not in SYSTEM_ROLES), len(messages))


SHORT = 256
"""Longest role, name or tool_call_id a message key holds as it is (longer: the message is keyed by its digest)."""


def message_key(message: Mapping[str, Any]) -> int | bytes:
    """A stand-in for a message in equality checks that holds none of its text: the hash of its role, name,
    tool_call_id, texts and tool calls (texts and arguments by hash and length, like the strategies'
    ``text_key``); a message of any other shape is keyed by its digest (bytes). Equal keys mean equal digests,
    but for a collision of Python's hash (keyed per process, 61 bits)."""
    get = message.get
    content, role, name, call_id, calls = get("content"), get("role"), get("name"), get("tool_call_id"), get("tool_calls")
    texts: Any
    if type(content) is str:
        texts = (hash(content), len(content))
    elif content is None:
        texts = None
    elif type(content) is list:
        texts = _parts_key(content)
        if texts is None:
            return message_digest(message)  # images, audio, files: by their digest
    else:
        return message_digest(message)
    for value in (role, name, call_id):
        if value is not None and (type(value) is not str or len(value) > SHORT):
            return message_digest(message)
    call_keys: tuple[Any, ...] = ()
    if calls:
        call_keys = _calls_key(calls)  # type: ignore[assignment]
        if call_keys is None:
            return message_digest(message)  # arguments as objects (Ollama native), odd shapes
    if "images" in message:
        return message_digest(message)
    return hash((role, name, call_id, texts, call_keys))  # one int: 128 requests of long sessions stay small


def message_keys(messages: Sequence[Mapping[str, Any]]) -> list[int | bytes]:
    """``[message_key(m) for m in messages]``, the commonest shapes (a dict of exactly a string ``role`` and a string
    ``content``, and a tool's result: those and a string ``tool_call_id``) keyed inline: a growing conversation is keyed
    whole on every request, so this is per message."""
    keys: list[int | bytes] = []
    append = keys.append
    for m in messages:
        if type(m) is dict and 2 <= len(m) <= 3:
            get = m.get
            role, content = get("role"), get("content")
            if type(content) is str and type(role) is str and len(role) <= SHORT:  # what message_key makes of them
                if len(m) == 2:
                    append(hash((role, None, None, (hash(content), len(content)), ())))
                    continue
                call_id = get("tool_call_id")  # a tool's result
                if type(call_id) is str and len(call_id) <= SHORT:
                    append(hash((role, None, call_id, (hash(content), len(content)), ())))
                    continue
        append(message_key(m))
    return keys


def _parts_key(parts: list[Any]) -> tuple[tuple[int, int], ...] | None:
    """Text parts by hash and length (their cache_control markers do not count); None if any part is not text."""
    out = []
    for part in parts:
        if type(part) is not dict or part.get("type", "text") not in _TEXT_PART_TYPES:
            return None
        text = part.get("text")
        if type(text) is not str:
            return None
        out.append((hash(text), len(text)))
    return tuple(out)


def _calls_key(calls: Any) -> tuple[tuple[str | None, int, int], ...] | None:
    """Each call's name, and its arguments (a JSON string) by hash and length; None for any other shape."""
    if type(calls) is not list:
        return None
    out = []
    for call in calls:
        fn = call.get("function") if type(call) is dict else None
        if type(fn) is not dict:
            return None
        fname, arguments = fn.get("name"), fn.get("arguments")
        if type(arguments) is not str or (fname is not None and (type(fname) is not str or len(fname) > SHORT)):
            return None
        out.append((fname, hash(arguments), len(arguments)))
    return tuple(out)


class Fingerprinter:
    """Fingerprints requests like `chain_of`, but compares each request with the recent requests that
    began the same way, by a key per message (`message_key`), and hashes only messages that differ: a
    request extending a known one costs O(new messages) hashing, and what is kept of a recent request is
    its keys and chain, never its messages (bodies of up to 32 MiB each)."""

    def __init__(self, options: FingerprintOptions | None = None) -> None:
        self.options = options or FingerprintOptions()
        self._recent: OrderedDict[tuple[int | bytes, ...], list[tuple[list[int | bytes], MessageChain]]] = OrderedDict()
        """Recent requests per start, least recently fingerprinted first; bounded by the requests kept in all (``_kept``,
        up to ``per_start`` per entry), not by entries, so not a ``memory.lru.LRU``."""
        self._kept = 0
        self._messages = 0
        """Messages (keys) across the kept requests: bounded by ``messages_max``."""
        self._lock = threading.Lock()
        """Worker threads fingerprint side by side: the recent requests are read and replaced under it."""

    def __len__(self) -> int:
        return self._kept

    @property
    def messages(self) -> int:
        """Messages kept across the recent requests (what ``messages_max`` bounds)."""
        return self._messages

    def chain(self, messages: Sequence[Mapping[str, Any]]) -> MessageChain:
        """The request's chain (identical to `chain_of(messages)`)."""
        start = first_non_system(messages)
        if start >= len(messages):
            return chain_of(messages)
        keys = message_keys(messages)
        head = tuple(keys[: start + 1])  # groups candidates: requests of the same task
        with self._lock:
            candidates = self._recent.get(head, [])
        prefixes = [c for c in candidates if len(c[0]) <= len(keys) and keys[: len(c[0])] == c[0]]
        if prefixes:  # the usual case: a known request is a prefix of this one
            old, old_chain = max(prefixes, key=lambda c: len(c[0]))
            chain = self._extend(messages, keys, old_chain, len(old), len(old))
        elif candidates:  # else reuse what is equal in the most recent one (moved cache markers…)
            chain = self._reuse(messages, keys, *candidates[0])
        else:
            chain = self._extend(messages, keys, MessageChain((), (), 0), 0, 0)
        links = chain.links
        with self._lock:
            candidates = self._recent.get(head, [])  # again: another thread may have changed them meanwhile
            kept = [  # drop what this request supersedes: requests it extends, even with moved markers
                (old, old_chain)
                for old, old_chain in candidates
                if not (old_chain.links and len(old) <= len(links) and links[len(old) - 1] == old_chain.links[-1])
            ]
            self._remember(head, [(keys, chain), *kept])
        return chain

    def _reuse(self, messages: Sequence[Mapping[str, Any]], keys: list[int | bytes], old: list[int | bytes], old_chain: MessageChain) -> MessageChain:
        n = min(len(old), len(keys))
        same = [keys[i] == old[i] for i in range(n)]
        digests = [old_chain.digests[i] if same[i] else _digest(messages[i], keys[i]) for i in range(n)]
        unchanged = same.index(False) if False in same else n
        return self._extend(messages, keys, MessageChain(tuple(digests), old_chain.links, 0), n, unchanged)

    @staticmethod
    def _extend(messages: Sequence[Mapping[str, Any]], keys: list[int | bytes], known: MessageChain, n: int, unchanged: int) -> MessageChain:
        """Digests 0..n-1 from `known`, links 0..unchanged-1 too; the rest computed."""
        digests = list(known.digests[:n])
        digests.extend(_digest(m, k) for m, k in zip(messages[n:], keys[n:]))
        links = list(known.links[:unchanged])
        previous = bytes.fromhex(links[-1]) if links else b""
        for digest in digests[unchanged:]:
            previous = blake2b(previous + digest, digest_size=DIGEST_SIZE).digest()
            links.append(previous.hex())
        return MessageChain(tuple(digests), tuple(links), first_non_system(messages))

    def _remember(self, head: tuple[int | bytes, ...], kept: list[tuple[list[int | bytes], MessageChain]]) -> None:
        """Keep ``kept`` for ``head`` in place of what was kept for it (under the lock), then the bounds."""
        before = self._recent.pop(head, [])
        del kept[self.options.per_start :]
        self._recent[head] = kept
        self._kept += len(kept) - len(before)
        self._messages += sum(len(k) for k, _ in kept) - sum(len(k) for k, _ in before)
        while self._recent and (self._kept > self.options.recent_max or (self._messages > self.options.messages_max and len(self._recent) > 1)):
            dropped = self._recent.popitem(last=False)[1]
            self._kept -= len(dropped)
            self._messages -= sum(len(k) for k, _ in dropped)


def _digest(message: Mapping[str, Any], key: int | bytes) -> bytes:
    """A message's digest: its key when the key is one already."""
    return key if type(key) is bytes else message_digest(message)


def chain_of(messages: Sequence[Mapping[str, Any]]) -> MessageChain:
    """Fingerprint a request's messages: link i = H(link i-1 ‖ digest i)."""
    digests = [message_digest(m) for m in messages]
    links: list[str] = []
    previous = b""
    for digest in digests:
        previous = blake2b(previous + digest, digest_size=DIGEST_SIZE).digest()
        links.append(previous.hex())
    return MessageChain(tuple(digests), tuple(links), first_non_system(messages))
