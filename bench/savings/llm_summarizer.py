"""Ruyi with its LLM summarizer on, beside it off, for the next-step evidence bench (bench/savings/evidence.py).

How an LLM's S1 reaches a later archive in the product: once the archiving step plans the next archive (a request's
``prepare_until``), ``ruyi serve`` starts background work after that request (``LongCtx.after_rewrite`` → ``_prepare``):
the extractive chunks, then ``prepare_llm_s1`` (proxy/longctx/llm_s1.py) asks the summarizer (``summaries/llm.py``:
litellm, a timeout, a circuit breaker per session, the answer checked) for an S1 of everything that archive would
replace, the previous S1 folded in, and keeps it in the session's memory. The archive a later request makes uses that
S1 when it covers no more than what the archive replaces (its end's chain link matching), what happened since added in
extractive form (summary source ``llm``); otherwise the extractive S1 (``extractive_fallback``). Never on the request
path: a summary not ready is not waited for.

A replay has no wall clock between requests. ``OfflineRuyi`` (proxy/replay/offline.py), which this bench runs, finishes
that background work after each request before the next one: the LLM call is awaited. That is the best case: every S1
the model answers in time (``summarizer.timeout_seconds``) is ready by the next archive however slow the model is; in
``ruyi serve`` a summary still being written when the archive comes is not used. Lateness is not modelled here, only
the summarizer's own outcomes (answered, timeout, error, unusable, breaker open).

The summarizer's calls are priced like requests in the cost with caching (``side_requests``: prompt tokens as
characters / 4, none cached; its answers are not priced).

``--fake-summarizer`` starts the test suite's fake upstream on 127.0.0.1 (bench/fake_upstream_server.py) answering the
archivist with a summary built from the prompt (tests/fake_summary.py: the first line of each quoted message, newest
first). That shows the mechanism end to end (litellm, the checks, the S1 in later archives) and what a summary of that
shape does to the figure; it is no claim about what a model's summary would keep. ``--fake-summarizer empty`` answers
the five headings and nothing else: the figure with an S1 that holds nothing, i.e. how much of it S1 carries at all.
"""

from __future__ import annotations

import argparse
import atexit
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bench import processes
from bench.savings.savings import RUYI_CONFIG, RUYI_COUNTER
from config.load import load_config
from config.schema import Config
from proxy.http.log import configure_logging
from proxy.replay.offline import OfflineRuyi
from proxy.replay.run import Rewrite

FAKE_MODEL = "openai/ruyi-fake-archivist"
EMPTY = "## Task\n—\n## Decisions\n—\n## Constraints\n—\n## Progress\n—\n## Anchors\n—"
"""``--fake-summarizer empty``'s answer: a summary that passes the checks and holds nothing."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that add a row of Ruyi with its LLM summarizer on (beside Ruyi with it off)."""
    group = parser.add_argument_group("LLM summarizer (a row of Ruyi with summarizer.model set, beside Ruyi without)")
    group.add_argument("--summarizer-model", help="a litellm model for summaries (openai/gpt-4o-mini, ollama_chat/qwen2.5:7b)")
    group.add_argument("--summarizer-api-base", help="the model's server (http://127.0.0.1:11434 …)")
    group.add_argument(
        "--summarizer-key-env",
        help="the environment variable holding its key (never the key itself; litellm's openai/ models want one even from "
        "a server that checks none: any value)",
    )
    group.add_argument("--summarizer-timeout", type=float, default=None, help="seconds a summary may take (summarizer.timeout_seconds)")
    group.add_argument(
        "--fake-summarizer",
        nargs="?",
        const="prompt",
        choices=("prompt", "empty"),
        help="answer summaries from the test suite's fake upstream on 127.0.0.1: built from the prompt (the default: the mechanism, "
        "not quality), or 'empty' (the five headings and nothing else: what the figure is with an S1 holding nothing)",
    )


@dataclass
class Tally:
    """What the LLM summarizer did over the replays since the last ``take``."""

    outcomes: Counter[str] = field(default_factory=Counter)
    """Per call: ok, timeout, error, unusable (its answer refused), breaker_open (not asked)."""
    archives: Counter[str] = field(default_factory=Counter)
    """Archives made, by where their S1 came from (llm, extractive_fallback)."""
    carried: int = 0
    """Forwarded requests holding an S1 the LLM wrote."""
    requests: int = 0

    @property
    def requested(self) -> int:
        return sum(n for why, n in self.outcomes.items() if why != "breaker_open")

    @property
    def fell_back(self) -> int:
        return sum(n for why, n in self.outcomes.items() if why != "ok")

    def as_json(self, prompt_tokens: int) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "answered": self.outcomes["ok"],
            "fell_back": self.fell_back,
            "outcomes": dict(self.outcomes),
            "archives": dict(self.archives),
            "requests_carrying_llm_s1": self.carried,
            "requests": self.requests,
            "prompt_tokens": prompt_tokens,
        }

    def line(self, label: str, prompt_tokens: int) -> str:
        why = ", ".join(f"{w} {n}" for w, n in sorted(self.outcomes.items()) if w != "ok")
        made = sum(self.archives.values())
        return (
            f"{label}: summaries requested {self.requested}, answered {self.outcomes['ok']}, fell back {self.fell_back}"
            + (f" ({why})" if why else "")
            + f"; archives with the LLM's S1 {self.archives['llm']} of {made}; forwarded requests carrying it {self.carried} of "
            f"{self.requests}; summarizer prompts {prompt_tokens:,} tokens (priced as side requests in the cost)"
        )


