"""The map of the code the agent saw, in the archive block: per file, the definitions its outputs showed."""

from __future__ import annotations

import json
from typing import Any

from config.load import load_config
from proxy.longctx.block import archive_block
from proxy.replay.offline import OfflineRuyi
from summaries.codemap import CHARS_PER_TOKEN, code_map
from tests.traces import load, needs_traces, requests_of, trace_files


def _call(command: str, name: str = "bash", key: str = "command", call_id: str = "c") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps({key: command})}}],
    }


def _out(text: str, call_id: str = "c") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": f"<returncode>0</returncode>\n<output>\n{text}\n</output>"}


HELPERS = """MAX_DEPTH = 40
DEFAULT_NAME = "x"


class MatchResult:
    kind = "match"

    def from_unmatched(cls, mutated_segments):
        return cls(mutated_segments, trim_non_code_segments(mutated_segments))

    async def is_complete(self):
        return not self.unmatched_segments


def curtail_string(raw_text, length=20):
    inner_helper = 1
    return raw_text[:length]
"""


def test_a_file_read_whole_gives_its_definitions_with_lines_methods_under_their_class_and_the_names_they_use() -> None:
    out = code_map([_call("cat src/pkg/helpers.py"), _out(HELPERS)], 30, 500)
    assert out.startswith("src/pkg/helpers.py [31]: ")
    assert "MAX_DEPTH L1" in out and "DEFAULT_NAME L2" in out
    assert "MatchResult.from_unmatched L8 (mutated_segments, trim_non_code_segments)" in out
    assert "MatchResult.is_complete L11 (self.unmatched_segments)" in out
    assert "curtail_string L15 (inner_helper, raw_text)" in out  # a function's locals: names its body uses, not definitions
    assert code_map([_call("cat src/pkg/helpers.py"), _out(HELPERS)], 30, 500) == out  # a pure function of the messages


def test_numbered_views_ranges_and_grep_hits_give_the_files_own_line_numbers() -> None:
    view = "\n".join(f"{n:6d}\t{code}" for n, code in enumerate(HELPERS.splitlines()[4:10], start=105))
    sed = "\n".join(HELPERS.splitlines()[12:15])
    grep = (
        "django/db/migrations/state.py:379:    def add_local_node(self, node):\ndjango/db/models/related.py:88:class ManyToOneRel(ForeignObjectRel):"
    )
    messages = [
        _call(json.dumps({"command": "view", "path": "/repo/a.py"}), name="str_replace_editor", key="command", call_id="v"),
        {"role": "tool", "tool_call_id": "v", "content": f"Here's the result of running `cat -n` on /repo/a.py:\n{view}"},
        _call("sed -n '200,202p' /repo/b.py", call_id="s"),
        _out(sed, "s"),
        _call("grep -rn 'add_local_node\\|class ForeignObjectRel' django/", call_id="g"),
        _out(grep, "g"),
    ]
    messages[0]["tool_calls"][0]["function"]["arguments"] = json.dumps({"command": "view", "path": "/repo/a.py"})
    out = code_map(messages, 0, 800)
    lines = out.splitlines()
    # files the agent named (by path in its reads, by a definition in its grep) first, the newest first; then a grep's
    # hit in a file it never named
    order = [line.split(" [")[0] for line in lines]
    assert order == ["django/db/migrations/state.py", "/repo/b.py", "/repo/a.py", "django/db/models/related.py"]
    assert "add_local_node L379" in out and "ManyToOneRel L88 (ForeignObjectRel)" in out  # a class with its bases
    assert "MatchResult.from_unmatched L108" in out
    assert "/repo/b.py [3]: curtail_string L202" in out


def test_only_what_the_request_names_nowhere_else_and_within_the_budget() -> None:
    messages = [_call("cat src/pkg/helpers.py"), _out(HELPERS)]
    known = "MAX_DEPTH DEFAULT_NAME MatchResult.from_unmatched mutated_segments trim_non_code_segments curtail_string raw_text inner_helper"
    out = code_map(messages, 0, 500, known)
    assert "from_unmatched" not in out and "curtail_string" not in out and "MatchResult.is_complete" in out
    everything = known + " MatchResult.is_complete self.unmatched_segments"
    assert code_map(messages, 0, 500, everything) == ""  # nothing new: the file is left out
    many = [
        m
        for i in range(60)
        for m in (_call(f"cat pkg/mod_{i}.py", call_id=f"c{i}"), _out(f"def func_{i}_a(x):\n    return helper_{i}(x)\n", f"c{i}"))
    ]
    small = code_map(many, 0, 60)
    assert len(small) <= 60 * CHARS_PER_TOKEN and "pkg/mod_59.py" in small and "pkg/mod_0.py" not in small
    assert code_map(many, 0, 0) == "" and code_map([], 0, 500) == ""


