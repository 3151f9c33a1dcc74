"""The audit file: every request's audit record as one JSON line (the store's audit columns), redacted and written by a thread of its own, rotated by size."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import IO, Any

import structlog

from config.validate import ConfigError
from proxy.observe.options import AuditOptions
from redaction.redact import redact_value

log = structlog.get_logger(__name__)
QUEUE_MAX = 10_000
"""Lines waiting for the writing thread at most; beyond it new ones are dropped and counted (/metrics)."""


class _Rotating(RotatingFileHandler):
    """The standard library's size rotation, its files made readable by their owner only, its failures counted."""

    failed = 0

    def _open(self) -> IO[str]:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return open(fd, "a", encoding=self.encoding)  # the handler owns and closes it

    def handleError(self, record: logging.LogRecord) -> None:  # logging's name
        self.failed += 1
        if self.failed == 1 or self.failed % 1000 == 0:
            log.warning("audit_file_write_failed", path=self.baseFilename, failed=self.failed)


class AuditFile:
    """``put`` never waits and never fails, from any thread (a full queue drops the record and counts it); one
    thread redacts, encodes and appends. ``close`` writes what is queued, then closes the file."""

    def __init__(self, options: AuditOptions) -> None:
        assert options.path is not None
        path = Path(options.path)
        try:  # at start-up: a path Ruyi cannot write to stops it with a message naming the key
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
        except OSError as exc:
            raise ConfigError("configuration", "audit.path", f"cannot write {path} ({exc.strerror})") from None
        self.path = path
        self._handler = _Rotating(path, maxBytes=options.max_bytes, backupCount=options.backups, encoding="utf-8", delay=True)
        self._queue: queue.Queue[tuple[str, str, str, float, Mapping[str, Any]] | None] = queue.Queue(QUEUE_MAX)
        self.written = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="ruyi-audit-file", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    @property
    def failed(self) -> int:
        return self._handler.failed

    def put(self, agent_id: str, session_id: str, request_id: str, body: Mapping[str, Any]) -> None:
        try:
            self._queue.put_nowait((agent_id, session_id, request_id, time.time(), body))
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("audit_file_queue_full", dropped=self.dropped, queue_max=QUEUE_MAX)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            self._write(*item)

    def _write(self, agent_id: str, session_id: str, request_id: str, created_at: float, body: Mapping[str, Any]) -> None:
        try:
            line = json.dumps(
                {"agent_id": agent_id, "session_id": session_id, "request_id": request_id, "created_at": created_at, "body": redact_value(body)},
                separators=(",", ":"),
            )  # ASCII: lone surrogates survive
        except (TypeError, ValueError):
            self._handler.failed += 1
            log.warning("audit_file_record_unencodable", request_id=request_id)
            return
        self._handler.emit(logging.LogRecord("ruyi.audit", logging.INFO, "", 0, line, None, None))
        self.written += 1

    async def close(self) -> None:
        """Write what is queued, then close the file (graceful shutdown)."""
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)
        self._handler.close()
