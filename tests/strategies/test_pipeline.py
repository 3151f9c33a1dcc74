"""The pipeline: one order, fail-open, conflicts, and applying replacements without orphaning anything."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest
from structlog.testing import capture_logs

from strategies.base import Replacement
from strategies.dedup import Dedup
from strategies.discard import Discard
from strategies.pipeline import (
    LAST_RESORT,
    STRATEGY_ORDER,
    PipelineOptions,
    apply_replacements,
    propose_all,
)
from strategies.purge_errors import PurgeErrors
from strategies.supersede import Supersede
from strategies.truncation import Truncation
from tests.strategies.factories import (
    assistant,
    bash,
    conversation,
    lines,
    make_ctx,
    result,
    tool_call,
)

BODY = lines("code", 60)
HEREDOC = "cat > /r/t.py << 'EOF'\n" + BODY + "\nEOF\npython /r/t.py"


def test_the_order_is_one_list() -> None:
    assert STRATEGY_ORDER == (Dedup, Supersede, PurgeErrors, Truncation, Discard)
    assert [s.name for s in STRATEGY_ORDER] == ["dedup", "supersede", "purge_errors", "truncation", "discard"]
    assert LAST_RESORT == {"discard"}


def test_at_most_one_replacement_per_target_earlier_strategies_first() -> None:
    long_output = lines("out", 400)
    messages = conversation(
        bash("cat /r/big.py", long_output),
        bash("cat /r/big.py", long_output),
        bash(HEREDOC, "Traceback (most recent call last):\nboom", 1),
        *(bash(f"echo {i}", "ok") for i in range(4)),
        bash("cat /r/t.py", BODY),
    )
    options = PipelineOptions(truncation=Truncation.Options(max_tool_output_tokens=500))
    replacements = propose_all(messages, make_ctx(), options)
    slots = [(r.index, r.target) for r in replacements]
    assert len(slots) == len(set(slots))
    by_index = {r.index: r.strategy for r in replacements}
    assert by_index[3] == "dedup"
    assert by_index[5] == "truncation"
    assert by_index[6] == "supersede"
    assert replacements == sorted(replacements, key=lambda r: (r.index, r.target))


def test_a_failing_strategy_is_skipped_logged_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: object, messages: object, ctx: object) -> list[Replacement]:
        raise RuntimeError("broken strategy")

    monkeypatch.setattr(Dedup, "propose", boom)
    messages = conversation(bash("cat /r/a.py", BODY), bash("sed -i 's/a/b/' /r/a.py", ""))
    failures: Counter[str] = Counter()
    with capture_logs() as logs:
        replacements = propose_all(messages, make_ctx(), failures=failures)
    assert failures == Counter({"dedup": 1})
    assert [r.strategy for r in replacements] == ["supersede"]
    assert logs[0]["event"] == "strategy_failed" and logs[0]["strategy"] == "dedup"
    assert logs[0]["log_level"] == "warning" and logs[0]["exc_info"] is True


def test_a_failing_analysis_fails_open(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(messages: object, ctx: object) -> None:
        raise RuntimeError("broken analysis")

    monkeypatch.setattr("strategies.pipeline.analyze", boom)
    failures: Counter[str] = Counter()
    with capture_logs():
        assert propose_all(conversation(bash("ls", "x")), make_ctx(), failures=failures) == []
    assert failures == Counter({"analysis": 1})


def test_things_that_are_not_messages_are_left_alone() -> None:
    messages: list[Any] = [*conversation(bash("cat /r/a.py", BODY), bash("cat /r/a.py", BODY)), "junk", {"role": 7}]
    replacements = propose_all(messages, make_ctx(), PipelineOptions(enabled=("dedup", "supersede")))
    assert [r.index for r in replacements] == [3]
    assert apply_replacements(messages, replacements)[-2:] == ["junk", {"role": 7}]


def test_proposals_on_protected_or_missing_targets_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    def rogue(self: object, messages: object, ctx: object) -> list[Replacement]:
        return [
            Replacement(0, "content", "x", "y", 10, 1, "r", "dedup", "w"),
            Replacement(99, "content", "x", "y", 10, 1, "r", "dedup", "w"),
            Replacement(2, "args:nobody", "{}", "y", 10, 1, "r", "dedup", "w"),
        ]

    monkeypatch.setattr(Dedup, "propose", rogue)
    assert propose_all(conversation(bash("ls", "x")), make_ctx(), PipelineOptions(enabled=("dedup",))) == []


def test_enabled_strategies() -> None:
    messages = conversation(bash("cat /r/a.py", BODY), bash("cat /r/a.py", BODY))
    assert propose_all(messages, make_ctx(), PipelineOptions(enabled=("supersede",))) == []
    assert len(propose_all(messages, make_ctx(), PipelineOptions(enabled=("dedup",)))) == 1


def test_apply_replacements_keeps_everything_but_the_text() -> None:
    messages = conversation(
        bash(HEREDOC, "Traceback (most recent call last):\nboom", 1),
        *(bash(f"echo {i}", "ok") for i in range(4)),
        bash("cat /r/t.py", BODY),
        bash("cat /r/t.py", BODY),
    )
    before = copy.deepcopy(messages)
    replacements = propose_all(messages, make_ctx())
    assert {r.strategy for r in replacements} == {"supersede", "dedup", "discard"}
    out = apply_replacements(messages, replacements)
    assert messages == before
    touched = {r.index for r in replacements}
    for i, (old, new) in enumerate(zip(messages, out, strict=True)):
        assert (new is old) == (i not in touched)
        assert new["role"] == old["role"] and new.get("tool_call_id") == old.get("tool_call_id")
        assert [c["id"] for c in new.get("tool_calls") or []] == [c["id"] for c in old.get("tool_calls") or []]
        for call in new.get("tool_calls") or []:
            assert set(json.loads(call["function"]["arguments"])) == {"command"}


def test_apply_to_content_parts_keeps_images() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:x"}}
    call = tool_call("bash", command="cat a")
    messages = [assistant(call), result(call, [{"type": "text", "text": "a"}, image, {"type": "text", "text": "b"}])]
    replacement = Replacement(1, "content", "NEW", "a\nb", 10, 1, "r", "dedup", "w")
    out = apply_replacements(messages, [replacement])
    assert out[1]["content"] == [{"type": "text", "text": "NEW"}, image]
    only_image = [assistant(call), result(call, [image])]
    assert apply_replacements(only_image, [replacement])[1]["content"] == [{"type": "text", "text": "NEW"}, image]


def test_apply_skips_what_does_not_fit() -> None:
    call = tool_call("bash", command="cat a")
    messages: list[dict[str, Any]] = [assistant(call), result(call, "x")]
    bad = [
        Replacement(5, "content", "x", "", 1, 1, "r", "s", "w"),
        Replacement(0, f"args:{call['id']}", "{not json", "", 1, 1, "r", "s", "w"),
        Replacement(0, "args:other", "{}", "", 1, 1, "r", "s", "w"),
    ]
    with capture_logs() as logs:
        out = apply_replacements(messages, bad)
    assert out == messages
    assert [log["event"] for log in logs] == ["replacement_skipped"] * 3
