"""The tallies themselves: Prometheus' bucket rule (a value on a bound counts in it), cumulative buckets, unknown names folded."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from config.schema import Route
from proxy.observe.metrics import Histogram, RequestMetrics, route_labels


def test_a_value_on_a_bound_counts_in_that_bucket_and_buckets_cumulate() -> None:
    h = Histogram((0.1, 1.0))
    for v in (0.1, 0.5, 1.0, 7.0):
        h.observe(("x",), v)
    family = h.family("t_seconds", "t", ("k",))
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name == "t_seconds_bucket"}
    assert buckets == {"0.1": 1, "1.0": 3, "+Inf": 4}
    assert [s.value for s in family.samples if s.name == "t_seconds_count"] == [4]
    assert [round(s.value, 6) for s in family.samples if s.name == "t_seconds_sum"] == [8.6]


def test_unknown_strategies_reasons_and_routes_are_folded_into_other() -> None:
    default, gpt = Route(), Route(model="gpt-*", url="https://api.openai.com/v1", kind="openai")
    m = RequestMetrics(route_labels(default, (gpt,)))
    facts = {
        "tokens_before": 100,
        "tokens_after": 60,
        "tier": "normal",
        "dcp": {"applied": True, "batch": "brand-new-kind", "strategies": {"someday": {"tokens_saved": 40}}},
        "archive": {"reason": "who-knows", "summary_source": "an-oracle", "tokens_before": 100, "tokens_after": 60},
    }
    m.record("/v1/chat/completions", Route(model="never-configured"), "openai", 200, facts, None, None)
    m.record("/v1/chat/completions", gpt, "openai", 200, facts, 5.0, 1.0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(m)
    text = generate_latest(registry).decode()
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert values[("ruyi_requests_total", (("dialect", "openai"), ("endpoint", "/v1/chat/completions"), ("route", "other"), ("status", "200")))] == 1
    assert values[("ruyi_requests_total", (("dialect", "openai"), ("endpoint", "/v1/chat/completions"), ("route", "gpt-*"), ("status", "200")))] == 1
    assert values[("ruyi_tokens_saved_total", (("strategy", "other"),))] == 80
    assert values[("ruyi_archives_total", (("reason", "other"), ("summary_source", "other")))] == 2
    assert not any(name == "ruyi_batches_total" for name, _ in values)  # an unknown kind is not a label
