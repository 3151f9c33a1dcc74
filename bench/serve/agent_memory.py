"""Memory Ruyi keeps per agent once its bounded caches are full: this checkout beside another, in one run.

Each checkout runs in a subprocess of its own: an in-process Ruyi in front of the test suite's fake upstream, every
per-agent bound shrunk to ``--small`` (sessions, held reads, workspaces, agent ids, token caches) and filled first by
3 × ``--small`` agents; then ``--agents`` new agents send one request each (``X-Ruyi-Agent``), and tracemalloc says
what is still alive that was not before (the fake upstream's record of requests and the redaction memo cleared).
What a bounded cache holds no longer grows; what grows is kept per agent for ever, or for a while (``Activity`` keeps
the agents that ended within ``notebook.idle_seconds``, here 1 s).

``--before DIR`` is a checkout of another version (``git archive REV | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def probe(agents: int, small: int, top: int) -> None:
    """In the subprocess (cwd the checkout): the measurement itself."""
    import asyncio
    import gc
    import tracemalloc

    sys.path.insert(0, os.getcwd())
    os.environ["RUYI_DATA_DIR"] = tempfile.mkdtemp()
    import aiohttp
    from aiohttp.test_utils import TestServer

    import memory.agent_ids
    import proxy.keep.held
    import proxy.know.tokens
    import proxy.layout.sources
    from proxy.http.app import make_app
    from proxy.rewrite.steps import default_steps
    from redaction import redact
    from tests.conftest import config_for
    from tests.fake_upstream import FakeUpstream, make_fake_app

    proxy.keep.held.AGENTS_HELD = proxy.layout.sources.WORKSPACES_KEPT = small
    proxy.know.tokens.TEXTS_KEPT = memory.agent_ids.KEPT = small

    async def main() -> None:
        fake = FakeUpstream()
        up = TestServer(make_fake_app(fake))
        await up.start_server()
        cfg = config_for(
            f"http://127.0.0.1:{up.port}/v1",
            sessions={"max": small},
            tokens={"cache_max": small, "prefix_max": small},
            notebook={"idle_seconds": 1.0},
        )
        srv = TestServer(make_app(cfg, default_steps(cfg), probe_upstream=False))
        await srv.start_server()
        url = f"http://127.0.0.1:{srv.port}/v1/chat/completions"

        async with aiohttp.ClientSession() as http:

            async def one(i: int) -> None:
                body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"hello {i}"}]}
                async with http.post(url, json=body, headers={"X-Ruyi-Agent": f"agent-{i}"}) as r:
                    await r.read()
                    assert r.status == 200, r.status

            def settle() -> None:
                fake.received.clear()
                redact._redact_short.cache_clear()
                gc.collect()

            for i in range(3 * small):
                await one(i)
            await asyncio.sleep(1)
            settle()
            tracemalloc.start(8)
            before = tracemalloc.take_snapshot()
            for i in range(3 * small, 3 * small + agents):
                await one(i)
            await asyncio.sleep(2)
            settle()
            after = tracemalloc.take_snapshot()
        stats = after.compare_to(before, "lineno")
        grew = sum(s.size_diff for s in stats)
        print(f"GREW {grew} {grew / agents:.0f}")
        here = os.getcwd()
        for s in [s for s in stats if s.traceback[0].filename.startswith(here) and "/.venv/" not in s.traceback[0].filename][:top]:
            frame = s.traceback[0]
            print(f"LINE {frame.filename[len(here) + 1 :]}:{frame.lineno} {s.size_diff} {s.count_diff}")
        await srv.close()
        await up.close()

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="a checkout of the version to compare with")
    parser.add_argument("--agents", type=int, default=1000, help="new agents measured, one request each")
    parser.add_argument("--small", type=int, default=100, help="every per-agent bound, shrunk to fill quickly")
    parser.add_argument("--top", type=int, default=5, help="lines of Ruyi's own code shown, most growth first")
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe(args.agents, args.small, args.top)
        return
    checkouts = ([("before", args.before.resolve())] if args.before is not None else []) + [("this", ROOT)]
    print(f"{args.agents} new agents, one request each, every per-agent bound {args.small} and full\n")
    print("| ruyi | alive growth KiB | bytes per agent | Ruyi's lines that grew most (bytes, objects) |")
    print("|---|---:|---:|---|")
    for name, checkout in checkouts:
        env = {**os.environ, "RUYI_LOG_LEVEL": "warning", "PYTHONPATH": str(checkout)}
        out = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--probe",
                "--agents",
                str(args.agents),
                "--small",
                str(args.small),
                "--top",
                str(args.top),
            ],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        grew, per, lines = 0, "", []
        for line in out.stdout.splitlines():
            if line.startswith("GREW "):
                grew, per = int(line.split()[1]), line.split()[2]
            elif line.startswith("LINE "):
                where, size, count = line.split()[1:]
                lines.append(f"`{where}` {int(size):+,} ({int(count):+,})")
        print(f"| {name} | {grew / 1024:.0f} | {per} | {'; '.join(lines)} |", flush=True)


if __name__ == "__main__":
    main()
