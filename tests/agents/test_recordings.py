"""The recorded agent sessions (tests/agents/recordings/, made by ``bench/savings/agents_sessions.py record``) expand
into what each agent sent: a well-formed history in its own dialect in every body, the person's request in the main
conversation, and the compact form round-trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.savings.agent_recordings import AGENTS, LONG, compact, expand, read_recording
from bench.savings.agents_sessions import cache_hit, cost, is_main, prefix_cached
from tests.agents.harness import chat_problems
from tests.anthropic_shape import problems

RECORDINGS = Path(__file__).resolve().parent / "recordings"


@pytest.mark.parametrize("name", [f"{a}.json" for a in sorted(AGENTS)] + [f"{a}.long.json.gz" for a in sorted(LONG)])
def test_a_recorded_session_expands_into_valid_bodies(name: str) -> None:
    doc = read_recording(RECORDINGS / name)
    bodies = expand(doc["requests"])
    assert len(bodies) == len(doc["headers"]) >= 8
    assert compact(bodies) == doc["requests"]
    for body in bodies:
        if doc["path"] == "/v1/messages":
            assert problems(body) == []
        elif doc["path"] == "/v1/chat/completions":
            assert chat_problems(body) == []
        else:
            items = [i for i in body["input"] if isinstance(i, dict)]
            assert {i["call_id"] for i in items if i.get("type") == "function_call"} == {
                i["call_id"] for i in items if i.get("type") == "function_call_output"
            }
    main = [b for b in bodies if is_main(b)]
    assert len(main) >= (LONG[doc["agent"]]["steps"] if name.endswith(".gz") else 8) and all(
        "Print the numbers with seq" in json.dumps(b) for b in main
    )
    assert not any(h.keys() & {"authorization", "x-api-key"} for h in doc["headers"])


def test_the_cache_hit_of_claude_codes_own_bodies_counts_its_moved_markers_only_when_asked() -> None:
    """Claude Code moves its ``cache_control`` marker to the newest message on every request: counted strictly the
    previous newest message changes each time; with the markers left out (as Anthropic's cache reads a prefix) its own
    bodies, which only ever append, are all cached."""
    bodies = [b for b in expand(read_recording(RECORDINGS / "claude.json")["requests"]) if is_main(b)]
    assert cache_hit(bodies) < 0.99
    assert cache_hit(bodies, markers=False) == 1.0
    rows = prefix_cached(bodies, markers=False)
    assert rows[0][1] == 0 and all(cached == total for (total, _), (_, cached) in zip(rows, rows[1:]))
    assert cost(rows, 0.1) < cost([(t, 0) for t, _ in rows], 0.1)  # cached tokens at a tenth of the price
