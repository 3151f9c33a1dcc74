"""Recognise an upstream's "the prompt does not fit the window" answer, and only that, by the phrases servers use.

A smaller prompt helps only when the prompt is what does not fit: an answer size (``max_tokens``) as big as the
window itself is the client's to fix, and so is every other 400. The phrases, as the servers send them:

- OpenAI (and DeepSeek, Groq, Azure, OpenRouter): code ``context_length_exceeded``; "This model's maximum context
  length is 128000 tokens. However, your messages resulted in 130015 tokens…", "… However, you requested 9000
  tokens (5000 in the messages, 4000 in the completion)…", "Input tokens exceed the configured limit of 272000
  tokens…", "Your input exceeds the context window of this model…"
- vLLM: "This model's maximum context length is 8192 tokens. However, your request has 9000 input tokens…";
  "'max_tokens' or 'max_completion_tokens' is too large: 9000. This model's maximum context length is 8192 tokens
  and your request has 120 input tokens (9000 > 8192 - 120)."; "… However, you requested 9000 output tokens and
  your prompt contains at least 120 input tokens…"; "The decoder prompt (length 9000) is longer than the maximum
  model length of 8192."
- llama.cpp server: type ``exceed_context_size_error``, "request (4476 tokens) exceeds the available context size
  (4096 tokens), try increasing it".
- Ollama: "the input length exceeds the context length".
- LiteLLM (proxy): "litellm.ContextWindowExceededError: …" around the provider's own message.
- Anthropic: "prompt is too long: 215000 tokens > 200000 maximum"; "input length and `max_tokens` exceed context
  limit: 197000 + 8192 > 200000, decrease input length or `max_tokens` and try again".
- Others seen behind the same clients: Gemini "The input token count (N) exceeds the maximum number of tokens
  allowed (M)", Mistral "Prompt contains N tokens … too large for model with M maximum context length", SGLang
  "The input (N tokens) is longer than the model's context length (M tokens)".
"""

from __future__ import annotations

import json
import re

PHRASES = re.compile(
    r"context_length_exceeded|contextwindowexceedederror|exceed_context_size_error"
    r"|maximum context length is \d+"
    r"|input tokens exceed the configured limit|input exceeds the context window"
    r"|is longer than the maximum model length|longer than the model's context length"
    r"|exceeds the available context size|input length exceeds the context length"
    r"|prompt is too long|exceed context limit"
    r"|exceeds the maximum number of tokens allowed|too large for model with \d+ maximum context length"
    r"|context length of only \d+",
)
"""A prompt that did not fit, in the words of each server (matched on the lower-cased message)."""
ANSWER_SIZE = (
    re.compile(r"'max_tokens' or 'max_completion_tokens' is too large: (\d+)\. this model's maximum context length is (\d+)"),
    re.compile(r"maximum context length is (?P<w>\d+) tokens\. however, you requested (?P<n>\d+) output tokens"),
    re.compile(
        r"maximum context length is (?P<w>\d+) tokens\. however, you requested \d+ tokens \(\d+ in the messages, (?P<n>\d+) in the completion\)"
    ),
    re.compile(r"exceed context limit: \d+ \+ (\d+) > (\d+)"),
)
"""Messages naming the answer size asked for and the window: the prompt is at fault only if the answer fits alone."""
SCAN_BYTES = 16384


def is_prompt_overflow(body: bytes) -> bool:
    """True when an upstream error body says the prompt did not fit the model's window, so that a smaller
    prompt can succeed (not when the requested answer size alone is as big as the window)."""
    text = _message(body[:SCAN_BYTES]).lower()
    if not PHRASES.search(text):
        return False
    for pattern in ANSWER_SIZE:
        found = pattern.search(text)
        if found is not None:
            answer, window = (int(found["n"]), int(found["w"])) if "n" in pattern.groupindex else map(int, found.groups())
            return answer < window
    return True


def _message(body: bytes) -> str:
    """The error's message and code when the body is JSON in a known shape, else the body as text."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        parts = [error.get(k) for k in ("message", "code", "type")]
        return " ".join(str(p) for p in parts if p is not None) or text
    return str(error)
