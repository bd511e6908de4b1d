"""OpenRouter's answers -> pydantic-ai parts and details, as pydantic-ai's ``OpenRouterModel`` read them.

``reasoning_details`` become thinking parts (per detail type and index, signatures kept), the
``url_citation`` annotations stay on the answer's text (``provider_details["annotations"]``, where
``protocol.search_rows`` reads the sources), the response's details carry the downstream provider,
OpenRouter's own finish reason and the cost it reports; an ``error`` object inside a 200 answer or
a stream chunk is the HTTP error its ``code`` names.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelResponseStreamEvent, TextPart

from ketch.wire.chat_stream import ChatStream, http_error


def annotations_details(annotations: list[Any]) -> dict[str, Any]:
    return {"annotations": [a for a in annotations if isinstance(a, dict)]}


def usage_details(usage: Any) -> dict[str, Any]:
    """What OpenRouter's ``usage`` adds: the cost, the upstream costs, BYOK, server tool use."""
    out: dict[str, Any] = {}
    if not isinstance(usage, dict):
        return out
    if usage.get("cost"):
        out["cost"] = usage["cost"]
    if isinstance(costs := usage.get("cost_details"), dict):
        for key in ("upstream_inference_cost", "upstream_inference_prompt_cost", "upstream_inference_completions_cost"):
            out[key] = costs.get(key)
    if usage.get("is_byok") is not None:
        out["is_byok"] = usage["is_byok"]
    if isinstance(tools := usage.get("server_tool_use_details"), dict):
        used = {k: tools[k] for k in ("tool_calls_requested", "tool_calls_executed", "web_search_requests")
                if tools.get(k) is not None}
        if used:
            out["server_tool_use"] = used
    return out


def choice_details(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"downstream_provider": data.get("provider")}
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    if native := choice.get("native_finish_reason"):
        out["finish_reason"] = native
    return out


def raise_error(data: Any, model_name: str, *, in_stream: bool) -> None:
    """An ``error`` object OpenRouter sent with status 200: its ``code`` is the HTTP status it stands for."""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        raise http_error(error, data.get("model") or model_name, in_stream=in_stream)


@dataclass
class OpenRouterStream(ChatStream):
    """An OpenRouter stream: ``reasoning_details`` deltas, annotations, the downstream provider and cost."""

    _annotations: list[Any] = field(default_factory=list, init=False)

    def _chunk_extra(self, chunk: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        details = dict(self.provider_details or {})
        if isinstance(chunk.get("choices"), list) and chunk["choices"]:
            delta = chunk["choices"][0].get("delta") if isinstance(chunk["choices"][0], dict) else None
            if isinstance(delta, dict) and isinstance(delta.get("annotations"), list):
                self._annotations.extend(delta["annotations"])
                details["annotations"] = list(self._annotations)
        details.update(usage_details(chunk.get("usage")))
        self.provider_details = details or None
        return iter(())

    def _thinking(self, delta: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        reasoning = delta.get("reasoning_details")
        if not reasoning:
            yield from super()._thinking(delta)
            return
        from pydantic import TypeAdapter
        from pydantic_ai.messages import PartStartEvent
        from pydantic_ai.models._reasoning_details import ReasoningDetail, from_reasoning_detail

        for i, raw in enumerate(reasoning if isinstance(reasoning, list) else []):
            detail = TypeAdapter(ReasoningDetail).validate_python(raw)
            part = from_reasoning_detail(detail, self.provider_name)
            vendor_id = f"reasoning_detail_{detail.type}_{detail.index if detail.index is not None else i}"
            for event in self._parts_manager.handle_thinking_delta(
                vendor_part_id=vendor_id, id=part.id, content=part.content, signature=part.signature,
                provider_name=self.provider_name, provider_details=part.provider_details,
            ):
                if isinstance(event, PartStartEvent):
                    self._boundary("reasoning")
                yield event

    def _stream_error(self, chunk: dict[str, Any]) -> Exception:
        return http_error(chunk["error"], chunk.get("model") or self._model_name)

    def _map_chunk(self, chunk: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        yield from super()._map_chunk(chunk)
        if isinstance(chunk.get("choices"), list) and chunk["choices"]:  # OpenRouter's own finish reason wins
            self.provider_details = {**(self.provider_details or {}), **choice_details(chunk)}

    async def _get_event_iterator(self) -> Any:
        async for event in super()._get_event_iterator():
            yield event
        if self._annotations:  # the sources stay on the answer's text (websearch.normalize reads them)
            texts = [p for p in self._parts_manager.get_parts() if isinstance(p, TextPart)]
            if texts:
                for event in self._parts_manager.handle_text_delta(
                    vendor_part_id=("content", self._content_generation), content="",
                    provider_name=self.provider_name, provider_details=annotations_details(self._annotations),
                ):
                    yield event


__all__ = ["OpenRouterStream", "annotations_details", "choice_details", "raise_error", "usage_details"]
