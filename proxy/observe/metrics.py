"""What each request adds to the Prometheus metrics: plain counters and histogram buckets on the event loop, exposed at scrape time.

Recording is a handful of dict increments per request (no lock: the access event runs on the event loop, and so
does the scrape); prometheus-client turns the tallies into metric families only when ``GET /metrics`` asks.
Every label is bounded: the endpoint is the matched route's pattern (``/v1/{tail}``), a request's route is the
configured route's model pattern (``default`` for the default route), never a model name, session or agent.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

UPSTREAM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds until an upstream's answer begins (its headers): a model's time to first token."""
ADDED_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Seconds Ruyi itself takes before the upstream's answer begins (reading, knowing, rewriting, recording)."""
BATCHES = frozenset({"applied", "economic", "overflow", "too_small", "requested"})
STRATEGIES = frozenset({"dedup", "supersede", "purge_errors", "truncation", "discard"})
ARCHIVE_REASONS = frozenset({"requested", "over_window", "archive_tier"})
SUMMARY_SOURCES = frozenset({"llm", "extractive", "extractive_fallback"})


class Histogram:
    """Bucket counts and a sum per label tuple (cumulated only when scraped)."""

    __slots__ = ("bounds", "series")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.series: dict[tuple[str, ...], list[float]] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        counts = self.series.get(labels)
        if counts is None:
            counts = self.series[labels] = [0] * (len(self.bounds) + 2)  # one per bucket, +Inf, then the sum
        counts[bisect_left(self.bounds, value)] += 1
        counts[-1] += value

    def family(self, name: str, doc: str, labels: Sequence[str]) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=list(labels))
        for key, counts in list(self.series.items()):
            running, buckets = 0.0, []
            for bound, n in zip((*self.bounds, float("inf")), counts[:-1]):
                running += n
                buckets.append((floatToGoString(bound), running))
            family.add_metric(list(key), buckets, counts[-1])
        return family


class RequestMetrics:
    """The per-request tallies of one app (each app its own: several live in one test process)."""

    def __init__(self, route_labels: Mapping[Any, str]) -> None:
        self.route_labels = dict(route_labels)
        """Each configured route (and the default route) → its label."""
        self.requests: Counter[tuple[str, str, str, str]] = Counter()
        self.tokens_before: Counter[tuple[str]] = Counter()
        self.tokens_after: Counter[tuple[str]] = Counter()
        self.saved: Counter[tuple[str]] = Counter()
        self.batches: Counter[tuple[str]] = Counter()
        self.archives: Counter[tuple[str, str]] = Counter()
        self.tiers: Counter[tuple[str]] = Counter()
        self.overflow_retries: Counter[tuple[str]] = Counter()
        self.upstream = Histogram(UPSTREAM_BUCKETS)
        self.added = Histogram(ADDED_BUCKETS)

    def route_label(self, route: Any) -> str:
        if route is None:
            return "none"
        return self.route_labels.get(route, "other")

    def record(
        self, endpoint: str, route: Any, dialect: str, status: int, facts: Mapping[str, Any], upstream_ms: float | None, added_ms: float | None
    ) -> None:
        """One request done: what it was, what Ruyi did to it, how long each side took. ``facts`` are the access
        event's (tokens, tier, the DCP report, an archive)."""
        label = self.route_label(route)
        self.requests[(endpoint, label, dialect, str(status))] += 1
        if upstream_ms is not None:
            self.upstream.observe((label,), upstream_ms / 1000)
        if added_ms is not None:
            self.added.observe((dialect,), added_ms / 1000)
        before = facts.get("tokens_before")
        if before is None:
            return  # not measured (X-Ruyi-Mode: off, a passthrough path, refused before knowing it)
        self.tokens_before[(label,)] += before
        self.tokens_after[(label,)] += facts.get("tokens_after") or 0
        self.tiers[(str(facts.get("tier")),)] += 1
        dcp = facts.get("dcp") or {}
        batch = dcp.get("batch")
        if batch in BATCHES:
            self.batches[(batch,)] += 1
        if dcp.get("applied"):
            for name, row in (dcp.get("strategies") or {}).items():
                self.saved[(name if name in STRATEGIES else "other",)] += row.get("tokens_saved", 0)
        archive = facts.get("archive")
        if isinstance(archive, dict):
            reason, source = archive.get("reason"), archive.get("summary_source")
            self.archives[(reason if reason in ARCHIVE_REASONS else "other", source if source in SUMMARY_SOURCES else "other")] += 1
            self.saved[("archive",)] += max(0, (archive.get("tokens_before") or 0) - (archive.get("tokens_after") or 0))
        elif archive is not None:  # a person's archive request without a DCP report
            self.archives[("requested", "other")] += 1
        if facts.get("overflow_retry"):
            self.overflow_retries[("accepted" if status < 400 else "refused",)] += 1

    def collect(self) -> Iterator[Metric]:
        """The tallies as metric families (on the event loop, like ``record``)."""
        yield _counter(
            "ruyi_requests",
            "Requests answered, by endpoint pattern, configured route, client dialect and HTTP status.",
            ("endpoint", "route", "dialect", "status"),
            self.requests,
        )
        yield _counter("ruyi_prompt_tokens_before", "Prompt tokens as the clients sent them (measured requests).", ("route",), self.tokens_before)
        yield _counter("ruyi_prompt_tokens_after", "Prompt tokens as Ruyi forwarded them (measured requests).", ("route",), self.tokens_after)
        yield _counter(
            "ruyi_tokens_saved",
            "Tokens removed by new decisions, by strategy (archive: what archives removed); "
            "a decision keeps saving on later requests, which before - after counts.",
            ("strategy",),
            self.saved,
        )
        yield _counter(
            "ruyi_batches",
            "Pruning batches, by kind (applied at the prune tier, economic below it, overflow retry, too_small, requested by a person).",
            ("kind",),
            self.batches,
        )
        yield _counter("ruyi_archives", "Archives made, by reason and who wrote the summary.", ("reason", "summary_source"), self.archives)
        yield _counter("ruyi_tier_requests", "Measured requests by the usage tier they arrived at.", ("tier",), self.tiers)
        yield _counter(
            "ruyi_overflow_retries",
            "Requests the upstream refused as too long, retried once with a harder batch, by whether the retry was accepted.",
            ("result",),
            self.overflow_retries,
        )
        yield self.upstream.family("ruyi_upstream_latency_seconds", "Time until the upstream's answer began (its headers).", ("route",))
        yield self.added.family(
            "ruyi_added_latency_seconds",
            "Ruyi's own time before the upstream's answer began: reading, "
            "knowing, rewriting and recording the request (the upstream's wait left out).",
            ("dialect",),
        )


def _counter(name: str, doc: str, labels: Sequence[str], values: Mapping[tuple[str, ...], float]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=list(labels))
    for key, value in list(values.items()):
        family.add_metric(list(key), value)
    return family


def route_labels(default_route: Any, routes: Sequence[Any]) -> dict[Any, str]:
    """The label of each configured route: its model pattern; the default route's is ``default``."""
    labels = {route: route.model for route in routes}
    labels[default_route] = "default"
    return labels
