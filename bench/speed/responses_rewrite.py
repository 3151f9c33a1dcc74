"""Ruyi's time on a 300-item Responses input, beside the same conversation as a chat-completions body, in one run.

One Codex-shaped conversation (instructions, a developer message, the task, then 149 shell calls each with its output:
300 input items) is sent as it grows, one request per step, through the real proxy (in this process, over 127.0.0.1, in
front of the test suite's fake upstream) to ``/v1/responses``; the very same conversation as a chat-completions body
(301 messages: the instructions become a system message, each call an assistant message, each output a tool message) to
``/v1/chat/completions``, the two interleaved request by request, each in its own agent. The window (32k by default) is
far below the conversation (≈128k tokens at the end), so the later requests are pruned and archived. Then the whole
conversation is sent again ``--repeats`` times (the session known: the warm path), and ``--cold-runs`` times to an agent
Ruyi has not seen (a new session), the dialects interleaved each time.

Ruyi's time is its own audit record's ``latency_ruyi_ms``: from the request's arrival to the upstream's answer, less the
time waiting on the upstream (reading the body, measuring, rewriting, writing the new body and sending it). Beside it the
client's wall time through Ruyi and straight to the fake upstream.

    .venv/bin/python bench/speed/responses_rewrite.py                 # 149 steps, 32k window, 20 repeats, 5 cold runs
    .venv/bin/python bench/speed/responses_rewrite.py --steps 60      # a shorter conversation while iterating

``RUYI_BENCH_OVERRIDES`` (JSON of config keys) changes Ruyi's configuration, e.g. ``{"server.loop_rewrite_bytes": 1048576}``
keeps every rewrite on the event loop, where cProfile sees it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiohttp
from aiohttp import web

from config.load import load_config
from proxy.http.app import make_app
from proxy.http.exposure import server_options
from proxy.http.log import configure_logging
from proxy.rewrite.steps import default_steps
from tests.fake_upstream import FakeUpstream, make_fake_app

INSTRUCTIONS = "You are Codex, a coding agent. Run commands with the shell tool; keep going until the task is done."
DEVELOPER = "<permissions instructions>Commands run in a sandbox; the workspace is writable.</permissions instructions>"
TASK = "Find why the nightly report is slow and fix it; run the tests when done."
SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}},
}


def output_of(step: int) -> str:
    """A command's output: a file's 40 lines, different at every step."""
    return "\n".join(f"src/report_{step}.py:{n}: total_{n} = sum(row.amount_{n} for row in rows_{step})  # {step * n}" for n in range(40))


def responses_body(steps: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": DEVELOPER}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]},
    ]
    for s in range(steps):
        items += [
            {"type": "function_call", "call_id": f"call_{s}", "name": "shell", "arguments": json.dumps({"command": ["cat", f"src/report_{s}.py"]})},
            {"type": "function_call_output", "call_id": f"call_{s}", "output": output_of(s)},
        ]
    return {"model": "gpt-5-codex", "instructions": INSTRUCTIONS, "input": items, "tools": [SHELL], "store": False, "stream": False}


def chat_body(steps: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "system", "content": DEVELOPER},
        {"role": "user", "content": TASK},
    ]
    for s in range(steps):
        call = {
            "id": f"call_{s}",
            "type": "function",
            "function": {"name": "shell", "arguments": json.dumps({"command": ["cat", f"src/report_{s}.py"]})},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{s}", "content": output_of(s)},
        ]
    tools = [{"type": "function", "function": {"name": "shell", "description": SHELL["description"], "parameters": SHELL["parameters"]}}]
    return {"model": "gpt-5-codex", "messages": messages, "tools": tools, "stream": False}


DIALECTS = {"responses": ("/v1/responses", responses_body), "chat": ("/v1/chat/completions", chat_body)}


def interleaved(n: int) -> list[tuple[str, tuple[str, Any]]]:
    """The dialects in turn, the one that goes first alternating (neither always follows the other)."""
    pairs = list(DIALECTS.items())
    return pairs if n % 2 == 0 else pairs[::-1]


async def start(app: web.Application, **options: Any) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None, **options)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def send(http: aiohttp.ClientSession, url: str, body: bytes, agent: str) -> float:
    started = time.perf_counter()
    async with http.post(url, data=body, headers={"Content-Type": "application/json", "X-Ruyi-Agent": agent}) as resp:
        await resp.read()
        assert resp.status == 200, resp.status
    return (time.perf_counter() - started) * 1000


def audit_records(path: Path, expected: int) -> list[dict[str, Any]]:
    """The audit file's records once all ``expected`` are written (its own thread writes them)."""
    for _ in range(600):
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= expected:
            return [json.loads(line) for line in lines]
        time.sleep(0.05)
    raise RuntimeError(f"{expected} audit records expected, {len(lines)} written")


def row(label: str, values: list[float]) -> str:
    ordered = sorted(values)
    return f"| {label} | {statistics.median(values):.1f} | {ordered[int(0.9 * (len(ordered) - 1))]:.1f} | {ordered[-1]:.1f} |"


