"""The shell parser: the reviewed table of every command in the traces, and the tricky cases by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conversation.actions.shell import END, parse_shell, split_heredocs, tokenize

TABLE = json.loads((Path(__file__).parent / "shell_table.json").read_text())


def test_table_covers_the_traces() -> None:
    assert len(TABLE) >= 450
    kinds = {row["kind"] for row in TABLE}
    assert kinds == {"read", "write", "edit", "search", "list", "other"}


@pytest.mark.parametrize("row", TABLE, ids=[f"{i}:{r['command'][:40]}" for i, r in enumerate(TABLE)])
def test_table(row: dict[str, Any]) -> None:
    action = parse_shell(row["command"], None)
    got = {
        "kind": action.kind,
        "path": action.path,
        "range": list(action.range) if action.range else None,
        "selector": action.selector,
        "writes": list(action.writes),
    }
    want = {k: row[k] for k in got}
    assert got == want
    assert list(action.uses) == row.get("uses", [])
    assert list(action.applies) == row.get("applies", [])


@pytest.mark.parametrize(
    ("command", "kind", "path", "line_range"),
    [
        ("cat src/x.py", "read", "src/x.py", None),
        ("cd /testbed && cat src/x.py", "read", "/testbed/src/x.py", None),
        ("cat f | head -50", "read", "f", (1, 50)),
        ("sed -n '1,80p' src/x.py | nl", "read", "src/x.py", (1, 80)),
        ("sed -n 10p f", "read", "f", (10, 10)),
        ("sed -n '5,$p' f", "read", "f", (5, END)),
        ("sed -ne '3,4p' f", "read", "f", (3, 4)),
        ("nl -ba f | sed -n '100,120p'", "read", "f", (100, 120)),
        ("cat f | head -500 | tail -100", "read", "f", (401, 500)),
        ("cat f | sed -n '734,760p'", "read", "f", (734, 760)),
        ("head -n 30 f", "read", "f", (1, 30)),
        ("head f", "read", "f", (1, 10)),
        ("tail -n +5 f", "read", "f", (5, END)),
        ("cat -n f 2>/dev/null", "read", "f", None),
        ("sed -i 's/a/b/' f", "edit", "f", None),
        ("sed -i.bak -e 's/a/b/' f", "edit", "f", None),
        ("echo x > out.txt", "write", "out.txt", None),
        ("echo x >> out.txt", "edit", "out.txt", None),
        ("cat > f.py << 'EOF'\nprint('hi | there')\nEOF", "write", "f.py", None),
        ("cat <<EOF > f.py\nx\nEOF", "write", "f.py", None),
        ("echo hi | tee out.txt", "edit", "out.txt", None),
        ("git checkout -- a.py", "edit", "a.py", None),
        ("python - <<EOF\nopen('z.txt', 'w').write('1')\nEOF", "write", "z.txt", None),
        ("python -c \"from pathlib import Path; Path('c.txt').write_text('x')\"", "write", "c.txt", None),
        ("grep -rn 'x' src", "search", "src", None),
        ("rg foo", "search", ".", None),
        ("ls -la src", "list", "src", None),
        ("find . -name '*.py'", "list", ".", None),
        ("python reproduce.py", "other", None, None),
        ("cat a b", "other", None, None),
        ("echo $(cat f)", "other", None, None),
        ("cat 'unterminated", "other", None, None),
    ],
)
def test_cases(command: str, kind: str, path: str | None, line_range: tuple[int, int] | None) -> None:
    action = parse_shell(command)
    assert (action.kind, action.path, action.range) == (kind, path, line_range)


def test_selectors_keep_non_range_reads_apart() -> None:
    assert parse_shell("tail -n 20 f").selector == "tail 20"
    assert parse_shell("cat f | grep -n x").selector == "grep -n x"
    assert parse_shell("cat f | grep -n x").pattern == "x"
    assert parse_shell("sed -n '/^def a/,/^def/p' f").selector == "sed -n /^def a/,/^def/p"
    assert parse_shell("cat f").key != parse_shell("cat f | grep x").key


def test_read_key_is_path_and_range_whatever_the_spelling() -> None:
    a = parse_shell("cd /t && sed -n '1,5p' src/x.py")
    b = parse_shell("head -5 /t/src/x.py")
    c = parse_shell("cat /t/src/x.py | head -n 5", "/elsewhere")
    assert a.key == b.key == c.key


def test_cwd_is_used_for_relative_paths_and_cd_changes_it() -> None:
    assert parse_shell("cat x", "/repo").path == "/repo/x"
    assert parse_shell("cd sub && cat x", "/repo").path == "/repo/sub/x"
    assert parse_shell("cd - && cat x", "/repo").path == "x"
    assert parse_shell("cat ./a/../b.py").path == "b.py"


def test_quoted_and_escaped_operators_are_words() -> None:
    assert parse_shell("grep 'a|b' f").kind == "search"
    assert parse_shell("grep 'a|b' f").pattern == "a|b"
    action = parse_shell("find . -name '*.py' -exec grep -l foo {} \\; | head -5")
    assert (action.kind, action.pattern) == ("search", "foo")


def test_heredocs_are_cut_out_and_kept_in_order() -> None:
    text, bodies = split_heredocs("cat > a <<EOF\n1\nEOF\ncat > b <<'X'\n2\nX\necho done")
    assert text == "cat > a <<EOF\ncat > b <<'X'\necho done"
    assert bodies == ["1", "2"]
    text, bodies = split_heredocs("cat <<-EOF\n\tx\n\tEOF")
    assert bodies == ["\tx"]
    assert split_heredocs("python <<< 'x'")[1] == []


def test_tokenize_sets_long_quotes_aside_and_restores_them() -> None:
    long_code = "print('" + "x" * 400 + "')"
    tokens, held = tokenize(f'python -c "{long_code}" && echo ok # trailing comment')
    assert tokens[:2] == ["python", "-c"]
    assert held[tokens[2]] == long_code
    assert tokens[3:] == ["&&", "echo", "ok"]


def test_newlines_separate_commands_and_continuations_join() -> None:
    assert parse_shell("cd /t\ncat x").path == "/t/x"
    assert parse_shell("cat \\\n  x").path == "x"


def test_compound_commands() -> None:
    action = parse_shell("cd /t && cat > t.py << 'EOF'\nprint(1)\nEOF\npython t.py")
    assert (action.kind, action.path, action.uses) == ("write", "/t/t.py", ("/t/t.py",))
    assert parse_shell("pwd && ls -la").kind == "list"
    assert parse_shell("cat a; cat b").kind == "other"
    both = parse_shell("sed -i 's/a/b/' f && sed -n '1,5p' f")
    assert (both.kind, both.writes) == ("edit", ("f",))


def test_scripts_written_by_heredoc_remember_what_they_write() -> None:
    action = parse_shell("cat > fix.py << 'EOF'\nwith open('/t/a.py', 'w') as f:\n    f.write('x')\nEOF")
    assert action.script_writes == (("fix.py", ("/t/a.py",)),)
    patch = parse_shell("cat > fix.patch << 'EOF'\n--- a/src/x.py\n+++ b/src/x.py\n@@\nEOF")
    assert patch.script_writes == (("fix.patch", ("src/x.py",)),)


def test_bash_c_is_parsed_recursively() -> None:
    action = parse_shell("bash -lc 'cd /x && sed -n \"1,3p\" y'")
    assert (action.kind, action.path, action.range) == ("read", "/x/y", (1, 3))


def test_swe_agent_commands() -> None:
    assert parse_shell("open src/x.py 100").selector == "window"
    assert parse_shell("goto 50").on_open_file
    edit = parse_shell("edit 1:3\nfoo | bar > baz\nend_of_edit")
    assert (edit.kind, edit.on_open_file, edit.writes) == ("edit", True, ())
    assert parse_shell("create new.py", "/t").path == "/t/new.py"
    assert parse_shell("search_file foo").on_open_file


def test_parse_is_cached() -> None:
    assert parse_shell("cat cached_file") is parse_shell("cat cached_file")
