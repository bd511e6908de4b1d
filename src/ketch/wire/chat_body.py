"""History -> Chat Completions ``messages``, and the request body around them.

The shapes and key orders are the ones the OpenAI SDK sent for pydantic-ai's Chat model (the
golden bodies in ``tests/golden/wire/openai-chat.jsonl`` hold them byte for byte): system,
user, tool and assistant messages; an assistant message's reasoning in the field it came in
(``reasoning_content``, ``reasoning``) or as tagged text; the body's fields in the SDK's order
with the caller's extra fields last.

Each settled history message is encoded once: :class:`MessageMemo` keeps what a message became
while it is the same object with the same parts (ketch's pruning and repairs make a changed
message a new object), for what the last request used. A request's only per-request change
(the empty reasoning field a tool-calling turn after the newest user message gets) is made on
copies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic_ai._thinking_part import render_replayed_thinking
from pydantic_ai._utils import guard_tool_call_id
from pydantic_ai.exceptions import UnexpectedModelBehavior, UserError
from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    CompactionPart,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

THINKING_FIELDS = ("reasoning", "reasoning_content")
"""The reasoning fields pydantic-ai reads from any Chat server (besides a profile's own)."""


class ChatEncoder:
    """Encodes messages for one model: its profile, provider name and dialect."""

    def __init__(self, model: Any, *, string_content: bool = False) -> None:
        self._model = model
        self._string_content = string_content

    @property
    def profile(self) -> Any:
        return self._model.profile

    # ------------------------------------------------------------ requests
    def request(self, message: ModelRequest) -> list[dict[str, Any]]:
        from pydantic_ai.models import _sendable_request_parts

        out: list[dict[str, Any]] = []
        files: list[Any] = []
        role = self.profile.get("openai_system_prompt_role", None)
        for part in _sendable_request_parts(message.parts):
            if isinstance(part, SystemPromptPart):
                out.append({"role": role if role in ("developer", "user") else "system", "content": part.content})
            elif isinstance(part, UserPromptPart):
                out.append(self.user(part))
            elif isinstance(part, ToolReturnPart):
                text, file_content = part.model_response_str_and_user_content()
                files.extend(file_content)
                out.append({"role": "tool", "tool_call_id": guard_tool_call_id(t=part), "content": text})
            else:
                raise UnexpectedModelBehavior(f"Chat Completions cannot carry a {type(part).__name__} here")
        if files:
            out.append(self.user(UserPromptPart(content=files)))
        return out

    def user(self, part: UserPromptPart) -> dict[str, Any]:
        if isinstance(part.content, str):
            return {"role": "user", "content": part.content}
        content: list[dict[str, Any]] = []
        for item in part.content:
            if isinstance(item, CachePoint):
                continue  # no Chat server ketch speaks to takes a breakpoint on user content
            content.append(self._content_item(item))
        return {"role": "user", "content": content}

    def _content_item(self, item: Any) -> dict[str, Any]:
        if isinstance(item, str | TextContent):
            return {"text": item if isinstance(item, str) else item.content, "type": "text"}
        if isinstance(item, ImageUrl) and not item.force_download:
            image: dict[str, Any] = {"url": item.url}
            if item.vendor_metadata:
                image["detail"] = item.vendor_metadata.get("detail", "auto")
            return {"image_url": image, "type": "image_url"}
        if isinstance(item, BinaryContent):
            from pydantic_ai._utils import is_text_like_media_type

            if is_text_like_media_type(item.media_type):
                text = self._model._format_inlined_text_file(item.data.decode("utf-8"), media_type=item.media_type,
                                                             identifier=item.identifier)
                return {"text": text, "type": "text"}
            if item.is_image:
                image = {"url": item.data_uri}
                if item.vendor_metadata:
                    image["detail"] = item.vendor_metadata.get("detail", "auto")
                return {"image_url": image, "type": "image_url"}
            if item.is_document and self.profile.get("openai_chat_supports_document_input", True):
                return {"file": {"file_data": item.data_uri, "filename": f"filename.{item.format}"}, "type": "file"}
        raise UserError(f"{type(item).__name__} ({getattr(item, 'media_type', '?')}) cannot be sent on Chat Completions")

    # ------------------------------------------------------------ responses
    def response(self, message: ModelResponse) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The user message carrying reasoning ahead of the assistant's (rarely any), and the assistant message."""
        texts: list[str] = []
        thinkings: dict[str, list[str]] = {}
        carried: list[str] = []
        calls: list[dict[str, Any]] = []
        profile = self.profile
        mode = profile.get("openai_chat_send_back_thinking_parts", "auto")
        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append(part.content)
            elif isinstance(part, ThinkingPart):
                field = None
                if mode == "auto":
                    field = self._auto_field(part)
                elif mode == "field":
                    field = profile.get("openai_chat_thinking_field", None)
                    if not field:
                        continue
                if field:
                    thinkings.setdefault(field, []).append(part.content)
                else:
                    text, in_user_turn = render_replayed_thinking(part.content, profile)
                    if not in_user_turn:
                        texts.append(text)
                    elif part.content:
                        carried.append(text)
            elif isinstance(part, ToolCallPart):
                call: dict[str, Any] = {"id": guard_tool_call_id(t=part), "type": "function",
                                        "function": {"name": part.tool_name, "arguments": part.args_as_json_str()}}
                extra = (part.provider_details or {}).get("extra_content")
                if extra and self._model.accepts_stateless_artifacts(message, part):
                    call["extra_content"] = extra
                calls.append(call)
            elif isinstance(part, NativeToolCallPart | NativeToolReturnPart | FilePart | CompactionPart):
                continue  # Chat Completions takes none of these back
            else:
                raise UnexpectedModelBehavior(f"Chat Completions cannot replay a {type(part).__name__}")
        carry = {"role": "user", "content": "\n\n".join(carried)} if carried else None
        if not texts and not calls:
            return carry, None
        out: dict[str, Any] = {"role": "assistant"}
        for field, contents in thinkings.items():
            out[field] = "\n\n".join(contents)
        out["content"] = "\n\n".join(texts) if texts else ("" if self._string_content else None)
        if calls:
            out["tool_calls"] = calls
        return carry, out

    def _auto_field(self, part: ThinkingPart) -> str | None:
        custom = self.profile.get("openai_chat_thinking_field", None)
        if part.id and part.id != "content" and part.provider_name == self._model.system and (not custom or part.id == custom):
            return part.id
        return None


class MessageMemo:
    """The encoded form of each settled message, kept while the message is unchanged."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[ModelMessage, tuple[Any, ...], list[dict[str, Any]]]] = {}

    def encode(self, messages: list[ModelMessage], encoder: ChatEncoder) -> Iterator[tuple[ModelMessage, list[dict[str, Any]]]]:
        """``(message, its encoded messages)`` in order; remembers only what this call used."""
        used: dict[int, tuple[ModelMessage, tuple[Any, ...], list[dict[str, Any]]]] = {}
        for message in messages:
            key = id(message)
            parts = tuple(message.parts)
            hit = self._seen.get(key)
            if hit is not None and hit[0] is message and len(hit[1]) == len(parts) and all(
                a is b for a, b in zip(hit[1], parts)
            ):
                encoded = hit[2]
            elif isinstance(message, ModelRequest):
                encoded = encoder.request(message)
            else:
                carry, assistant = encoder.response(message)
                encoded = [m for m in (carry, assistant) if m is not None]
            used[key] = (message, parts, encoded)
            yield message, encoded
        self._seen = used


HISTORY_BREAKPOINTS = "ketch_openai_cache_history"
"""ketch's setting: a ``prompt_cache_breakpoint`` on each request message of the history (GPT-5.6 on)."""
BREAKPOINT = {"mode": "explicit"}
_BREAKPOINT_PARTS = frozenset({"text", "image_url", "input_audio", "file"})
"""The Chat content parts OpenAI takes a breakpoint on."""


def mark_last_block(encoded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One request message's Chat messages with a breakpoint on the last block of the last user or
    tool message that can carry one (a string content becomes one text part: the same text). A copy;
    the memoized messages stay as they were."""
    for index in range(len(encoded) - 1, -1, -1):
        message = encoded[index]
        if message.get("role") not in ("user", "tool"):
            continue
        content = message.get("content")
        if isinstance(content, str) and content:
            parts = [{"type": "text", "text": content, "prompt_cache_breakpoint": BREAKPOINT}]
        elif isinstance(content, list) and content and content[-1].get("type") in _BREAKPOINT_PARTS:
            parts = [*content[:-1], {**content[-1], "prompt_cache_breakpoint": BREAKPOINT}]
        else:
            continue
        return [*encoded[:index], {**message, "content": parts}, *encoded[index + 1 :]]
    return encoded


class HistoryMarks:
    """The marked copy of each request message's encoding, kept while the encoding is the same.

    Every request message of the history carries its breakpoint in every request, so a marker once
    sent is never moved: the bytes before the newest message stay those of the previous request
    (OpenAI does not document a marker as left out of the cached prefix), and the newest request
    message, where the next request's growth starts, always ends on a breakpoint. OpenAI writes the
    latest of them (three and its implicit one) and matches its latest 80."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        self._used: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}

    def start(self) -> HistoryMarks:
        """A new request: what the last one used is what this one may reuse."""
        if self._used:
            self._seen, self._used = self._used, {}
        return self

    def marked(self, encoded: list[dict[str, Any]]) -> list[dict[str, Any]]:
        hit = self._seen.get(id(encoded))
        if hit is None or hit[0] is not encoded:
            hit = (encoded, mark_last_block(encoded))
        self._used[id(encoded)] = hit
        return hit[1]


def backfill_thinking_field(openai_messages: list[dict[str, Any]], profile: Any) -> list[dict[str, Any]]:
    """pydantic-ai's ``auto`` rule: when the assistant messages carry exactly one reasoning field, each
    tool-calling assistant message after the newest user message that lacks it gets it empty (a
    server that wants it, like DeepSeek, refuses the turn otherwise). Changed messages are copies,
    so a memoized message is never altered."""
    if profile.get("openai_chat_send_back_thinking_parts", "auto") != "auto":
        return openai_messages
    custom = profile.get("openai_chat_thinking_field", None)
    names = tuple(n for n in (custom, *THINKING_FIELDS) if n)
    sent = {n for m in openai_messages if m["role"] == "assistant" for n in names if n in m}
    if len(sent) != 1:
        return openai_messages
    (field,) = sent
    last_user = max((i for i, m in enumerate(openai_messages) if m["role"] == "user"), default=-1)
    for i in range(last_user + 1, len(openai_messages)):
        message = openai_messages[i]
        if message["role"] == "assistant" and message.get("tool_calls") and field not in message:
            openai_messages[i] = {**message, field: ""}
    return openai_messages


__all__ = ["HISTORY_BREAKPOINTS", "ChatEncoder", "HistoryMarks", "MessageMemo", "backfill_thinking_field", "mark_last_block"]
