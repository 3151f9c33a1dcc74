"""Ollama's keep_alive read as Ollama reads it, and the num_ctx kept per (upstream, model) while in use."""

from __future__ import annotations

import math

import pytest

from proxy.know.loaded_models import LoadedModels, keep_alive_seconds

KEY = ("http://127.0.0.1:11434", "llama3.1:8b")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, 300.0),
        (300, 300.0),
        (2.5, 2.5),
        ("300", 300.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("250ms", 0.25),
        (0, 0.0),
        ("0", 0.0),
        ("0s", 0.0),
        (-1, math.inf),
        ("-1", math.inf),
        ("-1m", math.inf),
        ("soon", 300.0),
        ("5 minutes", 300.0),
        (True, 300.0),
        ([], 300.0),
        ("", 300.0),
    ],
)
def test_keep_alive_is_seconds_or_a_go_duration_and_negative_is_forever(value: object, seconds: float) -> None:
    assert keep_alive_seconds(value, 300.0) == seconds


def test_a_negative_default_keeps_models_loaded_forever() -> None:
    assert keep_alive_seconds(None, -1) == math.inf


def test_num_ctx_holds_while_the_keep_alive_runs_and_is_forgotten_after() -> None:
    models = LoadedModels()
    assert models.num_ctx(KEY) is None
    models.sent(KEY, 16384, 300.0)
    assert models.num_ctx(KEY) == 16384 and models.num_ctx((KEY[0], "qwen3:8b")) is None
    models.sent(KEY, 32768, 0.0)  # reloaded at another size, and unloaded right after its answer
    models.answered(KEY, 0.0)
    assert models.num_ctx(KEY) is None
    models.sent(KEY, 8192, math.inf)
    models.answered(KEY, math.inf)
    assert models.num_ctx(KEY) == 8192


def test_models_are_bounded_least_recently_used_first() -> None:
    models = LoadedModels(max_models=2)
    for name in ("a", "b", "c"):
        models.sent(("u", name), 8192, 300.0)
    assert models.num_ctx(("u", "a")) is None and models.num_ctx(("u", "c")) == 8192
