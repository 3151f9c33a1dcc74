"""The ``ruyi`` command: ``serve``, ``replay``, ``config check``, ``config reference``, ``store vacuum``, ``store forget``, ``session``, ``archive``, ``anchors``, ``memo``, ``cards``, ``report``, ``sessions``, ``--version``; its ``--help`` is the documentation."""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from config.load import effective_yaml, ignored_variables, load_config
from config.validate import ConfigError
from memory.store.base import StoreError


def ruyi_version() -> str:
    try:
        return version("ruyi")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ruyi", description="Ruyi: a context-rewriting proxy for LLM agents.")
    parser.add_argument("--version", action="version", version=f"ruyi {ruyi_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the proxy", description="Run the proxy (defaults: 127.0.0.1:8787 in front of Ollama).")
    serve.add_argument("--config", metavar="FILE", help="YAML config file (also RUYI_CONFIG)")
    serve.add_argument("--upstream", metavar="URL", help="default upstream base URL (also RUYI_UPSTREAM)")
    serve.add_argument("--upstream-kind", choices=("openai", "ollama", "anthropic"), help="wire format of --upstream (guessed when omitted)")
    serve.add_argument("--host", metavar="H", help="interface to listen on (also RUYI_HOST)")
    serve.add_argument("--port", metavar="P", type=int, help="port to listen on (also RUYI_PORT)")
    serve.add_argument(
        "--workers",
        metavar="N",
        type=int,
        help="processes serving the port side by side (SO_REUSEPORT), sharing the store: SQLite or PostgreSQL, "
        "not store.backend memory (default 1; server.workers)",
    )
    rep = sub.add_parser(
        "replay",
        help="replay a recorded conversation offline through Ruyi's pipeline",
        description="Replay a trace (OpenAI chat JSON: {model, messages, tools}) as the requests its agent made, "
        "through the same pipeline and session state, with no upstream. Prints per-request tokens, cache hits, "
        "estimated cost with prompt caching, needles kept and orphans. Use it to tune a config.",
    )
    rep.add_argument("trace", metavar="TRACE.json")
    rep.add_argument("--config", metavar="FILE", help="YAML config file (also RUYI_CONFIG)")
    rep.add_argument("--window", metavar="N", type=int, help="context window in tokens (default: the model's)")
    rep.add_argument("--model", metavar="NAME", help="model to count tokens for (default: the trace's)")
    rep.add_argument(
        "--cache-read-price",
        metavar="R",
        type=float,
        help="price of a cached token relative to an uncached one (default: pruning.cache_read_ratio, 0.1)",
    )
    rep.add_argument("--json", action="store_true", help="print JSON instead of a table")
    rep.add_argument(
        "--agent",
        metavar="NAME",
        help="lay requests out with this agent's notebook and anchors (read from the store "
        "under store.data_dir), its workspace and cards (default: no memory; rules and cards from the config)",
    )
    cfg = sub.add_parser("config", help="inspect configuration")
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="ACTION")
    check = cfg_sub.add_parser("check", help="validate a config file and print the effective config")
    check.add_argument("file", metavar="FILE")
    reference = cfg_sub.add_parser(
        "reference",
        help="print the configuration reference (docs/configuration.md), generated from the schema's field docs",
        description="Print every configuration key with its type, default and what it does, as committed in "
        "docs/configuration.md (generated from the docstrings of config/schema.py and each part's Options).",
    )
    reference.add_argument("--write", action="store_true", help="rewrite docs/configuration.md of this source tree instead of printing")
    store = sub.add_parser("store", help="maintain the store (sessions, decisions, refs under store.data_dir)")
    store_sub = store.add_subparsers(dest="store_command", metavar="ACTION")
    vacuum = store_sub.add_parser(
        "vacuum",
        help="remove sessions and refs unseen for sessions.ttl_days and give the space back",
        description="Remove sessions (with their decisions, refs, reports and audit records) unseen for sessions.ttl_days, "
        "then give the freed space back. Safe while Ruyi runs; Ruyi also does this every store.sweep_interval_hours.",
    )
    vacuum.add_argument("--config", metavar="FILE", help="YAML config file (also RUYI_CONFIG)")
    forget = store_sub.add_parser(
        "forget",
        help="remove everything stored for an agent, or for one of its sessions",
        description="Remove everything stored for an agent (its sessions and its sub-agents', agent/...) or for one of "
        "its sessions: chain index, decisions, refs (original tool outputs), reports, audit records; deleted content "
        "is overwritten and the write-ahead log emptied. Prints what was removed. A running Ruyi keeps what it holds "
        "in memory until restarted: for a session of a running Ruyi use DELETE /ruyi/v1/sessions/<id> instead.",
    )
    forget.add_argument("--agent", metavar="A", required=True, help="the agent id (as /ruyi/v1/sessions shows it)")
    forget.add_argument("--session", metavar="S", help="only this session of the agent")
    forget.add_argument("--config", metavar="FILE", help="YAML config file (also RUYI_CONFIG)")
    from proxy.api.command import add_parser as add_sessions_parser
    from proxy.keep.cards_command import add_parsers as add_cards_parsers
    from proxy.keep.command import add_parsers as add_memory_parsers
    from proxy.longctx.command import add_parsers
    from proxy.observe.command import add_parser as add_report_parser

    add_parsers(sub)
    add_memory_parsers(sub)
    add_cards_parsers(sub)
    add_report_parser(sub)
    add_sessions_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "replay":
            from proxy.replay.command import run_replay

            return run_replay(args, load_config(args.config, os.environ))
        if args.command == "config" and args.config_command == "check":
            print(effective_yaml(load_config(args.file, os.environ)), end="")
            return 0
        if args.command == "config" and args.config_command == "reference":
            from config.reference import run as run_reference

            return run_reference(args)
        if args.command == "store" and args.store_command == "vacuum":
            return _vacuum(args)
        if args.command == "store" and args.store_command == "forget":
            return _forget(args)
        if args.command in ("anchors", "memo") or (args.command == "session" and args.action == "show"):
            from proxy.keep.command import run

            return run(args)
        if args.command == "cards":
            from proxy.keep.cards_command import run as run_cards

            return run_cards(args)
        if args.command == "report":
            from proxy.observe.command import run as run_report

            return run_report(args)
        if args.command == "sessions":
            from proxy.api.command import run as run_sessions

            return run_sessions(args)
        if args.command in ("session", "archive"):
            from proxy.longctx.command import run

            return run(args, load_config(args.config, os.environ))
    except ConfigError as exc:
        print(f"ruyi: configuration error: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"ruyi: store error: {exc}", file=sys.stderr)
        return 2
    parser.print_help()
    return 2


def _serve(args: argparse.Namespace) -> int:
    from proxy.http.server import serve  # aiohttp and friends load only when serving

    overrides = {
        "default_route.url": args.upstream,
        "default_route.kind": args.upstream_kind,
        "server.host": args.host,
        "server.port": args.port,
        "server.workers": args.workers,
    }
    config = load_config(args.config, os.environ, overrides)
    if config.server.workers > 1 and config.store.backend == "memory":
        raise ConfigError(
            "--workers" if args.workers else "server.workers",
            "server.workers",
            f"{config.server.workers} workers need a store every process opens (store.backend sqlite or postgres); "
            "with memory each would keep its own sessions and decide differently",
        )
    return serve(config, ignored_variables(os.environ))


def _vacuum(args: argparse.Namespace) -> int:
    from memory.serialized import SerializedRegistry
    from memory.sessions import SessionRegistry
    from memory.store.backend import open_store
    from memory.sweep import sweep

    config = load_config(args.config, os.environ)
    store = open_store(config.store)
    if store is None:
        print("ruyi: store.backend is memory: nothing is kept, nothing to vacuum")
        return 0
    try:
        removed = sweep(SerializedRegistry(SessionRegistry(config.sessions, store=store)))
    finally:
        store.close()
    print(f"removed {removed} session(s) unseen for {config.sessions.ttl_days:g} days from {store.location}")
    return 0


def _forget(args: argparse.Namespace) -> int:
    from memory.sessions import SessionRegistry
    from memory.store.backend import open_store

    config = load_config(args.config, os.environ)
    store = open_store(config.store)
    if store is None:
        print("ruyi: store.backend is memory: nothing is kept, nothing to forget")
        return 0
    try:
        removed = SessionRegistry(config.sessions, store=store).forget(args.agent, args.session)
    finally:
        store.close()
    what = f"agent {args.agent}" + (f", session {args.session}" if args.session else "")
    if not any(removed.values()):
        print(f"nothing stored for {what} in {store.location}")
        return 0
    print(f"removed for {what} from {store.location}: " + ", ".join(f"{n} {table}" for table, n in removed.items() if n))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
