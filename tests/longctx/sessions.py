"""Hand-made agent sessions for the long-context tests: edits, test runs that fail, unique outputs (nothing to dedup)."""

from __future__ import annotations

import json
from typing import Any

Message = dict[str, Any]
SYSTEM = "You are a coding agent. Work in /repo. Run the tests after every change."
TASK = "Fix the crash in parser.py when the input is empty, and keep the public API unchanged."


def bash(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def turn(t: int, lines: int = 40) -> list[Message]:
    """One turn: an edit, a test run (failing on odd turns) or a read, each output unique."""
    kind = t % 3
    if kind == 0:
        command, output = f"sed -i 's/old_{t}/new_{t}/' /repo/src/module_{t}.py", "<returncode>0</returncode>\n<output>\n</output>"
    elif kind == 1:
        command = f"cd /repo && python -m pytest tests/test_case_{t}.py -x"
        body = "\n".join(f"tests/test_case_{t}.py::test_{i} PASSED [{i}%] checking value {t * 1000 + i}" for i in range(lines))
        failure = f"\nE   ValueError: empty input in case {t}\nFAILED tests/test_case_{t}.py::test_last - ValueError: empty input in case {t}"
        output = f"<returncode>1</returncode>\n<output>\n{body}{failure}\n</output>"
    else:
        command = f"cat /repo/src/reader_{t}.py"
        body = "\n".join(f"def read_{t}_{i}(stream):  # reads record {i} of part {t}\n    return stream.read({i})" for i in range(lines // 2))
        output = f"<returncode>0</returncode>\n<output>\n{body}\n</output>"
    call_id = f"call_{t}"
    return [
        {"role": "assistant", "content": f"Step {t}: next I run `{command.split(' ')[0]}`.", "tool_calls": [bash(call_id, command)]},
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def session(turns: int, system: str = SYSTEM, task: str = TASK, lines: int = 40) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    for t in range(turns):
        messages += turn(t, lines)
    return messages


def edited_files(turns: int) -> list[str]:
    return [f"/repo/src/module_{t}.py" for t in range(turns) if t % 3 == 0]


def assert_paired(messages: list[Message]) -> None:
    """Every tool result follows its call's assistant message; every call has its result before the next assistant."""
    open_ids: set[str] = set()
    for m in messages:
        if m["role"] == "assistant":
            assert not open_ids, f"calls without results: {open_ids}"
            open_ids = {c["id"] for c in m.get("tool_calls") or []}
        elif m["role"] == "tool":
            open_ids.remove(m["tool_call_id"])


def archive_message(messages: list[Message]) -> int:
    """The index of the one forwarded message carrying the archive block (``archive.block: after_task``: on the wire, at
    the end of the task's own message)."""
    found = [k for k, m in enumerate(messages) if "<ruyi-archive" in json.dumps(m.get("content"), ensure_ascii=False)]
    assert len(found) == 1, found
    return found[0]


def block_after(sent: Message, sent_by_client: Message) -> str:
    """The archive block at the end of a forwarded message: the client's message first, byte for byte, then the block
    (after a blank line in a string, a text part of its own in a list of parts)."""
    content, original = sent["content"], sent_by_client["content"]
    assert {k: v for k, v in sent.items() if k != "content"} == {k: v for k, v in sent_by_client.items() if k != "content"}
    if isinstance(original, str):
        assert content.startswith(original + "\n\n<ruyi-archive"), content[:200]
        return str(content[len(original) + 2 :])
    assert content[: len(original)] == original and len(content) == len(original) + 1
    return str(content[-1]["text"])
