"""The JSON of a Gemini ``generateContent`` request, as the bytes google-genai sent for ketch.

Field names, their order and the spelling of each nested field are the SDK's (``models.py``
``_*_to_mldev`` converters, then ``json.dumps`` with its default separators): camelCase where the
converter renames (``functionCall``, ``inlineData``, ``thoughtSignature``, ``generationConfig``),
the pydantic field names where it passes a model through (``parameters_json_schema``,
``mime_type``, ``include_thoughts``, ``tool_type``), bytes as URL-safe base64. The mapping from
pydantic-ai's messages is pydantic-ai's ``GoogleModel`` (``_map_model_request``,
``_content_model_response``): thought signatures go back on the part after a thinking part, the
first function call of a turn carries the documented skip signature when it has none, tool
results are split from other user parts, server-side search parts go back only under their
provider's own ids. ``tests/golden/wire/gemini.jsonl`` holds what this must produce.

Each history message is encoded once, when it is first sent: :class:`HistoryEncoder` keeps the
JSON text of every message the last two requests used (keyed by identity and checked against
the message's parts, as ketch never changes a sent message in place), so a long session pays
for its newest messages only.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Callable

from pydantic_ai import _utils
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import (
    ERROR_OUTCOMES,
    BinaryContent,
    CachePoint,
    CompactionPart,
    FilePart,
    FileUrl,
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
    UploadedFile,
    UserPromptPart,
    VideoUrl,
    _tool_result_provenance_tags,
)
from pydantic_ai.native_tools import WebSearchTool

SKIP_SIGNATURE = b"skip_thought_signature_validator"
"""Google's documented stand-in for a first function call that has no signature of its own."""
SEARCH_TOOL_TYPE = "GOOGLE_SEARCH_WEB"


def b64(data: bytes) -> str:
    """Bytes as the SDK writes them into JSON (``_common.encode_unserializable_types``)."""
    return base64.urlsafe_b64encode(data).decode("ascii")


def dumps(value: Any) -> str:
    """JSON as the SDK sends it (default separators, ASCII), but strict: NaN is an error."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError as exc:
        raise UnexpectedModelBehavior(f"the request holds a number JSON cannot carry ({exc})") from None


# ---------------------------------------------------------------- requests
def _file_part(file: Any) -> dict[str, Any]:
    if isinstance(file, BinaryContent):
        part: dict[str, Any] = {"inlineData": {"data": b64(file.data), "mime_type": file.media_type}}
    elif isinstance(file, UploadedFile) or (isinstance(file, VideoUrl) and file.is_youtube):
        part = {"fileData": {"file_uri": getattr(file, "file_id", None) or file.url, "mime_type": file.media_type}}
    elif isinstance(file, FileUrl) and _utils.is_google_files_api_url(file.url) and not file.force_download:
        part = {"fileData": {"file_uri": file.url, "mime_type": file.media_type}}
    else:
        raise UnexpectedModelBehavior(f"the Gemini wire sends files inline or by Files API URL, not {type(file).__name__}")
    if file.vendor_metadata:
        meta = dict(file.vendor_metadata)
        head = {k: meta.pop(k) for k in ("media_resolution", "media_processing") if k in meta}
        part = {**({"mediaResolution": head["media_resolution"]} if "media_resolution" in head else {}), **part}
        if meta:
            part["videoMetadata"] = meta
        if "media_processing" in head:
            part["mediaProcessing"] = head["media_processing"]
    return part


def _user_parts(part: UserPromptPart) -> list[dict[str, Any]]:
    if isinstance(part.content, str):
        return [{"text": part.content}]
    out: list[dict[str, Any]] = []
    for item in part.content:
        if isinstance(item, (str, TextContent)):
            out.append({"text": item if isinstance(item, str) else item.content})
        elif isinstance(item, CachePoint):
            continue  # Gemini caches implicitly; there is no marker to send
        else:
            out.append(_file_part(item))
    return out


def _tool_return(part: ToolReturnPart, inline_mime_types: tuple[str, ...]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``functionResponse`` of a tool result, and the framed files it cannot carry itself."""
    inner: list[dict[str, Any]] = []
    fallback: list[dict[str, Any]] = []
    refs: list[str] = []
    for file in part.files:
        if file.media_type in inline_mime_types and isinstance(file, BinaryContent):
            inner.append({"inline_data": {"mime_type": file.media_type, "data": b64(file.data)}})
        else:
            refs.append(f"See file {file.identifier}.")
            open_tag, close_tag = _tool_result_provenance_tags(part.tool_name, part.tool_call_id, file.identifier)
            fallback += [{"text": open_tag}, _file_part(file), {"text": close_tag}]
    if part.outcome in ERROR_OUTCOMES:
        response: Any = {"error": part.model_response_str(wrap_if_error=False)}
    else:
        response = part.model_response_object(wrap_if_error=False)
        if _utils.contains_ref(response):  # Gemini reads "$ref" as a reference to a part
            response = {"output": part.model_response_str(wrap_if_error=False)}
        if refs:
            response = {"output": [response, *refs]}
    body: dict[str, Any] = {"parts": inner} if inner else {}
    body.update(id=part.tool_call_id, name=part.tool_name, response=response)
    return {"functionResponse": body}, fallback


