"""Property test: after every strategy and all of them, pairs stay paired, arguments stay JSON, protected
messages stay byte-identical, the input is untouched, and proposing is deterministic."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies.base import Replacement, StrategyContext
from strategies.conversation import analyze
from strategies.dedup import Dedup
from strategies.pipeline import (
    STRATEGY_ORDER,
    PipelineOptions,
    apply_replacements,
    propose_all,
)
from strategies.purge_errors import PurgeErrors
from strategies.truncation import Truncation
from tests.strategies.factories import count_tokens, lines

BODIES = [
    lines("code", 3),
    lines("code", 40),
    lines("other", 40),
    "[D001] decided: " + lines("x", 10),
    "Traceback (most recent call last):\n" + lines("frame", 30) + "\nValueError: bad",
    lines("wide", 150),
    "",
]
COMMANDS = [
    "cat /r/a.py",
    "cd /r && cat a.py",
    "sed -n '1,20p' /r/a.py",
    "head -50 /r/a.py",
    "cat /r/b.py | head -5",
    "grep -rn foo /r",
    "ls -la /r",
    "find /r -name '*.py'",
    "sed -i 's/x/y/' /r/a.py",
    "python /r/t.py",
    "cat > /r/a.py << 'EOF'\n" + lines("new", 30) + "\nEOF",
    "cat README.md",
    "echo [C002] noted",
    "git stash",
    "cat > /r/t.py << 'EOF'\n" + lines("test", 25) + "\nEOF\npython /r/t.py",
    "open /r/a.py 10",
    "edit 1:2\n" + lines("edit", 20) + "\nend_of_edit",
    "rm /r/b.py",
    "cat 'broken",
]
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def _arguments(name: str, rnd: random.Random) -> str:
    if name == "bash":
        return json.dumps({"command": rnd.choice(COMMANDS)})
    if name == "Read":
        return json.dumps(
            {"file_path": rnd.choice(["/r/a.py", "/r/b.py", "/r/DESIGN.md"]), "offset": rnd.choice([None, 1, 10]), "limit": rnd.choice([None, 20])}
        )
    if name == "Write":
        return json.dumps({"file_path": "/r/a.py", "content": rnd.choice(BODIES)})
    if name == "Edit":
        return json.dumps({"file_path": "/r/a.py", "old_string": BODIES[1], "new_string": BODIES[2]})
    if name == "str_replace_editor":
        return json.dumps({"command": rnd.choice(["view", "create", "str_replace"]), "path": "/r/b.py", "file_text": BODIES[1]})
    if name == "TodoWrite":
        return json.dumps({"todos": [{"content": BODIES[1]}]})
    return rnd.choice(["{not json " + BODIES[1], "[1, 2]", json.dumps({"x": BODIES[2]})])


def _content(rnd: random.Random, body: str) -> Any:
    shape = rnd.randrange(6)
    if shape == 0:
        return None
    if shape == 1:
        return [{"type": "text", "text": body}, IMAGE, {"type": "text", "text": "tail"}]
    return body


TOOLS = ["bash", "bash", "bash", "Read", "Write", "Edit", "str_replace_editor", "TodoWrite", "mystery"]


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    """Up to 9 turns of 0-3 calls each; the shape is drawn by hypothesis, the contents by a seeded Random."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent. " + BODIES[1]}]
    if draw(st.booleans()):
        messages.append({"role": "user", "content": rnd.choice(BODIES[:4])})
    shape = draw(st.lists(st.integers(0, 3), max_size=9))
    for turn, count in enumerate(shape):
        calls = [
            {"id": f"call_{turn}_{j}", "type": "function", "function": {"name": (name := rnd.choice(TOOLS)), "arguments": _arguments(name, rnd)}}
            for j in range(count)
        ]
        assistant: dict[str, Any] = {"role": "assistant", "content": rnd.choice([None, "Let me look.", BODIES[3]])}
        if calls:
            assistant["tool_calls"] = calls
        messages.append(assistant)
        answered = [c for c in calls if turn < len(shape) - 1 or rnd.random() < 0.7]
        rnd.shuffle(answered)
        for call in answered:
            body = rnd.choice(BODIES)
            text = f"<returncode>{rnd.choice([0, 0, 1])}</returncode>\n<output>\n{body}\n</output>" if rnd.random() < 0.5 else body
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": _content(rnd, text)})
        if rnd.random() < 0.2:
            messages.append({"role": "user", "content": _content(rnd, rnd.choice(BODIES))})
    return messages


