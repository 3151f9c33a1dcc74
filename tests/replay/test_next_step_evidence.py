"""The next-step evidence measure (bench/savings/evidence.py): terms of the agent's next message found earlier in the history,
not in the system prompt or the task, and how many the forwarded request keeps; a lost term's cause."""

from __future__ import annotations

from bench.savings.evidence import distinctive, evidence_of

SYSTEM = {"role": "system", "content": "You are an agent. Use run_tests.sh to test."}
TASK = {"role": "user", "content": "Fix parse_config in app/config.py."}
HISTORY = [
    SYSTEM,
    TASK,
    {
        "role": "assistant",
        "content": "Reading.",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "grep -n load_rows app/io.py"}'}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "12:def load_rows(path):\n30:    return HeaderRow(path)"},
]
NEXT = {"role": "assistant", "content": "So load_rows builds a HeaderRow; parse_config calls run_tests.sh via NewThing."}


def test_terms_of_the_next_message_seen_earlier_but_not_in_system_or_task() -> None:
    assert {"load_rows", "HeaderRow", "parse_config", "run_tests.sh", "NewThing"} <= distinctive(NEXT["content"])
    everything = evidence_of(HISTORY, HISTORY, NEXT)
    assert (everything.terms, everything.kept) == (
        2,
        2,
    )  # load_rows, HeaderRow: parse_config (task), run_tests.sh (system), NewThing (new) are not counted


def test_a_term_lost_to_a_placeholder_or_an_archive_is_named_with_its_cause() -> None:
    pruned = HISTORY[:3] + [
        {"role": "tool", "tool_call_id": "c1", "content": "[ruyi: output of `grep` (20 tokens) replaced: the context was nearly full; run it again]"}
    ]
    ev = evidence_of(HISTORY, pruned, NEXT)
    assert (ev.terms, ev.kept) == (2, 1) and ev.lost_terms == {"HeaderRow": 1}  # load_rows is still in the call
    assert ev.causes == {"pruned: the context was nearly full": 1}
    archived = [{"role": "system", "content": SYSTEM["content"] + '\n\n<ruyi-archive n="1" messages="2–3">\nsummary\n</ruyi-archive>'}, TASK]
    ev = evidence_of(HISTORY, archived, NEXT)
    assert ev.kept == 0 and sum(ev.causes.values()) == 2 and all(c.startswith("archived") for c in ev.causes)
