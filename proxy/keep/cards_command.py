"""``ruyi cards …``: search an agent's knowledge cards, its draft cards (accept, reject), and the workspace it gets, on the store or a running Ruyi."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from proxy.keep.clients import REFUSED, Target
from proxy.keep.command import _target, open_target

STATUSES = ("proposed", "accepted", "rejected")


def add_parsers(sub: Any) -> None:
    cards = sub.add_parser(
        "cards",
        help="an agent's knowledge cards (Lite RAG) and its draft cards",
        description="Knowledge cards are Markdown files with YAML front matter in the agent's project folder "
        "(cards.project_dir, or agents.<id>.cards_dir) and the global one (cards.global_dir). Archives propose "
        "draft cards; a person accepts them (the file is written) or rejects them (never proposed again).",
    )
    c_sub = cards.add_subparsers(dest="cards_command", metavar="ACTION")
    search = c_sub.add_parser("search", help="the cards matching WORDS, most relevant first")
    search.add_argument("words", nargs="+", metavar="WORDS")
    listing = c_sub.add_parser("list", help="every card of the agent, and the files skipped with why")
    drafts = c_sub.add_parser("drafts", help="the agent's draft cards")
    drafts.add_argument("--status", choices=STATUSES)
    show = c_sub.add_parser("show", help="one draft card in full")
    accept = c_sub.add_parser("accept", help="accept a draft: its card file is written in the agent's project cards folder")
    reject = c_sub.add_parser("reject", help="reject a draft: it is never proposed again")
    for p in (show, accept, reject):
        p.add_argument("id", type=int, help="the draft's number (ruyi cards drafts lists them)")
    rules = c_sub.add_parser("workspace", help="what the agent's prompts may get: workspace root, card folders, project rules")
    for p in (search, listing, drafts, show, accept, reject, rules):
        _target(p)


def run(args: argparse.Namespace) -> int:
    """Run one ``cards`` action; exit 1 with a message when refused."""
    action = args.cards_command
    if action is None:
        print("ruyi cards: name an action (see ruyi cards --help)", file=sys.stderr)
        return 2
    try:
        target = open_target(args)
        try:
            status, answer = _act(target, action, args)
        finally:
            target.close()
    except REFUSED as exc:
        print(f"ruyi: {exc}", file=sys.stderr)
        return 1
    if status == 404 or answer is None:
        print(f"ruyi: this agent has no draft {args.id} (ruyi cards drafts lists them)", file=sys.stderr)
        return 1
    _print(args, action, answer)
    return 0


def _act(target: Target, action: str, args: argparse.Namespace) -> tuple[int, Any]:
    if action == "search":
        return target.cards_search(" ".join(args.words))
    if action == "list":
        return target.cards_search(None)
    if action in ("drafts", "show"):
        status, answer = target.cards_drafts(getattr(args, "status", None))
        if action == "show":
            answer = next((d for d in answer["drafts"] if d["id"] == args.id), None)
        return status, answer
    if action == "workspace":
        return target.workspace()
    return target.cards_judge(args.id, action == "accept")


def _print(args: argparse.Namespace, action: str, answer: Any) -> None:
    if args.json:
        print(json.dumps(answer, ensure_ascii=False, indent=2))
        return
    if action in ("search", "list"):
        for card in answer["cards"]:
            score = f"{card['score']:>6.2f}  " if action == "search" else ""
            print(f"{score}{card['title']}  [{', '.join(card['tags'])}]  {card['path']}")
        if not answer["cards"]:
            print("no card matches" if action == "search" else "no cards", file=sys.stderr)
        for skipped in answer["skipped"]:
            print(f"skipped {skipped['path']}: {skipped['reason']}", file=sys.stderr)
    elif action == "drafts":
        for d in answer["drafts"]:
            print(f"{d['id']:>4}  {d['status']:<8}  {d['title']}" + (f"  → {d['path']}" if d["path"] else ""))
    elif action == "show":
        print(f"# {answer['title']}  ({answer['status']}; tags: {', '.join(answer['tags'])})\n\n{answer['body']}", end="")
    elif action == "workspace":
        print(f"workspace root: {answer['workspace_root'] or '(none: no project rules)'}")
        print("card folders: " + ", ".join(answer["card_dirs"]))
        rules = answer["rules"]
        print(f"rules: {len(rules['files'])} file(s), {rules['chars']} characters" + (" (cut)" if rules["cut"] else ""))
        for problem in rules["problems"]:
            print(f"problem: {problem}", file=sys.stderr)
        if rules["text"]:
            print("\n" + rules["text"])
    else:
        draft = answer["draft"]
        print(f"draft {draft['id']} {draft['status']}" + (f": {draft['path']}" if draft["path"] else ""))
