"""Where ``ruyi anchors`` and ``ruyi memo`` act: on the store directly, or on a running Ruyi's API (``--url URL``)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from memory.anchors.anchor import AnchorError
from memory.anchors.render import compact, export, full
from memory.cards.sqlite_drafts import DraftError
from memory.cards.workspace import AgentWorkspace
from memory.notebook.render import injected, markdown
from memory.notebook.sections import ENGLISH, SECTIONS, NotebookError
from memory.notebook.sqlite_notebook import Notebook
from memory.store.backend import open_database, open_store
from memory.store.options import StoreOptions
from proxy.keep.keeper import Keeper
from proxy.keep.options import NotebookOptions
from summaries.llm import LLMSummarizer
from summaries.options import SummarizerOptions

Answer = tuple[int, Any]
"""An HTTP-like status and the JSON (or markdown text) the API would answer."""


class CommandError(Exception):
    """What the command says on stderr before exiting 1."""


class _DeprecatedServer(argparse.Action):
    """``--server URL``, the old name of ``--url``: still works, says so on stderr."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        print("ruyi: --server is deprecated, use --url", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_url(parser: argparse.ArgumentParser, help: str) -> None:
    """The one flag naming a running Ruyi across the CLI: ``--url URL`` (``--server``, hidden and deprecated, the same)."""
    parser.add_argument("--url", metavar="URL", help=help)
    parser.add_argument("--server", dest="url", metavar="URL", action=_DeprecatedServer, help=argparse.SUPPRESS)


def _notebook(nb: Notebook, notes: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"agent_id": nb.agent_id, "scope": "agent" if nb.session_id is None else "sub-agent",
            **({"session_id": nb.session_id} if nb.session_id is not None else {}),
            "version": nb.version, "pending": nb.pending, "counts": nb.counts(), "notes": list(notes),
            "sections": {name: {"title": SECTIONS[name], "english": ENGLISH[name], "entries": nb.body[name]} for name in SECTIONS},
            "injected": injected(nb.body)}


