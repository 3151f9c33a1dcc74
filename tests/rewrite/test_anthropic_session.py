"""A Claude-Code-shaped session through Ruyi at the prune tier: every forwarded body a valid Messages request (the
validator written from Anthropic's docs), pairing kept, thinking and server tool blocks intact, every breakpoint
where the client put it (at most 4, none added), the billing line forwarded as sent and not splitting the session."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.anthropic_shape import breakpoints, problems
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

MODEL = "claude-opus-4-5"
WINDOW = {"models": {"claude-*": 16000}}
EPHEMERAL = {"type": "ephemeral"}
MODULE = "\n".join(f"def handler_{i}(request):\n    return respond(request, code={i})  # route {i}" for i in range(90))
TOOLS = [
    {"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
    {
        "name": "Edit",
        "description": "Edits a file.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}},
        },
    },
    {"name": "Bash", "description": "Runs a command.", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
    {
        "name": "Grep",
        "description": "Searches files.",
        "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}},
        "cache_control": EPHEMERAL,
    },
]


def system(step: int) -> list[dict[str, Any]]:
    billing = f"x-anthropic-billing-header: cc_version=2.1.37.{step:03x}; cc_entrypoint=cli; cch={step * 7919 % 99999:05d};"
    return [
        {"type": "text", "text": billing},
        {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": EPHEMERAL},
        {"type": "text", "text": "Use the tools to change the repository. Keep answers short.", "cache_control": EPHEMERAL},
    ]


def turn(t: int) -> list[dict[str, Any]]:
    """One assistant turn and its results: reads of one module again and again, searches, test runs, an edit, a web search."""
    kind = ("read", "grep", "bash", "read", "edit", "search")[t % 6]
    blocks: list[dict[str, Any]] = []
    if t % 2 == 0:
        blocks.append({"type": "thinking", "thinking": f"Step {t}: what next?", "signature": f"EqQBsig{t:04d}" + "A" * 30})
    if t == 1:
        blocks.append({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a" * 3})
    blocks.append({"type": "text", "text": f"Step {t}: {kind}."})
    if kind == "search":
        blocks += [
            {"type": "server_tool_use", "id": f"srvtoolu_{t}", "name": "web_search", "input": {"query": "aiohttp web.Response"}},
            {
                "type": "web_search_tool_result",
                "tool_use_id": f"srvtoolu_{t}",
                "content": [
                    {
                        "type": "web_search_result",
                        "url": "https://docs.aiohttp.org/en/stable/web_reference.html",
                        "title": "aiohttp",
                        "encrypted_content": "EqgfCioIARgBIiQ3YTAw" * 20,
                        "page_age": None,
                    }
                ],
            },
            {"type": "text", "text": "The docs say web.Response takes a body."},
        ]
    call_id = f"toolu_{t:03d}"
    calls = {
        "read": ("Read", {"file_path": "/repo/app/handlers.py"}),
        "grep": ("Grep", {"pattern": f"handler_{t}"}),
        "bash": ("Bash", {"command": "python -m pytest -q tests/test_handlers.py"}),
        "edit": ("Edit", {"file_path": "/repo/app/handlers.py", "old_string": f"code={t}", "new_string": f"code={t + 1}"}),
        "search": ("Bash", {"command": f"ls /repo/app/part{t}"}),
    }
    name, args = calls[kind]
    blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
    outputs = {
        "read": "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(MODULE.splitlines(), 1)),
        "grep": f"app/handlers.py:{t}: def handler_{t}(request):",
        "bash": "F" * 3 + "." * 40 + "\nFAILED tests/test_handlers.py::test_route - AssertionError\n" + "E   assert 500 == 200\n" * 60,
        "edit": "The file /repo/app/handlers.py has been updated.",
        "search": f"part{t}.py",
    }
    result = {"type": "tool_result", "tool_use_id": call_id, "content": outputs[kind]}
    if kind == "bash":
        result["is_error"] = True
    return [{"role": "assistant", "content": blocks}, {"role": "user", "content": [result]}]


def conversation(turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Make test_route pass."}]}]
    for t in range(turns):
        messages += turn(t)
    last = messages[-1]["content"][-1]
    messages[-1]["content"][-1] = {**last, "cache_control": EPHEMERAL}  # Claude Code's moving breakpoint: the newest block
    return {
        "model": MODEL,
        "max_tokens": 4096,
        "system": system(turns),
        "tools": TOOLS,
        "messages": messages,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "metadata": {"user_id": "user_abc_account_def_session_ghi"},
    }


def kept_whole(body: dict[str, Any]) -> list[Any]:
    """The blocks no step may touch: thinking, redacted thinking, server tool uses and their results, in order."""
    return [
        b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] in ("thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result")
    ]


def cache_markers(body: dict[str, Any]) -> list[tuple[str, Any]]:
    def at(path: str) -> Any:
        node: Any = body
        for part in path.replace("]", "").replace(".", "[").split("["):
            node = node[int(part)] if part.isdigit() else node[part]
        return node["cache_control"]

    return [(path, at(path)) for path in breakpoints(body)]


async def test_a_claude_code_session_pruned_at_the_prune_tier_stays_a_valid_messages_request(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic", window=WINDOW, pruning={"economic": False}, archive={"enabled": False})
    pruned, tiers, sessions = [], [], set()
    async with aiohttp.ClientSession() as http:
        for turns in range(1, 25):
            original = conversation(turns)
            async with http.post(
                base_url(proxy) + "/v1/messages",
                json=original,
                headers={"x-api-key": "sk-ant-client", "anthropic-version": "2023-06-01", "X-Ruyi-Agent": "cc"},
            ) as resp:
                assert resp.status == 200, await resp.text()
                tiers.append(resp.headers["X-Ruyi-Tier"])
                sessions.add(resp.headers["X-Ruyi-Session"])
                before, after = int(resp.headers["X-Ruyi-Tokens-Before"]), int(resp.headers["X-Ruyi-Tokens-After"])
            forwarded = fake.last("/v1/messages").json
            assert not problems(forwarded), problems(forwarded)
            assert kept_whole(forwarded) == kept_whole(original)
            assert cache_markers(forwarded) == cache_markers(original) and len(cache_markers(forwarded)) <= 4
            assert forwarded["system"] == original["system"] and forwarded["tools"] == original["tools"]
            assert {k: v for k, v in forwarded.items() if k != "messages"} == {k: v for k, v in original.items() if k != "messages"}
            assert [m["role"] for m in forwarded["messages"]] == [m["role"] for m in original["messages"]]
            if forwarded != original:
                pruned.append(turns)
                assert after < before
    assert not fake.anthropic_refused
    assert pruned, f"nothing was pruned; tiers: {tiers}"
    assert tiers[pruned[0] - 2] in ("prepare_summary", "prune", "archive")  # nothing was touched below the prune tier
    assert len(sessions) == 1  # the billing line changed on every request
    placeholders = [
        b
        for m in forwarded["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result" and "[ruyi" in json.dumps(b["content"])
    ]
    assert placeholders


async def test_anthropics_prompt_is_too_long_gets_one_harder_batch_and_a_valid_retry(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    original = conversation(14)
    fake.max_prompt_chars = len(json.dumps(original["messages"])) * 2 // 3
    proxy = await make_proxy("anthropic", window={"models": {"claude-*": 200000}}, pruning={"economic": False}, archive={"enabled": False})
    async with aiohttp.ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/messages", json=original, headers={"X-Ruyi-Agent": "cc"}) as resp:
            assert resp.status == 200, await resp.text()
    first, retry = [r.json for r in fake.received if r.path == "/v1/messages"]
    assert first == original and retry != original and not problems(retry)
    assert kept_whole(retry) == kept_whole(original) and cache_markers(retry) == cache_markers(original)


async def test_a_claude_code_session_at_the_red_line_is_archived_and_restarts_from_the_same_bytes(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("anthropic", window=WINDOW, calibration={"min_ratio": 0.999, "max_ratio": 1.001})
    archived_at, sent = None, []
    async with aiohttp.ClientSession() as http:
        for turns in range(1, 60):
            original = conversation(turns)
            async with http.post(base_url(proxy) + "/v1/messages", json=original, headers={"X-Ruyi-Agent": "cc"}) as resp:
                assert resp.status == 200, await resp.text()
                archived = "X-Ruyi-Archived" in resp.headers
            forwarded = fake.last("/v1/messages").json
            sent.append(forwarded)
            assert not problems(forwarded), problems(forwarded)
            marks = cache_markers(forwarded)
            assert len(marks) <= 4 and [m for m in marks if m[0].startswith("system")] == [
                m for m in cache_markers(original) if m[0].startswith("system")
            ]
            whole = kept_whole(forwarded)
            assert all(b in kept_whole(original) for b in whole)  # thinking and server blocks never changed
            if archived and archived_at is None:
                archived_at = turns
                assert forwarded["system"] == original["system"]  # the client's blocks, breakpoints and all, nothing added
                task, sent_task = original["messages"][0]["content"], forwarded["messages"][0]["content"]
                assert sent_task[: len(task)] == task  # the task as sent, then the archive block after its last block
                assert sent_task[len(task)]["text"].startswith("<ruyi-archive") and all("cache_control" not in b for b in sent_task[len(task) :])
                assert forwarded["messages"][1]["role"] == "assistant"  # roles still alternate
                newest, sent_newest = original["messages"][-1]["content"], forwarded["messages"][-1]["content"]
                assert sent_newest[: len(newest)] == newest  # the newest input; a recall block may follow its breakpoint
                assert all(b["type"] == "text" and "cache_control" not in b for b in sent_newest[len(newest) :])
                ids = [b["id"] for m in original["messages"] for b in m["content"] if b["type"] == "tool_use"]
                kept = [b["id"] for m in forwarded["messages"] for b in m["content"] if b["type"] == "tool_use"]
                assert kept == ids[len(ids) - len(kept) :] and len(kept) >= 4  # the newest turns, whole
                assert len(forwarded["messages"]) < len(original["messages"]) and len(marks) == len(cache_markers(original))
            elif archived_at is not None and turns <= archived_at + 2:
                previous = sent[-2]["messages"]
                # the restarted prefix, byte for byte (but the block that carried last request's moving breakpoint)
                assert forwarded["messages"][: len(previous) - 1] == previous[:-1]
                assert forwarded["system"] == original["system"] and forwarded["messages"][0] == sent[-2]["messages"][0]
            if archived_at is not None and turns > archived_at + 2:
                break
    assert archived_at is not None
    assert not fake.anthropic_refused
