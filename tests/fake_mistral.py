"""Mistral's Conversations API (`POST /v1/conversations`) as the fake provider speaks it.

A request carries `inputs` (a string, or entries: `message.input`, `message.output`, `function.call`,
`function.result`, `tool.execution`), optional `instructions`, `tools` (`{"type": "function", ...}`
and connectors such as `{"type": "web_search"}`), `completion_args`, `stream` and `store`. An entry
missing a field the published schema requires is answered with a 422 `{"detail": [...]}` (the
OpenAPI's `HTTPValidationError`). A streamed answer is `event:` + `data:` frames:
`conversation.response.started`, for a turn with `native_search` and the `web_search` connector on
the request `tool.execution.started` / `.done` (name `web_search`), `message.output.delta` (text
as a string; thinking and each `tool_reference` citation as one chunk object), `function.call.delta`,
and `conversation.response.done` with `usage` (`connector_tokens`, `connectors` when it searched).
Without the connector nothing is searched and no reference is sent.
"""

from __future__ import annotations

import json
from typing import Any

MISTRAL = 'mistral'
PATH = '/conversations'

_REQUIRED = {
    'message.input': ('role', 'content'),
    'message.output': ('content',),
    'function.call': ('tool_call_id', 'name', 'arguments'),
    'function.result': ('tool_call_id', 'result'),
    'tool.execution': ('name', 'arguments'),
}


def error_body(status: int, message: str) -> dict[str, Any]:
    """Mistral's error JSON: `{"message", "request_id"}` from its gateway (401, 429), `{"object": "error", ...}`
    from the API (400, 5xx)."""
    if status in (401, 403, 429):
        return {'message': message, 'request_id': 'req_fake'}
    kind = 'invalid_request_error' if status < 500 else 'internal_server_error'
    return {'object': 'error', 'message': message, 'type': kind, 'param': None, 'code': None}


def rejection(body: dict[str, Any]) -> dict[str, Any] | None:
    """The 422 body for inputs the real API would refuse (an unknown entry type, a missing field), or None."""
    inputs = body.get('inputs')
    if isinstance(inputs, str):
        return None
    if not isinstance(inputs, list):
        return {'detail': [{'type': 'missing', 'loc': ['body', 'inputs'], 'msg': 'Field required'}]}
    problems = []
    for n, entry in enumerate(inputs):
        kind = entry.get('type', 'message.input') if isinstance(entry, dict) else None
        if kind not in _REQUIRED:
            problems.append({'type': 'union_tag_invalid', 'loc': ['body', 'inputs', n], 'msg': f'unknown entry {kind!r}'})
            continue
        for name in _REQUIRED[kind]:
            if name not in entry:
                problems.append({'type': 'missing', 'loc': ['body', 'inputs', n, kind, name], 'msg': 'Field required'})
    return {'detail': problems} if problems else None


def searches(body: dict[str, Any]) -> bool:
    """Whether the request enables the `web_search` connector."""
    return any(isinstance(t, dict) and t.get('type') in ('web_search', 'web_search_premium') for t in body.get('tools') or [])


def render(turn: Any, body: dict[str, Any], new_id: Any, pieces: Any) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """Events of a Conversations stream and the equivalent whole `conversation.response`."""
    model = body.get('model', 'mistral-fake')
    conversation = new_id('conv')
    events: list[tuple[str, dict[str, Any]]] = []
    outputs: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, {'type': kind, **fields}))

    emit('conversation.response.started', conversation_id=conversation)
    search = turn.native_search if searches(body) else None
    if search is not None:
        exec_id, arguments = new_id('tool_exec'), json.dumps({'query': search.query})
        emit('tool.execution.started', output_index=0, id=exec_id, name='web_search', arguments=arguments)
        emit('tool.execution.done', output_index=0, id=exec_id, name='web_search')
        outputs.append({'type': 'tool.execution', 'name': 'web_search', 'arguments': arguments, 'object': 'entry',
                        'id': exec_id})
    msg_id, content, index = new_id('msg'), [], len(outputs)
    message = {'output_index': index, 'id': msg_id, 'model': model, 'role': 'assistant'}
    if turn.reasoning:
        thought = {'type': 'thinking', 'thinking': [{'type': 'text', 'text': turn.reasoning}]}
        emit('message.output.delta', **message, content_index=0, content=thought)
        content.append(thought)
    texts = turn.text_pieces if turn.text_pieces is not None else pieces(turn.text)
    for piece in texts:
        emit('message.output.delta', **message, content_index=len(content), content=piece)
    if turn.text:
        content.append({'type': 'text', 'text': turn.text})
    for source in search.sources if search is not None else []:
        reference = {'type': 'tool_reference', 'tool': 'web_search', 'title': source.get('title', ''),
                     'url': source['url'], 'source': 'brave'}
        if source.get('snippet'):
            reference['description'] = source['snippet']
        emit('message.output.delta', **message, content_index=len(content), content=reference)
        content.append(reference)
    if content:
        outputs.append({'type': 'message.output', 'object': 'entry', 'content': content, **message})
    for tc in turn.tool_calls:
        call_id, fc = tc.id or new_id('call')[-9:], new_id('fc')
        for piece in pieces(tc.text()) or ['']:
            emit('function.call.delta', output_index=len(outputs), id=fc, name=tc.name, tool_call_id=call_id,
                 arguments=piece)
        outputs.append({'type': 'function.call', 'object': 'entry', 'id': fc, 'tool_call_id': call_id,
                        'name': tc.name, 'arguments': tc.text()})
    prompt, completion = turn.usage
    usage: dict[str, Any] = {'prompt_tokens': prompt, 'completion_tokens': completion,
                             'total_tokens': prompt + completion, 'connector_tokens': None, 'connectors': None}
    if search is not None:
        usage.update(connector_tokens=700, connectors={'web_search': 1}, total_tokens=prompt + completion + 700)
    emit('conversation.response.done', usage=usage)
    return events, {'conversation_id': conversation, 'outputs': outputs, 'usage': usage,
                    'object': 'conversation.response'}


# ---------------------------------------------------------------- request readers
def entries(body: dict[str, Any]) -> list[dict[str, Any]]:
    inputs = body.get('inputs')
    if isinstance(inputs, str):
        return [{'type': 'message.input', 'role': 'user', 'content': inputs}]
    return [e for e in inputs or [] if isinstance(e, dict)]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return ''.join(c.get('text', '') for c in content or [] if isinstance(c, dict) and c.get('type') == 'text')


def tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.get('tool_call_id', ''), str(e.get('result', ''))) for e in entries(body) if e.get('type') == 'function.result']


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t['function']['name'] if t.get('type') == 'function' else t.get('type', '') for t in body.get('tools') or []]


def instructions(body: dict[str, Any]) -> str:
    return str(body.get('instructions') or '')


def user_texts(body: dict[str, Any]) -> list[str]:
    return [_text(e.get('content')) for e in entries(body)
            if e.get('type', 'message.input') == 'message.input' and e.get('role') == 'user']
