"""Below 16k the archive block gives its room to what the next step uses: the agent's own lines and the code map take a
larger share, the chunks are listed by id only (BENCHMARKS.md, "seventh pass")."""

from __future__ import annotations

import re
from typing import Any

from config.load import load_config
from proxy.longctx.archive import RECENT_FLOOR, SMALL_SHARE, sized_for, small_share, small_window
from proxy.longctx.block import ChunkLine, archive_block
from proxy.longctx.options import ArchiveOptions
from proxy.replay.metrics import archive_in
from proxy.replay.offline import OfflineRuyi
from summaries.recent import recent_work
from tests.traces import load, needs_traces, trace_files

USABLE_8K, USABLE_16K = 6000, 13600


def test_at_8k_the_agents_lines_and_the_map_take_more() -> None:
    small = sized_for(ArchiveOptions(), USABLE_8K)
    assert (small.summary_tokens, small.recent_tokens, small.map_tokens) == (270, 780, 420)
    assert small.chunks_listed == ArchiveOptions().chunks_listed  # still listed, by id only (below)


def test_at_16k_the_budgets_and_the_chunks_by_id_only() -> None:
    at_16k = sized_for(ArchiveOptions(), USABLE_16K)
    assert (at_16k.summary_tokens, at_16k.recent_tokens, at_16k.map_tokens) == (300, 884, 884)
    assert sized_for(ArchiveOptions(), 30_000) == sized_for(ArchiveOptions(), 30_000) and small_window(USABLE_16K)
    assert not small_window(3 * RECENT_FLOOR) and not small_window(27_200)  # 32k lists what each chunk holds


def test_the_share_tapers_without_a_step_between_8k_and_16k() -> None:
    shares = [small_share(u, 0.13) for u in range(RECENT_FLOOR, 2 * RECENT_FLOOR + 1, 250)]
    assert shares == sorted(shares, reverse=True) and shares[0] == 0.13 and abs(shares[-1] - SMALL_SHARE) < 1e-12
    budgets = [sized_for(ArchiveOptions(), u).recent_tokens for u in range(RECENT_FLOOR, 14_001, 100)]
    assert all(abs(b - a) <= 40 for a, b in zip(budgets, budgets[1:]))  # no jump where the small share ends
    assert small_window(USABLE_8K) and small_window(2 * RECENT_FLOOR - 1) and not small_window(None)


def test_a_small_window_lists_the_chunks_by_id_and_messages_only() -> None:
    chunks = [ChunkLine("c0123456789", 2, 9, "looked at state.py · last `sed -n '350p'` → exit 0")]
    full = archive_block(1, 2, 40, 19, "the summary", chunks, 6, False)
    short = archive_block(1, 2, 40, 19, "the summary", chunks, 6, False, ids_only=True)
    assert "- ruyi:c0123456789 · 2–9 · looked at state.py" in full
    assert "- ruyi:c0123456789 · 2–9\n" in short and "looked at state.py" not in short
    assert "ruyi:c0123456789" in short.split("<summary>")[0]  # the example to recall by is a real id


def test_with_no_chunk_shown_the_block_names_no_made_up_id() -> None:
    for chinese in (False, True):
        block = archive_block(1, 2, 40, 19, "the summary", [], 0, chinese)
        assert "ruyi:c0" not in block and ("file" in block or "文件名" in block)


def _call(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_a_name_the_archived_stretch_came_back_to_wins_over_one_named_once() -> None:
    """Two lines of the same length, one name each, room for one: the older one wins when four other archived messages
    name its name (without that the newer would)."""
    messages = [
        _call("run check_omega_value here"),
        _call("run check_alpha_value here"),
        *({"role": "tool", "content": f"check_omega_value failed at step {i}"} for i in range(4)),
    ]
    out = recent_work(messages, 0, 12)
    assert "check_omega_value" in out and "check_alpha_value" not in out
    assert "check_alpha_value" in recent_work(messages[:2], 0, 12)


@needs_traces
def test_at_8k_the_settings_a_script_29_turns_back_set_reach_the_next_step() -> None:
    """django-11910 at 8k: at request 236 the agent rewrites the Django settings of a script it wrote at message 178
    (29 turns back, archived); main before this change forwarded none of them (the block's ~330 tokens of the agent's
    lines held newer ones), now they are in the block, and its chunks are listed by id only."""
    path = next(p for p in trace_files() if "django-11910" in p.name)
    trace = load(path)
    messages, tools = trace["messages"], trace.get("tools")
    ruyi = OfflineRuyi(load_config(None, {}), "gpt-4", 8000)
    sent: list[dict[str, Any]] = []
    for end in range(2, 237):
        if messages[end].get("role") == "assistant":
            sent = ruyi(messages[:end], tools)
    block = next(str(m["content"]) for m in sent if archive_in([m]))
    assert re.search(r"^- ruyi:c[0-9a-f]{10} · \d+–\d+$", block, re.MULTILINE) and not re.search(r"^- ruyi:c.* · .* · ", block, re.MULTILINE)
    forwarded = "\n".join(str(m.get("content")) for m in sent)
    for term in ("INSTALLED_APPS", "SECRET_KEY", "django.contrib.contenttypes", "settings.configured"):
        assert term in forwarded, term