def request_contents(message: ModelRequest, inline_mime_types: tuple[str, ...]) -> tuple[list[dict[str, Any]], list[str]]:
    """The user contents of one request (tool results split from other parts, as Gemini reads
    a content with a ``functionResponse`` as the model's), and its system prompts."""
    from pydantic_ai.models import _sendable_request_parts

    parts: list[dict[str, Any]] = []
    media: list[dict[str, Any]] = []
    system: list[str] = []
    for part in _sendable_request_parts(message.parts):
        if isinstance(part, SystemPromptPart):
            system.append(part.content)
        elif isinstance(part, UserPromptPart):
            parts.extend(_user_parts(part))
        elif isinstance(part, ToolReturnPart):
            response, framed = _tool_return(part, inline_mime_types)
            parts.append(response)
            media.extend(framed)
        else:
            raise UnexpectedModelBehavior(f"the Gemini wire cannot send a {type(part).__name__}")
    if media:
        at = max(i for i, p in enumerate(parts) if "functionResponse" in p) + 1
        parts[at:at] = media
    contents: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for part in parts:
        if run and "functionResponse" in run[-1] and "functionResponse" not in part:
            contents.append({"parts": run, "role": "user"})
            run = []
        run.append(part)
    if run:
        contents.append({"parts": run, "role": "user"})
    return contents, system


def _signature(raw: Any) -> bytes | None:
    return base64.b64decode(raw) if raw else None


def _signed(part: dict[str, Any], signature: bytes | None) -> dict[str, Any]:
    if signature is not None:
        part["thoughtSignature"] = b64(signature)
    return part


def response_content(message: ModelResponse, accepts: Callable[..., bool], *, tool_combination: bool) -> dict[str, Any] | None:
    """One ``model`` content for a response, or None when nothing of it goes back."""
    accepted = accepts(message, None)
    parts: list[dict[str, Any]] = []
    pending: str | None = None
    first_call = True
    for item in message.parts:
        signature = None
        if item.provider_details and (accepted or accepts(message, item)):
            signature = _signature(item.provider_details.get("thought_signature"))
        if signature is None and pending is not None:
            signature = base64.b64decode(pending)
        pending = None
        part: dict[str, Any] | None = None
        if isinstance(item, ToolCallPart):
            call = {"id": item.tool_call_id, "args": item.args_as_dict(), "name": item.tool_name}
            part = _signed({"functionCall": {k: v for k, v in call.items() if v is not None}}, signature)
            if signature is None and first_call:
                part["thoughtSignature"] = b64(SKIP_SIGNATURE)
            first_call = False
        elif isinstance(item, TextPart):
            part = _signed({"text": item.content}, signature)
        elif isinstance(item, ThinkingPart):
            if item.signature and accepts(message, item):
                pending = item.signature  # a thinking part's own signature belongs to the part after it
            part = _signed({"text": item.content, "thought": True}, signature) if item.content else None
        elif isinstance(item, (NativeToolCallPart, NativeToolReturnPart)):
            part = _native_part(item, accepts(message, item), signature, tool_combination)
        elif isinstance(item, FilePart):
            part = _signed({"inlineData": {"data": b64(item.content.data), "mime_type": item.content.media_type}}, signature)
        elif isinstance(item, CompactionPart):
            part = None
        else:
            raise UnexpectedModelBehavior(f"the Gemini wire cannot replay a {type(item).__name__}")
        if part:
            parts.append(part)
    return {"parts": parts, "role": "model"} if parts else None


