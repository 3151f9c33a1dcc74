"""Window precedence (one test per branch, a real fake Ollama /api/show), the reserve, the num_ctx ladder."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from proxy.know.options import OllamaOptions, WindowOptions
from proxy.know.window import (
    Budget,
    OllamaWindows,
    Window,
    budget_for,
    litellm_window,
    num_ctx_for,
    requested_output_tokens,
    reserve_for,
    trained_context_length,
    truncation_suspected,
    window_for,
)

REPO = Path(__file__).resolve().parents[2]

SHOW: dict[str, dict[str, Any]] = {
    "qwen3:8b": {"model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}},
    "llama3.1:8b": {"model_info": {"general.architecture": "llama", "llama.context_length": 131072}},
    "big:1m": {"model_info": {"general.architecture": "big", "big.context_length": 1_048_576}},
    "odd:1": {"model_info": {"general.architecture": "odd"}},
}


class FakeOllama:
    """A tiny Ollama that answers /api/show and counts the calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def show(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append(body["model"])
        if body["model"] not in SHOW:
            return web.json_response({"error": f"model '{body['model']}' not found"}, status=404)
        return web.json_response(SHOW[body["model"]])


@pytest.fixture
async def ollama(aiohttp_server: Any) -> AsyncIterator[tuple[FakeOllama, OllamaWindows]]:
    fake = FakeOllama()
    app = web.Application()
    app.router.add_post("/api/show", fake.show)
    server = await aiohttp_server(app)
    session = aiohttp.ClientSession()

    async def show(model: str) -> Mapping[str, Any] | None:
        async with session.post(f"http://127.0.0.1:{server.port}/api/show", json={"model": model}) as resp:
            return await resp.json() if resp.status == 200 else None

    yield fake, OllamaWindows(show, WindowOptions(models=(("qwen3:*-custom", 20000),)), OllamaOptions(max_num_ctx=65536))
    await session.close()


# --- non-Ollama routes ------------------------------------------------------------------------


def test_config_pattern_wins_first_match() -> None:
    opts = WindowOptions(models=(("gpt-4o*", 64000), ("gpt-*", 1000)))
    assert window_for("GPT-4o-mini", opts) == Window(64000, "config")
    assert window_for("gpt-4", opts) == Window(1000, "config")


def test_litellm_map_is_next_and_read_without_importing_litellm() -> None:
    assert window_for("gpt-4o", WindowOptions()) == Window(128000, "litellm")
    assert window_for("deepseek/deepseek-chat", WindowOptions()).tokens == 131072
    assert litellm_window("openai/gpt-4o") == 128000  # provider prefix stripped when needed
    script = "import sys; from proxy.know.window import litellm_window as w; w('gpt-4o'); print('litellm' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert run.stdout.strip() == "False", run.stderr


def test_unknown_model_takes_the_default() -> None:
    assert window_for("no-such-model-xyz", WindowOptions(context_window=32000)) == Window(32000, "default")


# --- Ollama routes ----------------------------------------------------------------------------


async def test_ollama_config_pattern_wins(ollama: tuple[FakeOllama, OllamaWindows]) -> None:
    fake, windows = ollama
    body = {"options": {"num_ctx": 8192}}
    assert await windows.window_for("qwen3:8b-custom", body, "chat") == Window(20000, "config")
    assert fake.calls == []


async def test_ollama_request_num_ctx_is_next(ollama: tuple[FakeOllama, OllamaWindows]) -> None:
    fake, windows = ollama
    assert await windows.window_for("qwen3:8b", {"options": {"num_ctx": 12288}}, "generate") == Window(12288, "request")
    assert fake.calls == []


async def test_ollama_native_uses_trained_length_capped(ollama: tuple[FakeOllama, OllamaWindows]) -> None:
    fake, windows = ollama
    assert await windows.window_for("qwen3:8b", {}, "chat") == Window(40960, "model_info")
    assert await windows.window_for("big:1m", {}, "generate") == Window(65536, "model_info")  # max_num_ctx
    assert await windows.window_for("qwen3:8b", {"options": {}}, "chat") == Window(40960, "model_info")
    assert fake.calls == ["qwen3:8b", "big:1m"]  # cached per model


async def test_ollama_openai_endpoint_runs_at_the_server_default(ollama: tuple[FakeOllama, OllamaWindows]) -> None:
    fake, windows = ollama
    assert await windows.window_for("qwen3:8b", {"max_tokens": 100}, "openai") == Window(4096, "server_default")
    assert fake.calls == []


async def test_ollama_never_uses_litellm_map(ollama: tuple[FakeOllama, OllamaWindows]) -> None:
    _, windows = ollama
    window = await windows.window_for("llama3.1:8b", {}, "chat")
    assert window == Window(65536, "model_info")  # litellm says 8192 for ollama/llama3.1


async def test_ollama_unknown_model_falls_back_and_is_not_asked_again_at_once(ollama: tuple[FakeOllama, OllamaWindows]) -> None:
    fake, windows = ollama
    assert await windows.window_for("missing:1", {}, "chat") == Window(65536, "default")
    assert await windows.window_for("missing:1", {}, "chat") == Window(65536, "default")
    assert fake.calls == ["missing:1"]  # a failure is remembered for show_retry_s
    assert await windows.window_for("odd:1", {}, "chat") == Window(65536, "default")


async def test_a_failed_show_is_retried_after_show_retry_s(aiohttp_server: Any) -> None:
    fake = FakeOllama()
    app = web.Application()
    app.router.add_post("/api/show", fake.show)
    server = await aiohttp_server(app)
    async with aiohttp.ClientSession() as session:

        async def show(model: str) -> Mapping[str, Any] | None:
            async with session.post(f"http://127.0.0.1:{server.port}/api/show", json={"model": model}) as resp:
                return await resp.json() if resp.status == 200 else None

        windows = OllamaWindows(show, WindowOptions(), OllamaOptions(max_num_ctx=65536, show_retry_s=0))
        for _ in range(2):
            assert await windows.window_for("missing:1", {}, "chat") == Window(65536, "default")
    assert fake.calls == ["missing:1", "missing:1"]


async def test_ollama_show_that_raises_fails_open() -> None:
    async def broken(model: str) -> Mapping[str, Any] | None:
        raise aiohttp.ClientConnectionError("refused")

    windows = OllamaWindows(broken, WindowOptions(context_window=32768), OllamaOptions())
    assert await windows.window_for("qwen3:8b", {}, "chat") == Window(32768, "default")


def test_trained_context_length_reads_the_architecture_key() -> None:
    assert trained_context_length(SHOW["qwen3:8b"]) == 40960
    assert trained_context_length({"model_info": {"general.architecture": "x", "y.context_length": 5}}) is None
    assert trained_context_length(None) is None


# --- reserve, usage, ladder -------------------------------------------------------------------


def test_reserve_is_the_largest_of_ask_ratio_and_minimum() -> None:
    opts = WindowOptions()
    assert reserve_for(128000, None, opts) == 19200
    assert reserve_for(128000, 32000, opts) == 32000
    assert reserve_for(8192, None, opts) == 2000
    assert reserve_for(4096, 100_000, opts) == 2048  # never more than half the window
    assert budget_for(100_000, None, opts) == Budget(100_000, 15_000)
    assert Budget(100_000, 15_000).usage(42_500) == 0.5


def test_requested_output_tokens() -> None:
    assert requested_output_tokens({"max_tokens": 500}) == 500
    assert requested_output_tokens({"max_completion_tokens": 900, "max_tokens": 500}) == 900
    assert requested_output_tokens({"options": {"num_predict": 4000}}) == 4000
    assert requested_output_tokens({"options": {"num_predict": -1}, "max_tokens": True}) is None


def test_ladder_picks_the_smallest_step_that_holds_prompt_and_reserve() -> None:
    opts = WindowOptions()
    assert num_ctx_for(1000, None, 131072, None, opts) == 8192
    assert num_ctx_for(6100, None, 131072, None, opts) == 8192  # 6100 + 2000 ≤ 8192
    assert num_ctx_for(6200, None, 131072, None, opts) == 16384  # 6200 + 2000 > 8192
    assert num_ctx_for(1000, 10_000, 131072, None, opts) == 16384  # the client's answer size counts
    assert num_ctx_for(30000, None, 40960, None, opts) == 40960  # the cap is the last step
    assert num_ctx_for(90000, None, 40960, None, opts) == 40960  # never above the cap
    assert num_ctx_for(100, None, 4096, None, opts) == 4096  # a cap below the first step


def test_ladder_never_shrinks_over_a_session() -> None:
    opts = WindowOptions()
    current: int | None = None
    seen = []
    for prompt in [500, 7000, 3000, 20000, 100, 60000, 1000, 200000, 10]:
        current = num_ctx_for(prompt, None, 131072, current, opts)
        seen.append(current)
    assert seen == sorted(seen)
    assert seen == [8192, 16384, 16384, 32768, 32768, 131072, 131072, 131072, 131072]


def test_truncation_is_suspected_only_past_the_num_ctx_in_force() -> None:
    assert truncation_suspected(5000, 4096)
    assert not truncation_suspected(4096, 4096)
    assert not truncation_suspected(500_000, None)