async def run(args: argparse.Namespace) -> None:
    configure_logging("warning")
    fake = FakeUpstream()

    class Forget(list):  # type: ignore[type-arg]
        def append(self, item: object) -> None:
            pass

    fake.received = Forget()
    upstream_runner, upstream = await start(make_fake_app(fake))
    data = Path(tempfile.mkdtemp(prefix="ruyi-bench-"))
    audit = data / "audit.jsonl"
    overrides = {
        "default_route.url": upstream + "/v1",
        "default_route.kind": "openai",
        "window.models": {"gpt-5*": args.window},
        "audit.path": str(audit),
        "store.data_dir": str(data / "store"),
        "logging.level": "warning",
        **json.loads(os.environ.get("RUYI_BENCH_OVERRIDES", "{}")),
    }
    cfg = load_config(None, {"RUYI_DATA_DIR": str(data / "store")}, overrides)
    ruyi_runner, ruyi = await start(make_app(cfg, default_steps(cfg), probe_upstream=False), **server_options(cfg))
    wall: dict[str, list[tuple[int, float]]] = {f"{d} via {w}": [] for d in DIALECTS for w in ("ruyi", "direct")}
    async with aiohttp.ClientSession() as http:
        for name, (path, build) in DIALECTS.items():  # tokenizers and first-use costs, in an agent not timed
            for steps in (1, 2, 3):
                await send(http, ruyi + path, json.dumps(build(steps)).encode(), f"first-{name}")
        for steps in range(1, args.steps + 1):  # the conversation as it grows, the dialects interleaved
            for name, (path, build) in interleaved(steps):
                body = build(steps)
                size = len(body.get("input") or body.get("messages") or ())
                raw = json.dumps(body).encode()
                wall[f"{name} via ruyi"].append((size, await send(http, ruyi + path, raw, f"warm-{name}")))
                wall[f"{name} via direct"].append((size, await send(http, upstream + path, raw, "direct")))
        for n in range(args.repeats):  # the whole conversation again, its session known
            for name, (path, build) in interleaved(n):
                await send(http, ruyi + path, json.dumps(build(args.steps)).encode(), f"again-{name}")
        for run_no in range(args.cold_runs):  # the whole conversation at once, to an agent Ruyi has not seen
            for name, (path, build) in interleaved(run_no):
                raw = json.dumps(build(args.steps)).encode()
                await send(http, ruyi + path, raw, f"cold-{name}-{run_no}")
    await ruyi_runner.cleanup()  # flushes the audit file
    await upstream_runner.cleanup()
    records = [r for r in audit_records(audit, 2 * (3 + args.steps + args.repeats + args.cold_runs)) if not r["agent_id"].startswith("first-")]
    ruyi_ms: dict[tuple[str, str], list[tuple[int, float, dict[str, Any]]]] = {}
    sizes = {name: iter(size for size, _ in wall[f"{name} via ruyi"]) for name in DIALECTS}
    for record in records:  # each agent's in the order its requests were sent (one at a time)
        kind, name = record["agent_id"].split("-")[:2]
        size = next(sizes[name]) if kind == "warm" else 0
        ruyi_ms.setdefault((name, kind), []).append((size, float(record["body"]["latency_ruyi_ms"]), record["body"]))
    last = {name: [ms for size, ms, _ in ruyi_ms[(name, "warm")][-10:]] for name in DIALECTS}
    final = {name: ruyi_ms[(name, "warm")][-1] for name in DIALECTS}
    print(f"one conversation, {args.steps} calls: {final['responses'][0]} Responses items, {final['chat'][0]} chat messages; window {args.window}\n")
    print("Ruyi's own time per request (audit `latency_ruyi_ms`), ms:\n")
    print("| request | median | p90 | max |")
    print("|---|---:|---:|---:|")
    for name in DIALECTS:
        print(row(f"{name}, warm, last 10 requests (≈{final[name][0]} {'items' if name == 'responses' else 'messages'})", last[name]))
    for name in DIALECTS:
        print(row(f"{name}, warm, every request", [ms for _, ms, _ in ruyi_ms[(name, "warm")]]))
    for name in DIALECTS:
        print(row(f"{name}, warm, the whole conversation again ×{args.repeats}", [ms for _, ms, _ in ruyi_ms[(name, "again")]]))
    for name in DIALECTS:
        print(row(f"{name}, cold (new session), whole conversation", [ms for _, ms, _ in ruyi_ms[(name, "cold")]]))
    ratio_last = statistics.median(last["responses"]) / statistics.median(last["chat"])
    ratio_again = statistics.median(ms for _, ms, _ in ruyi_ms[("responses", "again")]) / statistics.median(
        ms for _, ms, _ in ruyi_ms[("chat", "again")]
    )
    ratio_cold = statistics.median(ms for _, ms, _ in ruyi_ms[("responses", "cold")]) / statistics.median(
        ms for _, ms, _ in ruyi_ms[("chat", "cold")]
    )
    print(f"\nResponses / chat, Ruyi's time: warm last 10 ×{ratio_last:.2f}, again ×{ratio_again:.2f}, cold ×{ratio_cold:.2f}\n")
    print("the client's wall time, last 10 requests, ms (through Ruyi / straight to the fake upstream):\n")
    print("| request | median | p90 | max |")
    print("|---|---:|---:|---:|")
    for label, values in wall.items():
        print(row(label, [ms for _, ms in values[-10:]]))
    for name in DIALECTS:
        record = final[name][2]
        print(f"\n{name}, last request: tier {record['tier']}, batch {record['batch']}, tokens {record['est_before']} → {record['est_after']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=149, help="shell calls in the conversation (149: 300 Responses items)")
    parser.add_argument("--window", type=int, default=32000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cold-runs", type=int, default=5)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
