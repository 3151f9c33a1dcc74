"""``ruyi anchors …``, ``ruyi memo …`` and ``ruyi session show``: an agent's anchors, notebook and forms from a shell, on the store or a running Ruyi."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from typing import Any

from config.load import load_config
from proxy.keep.clients import REFUSED, Answer, CommandError, Local, Remote, Target, add_url

TARGET_HELP = "act on a running Ruyi's API at URL (default: the store under store.data_dir directly)"


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", metavar="A", help="the agent (default: 'default'; with --url, X-Ruyi-Agent)")
    add_url(parser, TARGET_HELP)
    parser.add_argument("--key", metavar="K", help="with --url: X-Ruyi-Key, a client key (its agent) or the admin key (also RUYI_KEY)")
    parser.add_argument("--config", metavar="FILE", help="YAML config file (also RUYI_CONFIG)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")


def add_parsers(sub: Any) -> None:
    anchors = sub.add_parser(
        "anchors",
        help="an agent's anchors (ADR records)",
        description="Add, list, show, edit, obsolete and "
        "export an agent's anchors (types D C I P M U CK DN; an active one needs decision, alternatives, why, "
        "impact, verification, rollback).",
    )
    a_sub = anchors.add_subparsers(dest="anchors_command", metavar="ACTION")
    add = a_sub.add_parser("add", help="add an anchor (active unless --pending)")
    add.add_argument("--type", required=True, help="D, C, I, P, M, U, CK or DN")
    add.add_argument("--title", required=True, help="one line naming it")
    add.add_argument("--field", action="append", default=[], metavar="NAME=TEXT", help="a field (repeat): why=…, alternatives=…, …")
    add.add_argument("--pending", action="store_true", help="keep it pending (the write rule applies when it is made active)")
    listing = a_sub.add_parser("list", help="list anchors")
    listing.add_argument("--status", choices=("active", "pending", "obsolete"))
    listing.add_argument("--type", help="D, C, I, P, M, U, CK or DN")
    show = a_sub.add_parser("show", help="one anchor in full (--compact: the seed's three or four lines)")
    show.add_argument("id")
    show.add_argument("--compact", action="store_true")
    edit = a_sub.add_parser("edit", help="change an anchor's title, fields or status")
    edit.add_argument("id")
    edit.add_argument("--title")
    edit.add_argument("--field", action="append", default=[], metavar="NAME=TEXT", help="set a field (NAME= removes it)")
    edit.add_argument("--status", choices=("active", "pending", "obsolete"))
    obsolete = a_sub.add_parser("obsolete", help="mark an anchor obsolete")
    obsolete.add_argument("id")
    export = a_sub.add_parser("export", help="print anchors.md")
    for p in (add, listing, show, edit, obsolete, export):
        _target(p)
    memo = sub.add_parser(
        "memo",
        help="an agent's FastMemo notebook",
        description="The notebook's five sections (self 自我感知, user "
        "用户感知, environment 环境感知, history 历史感知, dynamic 动态context池; any alias), one-line entries, at "
        "most 10 each; every change a new version.",
    )
    m_sub = memo.add_subparsers(dest="memo_command", metavar="ACTION")
    m_show = m_sub.add_parser("show", help="print the notebook (markdown)")
    m_add = m_sub.add_parser("add", help="add an entry to a section")
    m_add.add_argument("section")
    m_add.add_argument("text")
    m_set = m_sub.add_parser("set", help="replace a section with these entries")
    m_set.add_argument("section")
    m_set.add_argument("entries", nargs="*")
    m_compact = m_sub.add_parser("compact", help="compact now (the summarizer when configured, else the fallback)")
    m_versions = m_sub.add_parser("versions", help="list the notebook's versions")
    m_rollback = m_sub.add_parser("rollback", help="make a new version equal to an older one")
    m_rollback.add_argument("version", type=int)
    m_accept = m_sub.add_parser("accept", help="accept a proposed entry")
    m_reject = m_sub.add_parser("reject", help="reject a proposed entry (never proposed again)")
    for p in (m_accept, m_reject):
        p.add_argument("section")
        p.add_argument("index", type=int, help="its place in the section, from 0")
    for p in (m_show, m_add, m_set, m_compact, m_versions, m_rollback, m_accept, m_reject):
        _target(p)
        p.add_argument("--session", metavar="ID", help="a sub-agent's own notebook: its session id (the X-Ruyi-Session of its answers)")


def _fields(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise CommandError(f"--field takes NAME=TEXT, got {pair!r}")
        out[name] = value
    return out


def open_target(args: argparse.Namespace) -> Target:
    key = getattr(args, "key", None) or os.environ.get("RUYI_KEY")
    session = getattr(args, "session", None) if args.command == "memo" else None
    if args.url:
        return Remote(args.url, args.agent, key, session)
    config = load_config(args.config, os.environ)
    from memory.cards.workspace import for_agent

    return Local(config.store, args.agent or "default", config.notebook, config.summarizer, session, functools.partial(for_agent, config))


def run(args: argparse.Namespace) -> int:
    """Run one ``anchors`` or ``memo`` action; exit 1 with a message when refused."""
    action = {"anchors": "anchors_command", "memo": "memo_command", "session": "action"}[args.command]
    action = getattr(args, action)
    if args.command == "session":  # `ruyi session show` shares the session command's options
        args.id = args.session_id
    if action is None:
        print(f"ruyi {args.command}: name an action (see ruyi {args.command} --help)", file=sys.stderr)
        return 2
    try:
        target = open_target(args)
        try:
            status, answer = _act(target, args.command, action, args)
        finally:
            target.close()
    except REFUSED as exc:
        print(f"ruyi: {exc}", file=sys.stderr)
        return 1
    if status == 404:
        print(f"ruyi: not found for this agent: {getattr(args, 'id', None) or getattr(args, 'version', None) or 'that entry'}", file=sys.stderr)
        return 1
    _print(args, action, answer)
    return 0 if status < 400 else 1


def _act(target: Target, command: str, action: str, args: argparse.Namespace) -> Answer:
    if command == "session":
        return target.session_form(args.id, args.form)
    if command == "anchors":
        if action == "add":
            body = {"type": args.type, "title": args.title, "fields": _fields(args.field), **({"status": "pending"} if args.pending else {})}
            return target.anchors_create(body)
        if action == "list":
            return target.anchors_list(args.status, args.type)
        if action == "show":
            return target.anchors_get(args.id)
        if action in ("edit", "obsolete"):
            patch = {"status": "obsolete"} if action == "obsolete" else {k: v for k, v in (("title", args.title), ("status", args.status)) if v}
            if action == "edit" and args.field:
                patch["fields"] = _fields(args.field)
            return target.anchors_patch(args.id, patch)
        return target.anchors_export()
    if action == "show":
        return target.memo_get(not args.json)
    if action == "compact":
        return target.memo_compact()
    if action == "versions":
        return target.memo_versions()
    if action == "add":
        return target.memo_add(args.section, args.text)
    if action == "set":
        return target.memo_put(args.section, args.entries)
    if action == "rollback":
        return target.memo_rollback(args.version)
    return target.memo_judge(args.section, args.index, action == "accept")


def _print(args: argparse.Namespace, action: str, answer: Any) -> None:
    if isinstance(answer, str):
        print(answer, end="" if answer.endswith("\n") else "\n")
    elif args.json:
        print(json.dumps(answer, ensure_ascii=False, indent=2))
    elif args.command == "anchors" and action == "list":
        for a in answer["anchors"]:
            print(f"[{a['id']}] {a['title']}  ({a['status']}" + (f"; lacks {', '.join(a['missing'])}" if a["missing"] else "") + ")")
    elif args.command == "anchors":
        anchor = answer.get("anchor", answer)
        print(anchor["compact"] + "\n" if getattr(args, "compact", False) else anchor["full"], end="")
        if action == "add":
            print(f"added {answer['id']}", file=sys.stderr)
    elif action == "versions":
        for v in answer["versions"]:
            print(f"{v['version']}  {v['reason']}  " + " ".join(f"{k}:{n}" for k, n in v["entries"].items()))
    else:
        for note in answer.get("notes") or ():
            print(f"note: {note}", file=sys.stderr)
        print(
            f"version {answer.get('version')}"
            + (f" ({answer['how']})" if answer.get("how") else "")
            + (" — compaction pending" if answer.get("pending") else "")
        )