class SummarizingRuyi(OfflineRuyi):
    """The offline Ruyi with an LLM summarizer, tallying what its summarizer and archives did."""

    def __init__(self, tally: Tally, config: Config, model: str, window: int) -> None:
        super().__init__(config, model, window, RUYI_COUNTER)
        self.tally = tally
        self.written: list[str] = []
        """The S1 texts the LLM wrote for this session, newest last."""

    def __call__(self, messages: list[dict[str, Any]], tools: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        summarizer = self.longctx.summarizer
        assert summarizer is not None
        before = Counter(summarizer.outcomes)
        sent = super().__call__(messages, tools)
        self.tally.outcomes.update(summarizer.outcomes - before)
        ctx = self.contexts[0] if self.contexts else None
        archived = ctx.longctx.archived if ctx is not None and ctx.longctx is not None else None
        if archived is not None:
            self.tally.archives[archived.summary.source] += 1
        self.tally.requests += 1
        system = "\n".join(str(m.get("content")) for m in sent if m.get("role") == "system")
        self.tally.carried += any(text in system for text in self.written)
        if ctx is not None and ctx.measurement is not None:
            s1 = self.longctx.memory(self.agent_id, ctx.measurement.session.session_id).s1
            if s1 is not None and (not self.written or self.written[-1] != s1[2]):
                self.written.append(s1[2])
        return sent


class LLMRows:
    """The row of Ruyi with its LLM summarizer on (none when not asked for), its summarizer's server, its tally."""

    def __init__(self, label: str | None, overrides: Mapping[str, Any], stop: Callable[[], None] = lambda: None) -> None:
        self.label, self.overrides, self._stop = label, dict(overrides), stop
        self.tally = Tally()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LLMRows:
        """From the options of ``add_arguments``: the fake summarizer started now when asked for."""
        if args.fake_summarizer or args.summarizer_model:
            quiet_litellm()
        if args.fake_summarizer and args.summarizer_model:
            raise SystemExit("--fake-summarizer or --summarizer-model, not both")
        if args.summarizer_key_env and not os.environ.get(args.summarizer_key_env):
            raise SystemExit(f"--summarizer-key-env {args.summarizer_key_env}: that variable is not set")
        timeout = {"summarizer.timeout_seconds": args.summarizer_timeout} if args.summarizer_timeout else {}
        if args.fake_summarizer:
            port = processes.free_port()
            proc = processes.fake_upstream(port, summary_from_prompt=args.fake_summarizer == "prompt", summary_reply=EMPTY)
            atexit.register(processes.stop, [proc])  # a run ended early stops it too
            api = {"summarizer.model": FAKE_MODEL, "summarizer.api_base": f"http://127.0.0.1:{port}/v1", "summarizer.api_key": "sk-fake"}
            label = "fake upstream" if args.fake_summarizer == "prompt" else "fake upstream, empty summary"
            return cls(f"Ruyi + LLM summarizer ({label})", api | timeout, lambda: processes.stop([proc]))
        if not args.summarizer_model:
            return cls(None, {})
        api = {"summarizer.model": args.summarizer_model, "summarizer.api_base": args.summarizer_api_base}
        if args.summarizer_key_env:
            api["summarizer.api_key"] = f"env:{args.summarizer_key_env}"
        return cls(f"Ruyi + LLM summarizer ({args.summarizer_model})", {k: v for k, v in api.items() if v} | timeout)

    def rows(self, chosen: Mapping[str, Callable[[int], Rewrite]]) -> dict[str, Callable[[int], Rewrite]]:
        """``chosen`` with Ruyi (the summarizer off) and, right after it, Ruyi with the summarizer on."""
        if self.label is None:
            return dict(chosen)
        out = {name: f for name, f in chosen.items() if name != "Ruyi"}
        config = load_config(None, {k: v for k, v in os.environ.items() if k.startswith("RUYI_")}, self.overrides)
        off = replace(RUYI_CONFIG, summarizer=replace(RUYI_CONFIG.summarizer, model=None))  # off even if RUYI_SUMMARIZER_MODEL is set
        out["Ruyi"] = lambda window: OfflineRuyi(off, "gpt-4", window, RUYI_COUNTER)
        out[self.label] = lambda window: SummarizingRuyi(self.tally, config, "gpt-4", window)
        return out

    def take(self) -> Tally:
        """The tally since the last call (one window's), started afresh."""
        done, self.tally = self.tally, Tally()
        return done

    def close(self) -> None:
        self._stop()


def quiet_litellm() -> None:
    """litellm without its help banner on stdout after a failed call (a bench's ``--json`` goes there), and without
    fetching its model map at import."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True


def logs_to_stderr() -> None:
    """Ruyi's log lines (a summary that fell back, a step that failed open) on stderr: stdout holds the bench's report."""
    configure_logging("warning")
