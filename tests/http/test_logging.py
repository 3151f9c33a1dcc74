"""Logs: one access event per request, no key or Authorization value ever written, levels that fit the event."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import struct
from pathlib import Path
from typing import Any

import ollama
import openai
import pytest
import structlog

from proxy.http.log import Redactor, configure_logging, redact_text
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream

PLANTED = "sk-planted-secret-4242424242"
RUYI_KEY = "ruyi-key-planted-777"


async def test_access_event_and_no_secret_in_logs(make_proxy: MakeProxy) -> None:
    stream = io.StringIO()
    configure_logging("debug", "json", [RUYI_KEY], stream=stream)
    try:
        proxy = await make_proxy(auth={"keys": [RUYI_KEY]})
        good = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key=PLANTED, default_headers={"X-Ruyi-Key": RUYI_KEY})
        await good.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        bad = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key=PLANTED, max_retries=0)
        try:
            await bad.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.AuthenticationError:
            pass
        structlog.get_logger().warning("debugging", headers={"Authorization": f"Bearer {PLANTED}"}, note=f"key={RUYI_KEY}")
    finally:
        structlog.reset_defaults()
    text = stream.getvalue()
    assert PLANTED not in text and RUYI_KEY not in text
    events = [json.loads(line) for line in text.splitlines()]
    access = [e for e in events if e["event"] == "request_done"]
    assert [e["status"] for e in access] == [200, 401]
    first = access[0]
    for field in ("request_id", "upstream", "model", "upstream_ms", "total_ms", "bytes_out", "streamed"):
        assert field in first


def test_redaction_rules() -> None:
    assert "abc.def-ghi" not in redact_text("Authorization: Bearer abc.def-ghi")
    assert "sk-proj-0123456789" not in redact_text("key sk-proj-0123456789abc")
    event = Redactor(["mysecretvalue"])(None, "info", {"event": "x", "api_key": "v", "msg": "has mysecretvalue in it"})
    assert event == {"event": "x", "api_key": "[redacted]", "msg": "has [redacted] in it"}


def test_the_redactor_the_same_on_every_event() -> None:
    """Short values are redacted once and remembered (an access event per request): the second event of the
    same values is redacted exactly like the first, numbers stay numbers whatever their name, and a
    secret-named field is hidden whatever its value."""
    redactor = Redactor(["mysecretvalue"])
    event = {
        "event": "x",
        "path": "/v1/key=mysecretvalue",
        "token": None,
        "max_tokens": 5,
        "cached_tokens": 3,
        "usage": 0.5,
        "streamed": True,
        "password": "hunter2",
        "dcp": {"secret": "s", "note": "mysecretvalue"},
        "list": ["mysecretvalue", 1],
    }
    want = {
        "event": "x",
        "path": "/v1/key=[redacted]",
        "token": "[redacted]",
        "max_tokens": 5,
        "cached_tokens": 3,
        "usage": 0.5,
        "streamed": True,
        "password": "[redacted]",
        "dcp": {"secret": "[redacted]", "note": "[redacted]"},
        "list": ["[redacted]", 1],
    }
    assert redactor(None, "info", dict(event)) == want
    assert redactor(None, "info", dict(event)) == want


def logged(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]


async def abort_with_a_reset(port: int, body: bytes) -> None:
    """A client that reads the first bytes of a stream, then resets the connection (a killed agent)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: ruyi\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    await writer.drain()
    await reader.read(100)
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def test_a_client_that_goes_away_is_no_error(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """An agent killed mid-answer: status 499 in the access event, a debug line, never an ERROR with a traceback."""
    stream = io.StringIO()
    configure_logging("debug", "json", stream=stream)
    try:
        fake.reply = " ".join(["word"] * 3000)  # a fast upstream: Ruyi is writing when the reset arrives
        proxy = await make_proxy()
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
        for _ in range(20):
            await abort_with_a_reset(proxy.port, body)
        for _ in range(200):
            if len([e for e in logged(stream) if e["event"] == "request_done"]) == 20:
                break
            await asyncio.sleep(0.05)
    finally:
        structlog.reset_defaults()
    events = logged(stream)
    assert [e for e in events if e["event"].startswith("Error handling request")] == []  # aiohttp's, at ERROR
    statuses = [e["status"] for e in events if e["event"] == "request_done"]
    assert set(statuses) <= {200, 499} and 499 in statuses  # 200: the whole answer was written before the reset
    assert all(e["level"] == "debug" for e in events if e["event"] == "client_disconnected")


async def test_a_read_timeout_mid_stream_is_named_a_timeout(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    try:
        fake.fault, fake.chunk_delay = "slow", 2.0
        proxy = await make_proxy(upstream={"read_timeout_seconds": 0.3})
        client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.APIError) as err:
            async for _ in await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True):
                pass
        oproxy = await make_proxy("ollama", upstream={"read_timeout_seconds": 0.3})
        with pytest.raises(ollama.ResponseError) as oerr:
            async for _ in await ollama.AsyncClient(host=base_url(oproxy)).chat(model="m", messages=[{"role": "user", "content": "hi"}], stream=True):
                pass
    finally:
        structlog.reset_defaults()
    for message in (str(err.value), oerr.value.error):
        assert "sent nothing for 0.3 s" in message and "upstream.read_timeout_seconds" in message
        assert "closed the stream" not in message
    warned = [e for e in logged(stream) if e["event"] == "upstream_stream_timed_out"]
    assert len(warned) == 2 and warned[0]["level"] == "warning" and warned[0]["read_timeout_seconds"] == 0.3


