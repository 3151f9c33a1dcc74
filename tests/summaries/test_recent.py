"""The agent's own archived messages kept verbatim in the archive block: line by line, what nothing else names."""

from __future__ import annotations

import json
from typing import Any

from proxy.longctx.block import archive_block
from summaries.evidence import terms
from summaries.recent import CHARS_PER_TOKEN, recent_work, said
from tests.traces import load, needs_traces, trace_files


def _call(text: str, command: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}],
    }


SCRIPT_1 = "cat > t.py <<'EOF'\nimport django\nsettings.configure(INSTALLED_APPS=['app'], SECRET_KEY='x')\ndjango.setup()\nprint(run_check(1))\nEOF"
SCRIPT_2 = (
    "cat > t.py <<'EOF'\nimport django\nsettings.configure(INSTALLED_APPS=['app'], SECRET_KEY='x')\ndjango.setup()\nprint(run_check_two(2))\nEOF"
)


def test_a_rewritten_script_is_kept_once_with_the_lines_that_changed_in_the_message_they_changed_in() -> None:
    messages = [
        _call("First try with `run_check`", SCRIPT_1),
        {"role": "tool", "tool_call_id": "c", "content": "Traceback: AppRegistryNotReady in apps_registry.py"},
        _call("Now `run_check_two`", SCRIPT_2),
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    out = recent_work(messages, 10, 500)
    assert out.count("INSTALLED_APPS") == 1 and out.count("django.setup") == 1
    assert "[12] Now `run_check_two`" in out and "[10] " in out and out.index("[10]") < out.index("[12]")
    assert "run_check" in out.split("[12]")[0]  # what only the older version named stays with it
    assert "AppRegistryNotReady" not in out  # tool outputs are not the agent's words
    assert "settings.configure" in out.split("[12]")[1]  # decoded arguments: a line break in the JSON is one


def test_what_the_request_holds_anyway_is_not_repeated_and_the_budget_holds() -> None:
    messages = [_call(f"step {i}", f"python -c 'print(value_{i}, other_{i})'") for i in range(200)]
    out = recent_work(messages, 0, 100, known="value_199 other_199")
    assert "[199]" not in out  # everything it names is known
    assert "[198]" in out and "[0]" not in out  # the newest first, within the budget
    assert len(out) <= 100 * CHARS_PER_TOKEN
    assert recent_work(messages, 0, 0) == "" and recent_work([], 0, 500) == ""


def test_the_block_carries_them_after_the_summary_and_says_what_they_are() -> None:
    block = archive_block(1, 2, 40, 19, "the summary", [], 6, False, None, "[12] cat > t.py")
    assert block.index("</summary>") < block.index("<recent-work>") < block.index("[12] cat > t.py") < block.index("</recent-work>")
    assert "verbatim" in block and "<recent-work>" not in archive_block(1, 2, 40, 19, "the summary", [], 6, False)
    assert "原文" in archive_block(1, 2, 40, 19, "摘要", [], 6, True, None, "[12] cat > t.py")


def test_a_script_naming_many_things_wins_over_newer_lines_naming_one_each() -> None:
    script = "cat > check.py <<'EOF'\n" + "\n".join(f"assert parse_field_{i}(load_row_{i}) == expected_{i}" for i in range(6)) + "\nEOF"
    prose = "Let me look again at how the parser handles the case of {} before going on"
    messages = [_call("Write the check", script)] + [_call(prose.format(f"part_{i}"), "ls") for i in range(1, 30)]
    out = recent_work(messages, 0, 150)
    assert "parse_field_0" in out and "expected_5" in out  # 18 names in six short lines, 29 messages back
    assert "[29]" in out  # and the newest still there
    assert len(out) <= 150 * CHARS_PER_TOKEN


def test_a_printed_range_is_where_the_agent_worked() -> None:
    messages = [_call("", "sed -n '850,870p' grammar/base.py"), _call("", "sed -n '870,900p' grammar/base.py")]
    out = recent_work(messages, 4, 200, known="grammar/base.py")
    assert "870p" in out and "900p" in out  # the path is known, the ranges are not


@needs_traces
def test_on_a_real_session_the_settings_its_scripts_repeat_survive_the_archive() -> None:
    """django-11910: the agent writes and rewrites test scripts that configure Django; an archive of its first 170
    messages keeps their settings (``INSTALLED_APPS``, ``django.setup``) verbatim, within the budget, and most of the
    terms its next message reuses from its own archived messages (38 of 63 when this was written)."""
    path = next(p for p in trace_files() if "django-11910" in p.name)
    messages = load(path)["messages"]
    head = next(i for i, m in enumerate(messages) if m.get("role") == "assistant")
    end = 169
    known = "\n".join(said(m) if m.get("role") == "assistant" else str(m.get("content")) for m in messages[:head])
    out = recent_work(messages[head : end + 1], head, 2000, known)
    assert len(out) <= 2000 * CHARS_PER_TOKEN
    assert "INSTALLED_APPS" in out and "django.setup" in out
    following = [m for m in messages[end + 1 :] if m.get("role") == "assistant"][0]
    used = {t for t in terms(said(following)) if any(t in said(m) for m in messages[head : end + 1] if m.get("role") == "assistant")}
    assert used and len({t for t in used if t in out}) >= len(used) * 0.5
