"""The four tools the model gets from Ruyi's MCP server: recall, notebook, anchors, cards.

Each a plain function of (the app's parts, the caller's agent, the call's arguments) → text, run in a worker thread. A refusal raises ``Refused`` with the reason the model reads."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from memory.anchors.anchor import AnchorError
from memory.anchors.render import full
from memory.notebook.sections import ENGLISH, SECTIONS, NotebookError
from redaction.redact import redact

RECALL_CHARS = 12_000
"""At most this much text per ``recall`` answer (about 3,000 tokens): a search returns its best hits within it."""
LIMIT_MAX = 20
REF = re.compile(r"^r[0-9a-f]{6,}$")
CHUNK = re.compile(r"^(?:ruyi:)?(c[0-9a-f]{6,})$")
ARCHIVE = re.compile(r"^archive:(\d+)$")
TURN = re.compile(r"^turn:(\d+)(?:-(\d+))?$")

TOOLS: dict[str, dict[str, Any]] = {
    "recall": {
        "description": "Get back what Ruyi took out of this conversation to keep it within the model's window. With id: the original "
        "text behind a placeholder's ref (r…), an archived chunk (ruyi:c…), the raw messages of an archive "
        "(archive:N) or of positions (turn:N or turn:N-M). With query: a search of what was archived in this "
        "session (summaries, then chunks, then raw messages), best first, each hit with its id.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "words to look for (identifiers, paths, error text)"},
                "id": {"type": "string", "description": "a ref (r…), chunk (ruyi:c…), archive:N or turn:N[-M]"},
                "session": {"type": "string", "description": "a session id (X-Ruyi-Session); default: the most recent one"},
                "limit": {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX, "description": "hits at most (default 5)"},
            },
            "additionalProperties": False,
        },
    },
    "notebook": {
        "description": "Your notebook (FastMemo): five sections that reach every prompt — self, user, environment, history, "
        "dynamic. read it; add one line to a section; edit or remove entry n (from 1, as read) that you wrote. "
        "At most 10 one-line entries a section; a person's entries are never changed.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["read", "add", "edit", "remove"]},
                "section": {"type": "string", "description": "self, user, environment, history or dynamic (or 自我感知…)"},
                "text": {"type": "string", "description": "one line (add, edit)"},
                "n": {"type": "integer", "minimum": 1, "description": "the entry's number (edit, remove)"},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
    },
    "anchors": {
        "description": "Decisions, constraints, interfaces and problems on record, cited as [D001]. list them (filter by type or "
        "status), show one in full, or propose a new one (it stays pending until a person accepts it).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["list", "show", "propose"]},
                "id": {"type": "string", "description": "an anchor id such as D001 (show)"},
                "type": {"type": "string", "description": "D, C, I, P, M, U, CK or DN (list, propose)"},
                "status": {"type": "string", "description": "active, pending, superseded… (list)"},
                "title": {"type": "string", "description": "one line (propose)"},
                "fields": {"type": "object", "description": 'the record\'s fields, e.g. {"decision": …, "rationale": …} (propose)'},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
    },
    "cards": {
        "description": "Knowledge cards of this project and this agent that match some words: how-tos, conventions, pitfalls.",
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX}},
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}
"""Each tool's description and JSON schema, as ``tools/list`` shows them."""


class Refused(Exception):
    """A call the tool will not do, with the reason (an MCP tool error the model reads)."""


@dataclass(frozen=True)
class Parts:
    """What the tools read and write: the session registry, the keeper (notebook, anchors, cards), long-context recall."""

    sessions: Any
    keeper: Any
    recall: Any | None