class Local:
    """The store's file itself (safe while Ruyi runs: each change one transaction; the server sees it on its next read)."""

    def __init__(self, store: StoreOptions, agent: str, notebook: NotebookOptions, summarizer: SummarizerOptions,
                 session: str | None = None, workspaces: Callable[[str], AgentWorkspace] | None = None) -> None:
        self.keeper = Keeper(open_database(store), notebook, LLMSummarizer(summarizer) if summarizer.model else None,
                             workspaces=workspaces)
        self.agent = agent
        self.store = store
        self.child = self._child(session) if session is not None else None
        """The sub-agent session whose own notebook ``memo`` acts on (None: the agent's)."""

    def _child(self, session: str) -> str | None:
        """A session Ruyi knows as a sub-agent of this agent (its own notebook), else None for one of the agent's
        sessions (the agent's notebook); an unknown session is refused, as the API refuses it."""
        if self.keeper.sessions.snapshot(self.agent, session) is not None:
            return session
        store = open_store(self.store)
        if store is not None:
            try:
                known = store.load_session(self.agent, session) is not None
            finally:
                store.close()
            if known:
                return None
        raise CommandError(f"this agent has no session {session!r} (GET /ruyi/v1/sessions lists them)")

    def close(self) -> None:
        self.keeper.close()

    def call(self, method: str, what: str, *args: Any) -> Answer:
        try:
            return getattr(self, what)(*args)
        except (AnchorError, NotebookError, DraftError) as exc:
            raise CommandError(str(exc)) from None

    def anchors_create(self, body: dict[str, Any]) -> Answer:
        a = self.keeper.anchors.create(self.agent, body)
        return 201, {"id": a.anchor_id, "anchor": {**a.view(), "compact": compact(a), "full": full(a)}}

    def anchors_list(self, status: str | None, kind: str | None) -> Answer:
        return 200, {"agent_id": self.agent, "anchors": [a.view() for a in self.keeper.anchors.list(self.agent, status, kind)]}

    def anchors_get(self, anchor_id: str) -> Answer:
        a = self.keeper.anchors.get(self.agent, anchor_id)
        return (404, None) if a is None else (200, {**a.view(), "compact": compact(a), "full": full(a)})

    def anchors_patch(self, anchor_id: str, body: dict[str, Any]) -> Answer:
        a = self.keeper.anchors.update(self.agent, anchor_id, body)
        return (404, None) if a is None else (200, {**a.view(), "compact": compact(a), "full": full(a)})

    def anchors_export(self) -> Answer:
        return 200, export(self.keeper.anchors.list(self.agent), self.agent)

    def memo_get(self, as_markdown: bool) -> Answer:
        nb = self.keeper.notebook.current(self.agent, self.child)
        return 200, markdown(nb.body, nb.pending, nb.version) if as_markdown else _notebook(nb)

    def memo_add(self, section: str, text: str) -> Answer:
        return 201, _notebook(*self.keeper.notebook.add(self.agent, section, text, "person", self.child))

    def memo_put(self, section: str, entries: list[str]) -> Answer:
        return 200, _notebook(*self.keeper.notebook.put(self.agent, section, entries, self.child))

    def memo_compact(self) -> Answer:
        after, how = asyncio.run(self.keeper.compact(self.agent, self.child))
        return (200, {**_notebook(after), "how": how}) if after is not None else (502, {"how": how})

    def memo_versions(self) -> Answer:
        return 200, {"agent_id": self.agent, "versions": self.keeper.notebook.versions(self.agent, self.child)}

    def memo_rollback(self, version: int) -> Answer:
        nb = self.keeper.notebook.rollback(self.agent, version, self.child)
        return (404, None) if nb is None else (200, _notebook(nb))

    def session_form(self, session_id: str, form: str) -> Answer:
        """A session's form from the store's file: its record and reports beside what the agent's memory holds."""
        from memory.forms.refine import basis
        from memory.forms.render import build
        store = open_store(self.store)
        if store is None:
            raise CommandError("store.backend is memory: no session outlives its Ruyi (use --url)")
        try:
            stored = store.load_session(self.agent, session_id)
            reports = store.reports(self.agent, session_id, 1000) if stored is not None else []
        finally:
            store.close()
        if stored is None:
            return 404, None
        record = stored.record
        session = {"requests": record.requests, "tier": record.tier, "tokens": record.prompt_tokens, "window": record.window}
        state = dataclasses.replace(self.keeper.state(self.agent, session_id), session=session, reports=_summary(reports))
        text = build(state, form)  # or the summarizer's refinement of this very state, when a running Ruyi made one
        return 200, self.keeper.sessions.refined(self.agent, session_id, form, basis(text)) or text

    def memo_judge(self, section: str, index: int, accept: bool) -> Answer:
        nb = self.keeper.notebook.judge(self.agent, section, index, accept, self.child)
        return (404, None) if nb is None else (200, _notebook(nb))

    def cards_search(self, query: dict[str, str | None]) -> Answer:
        keywords, found, skipped = self.keeper.organizer.search(self.agent, query.get("q"))
        return 200, {"agent_id": self.agent, "query": query.get("q"), "keywords": keywords,
                     "cards": [c.view(with_body=bool(query.get("q"))) for c in found],
                     "skipped": [{"path": str(p), "reason": why} for p, why in sorted(skipped.items())]}

    def cards_drafts(self, query: dict[str, str | None]) -> Answer:
        return 200, {"agent_id": self.agent, "drafts": [d.view() for d in self.keeper.organizer.drafts.list(self.agent, query.get("status"))]}

    def cards_judge(self, draft_id: int, verdict: str) -> Answer:
        act = self.keeper.organizer.accept if verdict == "accept" else self.keeper.organizer.reject
        done = act(self.agent, draft_id)
        return (404, None) if done is None else (200, {"agent_id": self.agent, "draft": done.view()})

    def workspace(self) -> Answer:
        ws, rules = self.keeper.organizer.rules(self.agent)
        return 200, {"agent_id": self.agent, "workspace_root": str(ws.workspace_root) if ws.workspace_root else None,
                     "card_dirs": [str(f) for f in ws.card_dirs], "rule_names": list(ws.rule_names),
                     "rules": {"files": [str(f) for f in rules.files], "chars": rules.chars, "cut": rules.cut,
                               "problems": list(rules.problems), "text": rules.text}}


