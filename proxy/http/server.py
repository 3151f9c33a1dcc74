"""Run the app: listen, cancel handlers of vanished clients, drain gracefully on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import errno
import gc
import os
import resource
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import structlog
from aiohttp import web

from config.schema import Config
from proxy import heap
from proxy.http.app import make_app
from proxy.http.exposure import exposure_warnings, server_options
from proxy.http.log import configure_logging
from proxy.know.measure import Measurer
from proxy.rewrite.steps import default_steps
from redaction.redact import ruleset

SHUTDOWN_BACKSTOP_S = 2.0
"""aiohttp's own wait for handlers, past the grace period after which proxy.shutdown has already ended them."""
RESTART_WINDOW_S = 10.0
"""A worker that dies this soon after it started (a store that refuses, a port taken) is not restarted: all stop."""


def serve(config: Config, ignored_variables: Sequence[str] = ()) -> int:
    """Serve until SIGTERM/SIGINT; ``ignored_variables``: RUYI_* names in the environment that are not config. With
    ``server.workers`` > 1, as that many processes on one port (proxy/http/workers.py). Returns the exit status."""
    secrets = [k for k in (*config.auth.resolved_keys, config.auth.resolved_admin_key) if k]
    secrets += [r.key for r in (config.default_route, *config.routes) if r.key]
    configure_logging(config.logging.level, config.logging.format, secrets)
    log = structlog.get_logger("ruyi")
    if ignored_variables:  # a client key read by env:, another tool's setting: not Ruyi's config, and fine
        log.debug("environment_variables_ignored", names=list(ignored_variables), config_form="RUYI_<SECTION>__<KEY>")
    taken = port_taken(config.server.host, config.server.port)
    if taken:
        log.error("port_in_use", host=config.server.host, port=config.server.port, reason=taken)
        print(
            f"ruyi: cannot listen on {config.server.host}:{config.server.port}: {taken}; "
            "stop what holds it or choose another port (--port N or RUYI_SERVER__PORT)",
            file=sys.stderr,
        )
        return 2
    heap.fixed_thresholds()  # a large body's memory goes back to the system once freed, from any thread
    Measurer.warm_up()
    ruleset()  # the redaction rules, compiled before the first request needs them
    _fit_file_limit(config.upstream.max_connections, log)
    if config.server.workers > 1:  # loaded above, before the fork: the workers share those pages
        return supervise(replace(config, store=replace(config.store, shared=True)), lambda c: run(c, log, reuse_port=True), log)
    run(config, log)
    return 0


def run(config: Config, log: structlog.typing.FilteringBoundLogger, reuse_port: bool = False) -> None:
    """One process serving the port (``reuse_port``: beside others on the same port)."""
    app = make_app(config, default_steps(config))
    gc.collect()
    gc.freeze()  # what start-up loaded (tokenizers, litellm's model map) is never garbage: full collections skip it

    async def serving(_: web.Application) -> None:  # after start-up opened the store (which may refuse)
        shown = "127.0.0.1" if config.server.host in ("0.0.0.0", "::", "") else config.server.host
        log.info(
            "serving",
            host=config.server.host,
            port=config.server.port,
            upstream=config.default_route.url,
            pid=os.getpid(),
            dashboard=f"http://{shown}:{config.server.port}/ruyi/ui",
        )
        for warning in exposure_warnings(config):
            log.warning("serving_exposed", warning=warning)

    app.on_startup.append(serving)
    web.run_app(
        app,
        loop=_event_loop(),
        host=config.server.host,
        port=config.server.port,
        reuse_port=reuse_port or None,
        shutdown_timeout=config.server.shutdown_grace_seconds + SHUTDOWN_BACKSTOP_S,  # Shutdown ends requests at the grace
        handler_cancellation=True,
        access_log=None,
        print=None,
        **server_options(config),
    )
    log.info("stopped")


def _event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed (less time per request in the loop's own machinery), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - Windows
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def port_taken(host: str, port: int) -> str | None:
    """Why Ruyi could not listen on (host, port), or None: checked before start-up, so a taken port is one clear
    line and exit status 2, never "serving" followed by a traceback. Bound the way aiohttp binds (SO_REUSEADDR)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"the host does not resolve ({exc.strerror})"
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return "the port is already in use"
                if exc.errno == errno.EACCES:
                    return "permission denied (a port below 1024 needs privileges)"
    return None  # anything else (an address family this machine lacks) is aiohttp's to report as it binds


FILE_LIMIT_ROOM = 65536
"""Open files Ruyi asks for at least (within the hard limit): clients waiting for the pool, slow clients until their
header timeout, the store's files; with room to spare, a burst of connections never starves new ones."""


def _fit_file_limit(max_connections: int, log: structlog.typing.FilteringBoundLogger) -> None:
    """Raise the soft limit on open files so a full pool fits (a stream takes the client's socket and the upstream's)
    with room for many more clients than the pool serves at once."""
    need = 2 * max_connections + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(need, FILE_LIMIT_ROOM)
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        if new < need:
            log.warning("file_limit_low", open_files=new, needed=need, hint="lower upstream.max_connections or raise `ulimit -n`")


def supervise(config: Config, run_one: Callable[[Config], None], log: structlog.typing.FilteringBoundLogger) -> int:
    """``server.workers`` processes serving one port (each binds it with SO_REUSEPORT; the kernel spreads connections
    over them), forked from this one, which only watches: SIGTERM/SIGINT go on to every worker (each drains as one
    process does); a worker that dies is started again, unless it died at start-up (then all stop, status 1)."""
    workers: dict[int, float] = {}
    stopping = False

    def start() -> None:
        pid = os.fork()
        if pid == 0:  # the worker: its own event loop, threads and store connections, made after the fork
            status = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.setpgid(0, 0)  # a terminal's Ctrl-C reaches the supervisor alone, which passes it on once
                _end_with_parent()
                run_one(config)
            except (KeyboardInterrupt, web.GracefulExit):  # a second signal while draining
                pass
            except BaseException:  # the worker's end, whatever it was, is its exit status
                log.exception("worker_failed", pid=os.getpid())
                status = 1
            os._exit(status)
        workers[pid] = time.monotonic()

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(workers):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:  # exited meanwhile: os.wait collects it
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for _ in range(config.server.workers):
        start()
    log.info("workers_started", workers=config.server.workers, pids=sorted(workers), port=config.server.port)
    failed = False
    while workers:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        started = workers.pop(pid, None)
        if started is None or stopping:
            continue
        code = os.waitstatus_to_exitcode(status)
        log.warning("worker_exited", pid=pid, status=code)
        if time.monotonic() - started < RESTART_WINDOW_S and code != -signal.SIGKILL:
            failed = stopping = True  # it could not start: the others are stopped too
            forward(signal.SIGTERM, None)
            continue
        start()
    log.info("workers_stopped")
    return 1 if failed else 0


def _end_with_parent() -> None:
    """Linux: this worker gets SIGTERM when its supervisor dies (even by SIGKILL), so no worker outlives it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # another system: a supervisor killed outright leaves its workers running
        pass
