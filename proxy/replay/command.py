"""``ruyi replay``: a recorded conversation through the offline pipeline, as a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from config.schema import Config
from proxy.keep.keeper import Keeper
from proxy.know.tokens import PromptTokens, TokenCounter
from proxy.replay.offline import OfflineRuyi
from proxy.replay.run import Message, Prices, StderrProgress, Tools, format_table, load_trace, replay


def run_replay(args: argparse.Namespace, config: Config) -> int:
    try:
        trace = load_trace(args.trace)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"ruyi: cannot read the trace {args.trace}: {exc}", file=sys.stderr)
        return 2
    ratio = config.pruning.cache_read_ratio if args.cache_read_price is None else args.cache_read_price
    if not 0 <= ratio <= 1:
        print("ruyi: --cache-read-price must be between 0 and 1", file=sys.stderr)
        return 2
    config = replace(config, pruning=replace(config.pruning, cache_read_ratio=ratio))
    model = args.model or trace.model or "gpt-4o"
    counter = TokenCounter(config.tokens)
    keeper = _keeper(config) if getattr(args, "agent", None) else None
    try:
        ruyi = OfflineRuyi(config, model, args.window, counter, keeper=keeper, agent_id=getattr(args, "agent", None) or "offline")
        result = replay(
            trace.messages,
            trace.tools,
            ruyi,
            ruyi.window,
            _Counts(counter, model),
            Prices(cache_read=ratio),
            trace=Path(args.trace).name,
            progress=StderrProgress(Path(args.trace).name),
        )
    finally:
        if keeper is not None:
            keeper.close()
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        print(format_table(result))
    return 0


def _keeper(config: Config) -> Keeper:
    """The agent's memory on the store's file (an empty one in memory without a SQLite store)."""
    path = Path(config.store.data_dir) / "ruyi.db" if config.store.backend == "sqlite" else None
    return Keeper(path if path is not None and path.exists() else None, config.notebook, None)


class _Counts:
    """The proxy's own token counter in the shape replay() expects."""

    def __init__(self, counter: TokenCounter, model: str) -> None:
        self.counter, self.model = counter, model

    def __call__(self, messages: Sequence[Message], tools: Tools) -> PromptTokens:
        return self.counter.count(self.model, messages, tools)
