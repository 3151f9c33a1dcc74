"""Agent recordings: what the pinned agent CLIs send straight to the agents suite's scripted model (no Ruyi), recorded
compactly (each request as its change from an earlier one, no key, scratch paths replaced) and read back."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.agents.scripted import Scripted
from tests.agents.scripted import make_app as scripted_app

RECORDINGS = Path(__file__).resolve().parents[2] / "tests" / "agents" / "recordings"
KEPT_HEADERS = (
    "anthropic-beta",
    "anthropic-version",
    "x-claude-code-session-id",
    "session_id",
    "session-id",
    "user-agent",
    "openai-beta",
    "x-stainless-lang",
    "thread-id",
    "x-opencode-session",
    "x-session-id",
    "x-session-affinity",
    "x-parent-session-id",
)
"""The request headers a recording keeps (never a key: no Authorization, no x-api-key)."""
AGENTS: dict[str, dict[str, Any]] = {
    "claude": {"module": "tests.agents.test_claude_code", "kind": "anthropic", "path": "/v1/messages", "models": {"claude-*": 64_000}},
    "qwen": {"module": "tests.agents.test_qwen_code", "kind": "openai", "path": "/v1/chat/completions", "models": {"qwen*": 32_000}},
    "opencode": {"module": "tests.agents.test_opencode", "kind": "openai", "path": "/v1/chat/completions", "models": {"qwen*": 22_000}},
    "codex": {"module": "tests.agents.test_codex", "kind": "openai", "path": "/v1/responses", "models": {"gpt-5*": 16_000}},
}


LONG: dict[str, dict[str, Any]] = {
    "claude": {"steps": 55, "models": {"claude-*": 100_000}},
    "qwen": {"steps": 55, "models": {"qwen*": 64_000}},
    "opencode": {"steps": 55, "models": {"qwen*": 64_000}},
    "codex": {"steps": 55, "models": {"gpt-5*": 64_000}},
}
"""The long sessions (``record --long``, saved as <agent>.long.json.gz): 55 commands of 1,000 to 20,000 characters
(tests/agents/scripted.py: LONG_SIZES), replayed at windows people run these agents with: Claude Code at 100,000 (a
``window.models`` cap below Sonnet's 200,000; 68,000 usable beside its 32,000-token answers), the others at 64,000 (a
local model served at 64k). The agents' fixed prefixes (system prompt and tools: Claude Code about 19,000 tokens,
Qwen Code 17,000, opencode and Codex 8,000) take 14 to 31 % of the usable window, not 42 to 70 % as in the short
sessions at the suite's windows, and each session grows to about twice the usable window."""


def history_key(body: dict[str, Any]) -> str:
    return "input" if isinstance(body.get("input"), list) else "messages"


def shared_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def compact(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each body as its change from an earlier one (``base``, the one it shares most with; -1: none): how many history
    items it shares with it, its new items, its changed fields. Side requests and sub-agents interleave with the main
    conversation, so the base is not always the previous body."""
    out: list[dict[str, Any]] = []
    for n, body in enumerate(bodies):
        key = history_key(body)
        items = body.get(key) or []

        def size(d: dict[str, Any]) -> int:
            return len(json.dumps(d))

        best: dict[str, Any] = {"base": -1, "key": key, "shared": 0, "new": items, "set": {k: v for k, v in body.items() if k != key}, "unset": []}
        for m, prev in enumerate(bodies[:n]):
            shared = shared_prefix(items, prev.get(key) or [])
            delta = {
                "base": m,
                "key": key,
                "shared": shared,
                "new": items[shared:],
                "set": {k: v for k, v in body.items() if k != key and prev.get(k) != v},
                "unset": [k for k in prev if k not in body and k != key],
            }
            if size(delta) < size(best):
                best = delta
        out.append(best)
    return out


def expand(deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    for d in deltas:
        prev = bodies[d["base"]] if d["base"] >= 0 else {}
        body = {k: v for k, v in prev.items() if k not in d["unset"] and k != d["key"]}
        body.update(d["set"])
        body[d["key"]] = (prev.get(d["key"]) or [])[: d["shared"]] + d["new"]
        bodies.append(body)
    return bodies


def scrub(text: str, paths: dict[str, str]) -> str:
    for real, shown in paths.items():
        text = text.replace(real, shown)
    return text


async def record_one(name: str, long: bool = False) -> Path:
    spec = AGENTS[name]
    module = __import__(spec["module"], fromlist=["_"])
    scripted = Scripted(steps=LONG[name]["steps"] if long else 0)
    runner = web.AppRunner(scripted_app(scripted))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://127.0.0.1:{port}"
    try:
        with tempfile.TemporaryDirectory(prefix="ruyi-agent-") as tmp:
            work, home = Path(tmp) / "work", Path(tmp) / "home"
            work.mkdir()
            home.mkdir()
            (work / "notes.txt").write_text("one\ntwo\nthree\n")
            if name == "claude":
                code, output = await module.run_claude(url, work, home)
            elif name == "qwen":
                code, output = await module.run_qwen(url + "/v1", work, home)
            elif name == "opencode":
                window = next(iter(LONG[name]["models"].values())) if long else module.WINDOW
                code, output = await module.run_opencode(url + "/v1", work, home, window)
            else:
                code, output = await module.run_codex(url, work, home)
            paths = {str(work): "/tmp/agent/work", str(home): "/tmp/agent/home", tmp: "/tmp/agent", str(port): "PORT"}
    finally:
        await runner.cleanup()
    if code != 0:
        raise SystemExit(f"{name} failed ({code}): {output[-2000:]}")
    headers = [{k.lower(): v for k, v in h.items() if k.lower() in KEPT_HEADERS} for h in scripted.headers]
    version = json.loads((Path(__file__).resolve().parents[2] / "tests" / "agents" / "package.json").read_text())["dependencies"]  # noqa: ASYNC240 - a bench, once
    assert expand(compact(scripted.received)) == scripted.received
    doc = {
        "agent": name,
        "versions": version,
        "kind": spec["kind"],
        "path": spec["path"],
        "models": LONG[name]["models"] if long else spec["models"],
        "headers": headers,
        "requests": compact(scripted.received),
    }
    RECORDINGS.mkdir(parents=True, exist_ok=True)
    text = scrub(json.dumps(doc, separators=(",", ":")), paths) + "\n"
    if long:  # numbers compress well: a long session is about 1.5 MB of JSON, a tenth of it gzipped
        out = RECORDINGS / f"{name}.long.json.gz"
        out.write_bytes(gzip.compress(text.encode(), mtime=0))
        return out
    out = RECORDINGS / f"{name}.json"
    out.write_text(text)
    return out


def read_recording(path: Path) -> dict[str, Any]:
    """A recording, plain or gzipped."""
    data = path.read_bytes()
    doc: dict[str, Any] = json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)
    return doc
