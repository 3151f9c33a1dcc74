"""Prompt overflow recognised by the servers' own phrases; one harder retry whose decisions stay only if accepted."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from proxy.rewrite.overflow import is_prompt_overflow
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.rewrite.test_decisions import reports, rereads

OVERFLOWS = {
    "openai": {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130015 "
            "tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
    "openai completion": {
        "error": {
            "message": "This model's maximum context length is 4097 tokens. However, you requested 5000 tokens "
            "(3000 in the messages, 2000 in the completion). Please reduce the length of the messages "
            "or completion.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": None,
        }
    },
    "openai limit": {
        "error": {
            "message": "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 300000 "
            "tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
    "vllm": {
        "object": "error",
        "message": "This model's maximum context length is 8192 tokens. However, your request has 9000 input tokens. "
        "Please reduce the length of the input messages.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
    "vllm prompt + answer": {
        "error": {
            "message": "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context "
            "length is 8192 tokens and your request has 7500 input tokens (1000 > 8192 - 7500). None",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    },
    "vllm decoder": {
        "error": {
            "message": "The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure "
            "that `max_model_len` is no smaller than the number of text tokens.",
            "type": "BadRequestError",
            "code": 400,
        }
    },
    "llama.cpp": {
        "error": {
            "code": 400,
            "message": "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 4476,
            "n_ctx": 4096,
        }
    },
    "ollama": {"error": "the input length exceeds the context length"},
    "litellm": {
        "error": {
            "message": "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: "
            "OpenAIException - This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9100 tokens.",
            "type": None,
            "param": None,
            "code": "400",
        }
    },
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 215000 tokens > 200000 maximum"}},
    "anthropic prompt + answer": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` "
            "exceed context limit: 197000 + 8192 > 200000, decrease input length or "
            "`max_tokens` and try again",
        },
    },
}
NOT_OVERFLOWS = {
    "vllm answer too big": {
        "error": {
            "message": "'max_tokens' or 'max_completion_tokens' is too large: 9000. This model's maximum context "
            "length is 8192 tokens and your request has 120 input tokens (9000 > 8192 - 120). None",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    },
    "vllm answer too big, newer": {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, you requested 9000 output "
            "tokens and your prompt contains at least 121 input tokens, for a total of at least "
            "9121 tokens. Please reduce the length of the input prompt or the number of requested "
            "output tokens.",
            "type": "BadRequestError",
            "code": 400,
        }
    },
    "openai answer too big": {
        "error": {
            "message": "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, whereas you provided 100000.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "invalid_value",
        }
    },
    "openai completion too big": {
        "error": {
            "message": "This model's maximum context length is 4097 tokens. However, you requested 9000 tokens "
            "(100 in the messages, 8900 in the completion). Please reduce the length of the "
            "messages or completion.",
            "type": "invalid_request_error",
            "code": None,
        }
    },
    "anthropic answer too big": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 1000 + 200000 > 200000, decrease input length or `max_tokens`",
        },
    },
    "openai user field": {
        "error": {
            "message": "Invalid 'user': string too long. Expected a string with maximum length 64, but got a string with length 100 instead.",
            "type": "invalid_request_error",
            "code": "string_above_max_length",
        }
    },
    "bad model": {
        "error": {
            "message": "The model `gpt-9` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    },
    "ollama no model": {"error": "model 'llama9' not found"},
}


@pytest.mark.parametrize("name", OVERFLOWS)
def test_prompt_overflows_are_recognised(name: str) -> None:
    assert is_prompt_overflow(json.dumps(OVERFLOWS[name]).encode())


@pytest.mark.parametrize("name", NOT_OVERFLOWS)
def test_other_errors_are_not_prompt_overflows(name: str) -> None:
    assert not is_prompt_overflow(json.dumps(NOT_OVERFLOWS[name]).encode())


async def post(proxy: Any, messages: list[dict[str, Any]], **extra: Any) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            base_url(proxy) + "/v1/chat/completions", json={"model": "gpt-4o", "messages": messages, **extra}, headers={"X-Ruyi-Agent": "a"}
        )
        await resp.read()
        return resp


def chats(fake: FakeUpstream) -> list[Any]:
    return [r for r in fake.received if r.path == "/v1/chat/completions"]


async def test_an_answer_too_big_for_the_window_is_relayed_without_a_retry(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 200000}}, pruning={"economic": False})
    fake.fault, fake.status, fake.status_body = "status", 400, NOT_OVERFLOWS["vllm answer too big"]
    resp = await post(proxy, rereads(9), max_tokens=9000)
    assert resp.status == 400 and len(chats(fake)) == 1
    history = await reports(proxy, resp.headers["X-Ruyi-Session"])
    assert [r["batch"] for r in history] == ["none"], "no harder batch ran"


async def test_a_refused_retry_keeps_none_of_its_decisions(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 200000}}, pruning={"economic": False})  # Ruyi thinks it fits
    messages = rereads(9)
    fake.max_prompt_chars = 100  # even the harder batch cannot make it fit
    resp = await post(proxy, messages)
    assert resp.status == 400 and len(chats(fake)) == 2, "one retry"
    assert chats(fake)[1].json["messages"] != messages, "the retry was rewritten"
    fake.max_prompt_chars = None
    resp = await post(proxy, messages)
    assert resp.status == 200 and fake.last().json["messages"] == messages, "the refused retry's decisions were not kept"
    history = await reports(proxy, resp.headers["X-Ruyi-Session"])
    assert [(r["batch"], r["applied"]) for r in history] == [("none", True), ("overflow", False), ("none", True)]


async def test_an_accepted_retry_keeps_its_decisions(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(window={"models": {"gpt-4o*": 200000}}, pruning={"economic": False})
    messages = rereads(9)
    fake.max_prompt_chars = len(json.dumps(messages)) - 2000
    resp = await post(proxy, messages)
    assert resp.status == 200 and len(chats(fake)) == 2
    retried = chats(fake)[1].json["messages"]
    fake.max_prompt_chars = None
    resp = await post(proxy, messages)
    assert fake.last().json["messages"] == retried, "the same bytes as the accepted retry"
    history = await reports(proxy, resp.headers["X-Ruyi-Session"])
    assert [(r["batch"], r["applied"]) for r in history] == [("none", True), ("overflow", True), ("none", True)]
    assert history[-1]["in_force"]["items"] == sum(row["items"] for row in history[1]["strategies"].values())