def test_outputs_that_show_no_file_and_failed_calls_give_nothing() -> None:
    messages = [
        _call("python reproduce.py", call_id="r"),
        _out("def looks_like_code_but_is_output():\nTraceback (most recent call last):", "r"),
        _call("cat missing.py", call_id="m"),
        {"role": "tool", "tool_call_id": "m", "content": "cat: missing.py: No such file or directory", "is_error": True},
    ]
    assert code_map(messages, 0, 500) == ""


def test_the_block_carries_the_map_after_the_agents_lines_in_english_and_in_chinese() -> None:
    block = archive_block(1, 2, 40, 19, "the summary", [], 6, False, None, "[12] cat > t.py", "a.py [7]: run_all L3")
    assert block.index("</recent-work>") < block.index("<code-map>") < block.index("a.py [7]: run_all L3") < block.index("</code-map>")
    assert "<code-map>" not in archive_block(1, 2, 40, 19, "the summary", [], 6, False, None, "[12] cat > t.py")
    chinese = archive_block(1, 2, 40, 19, "摘要", [], 6, True, None, "", "a.py [7]: run_all L3")
    assert "<code-map>" in chinese and "看过的代码" in chinese and "<recent-work>" not in chinese


@needs_traces
def test_on_a_real_session_a_definition_read_long_ago_is_kept_through_the_archive() -> None:
    """sqlfluff-1517 at 32k: the agent reads ``helpers.py`` at message 7 and uses ``join_segments_raw_curtailed``
    and ``trim_non_code_segments`` a hundred messages later; once that read is archived, the block's code map still
    names them with their file and lines, or the agent's own archived lines do (without the map they were lost:
    ``curtail_string`` among the lost terms)."""
    path = next(p for p in trace_files() if "sqlfluff-1517" in p.name)
    trace = load(path)
    ruyi = OfflineRuyi(load_config(None, {}, {}), "gpt-4", 32000)
    found = []
    for request in requests_of(trace["messages"])[:110]:
        sent = ruyi([dict(m) for m in request], trace.get("tools"))
        blocks = [m.get("content") for m in sent if m.get("role") == "system" and "<code-map>" in str(m.get("content"))]
        system = blocks[0] if blocks else ""  # the archive block's own message, after the task
        if isinstance(system, str) and "<code-map>" in system:
            code = system.split("<code-map>")[1].split("</code-map>")[0]
            archived = not any(m.get("content") == request[7].get("content") for m in sent[1:])  # the read of helpers.py
            found.append((archived, code, system))
    assert found, "an archive with a code map by request 110"
    archived, code, block = found[-1]
    assert archived and "helpers.py" in code and "trim_non_code_segments L" in code
    # named by the map, or, where a line of the agent's own names it (<recent-work>, before the map), there
    assert "join_segments_raw_curtailed L" in code or "join_segments_raw_curtailed" in block.split("<recent-work>")[1].split("</recent-work>")[0]


def test_the_same_map_in_every_process_whatever_its_hash_seed() -> None:
    """A name and a longer one found at the same place (``bracket_pairs``, ``bracket_pairs_set``) were ordered as a set
    iterates, which differs from process to process (string hashing is seeded): replicas and benches disagreed."""
    import os
    import subprocess
    import sys

    source = (
        "class Delimited(BaseGrammar, Sequence):\n"
        "    def __init__(self, bracket_pairs_set=None, bracket_pairs=None, min_delimiters=0):\n"
        "        self.bracket_pairs_set = bracket_pairs_set or bracket_pairs\n"
        "        self.delimiter_set = delimiter_set_one or delimiter_set\n"
    )
    script = (
        "import json, sys\n"
        "from summaries.codemap import code_map\n"
        "from tests.summaries.test_code_map import _call, _out\n"
        "print(code_map([_call('cat src/delimited.py'), _out(json.loads(sys.argv[1]))], 10, 500))\n"
    )
    maps = set()
    for seed in map(str, range(1, 11)):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", script, json.dumps(source)], env=env, capture_output=True, text=True, timeout=50, check=True)
        maps.add(done.stdout)
    assert len(maps) == 1 and "Delimited.__init__" in maps.pop()
