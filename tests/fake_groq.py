"""Groq's Chat Completions dialect, as the ``groq`` SDK meets it.

The SDK posts to ``{host}/openai/v1/chat/completions``. Token usage comes in ``x_groq.usage`` on a
stream's last chunk (the top-level ``usage`` of a whole completion stays). A compound system
(``groq/compound``, ``groq/compound-mini``) refuses a request carrying ``tools`` or ``tool_choice``
with HTTP 400, as Groq does (it takes no user-provided tools), and on a turn with
``native_search`` reports the search it ran in ``executed_tools``: in a stream, one delta with the
call (``index``, ``type: "search"``, ``arguments`` as JSON text) and a later one with the same
entry plus ``output`` and ``search_results.results`` (``title``, ``url``, ``content``, ``score``);
in a whole completion, the full entry on the message.
"""

from __future__ import annotations

import json
import re
from typing import Any

GROQ_PATH = re.compile(r'^(/v1)*/openai/v1/chat/completions/?$')
COMPOUND = re.compile(r'^(groq/)?compound(-beta)?(-mini)?$')


def is_groq(path: str) -> bool:
    return GROQ_PATH.match(path.split('?', 1)[0]) is not None


def is_compound(body: dict[str, Any]) -> bool:
    return COMPOUND.match(str(body.get('model', ''))) is not None


def refusal(path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """Groq's 400 for user-provided tools on a compound system, or None."""
    if is_groq(path) and is_compound(body) and ('tools' in body or 'tool_choice' in body):
        return {'error': {'message': 'tool calling is not supported with this model', 'type': 'invalid_request_error',
                          'code': 'invalid_request_error'}}
    return None


def executed_search(turn: Any, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the call entry, the finished entry) of this turn's search, or None when nothing is searched."""
    if turn.native_search is None or not is_compound(body):
        return None
    call = {'index': 0, 'type': 'search', 'arguments': json.dumps({'query': turn.native_search.query})}
    results = [{'title': s['title'], 'url': s['url'], 'content': s.get('snippet', ''), 'score': 0.9}
               for s in turn.native_search.sources]
    output = '\n'.join(f"Title: {r['title']}\nURL: {r['url']}\nContent: {r['content']}" for r in results)
    return call, {**call, 'output': output, 'search_results': {'results': results}}


def groq_render(turn: Any, body: dict[str, Any], events: list[Any], final: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The Chat Completions rendering (``events``, ``final``) turned into Groq's."""
    out = []
    fmt = body.get('reasoning_format')
    for kind, chunk in events:
        chunk = dict(chunk)
        if 'usage' in chunk and not chunk.get('choices'):
            chunk['x_groq'] = {'id': 'req_fake', 'usage': chunk.pop('usage')}
        piece = dict(chunk['choices'][0]['delta']) if chunk.get('choices') else {}
        piece.pop('reasoning_details', None)  # (the Chat rendering's OpenRouter fields, for a vendor/model slug)
        if 'reasoning_content' in piece or 'reasoning' in piece:
            reasoning = piece.pop('reasoning_content', None) or piece.pop('reasoning')
            if fmt == 'hidden':
                continue
            piece['reasoning'] = reasoning  # Groq's field (`parsed`; `raw` would put it in the content)
            chunk['choices'] = [{**chunk['choices'][0], 'delta': piece}]
        out.append((kind, chunk))
    message = final['choices'][0]['message']
    message.pop('reasoning_details', None)
    if 'reasoning_content' in message or 'reasoning' in message:
        reasoning = message.pop('reasoning_content', None) or message.pop('reasoning')
        if fmt != 'hidden':
            message['reasoning'] = reasoning
    if (search := executed_search(turn, body)) is not None:
        call, done = search
        head = out[0][1]

        def delta(extra: dict[str, Any]) -> tuple[None, dict[str, Any]]:
            choice = {'index': 0, 'delta': extra, 'logprobs': None, 'finish_reason': None}
            return None, {**{k: head[k] for k in ('id', 'object', 'created', 'model')}, 'choices': [choice]}

        out[1:1] = [delta({'executed_tools': [call]}), delta({'reasoning': 'searching'}),
                    delta({'executed_tools': [done]})]
        final['choices'][0]['message']['executed_tools'] = [done]
    return out, final
