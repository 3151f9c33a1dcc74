"""The key is the identity: a client key decides the agent, X-Ruyi-Agent only picks a sub-agent inside it,
and nothing of one agent is visible to, or writable by, another."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
import ollama
import pytest
from aiohttp.test_utils import TestServer

from config.validate import ConfigError
from memory.identity import agent_of_key
from tests.conftest import MakeProxy, base_url, config_for
from tests.fake_upstream import FakeUpstream

KEY_A, KEY_B = "ruyi-key-a-0001", "ruyi-key-b-0002"
PRUNE = {"pruning": {"strategies": {"truncation": {"max_tool_output_tokens": 150}}}}
REF = re.compile(r"\bref (r[0-9a-f]{12})\b")


def conversation(tag: str, turns: int = 1) -> list[dict[str, Any]]:
    """A tool-using conversation whose outputs are long enough to be truncated (so refs are kept)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": f"task {tag}"}]
    for i in range(turns):
        call = {"id": f"call_{tag}_{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat {tag}{i}.log"})}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "\n".join(f"{tag} line {n} of output" for n in range(400))},
        ]
    return messages


async def chat(http: aiohttp.ClientSession, proxy: TestServer, messages: list[dict[str, Any]], **headers: str) -> tuple[int, dict[str, str]]:
    async with http.post(
        base_url(proxy) + "/v1/chat/completions",
        json={"model": "gpt-4o", "messages": messages},
        headers={k.replace("_", "-"): v for k, v in headers.items()},
    ) as resp:
        await resp.read()
        return resp.status, dict(resp.headers)


async def admin(http: aiohttp.ClientSession, proxy: TestServer, path: str, **headers: str) -> tuple[int, Any]:
    async with http.get(base_url(proxy) + "/ruyi/v1" + path, headers={k.replace("_", "-"): v for k, v in headers.items()}) as resp:
        return resp.status, await resp.json()


