"""Mistral's Conversations API (``POST {base}/conversations``) as a pydantic-ai model, over httpx.

Mistral's ``web_search`` connector runs only in this API, not in Chat Completions, so a Mistral
session whose route has hosted search (``websearch``: the ``mistral-conversations`` protocol) is
built on this model; every other Mistral session stays on Chat Completions. Each request is
stateless: ``store: false`` and the whole history as ``inputs``, so ketch's history and pruning stay
the only record of the conversation. Field names follow Mistral's published schema; where each one
comes from:

- [SDK] ``mistralai/client-python`` ``src/mistralai/client/models/``: ``conversationstreamrequest``
  (``inputs``, ``stream``, ``store``, ``instructions``, ``tools``, ``completion_args``, ``model``),
  ``inputentries`` (the entry kinds ``inputs`` takes: ``message.input``, ``message.output``,
  ``function.call``, ``function.result``, ``tool.execution``), ``functiontool`` / ``websearchtool``
  (``{"type": "function", "function": {...}}``, ``{"type": "web_search"}``), ``completionargs``
  (``max_tokens``, ``temperature``, ``top_p``, ``reasoning_effort``), ``ssetypes`` and the
  ``*event`` models (``message.output.delta`` with ``content`` a string or one chunk,
  ``function.call.delta`` with ``tool_call_id``/``name``/``arguments``, ``tool.execution.started``
  / ``.delta`` / ``.done`` with ``id``/``name``/``arguments``, ``conversation.response.done`` with
  ``usage``, ``conversation.response.error`` with ``message``/``code``), ``toolreferencechunk``
  (``tool``, ``title``, ``url``, ``favicon``, ``description``), ``conversationusageinfo``
  (``prompt_tokens``, ``completion_tokens``, ``connector_tokens``, ``connectors``).
- [DOCS] docs.mistral.ai agents/tools/built-in/websearch (the ``tool.execution`` entry named
  ``web_search``, ``tool_reference`` chunks inside the ``message.output`` content, ``usage.connectors``)
  and the Conversations streaming section (``event:``/``data:`` frames, the event list).

A search maps to pydantic-ai's parts this way: a ``tool.execution`` named ``web_search`` (or
``web_search_premium``) is a ``NativeToolCallPart`` (its id and ``arguments``); the ``tool_reference``
chunks of the answer that follows it are that call's ``NativeToolReturnPart`` (the chunks kept as
they came). Replay sends them back as the provider's own entries: ``tool.execution``, then the
``message.output`` whose content is the text and the same ``tool_reference`` chunks.

It is one thing at this length: one wire in both directions (history -> entries, stream -> parts),
which must agree on the same entry shapes to replay what they read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponseStreamEvent,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import ModelProfile, merge_profile
from pydantic_ai.usage import RequestUsage

from ketch.wire.http import WireClient, encode_body, read_lines
from ketch.wire.sse import Frame, json_events

PROVIDER = "mistral"
SEARCH_CONNECTORS = frozenset({"web_search", "web_search_premium"})  # [SDK] builtinconnectors
_EFFORT = {False: "none"}  # [SDK] reasoningeffort; any other level asks for thinking as Mistral's own model does
_TERMINAL = frozenset({"conversation.response.done", "conversation.response.error"})


# ---------------------------------------------------------------- request: history -> inputs
def _user_content(part: UserPromptPart) -> str | list[dict[str, Any]]:
    if isinstance(part.content, str):
        return part.content
    chunks: list[dict[str, Any]] = []
    for item in part.content:
        if isinstance(item, str):
            chunks.append({"type": "text", "text": item})
        elif getattr(item, "kind", "") == "image-url":
            chunks.append({"type": "image_url", "image_url": item.url})  # [SDK] imageurlchunk
        elif getattr(item, "is_image", False):
            chunks.append({"type": "image_url", "image_url": item.data_uri})
        else:
            raise UnexpectedModelBehavior(f"the Mistral Conversations API takes no {type(item).__name__} input here")
    return chunks


def _request_entries(message: ModelRequest) -> Iterator[dict[str, Any]]:
    from pydantic_ai.models import _sendable_request_parts  # the adapters' own rendering of legacy parts

    for part in _sendable_request_parts(message.parts):
        if isinstance(part, UserPromptPart):
            yield {"object": "entry", "type": "message.input", "role": "user", "content": _user_content(part)}
        elif isinstance(part, ToolReturnPart):
            yield {"object": "entry", "type": "function.result", "tool_call_id": part.tool_call_id,
                   "result": part.model_response_str()}
        elif isinstance(part, RetryPromptPart):
            if part.tool_name and part.tool_call_id:
                yield {"object": "entry", "type": "function.result", "tool_call_id": part.tool_call_id,
                       "result": part.model_response()}
            else:
                yield {"object": "entry", "type": "message.input", "role": "user", "content": part.model_response()}


def _response_entries(message: ModelResponse) -> Iterator[dict[str, Any]]:
    """One ``ModelResponse`` as Mistral's own entries: each ``tool.execution`` of a search, then the
    ``message.output`` after it with its text and that search's ``tool_reference`` chunks as they came
    (the stream reports them last; they go back inside the answer they cited), then function calls."""
    ours = message.provider_name == PROVIDER
    references = {p.tool_call_id: [c for c in p.content if isinstance(c, dict)] for p in message.parts
                  if isinstance(p, NativeToolReturnPart) and p.provider_name == PROVIDER and isinstance(p.content, list)}
    chunks: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []

    def flush() -> Iterator[dict[str, Any]]:
        chunks.extend(pending)
        pending.clear()
        if chunks:
            yield {"object": "entry", "type": "message.output", "role": "assistant", "content": list(chunks)}
            chunks.clear()

    for part in message.parts:
        if isinstance(part, TextPart) and part.content:
            chunks.append({"type": "text", "text": part.content})
        elif isinstance(part, ThinkingPart) and ours and part.content:  # [SDK] thinkchunk
            chunks.append({"type": "thinking", "thinking": [{"type": "text", "text": part.content}]})
        elif isinstance(part, NativeToolCallPart) and part.provider_name == PROVIDER:
            yield from flush()
            name = (part.provider_details or {}).get("name", "web_search")
            yield {"object": "entry", "type": "tool.execution", "name": name,
                   "arguments": part.args_as_json_str() if part.args else ""}
            pending.extend(references.get(part.tool_call_id, []))
        elif isinstance(part, ToolCallPart):
            yield from flush()
            yield {"object": "entry", "type": "function.call", "tool_call_id": part.tool_call_id,
                   "name": part.tool_name, "arguments": part.args_as_json_str()}
    yield from flush()


def _tools(params: ModelRequestParameters) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for tool in [*params.function_tools, *params.output_tools]:
        function: dict[str, Any] = {"name": tool.name, "description": tool.description or "",
                                    "parameters": tool.parameters_json_schema}
        if tool.strict is not None:
            function["strict"] = tool.strict
        tools.append({"type": "function", "function": function})
    if any(isinstance(t, WebSearchTool) for t in params.native_tools):
        tools.append({"type": "web_search"})  # the connector, only when the route put WebSearchTool here
    return tools


# ---------------------------------------------------------------- the model
@dataclass(init=False)
class MistralConversationsModel(Model[Any]):
    """Mistral's Conversations API, streamed, stateless (``store: false``)."""

    _model_name: str = field(repr=False)
    _base_url: str = field(repr=False)

    def __init__(self, model_name: str, *, base_url: str, api_key: str, timeout: float = 300.0,
                 max_retries: int = 2, response_hooks: list[Any] | None = None,
                 profile: dict[str, Any] | None = None) -> None:
        self._model_name = model_name
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._hooks = list(response_hooks or [])
        self._client: Any = None
        super().__init__(profile=profile)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def system(self) -> str:
        return PROVIDER

    @property
    def base_url(self) -> str:
        return self._base_url

    @classmethod
    def supported_native_tools(cls) -> frozenset[type[Any]]:
        return frozenset({WebSearchTool})  # the web_search connector; nothing else is mapped

    def _provider_model_profile(self) -> ModelProfile:
        from pydantic_ai.profiles.mistral import mistral_model_profile

        return merge_profile(mistral_model_profile(self._model_name),
                             ModelProfile(supported_native_tools=frozenset({WebSearchTool})))

    def body(self, messages: list[ModelMessage], settings: dict[str, Any], params: ModelRequestParameters) -> dict[str, Any]:
        """The JSON of one Conversations request for ``messages``."""
        inputs: list[dict[str, Any]] = []
        system: list[str] = []
        for message in messages:
            if isinstance(message, ModelRequest):
                system += [p.content for p in message.parts if isinstance(p, SystemPromptPart) and p.content]
                inputs.extend(_request_entries(message))
            elif isinstance(message, ModelResponse):
                inputs.extend(_response_entries(message))
        system += [p.content for p in self._get_instruction_parts(messages, params) or [] if p.content]
        body: dict[str, Any] = {"model": self._model_name, "inputs": inputs, "stream": True, "store": False}
        if system:
            body["instructions"] = "\n\n".join(system)
        if tools := _tools(params):
            body["tools"] = tools
        args = {k: settings[k] for k in ("max_tokens", "temperature", "top_p") if settings.get(k) is not None}
        if params.thinking is not None and not self.profile.get("thinking_always_enabled", False):
            args["reasoning_effort"] = _EFFORT.get(params.thinking, "high")  # type: ignore[call-overload]
        elif settings.get("openai_reasoning_effort") in ("low", "medium", "high"):  # a model declared to reason
            args["reasoning_effort"] = settings["openai_reasoning_effort"]
        if not params.allow_text_output and params.output_tools:
            args["tool_choice"] = "any"
        if args:
            body["completion_args"] = args
        return body

    async def request(self, messages: list[ModelMessage], model_settings: Any,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        """A whole answer: the same streamed request, read to its end (the API's own events either way)."""
        async with self.request_stream(messages, model_settings, model_request_parameters) as stream:
            async for _ in stream:
                pass
        return stream.get()

    @asynccontextmanager
    async def request_stream(self, messages: list[ModelMessage], model_settings: Any,
                             model_request_parameters: ModelRequestParameters,
                             run_context: Any = None) -> AsyncIterator[StreamedResponse]:
        check_allow_model_requests()
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        body = self.body(messages, dict(settings or {}), params)
        response = await self._send(body)
        try:
            yield ConversationsStream(model_request_parameters=params, _response=response,
                                      _model_name=self._model_name, _provider_url=self._base_url)
        finally:
            await response.aclose()

    def _http(self) -> WireClient:
        if self._client is None:
            self._client = WireClient(model_name=self._model_name, headers={"authorization": f"Bearer {self._api_key}"},
                                      connect_timeout=min(self._timeout, 30.0), idle_timeout=self._timeout,
                                      max_retries=self._max_retries, response_hooks=self._hooks)
        return self._client

    async def _send(self, body: dict[str, Any]) -> Any:
        """POST the request (``wire.http``: strict JSON, retries, errors as model errors)."""
        return await self._http().post(f"{self._base_url}/conversations", encode_body(body), stream=True)


# ---------------------------------------------------------------- response: events -> parts
@dataclass
class ConversationsStream(StreamedResponse):
    """One Conversations stream as pydantic-ai events (see the module docstring for the mapping)."""

    _response: Any = None
    _model_name: str = ""
    _provider_url: str = ""
    _timestamp: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    _usage_received: bool | None = field(default=False, init=False)
    _named_calls: set[str] = field(default_factory=set, init=False)
    _searches: list[str] = field(default_factory=list, init=False)
    _references: dict[str, list[dict[str, Any]]] = field(default_factory=dict, init=False)
    _function_calls: int = field(default=0, init=False)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        # a body that stops before its end event is a broken answer, never a finished one (wire.sse)
        lines = read_lines(self._response, self._model_name)
        async for frame, event in json_events(lines, model_name=self._model_name,
                                              is_end=lambda frame, event: _kind(frame, event) in _TERMINAL):
            for out in self._map(_kind(frame, event), event):
                yield out
        for call_id in self._searches:
            result = NativeToolReturnPart(tool_name=WebSearchTool.kind, content=self._references.get(call_id, []),
                                          tool_call_id=call_id, provider_name=PROVIDER)
            yield self._parts_manager.handle_part(vendor_part_id=f"result:{call_id}", part=result)
        self.finish_reason = "tool_call" if self._function_calls else "stop"

    def _map(self, kind: Any, event: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        if kind == "conversation.response.started":
            self.provider_response_id = str(event.get("conversation_id") or "") or None
        elif kind == "message.output.delta":
            yield from self._content(event)
        elif kind == "function.call.delta":
            yield from self._function_call(event)
        elif kind in ("tool.execution.started", "tool.execution.delta", "tool.execution.done"):
            yield from self._execution(kind, event)
        elif kind == "conversation.response.done":
            self._usage_from(event.get("usage"))
        elif kind == "conversation.response.error":
            code = event.get("code")
            status = code if isinstance(code, int) and 400 <= code < 600 else 500
            raise ModelHTTPError(status, self._model_name, {"message": str(event.get("message") or "error"),
                                                            "code": code}, in_stream=True)

    def _content(self, event: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        content, message_id = event.get("content"), str(event.get("id") or "message")
        if isinstance(event.get("model"), str):
            self._model_name = event["model"]
        if isinstance(content, str):
            chunk: Any = {"type": "text", "text": content}
        else:
            chunk = content
        if not isinstance(chunk, dict):
            return
        if chunk.get("type") == "text" and isinstance(chunk.get("text"), str) and chunk["text"]:
            yield from self._parts_manager.handle_text_delta(vendor_part_id=f"text:{message_id}", content=chunk["text"])
        elif chunk.get("type") == "thinking":
            for thought in chunk.get("thinking") or []:
                if isinstance(thought, dict) and isinstance(thought.get("text"), str):
                    yield from self._parts_manager.handle_thinking_delta(
                        vendor_part_id=f"thinking:{message_id}", content=thought["text"], provider_name=PROVIDER)
        elif chunk.get("type") == "tool_reference" and chunk.get("tool") in SEARCH_CONNECTORS:
            if not self._searches:  # references with no execution event: the search is still Mistral's
                yield from self._execution("tool.execution.started",
                                           {"id": f"search_{message_id}", "name": chunk["tool"], "arguments": ""})
            self._references.setdefault(self._searches[-1], []).append(dict(chunk))

    def _function_call(self, event: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        call_id = str(event.get("tool_call_id") or event.get("id") or "")
        first = call_id not in self._named_calls
        if first:
            self._named_calls.add(call_id)
            self._function_calls += 1
        delta = self._parts_manager.handle_tool_call_delta(
            vendor_part_id=f"call:{call_id}", tool_name=event.get("name") if first else None,
            args=event.get("arguments") if isinstance(event.get("arguments"), str) else None,
            tool_call_id=call_id or None)
        if delta is not None:
            yield delta

    def _execution(self, kind: str, event: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        name, exec_id = event.get("name"), str(event.get("id") or "")
        if name not in SEARCH_CONNECTORS or not exec_id:
            return  # ketch sends no other connector
        arguments = event.get("arguments") if isinstance(event.get("arguments"), str) else ""
        if kind == "tool.execution.started" and exec_id not in self._searches:
            self._searches.append(exec_id)
            call = NativeToolCallPart(tool_name=WebSearchTool.kind, args=arguments or None, tool_call_id=exec_id,
                                      provider_name=PROVIDER, provider_details={"name": name})
            yield self._parts_manager.handle_part(vendor_part_id=f"search:{exec_id}", part=call)
        elif kind == "tool.execution.delta" and arguments:
            delta = self._parts_manager.handle_tool_call_delta(vendor_part_id=f"search:{exec_id}", args=arguments)
            if delta is not None:
                yield delta

    def _usage_from(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        details = {k: v for k, v in (("connector_tokens", usage.get("connector_tokens")),) if isinstance(v, int)}
        connectors = usage.get("connectors")
        if isinstance(connectors, dict):
            details.update({f"connector_calls.{k}": v for k, v in connectors.items() if isinstance(v, int)})
        self._add_usage(RequestUsage(input_tokens=_int(usage.get("prompt_tokens")),
                                     output_tokens=_int(usage.get("completion_tokens")), details=details),
                        reported=True)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def provider_name(self) -> str:
        return PROVIDER

    @property
    def provider_url(self) -> str:
        return self._provider_url

    @property
    def timestamp(self) -> datetime:
        return self._timestamp


def _kind(frame: Frame, event: dict[str, Any]) -> Any:
    """The event's ``type``, or its ``event:`` name when the payload has none."""
    return event.get("type", frame.event)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
