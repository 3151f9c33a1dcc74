"""Where ``ruyi anchors``, ``memo``, ``cards`` and ``session show`` act: the store's file, or a running Ruyi (``--url``).

``Local`` answers with the API's own functions (keep/answers.py); ``Remote`` sends the request; both have the same methods."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from memory.anchors.anchor import AnchorError
from memory.cards.sqlite_drafts import DraftError
from memory.cards.workspace import AgentWorkspace
from memory.notebook.render import markdown
from memory.notebook.sections import NotebookError
from memory.store.backend import open_database, open_store
from memory.store.options import StoreOptions
from proxy.keep import answers
from proxy.keep.keeper import Keeper
from proxy.keep.options import NotebookOptions
from summaries.llm import LLMSummarizer
from summaries.options import SummarizerOptions

Answer = tuple[int, Any]
"""An HTTP-like status and the JSON (or markdown text) the API would answer."""


class CommandError(Exception):
    """What the command says on stderr before exiting 1."""


REFUSED = (CommandError, AnchorError, NotebookError, DraftError)
"""What a command says on stderr before exiting 1: its own errors, and what the store refuses (as the API answers 4xx)."""


class _DeprecatedServer(argparse.Action):
    """``--server URL``, the old name of ``--url``: still works, says so on stderr."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        print("ruyi: --server is deprecated, use --url", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_url(parser: argparse.ArgumentParser, help: str) -> None:
    """The one flag naming a running Ruyi across the CLI: ``--url URL`` (``--server``, hidden and deprecated, the same)."""
    parser.add_argument("--url", metavar="URL", help=help)
    parser.add_argument("--server", dest="url", metavar="URL", action=_DeprecatedServer, help=argparse.SUPPRESS)


class Local:
    """The store's file itself (safe while Ruyi runs: each change one transaction; the server sees it on its next read)."""

    def __init__(
        self,
        store: StoreOptions,
        agent: str,
        notebook: NotebookOptions,
        summarizer: SummarizerOptions,
        session: str | None = None,
        workspaces: Callable[[str], AgentWorkspace] | None = None,
    ) -> None:
        self.keeper = Keeper(open_database(store), notebook, LLMSummarizer(summarizer) if summarizer.model else None, workspaces=workspaces)
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

    def anchors_create(self, body: dict[str, Any]) -> Answer:
        return 201, answers.anchor_created(self.keeper, self.agent, body)

    def anchors_list(self, status: str | None, kind: str | None) -> Answer:
        return 200, answers.anchors_listed(self.keeper, self.agent, status, kind)

    def anchors_get(self, anchor_id: str) -> Answer:
        a = self.keeper.anchors.get(self.agent, anchor_id)
        return (404, None) if a is None else (200, answers.anchor_view(a))

    def anchors_patch(self, anchor_id: str, body: dict[str, Any]) -> Answer:
        a = self.keeper.anchors.update(self.agent, anchor_id, body)
        return (404, None) if a is None else (200, answers.anchor_view(a))

    def anchors_export(self) -> Answer:
        return 200, answers.anchors_md(self.keeper, self.agent)

    def memo_get(self, as_markdown: bool) -> Answer:
        nb = self.keeper.notebook.current(self.agent, self.child)
        return 200, markdown(nb.body, nb.pending, nb.version) if as_markdown else answers.notebook_view(nb)

    def memo_add(self, section: str, text: str) -> Answer:
        return 201, answers.notebook_view(*self.keeper.notebook.add(self.agent, section, text, "person", self.child))

    def memo_put(self, section: str, entries: list[str]) -> Answer:
        return 200, answers.notebook_view(*self.keeper.notebook.put(self.agent, section, entries, self.child))

    def memo_compact(self) -> Answer:
        after, how = asyncio.run(self.keeper.compact(self.agent, self.child))
        current = self.keeper.notebook.current(self.agent, self.child) if after is None else None
        return answers.compaction(after, how, current)

    def memo_versions(self) -> Answer:
        return 200, answers.notebook_versions(self.keeper, self.agent, self.child)

    def memo_rollback(self, version: int) -> Answer:
        nb = self.keeper.notebook.rollback(self.agent, version, self.child)
        return (404, None) if nb is None else (200, answers.notebook_view(nb))

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
        state = answers.form_state(self.keeper, self.agent, session_id, session, reports)
        text = build(state, form)  # or the summarizer's refinement of this very state, when a running Ruyi made one
        return 200, self.keeper.sessions.refined(self.agent, session_id, form, basis(text)) or text

    def memo_judge(self, section: str, index: int, accept: bool) -> Answer:
        nb = self.keeper.notebook.judge(self.agent, section, index, accept, self.child)
        return (404, None) if nb is None else (200, answers.notebook_view(nb))

    def cards_search(self, words: str | None) -> Answer:
        return 200, answers.cards_found(self.keeper, self.agent, words)

    def cards_drafts(self, status: str | None) -> Answer:
        return 200, answers.drafts_listed(self.keeper, self.agent, status)

    def cards_judge(self, draft_id: int, accept: bool) -> Answer:
        done = answers.draft_judged(self.keeper, self.agent, draft_id, accept)
        return (404, None) if done is None else (200, done)

    def workspace(self) -> Answer:
        return 200, answers.workspace_view(self.keeper, self.agent)


