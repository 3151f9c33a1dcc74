"""Typed keys for the app's shared state (config, the one client session and its slots, the pipeline, the measurer, long-context memory, the keeper of what agents remember, the metrics and the audit file)."""

from __future__ import annotations

from collections import Counter

import aiohttp
from aiohttp import web

from config.schema import Config
from proxy.http.pool import ConnectionSlots
from proxy.http.settling import Unsettled
from proxy.http.shutdown import Shutdown
from proxy.keep.keeper import Keeper
from proxy.know.measure import Measurer
from proxy.longctx.service import LongCtx
from proxy.observe.audit_file import AuditFile
from proxy.observe.metrics import RequestMetrics
from proxy.rewrite.pipeline import Pipeline

CONFIG = web.AppKey("config", Config)
CLIENT = web.AppKey("client", aiohttp.ClientSession)
PIPELINE = web.AppKey("pipeline", Pipeline)
MEASURER = web.AppKey("measurer", Measurer)
SLOTS = web.AppKey("slots", ConnectionSlots)
SHUTDOWN = web.AppKey("shutdown", Shutdown)
UNSETTLED = web.AppKey("unsettled", Unsettled)
"""Whole answers sent before their after-answer work, per agent (proxy/http/settling.py)."""
KEEPER = web.AppKey("keeper", Keeper)
LONGCTX = web.AppKey("longctx", LongCtx)
METRICS = web.AppKey("metrics", RequestMetrics)
AUDIT_FILE = web.AppKey("audit_file", AuditFile)
MCP_CALLS = web.AppKey("mcp_calls", Counter)
"""(tool, outcome) → calls of the MCP server's tools since start-up (proxy/mcp/endpoint.py), for /metrics."""
