"""A session's three forms and its sub-agents' aggregated results under ``/ruyi/v1/sessions/<id>``."""

from __future__ import annotations

from aiohttp import web

from memory.forms.children import BUDGETS, aggregate
from memory.forms.render import FORMS, build
from proxy import appkeys
from proxy.api.admin import agent_of, session_view
from proxy.api.bodies import refused
from proxy.keep.answers import form_state


async def form(request: web.Request) -> web.Response:
    """``compact`` (under 500 characters), ``normal`` (500–2,000), ``expanded`` (everything), built from the session's
    state; JSON, or the text itself with ``?format=markdown``. With a summarizer configured, the refined form of this
    very state once one passed its checks (``source``: ``summarizer``), else the deterministic one while its refinement
    runs in the background (``deterministic``)."""
    agent, session_id, name = agent_of(request), request.match_info["session_id"], request.match_info["form"]
    if name not in FORMS:
        return refused(404, "unknown_form", f"the forms are {', '.join(FORMS)}; got {name!r}")
    measurer, keeper = request.app[appkeys.MEASURER], request.app[appkeys.KEEPER]
    session = await measurer.offload.run(measurer.sessions.get, agent, session_id)
    if session is None:
        return refused(404, "session_not_found", "no such session for this agent")
    await measurer.drain()
    await keeper.settle()
    reports = await measurer.offload.run(measurer.sessions.reports, agent, session_id) or []
    state = await keeper.run(form_state, keeper, agent, session_id, {**session_view(session), "tokens": session.prompt_tokens}, reports)
    text = await keeper.run(build, state, name)
    if keeper.refiner.target() is not None:  # a summarizer is configured: its refined form once one of this state passed its checks
        whole = text if name == "expanded" else await keeper.run(build, state, "expanded")
        text, source = await keeper.refiner.form(agent, session_id, name, text, whole)
    else:
        source = "deterministic"
    if request.query.get("format") == "markdown":
        return web.Response(text=text, content_type="text/markdown", headers={"X-Ruyi-Form-Source": source})
    return web.json_response({"session_id": session_id, "form": name, "source": source, "chars": len(text), "text": text})


async def children(request: web.Request) -> web.Response:
    """The session's sub-agents' results, HIGH first, in ``?form=normal`` (2,000 characters) or ``compact`` (500), or
    within ``?budget=N`` characters."""
    agent, session_id = agent_of(request), request.match_info["session_id"]
    shape, raw_budget = request.query.get("form", "normal"), request.query.get("budget")
    if shape not in BUDGETS:
        return refused(400, "invalid_form", f"form is normal or compact; got {shape!r}")
    if raw_budget is not None and not (raw_budget.isdigit() and int(raw_budget) > 0):
        return refused(400, "invalid_budget", f"budget is a positive number of characters; got {raw_budget!r}")
    measurer, keeper = request.app[appkeys.MEASURER], request.app[appkeys.KEEPER]
    if await measurer.offload.run(measurer.sessions.get, agent, session_id) is None:
        return refused(404, "session_not_found", "no such session for this agent")
    await keeper.settle()
    results = await keeper.run(keeper.sessions.results, agent, session_id)
    known = await keeper.run(keeper.sessions.children, agent, session_id)
    out = aggregate(results, shape, int(raw_budget) if raw_budget else None)
    return web.json_response({"session_id": session_id, "children_known": known, **out, "results": results})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ruyi/v1/sessions/{session_id}/forms/{form}", form)
    app.router.add_get("/ruyi/v1/sessions/{session_id}/children", children)
