"""The options of knowing a request (config ``window``, ``ollama``, ``tiers``, ``tokens``, ``calibration``): a leaf the config composes."""

from __future__ import annotations

from dataclasses import dataclass, fields

from proxy.know.images import IMAGE_TOKENS_BY_MODEL


@dataclass(frozen=True)
class TokenOptions:
    """How tokens are counted."""

    cache_max: int = 200_000
    """Most per-message counts kept (LRU); ≈190 bytes each. A long session needs one per message. Counts of plain texts
    (tool outputs, placeholders) are kept as many, at most 65,536 (≈245 bytes each)."""
    prefix_max: int = 1024
    """Most per-request count lists kept, by the request's last chain link: a request extending one of
    them looks up only its new messages. They hold 4 bytes a message, 8 MiB at most in all."""
    image_tokens: int = 765
    """Tokens charged per image (an image part, or one of an Ollama message's ``images``) of a model that
    ``image_tokens_by_model`` does not list (OpenAI's price of a 1024×1024 image at high detail: 85 + 4 × 170)."""
    image_tokens_by_model: tuple[tuple[str, int], ...] = IMAGE_TOKENS_BY_MODEL
    """Tokens per image by model, as (glob pattern, tokens), first match wins; replaces the built-in table."""


@dataclass(frozen=True)
class CalibrationOptions:
    """How estimates are corrected by the prompt sizes upstreams report."""

    weight: float = 0.3
    """Weight of the newest observation in the per-model moving average of reported / estimated."""
    min_ratio: float = 0.5
    """Observations below this ratio are ignored as not measuring the same prompt."""
    max_ratio: float = 2.0
    """Observations above this ratio are ignored as not measuring the same prompt."""
    ollama_min_fraction: float = 0.8
    """Ollama's prompt_eval_count (and the prompt_tokens of its /v1, the same number) is used only when at
    least this fraction of our estimate: it leaves out the tokens served from the KV cache."""
    max_models: int = 1024
    """Most models remembered (least recently observed forgotten first)."""


@dataclass(frozen=True)
class TierOptions:
    """Where each tier starts, as a fraction of window − reserve (the `tiers:` config block)."""

    normal: float = 0.50
    """Below this the full (expanded) form fits; from here on the normal form."""
    compact: float = 0.70
    """Yellow light: the compact form, and a reminder that there is still room."""
    prepare_summary: float = 0.80
    """Summaries are prepared in the background, ahead of need."""
    prune: float = 0.85
    """Orange light: dynamic context pruning runs."""
    archive: float = 0.95
    """Red light: archive and restart from the compact form (with archives off, Ruyi prunes there, and reports
    the tier as ``prune``)."""

    def __post_init__(self) -> None:
        previous = ("0", 0.0)
        for field in fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
                raise ValueError(f"tiers.{field.name} must be a fraction in (0, 1], not {value!r}")
            if value <= previous[1]:
                raise ValueError(f"tiers.{field.name} ({value}) must be above tiers.{previous[0]} ({previous[1]})")
            previous = (field.name, value)


@dataclass(frozen=True)
class WindowOptions:
    """How big a model's context window is taken to be, and how much of it is kept for the answer."""

    context_window: int = 128_000
    """Window when neither config nor litellm's model map knows the model."""
    reserve_ratio: float = 0.15
    """Part of the window kept free for the answer (unless the client asks for more)."""
    reserve_min_tokens: int = 2000
    """The least kept free for the answer."""
    ask_server: bool = True
    """Ask an OpenAI-compatible upstream for the window of a model that neither ``models`` nor litellm's
    map knows: llama.cpp's /props, vLLM's and SGLang's /v1/models, LM Studio's /api/v0/models, TGI's /info."""
    server_retry_s: float = 30.0
    """A model whose server lookup failed (unreachable, timeout, 5xx) is not asked again for this long."""
    refuse_over: bool = True
    """A request still over the whole window once pruned, archived and cut to fit is answered with the provider's own
    context-length error, saying what did not fit, instead of being sent over the window (a server would refuse it, or
    silently drop its start); with ``archive.enabled`` false, only one whose system text, task, tools and newest
    message alone are over it. Never for a window Ruyi only guessed (``context_window``)."""
    models: tuple[tuple[str, int], ...] = ()
    """Per-model windows as (glob pattern, tokens), first match wins, e.g. ("qwen3:*", 40960). In YAML: one
    mapping ``{"qwen3:*": 40960}``, or a list of ``["qwen3:*", 40960]`` pairs or ``{"qwen3:*": 40960}`` maps."""


@dataclass(frozen=True)
class OllamaOptions:
    """Windows of models served by Ollama."""

    max_num_ctx: int = 131_072
    """Largest num_ctx Ruyi sets: KV-cache memory grows with it, and 128k is what most long-context
    open models are trained for; raise it for bigger GPUs, lower it for small ones."""
    default_context: int = 4096
    """num_ctx the Ollama server runs /v1/chat/completions at (it takes no options there)."""
    show_retry_s: float = 30.0
    """A model whose /api/show failed is not asked again for this long: an Ollama that is down or a
    model it does not know is not asked on every request."""
    keep_alive_s: float = 300.0
    """How long the server keeps a model loaded after a request that sets no ``keep_alive`` (Ollama's
    default is 5 minutes; match the server's OLLAMA_KEEP_ALIVE; negative: forever). While a model is
    loaded, Ruyi never lowers its num_ctx (that would reload it)."""
