"""Window arithmetic per model: how much a request may send and how much it asks back.

One :class:`Limits` per model, resolved by :func:`limits_for` from, in order of precedence:

1. a window the model server reported itself (``server_window``: llama.cpp ``/props``,
   Ollama ``/api/show``), which is the truth for a local server;
2. config: ``context_window`` / ``max_output_tokens`` of the connection, of
   ``[models."conn:model"]`` and ``[compaction]`` (a repo's own config may only lower them,
   see ``config/settings.py``);
3. the SDK's model profile: ``context_window`` (which pydantic-ai fills from genai-prices)
   and, for Claude, ``anthropic_max_output_tokens``;
4. ketch's own table below (input limits and output maxima the SDK does not carry, e.g.
   GPT-5 takes 272k of input in a 400k window);
5. :data:`DEFAULT_CONTEXT_WINDOW`.

The rule every request keeps: ``input estimate + max_tokens + margin <= window`` and
``input estimate <= input_limit``. Providers enforce the first on Anthropic and OpenAI Chat
(input plus the requested output must fit the window) and the second on Responses models
with a separate input limit; ketch keeps both everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

DEFAULT_CONTEXT_WINDOW = 128_000
"""Window assumed for a model nothing describes."""

DEFAULT_OUTPUT_CAP = 32_000
"""The most output a request reserves by default when the model could write more: an answer
longer than this is rare, and every token reserved is a token the history cannot use."""

LOCAL_UNKNOWN_WINDOW = 4_096
"""Window assumed for a local server that did not say its own (llama.cpp, Ollama, LM Studio
whose endpoint failed): the smallest window such servers commonly run a model with. Assuming
more sends requests a smaller server refuses or truncates; the user is told how to set it."""

MIN_OUTPUT_TOKENS = 1_024
"""The least ``max_tokens`` ever sent; a request with less room than this is pruned harder."""

SAFETY_MARGIN = 0.05
"""Share of the window kept free beside input and output, for what the estimate misses."""

MIN_THINKING_ANSWER = 4_096
"""Room an Anthropic extended-thinking budget must leave for the answer (``max_tokens`` must
exceed ``budget_tokens``)."""


@dataclass(frozen=True)
class Limits:
    """One model's request limits in tokens.

    Attributes:
        window: Input plus output of one request.
        input_limit: Input alone (equal to ``window`` where the provider has no separate limit).
        max_output: The ``max_tokens`` each request sends (its output reservation).
        source: Where ``window`` came from: ``server``, ``config``, ``profile``, ``table``,
            ``default``, or ``assumed`` (lowered for a local server that did not say it).
    """

    window: int
    input_limit: int
    max_output: int
    source: str = "default"

    @property
    def margin(self) -> int:
        """Tokens kept free besides input and output."""
        return int(self.window * SAFETY_MARGIN)

    @property
    def input_budget(self) -> int:
        """The most input a request may carry once its output reservation and margin are kept."""
        return max(0, min(self.input_limit, self.window - self.max_output) - self.margin)

    def prune_limit(self, threshold: float) -> int:
        """Input tokens at which the pruning ladder starts: ``threshold`` of :attr:`input_budget`."""
        return int(self.input_budget * threshold)

    def max_tokens_for(self, input_tokens: int) -> int:
        """``max_tokens`` for a request of ``input_tokens``: the reservation, lowered where the
        input is bigger than planned so the sum still fits the window (never below
        :data:`MIN_OUTPUT_TOKENS`)."""
        room = self.window - self.margin - input_tokens
        return max(MIN_OUTPUT_TOKENS, min(self.max_output, room))


# (marker, window, input limit or None, model's max output). The first marker found in the
# model name wins, so more specific markers come first.
_TABLE: tuple[tuple[str, int, int | None, int], ...] = (
    ("gpt-5", 400_000, 272_000, 128_000),
    ("gpt-4.1", 1_047_576, None, 32_768),
    ("gpt-4o", 128_000, None, 16_384),
    ("gpt-oss", 131_072, None, 32_768),
    ("claude-3-5", 200_000, None, 8_192),
    ("claude-3-7", 200_000, None, 64_000),
    ("claude-3", 200_000, None, 4_096),
    ("opus-4-1", 200_000, None, 32_000),
    ("opus-4-0", 200_000, None, 32_000),
    ("claude-opus-4-2", 200_000, None, 32_000),  # dated ids of Opus 4: claude-opus-4-2025…
    ("opus-4-5", 200_000, None, 64_000),
    ("opus-4-6", 200_000, None, 128_000),
    ("sonnet-4-6", 200_000, None, 128_000),
    ("claude", 200_000, None, 64_000),
    ("gemini", 1_048_576, None, 65_536),
    ("deepseek", 128_000, None, 8_192),
    ("grok", 256_000, None, 32_768),
    ("codestral", 256_000, None, 32_768),
    ("mistral", 128_000, None, 32_768),
    ("qwen", 32_768, None, 8_192),
    ("llama", 32_768, None, 8_192),
)
_O_SERIES = (200_000, None, 100_000)


def table_entry(model_name: str) -> tuple[int, int | None, int] | None:
    """ketch's own (window, input limit, max output) for ``model_name``, or None."""
    name = model_name.lower()
    if any(seg.startswith(("o1", "o3", "o4")) for seg in re.split(r"[:/]", name)):
        return _O_SERIES
    for marker, window, input_limit, output in _TABLE:
        if marker in name:
            return window, input_limit, output
    return None