ROUTES: dict[str, tuple[str, str]] = {
    "anchors_create": ("POST", "/anchors"), "anchors_list": ("GET", "/anchors"), "anchors_get": ("GET", "/anchors/{0}"),
    "anchors_patch": ("PATCH", "/anchors/{0}"), "anchors_export": ("GET", "/anchors.md"), "memo_get": ("GET", "/notebook"),
    "memo_add": ("POST", "/notebook/{0}"), "memo_put": ("PUT", "/notebook/{0}"), "memo_compact": ("POST", "/notebook/compact"),
    "memo_versions": ("GET", "/notebook/versions"), "memo_rollback": ("POST", "/notebook/rollback/{0}"),
    "memo_judge": ("POST", "/notebook/{0}/{1}/{2}"), "session_form": ("GET", "/sessions/{0}/forms/{1}"),
    "cards_search": ("GET", "/cards"), "cards_drafts": ("GET", "/cards/drafts"), "cards_judge": ("POST", "/cards/drafts/{0}/{1}"),
    "workspace": ("GET", "/workspace"),
}


class Remote:
    """A running Ruyi's API: the agent is the key's (``--key``, or X-Ruyi-Agent with the admin key or without keys)."""

    def __init__(self, server: str, agent: str | None, key: str | None, session: str | None = None) -> None:
        self.base = server.rstrip("/") + "/ruyi/v1"
        self.headers = {k: v for k, v in (("X-Ruyi-Agent", agent), ("X-Ruyi-Key", key)) if v}
        self.session = session
        """``memo`` on a sub-agent's own notebook: ``?session=`` on every notebook call."""

    def close(self) -> None:
        pass

    def call(self, method: str, what: str, *args: Any) -> Answer:
        verb, template = ROUTES[what]
        body: Any = None
        query: dict[str, str] = {}
        if what == "anchors_create":
            body = args[0]
        elif what == "anchors_list":
            query = {k: v for k, v in (("status", args[0]), ("type", args[1])) if v}
        elif what == "anchors_patch":
            body = args[1]
        elif what == "memo_get" and args[0]:
            query = {"format": "markdown"}
        elif what == "memo_add":
            body = {"text": args[1]}
        elif what == "memo_put":
            body = {"entries": args[1]}
        elif what == "session_form":
            query = {"format": "markdown"}
        elif what == "memo_judge":
            args = (args[0], args[1], "accept" if args[2] else "reject")
        elif what in ("cards_search", "cards_drafts"):
            query, args = {k: v for k, v in args[0].items() if v}, ()
        if what.startswith("memo_") and self.session is not None:
            query["session"] = self.session
        path = template.format(*(urllib.parse.quote(str(a), safe="") for a in args))
        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = json.dumps(body).encode() if body is not None else (b"" if verb != "GET" else None)
        request = urllib.request.Request(url, data=data, method=verb, headers={**self.headers, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as resp:  # a URL the user gave for their own Ruyi
                return resp.status, _decode(resp.headers.get_content_type(), resp.read())
        except urllib.error.HTTPError as exc:
            answer = _decode(exc.headers.get_content_type(), exc.read())
            if isinstance(answer, dict) and "how" in answer:  # a compaction that changed nothing says how
                return exc.code, answer
            if exc.code == 404 and what in ("anchors_get", "anchors_patch", "memo_rollback", "memo_judge", "session_form", "cards_judge"):
                return 404, None
            message = answer.get("error", {}).get("message") if isinstance(answer, dict) and isinstance(answer.get("error"), dict) else answer
            raise CommandError(f"{exc.code}: {message}") from None
        except urllib.error.URLError as exc:
            raise CommandError(f"cannot reach {self.base}: {exc.reason}") from None


def _summary(reports: list[dict[str, Any]]) -> dict[str, Any]:
    batches: dict[str, int] = {}
    for r in reports:
        batches[str(r.get("batch"))] = batches.get(str(r.get("batch")), 0) + 1
    saved = sum(row.get("tokens_saved", 0) for r in reports for row in (r.get("strategies") or {}).values())
    return {"batches": batches, "tokens_saved": saved}


def _decode(content_type: str, raw: bytes) -> Any:
    return json.loads(raw) if content_type == "application/json" else raw.decode("utf-8", "replace")
