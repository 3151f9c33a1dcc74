"""``ruyi session archive|prune|reset`` (``show`` is proxy/keep/command.py's) and ``ruyi archive list|search|show``: a running Ruyi's archive API from a shell."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from config.schema import Config
from proxy.keep.clients import add_url

TIMEOUT_S = 30


def add_parsers(sub: Any) -> None:
    """The two commands' parsers, added to ``ruyi``'s subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    add_url(common, "the running Ruyi (default: http://127.0.0.1:<server.port>)")
    common.add_argument("--agent", metavar="NAME", help="the agent the session belongs to (X-Ruyi-Agent)")
    common.add_argument("--key", metavar="KEY", help="the admin key, when auth.admin_key or auth.keys is set (X-Ruyi-Key)")
    common.add_argument("--config", metavar="FILE", help="YAML config file (also RUYI_CONFIG)")
    session = sub.add_parser(
        "session",
        parents=[common],
        help="act on a session's next request (archive now, a pruning batch now, reset), or show its form",
        description="Ask a running Ruyi to archive a session now, run a pruning batch now, or reset it "
        "(forget its decisions and archives: its next request goes as sent). Done by the session's next request. "
        "show: the session's form (seed 000), from the store's file, or from the running Ruyi with --url.",
    )
    session.add_argument("action", choices=("archive", "prune", "reset", "show"))
    session.add_argument("session_id", metavar="SESSION")
    session.add_argument("--form", choices=("compact", "normal", "expanded"), default="compact", help="show: which form")
    session.add_argument("--json", action="store_true", help="show: print the API's JSON")
    archive = sub.add_parser(
        "archive",
        parents=[common],
        help="read and search a session's archives",
        description="A session's archives (S1, forms) and S2 chunks; search them, or show one archive's forms.",
    )
    archive.add_argument("action", choices=("list", "search", "show"))
    archive.add_argument("session_id", metavar="SESSION")
    archive.add_argument("words", nargs="*", help="search: the words to look for; show: the archive's number (and --expanded)")
    archive.add_argument("--expanded", action="store_true", help="show: the raw turns the archive covers")


def run(args: argparse.Namespace, config: Config) -> int:
    base = (args.url or f"http://127.0.0.1:{config.server.port}").rstrip("/")
    path = f"/ruyi/v1/sessions/{urllib.parse.quote(args.session_id, safe='')}"
    headers = {k: v for k, v in (("X-Ruyi-Agent", args.agent), ("X-Ruyi-Key", args.key)) if v}
    if args.command == "session":
        status, body = _call("POST", f"{base}{path}/{args.action}", headers)
    elif args.action == "search":
        if not args.words:
            print("ruyi: archive search needs words to look for", file=sys.stderr)
            return 2
        status, body = _call("GET", f"{base}{path}/archive?" + urllib.parse.urlencode({"q": " ".join(args.words)}), headers)
    elif args.action == "show":
        query = {"number": args.words[0] if args.words else "1", **({"form": "expanded"} if args.expanded else {})}
        status, body = _call("GET", f"{base}{path}/archive?" + urllib.parse.urlencode(query), headers)
    else:
        status, body = _call("GET", f"{base}{path}/archive", headers)
    if status is None:
        print(f"ruyi: cannot reach Ruyi at {base}: {body}", file=sys.stderr)
        return 1
    if status >= 400:
        error = body.get("error") if isinstance(body, dict) else body
        print(f"ruyi: {status}: {error.get('message') if isinstance(error, dict) else error}", file=sys.stderr)
        return 1
    print(_readable(args, body))
    return 0


def _call(method: str, url: str, headers: dict[str, str]) -> tuple[int | None, Any]:
    request = urllib.request.Request(url, method=method, headers=headers, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as resp:  # a URL the user gave
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {"error": exc.reason}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, getattr(exc, "reason", exc)


def _readable(args: argparse.Namespace, body: dict[str, Any]) -> str:
    if args.command == "session":
        return f"session {body['session_id']}: its next request will {'go as sent' if body['next_request'] == 'pass' else body['next_request']}"
    if args.action == "search":
        lines = [f"{len(body['hits'])} match(es) for {body['q']!r}"]
        for h in body["hits"]:
            where = f"ruyi:{h['chunk_id']} · messages {h.get('first')}–{h.get('last')}" if h["kind"] == "chunk" else f"turn {h.get('turn')}"
            text = h.get("summary") or json.dumps((h.get("message") or {}).get("content"), ensure_ascii=False)
            lines += ["", f"## {where} ({h['matched']} terms)", str(text)[:2000]]
        return "\n".join(lines)
    if args.action == "show":
        if isinstance(body.get("turns"), list):
            return "\n\n".join(f"### {t['turn']} {t['message'].get('role')}\n{t['message'].get('content') or ''}" for t in body["turns"])
        return f"## Archive {body['number']} · messages {body['head']}–{body['end']} · {body['reason']}\n\n{body['forms']['normal']}"
    lines = [f"session {body['session_id']}: {len(body['archives'])} archive(s), {len(body['chunks'])} chunk(s)"]
    lines += [
        f"- archive {a['number']}: messages {a['head']}–{a['end']} ({a['reason']}, {a['tokens_before']:,} → {a['tokens_after']:,} tokens)"
        for a in body["archives"]
    ]
    lines += [f"- ruyi:{c['chunk_id']} · {c['first']}–{c['last']} · {c['line']}" for c in body["chunks"]]
    return "\n".join(lines)
