"""No client field steers a translated call: an OpenAI or Ollama body bound for an Anthropic route through litellm
carries only the fields of its own schema. litellm reads connection settings (``base_url``, ``api_base``,
``fallbacks``, ``mock_response``, …) from the same keyword arguments, so any other field could send the route's key
to an address the client chose. An attacker server on 127.0.0.1 records whatever reaches it; it must see nothing."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import ClientSession, web

from proxy.translate.litellm_bridge import openai_arguments
from tests.conftest import MakeProxy, base_url, config_for
from tests.fake_upstream import FakeUpstream

ROUTE_KEY = "sk-ant-route-secret"


@pytest.fixture(autouse=True)
def no_model_map_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("ROUTE_KEY", ROUTE_KEY)


@pytest.fixture
async def attacker(aiohttp_server: Any) -> tuple[Any, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append({"path": request.path, "headers": dict(request.headers), "body": await request.text()})
        return web.json_response({"error": {"message": "attacker", "type": "x"}}, status=500)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    return await aiohttp_server(app), seen


def steering_fields(url: str) -> dict[str, dict[str, Any]]:
    """Each field that could steer litellm's call, as a client would send it."""
    return {
        "base_url": {"base_url": url},
        "api_base": {"api_base": url},
        "api_key": {"api_key": "sk-attacker", "api_base": url},
        "fallbacks": {"fallbacks": [{"model": "anthropic/claude-x", "api_base": url, "api_key": "k"}, "openai/gpt-4o"]},
        "model_list": {"model_list": [{"model_name": "claude-opus-4-5", "litellm_params": {"model": "anthropic/x", "api_base": url}}]},
        "custom_llm_provider": {"custom_llm_provider": "openai", "api_base": url},
        "extra_headers": {"extra_headers": {"x-forwarded-host": url}},
        "extra_body": {"extra_body": {"api_base": url}},
        "litellm_params": {"litellm_params": {"api_base": url}},
        "metadata": {"metadata": {"api_base": url}},
        "mock_response": {"mock_response": "pwned"},
        "mcp_tool": {"tools": [{"type": "mcp", "server_label": "x", "server_url": url}]},
    }


def test_openai_arguments_keep_only_schema_fields() -> None:
    body: dict[str, Any] = {"model": "claude-opus-4-5", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5}
    for extra in steering_fields("http://127.0.0.1:9").values():
        body.update(extra)
    from config.schema import Route

    route = Route(url="http://127.0.0.1:1", kind="anthropic")
    args = openai_arguments(body, route, ROUTE_KEY, "claude-opus-4-5")
    assert args["api_base"] == route.url and args["api_key"] == ROUTE_KEY and args["model"] == "anthropic/claude-opus-4-5"
    for name in (
        "base_url",
        "fallbacks",
        "model_list",
        "custom_llm_provider",
        "extra_headers",
        "extra_body",
        "litellm_params",
        "metadata",
        "mock_response",
    ):
        assert name not in args
    assert args.get("tools", []) == []  # only function tools pass
    assert "127.0.0.1:9" not in repr(args)


@pytest.mark.parametrize("field", list(steering_fields("x")))
async def test_an_openai_body_never_steers_the_routes_key(
    field: str, make_proxy: MakeProxy, fake: FakeUpstream, upstream: Any, attacker: tuple[Any, list[dict[str, Any]]]
) -> None:
    server, seen = attacker
    url = base_url(server)
    proxy = await make_proxy(config=config_for(base_url(upstream), "anthropic", default_route={"translate": True, "api_key": "env:ROUTE_KEY"}))
    if field == "fallbacks":
        fake.fault = "status"  # the route fails, so litellm would try the fallbacks
    body = {"model": "claude-opus-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **steering_fields(url)[field]}
    async with ClientSession() as http:
        async with http.post(base_url(proxy) + "/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk-client"}) as r:
            text = await r.text()
    assert seen == [], f"{field} sent a request to the attacker"
    assert "pwned" not in text
    if field == "fallbacks":
        assert r.status >= 500 and ROUTE_KEY not in text
    else:
        assert r.status == 200, text
        assert fake.last("/v1/messages").headers.get("x-api-key") == ROUTE_KEY


async def test_an_ollama_body_never_steers_the_routes_key(
    make_proxy: MakeProxy, fake: FakeUpstream, upstream: Any, attacker: tuple[Any, list[dict[str, Any]]]
) -> None:
    server, seen = attacker
    url = base_url(server)
    proxy = await make_proxy(config=config_for(base_url(upstream), "anthropic", default_route={"translate": True, "api_key": "env:ROUTE_KEY"}))
    body: dict[str, Any] = {
        "model": "claude-opus-4-5",
        "stream": False,
        "messages": [{"role": "user", "content": "hi"}],
        "options": {"num_predict": 5},
    }
    for extra in steering_fields(url).values():
        body.update(extra)
    async with ClientSession() as http:
        async with http.post(base_url(proxy) + "/api/chat", json=body) as r:
            answer = await r.json()
    assert r.status == 200 and seen == [] and answer["message"]["content"] == fake.reply
    assert fake.last("/v1/messages").headers.get("x-api-key") == ROUTE_KEY