def _positive(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def profile_limits(model: Any) -> tuple[int | None, int | None]:
    """(context window, max output) from a pydantic-ai model's resolved profile, where known."""
    if model is None:
        return None, None
    try:
        profile = model.profile
    except Exception:  # noqa: BLE001 - a profile that cannot resolve just says nothing
        return None, None
    get = getattr(profile, "get", None)
    if get is None:
        return None, None
    return _positive(get("context_window")), _positive(get("anthropic_max_output_tokens"))


def limits_for(
    model_name: str,
    *,
    model: Any = None,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    server_window: int | None = None,
) -> Limits:
    """The :class:`Limits` of ``model_name``.

    Args:
        model_name: The model id (with or without a ``provider:`` / ``vendor/`` prefix).
        model: The built pydantic-ai model, whose profile (and genai-prices data) is consulted.
        context_window: A window from config (connection, model entry or ``[compaction]``).
        max_output_tokens: An output reservation from config.
        server_window: A window the model server reported; wins over everything else.
    """
    entry = table_entry(model_name)
    profile_window, profile_output = profile_limits(model)
    window_sources = (
        ("server", _positive(server_window)),
        ("config", _positive(context_window)),
        ("profile", profile_window),
        ("table", entry[0] if entry else None),
        ("default", DEFAULT_CONTEXT_WINDOW),
    )
    source, window = next((name, value) for name, value in window_sources if value is not None)
    # A separate input limit belongs to the model as ketch's table knows it; a window set by
    # config or a server is the whole truth about that deployment.
    table_input = entry[1] if entry and source in ("profile", "table") else None
    input_limit = min(window, table_input) if table_input else window
    model_output = profile_output or (entry[2] if entry else None)
    configured = _positive(max_output_tokens)
    if configured is not None:
        output = configured
    else:
        # Room the provider already keeps apart from input (GPT-5: 400k - 272k) costs the history
        # nothing; beyond it, reserve at most the default cap and a quarter of the window.
        free = window - input_limit
        output = max(free, min(DEFAULT_OUTPUT_CAP, window // 4))
        if model_output is not None:
            output = min(output, model_output)
    output = max(MIN_OUTPUT_TOKENS, min(output, window // 2))
    return Limits(window=window, input_limit=input_limit, max_output=output, source=source)


def limits_for_connection(conn: Any, *, model: Any = None, server_window: int | None = None) -> Limits:
    """The :class:`Limits` of a resolved ``Connection``: its configured window and output,
    then the ceilings a repo's config set (they only ever lower the result)."""
    limits = limits_for(
        conn.model_name,
        model=model,
        context_window=getattr(conn, "context_window", None),
        max_output_tokens=getattr(conn, "max_output_tokens", None),
        server_window=server_window,
    )
    window_cap = _positive(getattr(conn, "window_ceiling", None))
    output_cap = _positive(getattr(conn, "output_ceiling", None))
    if window_cap is None and output_cap is None:
        return limits
    window = min(limits.window, window_cap or limits.window)
    output = min(limits.max_output, output_cap or limits.max_output, max(MIN_OUTPUT_TOKENS, window // 2))
    if window < limits.window:  # the reservation a window of this size gets, not half of it
        output = min(output, limits_for(conn.model_name, model=model, context_window=window,
                                        max_output_tokens=getattr(conn, "max_output_tokens", None)).max_output)
    source = limits.source if window == limits.window else "config"
    return Limits(window=window, input_limit=min(limits.input_limit, window), max_output=output, source=source)


OPEN_WEIGHT_MARKERS = ("gpt-oss", "qwen", "llama", "mistral", "codestral", "deepseek", "gemma", "phi", "granite")
"""Model families whose weights anyone can run: their window in the table is the family's, not
what a local server runs them with."""


def known_by_name(model_name: str, limits: Limits) -> bool:
    """Whether ``limits`` describe the model itself (a hosted model known by name, which a local
    proxy serves as it is) rather than a guess: not the default, not an open-weight family."""
    name = model_name.lower()
    return limits.source != "default" and not any(marker in name for marker in OPEN_WEIGHT_MARKERS)


def assume_unknown(limits: Limits, *, window: int | None = None, output: int | None = None) -> Limits:
    """``limits`` lowered to what a server that did not say its window is assumed to take:
    at most ``window`` (the output reservation following it) and at most ``output``. A window
    the server or config gave is known and stays as it is."""
    if limits.source in ("server", "config") or (window is None and output is None):
        return limits
    if window is not None and window < limits.window:
        lowered = limits_for("", context_window=window)
        limits = Limits(window=window, input_limit=min(limits.input_limit, window),
                        max_output=min(limits.max_output, lowered.max_output), source="assumed")
    if output is not None and output < limits.max_output:
        limits = Limits(window=limits.window, input_limit=limits.input_limit,
                        max_output=max(MIN_OUTPUT_TOKENS, output), source="assumed")
    return limits


def thinking_floor(wire: str, thinking: Any) -> int:
    """The least ``max_tokens`` a request with ``thinking`` may send on ``wire``: on Anthropic,
    an extended-thinking budget plus room for the answer; 0 elsewhere."""
    if wire != "anthropic-messages" or not thinking:
        return 0
    from pydantic_ai.profiles.anthropic import ANTHROPIC_THINKING_BUDGET_MAP

    budget = ANTHROPIC_THINKING_BUDGET_MAP.get(thinking)  # type: ignore[call-overload]
    return budget + MIN_THINKING_ANSWER if budget else 0


MIN_THINKING_BUDGET = 1_024
"""The least ``budget_tokens`` Anthropic takes for extended thinking."""


def fit_output(limits: Limits, input_tokens: int, wire: str, settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` with the request's ``max_tokens`` (and, on Anthropic, its thinking budget)
    fitted to the window: the reservation lowered so input plus output fit; raised to what an
    extended-thinking budget needs where that fits too, else the budget lowered to half the room
    left (``anthropic_thinking``), or thinking turned off when even that is under Anthropic's
    minimum. ``--think low`` (2,048 + 4,096) in a 4k window no longer asks for 6,144."""
    max_tokens = limits.max_tokens_for(input_tokens)
    floor = thinking_floor(wire, settings.get("thinking"))
    room = limits.window - limits.margin - input_tokens
    if floor and floor <= max(room, max_tokens):
        max_tokens = max(max_tokens, floor)
    elif floor:
        budget = room // 2
        if budget >= MIN_THINKING_BUDGET:
            settings["anthropic_thinking"] = {"type": "enabled", "budget_tokens": budget}
            max_tokens = max(room, budget + MIN_OUTPUT_TOKENS // 2)
        else:
            settings["anthropic_thinking"] = {"type": "disabled"}
    settings["max_tokens"] = max_tokens
    return settings


__all__ = ["DEFAULT_CONTEXT_WINDOW", "LOCAL_UNKNOWN_WINDOW", "Limits", "assume_unknown", "known_by_name", "fit_output", "limits_for", "limits_for_connection", "profile_limits", "table_entry", "thinking_floor"]
