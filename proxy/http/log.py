"""structlog set-up: JSON lines or console; every event redacted (the one redaction function, secret-named fields, configured keys)."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable, MutableMapping
from typing import Any

import orjson
import structlog
from aiohttp.http_exceptions import HttpProcessingError

from redaction.redact import MEMO_CHARS, MEMO_SIZE, redact

SECRET_FIELDS = re.compile(r"(authorization|api[_-]?key|x-ruyi-key|x-api-key|password|secret|token$)", re.I)
REDACTED = "[redacted]"


@functools.lru_cache(maxsize=1024)
def is_secret_field(name: str) -> bool:
    return bool(SECRET_FIELDS.search(name))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Free text through the one redaction function, then without the given secrets (Ruyi's configured keys)."""
    text = redact(text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    return text


class Redactor:
    """A structlog processor that hides secret-named fields and secrets inside any string value."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)
        # an access event per request repeats the same short values (path, model, tier, session): redacted once
        self._short = functools.lru_cache(maxsize=MEMO_SIZE)(self._text)

    def __call__(self, _logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        out: dict[str, Any] = {}
        short = self._short
        for key, value in event.items():  # the common kinds inline: this runs for every request's access event
            kind = type(value)
            if kind is int or kind is float or kind is bool:
                out[key] = value
            elif kind is str and len(value) <= MEMO_CHARS and (key == "event" or not is_secret_field(key)):
                out[key] = short(value)
            else:
                out[key] = self._clean(key, value)
        return out

    def _clean(self, key: str, value: Any) -> Any:
        kind = type(value)
        if kind is int or kind is float or kind is bool:  # numbers are never secret, whatever their name
            return value
        if key != "event" and is_secret_field(key) and not isinstance(value, (int, float)):
            return REDACTED
        if kind is str:
            return self._short(value) if len(value) <= MEMO_CHARS else self._text(value)
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, dict):
            return {k: self._clean(str(k), v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._clean(key, v) for v in value]
        return value

    def _text(self, text: str) -> str:
        return redact_text(text, self.secrets)


class QuietParseErrors(logging.Filter):
    """aiohttp logs a request it cannot parse (a head past the parser's ceiling, bad framing) at ERROR with
    a traceback quoting the client's bytes; that is the client's mistake: a warning naming its kind."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = "request_unparsable: %s (status %s)", (type(exc).__name__, exc.code)
            record.exc_info = record.exc_text = None
        return True


def _orjson_text(event: Any, **_: Any) -> str:
    """A JSON line via orjson (an access event per request: several times cheaper than the json module); the json
    module for what orjson refuses (lone surrogates, integers past 64 bits)."""
    try:
        return orjson.dumps(event, default=repr, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(event, default=repr)


class Lines:
    """A log stream written a whole line per ``write(2)``: processes sharing one stdout or file (``--workers N``) never
    interleave inside a line (on a file opened for appending, and on a pipe up to its atomic size); threads take turns."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        try:
            self.fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # io.StringIO and the like: one write() each is enough
            self.fd = None
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        if self.fd is None:
            self.stream.write(text)
            return
        data = text.encode("utf-8", "replace")
        with self._lock:
            self.stream.flush()  # whatever else wrote to the stream through Python goes first
            while data:
                data = data[os.write(self.fd, data) :]

    def flush(self) -> None:
        if self.fd is None:
            self.stream.flush()

    def isatty(self) -> bool:
        return bool(self.stream.isatty())


def configure_logging(level: str = "info", fmt: str = "auto", secrets: Iterable[str] = (), stream: Any = None) -> None:
    """Configure structlog once at start-up (stdlib logging routed through the same renderer)."""
    stream = Lines(stream or sys.stderr)
    console = fmt == "console" or (fmt == "auto" and stream.isatty())
    renderer: Any = structlog.dev.ConsoleRenderer() if console else structlog.processors.JSONRenderer(serializer=_orjson_text)
    redactor = Redactor(secrets)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.format_exc_info,  # before the redactor: a traceback quotes values too
        redactor,
        structlog.processors.TimeStamper(fmt="iso", utc=True),  # Ruyi's own clock: nothing to redact
    ]
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.WriteLoggerFactory(stream),  # message and newline in one write
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(processors=[*shared[1:], structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer])
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    server = logging.getLogger("aiohttp.server")
    server.filters[:] = [f for f in server.filters if not isinstance(f, QuietParseErrors)]
    server.addFilter(QuietParseErrors())
