"""The history rules each provider enforces on a request body, as a test can check them.

``violations(request)`` lists what a strict provider would refuse in one recorded request:

* **openai-chat**: the first message after the system/developer ones is the user's; no two
  assistant messages in a row; each assistant ``tool_calls`` is answered by ``tool`` messages
  right after it, one per call; a ``tool`` message answers a call of the assistant before it;
  the request does not end with an assistant message.
* **anthropic-messages**: roles alternate starting with ``user`` and end with ``user``; no
  content is empty; every ``tool_use`` is answered by a ``tool_result`` in the next (user)
  message, and every ``tool_result`` answers a ``tool_use`` of the message before it.
* **openai-responses**: every ``function_call`` is followed by its ``function_call_output``
  and every output follows its call (items the fake provider stored count, through the ledger
  rules it enforces itself; see ``FakeProvider.rejections``).
"""

from __future__ import annotations

from typing import Any

from fakeprovider import RecordedRequest, wire_of


def violations(request: RecordedRequest) -> list[str]:
    wire = wire_of(request)
    body = request.body or {}
    if wire == "chat":
        return _chat(body.get("messages") or [])
    if wire == "anthropic":
        return _anthropic(body.get("messages") or [])
    return _responses(body.get("input") or [])


def _chat(messages: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    convo = [m for m in messages if m.get("role") not in ("system", "developer")]
    if not convo or convo[0].get("role") != "user":
        found.append("chat: the conversation does not start with a user message")
    open_ids: set[str] = set()
    answered: set[str] = set()
    previous = None
    for i, msg in enumerate(convo):
        role = msg.get("role")
        if role != "tool" and open_ids:
            found.append(f"chat: message {i} ({role}) comes before the results of calls {sorted(open_ids)}")
            open_ids = set()
        if role == "assistant":
            if previous == "assistant":
                found.append(f"chat: two assistant messages in a row at {i}")
            if not msg.get("content") and not msg.get("tool_calls"):
                found.append(f"chat: assistant message {i} is empty")
            open_ids = {c["id"] for c in msg.get("tool_calls") or []}
            answered: set[str] = set()
        elif role == "tool":
            call_id = msg.get("tool_call_id")
            if previous not in ("assistant", "tool") or call_id not in open_ids | answered:
                found.append(f"chat: tool result {call_id} at {i} answers no call of the message before it")
            open_ids.discard(call_id)
            answered.add(call_id)
        previous = role
    if open_ids:
        found.append(f"chat: calls {sorted(open_ids)} have no result")
    if convo and convo[-1].get("role") == "assistant":
        found.append("chat: the request ends with an assistant message")
    return found


def _blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    content = msg.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _anthropic(messages: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    expected = "user"
    pending: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role != expected:
            found.append(f"anthropic: message {i} is {role}, expected {expected} (roles must alternate)")
        blocks = _blocks(msg)
        if not blocks:
            found.append(f"anthropic: message {i} has no content")
        for block in blocks:
            if block.get("type") == "text" and not block.get("text"):
                found.append(f"anthropic: message {i} has an empty text block")
        results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        if role == "user":
            if pending - results:
                found.append(f"anthropic: calls {sorted(pending - results)} are not answered in message {i}")
            if results - pending:
                found.append(f"anthropic: results {sorted(results - pending)} in message {i} answer no call")
            pending = set()
        else:
            pending = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
        expected = "assistant" if role == "user" else "user"
    if messages and messages[-1].get("role") != "user":
        found.append("anthropic: the request does not end with a user message")
    if pending:
        found.append(f"anthropic: calls {sorted(pending)} have no result")
    return found


def _responses(items: list[Any]) -> list[str]:
    found: list[str] = []
    calls: set[str] = set()
    outputs: set[str] = set()
    for i, item in enumerate(i for i in items if isinstance(i, dict)):
        kind = item.get("type")
        if kind == "function_call":
            calls.add(item.get("call_id"))
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                found.append(f"responses: output {item.get('call_id')} at {i} comes before (or without) its call")
            outputs.add(item.get("call_id"))
    if calls - outputs:
        found.append(f"responses: calls {sorted(calls - outputs)} have no output")
    return found


def assert_valid(requests: list[RecordedRequest]) -> None:
    """Every request passes the rules of its wire."""
    problems = [(n, v) for n, request in enumerate(requests) for v in violations(request)]
    assert not problems, problems
