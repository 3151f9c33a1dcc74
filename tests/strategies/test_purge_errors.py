"""PurgeErrors: old failed calls lose their input; the error stays."""

from __future__ import annotations

import json

import pytest

from strategies.base import OptionError
from strategies.purge_errors import PurgeErrors
from tests.strategies.factories import bash, conversation, indices, lines, make_ctx, step

SCRIPT = "cat > /r/t.py << 'EOF'\n" + lines("code", 30) + "\nEOF\npython /r/t.py"
TRACEBACK = 'Traceback (most recent call last):\n  File "/r/t.py", line 3\nNameError: x'


def filler(n: int) -> list[list[dict[str, object]]]:
    return [bash(f"echo {i}", "ok") for i in range(n)]


def test_a_failed_call_older_than_four_turns_loses_its_input() -> None:
    messages = conversation(bash(SCRIPT, TRACEBACK, 1), *filler(4))
    (replacement,) = PurgeErrors().propose(messages, make_ctx())
    assert replacement.index == 2
    args = json.loads(replacement.new_text)
    assert "the call failed; its error is kept in the result" in args["command"]
    assert "read the file if you need what it wrote" in args["command"]
    assert messages[3]["content"].endswith("NameError: x\n</output>")


def test_younger_failures_and_successes_stay() -> None:
    assert PurgeErrors().propose(conversation(bash(SCRIPT, TRACEBACK, 1), *filler(3)), make_ctx()) == []
    assert PurgeErrors().propose(conversation(bash(SCRIPT, "fine"), *filler(6)), make_ctx()) == []
    quick = PurgeErrors(PurgeErrors.Options(turns_before_purge=0))
    assert indices(quick.propose(conversation(bash(SCRIPT, TRACEBACK, 1)), make_ctx())) == [2]


def test_short_inputs_save_nothing() -> None:
    assert PurgeErrors().propose(conversation(bash("python x.py", TRACEBACK, 1), *filler(5)), make_ctx()) == []


def test_options_validate() -> None:
    with pytest.raises(OptionError, match="turns_before_purge"):
        PurgeErrors.Options(turns_before_purge=-1)


LONG_TRACEBACK = (
    "Traceback (most recent call last):\n"
    + "\n".join(f'  File "/r/m{i}.py", line {i}, in f{i}\n    g{i}()' for i in range(40))
    + "\nNameError: name 'x' is not defined"
)


def test_a_failed_calls_long_output_keeps_only_its_error_lines() -> None:
    messages = conversation(bash("python /r/t.py", LONG_TRACEBACK, 1), *filler(4))
    (replacement,) = PurgeErrors().propose(messages, make_ctx())
    assert replacement.index == 3 and replacement.strategy == "purge_errors"
    head, *kept = replacement.new_text.split("\n")
    assert head.startswith("[ruyi: failed output of `python /r/t.py`") and "run it again for the whole output" in head
    assert kept[-1] == "NameError: name 'x' is not defined" and len(kept) == 5  # </output> is no error line
    assert replacement.tokens_saved > 100


def test_the_exception_line_is_kept_when_output_follows_it() -> None:
    text = LONG_TRACEBACK + "\n" + "\n".join(f"cleanup {i}" for i in range(8))
    messages = conversation(bash("python /r/t.py", text, 1), *filler(4))
    (replacement,) = PurgeErrors(PurgeErrors.Options(keep_error_lines=2)).propose(messages, make_ctx())
    assert replacement.new_text.split("\n")[1:] == ["NameError: name 'x' is not defined", "cleanup 6", "cleanup 7"]


def test_outputs_stay_when_purge_outputs_is_off_or_the_failure_is_young() -> None:
    old = conversation(bash("python /r/t.py", LONG_TRACEBACK, 1), *filler(4))
    assert PurgeErrors(PurgeErrors.Options(purge_outputs=False)).propose(old, make_ctx()) == []
    assert PurgeErrors().propose(conversation(bash("python /r/t.py", LONG_TRACEBACK, 1), *filler(3)), make_ctx()) == []
    with pytest.raises(OptionError, match="keep_error_lines"):
        PurgeErrors.Options(keep_error_lines=0)


def test_swe_agent_footers_are_not_error_lines() -> None:
    footer = "\n(Open file: /r/t.py)\n(Current directory: /r)\nbash-$"
    messages = conversation(step("bash", LONG_TRACEBACK + footer, command="python /r/t.py"), *filler(4))
    (replacement,) = PurgeErrors(PurgeErrors.Options(keep_error_lines=1)).propose(messages, make_ctx())
    assert replacement.new_text.split("\n")[1:] == ["NameError: name 'x' is not defined"]


def test_kept_error_lines_are_redacted() -> None:
    secret = "sk-proj-4fGh7Jk2Lm9Np3Qr6St8Uv1Wx5Yz0Ab"
    text = LONG_TRACEBACK.replace("NameError: name 'x' is not defined", f"AuthenticationError: Incorrect API key provided: {secret}")
    messages = conversation(bash("python /r/t.py", text, 1), *filler(4))
    (replacement,) = PurgeErrors().propose(messages, make_ctx())
    assert secret not in replacement.new_text and "AuthenticationError: Incorrect API key provided: [REDACTED:" in replacement.new_text
