"""``ruyi sessions``: a running Ruyi's agents (sessions, last activity), or one agent's sessions, from a shell."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import urllib.parse
from typing import Any

from config.load import load_config
from proxy.keep.clients import add_url
from proxy.longctx.command import _call


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sessions",
        help="list the agents Ruyi knows, or one agent's sessions",
        description="Without --agent: every agent with its session count and last activity (GET /ruyi/v1/agents: "
        "the admin key, or with no keys a local caller). With --agent: that agent's sessions, most recent first. "
        "A client that sends no X-Ruyi-Agent lands in k-<hash of its API key>, or `default` when it sends no key.",
    )
    add_url(p, "the running Ruyi (default: http://127.0.0.1:<server.port>)")
    p.add_argument("--agent", metavar="NAME", help="list this agent's sessions (X-Ruyi-Agent)")
    p.add_argument("--key", metavar="KEY", help="the admin key, when auth.admin_key or auth.keys is set (X-Ruyi-Key)")
    p.add_argument("--config", metavar="FILE", help="YAML config file (also RUYI_CONFIG)")
    p.add_argument("--json", action="store_true", help="print the API's JSON")


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, os.environ)
    base = (args.url or f"http://127.0.0.1:{config.server.port}").rstrip("/")
    headers = {k: v for k, v in (("X-Ruyi-Agent", args.agent), ("X-Ruyi-Key", args.key)) if v}
    path = "/ruyi/v1/sessions" if args.agent else "/ruyi/v1/agents"
    status, body = _call("GET", base + urllib.parse.quote(path), headers)
    if status is None:
        print(f"ruyi: cannot reach Ruyi at {base}: {body}", file=sys.stderr)
        return 1
    if status >= 400:
        error = body.get("error") if isinstance(body, dict) else body
        print(f"ruyi: {status}: {error.get('message') if isinstance(error, dict) else error}", file=sys.stderr)
        return 1
    if args.json:
        import json

        print(json.dumps(body, indent=2))
    elif args.agent:
        print(f"agent {body['agent_id']}: {len(body['sessions'])} session(s)")
        for s in body["sessions"]:
            parent = f" · child of {s['parent_id']}" if s.get("parent_id") else ""
            print(f"- {s['session_id']} · {s['requests']} request(s) · {s.get('tier')} · last {_when(s['last_seen'])}{parent}")
    else:
        print(f"{len(body['agents'])} agent(s)")
        for a in body["agents"]:
            print(f"- {a['agent_id']} · {a['sessions']} session(s) · last {_when(a['last_seen'])}")
    return 0


def _when(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).astimezone().isoformat(timespec="seconds")
