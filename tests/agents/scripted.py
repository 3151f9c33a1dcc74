"""A scripted model behind Ruyi for the agents suite: Anthropic Messages (streamed or whole) whose answers follow a script
read off each request (how many tool results the conversation holds), whatever the agent's prompt says.

The main conversation runs shell commands with large outputs, asks for one sub-agent (the agent's Task/Agent tool),
runs more commands, then answers ``FINAL``. A sub-agent (its first user message holds ``SUBAGENT``) answers at once;
a side request (a title, a topic check: no tools) gets a one-line answer. Every body the model received is kept, as
Ruyi forwarded it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

FINAL = "All done: FINAL-ANSWER-42"
SUBAGENT = "SUBAGENT-TASK: count the lines of notes.txt and report the number."
SUB_RESULT = "Sub-agent result: notes.txt has 3 lines."
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    *[("Bash", {"command": f"seq {1 + 900 * n} {900 * (n + 1)}", "description": "Print numbers"}) for n in range(3)],
    ("subagent", {"description": "Count lines", "prompt": SUBAGENT, "subagent_type": "general-purpose"}),
    *[("Bash", {"command": f"seq {1 + 900 * n} {900 * (n + 1)}", "description": "Print numbers"}) for n in range(3, 12)],
]
SCRIPTED = web.AppKey("scripted", object)
LONG_SIZES = (900, 2400, 600, 1500, 300, 3000, 1200)
"""Numbers each command of a long session prints, in turn (about 3 to 7 tokens each): outputs of 1,000 to 20,000
characters, like the file reads and test runs of a real session, each below the agents' own output caps (Claude
Code's 30,000 characters, Qwen Code's 25,000)."""


def seq_command(step: int, long: bool) -> str:
    """The suite's command at ``step`` (900 numbers), or a long session's (LONG_SIZES in turn)."""
    if not long:
        return f"seq {1 + 900 * step} {900 * (step + 1)}"
    return f"seq {1 + 3000 * step} {3000 * step + LONG_SIZES[step % len(LONG_SIZES)]}"


@dataclass
class Scripted:
    mode: str = "work"
    """``work``: the script above; ``recall``: one big output, then Ruyi's MCP ``recall`` of its placeholder's ref."""
    steps: int = 0
    """A long session (``bench/savings/agents_sessions.py record --long``): this many commands (LONG_SIZES), the
    sub-agent at the same step; 0: the suite's short script."""
    received: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def main_bodies(self, request_text: str) -> list[dict[str, Any]]:
        """The main conversation's requests: tools offered and the person's request in the first user message."""
        return [b for b in self.received if b.get("tools") and request_text in json.dumps(first_user(b)) and not is_subagent(b)]


def first_user(body: dict[str, Any]) -> Any:
    return next((m.get("content") for m in body.get("messages") or () if m.get("role") == "user"), None)


def is_subagent(body: dict[str, Any]) -> bool:
    return SUBAGENT in json.dumps(first_user(body))


