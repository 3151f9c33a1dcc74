"""``GET /metrics``: the request tallies and the app's own counts read at scrape time, in Prometheus text, behind the admin API's guard."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from proxy import appkeys
from proxy.http.auth import admin_caller
from proxy.observe.metrics import RequestMetrics, route_labels

REGISTRY = web.AppKey("metrics_registry", CollectorRegistry)


class AppState:
    """What the app already counts, read when scraped (nothing recorded for it on the request path): fail-open
    counts per step, the store's queues, durable writes, the upstream pool, the summarizer and the audit file."""

    def __init__(self, app: web.Application) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        app = self.app
        failed = CounterMetricFamily(
            "ruyi_failed_open",
            "Times a step failed open since start-up (the request went on "
            "unmodified at that step): rewrite steps by name, measure, rewrite, dialect, serialize, "
            "store_write, observe, raw_turns, metrics.",
            labels=["step"],
        )
        for step, n in dict(app[appkeys.PIPELINE].failures).items():  # one C-level copy: worker threads add to it
            failed.add_metric([step], n)
        yield failed
        measurer, longctx = app.get(appkeys.MEASURER), app.get(appkeys.LONGCTX)
        yield from _queues(
            {
                "records": measurer.writer if measurer is not None else None,
                "recall": longctx.writer if longctx is not None else None,
                "audit_file": app.get(appkeys.AUDIT_FILE),
            }
        )
        if measurer is not None and measurer.store is not None:
            stats = getattr(measurer.sessions, "registry", measurer.sessions).unsaved_stats()  # plain reads: never the registry's lock
            yield CounterMetricFamily(
                "ruyi_store_durable_write_failures",
                "Durable writes before forwarding that failed (the client's own bytes went out).",
                value=stats["failed"],
            )
            yield GaugeMetricFamily("ruyi_store_unsaved_entries", "Entries waiting for the next durable write.", value=stats["unsaved"])
            yield CounterMetricFamily("ruyi_store_unsaved_dropped", "Unsaved entries dropped while the store kept failing.", value=stats["dropped"])
        slots = app.get(appkeys.SLOTS)
        if slots is not None:
            yield GaugeMetricFamily("ruyi_upstream_connections_in_use", "Upstream exchanges in flight.", value=slots.in_use)
            yield CounterMetricFamily(
                "ruyi_upstream_pool_refused", "Requests answered 503: no upstream connection came free in time.", value=slots.refused
            )
        yield from _summarizer(longctx.summarizer if longctx is not None else None)
        calls = app.get(appkeys.MCP_CALLS)
        if calls is not None:
            family = CounterMetricFamily(
                "ruyi_mcp_calls",
                "Calls of Ruyi's MCP tools (/mcp) by tool and outcome: ok, refused (a tool error the model read), failed.",
                labels=["tool", "outcome"],
            )
            for (tool, outcome), n in sorted(dict(calls).items()):
                family.add_metric([tool, outcome], n)
            yield family


def _queues(queues: dict[str, Any]) -> Iterator[Metric]:
    depth = GaugeMetricFamily(
        "ruyi_store_queue_depth",
        "Records waiting in a background queue (records: reports, usage, audit; "
        "recall: raw turns, chunks, archives; audit_file: lines for audit.path).",
        labels=["queue"],
    )
    docs = {
        "written": "Records a background queue wrote since start-up.",
        "dropped": "Records a background queue dropped since start-up because it was full.",
        "failed": "Records a background queue failed to write since start-up.",
    }
    done = {what: CounterMetricFamily(f"ruyi_store_queue_{what}", doc, labels=["queue"]) for what, doc in docs.items()}
    for name, queue in queues.items():
        if queue is None:
            continue
        depth.add_metric([name], queue.pending)
        for what, family in done.items():
            family.add_metric([name], getattr(queue, what))
    yield depth
    yield from done.values()


def _summarizer(summarizer: Any) -> Iterator[Metric]:
    calls = CounterMetricFamily(
        "ruyi_summarizer_calls",
        "LLM summarizer calls by result (ok, timeout, error, unusable, breaker_open: not made); none without summarizer.model.",
        labels=["result"],
    )
    for result, n in dict(summarizer.outcomes if summarizer is not None else {}).items():
        calls.add_metric([result], n)
    yield calls
    yield GaugeMetricFamily(
        "ruyi_summarizer_breakers_open",
        "Sessions whose summarizer circuit breaker is open now (extractive summaries meanwhile).",
        value=summarizer.open_breakers() if summarizer is not None else 0,
    )
    yield GaugeMetricFamily("ruyi_summarizer_configured", "1 when summarizer.model names an LLM, else 0.", value=int(summarizer is not None))


def install(app: web.Application) -> None:
    """Give the app its own registry (several apps live in one test process) and its ``GET /metrics`` route."""
    config = app[appkeys.CONFIG]
    app[appkeys.METRICS] = metrics = RequestMetrics(route_labels(config.default_route, config.routes))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)  # a collector: it has collect()
    registry.register(AppState(app))
    app[REGISTRY] = registry
    app.router.add_get("/metrics", scrape)


async def scrape(request: web.Request) -> web.Response:
    """The metrics, to the admin key, a client key or (without keys) a local caller: the admin API's rule."""
    admin_caller(request)
    body = generate_latest(request.app[REGISTRY])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
