"""Know each request: its session, prompt tokens, the model's window, usage tier and Ollama ``num_ctx``."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import aiohttp
import structlog

from config.schema import Config
from memory.agent_ids import AgentIds, agent_session_of
from memory.chain import Fingerprinter
from memory.identity import session_header
from memory.serialized import SerializedRegistry
from memory.session import Session
from memory.sessions import SessionRegistry
from memory.shared import SharedRegistry
from memory.store.base import Audit, ModelRatio, Store
from memory.store.locks import WatchedLock
from memory.store.writer import Writer
from proxy import heap
from proxy.dialects.base import Assembled
from proxy.know import tokens as token_module
from proxy.know import window as window_module
from proxy.know.bodies import body_messages, context_tokens
from proxy.know.calibration import Calibration, usage_from_anthropic, usage_from_ollama, usage_from_openai
from proxy.know.learnt import LearntWindows, stated_limit
from proxy.know.loaded_models import LoadedModels, keep_alive_seconds
from proxy.know.measurement import Measurement
from proxy.know.replica_turns import resolve_shared, session_turn
from proxy.know.server_window import ServerWindows
from proxy.know.tiers import tier_for
from proxy.know.tokens import TokenCounter
from proxy.know.window import OllamaWindows, Window, budget_for, num_ctx_for, requested_output_tokens
from proxy.offload import Offload
from proxy.routes import upstream_url

log = structlog.get_logger(__name__)
Messages = list[dict[str, Any]]
OLLAMA_API = {"ollama_chat": "chat", "ollama_generate": "generate", "openai_chat": "openai"}
CONTEXT_1M = 1_000_000
"""The window ``anthropic-beta: context-1m-…`` opens on the Claude models that offer it."""
SHOW_TIMEOUT = aiohttp.ClientTimeout(total=5)
IDLE_EVERY_S = 30.0
"""How often what was not used for ``tokens.idle_s`` / ``sessions.idle_s`` is forgotten."""
IDLE_STEP = 2000
"""Counts forgotten per cache and step on the loop (a fraction of a millisecond), sessions per step in a worker."""


def wants_context_1m(headers: Mapping[str, str]) -> bool:
    """Whether ``anthropic-beta`` asks for the 1M-token window (``context-1m-2025-08-07``)."""
    values = [v for k, v in headers.items() if k.lower() == "anthropic-beta"]
    return any(flag.strip().startswith("context-1m-") for value in values for flag in value.split(","))


class Measurer:
    """The app's long-lived measuring state: fingerprints, token counts, calibration, sessions, windows.
    With a store, sessions and calibration are durable; ``writer`` takes what is written in the background.
    Everything but ``window`` runs in worker threads (``offload``): the registry is serialized by its lock, which
    the writer shares (one store connection); the caches tolerate concurrent use."""

    def __init__(
        self,
        config: Config,
        client: aiohttp.ClientSession,
        store: Store | None = None,
        writer: Writer | None = None,
        offload: Offload | None = None,
        lock: WatchedLock | None = None,
    ) -> None:
        self.config = config
        self.client = client
        self.store = store
        self.writer = writer
        self.offload = offload or Offload(config.server.worker_threads)
        self.fingerprinter = Fingerprinter()
        self.counter = TokenCounter(config.tokens)
        self.calibration = Calibration(config.calibration)
        soon = (lambda: writer.flush_soon(self.sessions.flush)) if writer is not None else None  # many requests, one commit
        self.shared = store is not None and config.store.shared
        """Replicas share the store: each request resolves from the store, under its session's lock (memory/shared.py)."""
        kind = SharedRegistry if self.shared else SessionRegistry
        registry = kind(
            config.sessions,
            store=store,
            queue=writer.put if writer is not None else None,
            reports_max=config.pruning.reports_kept,
            unsaved_max=config.store.unsaved_max,
            soon=soon,
        )
        self.sessions: SessionRegistry = SerializedRegistry(registry, lock)  # type: ignore[assignment]
        if store is not None:
            self.calibration.restore(store.ratios())
        self.ollama_windows = OllamaWindows(self._show, config.window, config.ollama)
        self.loaded = LoadedModels()
        self.server_windows = ServerWindows(self._get_json, config.window)
        self.learnt, self.agent_ids = LearntWindows(), AgentIds()  # agent_ids: the agents' own session ids (codex, claude -c)
        self.forgotten: Counter[str] = Counter()
        """What ``forget_idle_forever`` let go since start-up: ``cached`` counts and classifications, ``sessions``,
        and ``heap_trims``, the rounds after which the C heap's free pages went back to the system (GET /ruyi/v1/stats)."""

    async def forget_idle_forever(self, others: Sequence[Callable[[float, float, int], int]] = ()) -> None:
        """From start-up, every ``IDLE_EVERY_S`` (or a tenth of ``sessions.idle_s``, when less): forget the token
        counts and what ``others`` cache (pruning's classifications: each takes the time, ``idle_s`` and a limit, and
        returns how many went) not used for ``sessions.idle_s``, on the loop a bounded step at a time, and let the
        sessions unseen that long leave memory (in a worker thread, under the registry's lock), so memory follows the
        conversations in use, not everything seen since start-up."""
        idle_s = self.config.sessions.idle_s
        if idle_s <= 0:
            return
        every_s = min(IDLE_EVERY_S, idle_s / 10)
        forgetters = [self.counter.forget_idle, *others]
        trimmed_at = time.monotonic()
        while True:
            try:
                now = time.monotonic()
                while n := sum(forget(now, idle_s, IDLE_STEP) for forget in forgetters):
                    self.forgotten["cached"] += n
                    await asyncio.sleep(0)  # requests between two steps
                while n := await asyncio.to_thread(self.sessions.release_idle, IDLE_STEP):
                    self.forgotten["sessions"] += n
                    if n < IDLE_STEP:
                        break
                if time.monotonic() - trimmed_at >= IDLE_EVERY_S:  # a walk over the heap: at most every 30 s
                    trimmed_at = time.monotonic()
                    if await asyncio.to_thread(heap.trim):  # what was freed (idle entries, finished requests) back to the system
                        self.forgotten["heap_trims"] += 1
            except Exception:  # tried again at the next round
                log.warning("idle_forget_failed", exc_info=True)
            await asyncio.sleep(every_s)

    async def drain(self) -> None:
        """Wait until what is queued for the store is written (before reading it back)."""
        if self.writer is not None:
            await self.writer.drain()

    async def close(self) -> None:
        """Write what is unsaved, drain the background queue, close the store (graceful shutdown)."""
        await asyncio.to_thread(self.sessions.flush)
        if self.writer is not None:
            await self.writer.close()
        if self.store is not None:
            await asyncio.to_thread(self._close_store)
        self.offload.close()

    def _close_store(self) -> None:
        assert self.store is not None
        with self.sessions.lock:  # type: ignore[attr-defined]
            self.store.close()

    @staticmethod
    def warm_up() -> None:
        """Load tokenizers and litellm's model map at start-up rather than on the first request."""
        token_module.warm_up()
        window_module.warm_up()

    async def _show(self, model: str) -> Mapping[str, Any] | None:
        route = self.config.route_for(model)
        headers = {"Authorization": f"Bearer {route.key}"} if route.key else {}
        async with self.client.post(upstream_url(route, "/api/show"), json={"model": model}, headers=headers, timeout=SHOW_TIMEOUT) as resp:
            return await resp.json() if resp.status == 200 else None

    async def _get_json(self, url: str, headers: Mapping[str, str]) -> tuple[int, Any]:
        async with self.client.get(url, headers=headers, timeout=SHOW_TIMEOUT, allow_redirects=False) as resp:
            if resp.status != 200:
                return resp.status, None
            try:
                return 200, await resp.json(content_type=None)
            except ValueError:
                return 200, None

    async def _server_window(self, model: str, headers: Mapping[str, str]) -> Window | None:
        """What an OpenAI-compatible upstream reports for a model (asked with the route's key, else the client's)."""
        route = self.config.route_for(model)
        auth = {"Authorization": f"Bearer {route.key}"} if route.key else {k: v for k, v in headers.items() if k.lower() == "authorization"}
        tokens = await self.server_windows.window(route.url, model, auth)
        return Window(tokens, "server") if tokens is not None else None

    async def window(self, dialect_name: str, model: str, body: Mapping[str, Any], ollama: bool, headers: Mapping[str, str]) -> Window:
        """The model's window (for Ollama, or a local server that says, asked of the upstream once): the part of
        measuring done on the loop."""
        if ollama:
            found = await self.ollama_windows.window_for(model, body, OLLAMA_API.get(dialect_name, "openai"))  # type: ignore[arg-type]
            return self._within_learnt(model, found)
        window = window_module.window_for(model, self.config.window)
        if window.source == "default" and self.config.window.ask_server and self.config.route_for(model).kind != "anthropic":
            window = await self._server_window(model, headers) or window
        if wants_context_1m(headers) and window.tokens < CONTEXT_1M and window.source not in ("config", "request"):
            window = Window(CONTEXT_1M, "anthropic_beta")  # a header loses to what the person configured (issue 21)
        return self._within_learnt(model, window)

    def _within_learnt(self, model: str, window: Window) -> Window:
        """A window the server itself stated in a refusal wins when it is below every other source."""
        learnt = self.learnt.get(self.config.route_for(model).url, model)
        return Window(learnt, "learnt") if learnt is not None and learnt < window.tokens else window

    def after_refusal(self, m: Measurement, model: str, error: bytes, sent_raw_tokens: int | None) -> Measurement | None:
        """The upstream refused the prompt as too long and said its limit (and its count): remember the limit for
        (upstream, model), calibrate Ruyi's count by the server's, and the request measured again within it (for the
        one retry). None when the refusal states no number."""
        stated = stated_limit(error)
        if stated is None:
            return None
        limit, count = stated
        route = self.config.route_for(model)
        self.learnt.remember(route.url, model, limit)
        sent = sent_raw_tokens or m.raw_tokens
        if count is not None and sent > 0 and not m.history_elsewhere:
            self.calibration.observe(model, sent, count)
        scale = max(self.calibration.ratio(model), count / sent if count is not None and sent > 0 else 0.0)
        window = Window(min(limit, m.window.tokens), "learnt")
        tokens = round(m.raw_tokens * scale)
        budget = budget_for(window.tokens, m.requested, self.config.window)
        log.info("window_learnt", model=model, upstream=route.url, limit=limit, server_count=count, ruyi_count=sent)
        return replace(
            m,
            window=window,
            budget=budget,
            tokens=tokens,
            scale=scale,
            tier=tier_for(budget.usage(tokens), self.config.tiers, self.config.archive.enabled),
        )

    def measure(
        self,
        dialect_name: str,
        model: str,
        body: Mapping[str, Any],
        messages: Messages | None,
        headers: Mapping[str, str],
        ollama: bool,
        window: Window,
        *,
        agent_id: str,
        stored: bool = True,
    ) -> Measurement:
        """In a worker thread (or on the loop with ``stored=False``, holding the registry's lock: `NeedsStore` when the
        session cannot be resolved from memory). ``agent_id``: who is asking (proxy.http.auth decides it); sessions are
        found within that agent only. The request's session is resolved and its turn taken in one step, so a session's
        requests take turns in the order they were resolved."""
        msgs, elsewhere = (messages, False) if messages is not None else body_messages(dialect_name, body)
        chain = self.fingerprinter.chain(msgs)
        prompt = self.counter.count(model, msgs, body.get("tools") if isinstance(body.get("tools"), list) else None, chain)
        named = session_header(headers) or self.agent_ids.named(agent_id, headers, body, chain)  # codex's ids, claude -c
        if self.shared:
            resolution, turn = resolve_shared(self.sessions, self.store, self.offload.turns, self.calibration, agent_id, chain, named, stored)
        else:
            with self.sessions.lock:  # type: ignore[attr-defined]
                resolution = self.sessions.resolve(agent_id, chain, named, stored=stored)
                turn = self.offload.turns.enter((resolution.session.agent_id, resolution.session.session_id))
        self.agent_ids.seen(agent_id, agent_session_of(headers), resolution.session, chain)
        try:
            exact = context_tokens(body) if messages is None else 0  # model tokens already: not calibrated
            scale = self.calibration.ratio(model)
            tokens = round(prompt.total * scale) + exact
            api = OLLAMA_API.get(dialect_name, "openai")
            requested = requested_output_tokens(body)
            budget = budget_for(window.tokens, requested, self.config.window)
            num_ctx, key, keep_alive = None, None, 0.0
            if ollama and api != "openai":  # num_ctx per (upstream, model), never lowered while the model is in use
                key = (self.config.route_for(model).url, model)
                keep_alive = keep_alive_seconds(body.get("keep_alive"), self.config.ollama.keep_alive_s)
                if window.source != "request":
                    num_ctx = num_ctx_for(tokens, requested, window.tokens, self.loaded.num_ctx(key), self.config.window)
            m = Measurement(
                resolution.session,
                resolution.how,
                resolution.new_messages,
                chain.links,
                resolution.shared,
                prompt.total + exact,
                tokens,
                window,
                budget,
                tier_for(budget.usage(tokens), self.config.tiers, self.config.archive.enabled),
                num_ctx,
                self.counter.text_counter(model),
                prompt.messages,
                key,
                keep_alive,
                scale,
                turn,
                requested,
                elsewhere,
            )
            in_force = num_ctx or (window.tokens if window.source == "request" else None)
            if ollama and api == "openai":
                in_force = self.config.ollama.default_context
            if window_module.truncation_suspected(tokens, in_force):
                log.warning("truncation_suspected", model=model, prompt_tokens=tokens, num_ctx=in_force, session=m.session.session_id)
            return m
        except BaseException:
            turn.end()  # the session's next request must not wait for one that never rewrites
            raise

    def turn_of(self, agent_id: str, session_id: str) -> AbstractContextManager[None]:
        """A new turn of a session (an overflow retry's), under its lock in the store when replicas share it."""
        return session_turn(self.store if self.shared else None, self.offload.turns, agent_id, session_id)

    def decide_in_turn(self, agent_id: str, session_id: str, decide: Callable[[Session], Mapping[str, Any]], clear_batch_retry: bool = False) -> bool:
        """A person's action on a session (the archive API): ``decide(session)`` makes the decisions, written in the
        session's turn; with replicas on the copy the store has now, under the session's lock. In a worker thread."""
        with self.turn_of(agent_id, session_id):
            if self.shared:
                self.sessions.refresh(agent_id, session_id)  # type: ignore[attr-defined]
            session = self.sessions.get(agent_id, session_id)
            if session is None:
                return False
            return self.sessions.decide(agent_id, session_id, decide(session), {}, None, clear_batch_retry)

    def record(self, m: Measurement, model: str, tokens_after: int, forwarded: bool = True) -> None:
        """Remember what this request showed about its session (before it is forwarded); its num_ctx only
        when the rewritten body, which carries it, is what goes out."""
        s = m.session
        self.sessions.record(
            s.agent_id,
            s.session_id,
            prompt_tokens=tokens_after,
            tier=m.tier.value,
            window=m.window.tokens,
            num_ctx=m.num_ctx if forwarded else None,
            calibration=m.scale,
        )

    def forwarding(self, m: Measurement, rewritten: bool) -> None:
        """Note the num_ctx an Ollama native request loads its model with: Ruyi's when the forwarded body is
        Ruyi's, else the client's own (when it set one; the server's default is not known here)."""
        if m.ollama_model is None:
            return
        num_ctx = m.num_ctx if rewritten and m.num_ctx is not None else None
        if num_ctx is None and m.window.source == "request":
            num_ctx = m.window.tokens
        if num_ctx is not None:
            self.loaded.sent(m.ollama_model, num_ctx, m.keep_alive_s)

    def observe(self, m: Measurement, model: str, forwarded_raw_tokens: int, assembled: Assembled | None, wire: str) -> dict[str, int]:
        """Calibrate against the upstream's reported prompt size (in the client's dialect, ``wire``: Anthropic's is
        input + cache creation + cache read, plus what its own context management cleared); record cached tokens.
        Returns what was seen."""
        if m.ollama_model is not None:
            self.loaded.answered(m.ollama_model, m.keep_alive_s)  # the keep-alive counts from the answer's end
        if assembled is not None and assembled.answer_id is not None:  # a later request may chain from it
            self.agent_ids.answered(m.session.agent_id, assembled.answer_id, m.session.session_id)
        if assembled is None or not assembled.usage:
            return {}
        parse = {"ollama": usage_from_ollama, "anthropic": usage_from_anthropic}.get(wire, usage_from_openai)
        usage = parse(assembled.usage)
        cleared = sum(e.get("cleared_input_tokens") or 0 for e in assembled.applied_edits if isinstance(e.get("cleared_input_tokens"), int))
        reported = usage.prompt_tokens + cleared if usage.prompt_tokens is not None else None
        # Ollama leaves the KV-cached part out of what it reports, natively and over its /v1 alike
        partial = self.config.route_for(model).kind == "ollama"
        ratio = None if m.history_elsewhere else self.calibration.observe(model, forwarded_raw_tokens, reported, partial=partial)
        if ratio is not None:
            self._keep_ratio(ModelRatio(model, ratio))
        s = m.session
        self.sessions.record(
            s.agent_id,
            s.session_id,
            upstream_prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens,
            calibration=self.calibration.ratio(model),
        )
        seen = {"upstream_prompt_tokens": usage.prompt_tokens, "cached_tokens": usage.cached_tokens, "server_cleared_tokens": cleared or None}
        return {k: v for k, v in seen.items() if v is not None}

    def _keep_ratio(self, ratio: ModelRatio) -> None:
        """Into the background queue; with replicas, written at once: the session's next request may reach another process."""
        if self.shared and self.store is not None:
            try:
                with self.sessions.lock:  # type: ignore[attr-defined]
                    self.store.write_background([ratio])
                return
            except Exception:  # calibration is best effort: queued instead
                log.warning("calibration_write_failed", model=ratio.model, exc_info=True)
        if self.writer is not None:
            self.writer.put(ratio)

    def observe_count(self, model: str, estimate: int, reported: int | None) -> None:
        """Calibrate against a count the upstream made of a prompt (Anthropic's count_tokens)."""
        ratio = self.calibration.observe(model, estimate, reported)
        if ratio is not None and self.writer is not None:
            self.writer.put(ModelRatio(model, ratio))

    def audit(self, m: Measurement, request_id: str, record: dict[str, Any]) -> None:
        """Queue the audit record of a request (written in the background, once per request id)."""
        if self.writer is not None:
            self.writer.put(Audit(m.session.agent_id, m.session.session_id, request_id, record))
