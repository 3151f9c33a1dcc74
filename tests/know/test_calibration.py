"""Calibration ratios and the usage each upstream reports."""

from __future__ import annotations

import pytest

from proxy.know.calibration import (
    Calibration,
    UpstreamUsage,
    family_of,
    usage_from_anthropic,
    usage_from_ollama,
    usage_from_openai,
)
from proxy.know.options import CalibrationOptions


def test_first_observation_sets_the_ratio_then_it_moves_gently() -> None:
    cal = Calibration(CalibrationOptions(weight=0.5))
    assert cal.ratio("m") == 1.0
    assert cal.observe("m", 1000, 1100) == pytest.approx(1.1)
    assert cal.apply("m", 2000) == 2200
    assert cal.observe("m", 1000, 1300) == pytest.approx(1.2)
    assert cal.ratio("other") == 1.0


def test_outliers_and_missing_reports_are_ignored() -> None:
    cal = Calibration()
    assert cal.observe("m", 1000, None) is None
    assert cal.observe("m", 1000, 0) is None
    assert cal.observe("m", 0, 100) is None
    assert cal.observe("m", 1000, 5000) is None
    assert cal.ratios() == {}


def test_ollama_counts_only_when_close_to_the_estimate() -> None:
    cal = Calibration()
    assert cal.observe("llama", 1000, 120, partial=True) is None  # only the part not in the KV cache
    assert cal.observe("llama", 1000, 790, partial=True) is None
    assert cal.observe("llama", 1000, 800, partial=True) == pytest.approx(0.8)
    assert cal.observe("gpt", 1000, 700) == pytest.approx(0.7)  # not partial: taken as is


def test_models_are_bounded() -> None:
    cal = Calibration(CalibrationOptions(max_models=2))
    for m in "abc":
        cal.observe(m, 100, 110)
    assert set(cal.ratios()) == {"b", "c"}


def test_openai_usage() -> None:
    usage = {"prompt_tokens": 1200, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens": 1024}}
    assert usage_from_openai(usage) == UpstreamUsage(1200, 1024, 50)
    assert usage_from_openai({"prompt_tokens": 10, "prompt_tokens_details": None}) == UpstreamUsage(10, None)
    assert usage_from_openai(None) == UpstreamUsage(None, None)


def test_deepseek_usage() -> None:
    usage = {"prompt_tokens": 900, "completion_tokens": 9, "prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 260}
    assert usage_from_openai(usage) == UpstreamUsage(900, 640, 9)


def test_anthropic_usage_adds_the_cache_parts() -> None:
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000, "output_tokens": 7}
    assert usage_from_anthropic(usage) == UpstreamUsage(3210, 3000, 7)
    assert usage_from_anthropic({"output_tokens": 7}) == UpstreamUsage(None, None, 7)


def test_ollama_final_object() -> None:
    final = {"done": True, "prompt_eval_count": 812, "eval_count": 40}
    assert usage_from_ollama(final) == UpstreamUsage(812, None, 40)
    assert usage_from_ollama({"done": True}) == UpstreamUsage(None, None)


def test_a_model_not_yet_seen_starts_from_its_familys_ratio() -> None:
    cal = Calibration()
    cal.observe("claude-opus-4-5", 1000, 1150)
    assert cal.ratio("claude-opus-4-6") == pytest.approx(1.15)  # same family: the stand-in encoding is off alike
    assert cal.ratio("anthropic/claude-opus-4-7") == pytest.approx(1.15)
    assert cal.ratio("gpt-4o") == 1.0 and cal.ratio("claude-3-5-sonnet-20241022") == 1.0  # other families
    cal.observe("claude-opus-4-6", 1000, 1100)
    assert cal.ratio("claude-opus-4-6") == pytest.approx(1.1) and cal.ratio("claude-opus-4-5") == pytest.approx(1.15)
    assert set(cal.ratios()) == {"claude-opus-4-5", "claude-opus-4-6"}
    restored = Calibration()
    restored.restore([("claude-opus-4-5", 1.15), ("claude-opus-4-6", 1.1)])
    assert restored.ratio("claude-opus-4-8") == pytest.approx(1.1)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-opus-4-5", "claude-opus"),
        ("claude-3-5-sonnet-20241022", "claude"),
        ("gpt-4o", "gpt"),
        ("openai/gpt-4.1", "gpt"),
        ("llama3.1:8b", "llama"),
    ],
)
def test_families(model: str, family: str) -> None:
    assert family_of(model) == "family:" + family
