"""Token counts of what the model sees, offline (tiktoken with litellm's bundled BPE files), cached per message."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from pathlib import Path
from typing import Any

import structlog

from memory.chain import MessageChain, chain_of, text_parts
from memory.lru import LRU
from proxy.know.images import image_tokens_for
from proxy.know.options import TokenOptions

log = structlog.get_logger(__name__)

TOKENS_PER_MESSAGE = 3
"""Chat-format overhead per message (start/role/end markers), as in OpenAI's counting recipe."""
TOKENS_PER_NAME = 1
"""Extra overhead when a message carries a `name`."""
TOKENS_PER_TOOL_CALL = 3
"""Overhead per tool call besides its name and arguments."""
REPLY_PRIMING = 3
"""Tokens that prime the assistant's reply, once per request."""

_CACHE_FILES = {  # tiktoken's cache name = sha1 of the BPE file's URL
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
}
TEXTS_KEPT = 65536  # counts of plain texts remembered per encoding, keyed by hash and length (texts are not held)
COUNT_BYTES = 190, 245
"""What one remembered count holds, a message's and a text's (tracemalloc: its key, its int and the cache's entry: 187
and 243 bytes): every entry the same size, so their bounds in entries are bounds in bytes (200,000 messages ≈ 38 MB,
65,536 texts ≈ 16 MB)."""
PREFIX_ENTRY_BYTES = 200
"""What one remembered request's count list holds besides its counts (the last link's hex key, the array, the entry)."""
PREFIX_BYTES = 8 << 20
"""The request count lists kept, in bytes (4 a message): past it the oldest go, whatever ``prefix_max`` allows (1,024
requests of 2,000 messages would hold 8 MiB; as tuples of ints they held 42 bytes a message)."""
_TAGS = {"cl100k_base": b"c", "o200k_base": b"o"}  # appended to a digest to key its count
_O200K_MODELS = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|codex|o\d)")


@dataclass(frozen=True, slots=True)
class PromptTokens:
    """A request's estimated prompt size, before calibration."""

    total: int
    """Messages + tools schema + reply priming."""
    messages: tuple[int, ...]
    """Per message, including its overhead."""
    tools: int
    """The `tools` schema."""
    counted: int
    """Messages tokenised afresh by this call (the rest came from the cache)."""


def encoding_name_for(model: str) -> str:
    """o200k_base for gpt-4o/4.1/5 and the o-series, cl100k_base otherwise (a fair proxy; calibration corrects)."""
    name = model.rsplit("/", 1)[-1].lower()
    return "o200k_base" if _O200K_MODELS.match(name) else "cl100k_base"


def bundled_bpe_dir() -> Path | None:
    """litellm's folder of tiktoken cache files, found without importing litellm (which costs ≈2 s)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
    return folder if folder.is_dir() else None


def _point_tiktoken_at_bundled_files(name: str) -> None:
    """Set TIKTOKEN_CACHE_DIR to litellm's folder unless it already holds the file (litellm does the same)."""
    current = os.environ.get("TIKTOKEN_CACHE_DIR")
    if current and (Path(current) / _CACHE_FILES[name]).is_file():
        return
    folder = bundled_bpe_dir()
    if folder is not None and (folder / _CACHE_FILES[name]).is_file():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    else:
        log.warning("tiktoken_bundled_file_missing", encoding=name, folder=str(folder))


