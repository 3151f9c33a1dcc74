"""Knowledge cards under ``/ruyi/v1/cards``: search the agent's cards, its draft cards (accept, reject), and what its workspace gives."""

from __future__ import annotations

from aiohttp import web

from memory.cards.sqlite_drafts import STATUSES, DraftError
from proxy import appkeys
from proxy.api.admin import agent_of
from proxy.api.bodies import refused
from proxy.keep import answers


async def search(request: web.Request) -> web.Response:
    """``?q=WORDS``: the agent's cards most relevant first (every card without ``q``), and the files skipped with why."""
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    words = request.query.get("q")
    limit = request.query.get("limit", "20")
    if not limit.isdigit() or not 1 <= int(limit) <= 100:
        return refused(400, "invalid_limit", f"limit is a number from 1 to 100; got {limit!r}")
    return web.json_response(await keeper.run(answers.cards_found, keeper, agent, words, int(limit)))


async def drafts(request: web.Request) -> web.Response:
    """The agent's draft cards (``?status=proposed|accepted|rejected``)."""
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    status = request.query.get("status")
    if status is not None and status not in STATUSES:
        return refused(400, "invalid_status", f"status is one of {', '.join(STATUSES)}; got {status!r}")
    await keeper.settle()
    return web.json_response(await keeper.run(answers.drafts_listed, keeper, agent, status))


async def judge(request: web.Request) -> web.Response:
    """Accept a draft (its card file is written in the agent's project cards folder) or reject it (never proposed again)."""
    agent, keeper, info = agent_of(request), request.app[appkeys.KEEPER], request.match_info
    if not info["id"].isdigit():
        return refused(400, "invalid_draft", f"a draft is named by its number (GET /ruyi/v1/cards/drafts lists them); got {info['id']!r}")
    try:
        done = await keeper.run(answers.draft_judged, keeper, agent, int(info["id"]), info["verdict"] == "accept")
    except DraftError as exc:
        return refused(exc.status, exc.code, str(exc))
    except OSError as exc:
        return refused(500, "card_not_written", f"the card file could not be written ({exc.strerror or exc}); the draft stays proposed")
    if done is None:
        return refused(404, "draft_not_found", f"this agent has no draft {info['id']} (GET /ruyi/v1/cards/drafts lists them)")
    return web.json_response(done)


async def workspace(request: web.Request) -> web.Response:
    """What the agent's prompts may get: its workspace root, card folders, and project rules (files, size, whether cut)."""
    agent, keeper = agent_of(request), request.app[appkeys.KEEPER]
    return web.json_response(await keeper.run(answers.workspace_view, keeper, agent))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/v1/cards", search)
    app.router.add_get("/ruyi/v1/cards/drafts", drafts)
    app.router.add_post("/ruyi/v1/cards/drafts/{id}/{verdict:accept|reject}", judge)
    app.router.add_get("/ruyi/v1/workspace", workspace)
