"""pydantic-ai's Groq model as ketch runs it (what it adds is described in ``providers.groq``).

Imported only when a connection is Groq's (``providers.groq.speaks_groq``): loading it loads the
``groq`` SDK (the ``pydantic-ai-slim[groq]`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic_ai.exceptions import UserError
from pydantic_ai.models.groq import GroqModel, GroqStreamedResponse
from pydantic_ai.native_tools import WebSearchTool

from ketch.core.config import Connection
from ketch.providers.groq import is_compound, refusal, sdk_base_url

_NO_KEY = "not-needed"
_AUXILIARY = "this request may not search (privacy mode, a subagent without web_search, or a title, summary or commit message)"


def groq_model(conn: Connection, response_hooks: list[Any], profile: dict[str, Any] | None = None) -> KetchGroqModel:
    """A :class:`KetchGroqModel` for ``conn`` (base URL, key, timeout, retries from the connection)."""
    import httpx
    from groq import AsyncGroq
    from pydantic_ai.providers.groq import GroqProvider

    timeout = httpx.Timeout(conn.timeout, connect=min(conn.timeout, 30.0))
    client = AsyncGroq(
        api_key=conn.api_key or _NO_KEY,
        base_url=sdk_base_url(conn.base_url),
        max_retries=conn.max_retries,
        timeout=timeout,
        http_client=httpx.AsyncClient(timeout=timeout, event_hooks={"response": response_hooks}),
    )
    extra: dict[str, Any] = {"profile": profile} if profile else {}
    return KetchGroqModel(conn.model_name, provider=GroqProvider(groq_client=client), **extra)


def readable(tools: Any) -> Any:
    """``executed_tools`` with ``arguments`` that are not JSON kept as text under ``unreadable_arguments``
    (the SDK parses them and would fail the whole answer)."""
    if not isinstance(tools, list):
        return tools
    fixed = []
    for tool in tools:
        raw = getattr(tool, "arguments", "")
        try:
            json.loads(raw or "{}")
        except (TypeError, ValueError):
            tool = tool.model_copy(update={"arguments": json.dumps({"unreadable_arguments": str(raw)}, allow_nan=False)})
        fixed.append(tool)
    return fixed


@dataclass
class KetchGroqStreamedResponse(GroqStreamedResponse):
    def _map_executed_tools(self, executed_tools: Any) -> Iterator[Any]:
        yield from super()._map_executed_tools(readable(executed_tools))


_STREAM_FIELDS = ("model_request_parameters", "_response", "_model_name", "_model_profile", "_provider_name",
                  "_model_id_namespace", "_provider_url", "_provider_timestamp")


@dataclass(init=False)
class KetchGroqModel(GroqModel):
    """``GroqModel`` that keeps function tools off compound systems and refuses a compound request
    that may not search."""

    def prepare_request(self, model_settings: Any, model_request_parameters: Any) -> Any:
        if is_compound(self.model_name) and not any(
            isinstance(t, WebSearchTool) for t in model_request_parameters.native_tools
        ):
            raise UserError(refusal(self.model_name, _AUXILIARY))
        return super().prepare_request(model_settings, model_request_parameters)

    def _get_tool_choice(self, model_settings: Any, model_request_parameters: Any) -> Any:
        if is_compound(self.model_name):
            return [], None  # compound takes no user-provided tools
        return super()._get_tool_choice(model_settings, model_request_parameters)

    def _process_response(self, response: Any) -> Any:
        for choice in getattr(response, "choices", None) or []:
            if choice.message.executed_tools:
                choice.message.executed_tools = readable(choice.message.executed_tools)
        return super()._process_response(response)

    async def _process_streamed_response(self, response: Any, model_request_parameters: Any) -> Any:
        streamed = await super()._process_streamed_response(response, model_request_parameters)
        return KetchGroqStreamedResponse(**{name: getattr(streamed, name) for name in _STREAM_FIELDS})