def step_of(body: dict[str, Any]) -> int:
    """The script's next step: one past the step whose result the newest message carries (0 for the request itself).
    Read off the newest message only: an archive takes older results away, never the newest."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content") if isinstance(last.get("content"), list) else ()
    done = [
        int(b["tool_use_id"].rsplit("_", 1)[1])
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result" and str(b.get("tool_use_id", "")).startswith("toolu_script_")
    ]
    return max(done) + 1 if done else 0


RECALL_TOOL = "mcp__ruyi__recall"
RECALLED = "RECALLED-OK"
REF = re.compile(r"\b(?:ref|with id) (r[0-9a-f]{12})\b")  # "call mcp__ruyi__recall with id r…" when the tool is offered


def recall_script(body: dict[str, Any], tools: set[Any]) -> list[dict[str, Any]]:
    """Print 5,000 numbers (Ruyi truncates them on arrival, keeping the original under a ref), call Ruyi's ``recall``
    with that ref, then say whether the original came back (a middle line the truncation left out)."""
    step = step_of(body)
    if step == 0:
        return [{"type": "tool_use", "id": "toolu_script_0", "name": "Bash", "input": {"command": "seq 1 5000", "description": "Print numbers"}}]
    if step == 1:
        found = REF.search(json.dumps(body.get("messages")))
        if found is None or RECALL_TOOL not in tools:
            return [{"type": "text", "text": "NO-REF-OR-TOOL"}]
        return [{"type": "tool_use", "id": "toolu_script_1", "name": RECALL_TOOL, "input": {"id": found.group(1)}}]
    last = json.dumps((body.get("messages") or [{}])[-1])
    return [{"type": "text", "text": RECALLED if "\\n1500\\n" in last else "RECALL-FAILED"}]


def answer(body: dict[str, Any], mode: str = "work", steps: int = 0) -> list[dict[str, Any]]:
    tools = {t.get("name") for t in body.get("tools") or () if isinstance(t, dict)}
    if not tools:
        return [{"type": "text", "text": "ok"}]
    if mode == "recall":
        return recall_script(body, tools)
    if is_subagent(body):
        return [{"type": "text", "text": SUB_RESULT}]
    step = step_of(body)
    if step >= (steps or len(SCRIPT)):
        return [{"type": "text", "text": FINAL}]
    name, args = SCRIPT[step] if step < len(SCRIPT) else SCRIPT[-1]
    if steps and name != "subagent":
        args = {**args, "command": seq_command(step, True)}
    if name == "subagent":
        name = next((n for n in ("Task", "Agent") if n in tools), "")
    if name not in tools:
        return [{"type": "text", "text": FINAL}]
    return [{"type": "tool_use", "id": f"toolu_script_{step}", "name": name, "input": args}]


async def messages(request: web.Request) -> web.StreamResponse:
    scripted = request.app[SCRIPTED]
    body = await request.json()
    scripted.received.append(body)
    scripted.headers.append(dict(request.headers))
    blocks = answer(body, scripted.mode, scripted.steps)
    stop = "tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn"
    usage = {"input_tokens": max(1, len(json.dumps(body)) // 4), "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    message = {
        "id": f"msg_script_{len(scripted.received)}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if not body.get("stream"):
        return web.json_response(message)
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}})
    ]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            start, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]
        else:
            start, deltas = {**block, "input": {}}, [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events += [
            ("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
            *[("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}) for d in deltas],
            ("content_block_stop", {"type": "content_block_stop", "index": i}),
        ]
    events += [
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await out.prepare(request)
    for name, data in events:
        await out.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    await out.write_eof()
    return out


async def count_tokens(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response({"input_tokens": max(1, len(json.dumps(body)) // 4)})


def make_app(scripted: Scripted) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[SCRIPTED] = scripted
    app.router.add_post("/v1/messages", messages)
    app.router.add_post("/v1/messages/count_tokens", count_tokens)
    app.router.add_post("/v1/responses", responses)
    app.router.add_post("/v1/chat/completions", chat_dispatch)
    app.router.add_get("/v1/models", models)
    app.router.add_route("*", "/{tail:.*}", anything)
    return app


CODEX_STEPS = 8
"""Commands the Codex script runs before its final answer."""


def responses_step(body: dict[str, Any]) -> int:
    """The Codex script's next step: one past the newest function_call_output's ``call_script_N``."""
    items = body.get("input") if isinstance(body.get("input"), list) else []
    done = [
        int(str(i.get("call_id")).rsplit("_", 1)[1])
        for i in items
        if isinstance(i, dict) and i.get("type") == "function_call_output" and str(i.get("call_id", "")).startswith("call_script_")
    ]
    return max(done) + 1 if done else 0


def responses_answer(body: dict[str, Any], steps: int = 0) -> dict[str, Any]:
    """The next output item: a shell call in whichever form this Codex offers, or the final message."""
    tools = {t.get("name"): t for t in body.get("tools") or () if isinstance(t, dict) and t.get("name")}
    step = responses_step(body)
    command = seq_command(step, bool(steps))
    if step < (steps or CODEX_STEPS):
        if "shell" in tools:
            return {
                "type": "function_call",
                "id": f"fc_{step}",
                "call_id": f"call_script_{step}",
                "name": "shell",
                "arguments": json.dumps({"command": ["bash", "-lc", command]}),
                "status": "completed",
            }
        if "exec_command" in tools:
            return {
                "type": "function_call",
                "id": f"fc_{step}",
                "call_id": f"call_script_{step}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": command}),
                "status": "completed",
            }
    return {
        "type": "message",
        "id": f"msg_{step}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": FINAL, "annotations": []}],
    }


async def responses(request: web.Request) -> web.StreamResponse:
    scripted = request.app[SCRIPTED]
    body = await request.json()
    scripted.received.append(body)
    scripted.headers.append(dict(request.headers))
    item = responses_answer(body, scripted.steps)
    usage = {
        "input_tokens": max(1, len(json.dumps(body)) // 4),
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": max(1, len(json.dumps(body)) // 4) + 10,
    }
    response = {
        "id": f"resp_{len(scripted.received)}",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": body.get("model"),
        "output": [item],
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }
    if not body.get("stream"):
        return web.json_response(response)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    if item["type"] == "message":
        events.append({"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": FINAL})
    events += [{"type": "response.output_item.done", "output_index": 0, "item": item}, {"type": "response.completed", "response": response}]
    out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await out.prepare(request)
    for n, event in enumerate(events):
        await out.write(f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': n})}\n\n".encode())
    await out.write_eof()
    return out


async def chat(request: web.Request) -> web.StreamResponse:
    """The Codex script over chat completions (a chat-only server behind Ruyi's Responses bridge)."""
    scripted = request.app[SCRIPTED]
    body = await request.json()
    scripted.received.append(body)
    last = (body.get("messages") or [{}])[-1]
    done = str(last.get("tool_call_id") or "")
    step = int(done.rsplit("_", 1)[1]) + 1 if last.get("role") == "tool" and done.startswith("call_script_") else 0
    tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or ()}
    command = f"seq {1 + 900 * step} {900 * (step + 1)}"
    message: dict[str, Any] = {"role": "assistant", "content": FINAL}
    if step < CODEX_STEPS and tools & {"shell", "exec_command"}:
        name = "shell" if "shell" in tools else "exec_command"
        args = {"command": ["bash", "-lc", command]} if name == "shell" else {"cmd": command}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_script_{step}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
        }
    usage = {"prompt_tokens": max(1, len(json.dumps(body)) // 4), "completion_tokens": 10, "total_tokens": 0}
    base = {"id": f"chatcmpl-{len(scripted.received)}", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}
    if not body.get("stream"):
        return web.json_response(
            {
                **base,
                "object": "chat.completion",
                "usage": usage,
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            }
        )
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": 0, **message["tool_calls"][0]}]
    else:
        delta["content"] = message["content"]
    chunks = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}]},
        {**base, "choices": [], "usage": usage},
    ]
    out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await out.prepare(request)
    for c in chunks:
        await out.write(b"data: " + json.dumps(c).encode() + b"\n\n")
    await out.write(b"data: [DONE]\n\n")
    await out.write_eof()
    return out


