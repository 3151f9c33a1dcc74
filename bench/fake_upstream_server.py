"""Run the test suite's fake upstream as its own process (for benchmarks): PORT [JSON of FakeUpstream fields]."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import web

from tests.fake_upstream import FakeUpstream, make_fake_app

switches = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
fake = FakeUpstream(**switches)


class _Forget(list):  # type: ignore[type-arg]
    """Benchmarks send thousands of large bodies: keep none of them."""

    def append(self, item: object) -> None:
        pass


fake.received = _Forget()
web.run_app(make_fake_app(fake), host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