async def test_a_calibration_outlier_is_a_debug_line(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    """A short request whose reported size is far from the estimate (a system prompt the upstream adds) is common."""
    fake.prompt_tokens = 5000
    lines = {}
    for level in ("info", "debug"):
        stream = io.StringIO()
        configure_logging(level, "json", stream=stream)
        try:
            proxy = await make_proxy()
            client = openai.AsyncOpenAI(base_url=base_url(proxy) + "/v1", api_key="k")
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        finally:
            structlog.reset_defaults()
        lines[level] = [e for e in logged(stream) if e["event"] == "calibration_outlier_ignored"]
    assert lines["info"] == []
    assert len(lines["debug"]) == 1 and lines["debug"][0]["level"] == "debug"


def test_every_kind_and_tracebacks_are_redacted_in_logs() -> None:
    stream = io.StringIO()
    configure_logging("debug", "json", [], stream=stream)
    aws, github = "AKIAQ7XPZ4RBN2KDM5EW", "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s12"
    try:
        log = structlog.get_logger()
        log.warning("seen", detail=f"aws {aws}", nested={"cmd": [f"git push https://x:{github}@github.com/o/r"]})
        try:
            raise ValueError(f"bad key {github}")
        except ValueError:
            log.exception("failed")
        logging.getLogger("aiohttp.server").error("stdlib %s", aws)
    finally:
        structlog.reset_defaults()
    text = stream.getvalue()
    assert aws not in text and github not in text
    assert "Traceback" in text and "[REDACTED:" in text


WRITER = """
import sys
import structlog
from proxy.http.log import configure_logging
with open(sys.argv[1], "a") as out:
    configure_logging("info", "json", [], stream=out)
    log = structlog.get_logger("w")
    for i in range(200):
        log.info("long_event", who=sys.argv[2], i=i, payload=sys.argv[2] * 20000)
"""


def test_processes_sharing_one_log_file_never_interleave_inside_a_line(tmp_path: Path) -> None:
    """``--workers N``: every worker logs to the same stdout; a line longer than a buffer is still written whole."""
    import subprocess
    import sys

    path = tmp_path / "shared.log"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), who]) for who in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted((e["who"], e["i"]) for e in events) == sorted((w, i) for w in "ab" for i in range(200))
