"""Peak memory of `ruyi serve` relaying a large passthrough answer: this checkout beside another, in one run.

``--before DIR`` is a checkout of another version (``git archive REV | tar -x -C DIR``). Both serve in front of
the test suite's fake upstream, which answers ``GET /v1/files/{id}/content`` with ``--mib`` MiB and a
Content-Length; each Ruyi relays it once to a client that reads it as it comes, and its peak resident memory
(VmHWM) is read before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.processes import free_port, serve  # noqa: E402
from tests.fake_upstream import FakeUpstream, make_fake_app  # noqa: E402


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


async def measure(checkout: Path, upstream: str, data_dir: Path) -> tuple[float, float, int]:
    port = free_port()
    proc = await serve(checkout, port, upstream, data_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(600):
                try:
                    async with http.get(url + "/healthz") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
            idle = peak_mib(proc.pid)
            size = 0
            async with http.get(url + "/v1/files/file-big/content") as resp:
                async for chunk in resp.content.iter_any():
                    size += len(chunk)
            return idle, peak_mib(proc.pid), size
    finally:
        proc.terminate()
        await proc.wait()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the version to compare with")
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/ruyi-bench-passthrough"))
    args = parser.parse_args()
    fake = FakeUpstream(file_size=args.mib * 2**20, release_wait=0)
    runner = web.AppRunner(make_fake_app(fake))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    upstream = f"http://127.0.0.1:{port}/v1"
    print(f"a {args.mib} MiB answer with a Content-Length, relayed once\n")
    print("| ruyi | peak MiB at start | peak MiB after relaying | grew by | bytes relayed |")
    print("|---|---:|---:|---:|---:|")
    try:
        for name, checkout in (("before", args.before.resolve()), ("this", ROOT)):
            idle, peak, size = await measure(checkout, upstream, args.data_dir / name)
            print(f"| {name} | {idle:.0f} | {peak:.0f} | {peak - idle:.0f} | {size:,} |")
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
