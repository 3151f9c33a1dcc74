"""The one redaction function: gitleaks' rules and Ruyi's own, each kind of secret found, nothing else touched."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redaction.redact import MAX_PASSES, redact, redact_value, ruleset
from redaction.rules import RULE_FILES, RuleError, go_to_python, load_rules
from tests.redaction.planted import KINDS


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_is_redacted(kind: str) -> None:
    text, secret = KINDS[kind]
    out = redact(f"some output\n{text}\nmore output")
    assert secret not in out
    assert "[REDACTED:" in out and out.startswith("some output\n") and out.endswith("\nmore output")
    assert redact(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
        "id 123e4567-e89b-12d3-a456-426614174000 sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        '{"prompt_tokens": 123456, "max_tokens": 4000} tokens_after=1234567 key_count: 12345678',
        "the bearer of bad news had basic functionality and a token gesture",
        "http://127.0.0.1:11434/api/chat and https://github.com/org/repo@main",
        "base64 payload aGVsbG8gd29ybGQgdGhpcyBpcyBub3QgYSBzZWNyZXQgYXQgYWxs==",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_only_the_secret_goes_and_the_name_stays() -> None:
    assert redact("api_key = abcdef123456") == "api_key = [REDACTED:assigned-secret]"
    assert redact("https://bob:s3cretpw@example.com/x") == "https://bob:[REDACTED:url-password]@example.com/x"


def test_redact_value_walks_json() -> None:
    value = {"a": ["x", {"token": "Bearer 0123456789abcdef"}], "n": 3, "api_key": None}
    assert redact_value(value) == {"a": ["x", {"token": "Bearer [REDACTED:bearer-token]"}], "n": 3, "api_key": None}


def test_every_rule_compiles_and_ids_are_unique() -> None:
    rules = load_rules()
    ids = [r.id for r in rules]
    assert len(ids) == len(set(ids)) and len(rules) == len(ruleset().rules)
    assert {"aws-access-token", "private-key", "github-pat", "huggingface-access-token", "stripe-access-token"} <= set(ids)
    assert all(k == k.lower() for r in rules for k in r.keywords)


def test_go_flags_become_scoped_python_flags() -> None:
    assert go_to_python(r"(?i)abc") == r"(?i)abc"
    assert go_to_python(r"\b(LTAI(?i)[a-z0-9]{2})x") == r"\b(LTAI(?i:[a-z0-9]{2}))x"
    assert go_to_python(r'(?:"(?i)a|b)') == r'(?:"(?i:a)|(?i:b))'
    assert go_to_python(r"a(?i)b") == r"a(?i:b)"
    assert go_to_python(r"[(?i)]\z") == r"[(?i)]\Z"
    go = r"\b(LTAI(?i)[a-z0-9]{4})"
    assert re.fullmatch(go_to_python(go), "LTAIaBcD") and not re.fullmatch(go_to_python(go), "ltaiabcd")


def test_a_rule_that_does_not_compile_names_itself(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rules]]\nid = 'broken'\nregex = '''(unclosed'''\n")
    with pytest.raises(RuleError, match="bad.toml: rule broken"):
        load_rules([bad])
    assert all(path.exists() for path in RULE_FILES)


@given(st.text(alphabet=st.sampled_from(list("aksAKS_-=:/@ ıſKİ\n0123456789passwordtokenbearerxoxghp")), max_size=80))
def test_the_keyword_filter_never_skips_a_rule_that_matches(text: str) -> None:
    assert redact(text) == (_by_case_folding(text) if len(text) >= 8 else text)


def _by_case_folding(text: str) -> str:
    """The reference: every rule with IGNORECASE (the slow path), each to its fixed point, with no keyword filter."""
    for rule in ruleset().rules:
        for _ in range(MAX_PASSES):
            text, before = rule.pattern.sub(lambda m, r=rule: _mask(r, m), text), text
            if text == before:
                break
    return text


def _mask(rule, match):  # type: ignore[no-untyped-def]
    from redaction.redact import _mask as mask

    return mask(rule, match)


def test_short_texts_are_remembered_and_still_redacted_every_time() -> None:
    from redaction.redact import MEMO_CHARS, _redact_short

    secret = "api_key = sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    assert len(secret) <= MEMO_CHARS
    first, again = redact(secret), redact(secret)
    assert first == again and "A1b2C3d4" not in again
    assert _redact_short.cache_info().hits >= 1
    long = secret + " " * MEMO_CHARS  # past the memo: redacted the same way, not remembered
    assert "A1b2C3d4" not in redact(long)


@pytest.mark.parametrize(
    "text",
    [
        "mysql -h db -P3306 -u app -p shop",  # -P is the port; a bare -p asks for the password
        "sshpass -f ~/.pw ssh host",
        '{"max_tokens": 4000, "token_count": 12}',
    ],
)
def test_cli_and_quoted_rules_leave_ordinary_text(text: str) -> None:
    assert redact(text) == text


def test_a_lowered_copy_matches_as_case_folding_does_for_every_code_point() -> None:
    """The fast path's premise, for every character that lowers to one: an ASCII character of a regex written for
    lower-cased text (no capitals) matches it under IGNORECASE exactly when its lowered, folded copy is that
    character (and a class of ASCII letters likewise); and it is a word character, a space or a digit (so at a word
    boundary) exactly when the copy is."""
    from redaction.redact import _lowered

    letters, anything = re.compile("[a-z]", re.IGNORECASE), re.compile("[\\x00-\\x7f]", re.IGNORECASE)
    kinds = (re.compile(r"\w"), re.compile(r"\s"), re.compile(r"\d"))
    checked = 0
    for point in range(0x110000):
        if 0xD800 <= point <= 0xDFFF:
            continue
        char = chr(point)
        folded, aligned = _lowered(char)
        if not aligned:
            continue
        checked += 1
        assert (letters.fullmatch(char) is not None) == ("a" <= folded <= "z"), hex(point)
        assert all((kind.fullmatch(char) is None) == (kind.fullmatch(folded) is None) for kind in kinds), hex(point)
        if anything.fullmatch(char) is not None or folded.isascii():
            lower = (c for c in map(chr, range(128)) if not "A" <= c <= "Z")
            matched = {c for c in lower if re.fullmatch(re.escape(c), char, re.IGNORECASE)}
            assert matched == {folded}, hex(point)
    assert checked > 1_000_000


@given(st.text(alphabet=st.sampled_from(list("pwdPWD=:'\" _-aKıſİΣσς中文é🙂0123456789")), min_size=8, max_size=80))
def test_texts_in_any_script_are_redacted_as_by_case_folding(text: str) -> None:
    assert redact(text) == _by_case_folding(text)


def test_a_secret_beside_text_in_another_script_is_redacted() -> None:
    for around in ("中文说明 ", "Σύνδεση ", "→ ✓ ", "Straße ", "İstanbul "):
        out = redact(f'{around}db_password = "correct horse battery staple" {around}')
        assert "horse" not in out and "battery" not in out and out.startswith(around.strip()), out