# --- OpenAI chat (Qwen Code, opencode) -------------------------------------------------------------------------------

SHELL_TOOLS = ("run_shell_command", "bash", "shell", "Bash")
TASK_TOOLS = ("task", "Task", "agent")
CHAT_STEPS = 8
CHAT_SUBAGENT_AT = 3
"""The chat script: ``CHAT_STEPS`` shell commands with the sub-agent call at step ``CHAT_SUBAGENT_AT``, then FINAL."""


def chat_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def chat_is_subagent(body: dict[str, Any]) -> bool:
    """A sub-agent's conversation: the sub-agent prompt arrives as a user message (whatever the agent wraps round it)."""
    return any(m.get("role") == "user" and SUBAGENT in chat_text(m.get("content")) for m in body.get("messages") or ())


def chat_step(body: dict[str, Any]) -> int:
    """One past the newest ``call_script_N`` result among the trailing tool messages (0 for the request itself)."""
    done: list[int] = []
    for m in reversed(body.get("messages") or ()):
        if m.get("role") != "tool":
            break
        tid = str(m.get("tool_call_id", ""))
        if tid.startswith("call_script_"):
            done.append(int(tid.rsplit("_", 1)[1]))
    return max(done) + 1 if done else 0


def tool_args(tool: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Arguments for an offered tool: ours where the schema names them, a plausible value for any other required one."""
    params = (tool.get("function") or {}).get("parameters") or {}
    props = params.get("properties") or {}
    args = {k: v for k, v in values.items() if k in props}
    for name in params.get("required") or ():
        if name not in args:
            kind = (props.get(name) or {}).get("type")
            enum = (props.get(name) or {}).get("enum")
            args[name] = enum[0] if enum else False if kind == "boolean" else 0 if kind in ("integer", "number") else name
    return args


def chat_answer(body: dict[str, Any], steps: int = 0) -> tuple[str, dict[str, Any] | None]:
    """The next move: ``("", call)`` for a tool call, ``(text, None)`` for an answer."""
    tools = {(t.get("function") or {}).get("name"): t for t in body.get("tools") or () if isinstance(t, dict)}
    if not tools:
        return "Listing files", None  # a side request: a title, a summary, a check
    if chat_is_subagent(body):
        return SUB_RESULT, None
    step = chat_step(body)
    if step >= (steps or CHAT_STEPS):
        return FINAL, None
    if step == CHAT_SUBAGENT_AT:
        name = next((n for n in TASK_TOOLS if n in tools), None)
        agent_types: list[Any] = []
        if name:
            prop = ((tools[name].get("function") or {}).get("parameters") or {}).get("properties", {}).get("subagent_type") or {}
            agent_types = prop.get("enum") or []
        values = {
            "description": "Count lines",
            "prompt": SUBAGENT,
            "subagent_type": "general" if "general" in agent_types or not agent_types else agent_types[0],
        }
    else:
        name = next((n for n in SHELL_TOOLS if n in tools), None)
        values = {"command": seq_command(step, bool(steps)), "description": "Print numbers", "is_background": False}
    if name is None:
        return FINAL, None
    return "", {"id": f"call_script_{step}", "type": "function", "function": {"name": name, "arguments": json.dumps(tool_args(tools[name], values))}}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    scripted = request.app[SCRIPTED]
    body = await request.json()
    scripted.received.append(body)
    scripted.headers.append(dict(request.headers))
    text, call = chat_answer(body, scripted.steps)
    finish = "tool_calls" if call else "stop"
    prompt = max(1, len(json.dumps(body)) // 4)
    usage = {"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10}
    base = {"id": f"chatcmpl-script-{len(scripted.received)}", "created": 0, "model": body.get("model")}
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if call:
            message["tool_calls"] = [call]
        return web.json_response(
            {**base, "object": "chat.completion", "usage": usage, "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
        )
    chunks: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if text:
        chunks.append({"content": text})
    if call:
        chunks.append(
            {"tool_calls": [{"index": 0, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}]}
        )
        chunks.append({"tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]})
    out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await out.prepare(request)
    for delta in chunks:
        chunk = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        await out.write(f"data: {json.dumps(chunk)}\n\n".encode())
    last = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}
    await out.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
    await out.write_eof()
    return out


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "qwen3-coder-plus", "object": "model"}]})


async def anything(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def chat_dispatch(request: web.Request) -> web.StreamResponse:
    """OpenAI chat: Codex's script through Ruyi's Responses bridge (``mode="codex"``), else Qwen Code's and opencode's."""
    if request.app[SCRIPTED].mode == "codex":
        return await chat(request)
    return await chat_completions(request)
