"""Pruning in flight: batches at the prune tier, sticky bytes, refs, reports, overflow retry, dry-run."""

from __future__ import annotations

import copy
import json
from typing import Any

import aiohttp
import ollama
import openai
import pytest

from config.load import load_config
from proxy.replay.metrics import archive_in
from proxy.replay.offline import OfflineRuyi
from proxy.rewrite import pruning
from strategies.base import Replacement
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.traces import load, requests_of, trace_files

WINDOW = {"models": {"gpt-4o*": 12000, "llama*": 12000}}
FILE = "\n".join(f"def function_{i}(x):\n    return x * {i}  # a line of the module" for i in range(120))


def conversation(turns: int) -> list[dict[str, Any]]:
    """An agent that re-reads the same file again and again (dedup fodder), with unique small steps between."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix module.py"}]
    for t in range(turns):
        command = "cat /testbed/module.py" if t % 2 == 0 else f"ls /testbed/dir{t}"
        call = {"id": f"call_{t}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
        messages.append({"role": "assistant", "content": f"Step {t}.", "tool_calls": [call]})
        output = FILE if t % 2 == 0 else f"file_{t}.py"
        messages.append({"role": "tool", "tool_call_id": f"call_{t}", "content": f"<returncode>0</returncode>\n<output>\n{output}\n</output>"})
    return messages


async def post(proxy: Any, messages: list[dict[str, Any]], headers: dict[str, str] | None = None, stream: bool = False) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        body = {"model": "gpt-4o", "messages": messages, "stream": stream}
        resp = await http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers={"X-Ruyi-Agent": "a", **(headers or {})})
        await resp.read()
        return resp


def assert_paired(messages: list[dict[str, Any]]) -> None:
    open_ids: set[str] = set()
    for m in messages:
        if m["role"] == "assistant":
            assert not open_ids
            open_ids = {c["id"] for c in m.get("tool_calls") or []}
            for c in m.get("tool_calls") or []:
                json.loads(c["function"]["arguments"])
        elif m["role"] == "tool":
            open_ids.remove(m["tool_call_id"])


async def test_batch_at_prune_tier_then_sticky_bytes(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False})
    sent, tiers = [], []
    for turns in range(1, 12):
        resp = await post(proxy, conversation(turns))
        assert resp.status == 200
        tiers.append(resp.headers["X-Ruyi-Tier"])
        sent.append(fake.last().json["messages"])
    pruned = [i for i, msgs in enumerate(sent) if msgs != conversation(i + 1)]
    assert pruned, "some request crossed the prune tier and was pruned"
    first = pruned[0]
    assert tiers[first - 1] in ("prepare_summary", "prune")  # nothing was touched below the prune tier
    placeholders = [m for m in sent[first] if m["role"] == "tool" and m["content"].startswith("[ruyi:")]
    assert placeholders and all("ref" in m["content"] for m in placeholders)
    for i in range(first + 1, len(sent)):  # between batches the prompt only grows at its end
        prev, cur = sent[i - 1], sent[i]
        if cur[: len(prev)] != prev:
            assert any(m["role"] == "tool" and m["content"].startswith("[ruyi:") for m in cur[: len(prev)])
    for msgs in sent:
        assert_paired(msgs)
        assert msgs[:2] == conversation(1)[:2]  # system and task verbatim
    resp = await post(proxy, conversation(11))
    assert int(resp.headers["X-Ruyi-Tokens-After"]) < int(resp.headers["X-Ruyi-Tokens-Before"])
    assert fake.last().json["messages"] == sent[-1]  # the same request again: byte-identical


async def test_refs_report_and_isolation(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window=WINDOW, pruning={"economic": False})
    for turns in range(1, 12):
        resp = await post(proxy, conversation(turns))
    sid = resp.headers["X-Ruyi-Session"]
    text = next(m["content"] for m in fake.last().json["messages"] if m["role"] == "tool" and m["content"].startswith("[ruyi:"))
    ref = text.split("ref ", 1)[1].split()[0].strip("`];,.)")
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base_url(proxy)}/ruyi/v1/refs/{ref}", headers={"X-Ruyi-Agent": "a"}) as r:
            assert r.status == 200 and FILE in (await r.json())["original"]
        async with http.get(f"{base_url(proxy)}/ruyi/v1/refs/{ref}", headers={"X-Ruyi-Agent": "b"}) as r:
            assert r.status == 404
        async with http.get(f"{base_url(proxy)}/ruyi/v1/sessions/{sid}/report", headers={"X-Ruyi-Agent": "a"}) as r:
            report = await r.json()
        async with http.get(f"{base_url(proxy)}/ruyi/v1/sessions/{sid}/report?format=markdown", headers={"X-Ruyi-Agent": "a"}) as r:
            md = await r.text()
    assert report["summary"]["batches"]["applied"] >= 1
    assert report["summary"]["strategies"]["dedup"]["items"] >= 1
    assert "| Deduplication |" in md and "context usage:" in md


async def test_economic_batch_below_the_prune_tier_pays_for_its_cache_miss(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 128000}})
    for turns in range(1, 16):
        resp = await post(proxy, conversation(turns))
        assert resp.headers["X-Ruyi-Tier"] == "expanded"
    sid = resp.headers["X-Ruyi-Session"]
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base_url(proxy)}/ruyi/v1/sessions/{sid}/report", headers={"X-Ruyi-Agent": "a"}) as r:
            summary = (await r.json())["summary"]
    assert summary["batches"]["economic"] >= 1 and summary["batches"]["applied"] == 0
    assert summary["strategies"]["dedup"]["items"] >= 1  # re-read copies of the big file went
    assert_paired(fake.last().json["messages"])


async def test_small_savings_far_back_are_not_worth_a_cache_miss(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 128000}}, pruning={"horizon_max": 1})
    for turns in range(1, 16):
        await post(proxy, conversation(turns))
        assert fake.last().json["messages"] == conversation(turns)  # a one-request horizon never pays back


@pytest.mark.parametrize("stream", [False, True])
async def test_overflow_error_triggers_one_harder_batch_and_a_retry(make_proxy: MakeProxy, fake: FakeUpstream, stream: bool) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 200000}}, pruning={"economic": False})  # Ruyi thinks it fits
    messages = conversation(9)
    fake.max_prompt_chars = len(json.dumps(messages)) - 2000
    resp = await post(proxy, messages, stream=stream)
    assert resp.status == 200
    chats = [r for r in fake.received if r.path == "/v1/chat/completions"]
    assert len(chats) == 2 and len(json.dumps(chats[1].json["messages"])) <= fake.max_prompt_chars
    assert_paired(chats[1].json["messages"])


async def test_overflow_that_cannot_be_helped_is_relayed(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy()
    fake.max_prompt_chars = 10
    client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hello there"}])
    assert err.value.code == "context_length_exceeded"
    assert len([r for r in fake.received if r.path == "/v1/chat/completions"]) == 1


async def test_ollama_overflow_retry(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy("ollama", window={"models": {"llama*": 200000}}, pruning={"economic": False})
    messages = conversation(9)
    native = [{k: v for k, v in m.items() if k != "tool_call_id"} for m in messages]
    for m in native:
        for c in m.get("tool_calls") or []:
            c.pop("id"), c.pop("type")
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    fake.max_prompt_chars = len(json.dumps(native)) - 2000
    result = await ollama.AsyncClient(host=base_url(proxy)).chat(model="llama3", messages=native, stream=False)
    assert result.message.content == fake.reply
    assert len([r for r in fake.received if r.path == "/api/chat"]) == 2


async def test_dry_run_reports_but_forwards_the_original(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window=WINDOW)
    for turns in range(1, 12):
        resp = await post(proxy, conversation(turns), headers={"X-Ruyi-Mode": "dry-run"})
        assert fake.last().json["messages"] == conversation(turns)
    sid = resp.headers["X-Ruyi-Session"]
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base_url(proxy)}/ruyi/v1/sessions/{sid}/report", headers={"X-Ruyi-Agent": "a"}) as r:
            report = await r.json()
    assert all(r["mode"] == "dry-run" and not r["applied"] for r in report["reports"])
    latest = report["summary"]["latest"]  # what Ruyi would send now; nothing of it is kept (the summary counts none)
    assert latest["tokens_after"] < latest["tokens_before"] and latest["strategies"] and report["summary"]["items"] == 0


def custom_tool_conversation() -> list[dict[str, Any]]:
    """An agent with its own file viewer: it reads lines 1-60, then 1-120 of the same file."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Fix module.py"}]
    lines = FILE.split("\n")
    for t, (offset, limit) in enumerate([(1, 60), (1, 120)] + [(1, 1)] * 5):
        args = {"filename": "/testbed/module.py", "first": offset, "count": limit} if limit > 1 else {"filename": f"/testbed/x{t}.py"}
        call = {"id": f"call_{t}", "type": "function", "function": {"name": "view_file", "arguments": json.dumps(args)}}
        messages.append({"role": "assistant", "content": f"Step {t}.", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{t}", "content": "\n".join(lines[offset - 1 : offset - 1 + limit])})
    return messages


@pytest.mark.parametrize("configured", [False, True])
async def test_tools_from_config_are_classified(make_proxy: MakeProxy, fake: FakeUpstream, configured: bool) -> None:
    tools = [{"name": "view_file", "kind": "read", "path": ["filename"], "offset": "first", "limit": "count"}] if configured else []
    proxy = await make_proxy(window={"models": {"gpt-4o*": 128000}}, pruning={"tools": tools})
    await post(proxy, custom_tool_conversation())
    first_read = fake.last().json["messages"][3]
    assert first_read["content"].startswith("[ruyi:") is configured  # lines 1-60 lie inside the later 1-120


def exploration(turns: int) -> list[dict[str, Any]]:
    """An agent reading a different file every turn: nothing is redundant, only old."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix module.py"}]
    for t in range(turns):
        call = {"id": f"call_{t}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat /testbed/m{t}.py"})}}
        messages.append({"role": "assistant", "content": f"Step {t}.", "tool_calls": [call]})
        body = "\n".join(f"def f{t}_{i}(x):\n    return x + {t * 1000 + i}" for i in range(60))
        messages.append({"role": "tool", "tool_call_id": f"call_{t}", "content": body})
    return messages


async def test_a_batch_without_enough_redundancy_clears_the_oldest_outputs_only(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window=WINDOW, archive={"enabled": False})  # pruning alone: with archives the batch's request archives
    for turns in range(1, 30):
        resp = await post(proxy, exploration(turns))
        if fake.last().json["messages"] != exploration(turns):
            break
    sent, original = fake.last().json["messages"], exploration(turns)
    assert sent != original, "the conversation crossed the prune tier"
    freed = int(resp.headers["X-Ruyi-Tokens-Before"]) - int(resp.headers["X-Ruyi-Tokens-After"])
    assert freed >= 0.3 * 12000  # clear_at_least of the window
    outputs = [i for i, m in enumerate(original) if m["role"] == "tool"]
    cleared = [i for i in outputs if sent[i]["content"] != original[i]["content"]]
    assert cleared == outputs[: len(cleared)]  # the oldest, in order, and no more than the batch needed
    assert all("the context was nearly full" in sent[i]["content"] for i in cleared)
    assert sent[-8:] == original[-8:] and sent[:2] == original[:2]  # the newest 4 turns and the task stay verbatim
    assert_paired(sent)
    sid = resp.headers["X-Ruyi-Session"]
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base_url(proxy)}/ruyi/v1/sessions/{sid}/report?format=markdown", headers={"X-Ruyi-Agent": "a"}) as r:
            assert "| Discard |" in await r.text()


async def test_with_archives_the_request_a_batch_would_prune_archives_instead(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """A batch at the prune tier misses the cache from its first cut, and the archive a request or a few later
    misses again: the request is archived instead, one miss, with the newest turns and the task verbatim."""
    proxy = await make_proxy(window=WINDOW)
    for turns in range(1, 30):
        resp = await post(proxy, exploration(turns))
        if fake.last().json["messages"] != exploration(turns):
            break
    sent, original = fake.last().json["messages"], exploration(turns)
    assert int(resp.headers["X-Ruyi-Tokens-Before"]) >= 0.85 * (12000 - 2000)  # it crossed the prune tier first
    assert "<ruyi-archive" in sent[1]["content"] and sent[1]["content"].startswith(original[1]["content"])  # the task, then the block
    assert not any("the context was nearly full" in str(m.get("content")) for m in sent)  # nothing pruned
    assert sent[-8:] == original[-8:] and sent[0] == original[0]
    assert_paired(sent)


async def test_nothing_is_discarded_below_the_prune_tier(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 128000}})  # economic on, never near the tier
    for turns in range(1, 25):
        await post(proxy, exploration(turns))
        assert fake.last().json["messages"] == exploration(turns)


@pytest.mark.skipif(len(trace_files()) < 2, reason="no traces on this machine")
def test_kept_analyses_are_bounded_and_never_change_a_rewrite(monkeypatch: pytest.MonkeyPatch) -> None:
    config = load_config(None, {})
    traces = [load(path) for path in trace_files()[-2:]]
    requests = [(i, r) for rs in zip(*(requests_of(t["messages"]) for t in traces)) for i, r in enumerate(rs)]

    def replay() -> tuple[list[Any], OfflineRuyi]:
        ruyi = OfflineRuyi(config, "gpt-4o", 12000)
        return [json.dumps(ruyi(copy.deepcopy(r), traces[i]["tools"]), sort_keys=True) for i, r in requests], ruyi

    many, _ = replay()
    monkeypatch.setattr(pruning, "PREFIXES_MAX", 1)  # two sessions take turns: each evicts the other's analysis
    few, ruyi = replay()
    assert few == many
    assert len(ruyi.pruner.prefixes) == 1


def test_the_memo_is_bounded_without_a_cliff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MEMO_MAX entries the least recently used go one at a time: never more, never all at once."""
    config = load_config(None, {})
    trace = load(trace_files()[-1])
    requests = requests_of(trace["messages"])

    def replay() -> tuple[list[str], list[int]]:
        ruyi = OfflineRuyi(config, "gpt-4o", 12000)
        sent, sizes = [], []
        for r in requests:
            sent.append(json.dumps(ruyi(copy.deepcopy(r), trace["tools"]), sort_keys=True))
            sizes.append(len(ruyi.pruner.memo))
        return sent, sizes

    unbounded, sizes = replay()
    assert max(sizes) > 30
    monkeypatch.setattr(pruning, "MEMO_MAX", 30)
    bounded, sizes = replay()
    assert bounded == unbounded  # a forgotten entry is rebuilt the same
    assert max(sizes) <= 30 and sizes == sorted(sizes)  # bounded, and it never drops


def test_classifications_no_session_used_for_idle_s_are_forgotten_and_rebuilt_alike() -> None:
    """Issue 27 (memory flat after warm-up): the memo and the prefix analyses a finished session left go after
    ``sessions.idle_s`` (not when 100,000 newer entries push them out); replayed again, every request is the same."""
    config = load_config(None, {})
    trace = load(trace_files()[-1])
    requests = requests_of(trace["messages"])
    ruyi = OfflineRuyi(config, "gpt-4o", 12000)
    first = [json.dumps(ruyi(copy.deepcopy(r), trace["tools"]), sort_keys=True) for r in requests]
    held = len(ruyi.pruner.memo) + len(ruyi.pruner.prefixes)
    assert held > 30 and ruyi.pruner.forget_idle(0.0, 300.0, 100_000) == 0
    assert ruyi.pruner.forget_idle(301.0, 300.0, 100_000) == held
    assert not ruyi.pruner.memo and not ruyi.pruner.prefixes
    ruyi.sessions = OfflineRuyi(config, "gpt-4o", 12000).sessions  # a new session: the same requests from scratch
    again = [json.dumps(ruyi(copy.deepcopy(r), trace["tools"]), sort_keys=True) for r in requests]
    assert again == first


def _proposal(index: int, saved: int) -> Replacement:
    return Replacement(index, "content", "[ruyi: gone]", "x", saved + 5, 5, f"r{index}", "dedup", "a later copy")


def test_a_saving_is_credited_only_until_the_next_archive_is_expected() -> None:
    """An economic batch pays a cache miss now for a saving on every request ahead; an archive replaces the pruned
    messages and resends its restart whole, so ahead ends at the archive (give or take ARCHIVE_SLACK requests)."""
    config = load_config(None, {})
    pruner = pruning.Pruner(config.pruning, config.tiers)
    proposals, sent = [_proposal(2, 1000)], [100, 100, 1005, *([500] * 8)]  # 5,005 tokens resent from it on
    # 40 requests ahead (the horizon's cap): 1,000 × (1 + 0.1 × 40) = 5,000 > 0.9 × 5,005
    assert pruner._paying(proposals, sent, len(sent), 100) == proposals
    assert pruner._paying(proposals, sent, len(sent), 100, requests_left=60.0) == proposals
    # the archive expected now: 1,000 × (1 + 0.1 × 5) = 1,500 < 4,505
    assert pruner._paying(proposals, sent, len(sent), 100, requests_left=0.0) == []


@pytest.mark.parametrize("window", [16000, 32000])
def test_no_economic_batch_resends_the_prompt_just_before_an_archive(window: int) -> None:
    """On the public traces an economic batch (a cache miss paid now for a saving on the requests ahead) never comes
    within three requests of an archive: the archive replaces what it pruned and resends its restart whole. Before
    the horizon ended at the archive, sqlfluff-1517 at 32k resent 1,206 tokens more than its new ones at request 44,
    two requests before its archive."""
    config = load_config(None, {})
    for path in trace_files():
        trace = load(path)
        ruyi, numbers, economic = OfflineRuyi(config, "gpt-4o", window), [0], []
        for request in requests_of(trace["messages"]):
            numbers.append(archive_in(ruyi(copy.deepcopy(request), trace["tools"])))
            economic.append(ruyi.outcomes[-1].report["batch"] == "economic" and numbers[-1] == numbers[-2])
        archives = [i for i in range(len(economic)) if numbers[i + 1] != numbers[i]]
        late = [i for i, paid in enumerate(economic) if paid and any(0 < a - i <= 3 for a in archives)]
        assert not late, f"{path.name} at {window}: economic batches at requests {late}, archives at {archives}"