async def test_another_key_cannot_claim_an_agent_by_header(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(auth={"keys": [{"key": KEY_A, "agent": "agent-a"}, KEY_B]}, **PRUNE)
    async with aiohttp.ClientSession() as http:
        status, headers = await chat(http, proxy, conversation("a"), X_Ruyi_Key=KEY_A)
        assert status == 200
        session = headers["X-Ruyi-Session"]
        refs = REF.findall(json.dumps(fake.last().json["messages"]))
        assert refs
        assert (await admin(http, proxy, "/sessions", X_Ruyi_Key=KEY_A))[1]["agent_id"] == "agent-a"
        status, listed = await admin(http, proxy, "/sessions", X_Ruyi_Key=KEY_B, X_Ruyi_Agent="agent-a")
        assert status == 200 and listed["sessions"] == [] and listed["agent_id"] == f"{agent_of_key(KEY_B)}/agent-a"
        for path in (f"/sessions/{session}", f"/sessions/{session}/report", f"/refs/{refs[0]}"):
            assert (await admin(http, proxy, path, X_Ruyi_Key=KEY_B, X_Ruyi_Agent="agent-a"))[0] == 404
            assert (await admin(http, proxy, path, X_Ruyi_Key=KEY_A))[0] == 200


async def test_a_foreign_session_id_is_simply_not_found(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(auth={"keys": [{"key": KEY_A, "agent": "agent-a"}, KEY_B]})
    mine = conversation("a")
    async with aiohttp.ClientSession() as http:
        _, headers = await chat(http, proxy, mine, X_Ruyi_Key=KEY_A)
        victim = headers["X-Ruyi-Session"]
        _, headers = await chat(http, proxy, conversation("b"), X_Ruyi_Key=KEY_B, X_Ruyi_Agent="agent-a", X_Ruyi_Session=victim)
        assert (await admin(http, proxy, f"/sessions/{victim}", X_Ruyi_Key=KEY_B))[0] == 404  # b wrote into a session of its own
        mine = mine + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
        _, headers = await chat(http, proxy, mine, X_Ruyi_Key=KEY_A)
        assert headers["X-Ruyi-Session"] == victim  # a's next request continues its own session, not a child
        status, session = await admin(http, proxy, f"/sessions/{victim}", X_Ruyi_Key=KEY_A)
        assert status == 200 and session["requests"] == 2 and session["parent_id"] is None


async def test_ollama_clients_with_only_a_key_do_not_share_an_agent(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy("ollama", auth={"keys": [KEY_A, KEY_B]})
    for key in (KEY_A, KEY_B):
        client = ollama.AsyncClient(host=base_url(proxy), headers={"X-Ruyi-Key": key})
        await client.chat(model="llama3.1:8b", messages=[{"role": "user", "content": f"hello from {key}"}], stream=False)
    async with aiohttp.ClientSession() as http:
        seen = []
        for key in (KEY_A, KEY_B):
            status, listed = await admin(http, proxy, "/sessions", X_Ruyi_Key=key)
            assert status == 200 and len(listed["sessions"]) == 1
            assert listed["agent_id"] == agent_of_key(key) != "default"
            seen.append(listed["sessions"][0]["session_id"])
        assert seen[0] != seen[1]


async def test_x_ruyi_agent_picks_a_sub_agent_inside_the_keys_namespace(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(auth={"keys": [{"key": KEY_A, "agent": "agent-a"}]})
    async with aiohttp.ClientSession() as http:
        await chat(http, proxy, conversation("p"), X_Ruyi_Key=KEY_A, X_Ruyi_Agent="planner")
        status, listed = await admin(http, proxy, "/sessions", X_Ruyi_Key=KEY_A, X_Ruyi_Agent="planner")
        assert status == 200 and listed["agent_id"] == "agent-a/planner" and len(listed["sessions"]) == 1
        assert (await admin(http, proxy, "/sessions", X_Ruyi_Key=KEY_A))[1]["sessions"] == []


async def test_a_named_agent_keeps_its_sessions_across_a_key_rotation(make_proxy: MakeProxy) -> None:
    before = await make_proxy(auth={"keys": [{"key": "old-key-000001", "agent": "agent-a"}]})
    async with aiohttp.ClientSession() as http:
        _, headers = await chat(http, before, conversation("r"), X_Ruyi_Key="old-key-000001")
    await before.close()  # the same data directory, a new key naming the same agent
    after = await make_proxy(auth={"keys": [{"key": "new-key-000002", "agent": "agent-a"}]})
    async with aiohttp.ClientSession() as http:
        status, listed = await admin(http, after, "/sessions", X_Ruyi_Key="new-key-000002")
        assert [s["session_id"] for s in listed["sessions"]] == [headers["X-Ruyi-Session"]]
        assert (await admin(http, after, "/sessions", X_Ruyi_Key="old-key-000001"))[0] == 401


async def test_the_admin_api_answers_the_admin_key_for_every_agent_and_nothing_without_a_key(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(auth={"keys": [{"key": KEY_A, "agent": "agent-a"}, KEY_B], "admin_key": "ruyi-admin-0003"})
    async with aiohttp.ClientSession() as http:
        _, headers = await chat(http, proxy, conversation("a"), X_Ruyi_Key=KEY_A)
        status, listed = await admin(http, proxy, "/sessions", X_Ruyi_Key="ruyi-admin-0003", X_Ruyi_Agent="agent-a")
        assert status == 200 and [s["session_id"] for s in listed["sessions"]] == [headers["X-Ruyi-Session"]]
        assert (await admin(http, proxy, "/sessions", X_Ruyi_Key="ruyi-admin-0003"))[0] == 400  # which agent?
        assert (await admin(http, proxy, "/sessions", X_Ruyi_Key=KEY_B))[1]["sessions"] == []
        for headers_ in ({}, {"X_Ruyi_Agent": "agent-a"}, {"X_Ruyi_Key": "wrong"}):
            assert (await admin(http, proxy, "/sessions", **headers_))[0] == 401
            assert (await admin(http, proxy, "/stats", **headers_))[0] == 401
        assert (await admin(http, proxy, "/stats", X_Ruyi_Key=KEY_B))[0] == 200


async def test_client_keys_are_not_admin_keys_when_no_admin_key_is_set(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(auth={"keys": [{"key": KEY_A, "agent": "agent-a"}, KEY_B]})
    async with aiohttp.ClientSession() as http:
        await chat(http, proxy, conversation("a"), X_Ruyi_Key=KEY_A)
        assert (await admin(http, proxy, "/sessions", X_Ruyi_Key=KEY_B, X_Ruyi_Agent="agent-a"))[1]["sessions"] == []
        assert (await admin(http, proxy, "/sessions"))[0] == 401


def test_configured_agents_are_checked() -> None:
    for agent in ("a/b", "", "has space", "x" * 65):
        with pytest.raises(ConfigError, match="agent"):
            config_for("http://127.0.0.1:1", auth={"keys": [{"key": "k-000001", "agent": agent}]})
    with pytest.raises(ConfigError, match="admin_key must differ"):
        config_for("http://127.0.0.1:1", auth={"keys": ["same-000001"], "admin_key": "same-000001"})
    config = config_for("http://127.0.0.1:1", auth={"keys": ["plain-0001", {"key": "env:RUYI_TEST_UNSET_KEY", "agent": "b"}]})
    assert config.auth.key_agents == {"plain-0001": agent_of_key("plain-0001")}


async def test_the_agents_list_shows_every_agent_to_the_admin_key_and_a_client_key_its_own(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(auth={"keys": [{"key": KEY_A, "agent": "agent-a"}, KEY_B], "admin_key": "ruyi-admin-0003"})
    async with aiohttp.ClientSession() as http:
        await chat(http, proxy, conversation("a"), X_Ruyi_Key=KEY_A)
        await chat(http, proxy, conversation("b"), X_Ruyi_Key=KEY_A)
        await chat(http, proxy, conversation("c"), X_Ruyi_Key=KEY_B)
        status, listed = await admin(http, proxy, "/agents", X_Ruyi_Key="ruyi-admin-0003")
        assert status == 200
        counts = {r["agent_id"]: r["sessions"] for r in listed["agents"]}
        assert counts["agent-a"] == 2 and sum(counts.values()) == 3 and len(counts) == 2
        assert all(r["last_seen"] > 0 for r in listed["agents"])
        status, own = await admin(http, proxy, "/agents", X_Ruyi_Key=KEY_A)
        assert status == 200 and [r["agent_id"] for r in own["agents"]] == ["agent-a"]
        assert (await admin(http, proxy, "/agents"))[0] == 401


async def test_with_no_keys_a_local_caller_finds_where_a_keyless_client_landed(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    async with aiohttp.ClientSession() as http:
        await chat(http, proxy, conversation("a"), Authorization="Bearer sk-ant-some-upstream-key-0001")
        status, listed = await admin(http, proxy, "/agents")
        assert status == 200 and [r["agent_id"].startswith("k-") for r in listed["agents"]] == [True]
        assert listed["agents"][0]["sessions"] == 1
