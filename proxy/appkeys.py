"""Typed keys for the app's shared state (config, the one client session, the pipeline, counters)."""

from __future__ import annotations

from collections import Counter

import aiohttp
from aiohttp import web

from config.schema import Config
from proxy.measure import Measurer
from proxy.pipeline import Pipeline

CONFIG = web.AppKey("config", Config)
CLIENT = web.AppKey("client", aiohttp.ClientSession)
PIPELINE = web.AppKey("pipeline", Pipeline)
COUNTERS = web.AppKey("counters", Counter)
MEASURER = web.AppKey("measurer", Measurer)