def _approximate(text: str) -> list[int]:
    """Stand-in encoder when tiktoken cannot load: about four characters a token."""
    return [0] * ((len(text) + 3) // 4)


@functools.cache
def _encode_ordinary(name: str) -> Callable[[str], list[int]]:
    """The `encode_ordinary` of a tiktoken encoding, loaded offline once (a lazily filled, read-only
    cache: encodings are immutable and cost ≈0.3 s each); an approximation if loading fails."""
    try:
        import tiktoken

        if name in _CACHE_FILES:
            _point_tiktoken_at_bundled_files(name)
        return tiktoken.get_encoding(name).encode_ordinary
    except Exception as exc:  # noqa: BLE001 — fail open: a wrong count beats a failed request
        log.warning("tiktoken_load_failed", encoding=name, error=repr(exc))
        return _approximate


def encoder(name: str) -> Callable[[str], list[int]]:
    """A text's tokens in that encoding (a long text encoded in pieces, ``PIECE_CHARS``)."""
    return _in_pieces(_encode_ordinary(name))


def counter(name: str) -> Callable[[str], int]:
    """How many tokens a text is in that encoding, piece by piece: never a long text's whole list of tokens (a 24 MiB
    tool output's was 175 MiB of Python ints, seven times the text, for a number)."""
    encode = _encode_ordinary(name)

    def count(text: str) -> int:
        return sum(len(encode(piece)) for piece in _pieces(text))

    return count


PIECE_CHARS = 1 << 19
"""Longer texts are encoded a piece of whole lines at a time: tiktoken holds the interpreter while it builds its
result (a 25 MB text stopped every thread, the loop's too, for 0.4 s); a cut may count ±1 token per piece."""


def _pieces(text: str) -> Iterator[str]:
    """The text itself when short, else pieces of whole lines of about ``PIECE_CHARS`` each."""
    if len(text) <= PIECE_CHARS:
        yield text
        return
    start = 0
    while start < len(text):
        end = text.find("\n", start + PIECE_CHARS)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


def _in_pieces(encode: Callable[[str], list[int]]) -> Callable[[str], list[int]]:
    def encode_long(text: str) -> list[int]:
        out: list[int] = []
        for piece in _pieces(text):
            out += encode(piece)
        return out

    return encode_long


def warm_up(models: Sequence[str] = ("gpt-4o", "gpt-4")) -> None:
    """Load the encodings these models use now, at start-up, rather than on the first request."""
    for model in models:
        encoder(encoding_name_for(model))


def _tool_call_parts(message: Mapping[str, Any]) -> list[str]:
    texts: list[str] = []
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            continue
        texts.append(str(fn.get("name") or ""))
        args = fn.get("arguments")
        if args is not None:
            texts.append(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
    return texts


class TokenCounter:
    """Counts prompt tokens, caching each message's count by (encoding, content digest) and each
    request's counts by its last chain link, so a request extending a known one costs O(new messages)."""

    def __init__(self, options: TokenOptions | None = None) -> None:
        self.options = options or TokenOptions()
        self._cache: LRU[bytes, int] = LRU(self.options.cache_max)
        """Count by tagged digest (digest + encoding tag, + image cost when not the default), least recently used first."""
        self._prefixes: dict[bytes, LRU[str, array[int]]] = {}
        """Per tag (encoding and image cost): a request's last chain link → its per-message counts (4 bytes each)."""
        self._recent_tools: list[tuple[Sequence[Any], str, int]] = []
        """Recent tools lists with their encoding and count (compared in C before any hashing)."""
        self._texts: dict[str, LRU[tuple[int, int], int]] = {}
        """Per encoding: recent plain texts (message texts, tool outputs, placeholders) → their count."""
        self._counters: dict[str, Callable[[str], int]] = {}
        """Per encoding: the counter of plain strings over ``_texts``."""

    def __len__(self) -> int:
        return len(self._cache)

    def forget_idle(self, now: float, idle_s: float, limit: int) -> int:
        """Forget up to ``limit`` counts of each cache not used for ``idle_s`` (``now``: ``time.monotonic()``, see
        `LRU.forget_idle`); returns how many went (call again while it is not 0)."""
        gone = self._cache.forget_idle(now, idle_s, limit)
        gone += sum(texts.forget_idle(now, idle_s, limit) for texts in list(self._texts.values()))
        return gone + sum(lists.forget_idle(now, idle_s, limit) for lists in list(self._prefixes.values()))

    def count_text(self, model: str, text: str) -> int:
        """Tokens of a plain string, uncached."""
        return counter(encoding_name_for(model))(text)

    def text_counter(self, model: str) -> Callable[[str], int]:
        """A counter of plain strings for one model, remembering recent texts (strategies ask repeatedly).
        One per encoding, the same function on every call; message counting fills it too."""
        name = encoding_name_for(model)
        counter = self._counters.get(name)
        if counter is None:
            counter = self._counters[name] = self._text_counter(name)
        return counter

    def _text_counter(self, name: str) -> Callable[[str], int]:
        count_tokens = counter(name)
        # first in, first out (read with peek); never more texts than messages
        cache = self._texts.setdefault(name, LRU(min(TEXTS_KEPT, self.options.cache_max)))

        def count(text: str) -> int:
            key = (hash(text), len(text))  # never the text itself: the cache must not hold conversations
            n: int | None = cache.peek(key)
            if n is None:
                n = cache[key] = count_tokens(text)
            return n

        return count

    def image_tokens(self, model: str) -> int:
        """Tokens one image costs for this model."""
        return image_tokens_for(model, self.options.image_tokens_by_model, self.options.image_tokens)

    def count_message(self, count_text: Callable[[str], int], message: Mapping[str, Any], image_tokens: int | None = None) -> int:
        """Tokens of one message as the model sees it: overhead, name, text, other parts (images at
        ``image_tokens`` each), Ollama's ``images``, tool calls. ``count_text`` is a text_counter, so
        strategies later find these texts counted."""
        per_image = self.options.image_tokens if image_tokens is None else image_tokens
        n = TOKENS_PER_MESSAGE + 1  # + the role, one token
        name = message.get("name")
        if name:
            n += TOKENS_PER_NAME + count_text(str(name))
        texts, others = text_parts(message.get("content"))
        for text in texts:
            n += count_text(text)
        for part in others:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind in ("image_url", "image", "input_image"):
                n += per_image
            else:
                n += count_text(json.dumps(part, ensure_ascii=False, default=str))
        images = message.get("images")
        n += per_image * len(images) if isinstance(images, list) else 0
        calls = _tool_call_parts(message)
        n += TOKENS_PER_TOOL_CALL * (len(calls) // 2)
        for text in calls:
            n += count_text(text)
        return n

    def count_tools(self, model: str, tools: Sequence[Any] | None) -> int:
        """Tokens of the `tools` schema (its compact JSON: close to, a little above, what OpenAI renders)."""
        if not tools:
            return 0
        name = encoding_name_for(model)
        for known, known_name, n in self._recent_tools:
            if known_name == name and known == tools:
                return n
        data = json.dumps(tools, separators=(",", ":"), ensure_ascii=False, default=str)
        key = blake2b(data.encode("utf-8", "surrogatepass"), digest_size=16).digest() + _TAGS[name]
        found: int | None = self._cache.get(key)
        if found is None:
            found = self._cache[key] = counter(name)(data) + TOKENS_PER_MESSAGE
        self._recent_tools = [(tools, name, found), *self._recent_tools[:7]]
        return found

    def count(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Any] | None = None,
        chain: MessageChain | None = None,
    ) -> PromptTokens:
        """Estimate a request's prompt tokens; pass the request's `chain` to reuse its digests."""
        if chain is None:
            chain = chain_of(messages)
        name = encoding_name_for(model)
        count_text = self.text_counter(model)
        per_image = self.image_tokens(model)
        tag = _TAGS[name]
        if per_image != self.options.image_tokens:  # counts of messages with images differ by model family
            tag += per_image.to_bytes(4, "little")
        prefixes = self._prefixes.get(tag)
        if prefixes is None:  # first in, first out: read with peek
            prefixes = self._prefixes[tag] = LRU(self.options.prefix_max, max_bytes=PREFIX_BYTES, size=_prefix_bytes)
        links = chain.links
        known: array[int] | tuple[()] = ()
        for i in range(len(links) - 1, -1, -1):  # the previous request usually ends a few messages back
            found = prefixes.peek(links[i])
            if found is not None:
                known = found
                break
        per_message = list(known)
        counted = 0
        for message, digest in zip(messages[len(known) :], chain.digests[len(known) :]):
            key = digest + tag
            n = self._cache.get(key)
            if n is None:
                n = self._cache[key] = self.count_message(count_text, message, per_image)
                counted += 1
            per_message.append(n)
        counts = tuple(per_message)
        if links and links[-1] not in prefixes:  # present: it is `known` (the same request again), left in its place
            prefixes[links[-1]] = array("I", counts)
        tools_n = self.count_tools(model, tools)
        total = sum(counts) + tools_n + (REPLY_PRIMING if counts else 0)
        return PromptTokens(total, counts, tools_n, counted)


def _prefix_bytes(_link: str, counts: array[int]) -> int:
    return PREFIX_ENTRY_BYTES + counts.itemsize * len(counts)
