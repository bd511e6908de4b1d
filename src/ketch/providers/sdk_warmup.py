"""Build the openai SDK's Responses stream-event models before the first stream needs them.

The openai SDK defines its models with pydantic's deferred build, so the first Responses stream
in a process builds them while its events arrive: reading the event union's discriminator builds
every one of its ~60 event classes, and the first ``response.completed`` the nested output-item,
content, tool and usage models. Built that way, one at a time as they are touched, each event
class builds the large ``Response`` model inside it again: 0.7-1.2 s of CPU on a 2-core machine,
inside the first turn (``bench/first_turn.py``).

``warm_responses_events`` builds them in dependency order instead (``Response`` first, then each
event class, which then reuses it), about a quarter of that CPU, through pydantic's public
``model_rebuild``; then it feeds one of each event a coding session sees through the SDK's own
stream-event constructor (private: ``openai._models.construct_type``, so it is best effort) for
the nested models that are built only when touched. If anything there moves or fails, the
warm-up stops and the first stream builds what is left, as before.

``start`` runs it on a daemon thread. Python threads share one interpreter lock, so it only
comes for free where the process would otherwise wait: the interactive app starts it as soon as
its Responses model is built (the user is typing); a headless run starts it from an HTTP request
hook (``start_when_sending``) as its first request goes out, so it overlaps the provider's time
to first token instead of delaying the request. ``wait_before_reading`` is an HTTP response hook
that holds a successful response until a running warm-up is done, so the SDK never builds a model
while the warm-up thread builds it too. ``KETCH_SDK_WARMUP=0`` turns the warm-up off.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Annotated, Any, get_args, get_origin

__all__ = ["finished", "start", "start_when_sending", "wait_before_reading", "warm_responses_events"]

_thread: threading.Thread | None = None
_lock = threading.Lock()


def _response(status: str, output: list[dict[str, object]]) -> dict[str, object]:
    return {
        "id": "resp_warmup",
        "object": "response",
        "created_at": 0,
        "status": status,
        "model": "warmup",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [{"type": "function", "name": "tool", "parameters": {}, "strict": False}],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "usage": {
            "input_tokens": 1,
            "output_tokens": 1,
            "total_tokens": 2,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


_ITEMS: list[dict[str, object]] = [
    {"type": "reasoning", "id": "rs_warmup", "summary": [{"type": "summary_text", "text": "."}], "encrypted_content": "x"},
    {
        "type": "message",
        "id": "msg_warmup",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": ".", "annotations": []}],
    },
    {"type": "function_call", "id": "fc_warmup", "call_id": "call_warmup", "name": "tool", "arguments": "{}", "status": "completed"},
    {"type": "web_search_call", "id": "ws_warmup", "status": "completed", "action": {"type": "search", "query": "."}},
]


def _events() -> list[dict[str, object]]:
    """One of each event a coding session's stream carries, in the order a stream sends them."""
    common = {"output_index": 0, "sequence_number": 0}
    part = {"item_id": "msg_warmup", "content_index": 0, **common}
    return [
        {"type": "response.created", "response": _response("in_progress", []), "sequence_number": 0},
        {"type": "response.in_progress", "response": _response("in_progress", []), "sequence_number": 0},
        *({"type": "response.output_item.added", "item": item, **common} for item in _ITEMS),
        {"type": "response.content_part.added", "part": {"type": "output_text", "text": "", "annotations": []}, **part},
        {"type": "response.output_text.delta", "delta": ".", "logprobs": [], **part},
        {"type": "response.output_text.done", "text": ".", "logprobs": [], **part},
        {"type": "response.reasoning_summary_part.added", "item_id": "rs_warmup", "summary_index": 0,
         "part": {"type": "summary_text", "text": ""}, **common},
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs_warmup", "summary_index": 0, "delta": ".", **common},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_warmup", "delta": "{}", **common},
        {"type": "response.function_call_arguments.done", "item_id": "fc_warmup", "arguments": "{}", **common},
        *({"type": "response.output_item.done", "item": item, **common} for item in _ITEMS),
        {"type": "response.completed", "response": _response("completed", _ITEMS), "sequence_number": 0},
    ]


def _event_classes() -> list[type]:
    """``Response`` and every class of the SDK's stream-event union, in the order to build them."""
    from openai.types.responses import Response, ResponseStreamEvent

    union = ResponseStreamEvent
    if get_origin(union) is Annotated:  # Annotated[Union[...], discriminator info]
        union = get_args(union)[0]
    return [Response, *(cls for cls in get_args(union) if isinstance(cls, type))]


def warm_responses_events() -> bool:
    """Build the Responses stream-event models now; whether every step succeeded."""
    try:
        for cls in _event_classes():
            cls.model_rebuild()
            time.sleep(0)  # let other threads (the app reading keys) run between classes
        from openai._models import construct_type
        from openai.types.responses import ResponseStreamEvent

        for event in _events():
            construct_type(type_=ResponseStreamEvent, value=event)
    except Exception:  # noqa: BLE001 - a warm-up must never break a session; the stream pays instead
        return False
    return True


def start() -> None:
    """Start the warm-up once per process, on a daemon thread (never when turned off)."""
    global _thread
    if os.environ.get("KETCH_SDK_WARMUP", "1").strip() == "0":
        return
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=warm_responses_events, name="ketch-sdk-warmup", daemon=True)
            _thread.start()


async def start_when_sending(request: Any) -> None:
    """An httpx2 ``request`` event hook: start the warm-up (once) as a request goes out."""
    start()


async def finished() -> None:
    """Return once no warm-up is running (at once when none was started or it is done)."""
    thread = _thread
    if thread is not None and thread.is_alive():
        await asyncio.to_thread(thread.join)


async def wait_before_reading(response: Any) -> None:
    """An httpx2 ``response`` event hook: a successful response is read only after the warm-up."""
    if response.status_code == 200:
        await finished()
