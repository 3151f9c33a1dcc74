"""Knowledge cards under ``/ruyi/v1/cards``: search the agent's cards, its draft cards (accept, reject), and what its workspace gives."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory.cards.sqlite_drafts import STATUSES, DraftError
from proxy import appkeys
from proxy.api.admin import agent_of
from proxy.api.bodies import refused


async def search(request: web.Request) -> web.Response:
    """``?q=WORDS``: the agent's cards most relevant first (every card without ``q``), and the files skipped with why."""
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    words = request.query.get("q")
    limit = request.query.get("limit", "20")
    if not limit.isdigit() or not 1 <= int(limit) <= 100:
        return refused(400, "invalid_limit", f"limit is a number from 1 to 100; got {limit!r}")
    keywords, found, skipped = await keeper.run(keeper.organizer.search, agent, words, int(limit))
    ws = keeper.organizer.workspaces(agent)
    return web.json_response({"agent_id": agent, "query": words, "keywords": keywords, "folders": [str(f) for f in ws.card_dirs],
                              "cards": [c.view(with_body=bool(words)) for c in found],
                              "skipped": [{"path": str(p), "reason": why} for p, why in sorted(skipped.items())]})


async def drafts(request: web.Request) -> web.Response:
    """The agent's draft cards (``?status=proposed|accepted|rejected``)."""
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    status = request.query.get("status")
    if status is not None and status not in STATUSES:
        return refused(400, "invalid_status", f"status is one of {', '.join(STATUSES)}; got {status!r}")
    await keeper.settle()
    found = await keeper.run(keeper.organizer.drafts.list, agent, status)
    return web.json_response({"agent_id": agent, "drafts": [d.view() for d in found]})


async def judge(request: web.Request) -> web.Response:
    """Accept a draft (its card file is written in the agent's project cards folder) or reject it (never proposed again)."""
    agent, keeper, info = agent_of(request), request.app[appkeys.KEEPER], request.match_info
    if not info["id"].isdigit():
        return refused(400, "invalid_draft", f"a draft is named by its number (GET /ruyi/v1/cards/drafts lists them); got {info['id']!r}")
    act = keeper.organizer.accept if info["verdict"] == "accept" else keeper.organizer.reject
    try:
        done = await keeper.run(act, agent, int(info["id"]))
    except DraftError as exc:
        return refused(exc.status, exc.code, str(exc))
    except OSError as exc:
        return refused(500, "card_not_written", f"the card file could not be written ({exc.strerror or exc}); the draft stays proposed")
    if done is None:
        return refused(404, "draft_not_found", f"this agent has no draft {info['id']} (GET /ruyi/v1/cards/drafts lists them)")
    return web.json_response({"agent_id": agent, "draft": done.view()})


async def workspace(request: web.Request) -> web.Response:
    """What the agent's prompts may get: its workspace root, card folders, and project rules (files, size, whether cut)."""
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    ws, rules = await keeper.run(keeper.organizer.rules, agent)
    out: dict[str, Any] = {"agent_id": agent, "workspace_root": str(ws.workspace_root) if ws.workspace_root else None,
                           "card_dirs": [str(f) for f in ws.card_dirs], "rule_names": list(ws.rule_names),
                           "rules": {"files": [str(f) for f in rules.files], "chars": rules.chars, "cut": rules.cut,
                                     "problems": list(rules.problems), "text": rules.text}}
    return web.json_response(out)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/v1/cards", search)
    app.router.add_get("/ruyi/v1/cards/drafts", drafts)
    app.router.add_post("/ruyi/v1/cards/drafts/{id}/{verdict:accept|reject}", judge)
    app.router.add_get("/ruyi/v1/workspace", workspace)
