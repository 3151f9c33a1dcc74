"""What the one redaction function costs: every tool output of the public traces, and one access event, side by side;
and texts not in ASCII, with the lower-cased fast path for ASCII texts only (as before 2026-11-28) and for any text
whose lower-cased copy keeps its positions (now)."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import redaction.redact
from bench.traces import trace_paths
from proxy.http.log import REDACTED, Redactor, is_secret_field
from redaction.redact import redact, ruleset

# strategies/placeholder.py's redact_secrets before this change (it redacted refs only), for comparison.
_SECRETS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    ("private_key", ("PRIVATE KEY-----",), re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)),
    ("anthropic_key", ("sk-ant-",), re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai_key", ("sk-",), re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}")),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    ),
    ("aws_access_key", ("AKIA", "ASIA"), re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("google_key", ("AIza",), re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("slack_token", ("xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("jwt", ("eyJ",), re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("bearer", ("bearer ",), re.compile(r"(?i)(?<=\bbearer )[A-Za-z0-9_\-.=]{16,}")),
    ("url_password", ("://",), re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")),
)
"""(kind, needles, pattern): the pattern can only match a text holding one of the needles (for a
case-insensitive pattern: in any case), so most texts skip the slower regex scan."""
_ASSIGNED_HINT = re.compile(r"(?:passw|secret|key|token)[a-z0-9_]*\s*[:=]")
"""What any match of _ASSIGNED_SECRET shows in lower-cased ASCII text: a key word, then `:` or `=`."""
_ASSIGNED_SECRET = re.compile(
    r"(?i)\b([A-Za-z0-9_]*(?:password|passwd|secret|api[_-]?key|access[_-]?key|auth[_-]?token|token)[A-Za-z0-9_]*)"
    r"(\s*[:=]\s*)(['\"]?)([^\s'\"]{6,})\3"
)


def redact_secrets(text: str) -> str:
    """The text with keys, tokens, private keys and assigned passwords replaced by [REDACTED:<kind>]."""
    for kind, needles, pattern in _SECRETS:
        if _may_match(text, needles, pattern):
            text = pattern.sub(f"[REDACTED:{kind}]", text)
    if text.isascii() and not _ASSIGNED_HINT.search(text.lower()):
        return text
    return _ASSIGNED_SECRET.sub(
        lambda m: m.group(0) if m.group(4).startswith("[REDACTED") else f"{m.group(1)}{m.group(2)}{m.group(3)}[REDACTED:secret]{m.group(3)}",
        text,
    )


def _may_match(text: str, needles: tuple[str, ...], pattern: re.Pattern[str]) -> bool:
    """False only when no needle occurs in text, so pattern cannot match. Case-insensitive patterns are
    checked on the lower-cased text if it is ASCII (beyond ASCII, regex case folding has more pairs)."""
    if pattern.flags & re.IGNORECASE:
        if not text.isascii():
            return True
        text = text.lower()
    return any(needle in text for needle in needles)


OLD_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+", re.I)
OLD_KEY_SHAPES = re.compile(r"\b(sk-[A-Za-z0-9_-]{8,}|sk-ant-[A-Za-z0-9_-]{8,})\b")
EVENT = {
    "event": "request_done",
    "request_id": "5f0c2a9e8b7d4c1f9e3a6b2d8c4f1a7e",
    "method": "POST",
    "path": "/v1/chat/completions",
    "upstream": "http://127.0.0.1:11434",
    "model": "qwen3:8b",
    "status": 200,
    "streamed": True,
    "upstream_ms": 812.4,
    "total_ms": 815.9,
    "bytes_in": 183422,
    "bytes_out": 5120,
    "mode": "on",
    "session": "a1b2c3d4e5f60718",
    "session_how": "continued",
    "tokens_before": 28411,
    "tokens_after": 19377,
    "tier": "prune",
    "window": 32768,
    "window_source": "request",
    "usage": 0.87,
    "dcp": {"batch": "applied", "strategies": {"dedup": {"items": 3, "tokens_saved": 2210}, "discard": {"items": 9, "tokens_saved": 6824}}},
}


def old_redact_text(text: str) -> str:
    """proxy/log.py's redaction before this change: bearer tokens and sk- keys only."""
    if "bearer" in text.lower():
        text = OLD_BEARER.sub(r"\1[redacted]", text)
    if "sk-" in text:
        text = OLD_KEY_SHAPES.sub("[redacted]", text)
    return text