class Remote:
    """A running Ruyi's API: the agent is the key's (``--key``, or X-Ruyi-Agent with the admin key or without keys).
    Each method is the request its ``Local`` twin answers as the handler would."""

    def __init__(self, server: str, agent: str | None, key: str | None, session: str | None = None) -> None:
        self.base = server.rstrip("/") + "/ruyi/v1"
        self.headers = {k: v for k, v in (("X-Ruyi-Agent", agent), ("X-Ruyi-Key", key)) if v}
        self.session = session
        """``memo`` on a sub-agent's own notebook: ``?session=`` on every notebook call."""

    def close(self) -> None:
        pass

    def anchors_create(self, body: dict[str, Any]) -> Answer:
        return self._send("POST", "/anchors", body=body)

    def anchors_list(self, status: str | None, kind: str | None) -> Answer:
        return self._send("GET", "/anchors", {"status": status, "type": kind})

    def anchors_get(self, anchor_id: str) -> Answer:
        return self._send("GET", f"/anchors/{_part(anchor_id)}", missing=True)

    def anchors_patch(self, anchor_id: str, body: dict[str, Any]) -> Answer:
        return self._send("PATCH", f"/anchors/{_part(anchor_id)}", body=body, missing=True)

    def anchors_export(self) -> Answer:
        return self._send("GET", "/anchors.md")

    def memo_get(self, as_markdown: bool) -> Answer:
        return self._notebook("GET", "", {"format": "markdown" if as_markdown else None})

    def memo_add(self, section: str, text: str) -> Answer:
        return self._notebook("POST", f"/{_part(section)}", body={"text": text})

    def memo_put(self, section: str, entries: list[str]) -> Answer:
        return self._notebook("PUT", f"/{_part(section)}", body={"entries": entries})

    def memo_compact(self) -> Answer:
        return self._notebook("POST", "/compact")

    def memo_versions(self) -> Answer:
        return self._notebook("GET", "/versions")

    def memo_rollback(self, version: int) -> Answer:
        return self._notebook("POST", f"/rollback/{version}", missing=True)

    def memo_judge(self, section: str, index: int, accept: bool) -> Answer:
        return self._notebook("POST", f"/{_part(section)}/{index}/{'accept' if accept else 'reject'}", missing=True)

    def session_form(self, session_id: str, form: str) -> Answer:
        return self._send("GET", f"/sessions/{_part(session_id)}/forms/{_part(form)}", {"format": "markdown"}, missing=True)

    def cards_search(self, words: str | None) -> Answer:
        return self._send("GET", "/cards", {"q": words})

    def cards_drafts(self, status: str | None) -> Answer:
        return self._send("GET", "/cards/drafts", {"status": status})

    def cards_judge(self, draft_id: int, accept: bool) -> Answer:
        return self._send("POST", f"/cards/drafts/{draft_id}/{'accept' if accept else 'reject'}", missing=True)

    def workspace(self) -> Answer:
        return self._send("GET", "/workspace")

    def _notebook(self, verb: str, path: str, query: dict[str, str | None] | None = None, body: Any = None, missing: bool = False) -> Answer:
        return self._send(verb, "/notebook" + path, {**(query or {}), "session": self.session}, body, missing)

    def _send(self, verb: str, path: str, query: dict[str, str | None] | None = None, body: Any = None, missing: bool = False) -> Answer:
        """One request; ``missing``: a 404 is the answer "no such entry" (404, None), not a failure."""
        given = {k: v for k, v in (query or {}).items() if v}
        url = self.base + path + ("?" + urllib.parse.urlencode(given) if given else "")
        data = json.dumps(body).encode() if body is not None else (b"" if verb != "GET" else None)
        request = urllib.request.Request(url, data=data, method=verb, headers={**self.headers, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as resp:  # a URL the user gave for their own Ruyi
                return resp.status, _decode(resp.headers.get_content_type(), resp.read())
        except urllib.error.HTTPError as exc:
            answer = _decode(exc.headers.get_content_type(), exc.read())
            if isinstance(answer, dict) and "how" in answer:  # a compaction that changed nothing says how
                return exc.code, answer
            if exc.code == 404 and missing:
                return 404, None
            message = answer.get("error", {}).get("message") if isinstance(answer, dict) and isinstance(answer.get("error"), dict) else answer
            raise CommandError(f"{exc.code}: {message}") from None
        except urllib.error.URLError as exc:
            raise CommandError(f"cannot reach {self.base}: {exc.reason}") from None


def _part(value: str) -> str:
    """One path segment, quoted."""
    return urllib.parse.quote(value, safe="")


def _decode(content_type: str, raw: bytes) -> Any:
    return json.loads(raw) if content_type == "application/json" else raw.decode("utf-8", "replace")


Target = Local | Remote
"""Where a command acts."""
