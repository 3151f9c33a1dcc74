"""Token counts against tiktoken itself, the cache, and offline loading with the network cut."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import tiktoken

from memory.chain import chain_of
from proxy.know.options import TokenOptions
from proxy.know.tokens import (
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_TOOL_CALL,
    TokenCounter,
    encoder,
    encoding_name_for,
)
from tests.traces import load, trace_files

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cl100k() -> tiktoken.Encoding:
    encoder("cl100k_base")  # points tiktoken at the bundled files first
    return tiktoken.get_encoding("cl100k_base")


def test_encoding_follows_the_model_family() -> None:
    for model in ("gpt-4o", "openai/gpt-4o-mini", "gpt-4.1", "gpt-5-mini", "o1", "o3-mini", "o4-mini"):
        assert encoding_name_for(model) == "o200k_base", model
    for model in ("gpt-4", "gpt-4-1106-preview", "gpt-3.5-turbo", "deepseek/deepseek-chat", "llama3.1:8b", "omni"):
        assert encoding_name_for(model) == "cl100k_base", model


def test_text_message_is_its_tokens_plus_overhead(cl100k: tiktoken.Encoding) -> None:
    text = "Find the bug in django/db/migrations/autodetector.py — it's the FK rename <|endoftext|>."
    n = TokenCounter().count("gpt-4", [{"role": "user", "content": text}])
    assert n.messages == (TOKENS_PER_MESSAGE + 1 + len(cl100k.encode_ordinary(text)),)
    assert n.total == n.messages[0] + REPLY_PRIMING
    assert n.tools == 0


def test_text_parts_names_and_tool_calls_count(cl100k: tiktoken.Encoding) -> None:
    args = '{"command": "grep -rn ForeignKey /testbed | head"}'
    messages: list[dict[str, Any]] = [
        {"role": "user", "name": "alice", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": args}}]},
    ]
    n = TokenCounter().count("gpt-4", messages)
    enc = cl100k.encode_ordinary
    assert n.messages[0] == TOKENS_PER_MESSAGE + 1 + 1 + len(enc("alice")) + len(enc("one")) + len(enc("two"))
    assert n.messages[1] == TOKENS_PER_MESSAGE + 1 + TOKENS_PER_TOOL_CALL + len(enc("bash")) + len(enc(args))


def test_images_cost_a_fixed_amount() -> None:
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 10_000}}
    n = TokenCounter(TokenOptions(image_tokens=100)).count("gpt-4o", [{"role": "user", "content": [part]}])
    assert n.messages == (TOKENS_PER_MESSAGE + 1 + 100,)


def test_an_image_costs_what_its_model_family_spends_and_counts_are_cached_apart() -> None:
    counter = TokenCounter(TokenOptions(image_tokens=100, image_tokens_by_model=(("gemma3*", 256), ("tiny*", 1))))
    ollama_message = {"role": "user", "content": "", "images": ["aGk=", "aGk="]}
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}}
    assert counter.count("gemma3:4b", [ollama_message]).messages == (TOKENS_PER_MESSAGE + 1 + 2 * 256,)
    assert counter.count("tiny:1b", [ollama_message]).messages == (TOKENS_PER_MESSAGE + 1 + 2 * 1,)  # same digest, own count
    assert counter.count("other", [ollama_message]).messages == (TOKENS_PER_MESSAGE + 1 + 2 * 100,)
    assert counter.count("GEMMA3:27b", [{"role": "user", "content": [part]}]).messages == (TOKENS_PER_MESSAGE + 1 + 256,)
    assert TokenCounter().image_tokens("llama3.2-vision:11b") == 1 and TokenCounter().image_tokens("gpt-4o") == 765


def test_tools_schema_counts_as_its_json(cl100k: tiktoken.Encoding) -> None:
    trace = load(trace_files()[0])
    n = TokenCounter().count("gpt-4", trace["messages"][:2], trace["tools"])
    assert n.tools == len(cl100k.encode_ordinary(json.dumps(trace["tools"], separators=(",", ":")))) + TOKENS_PER_MESSAGE
    assert n.total == sum(n.messages) + n.tools + REPLY_PRIMING


def test_a_whole_trace_matches_tiktoken(cl100k: tiktoken.Encoding) -> None:
    trace = load(trace_files()[0])
    enc = cl100k.encode_ordinary
    expected = 0
    for m in trace["messages"]:
        expected += TOKENS_PER_MESSAGE + 1 + len(enc(m.get("content") or ""))
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            expected += TOKENS_PER_TOOL_CALL + len(enc(fn["name"])) + len(enc(fn["arguments"]))
    assert sum(TokenCounter().count("gpt-4", trace["messages"]).messages) == expected


def test_a_known_prefix_is_not_counted_again() -> None:
    messages = load(trace_files()[0])["messages"]
    counter = TokenCounter()
    first = counter.count("gpt-4", messages[:40])
    assert first.counted == 40
    second = counter.count("gpt-4", messages[:44], chain=chain_of(messages[:44]))
    assert second.counted == 4
    assert second.messages[:40] == first.messages
    moved = [dict(m, content=[{"type": "text", "text": m["content"], "cache_control": {"type": "ephemeral"}}]) for m in messages[:44]]
    assert counter.count("gpt-4", moved).counted == 0  # cache markers and part lists change nothing


def test_the_cache_is_bounded() -> None:
    counter = TokenCounter(TokenOptions(cache_max=10))
    counter.count("gpt-4", [{"role": "user", "content": str(i)} for i in range(50)])
    assert len(counter) == 10


def test_ollama_object_arguments_count_like_their_json() -> None:
    obj = {"command": "ls -la", "timeout": 5}
    as_object = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "bash", "arguments": obj}}]}
    as_string = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "bash", "arguments": json.dumps(obj)}}]}
    assert TokenCounter().count("llama3.1", [as_object]).total == TokenCounter().count("llama3.1", [as_string]).total


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="`unshare -n` unavailable (needs root or user namespaces)")
def test_encodings_load_with_the_network_cut(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import socket, sys
        try:
            socket.create_connection(("1.1.1.1", 443), timeout=2)
            print("NETWORK-UP")
        except OSError:
            pass
        from proxy.know.tokens import encoder, _approximate
        for name in ("cl100k_base", "o200k_base"):
            encode = encoder(name)
            assert encode is not _approximate, name
            print(name, len(encode("hello world, 你好")))
        print("litellm imported" if "litellm" in sys.modules else "litellm not imported")
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    env["TMPDIR"] = str(tmp_path)  # tiktoken's default cache (under the temp dir) is empty here
    env["PYTHONPATH"] = str(REPO)
    run = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "NETWORK-UP" not in run.stdout
    enc = {"cl100k_base": tiktoken.get_encoding("cl100k_base"), "o200k_base": tiktoken.get_encoding("o200k_base")}
    for name, e in enc.items():
        assert f"{name} {len(e.encode_ordinary('hello world, 你好'))}" in run.stdout
    assert "litellm not imported" in run.stdout
    assert not list(tmp_path.iterdir())  # nothing was downloaded into the default cache


def test_warm_counts_equal_cold_counts_over_a_replay() -> None:
    from memory.chain import Fingerprinter
    from tests.traces import requests_of

    trace = load(trace_files()[1])
    warm, fingerprinter = TokenCounter(), Fingerprinter()
    for request in requests_of(trace["messages"]):
        fresh = json.loads(json.dumps(request))
        got = warm.count("gpt-4o", fresh, json.loads(json.dumps(trace["tools"])), fingerprinter.chain(fresh))
        cold = TokenCounter().count("gpt-4o", request, trace["tools"])
        assert (got.total, got.messages, got.tools) == (cold.total, cold.messages, cold.tools)
        assert got.counted <= 3  # only the new messages (the first request: system + task)


def test_texts_counted_with_their_messages_count_like_tiktoken(cl100k: tiktoken.Encoding) -> None:
    counter = TokenCounter()
    trace = load(trace_files()[0])
    counter.count("gpt-4", trace["messages"])
    count_text = counter.text_counter("gpt-4")
    assert counter.text_counter("gpt-4") is count_text
    texts = [m["content"] for m in trace["messages"] if isinstance(m.get("content"), str)]
    assert texts and all(count_text(text) == len(cl100k.encode_ordinary(text)) for text in texts)


def test_a_long_text_is_counted_without_holding_its_tokens() -> None:
    """Issue 27: a long tool output's count built the whole list of its tokens (a 24 MiB text: 175 MiB of ints); the
    count is now summed piece by piece, the same number as tiktoken's pieces give, its peak a piece's tokens."""
    import tracemalloc

    from proxy.know.tokens import PIECE_CHARS

    line = "2026-11-27T04:00:00 error worker socket timeout retry queue commit build #{}\n"
    text = "".join(line.format(i) for i in range(8 * 2**20 // len(line)))
    counter = TokenCounter()
    encode = encoder("o200k_base")
    expected = len(encode(text))  # the whole list of tokens, held (as the count was made before)
    assert len(text) > 8 * PIECE_CHARS
    tracemalloc.start()
    try:
        n = counter.count_text("gpt-4o", text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == expected
    assert peak < len(text)  # the whole list was about ten times the text; one piece's is a small part of it


def test_the_counts_kept_stay_under_their_bound_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27, memory flat: what the counter keeps is bounded in bytes whatever it is fed. Many distinct conversations
    (long, with large texts) leave at most ``cache_max`` counts of messages and of texts (fixed sizes, no text held) and
    ``PREFIX_BYTES`` of request count lists (4 bytes a message; as tuples of ints they took about 42)."""
    import gc
    import tracemalloc

    from proxy.know import tokens

    monkeypatch.setattr(tokens, "PREFIX_BYTES", 256 << 10)
    counter = TokenCounter(TokenOptions(cache_max=2_000, prefix_max=1_024))
    bound = 2_000 * sum(tokens.COUNT_BYTES) + (256 << 10) + (64 << 10)  # + one newest entry and the dicts themselves
    fed = 0
    counter.count("gpt-4o", [{"role": "user", "content": "warm"}])  # the encoding loaded before tracing
    tracemalloc.start()
    try:
        for task in range(150):  # 150 distinct conversations of 400 messages: 60,000 counted, 150 count lists
            messages = [{"role": "user", "content": f"task {task} step {i}: " + "word " * 20} for i in range(400)]
            messages[7]["content"] += f"{task} " + "x y z " * 20_000  # a large distinct text in each
            fed += sum(len(m["content"]) for m in messages)
            counter.count("gpt-4o", messages)
        del messages
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fed > 20 * bound  # what it was fed is far larger than what it may keep
    assert kept < bound, f"{kept:,} bytes kept, bound {bound:,}"


def test_counts_unused_for_idle_s_are_forgotten_and_counted_again_alike() -> None:
    """Issue 27 (memory flat after warm-up): every count a finished conversation left was kept until 200,000 newer ones
    pushed it out (hours at 20 requests/s); now what nothing used for ``sessions.idle_s`` goes, and counting the same
    conversation again gives the same figures."""
    counter = TokenCounter()
    first = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Fix parse_header in http.py"}]
    second = [*first, {"role": "assistant", "content": "Reading http.py"}, {"role": "user", "content": "go on"}]
    before = counter.count("gpt-4o", second, chain=chain_of(second))
    assert counter.forget_idle(0.0, 300.0, 10_000) == 0 and len(counter) > 0
    other = [{"role": "user", "content": "a live conversation"}]
    counter.count("gpt-4o", other, chain=chain_of(other))
    assert counter.forget_idle(299.0, 300.0, 10_000) == 0  # not idle long enough yet
    assert counter.forget_idle(301.0, 300.0, 10_000) > 0 and len(counter) == 1  # the live conversation's message stays
    again = counter.count("gpt-4o", second, chain=chain_of(second))
    assert (again.total, again.messages) == (before.total, before.messages)
    assert again.counted == 4  # forgotten: counted afresh