def _limit(args: dict[str, Any], default: int = 5) -> int:
    value = args.get("limit", default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= LIMIT_MAX:
        raise Refused(f"limit is a whole number from 1 to {LIMIT_MAX}")
    return value


def _bounded(text: str, limit: int = RECALL_CHARS) -> str:
    text = redact(text)
    return text if len(text) <= limit else text[:limit] + f"\n[… {len(text) - limit} more characters not shown: ask for less, by id]"


def session_of(parts: Parts, agent: str, named: Any) -> str:
    """The session a call concerns: the one named (of this agent), else the agent's most recent."""
    if named is not None:
        if not isinstance(named, str) or parts.sessions.get(agent, named) is None:
            raise Refused(f"this agent has no session {named!r}")
        return named
    found = parts.sessions.list(agent)
    if not found:
        raise Refused("this agent has no session yet: nothing was archived")
    return str(found[0].session_id)


def recall(parts: Parts, agent: str, args: dict[str, Any]) -> str:
    given, query = args.get("id"), args.get("query")
    if (given is None) == (query is None):
        raise Refused("give either id (what a placeholder or archive names) or query (words to look for)")
    if given is not None:
        return _by_id(parts, agent, str(given).strip(), args.get("session"))
    if not isinstance(query, str) or not query.strip():
        raise Refused("query is some words to look for")
    if parts.recall is None:
        raise Refused("this Ruyi keeps no archives (s0 is off)")
    sid, limit = session_of(parts, agent, args.get("session")), _limit(args)
    out: list[str] = []
    words = {w.lower() for w in re.findall(r"[\w./-]{3,}", query)}
    for a in parts.recall.archives(agent, sid):  # S1: the archives' summaries that name the words
        summary = str(a.get("summary") or "")
        if words and any(w in summary.lower() for w in words):
            out.append(f"[archive:{a.get('number')}] summary of messages {a.get('head')}–{a.get('end')}:\n{summary}")
    for kind in ("chunk", "turn"):  # S2 chunks, then S0 raw messages
        for hit in parts.recall.search(agent, sid, query, limit, kinds=(kind,)):
            row = hit.row
            if kind == "chunk":
                out.append(f"[ruyi:{row.get('chunk_id')}] messages {row.get('first')}–{row.get('last')}:\n{row.get('summary')}")
            else:
                message = row.get("message") or {}
                out.append(f"[turn:{row.get('turn')}] {message.get('role')}:\n{_text(message)}")
    if not out:
        return f"nothing archived in session {sid} matches {query!r}"
    return _bounded("\n\n".join(out[: limit * 3]))


def _by_id(parts: Parts, agent: str, given: str, named: Any) -> str:
    if REF.match(given):
        original = parts.sessions.find_ref(agent, given)
        if original is None:
            raise Refused(f"no ref {given} for this agent")
        return _bounded(original)
    if parts.recall is None:
        raise Refused("this Ruyi keeps no archives (s0 is off)")
    if (m := CHUNK.match(given)) is not None:
        rows = parts.recall.chunk(agent, m.group(1))
        if not rows:
            raise Refused(f"no chunk {given} for this agent")
        return _bounded(f"[ruyi:{rows[0]['chunk_id']}] messages {rows[0]['first']}–{rows[0]['last']}:\n{rows[0]['summary']}")
    sid = session_of(parts, agent, named)
    if (m := ARCHIVE.match(given)) is not None:
        chosen = [a for a in parts.recall.archives(agent, sid) if a.get("number") == int(m.group(1))]
        if not chosen:
            raise Refused(f"session {sid} has no archive {m.group(1)}")
        first, last = chosen[-1]["head"], chosen[-1]["end"]
    elif (m := TURN.match(given)) is not None:
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
    else:
        raise Refused(f"{given!r} is no id Ruyi gave: a ref (r…), a chunk (ruyi:c…), archive:N or turn:N[-M]")
    turns = parts.recall.turns(agent, sid, first, last)
    if not turns:
        raise Refused(f"session {sid} keeps no raw messages {first}–{last}")
    return _bounded("\n\n".join(f"[turn:{t['turn']}] {(t['message'] or {}).get('role')}:\n{_text(t['message'] or {})}" for t in turns))


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or () if isinstance(p, dict)]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.append(f"→ {fn.get('name')}({fn.get('arguments')})")
    return "\n".join(p for p in parts if p)


def notebook(parts: Parts, agent: str, args: dict[str, Any]) -> str:
    action, nb = args.get("action"), parts.keeper.notebook
    try:
        if action == "read":
            return _notebook_text(nb.current(agent))
        section = args.get("section")
        if not isinstance(section, str):
            raise Refused(f"{action} needs a section: self, user, environment, history or dynamic")
        if action == "add":
            after, notes = nb.add(agent, section, args.get("text"), "model")
        elif action in ("edit", "remove"):
            n = args.get("n")
            if not isinstance(n, int) or isinstance(n, bool):
                raise Refused(f"{action} needs n, the entry's number as read (from 1)")
            after, notes = nb.change(agent, section, n, args.get("text") if action == "edit" else None)
        else:
            raise Refused("action is read, add, edit or remove")
    except NotebookError as exc:
        raise Refused(str(exc)) from None
    said = f"done: version {after.version}" + (f" ({'; '.join(notes)})" if notes else "")
    return said + "\n\n" + _notebook_text(after)


def _notebook_text(nb: Any) -> str:
    lines = [f"notebook version {nb.version}"]
    for name, title in SECTIONS.items():
        entries = nb.body.get(name, [])
        lines.append(f"## {ENGLISH[name]} ({title}) {len(entries)}/10")
        lines += [
            f"{i}. {e['text']}" + ("" if e.get("by") in ("model", "ruyi", "compacted") else f"  [{e.get('by')}'s]") for i, e in enumerate(entries, 1)
        ] or ["(empty)"]
    return redact("\n".join(lines))


def anchors(parts: Parts, agent: str, args: dict[str, Any]) -> str:
    action, store = args.get("action"), parts.keeper.anchors
    try:
        if action == "list":
            found = store.list(agent, args.get("status"), args.get("type"))
            return redact("\n".join(f"{a.anchor_id} [{a.status}] {a.title}" for a in found)) or "no anchors"
        if action == "show":
            anchor = store.get(agent, str(args.get("id") or ""))
            if anchor is None:
                raise Refused(f"this agent has no anchor {args.get('id')}")
            return redact(full(anchor))
        if action == "propose":
            body = {"type": args.get("type"), "title": args.get("title"), "fields": args.get("fields") or {}, "status": "pending"}
            anchor = store.create(agent, body, "model")
            return f"proposed {anchor.anchor_id} (pending: it counts once a person accepts it)\n\n{redact(full(anchor))}"
    except AnchorError as exc:
        raise Refused(str(exc)) from None
    raise Refused("action is list, show or propose")


def cards(parts: Parts, agent: str, args: dict[str, Any]) -> str:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise Refused("query is some words to look for")
    _, found, _ = parts.keeper.organizer.search(agent, query, _limit(args))
    if not found:
        return f"no card matches {query!r}"
    return _bounded("\n\n".join(json.dumps(c.view(with_body=True), ensure_ascii=False) for c in found))


CALLS = {"recall": recall, "notebook": notebook, "anchors": anchors, "cards": cards}