def _native_part(item: NativeToolCallPart | NativeToolReturnPart, accepted: bool, signature: bytes | None,
                 tool_combination: bool) -> dict[str, Any] | None:
    """A hosted search goes back as Gemini's own ``toolCall``/``toolResponse`` only under the id
    Gemini gave it, to a model that takes them; one rebuilt from grounding metadata does not."""
    if not accepted or item.tool_name != WebSearchTool.kind or not tool_combination:
        return None
    if item.tool_call_id.startswith(_utils.TOOL_CALL_ID_PREFIX):
        return None
    head = {"thoughtSignature": b64(signature)} if signature is not None else {}  # the SDK writes it first here
    if isinstance(item, NativeToolCallPart):
        return {**head, "toolCall": {"id": item.tool_call_id, "tool_type": SEARCH_TOOL_TYPE, "args": item.args_as_dict()}}
    content = item.content if _utils.is_str_dict(item.content) else {"result": item.content}
    response = {k: v for k, v in content.items() if k != "sources"}  # ketch added these from the grounding metadata
    return {**head, "toolResponse": {"id": item.tool_call_id, "tool_type": SEARCH_TOOL_TYPE, "response": response}}


# ---------------------------------------------------------------- the once-per-message memo
@dataclass(frozen=True)
class Encoded:
    """One message as sent: its contents' JSON text, its first content's role, its system prompts."""

    message: ModelMessage
    parts: tuple[Any, ...]
    text: str
    first_role: str | None
    system: tuple[str, ...]


class HistoryEncoder:
    """Encodes a history, each message once while it stays the same object with the same parts."""

    def __init__(self, inline_mime_types: tuple[str, ...], accepts: Callable[..., bool], tool_combination: bool) -> None:
        self._mime = inline_mime_types
        self._accepts = accepts
        self._combination = tool_combination
        self._previous: dict[int, Encoded] = {}
        self._current: dict[int, Encoded] = {}
        self.encoded = 0
        """Messages encoded so far (not taken from the memo): what the bench and tests count."""

    def _lookup(self, message: ModelMessage) -> Encoded | None:
        for table in (self._current, self._previous):
            hit = table.get(id(message))
            if hit is not None and hit.message is message and len(hit.parts) == len(message.parts) \
                    and all(a is b for a, b in zip(hit.parts, message.parts)):
                return hit
        return None

    def _encode(self, message: ModelMessage) -> Encoded:
        self.encoded += 1
        system: list[str] = []
        if isinstance(message, ModelRequest):
            contents, system = request_contents(message, self._mime)
        else:
            content = response_content(message, self._accepts, tool_combination=self._combination)
            contents = [content] if content else []
        return Encoded(message, tuple(message.parts), ", ".join(dumps(c) for c in contents),
                       contents[0]["role"] if contents else None, tuple(system))

    def encode(self, messages: list[ModelMessage]) -> tuple[list[str], str | None, list[str]]:
        """The JSON texts of the contents, the first content's role, and the system prompts."""
        used: dict[int, Encoded] = {}
        texts: list[str] = []
        system: list[str] = []
        first: str | None = None
        for message in messages:
            entry = self._lookup(message) or self._encode(message)
            used[id(message)] = entry
            system.extend(entry.system)
            if entry.text:
                texts.append(entry.text)
                first = first or entry.first_role
        self._previous, self._current = self._current, used
        return texts, first, system
