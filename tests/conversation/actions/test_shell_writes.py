"""Commands that change files: file operations, sed -i, git, patch, python and perl in place, bash -c."""

from __future__ import annotations

from conversation.actions.shell_writes import (
    file_op,
    git,
    patch,
    patch_paths,
    perl,
    python,
    python_writes,
    run_shell,
    sed_in_place,
)


def test_patch_paths() -> None:
    diff = "--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n--- /dev/null\n+++ b/new.py\n"
    assert patch_paths(diff, 1) == ["src/x.py", "new.py"]
    assert patch_paths(diff) == ["b/src/x.py", "b/new.py"]
    codex = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n*** Add File: c.py\n*** Delete File: d.py\n"
    assert patch_paths(codex) == ["a.py", "b.py", "c.py", "d.py"]
    assert patch_paths("+++ /dev/null\n") == []


def test_python_writes() -> None:
    code = "with open('a.py', 'r') as f: pass\nwith open(\"b.py\", 'w') as f: pass\nopen('c.txt', mode='a')\n"
    assert python_writes(code) == ["b.py", "c.txt"]
    assert python_writes("Path('d.txt').write_text('x')") == ["d.txt"]
    assert python_writes("open(name, 'w')") == []


def test_file_ops() -> None:
    assert file_op("cp", ["a", "b"], "/t").writes == ["/t/b"]
    assert file_op("mv", ["a", "b"], None).writes == ["a", "b"]
    assert file_op("rm", ["-rf", "build", "dist"], None).writes == ["build", "dist"]
    assert file_op("cp", ["a", "b"], None).kind == "write"
    assert file_op("touch", ["x"], None).kind == "edit"


def test_sed_in_place() -> None:
    assert sed_in_place(["-i", "s/a/b/", "f", "g"], None).writes == ["f", "g"]  # type: ignore[union-attr]
    assert sed_in_place(["-i", "-e", "s/a/b/", "f"], None).writes == ["f"]  # type: ignore[union-attr]
    assert sed_in_place(["-n", "1p", "f"], None) is None


def test_git() -> None:
    assert git(["checkout", "--", "a.py", "b.py"], "/t").writes == ["/t/a.py", "/t/b.py"]  # type: ignore[union-attr]
    assert git(["checkout", "src/a.py"], None).writes == ["src/a.py"]  # type: ignore[union-attr]
    assert git(["checkout", "main"], None).writes == ["*"]  # type: ignore[union-attr]
    assert git(["checkout", "-b", "new"], None).writes == ()  # type: ignore[union-attr]
    assert git(["stash"], None).writes == ["*"]  # type: ignore[union-attr]
    assert git(["stash", "list"], None) is None
    assert git(["reset", "HEAD", "a.py"], None) is None
    assert git(["reset", "--hard"], None).writes == ["*"]  # type: ignore[union-attr]
    assert git(["apply", "fix.patch"], "/t").applies == ["/t/fix.patch"]  # type: ignore[union-attr]
    assert git(["-C", "/r", "checkout", "--", "x"], None).writes == ["/r/x"]  # type: ignore[union-attr]
    assert git(["diff"], None) is None


def test_patch_command() -> None:
    assert patch("patch", ["-p1"], "/t", None, "fix.patch").applies == ["/t/fix.patch"]
    inline = patch("patch", ["-p1"], "/t", "--- a/x.py\n+++ b/x.py\n", None)
    assert inline.writes == ["/t/x.py"]
    assert patch("patch", ["target.py", "fix.patch"], None, None, None).writes == ["target.py"]
    assert patch("apply_patch", ["*** Begin Patch\n*** Update File: a.py\n"], None, None, None).writes == ["a.py"]


def test_python_and_perl_and_shells() -> None:
    assert python(["-c", "open('x', 'w')"], "/t", None).writes == ["/t/x"]
    assert python(["-m", "pytest"], None, None).kind == "other"
    assert python(["-u", "run.py", "--flag"], "/t", None).uses == ["/t/run.py"]
    assert python(["-"], None, "open('y', 'a')").writes == ["y"]
    assert perl(["-pi", "-e", "s/a/b/", "f"], None).writes == ["f"]  # type: ignore[union-attr]
    assert perl(["-e", "print 1"], None) is None
    assert run_shell(["-c", "cat x"], None, None).selector == "cat x"
    assert run_shell(["script.sh"], "/t", None).uses == ["/t/script.sh"]
    assert run_shell([], None, "cat y").kind == "subshell"
