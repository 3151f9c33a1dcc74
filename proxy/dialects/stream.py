"""Reading an answer on the side while its bytes are relayed: whole lines out, the message assembled per dialect."""

from __future__ import annotations

from proxy import json_codec
from proxy.dialects.anthropic import AnthropicAssembler
from proxy.dialects.base import Assembled, Assembler
from proxy.dialects.ollama import OllamaAssembler
from proxy.dialects.openai_chat import OpenAIAssembler
from proxy.dialects.responses import ResponsesAssembler


class LineRelay:
    """Splits a byte stream into whole lines: complete lines go out now, a partial tail waits.

    Holding back only an unfinished line means a stream cut mid-event never leaves the client
    with half a JSON object in front of the error event that ends it.
    """

    def __init__(self) -> None:
        self._tail = b""
        self.at_event_boundary = True

    def feed(self, chunk: bytes) -> bytes:
        data = self._tail + chunk
        cut = data.rfind(b"\n") + 1
        self._tail = data[cut:]
        out = data[:cut]
        if out:
            self.at_event_boundary = out.endswith(b"\n\n") or out.endswith(b"\r\n\r\n")
        return out

    def flush(self) -> bytes:
        out, self._tail = self._tail, b""
        return out


def assembler_for(wire: str) -> Assembler:
    """OpenAI chunks and Anthropic events arrive as SSE ``data:`` lines, Ollama objects as NDJSON lines."""
    if wire == "anthropic":
        return AnthropicAssembler()
    if wire == "responses":
        return ResponsesAssembler()
    return OpenAIAssembler() if wire == "openai" else OllamaAssembler()


def assemble_body(wire: str, body: bytes) -> Assembled:
    """The same result for a non-streamed answer (one JSON object)."""
    asm = assembler_for(wire)
    try:
        obj = json_codec.loads(body)
    except ValueError:
        return asm.result
    if isinstance(obj, dict):
        asm.feed_object(obj)
        asm.result.done = True
    return asm.result