@st.composite
def contexts(draw: Any) -> tuple[StrategyContext, PipelineOptions]:
    ctx = StrategyContext(
        count_tokens=count_tokens,
        window_tokens=32000,
        remaining_tokens=draw(st.integers(0, 32000)),
        protected_turns=draw(st.integers(0, 4)),
        min_saving_tokens=draw(st.sampled_from([0, 5, 20])),
    )
    options = PipelineOptions(
        purge_errors=PurgeErrors.Options(turns_before_purge=draw(st.integers(0, 4))),
        truncation=Truncation.Options(max_tool_output_tokens=draw(st.sampled_from([50, 300, 4000])), glob_max_files=5),
        dedup=Dedup.Options(by_key=draw(st.sampled_from([("read", "search", "list"), ()]))),
    )
    return ctx, options


def orphans(messages: list[dict[str, Any]]) -> int:
    """Tool messages whose call is not in an earlier assistant message."""
    seen: set[str] = set()
    count = 0
    for message in messages:
        for call in message.get("tool_calls") or []:
            seen.add(call["id"])
        if message["role"] == "tool" and message["tool_call_id"] not in seen:
            count += 1
    return count


def check(before: list[dict[str, Any]], snapshot: list[dict[str, Any]], after: list[dict[str, Any]], protected: frozenset[int]) -> None:
    assert before == snapshot, "the input was mutated"
    assert len(after) == len(before)
    assert orphans(after) == orphans(before) == 0
    for i, (old, new) in enumerate(zip(before, after, strict=True)):
        if i in protected:
            assert new is old  # and before == snapshot: byte-identical
        assert new["role"] == old["role"] and new.get("tool_call_id") == old.get("tool_call_id")
        old_calls, new_calls = old.get("tool_calls") or [], new.get("tool_calls") or []
        assert [(c["id"], c["function"]["name"]) for c in old_calls] == [(c["id"], c["function"]["name"]) for c in new_calls]
        for old_call, new_call in zip(old_calls, new_calls, strict=True):
            try:
                old_args = json.loads(old_call["function"]["arguments"])
            except ValueError:
                assert new_call == old_call
                continue
            new_args = json.loads(new_call["function"]["arguments"])
            assert type(new_args) is type(old_args)
            if isinstance(old_args, dict):
                assert set(new_args) == set(old_args)
        if isinstance(old.get("content"), list):
            assert [p for p in old["content"] if p.get("type") != "text"] == [p for p in new["content"] if p.get("type") != "text"]
            assert any(p.get("type") == "text" for p in new["content"]) == any(p.get("type") == "text" for p in old["content"])


def run_all(messages: list[dict[str, Any]], ctx: StrategyContext, options: PipelineOptions) -> None:
    snapshot = copy.deepcopy(messages)
    conversation = analyze(messages, ctx)
    protected = conversation.protected
    shared = replace(ctx, conversation=conversation)
    expected: dict[tuple[int, str], Replacement] = {}
    for strategy_class in STRATEGY_ORDER:
        strategy = strategy_class(getattr(options, strategy_class.name))
        proposals = strategy.propose(messages, shared)
        assert all(r.index not in protected and r.tokens_after < r.tokens_before for r in proposals)
        assert len({(r.index, r.target) for r in proposals}) == len(proposals)
        check(messages, snapshot, apply_replacements(messages, proposals), protected)
        for r in proposals:
            expected.setdefault((r.index, r.target), r)
    combined = propose_all(messages, ctx, options)
    assert combined == sorted(expected.values(), key=lambda r: (r.index, r.target)), "not the first-come union"
    check(messages, snapshot, apply_replacements(messages, combined), protected)


@settings(max_examples=2000, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), contexts())
def test_invariants(messages: list[dict[str, Any]], setup: tuple[StrategyContext, PipelineOptions]) -> None:
    run_all(messages, *setup)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 20,000 examples
@settings(max_examples=20000, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), contexts())
def test_invariants_slow(messages: list[dict[str, Any]], setup: tuple[StrategyContext, PipelineOptions]) -> None:
    run_all(messages, *setup)