class OldRedactor(Redactor):
    """proxy/log.py's processor before this change."""

    def _clean(self, key: str, value: Any) -> Any:
        if key != "event" and is_secret_field(key) and not isinstance(value, (int, float)):
            return REDACTED
        if isinstance(value, str):
            return old_redact_text(value)
        if isinstance(value, dict):
            return {k: self._clean(str(k), v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._clean(key, v) for v in value]
        return value


def ascii_only_fast_path(text: str) -> str:
    """Ruleset.redact as it was before 2026-11-28: the lower-cased copy used only when the text is ASCII (the one
    difference: whether the copy counts as aligned)."""
    lowered = redaction.redact._lowered
    redaction.redact._lowered = lambda t: (lowered(t)[0], t.isascii())  # type: ignore[assignment]
    try:
        return ruleset().redact(text)
    finally:
        redaction.redact._lowered = lowered


def not_ascii() -> dict[str, str]:
    """Texts in other scripts: a session's facts as the keeper stores them (the longest public trace, whose commands
    hold a few non-ASCII characters), a Chinese agent's words with a key in them, the traces' non-ASCII outputs."""
    from memory.forms.facts import learn
    from proxy.json_codec import dumps

    texts = {"a Chinese agent's words (4,500 characters)": "运行测试后发现 token 校验失败，api_key = sk-test 的配置需要修改。" * 100}
    paths = [p for p in trace_paths() if "django__django-11910" in p.name]
    if paths:
        messages = json.loads(paths[0].read_text(encoding="utf-8"))["messages"]
        texts["a session's facts, the longest trace (3.6 KB)"] = dumps(learn({}, messages, "done")).decode()
    texts["the traces' tool outputs not in ASCII"] = "\n".join(t for t in outputs() if not t.isascii())
    return texts


def outputs() -> list[str]:
    texts = []
    for path in trace_paths():
        for m in json.loads(path.read_text(encoding="utf-8"))["messages"]:
            if m.get("role") == "tool" and isinstance(m.get("content"), str):
                texts.append(m["content"])
    return texts


def best_of(rounds: int, fn: Any) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    ruleset()
    compile_ms = (time.perf_counter() - started) * 1000
    texts = outputs()
    size = sum(len(t.encode()) for t in texts) / 1e6
    new = best_of(args.rounds, lambda: [redact(t) for t in texts])
    old = best_of(args.rounds, lambda: [redact_secrets(t) for t in texts])
    changed = sum(redact(t) != t for t in texts)
    processors = (OldRedactor(["ruyi-configured-key-0001"]), Redactor(["ruyi-configured-key-0001"]))
    event_old, event_new = (best_of(args.rounds, lambda p=p: [p(None, "info", dict(EVENT)) for _ in range(2000)]) / 2000 for p in processors)
    print(f"rules: {len(ruleset().rules)}, compiled once in {compile_ms:.1f} ms")
    print(f"tool outputs of the public traces: {len(texts)} texts, {size:.1f} MB, {changed} changed by redaction\n")
    print("| what | before | after | ratio |")
    print("|---|---:|---:|---:|")
    print(
        f"| every tool output (before: redact_secrets, refs only), ms per MB | {old * 1000 / size:.1f} | {new * 1000 / size:.1f} | {new / old:.1f}× |"
    )
    print(
        f"| one access event through the log processor (before: bearer and sk- only), µs | {event_old * 1e6:.1f} | {event_new * 1e6:.1f} | {event_new / event_old:.1f}× |"
    )
    print(f"\nmedian output: {statistics.median(len(t) for t in texts)} characters\n")
    print("| a text not in ASCII | fast path for ASCII only, ms | for any script, ms | ratio |")
    print("|---|---:|---:|---:|")
    for name, text in not_ascii().items():
        assert ascii_only_fast_path(text) == redact(text)
        before = best_of(args.rounds * 4, lambda t=text: ascii_only_fast_path(t))
        after = best_of(args.rounds * 4, lambda t=text: ruleset().redact(t))
        print(f"| {name} | {before * 1000:.3f} | {after * 1000:.3f} | {after / before:.2f}× |")


if __name__ == "__main__":
    main()
