"""Run the test suite's fake upstream as its own process (for benchmarks)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import web  # noqa: E402

from tests.fake_upstream import make_fake_app  # noqa: E402

web.run_app(make_fake_app(), host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
