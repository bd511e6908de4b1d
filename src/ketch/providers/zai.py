"""Z.AI (GLM) on its Chat Completions endpoint, with the endpoint's own ``web_search`` tool.

pydantic-ai's ``ZaiModel`` speaks Z.AI's dialect (``reasoning_content``, ``thinking``) but has no
hosted search. When the session routes search here (``websearch.capability``: the ``zai-chat``
protocol), the request carries Z.AI's tool next to the function tools::

    {"type": "web_search", "web_search": {"enable": true, "search_engine": "search_pro_jina",
                                          "search_result": true}}

and the answer reports what was searched in a top-level ``web_search`` array (in the completion,
or in a stream chunk): rows with ``title``, ``link``, ``content``, ``media``, ``refer``... Those rows
become one provider-executed ``web_search`` call and its result in the response, so the UI and
exports get source rows and the history keeps Z.AI's rows as they came. Z.AI's API takes no search
parts back: a later turn replays the answer text alone, which is its own shape.

This is only the chat tool. Z.AI's standalone Web Search API (``POST /paas/v4/web_search``) is a
separate product and is never called.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic_ai.messages import ModelResponseStreamEvent, NativeToolCallPart, NativeToolReturnPart
from pydantic_ai.models.openai import OpenAIStreamedResponse
from pydantic_ai.models.zai import ZaiModel, ZaiStreamedResponse
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import merge_profile
from pydantic_ai.profiles.openai import OpenAIModelProfile

PROVIDER = "zai"
HOSTS = frozenset({"api.z.ai", "open.bigmodel.cn"})
"""Z.AI's own API hosts: a connection there is built on this model whatever its preset."""
SEARCH_ENGINE = "search_pro_jina"
"""The engine Z.AI's chat ``web_search`` tool takes on its general endpoint."""


def speaks_zai(preset: str, base_url: str | None) -> bool:
    """Whether a Chat Completions connection is Z.AI's own API (its preset, or one of its hosts)."""
    from ketch.providers.base_url import host_of

    return preset == PROVIDER or host_of(base_url) in HOSTS


def search_tool() -> dict[str, Any]:
    """Z.AI's chat ``web_search`` tool, asking for the searched rows back (``search_result``)."""
    return {"type": "web_search", "web_search": {"enable": True, "search_engine": SEARCH_ENGINE, "search_result": True}}


def search_parts(rows: Any, call_id: str) -> tuple[NativeToolCallPart, NativeToolReturnPart] | None:
    """The provider-executed call and result for one ``web_search`` array, or None if it holds no row."""
    if not isinstance(rows, list) or not any(isinstance(r, dict) for r in rows):
        return None
    kept = [dict(r) for r in rows if isinstance(r, dict)]
    call = NativeToolCallPart(tool_name=WebSearchTool.kind, args={}, tool_call_id=call_id, provider_name=PROVIDER)
    result = NativeToolReturnPart(tool_name=WebSearchTool.kind, content=kept, tool_call_id=call_id,
                                  provider_name=PROVIDER)
    return call, result


def _web_search_field(payload: Any) -> Any:
    """The top-level ``web_search`` of a completion or chunk (the openai SDK keeps unknown fields)."""
    extra = getattr(payload, "model_extra", None) or {}
    return extra.get("web_search", getattr(payload, "web_search", None))


@dataclass(init=False)
class ZaiSearchModel(ZaiModel):
    """``ZaiModel`` that puts Z.AI's ``web_search`` tool on the wire when the request carries
    pydantic-ai's ``WebSearchTool`` (only then) and reads the ``web_search`` rows back."""

    @cached_property
    def profile(self) -> OpenAIModelProfile:  # type: ignore[override]
        # Lets WebSearchTool through the Chat model's check; this class, not `web_search_options`, sends it.
        native = OpenAIModelProfile(openai_chat_supports_web_search=True, supported_native_tools=frozenset({WebSearchTool}))
        return merge_profile(super().profile, native)  # type: ignore[return-value]

    def _get_tool_choice(self, model_settings: Any, model_request_parameters: Any) -> tuple[list[Any], Any]:
        tools, choice = super()._get_tool_choice(model_settings, model_request_parameters)
        if any(isinstance(t, WebSearchTool) for t in model_request_parameters.native_tools):
            tools = [*tools, search_tool()]
            choice = choice or "auto"
        return tools, choice

    def _get_web_search_options(self, model_request_parameters: Any) -> None:
        return None  # Z.AI takes its own tool, never OpenAI's `web_search_options`

    def _process_response(self, response: Any, **kwargs: Any) -> Any:
        result = super()._process_response(response, **kwargs)
        parts = search_parts(_web_search_field(response), f"zai_search_{getattr(response, 'id', '') or 'result'}")
        if parts is not None:
            result.parts = [*parts, *result.parts]
        return result

    @property
    def _streamed_response_cls(self) -> type[OpenAIStreamedResponse]:
        return ZaiSearchStreamedResponse


@dataclass
class ZaiSearchStreamedResponse(ZaiStreamedResponse):
    """A Z.AI stream: a chunk's ``web_search`` rows become the search call and result, before the
    text of that chunk; the same rows repeated in a later chunk are one search, not two."""

    _pending_search: list[Any] = field(default_factory=list, init=False)
    _seen_rows: set[str] = field(default_factory=set, init=False)
    _searches: int = field(default=0, init=False)

    def _map_chunk_provider_details(self, chunk: Any) -> dict[str, Any] | None:
        from ketch.core import strict_json

        rows = _web_search_field(chunk)
        key = strict_json.dumps(rows, sort_keys=True, default=str) if rows else ""
        if rows and key not in self._seen_rows:
            self._seen_rows.add(key)
            self._pending_search.append((rows, getattr(chunk, "id", "") or ""))
        return super()._map_chunk_provider_details(chunk)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        async for event in super()._get_event_iterator():
            for search_event in self._flush_search():
                yield search_event
            yield event
        for search_event in self._flush_search():
            yield search_event

    def _flush_search(self) -> Iterator[ModelResponseStreamEvent]:
        while self._pending_search:
            rows, chunk_id = self._pending_search.pop(0)
            self._searches += 1
            parts = search_parts(rows, f"zai_search_{chunk_id or 'stream'}_{self._searches}")
            if parts is None:
                continue
            for n, part in enumerate(parts):
                yield self._parts_manager.handle_part(vendor_part_id=f"zai-web-search-{self._searches}-{n}", part=part)
