"""The Gemini API (`generativelanguage.googleapis.com`) as the fake provider speaks it.

`POST /v1beta/models/{model}:streamGenerateContent?alt=sse` streams `GenerateContentResponse`
chunks as `data:` SSE frames (no event names, no terminal sentinel: the chunk carrying
`finishReason` is the last); `:generateContent` returns one merged response. A turn's parts:
`thought` text parts (with a `thoughtSignature` on the first answer part), text parts,
`functionCall` parts; the last chunk carries `usageMetadata`, `finishReason` and, for a turn
with `native_search`, `groundingMetadata` (`webSearchQueries`, `groundingChunks[].web`,
`groundingSupports`) the way Google Search grounding reports a search. A request that sets
`toolConfig.includeServerSideToolInvocations` (Gemini 3) also gets the search as `toolCall` /
`toolResponse` parts (`toolType: GOOGLE_SEARCH_WEB`) before the answer.
"""

from __future__ import annotations

import base64
import re
from typing import Any

GEMINI = 'gemini'
_PATH = re.compile(r'^(?:/v1beta|/v1)?/models/(?P<model>[^/:]+):(?P<method>streamGenerateContent|generateContent)$')

_STATUS = {400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND',
           429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE'}


def route(path: str) -> tuple[str, bool] | None:
    """`(model, streaming)` for a Gemini generate path, else None."""
    match = _PATH.match(path.split('?', 1)[0])
    if match is None:
        return None
    return match['model'], match['method'] == 'streamGenerateContent'


def error_body(status: int, message: str) -> dict[str, Any]:
    """Google's error JSON (`google.rpc.Status`)."""
    return {'error': {'code': status, 'message': message, 'status': _STATUS.get(status, 'UNKNOWN')}}


def render(turn: Any, body: dict[str, Any], new_id: Any, *, model: str = 'gemini-fake',
           pieces: Any = None) -> tuple[list[tuple[None, dict[str, Any]]], dict[str, Any]]:
    """Chunks of a Gemini stream and the equivalent whole response."""
    split = pieces or (lambda text: [text] if text else [])
    response_id = new_id('resp')
    chunks: list[list[dict[str, Any]]] = []
    signature = base64.b64encode(f'sig-{response_id}'.encode()).decode()
    chunks += [[{'text': p, 'thought': True}] for p in split(turn.reasoning)]
    if turn.native_search is not None and (body.get('toolConfig') or {}).get('includeServerSideToolInvocations'):
        # Gemini 3 with server-side tool invocations reports the search as its own parts too.
        search_id = new_id('srv')
        chunks.append([
            {'toolCall': {'id': search_id, 'toolType': 'GOOGLE_SEARCH_WEB', 'args': {'queries': [turn.native_search.query]}}},
            {'toolResponse': {'id': search_id, 'toolType': 'GOOGLE_SEARCH_WEB', 'response': {}}},
        ])
    texts = turn.text_pieces if turn.text_pieces is not None else split(turn.text)
    for n, piece in enumerate(texts):
        part: dict[str, Any] = {'text': piece}
        if n == 0 and turn.reasoning:
            part['thoughtSignature'] = signature
        chunks.append([part])
    calls = []
    for n, tc in enumerate(turn.tool_calls):
        call: dict[str, Any] = {'functionCall': {'id': tc.id or new_id('call'), 'name': tc.name, 'args': tc.value()}}
        if n == 0 and turn.reasoning and not texts:
            call['thoughtSignature'] = signature
        calls.append(call)
    if calls:
        chunks.append(calls)
    if not chunks:
        chunks.append([{'text': ''}])
    prompt, output = turn.usage
    usage = {'promptTokenCount': prompt, 'candidatesTokenCount': output, 'totalTokenCount': prompt + output}
    if turn.reasoning:
        usage['thoughtsTokenCount'] = 3
        usage['totalTokenCount'] += 3
    finish = 'MAX_TOKENS' if turn.finish == 'length' else 'STOP'
    grounding = _grounding(turn)

    def chunk(parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {'content': {'role': 'model', 'parts': parts}, 'index': 0}
        out: dict[str, Any] = {'candidates': [candidate], 'modelVersion': model, 'responseId': response_id}
        if last:
            candidate['finishReason'] = finish
            if grounding:
                candidate['groundingMetadata'] = grounding
            out['usageMetadata'] = usage
        else:
            out['usageMetadata'] = {'promptTokenCount': prompt, 'totalTokenCount': prompt}
        return out

    events = [(None, chunk(parts, n == len(chunks) - 1)) for n, parts in enumerate(chunks)]
    whole = chunk(_join_text([part for parts in chunks for part in parts]), True)
    return events, whole


def _join_text(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive text parts of one kind as one part, as a whole response has them."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if out and 'text' in part and 'text' in out[-1] and part.get('thought') == out[-1].get('thought') \
                and 'thoughtSignature' not in part:
            out[-1] = {**out[-1], 'text': out[-1]['text'] + part['text']}
        else:
            out.append(dict(part))
    return [p for p in out if p.get('text') != '' or len(out) == 1]


def _grounding(turn: Any) -> dict[str, Any] | None:
    search = turn.native_search
    if search is None:
        return None
    chunks = [{'web': {'uri': s['url'], 'title': s.get('title', ''), 'domain': s['url'].split('/')[2]}}
              for s in search.sources]
    text = turn.text or ''
    supports = [{'segment': {'startIndex': 0, 'endIndex': len(text.encode()), 'text': text},
                 'groundingChunkIndices': list(range(len(chunks)))}] if text and chunks else []
    return {
        'webSearchQueries': [search.query],
        'searchEntryPoint': {'renderedContent': '<div>search</div>'},
        'groundingChunks': chunks,
        'groundingSupports': supports,
    }


# ---------------------------------------------------------------- request readers
def contents(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in body.get('contents') or [] if isinstance(c, dict)]


def tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    import json

    out: list[tuple[str, str]] = []
    for content in contents(body):
        for part in content.get('parts') or []:
            response = part.get('functionResponse') if isinstance(part, dict) else None
            if isinstance(response, dict):
                out.append((str(response.get('id') or response.get('name') or ''), json.dumps(response.get('response'))))
    return out


def tool_names(body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in body.get('tools') or []:
        for decl in tool.get('functionDeclarations') or []:
            names.append(decl.get('name', ''))
        names += [key for key in tool if key != 'functionDeclarations']
    return names


def instructions(body: dict[str, Any]) -> str:
    system = body.get('systemInstruction') or {}
    return '\n\n'.join(p.get('text', '') for p in system.get('parts') or [] if isinstance(p, dict) and p.get('text'))


def user_texts(body: dict[str, Any]) -> list[str]:
    texts: list[str] = []
    for content in contents(body):
        if content.get('role') != 'user':
            continue
        parts = [p['text'] for p in content.get('parts') or [] if isinstance(p, dict) and isinstance(p.get('text'), str)]
        if parts:
            texts.append(''.join(parts))
    return texts
