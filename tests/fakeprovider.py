"""A scripted fake model provider on 127.0.0.1 for wire-level tests.

One `FakeProvider` speaks three wires the way the official APIs do, streaming (SSE) or not:
OpenAI Chat Completions (`/v1/chat/completions`), OpenAI Responses (`/v1/responses`) and
Anthropic Messages (`/v1/messages`), Gemini (`/v1beta/models/{model}:streamGenerateContent`
and `:generateContent`, see `fake_gemini`), plus `GET /v1/models`. A Chat Completions request
carrying Z.AI's `web_search` tool gets its `web_search` rows (see `fake_zai`); one asking OpenRouter
to search (its `openrouter:web_search` server tool, the `web` plugin or an `:online` model) gets a
turn's `native_search` sources as `url_citation` annotations, on a delta after the text and on the
message, and a model slug with a `/` gets OpenRouter's `provider` field; Groq's SDK path
`/openai/v1/chat/completions` gets Groq's dialect (`x_groq` usage, compound `executed_tools`, see
`fake_groq`). Mistral's Conversations API (`POST /v1/conversations`, see `fake_mistral`) is the
fifth model endpoint. Each model request plays the next
`Turn` of a script; every request is recorded. A missing or doubled `/v1` prefix is tolerated
unless `exact_paths` asks for a real server's routing; the path actually received is recorded.
Server behaviours of real local servers can be switched on: `refuse_stream_with_tools`,
`strict_json`, `serve_json` (llama.cpp `/props`, Ollama `/api/show`, LM Studio `/api/v0/models`).

The Responses endpoint enforces the provider's item rules by default (orphan tool outputs,
unknown item ids, ids sent without their reasoning item); see `FakeProvider.rejections`.

A `Hold` stops the fake at one point of an answer until the test releases it, and says when
it got there: before a turn is answered at all (`Turn(hold=...)`) or right after the n-th
piece of its text went out (`Turn(hold_after_piece=(n, hold))`, on the Chat, Responses and
Anthropic wires). A test waits for `hold.wait_reached()`, then for the front end to show
what had arrived, then acts (a cancel, a kill) at exactly that point.

With `window=N` every model endpoint also enforces a context window as the real providers
do, counting input more strictly than ketch does (the characters of every string in the body
over `chars_per_token`, 3.5 by default, against ketch's 4): input plus the requested output
(`max_tokens`, `max_completion_tokens`, `max_output_tokens`) over the window, or input over
`input_limit`, is answered with the wire's own 400 (`context_length_exceeded` on OpenAI,
"prompt is too long" / "input length and `max_tokens` exceed context limit" on Anthropic).

With `cache=fake_cache.PromptCache()` the fake accounts for prompt caching as each provider does
and reports input, cached and written tokens in the wire's usage fields (see `fake_cache`).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import fake_cache
import fake_gemini
import fake_groq
import fake_mistral
import fake_zai

try:
    import pytest
except ImportError:  # the README's demo server runs without the test extras installed
    pytest = None  # type: ignore[assignment]
from fake_gemini import GEMINI
from fake_mistral import MISTRAL

__all__ = [
    'FakeProvider',
    'Hold',
    'NativeSearch',
    'RecordedRequest',
    'ToolCall',
    'Turn',
    'fake_provider',
    'instructions',
    'tool_names',
    'tool_results',
    'user_texts',
    'wire_of',
]

CHAT, RESPONSES, ANTHROPIC, MODELS = 'chat', 'responses', 'anthropic', 'models'
_ROUTES = {'/chat/completions': CHAT, '/responses': RESPONSES, '/messages': ANTHROPIC, '/models': MODELS,
           '/v1beta/models': MODELS, fake_mistral.PATH: MISTRAL}


@dataclass
class ToolCall:
    """A function tool call the model makes; `id` is generated per wire when None."""

    name: str
    args: dict[str, Any]
    id: str | None = None
    raw_args: str | None = None
    """The arguments exactly as the model streams them (e.g. `'{"n": 1e999}'`); `args` is ignored then."""

    def text(self) -> str:
        """The JSON text of the arguments as they go on the wire."""
        return self.raw_args if self.raw_args is not None else json.dumps(self.args)

    def value(self) -> Any:
        """The arguments as an object (a lenient parse of `raw_args`), for wires that carry an object."""
        if self.raw_args is None:
            return self.args
        try:
            return json.loads(self.raw_args)
        except ValueError:
            return {}


@dataclass
class NativeSearch:
    """A provider-executed web search: `sources` are dicts with `title`, `url`, `snippet`."""

    query: str
    sources: list[dict[str, str]]


class Hold:
    """A point where the fake provider stops answering until the test calls `release`.

    `reached` is set as the fake arrives there (the request is recorded; what comes before the
    point has been sent and flushed). A held answer is also let go when the fake stops."""

    def __init__(self, name: str = '') -> None:
        self.name = name
        self.reached = threading.Event()
        self.released = threading.Event()

    def wait_reached(self, timeout: float = 30.0) -> bool:
        """Block until the fake holds here (True), or `timeout` seconds passed (False)."""
        return self.reached.wait(timeout)

    def release(self) -> None:
        self.released.set()

    def __repr__(self) -> str:
        state = 'released' if self.released.is_set() else 'holding' if self.reached.is_set() else 'not reached'
        return f'Hold({self.name!r}, {state})'


@dataclass
class Turn:
    """One scripted model response, rendered into whichever wire the request came on."""

    text: str = ''
    reasoning: str = ''
    tool_calls: list[ToolCall] = field(default_factory=list)
    status: int = 200
    error_body: dict[str, Any] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    truncate: bool = False
    malformed: bool = False
    end_early: bool = False
    """End the body cleanly (the final chunk is sent) halfway, before the wire's terminal event."""
    usage: tuple[int, int] = (10, 5)
    text_pieces: list[str] | None = None
    """Stream the text in exactly these pieces (one SSE event each), e.g. one per token."""
    native_search: NativeSearch | None = None
    hold: Hold | None = None
    """Hold before anything of this answer is sent (after the request was recorded)."""
    hold_after_piece: tuple[int, Hold] | None = None
    """`(n, hold)`: hold the stream right after the n-th (1-based) piece of the text was sent."""
    finish: str = ''
    """'length': the answer was cut by the output limit, each wire its own way (Chat `finish_reason:
    "length"`, Responses `status: "incomplete"` with `max_output_tokens`, Anthropic `stop_reason:
    "max_tokens"`). 'refusal': the provider declined (Chat `finish_reason: "content_filter"`,
    Anthropic `stop_reason: "refusal"`)."""


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as the server received it (`headers` keys are lower-case)."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    query: str = ''
    raw: bytes = b''
    """The body exactly as it arrived (golden tests compare these bytes)."""

    @property
    def wire(self) -> str | None:
        """`'chat'`, `'responses'`, `'anthropic'`, `'gemini'`, `'models'`, or None for an unknown path."""
        if fake_gemini.route(self.path) is not None:
            return GEMINI
        return _ROUTES.get(_normalize(self.path))

    @property
    def stream(self) -> bool:
        """Whether the client asked for an SSE stream."""
        if (gemini := fake_gemini.route(self.path)) is not None:
            return gemini[1]
        return bool(self.body and self.body.get('stream'))


ScriptEntry = Turn | Callable[[RecordedRequest], Turn]


def _normalize(path: str) -> str:
    """Strip every leading `/v1` so `/v1/v1/messages`, `/v1/messages`, `/messages` route alike."""
    path = path.split('?', 1)[0].rstrip('/') or '/'
    while path == '/v1' or path.startswith('/v1/'):
        path = path[3:] or '/'
    if path.startswith('/openai/v1/'):  # Groq's SDK path
        return _normalize(path[len('/openai'):])
    return path


def _pieces(text: str, count: int = 3) -> list[str]:
    """Split `text` into about `count` consecutive pieces (empty text gives no pieces)."""
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _text_pieces(turn: Turn) -> list[str]:
    """The pieces a turn's text streams in: the explicit ones, or about three."""
    return list(turn.text_pieces) if turn.text_pieces is not None else _pieces(turn.text)


_OPENAI_ERRORS = {
    400: ('invalid_request_error', None), 401: ('invalid_request_error', 'invalid_api_key'),
    403: ('permission_denied', None), 404: ('invalid_request_error', 'model_not_found'),
    429: ('requests', 'rate_limit_exceeded'), 500: ('server_error', None), 503: ('server_error', None),
}
_ANTHROPIC_ERRORS = {
    400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error',
    404: 'not_found_error', 413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error',
    529: 'overloaded_error',
}


def default_error_body(wire: str | None, status: int, message: str | None = None) -> dict[str, Any]:
    """The provider's own error JSON for `status` on `wire`."""
    message = message or f'fake provider error {status}'
    if wire == GEMINI:
        return fake_gemini.error_body(status, message)
    if wire == MISTRAL:
        return fake_mistral.error_body(status, message)
    if wire == ANTHROPIC:
        kind = _ANTHROPIC_ERRORS.get(status, 'api_error')
        return {'type': 'error', 'error': {'type': kind, 'message': message}, 'request_id': 'req_fake'}
    kind, code = _OPENAI_ERRORS.get(status, ('server_error', None))
    return {'error': {'message': message, 'type': kind, 'param': None, 'code': code}}


class _Ids:
    """Sequential, thread-safe ids such as `call_0001`."""

    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def __call__(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f'{prefix}_{self._n:04d}'


Event = tuple[str | None, dict[str, Any]]


# ---------------------------------------------------------------- Chat Completions
def chat_render(turn: Turn, body: dict[str, Any], new_id: _Ids) -> tuple[list[Event], dict[str, Any]]:
    """Chunks of a Chat Completions stream and the equivalent non-streamed completion."""
    cid, model = new_id('chatcmpl'), body.get('model', 'fake-model')
    calls = [(tc.id or new_id('call'), tc) for tc in turn.tool_calls]
    finish = 'length' if turn.finish == 'length' else 'tool_calls' if calls else 'stop'
    if turn.finish == 'refusal':
        finish = 'content_filter'
    usage = {'prompt_tokens': turn.usage[0], 'completion_tokens': turn.usage[1],
             'total_tokens': sum(turn.usage)}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> Event:
        choice = {'index': 0, 'delta': delta, 'logprobs': None, 'finish_reason': finish_reason}
        return None, {'id': cid, 'object': 'chat.completion.chunk', 'created': 1700000000, 'model': model,
                      'choices': [choice]}

    events = [chunk({'role': 'assistant', 'content': ''})]
    if (zai_rows := fake_zai.web_search_rows(turn, body)) is not None:
        events[0][1]['web_search'] = zai_rows  # Z.AI reports its chat search at the top level
    events += [chunk({'reasoning_content': p}) for p in _pieces(turn.reasoning)]
    events += [chunk({'content': p}) for p in _text_pieces(turn)]
    annotations = openrouter_annotations(turn, body)
    if annotations:  # OpenRouter sends the search's sources on a delta once the text is out
        events.append(chunk({'annotations': annotations}))
        usage['server_tool_use'] = {'web_search_requests': 1}
    for index, (call_id, tc) in enumerate(calls):
        head = {'index': index, 'id': call_id, 'type': 'function', 'function': {'name': tc.name, 'arguments': ''}}
        events.append(chunk({'tool_calls': [head]}))
        for p in _pieces(tc.text(), 2):
            events.append(chunk({'tool_calls': [{'index': index, 'function': {'arguments': p}}]}))
    events.append(chunk({}, finish))
    events.append((None, {'id': cid, 'object': 'chat.completion.chunk', 'created': 1700000000, 'model': model,
                          'choices': [], 'usage': usage}))
    message: dict[str, Any] = {'role': 'assistant', 'content': turn.text or None, 'refusal': None}
    if annotations:
        message['annotations'] = annotations
    if turn.reasoning:
        message['reasoning_content'] = turn.reasoning
    if calls:
        message['tool_calls'] = [{'id': i, 'type': 'function',
                                  'function': {'name': tc.name, 'arguments': tc.text()}}
                                 for i, tc in calls]
    final = {'id': cid, 'object': 'chat.completion', 'created': 1700000000, 'model': model,
             'choices': [{'index': 0, 'message': message, 'logprobs': None, 'finish_reason': finish}],
             'usage': usage}
    if '/' in model:  # an OpenRouter slug (vendor/model): OpenRouter names the upstream it routed to
        final['provider'] = 'FakeUpstream'
        for _, data in events:
            data['provider'] = 'FakeUpstream'
        if turn.reasoning:  # its reasoning: the text as `reasoning`, and as signed `reasoning_details`
            detail = {'type': 'reasoning.text', 'text': turn.reasoning, 'signature': f'sig-{cid}',
                      'format': 'anthropic-claude-v1', 'index': 0}
            for _, data in events:
                delta = data['choices'][0]['delta'] if data.get('choices') else {}
                if 'reasoning_content' in delta:
                    text = delta.pop('reasoning_content')
                    delta['reasoning'] = text
                    delta['reasoning_details'] = [{**detail, 'text': text, 'signature': None}]
            last = next(data for _, data in reversed(events) if data.get('choices') and 'reasoning' in data['choices'][0]['delta'])
            last['choices'][0]['delta']['reasoning_details'][0]['signature'] = detail['signature']
            del message['reasoning_content']
            message['reasoning'], message['reasoning_details'] = turn.reasoning, [detail]
    if zai_rows is not None:
        final['web_search'] = zai_rows
    return events, final


def openrouter_searches(body: dict[str, Any]) -> bool:
    """Whether a Chat Completions request asks OpenRouter to search: its `openrouter:web_search`
    server tool, the (deprecated) `web` plugin, or a model slug with the `:online` variant."""
    tools = body.get('tools') or []
    plugins = body.get('plugins') or []
    model = str(body.get('model') or '')
    return (any(isinstance(t, dict) and t.get('type') == 'openrouter:web_search' for t in tools)
            or any(isinstance(p, dict) and p.get('id') == 'web' for p in plugins)
            or 'online' in model.split(':')[1:])


def openrouter_annotations(turn: Turn, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `url_citation` annotations OpenRouter attaches to a searched answer (none when the
    request did not ask for search, as OpenRouter would not have searched)."""
    search = turn.native_search
    if search is None or not turn.text or not openrouter_searches(body):
        return []
    return [{'type': 'url_citation', 'url_citation': {'url': s['url'], 'title': s.get('title', ''),
                                                      'content': s.get('snippet', ''),
                                                      'start_index': 0, 'end_index': len(turn.text)}}
            for s in search.sources]


# ---------------------------------------------------------------- Responses
def responses_render(
    turn: Turn, body: dict[str, Any], new_id: _Ids
) -> tuple[list[Event], dict[str, Any]]:
    """Events of a Responses stream and the equivalent non-streamed response."""
    resp_id, model = new_id('resp'), body.get('model', 'fake-model')
    want_encrypted = 'reasoning.encrypted_content' in (body.get('include') or [])
    events: list[Event] = []
    output: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, {'type': kind, **fields}))

    def add_item(added: dict[str, Any], done: dict[str, Any], inner: Callable[[int], None]) -> None:
        index = len(output)
        emit('response.output_item.added', output_index=index, item=added)
        inner(index)
        emit('response.output_item.done', output_index=index, item=done)
        output.append(done)

    if turn.reasoning:
        rs = new_id('rs')
        done = {'type': 'reasoning', 'id': rs, 'summary': [{'type': 'summary_text', 'text': turn.reasoning}]}
        if want_encrypted:
            done['encrypted_content'] = f'enc-{rs}'

        def reasoning_events(i: int) -> None:
            common = {'item_id': rs, 'output_index': i, 'summary_index': 0}
            emit('response.reasoning_summary_part.added', **common, part={'type': 'summary_text', 'text': ''})
            for p in _pieces(turn.reasoning):
                emit('response.reasoning_summary_text.delta', **common, delta=p)
            emit('response.reasoning_summary_text.done', **common, text=turn.reasoning)
            emit('response.reasoning_summary_part.done', **common,
                 part={'type': 'summary_text', 'text': turn.reasoning})

        add_item({'type': 'reasoning', 'id': rs, 'summary': []}, done, reasoning_events)

    search = turn.native_search
    if search:
        ws = new_id('ws')
        action = {'type': 'search', 'query': search.query,
                  'sources': [{'type': 'url', 'url': s['url']} for s in search.sources]}

        def search_events(i: int) -> None:
            for stage in ('in_progress', 'searching', 'completed'):
                emit(f'response.web_search_call.{stage}', output_index=i, item_id=ws)

        add_item({'type': 'web_search_call', 'id': ws, 'status': 'in_progress', 'action': {'type': 'search'}},
                 {'type': 'web_search_call', 'id': ws, 'status': 'completed', 'action': action}, search_events)

    if turn.text:
        msg = new_id('msg')
        annotations = [{'type': 'url_citation', 'start_index': 0, 'end_index': len(turn.text),
                        'url': s['url'], 'title': s.get('title', '')} for s in (search.sources if search else [])]
        part = {'type': 'output_text', 'text': turn.text, 'annotations': annotations, 'logprobs': []}

        def text_events(i: int) -> None:
            common = {'item_id': msg, 'output_index': i, 'content_index': 0}
            emit('response.content_part.added', **common,
                 part={'type': 'output_text', 'text': '', 'annotations': [], 'logprobs': []})
            for p in _text_pieces(turn):
                emit('response.output_text.delta', **common, delta=p, logprobs=[])
            for n, annotation in enumerate(annotations):
                emit('response.output_text.annotation.added', **common, annotation_index=n, annotation=annotation)
            emit('response.output_text.done', **common, text=turn.text, logprobs=[])
            emit('response.content_part.done', **common, part=part)

        add_item({'type': 'message', 'id': msg, 'status': 'in_progress', 'role': 'assistant', 'content': []},
                 {'type': 'message', 'id': msg, 'status': 'completed', 'role': 'assistant', 'content': [part]},
                 text_events)

    for tc in turn.tool_calls:
        fc, arguments = new_id('fc'), tc.text()
        call = {'type': 'function_call', 'id': fc, 'call_id': tc.id or new_id('call'), 'name': tc.name}

        def call_events(i: int, fc: str = fc, arguments: str = arguments) -> None:
            for p in _pieces(arguments, 2):
                emit('response.function_call_arguments.delta', item_id=fc, output_index=i, delta=p)
            emit('response.function_call_arguments.done', item_id=fc, output_index=i, arguments=arguments)

        add_item({**call, 'arguments': '', 'status': 'in_progress'},
                 {**call, 'arguments': arguments, 'status': 'completed'}, call_events)

    shell = {'id': resp_id, 'object': 'response', 'created_at': 1700000000, 'model': model,
             'status': 'in_progress', 'output': [], 'usage': None, 'error': None, 'incomplete_details': None,
             'instructions': body.get('instructions'), 'tools': body.get('tools', []), 'tool_choice': 'auto',
             'parallel_tool_calls': True, 'metadata': {}, 'text': {'format': {'type': 'text'}},
             'previous_response_id': body.get('previous_response_id'), 'store': body.get('store', True)}
    # As the API reports it (the openai SDK's types require cache_write_tokens; without it every
    # terminal event fails the SDK's validation and is built by its slower fallback).
    usage = {'input_tokens': turn.usage[0], 'input_tokens_details': {'cached_tokens': 0, 'cache_write_tokens': 0},
             'output_tokens': turn.usage[1], 'output_tokens_details': {'reasoning_tokens': 0},
             'total_tokens': sum(turn.usage)}
    cut = turn.finish == 'length'
    final = {**shell, 'status': 'incomplete' if cut else 'completed', 'output': output, 'usage': usage}
    if cut:
        final['incomplete_details'] = {'reason': 'max_output_tokens'}
    head: list[Event] = [('response.created', {'type': 'response.created', 'response': shell}),
                         ('response.in_progress', {'type': 'response.in_progress', 'response': shell})]
    end = 'response.incomplete' if cut else 'response.completed'
    events = head + events + [(end, {'type': end, 'response': final})]
    for n, (_, data) in enumerate(events):
        data['sequence_number'] = n
    return events, final


# ---------------------------------------------------------------- Anthropic Messages
def anthropic_render(turn: Turn, body: dict[str, Any], new_id: _Ids) -> tuple[list[Event], dict[str, Any]]:
    """Events of an Anthropic Messages stream and the equivalent non-streamed message."""
    msg_id, model = new_id('msg'), body.get('model', 'claude-fake')
    events: list[Event] = []
    blocks: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, {'type': kind, **fields}))

    def block(start: dict[str, Any], deltas: list[dict[str, Any]], final: dict[str, Any]) -> None:
        index = len(blocks)
        emit('content_block_start', index=index, content_block=start)
        for delta in deltas:
            emit('content_block_delta', index=index, delta=delta)
        emit('content_block_stop', index=index)
        blocks.append(final)

    if turn.reasoning:
        signature = f'sig-{new_id("th")}'
        deltas = [{'type': 'thinking_delta', 'thinking': p} for p in _pieces(turn.reasoning)]
        block({'type': 'thinking', 'thinking': '', 'signature': ''},
              [*deltas, {'type': 'signature_delta', 'signature': signature}],
              {'type': 'thinking', 'thinking': turn.reasoning, 'signature': signature})
    citations: list[dict[str, Any]] = []
    if search := turn.native_search:
        tool_id, query_json = new_id('srvtoolu'), json.dumps({'query': search.query})
        block({'type': 'server_tool_use', 'id': tool_id, 'name': 'web_search', 'input': {}},
              [{'type': 'input_json_delta', 'partial_json': p} for p in _pieces(query_json, 2)],
              {'type': 'server_tool_use', 'id': tool_id, 'name': 'web_search', 'input': {'query': search.query}})
        results = [{'type': 'web_search_result', 'url': s['url'], 'title': s.get('title', ''),
                    'encrypted_content': f'enc-{n}-{s["url"]}', 'page_age': 'April 1, 2026'}
                   for n, s in enumerate(search.sources)]
        result_block = {'type': 'web_search_tool_result', 'tool_use_id': tool_id, 'content': results}
        block(result_block, [], result_block)
        citations = [{'type': 'web_search_result_location', 'url': s['url'], 'title': s.get('title', ''),
                      'encrypted_index': f'idx-{n}', 'cited_text': s.get('snippet', '')}
                     for n, s in enumerate(search.sources)]
    if turn.text:
        deltas = [{'type': 'citations_delta', 'citation': c} for c in citations]
        deltas += [{'type': 'text_delta', 'text': p} for p in _text_pieces(turn)]
        final_text: dict[str, Any] = {'type': 'text', 'text': turn.text}
        if citations:
            final_text['citations'] = citations
        block({'type': 'text', 'text': ''}, deltas, final_text)
    for tc in turn.tool_calls:
        tool_id = tc.id or new_id('toolu')
        block({'type': 'tool_use', 'id': tool_id, 'name': tc.name, 'input': {}},
              [{'type': 'input_json_delta', 'partial_json': p} for p in _pieces(tc.text(), 2)],
              {'type': 'tool_use', 'id': tool_id, 'name': tc.name, 'input': tc.value()})

    stop = 'max_tokens' if turn.finish == 'length' else 'tool_use' if turn.tool_calls else 'end_turn'
    if turn.finish == 'refusal':
        stop = 'refusal'
    start_usage = {'input_tokens': turn.usage[0], 'output_tokens': 1, 'cache_creation_input_tokens': 0,
                   'cache_read_input_tokens': 0}
    shell = {'id': msg_id, 'type': 'message', 'role': 'assistant', 'model': model, 'content': [],
             'stop_reason': None, 'stop_sequence': None, 'usage': start_usage}
    head: list[Event] = [('message_start', {'type': 'message_start', 'message': shell}), ('ping', {'type': 'ping'})]
    tail: list[Event] = [
        ('message_delta', {'type': 'message_delta', 'delta': {'stop_reason': stop, 'stop_sequence': None},
                           'usage': {'output_tokens': turn.usage[1]}}),
        ('message_stop', {'type': 'message_stop'}),
    ]
    final = {**shell, 'content': blocks, 'stop_reason': stop,
             'usage': {**start_usage, 'output_tokens': turn.usage[1]}}
    return head + events + tail, final


def gemini_render(turn: Turn, body: dict[str, Any], new_id: _Ids, path: str = '') -> tuple[list[Event], dict[str, Any]]:
    """Chunks of a Gemini `streamGenerateContent` stream and the equivalent `generateContent` answer."""
    model = (fake_gemini.route(path) or ('gemini-fake', True))[0]
    return fake_gemini.render(turn, body, new_id, model=model, pieces=_pieces)


def mistral_render(turn: Turn, body: dict[str, Any], new_id: _Ids) -> tuple[list[Event], dict[str, Any]]:
    """Events of a Mistral Conversations stream and the equivalent whole `conversation.response`."""
    return fake_mistral.render(turn, body, new_id, _pieces)  # type: ignore[return-value]


_RENDERERS = {CHAT: chat_render, RESPONSES: responses_render, ANTHROPIC: anthropic_render, GEMINI: gemini_render,
              MISTRAL: mistral_render}
_GARBAGE = {CHAT: 'data: {"choices": [oops\n\n',
            RESPONSES: 'event: response.output_text.delta\ndata: {oops not json\n\n',
            ANTHROPIC: 'event: content_block_delta\ndata: {oops not json\n\n',
            GEMINI: 'data: {"candidates": [oops\n\n',
            MISTRAL: 'event: message.output.delta\ndata: {oops not json\n\n'}


# ---------------------------------------------------------------- Responses item rules
@dataclass
class _Rejection(Exception):
    status: int
    kind: str
    message: str


class ResponsesLedger:
    """What the fake Responses server 'stored', and the provider's rules on each request's input."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[dict[str, Any], str | None]] = {}  # id -> (item, its reasoning item id)
        self.responses: dict[str, set[str]] = {}  # response id -> call_ids in its context

    def forget(self) -> None:
        """Drop every stored item and response, as a provider that expired them would."""
        self.items.clear()
        self.responses.clear()

    def record(self, final: dict[str, Any], context_call_ids: set[str]) -> None:
        """Store the output items of one finished response."""
        reasoning = next((i['id'] for i in final['output'] if i['type'] == 'reasoning'), None)
        for item in final['output']:
            self.items[item['id']] = (item, None if item['type'] == 'reasoning' else reasoning)
        calls = {i['call_id'] for i in final['output'] if i['type'] == 'function_call'}
        self.responses[final['id']] = context_call_ids | calls

    def check(self, body: dict[str, Any]) -> set[str]:
        """Raise `_Rejection` if the real provider would refuse `body`; return its call_ids in context."""
        items = body.get('input')
        items = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
        call_ids: set[str] = set()
        if previous := body.get('previous_response_id'):
            if previous not in self.responses:
                raise _Rejection(404, 'previous_response_not_found',
                                 f"Previous response with id '{previous}' not found.")
            call_ids |= self.responses[previous]
        present: set[str] = set()
        for item in items:
            if item_id := item.get('id'):
                if item_id not in self.items:
                    raise _Rejection(404, 'item_not_found', f"Item with id '{item_id}' not found.")
                present.add(item_id)
                stored = self.items[item_id][0]
                if stored['type'] == 'function_call':
                    call_ids.add(stored['call_id'])
            if item.get('type') == 'function_call' and item.get('call_id'):
                call_ids.add(item['call_id'])
        for item_id in present:
            stored, reasoning = self.items[item_id]
            if reasoning is not None and reasoning not in present:
                raise _Rejection(400, 'missing_reasoning',
                                 f"Item '{item_id}' of type '{stored['type']}' was provided without its "
                                 f"required 'reasoning' item: '{reasoning}'.")
        for item in items:
            if item.get('type') == 'function_call_output' and item.get('call_id') not in call_ids:
                raise _Rejection(400, 'orphan_function_call_output',
                                 f"No tool call found for function call output with call_id {item.get('call_id')}.")
        return call_ids


# ---------------------------------------------------------------- server
class _Server(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` whose loop sleeps until a connection arrives or ``wake()`` is
    called, instead of ``serve_forever``'s 50 ms polling: a test's ``stop()`` returns at once
    (it used to wait out the poll, about 50 ms of wall per fake), and an idle fake costs no CPU."""

    def server_activate(self) -> None:
        super().server_activate()
        self._wake_r, self._wake_w = os.pipe()

    def serve_until_woken(self) -> None:
        import selectors

        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj == self._wake_r:
                        return
                    self._handle_request_noblock()

    def wake(self) -> None:
        """End ``serve_until_woken`` (the caller joins its thread)."""
        os.write(self._wake_w, b"x")

    def server_close(self) -> None:
        super().server_close()
        for fd in (getattr(self, "_wake_r", None), getattr(self, "_wake_w", None)):  # none when the bind failed
            if fd is not None:
                os.close(fd)


class _ReusePortServer(_Server):
    """Binds a fixed port beside a test's reservation of it (SO_REUSEPORT, same user)."""

    allow_reuse_port = True


class FakeProvider:
    """The scripted server. Use as a context manager or via the `fake_provider` fixture.

    Args:
        script: turns played one per model request, in arrival order; a callable entry receives the
            `RecordedRequest` and returns the turn. When it runs out, "(script exhausted)" is answered
            and `exhausted` becomes True.
        models: ids listed by `GET /v1/models`.
        strict_responses: enforce the Responses item rules on `/v1/responses` inputs.
        window, input_limit, chars_per_token: enforce a context window (see the module doc).
        exact_paths: route only `/v1/<endpoint>` as a real server does; any other path (a doubled
            or missing `/v1`) gets llama.cpp's `404 File Not Found`. Off by default: a missing or
            doubled `/v1` is tolerated.
        refuse_stream_with_tools: a server that cannot stream tool calls: `'error'` answers a
            streamed request that offers tools with llama.cpp's HTTP 500 "Cannot use tools with
            stream"; `'broken'` starts the stream and drops the connection before any event
            (llama-cpp-python); `'pinged'` sends an SSE keep-alive comment and ends the body cleanly
            with no event (llama-cpp-python's function-calling chat format, when the model calls a
            tool). Non-streamed requests are answered normally.
        strict_json: parse every request body as a strict server does (no NaN/Infinity, no number
            that overflows a double, no integer beyond 64 bits, no lone surrogate) and answer 500
            to one that is not; every problem found is kept in `json_problems` either way.
        llama_cpp_python: the Chat rules of llama-cpp-python's server: an assistant message's
            `content` must be a string (null is answered with its HTTP 500 validation error,
            naming `('body', 'messages', N, ...)`), and only `max_tokens` bounds the output
            (`max_completion_tokens` is ignored); each Chat request's honoured cap (None:
            unbounded) is kept in `output_caps`.
        tokenize: serve llama.cpp's `POST /tokenize` (`{"content": text}` → `{"tokens": [...]}`), one
            token per `chars_per_token` characters of the text, and Anthropic's `POST
            /v1/messages/count_tokens` (`{"input_tokens": N}`, counted as the window rule counts).
        count_usage: report the input tokens as the window rule counts them (`counted_input`)
            as each answer's prompt tokens, instead of the turn's scripted `usage`, as a real
            server reports what its tokenizer counted.
        tokenizer: how input is counted: `'chars'` (one token per `chars_per_token` characters of
            the body's strings), or `'gemma3'`, as llama.cpp's `llama-server` counted Gemma 3 270M
            under its ChatML template (`gemma3_count`: tool schemas are not in that prompt, each
            digit is a token, other text about 3.1 characters a token).
    """

    def __init__(self, script: Sequence[ScriptEntry] = (), models: Sequence[str] = ('fake-model',),
                 *, strict_responses: bool = True, exact_paths: bool = False,
                 refuse_stream_with_tools: str = '', strict_json: bool = False, window: int | None = None,
                 input_limit: int | None = None, chars_per_token: float = 3.5,
                 cache: fake_cache.PromptCache | None = None, llama_cpp_python: bool = False,
                 count_usage: bool = False, tokenize: bool = False, tokenizer: str = 'chars') -> None:
        assert tokenizer in ('chars', 'gemma3'), tokenizer
        self.tokenizer = tokenizer
        self.cache = cache
        """Prompt-cache accounting (see `fake_cache`); None: the turns' scripted usage, no caching."""
        self.tokenize = tokenize
        self.llama_cpp_python = llama_cpp_python
        self.output_caps: list[int | None] = []
        self.count_usage = count_usage
        self.exact_paths = exact_paths
        self.refuse_stream_with_tools = refuse_stream_with_tools
        self.strict_json = strict_json
        self.json_problems: list[str] = []
        self._routes: dict[str, tuple[int, Any]] = {}
        self.script: list[ScriptEntry] = list(script)
        self.models = list(models)
        self.strict_responses = strict_responses
        self.requests: list[RecordedRequest] = []
        self.exhausted = False
        self.rejections: Counter[str] = Counter()
        self.errors: list[BaseException] = []
        self.ledger = ResponsesLedger()
        self.window = window
        self.input_limit = input_limit
        self.chars_per_token = chars_per_token
        self.counted: list[tuple[int, int | None]] = []
        """(input tokens as counted, requested output or None) of every model request checked."""
        self._failures: dict[str, list[Any]] = {}  # normalized path -> [status, body, times left or None]
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = _Ids()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------
    def start(self, port: int = 0) -> FakeProvider:
        """Bind ``port`` (a free one when 0) on 127.0.0.1 and serve in a daemon thread.

        A given port is bound with SO_REUSEPORT, so a test can keep that port reserved
        (bound, never listening, see ``isolation.reserved_port``) until this server holds it:
        no other process can take it in between."""
        server = (_ReusePortServer if port else _Server)(('127.0.0.1', port), _Handler)
        server.daemon_threads = True
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(target=server.serve_until_woken, name='fake-provider', daemon=True)
        self._thread.start()
        return self

    def stop(self, *, check: bool = True) -> None:
        """Stop serving (requests still sleeping in a delay are abandoned).

        With `check`, re-raise the first exception raised while serving, such as a failed assert
        inside a callable script entry, so it fails the test instead of hiding behind a 500."""
        self._stopping.set()
        if self._server is not None:
            self._server.wake()
            assert self._thread is not None
            self._thread.join()
            self._server.server_close()
            self._server = None
        if check and self.errors:
            raise self.errors[0]

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.stop(check=exc_type is None)

    @property
    def port(self) -> int:
        """The bound port."""
        assert self._server is not None, 'FakeProvider is not started'
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`."""
        return f'http://127.0.0.1:{self.port}/v1'

    # test controls ---------------------------------------------------------
    def add(self, *entries: ScriptEntry) -> None:
        """Append turns to the script."""
        with self._lock:
            self.script.extend(entries)

    def fail_path(self, path: str, status: int = 400, body: dict[str, Any] | None = None,
                  times: int | None = None) -> None:
        """Answer requests to `path` (any `/v1` form) with `status`/`body`, `times` times (None = always).

        Failures do not consume the script."""
        with self._lock:
            self._failures[_normalize(path)] = [status, body, times]

    def count(self, body: dict[str, Any]) -> int:
        """Input tokens of a request body as this server's tokenizer counts them (``tokenizer``)."""
        return gemma3_count(body) if self.tokenizer == 'gemma3' else counted_input(body, self.chars_per_token)

    def count_text(self, text: str) -> int:
        """Tokens of one text (``POST /tokenize``)."""
        return gemma3_text(text) if self.tokenizer == 'gemma3' else int(len(text) / self.chars_per_token) + 1

    def serve_json(self, path: str, payload: Any, status: int = 200) -> None:
        """Answer any method on exactly `path` (e.g. llama.cpp's `/props`, Ollama's `/api/show`,
        LM Studio's `/api/v0/models`) with `payload` as JSON; a callable `payload` is given the
        request's JSON body (or None) and returns what to answer (a bench relays a real server's)."""
        with self._lock:
            self._routes[path] = (status, payload)

    def forget_items(self) -> None:
        """Forget every Responses item emitted so far (later references to them get 404)."""
        with self._lock:
            self.ledger.forget()

    def requests_to(self, wire: str) -> list[RecordedRequest]:
        """Recorded requests on one wire: 'chat', 'responses', 'anthropic' or 'models'."""
        with self._lock:
            return [r for r in self.requests if r.wire == wire]

    @property
    def model_requests(self) -> list[RecordedRequest]:
        """Recorded POSTs to the three model endpoints, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.wire in _RENDERERS]

    # internals used by the handler ------------------------------------------
    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _take_failure(self, path: str) -> tuple[int, dict[str, Any] | None] | None:
        with self._lock:
            entry = self._failures.get(_normalize(path))
            if entry is None:
                return None
            if entry[2] is not None:
                entry[2] -= 1
                if entry[2] <= 0:
                    del self._failures[_normalize(path)]
            return entry[0], entry[1]

    def _next_turn(self, request: RecordedRequest) -> Turn:
        with self._lock:
            if not self.script:
                self.exhausted = True
                return Turn(text='(script exhausted)')
            entry = self.script.pop(0)
        return entry(request) if callable(entry) else entry

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _hold(self, hold: Hold) -> None:
        hold.reached.set()
        while not hold.released.wait(0.05) and not self._stopping.is_set():
            pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server_version = 'FakeProvider/1.0'

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep test output quiet."""

    @property
    def fake(self) -> FakeProvider:
        return self.server.fake  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        self._responded = False  # one handler serves every request of a kept-alive connection
        path, _, query = self.path.partition('?')
        length = int(self.headers.get('content-length') or 0)
        raw = self.rfile.read(length) if length else b''
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = RecordedRequest(self.command, path, headers, body if isinstance(body, dict) else None, query, raw)
        self.fake._record(request)
        wire = request.wire
        if raw and (problem := strict_json_problem(raw)) is not None:
            with self.fake._lock:
                self.fake.json_problems.append(problem)
            if self.fake.strict_json:
                self._json(500, {'error': {'code': 500, 'message': f'[json.exception.parse_error] {problem}',
                                           'type': 'server_error'}})
                return
        route = self.fake._routes.get(path)
        try:
            if route is not None and (failure := self.fake._take_failure(path)) is not None:
                # a served path that fails first (a server answering 503 "Loading model", then /props)
                self._json(failure[0], failure[1] or default_error_body(wire, failure[0]))
            elif route is not None:
                self._json(route[0], route[1](body) if callable(route[1]) else route[1])
            elif self.fake.tokenize and _normalize(path) == '/messages/count_tokens' and self.command == 'POST':
                self._json(200, {'input_tokens': self.fake.count(body or {})})
            elif self.fake.tokenize and path == '/tokenize' and self.command == 'POST':
                content = (body or {}).get('content') if isinstance(body, dict) else None
                count = self.fake.count_text(content) if isinstance(content, str) else 0
                self._json(200, {'tokens': list(range(count))})
            elif self.fake.exact_paths and path.rstrip('/') not in _EXACT:
                self._json(404, {'error': {'code': 404, 'message': 'File Not Found', 'type': 'not_found_error'}})
            elif (failure := self.fake._take_failure(path)) is not None:
                status, error = failure
                self._json(status, error or default_error_body(wire, status))
            elif wire == MODELS and self.command == 'GET':
                self._json(200, self._model_list(headers))
            elif wire in _RENDERERS and self.command == 'POST':
                self._answer(wire, request)
            else:
                self._json(404, default_error_body(wire, 404, f'Unknown fake endpoint {self.command} {path}'))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as error:  # a bug or a failed assert in a script callable
            self.fake.errors.append(error)
            if self._responded:
                self.close_connection = True
            else:
                self._json(500, default_error_body(wire, 500, f'fake provider crashed: {error!r}'))

    _responded = False

    def send_response(self, code: int, message: str | None = None) -> None:
        """Note that a status line went out, so a later crash cannot send a second one."""
        self._responded = True
        super().send_response(code, message)

    def _model_list(self, headers: dict[str, str]) -> dict[str, Any]:
        if 'x-goog-api-key' in headers:  # Gemini's models.list
            return {'models': [{'name': f'models/{m}', 'displayName': m,
                                'supportedGenerationMethods': ['generateContent', 'countTokens']}
                               for m in self.fake.models]}
        if 'anthropic-version' in headers:
            data = [{'type': 'model', 'id': m, 'display_name': m, 'created_at': '2026-01-01T00:00:00Z'}
                    for m in self.fake.models]
            return {'data': data, 'has_more': False, 'first_id': data[0]['id'] if data else None,
                    'last_id': data[-1]['id'] if data else None}
        return {'object': 'list', 'data': [{'id': m, 'object': 'model', 'created': 1700000000,
                                            'owned_by': 'fake'} for m in self.fake.models]}

    def _answer(self, wire: str, request: RecordedRequest) -> None:
        fake, body = self.fake, request.body or {}
        if fake.window is not None and (refusal := window_refusal(fake, wire, body)) is not None:
            with fake._lock:
                fake.rejections['context_length_exceeded'] += 1
            self._json(400, refusal)
            return
        if wire == MISTRAL and (refused := fake_mistral.rejection(body)) is not None:
            with fake._lock:
                fake.rejections['mistral_invalid_inputs'] += 1
            self._json(422, refused)
            return
        context: set[str] = set()
        if wire == RESPONSES and fake.strict_responses:
            try:
                with fake._lock:
                    context = fake.ledger.check(body)
            except _Rejection as rejection:
                with fake._lock:
                    fake.rejections[rejection.kind] += 1
                error = {'message': rejection.message, 'type': 'invalid_request_error', 'param': 'input',
                         'code': None}
                self._json(rejection.status, {'error': error})
                return
        if request.stream and body.get('tools') and fake.refuse_stream_with_tools:
            if fake.refuse_stream_with_tools == 'pinged':
                # llama-cpp-python's chatml-function-calling: its generator raises ("Automatic
                # streaming tool choice is not supported") after sse-starlette's keep-alive
                # comment went out, and the body ends cleanly with no event
                self.send_response(200)
                self.send_header('Content-Type', 'text/event-stream; charset=utf-8')
                self.send_header('Transfer-Encoding', 'chunked')
                self.end_headers()
                ping = b': ping - 2026-01-01 00:00:15.000000+00:00\r\n\r\n'
                self.wfile.write(b'%x\r\n%s\r\n0\r\n\r\n' % (len(ping), ping))
                return
            if fake.refuse_stream_with_tools == 'broken':
                self.send_response(200)
                self.send_header('Content-Type', 'text/event-stream; charset=utf-8')
                self.send_header('Transfer-Encoding', 'chunked')
                self.end_headers()
                self.wfile.flush()
                self.close_connection = True  # the generator raised: no event, no final chunk
                return
            self._json(500, {'error': {'code': 500, 'message': 'Cannot use tools with stream', 'type': 'server_error'}})
            return
        if wire == CHAT and (groq_refusal := fake_groq.refusal(request.path, body)) is not None:
            self._json(400, groq_refusal)
            return
        if wire == CHAT and fake.llama_cpp_python:
            if (problem := llama_cpp_python_problem(body)) is not None:
                self._json(500, {'error': {'message': problem, 'type': 'internal_server_error'}})
                return
            with fake._lock:
                fake.output_caps.append(body['max_tokens'] if isinstance(body.get('max_tokens'), int) else None)
        cache_plan = fake.cache.plan(wire, request.path, body) if fake.cache is not None else None
        if cache_plan is not None and cache_plan.counts.error is not None:
            self._json(400, cache_plan.counts.error)
            return
        turn = fake._next_turn(request)
        if fake.count_usage:
            import dataclasses

            turn = dataclasses.replace(turn, usage=(fake.count(body), turn.usage[1]))
        if turn.hold is not None:
            fake._hold(turn.hold)
        fake._wait(turn.delay)
        if turn.status != 200:
            self._json(turn.status, turn.error_body or default_error_body(wire, turn.status))
            return
        if wire == GEMINI:
            events, final = gemini_render(turn, body, fake._ids, request.path)
        else:
            events, final = _RENDERERS[wire](turn, body, fake._ids)
            if wire == CHAT and fake_groq.is_groq(request.path):
                events, final = fake_groq.groq_render(turn, body, events, final)
        if fake.cache is not None and cache_plan is not None:
            fake_cache.apply_usage(wire, fake.cache.commit(cache_plan), events, final)
        if wire == RESPONSES and not (turn.truncate or turn.malformed or turn.end_early):
            with fake._lock:
                fake.ledger.record(final, context)
        if request.stream:
            self._stream(wire, events, turn)
        else:
            self._whole(final, turn)

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        if status in (408, 409, 429) or status >= 500:
            self.send_header('retry-after-ms', '10')  # SDK retries, if enabled, stay fast
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _whole(self, final: dict[str, Any], turn: Turn) -> None:
        data = b'this is not json {' if turn.malformed else json.dumps(final).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        if turn.truncate:
            self.wfile.write(data[: len(data) // 2])
            self.close_connection = True
            return
        self.wfile.write(data)

    def _stream(self, wire: str, events: list[Event], turn: Turn) -> None:
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream; charset=utf-8')
        self.send_header('Cache-Control', 'no-cache')
        self.send_header('Transfer-Encoding', 'chunked')
        self.end_headers()
        frames = [(f'event: {name}\n' if name else '') + f'data: {json.dumps(data)}\n\n' for name, data in events]
        if wire == CHAT:
            frames.append('data: [DONE]\n\n')
        if turn.malformed:
            frames.insert(1, _GARBAGE[wire])
        cut = max(1, len(frames) // 2) if turn.truncate else None
        if turn.end_early:
            frames = frames[: max(1, len(frames) // 2)]
        hold_at = None
        if turn.hold_after_piece is not None:
            assert not turn.malformed, 'a hold counts the frames of a well-formed stream'
            texts = [n for n, (_, data) in enumerate(events) if _is_text_piece(wire, data)]
            hold_at = texts[turn.hold_after_piece[0] - 1]
        for n, frame in enumerate(frames):
            if n == cut:
                self.close_connection = True  # no terminal event and no final chunk
                return
            if n and turn.chunk_delay:
                self.fake._wait(turn.chunk_delay)
            data = frame.encode()
            self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
            self.wfile.flush()
            if n == hold_at:
                assert turn.hold_after_piece is not None
                self.fake._hold(turn.hold_after_piece[1])
        self.wfile.write(b'0\r\n\r\n')


def _is_text_piece(wire: str, data: dict[str, Any]) -> bool:
    """Whether one stream event carries a (non-empty) piece of the answer's text."""
    if wire == CHAT:
        choices = data.get('choices') or [{}]
        return bool((choices[0].get('delta') or {}).get('content'))
    if wire == RESPONSES:
        return data.get('type') == 'response.output_text.delta'
    if wire == ANTHROPIC:
        return data.get('type') == 'content_block_delta' and data['delta'].get('type') == 'text_delta'
    raise AssertionError(f'hold_after_piece is not supported on the {wire} wire')


_EXACT = {'/v1' + route for route in _ROUTES}


def strict_json_problem(raw: bytes) -> str | None:
    """Why a strict JSON parser (a C++ or Rust server's) refuses `raw`, or None when it accepts it."""
    import math

    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError as error:
        return f'not UTF-8: {error}'

    def constant(name: str) -> Any:
        raise ValueError(f'{name} is not a JSON value')

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f'number {text[:30]} overflows a double')
        return value

    def integer(text: str) -> int:
        digits = text.lstrip('-')
        if len(digits) > 20 or not -(2**63) <= int(text) < 2**64:
            raise ValueError(f'integer {text[:30]} does not fit in 64 bits')
        return int(text)

    try:
        value = json.loads(text, parse_constant=constant, parse_float=number, parse_int=integer)
    except ValueError as error:
        return str(error)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and any('\ud800' <= c <= '\udfff' for c in item):
            return f'lone surrogate in string {item[:30]!r}'
    return None


# ---------------------------------------------------------------- the window rule
_OUTPUT_FIELDS = ('max_tokens', 'max_completion_tokens', 'max_output_tokens')
_NOT_INPUT = frozenset({'model', 'stream', 'stream_options', 'store', 'include', 'tool_choice', 'parallel_tool_calls',
                        'reasoning', 'thinking', 'metadata', 'service_tier', 'truncation', 'text', *_OUTPUT_FIELDS})


def _string_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(k) + _string_chars(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_string_chars(v) for v in value)
    return 0 if value is None else len(str(value))


def counted_input(body: dict[str, Any], chars_per_token: float = 3.5) -> int:
    """Input tokens of a request body as the window rule counts them."""
    chars = sum(len(k) + _string_chars(v) for k, v in body.items() if k not in _NOT_INPUT)
    return int(chars / chars_per_token) + 1


GEMMA3_CHARS_PER_TOKEN = 3.1
"""Characters of text other than digits per token, as llama.cpp counted Gemma 3 270M (measured
on ketch's requests through /apply-template and /tokenize, which agree with the usage it reports)."""
GEMMA3_MESSAGE_TOKENS = 5
"""The ChatML framing of one message (``<|im_start|>role`` … ``<|im_end|>``)."""


def gemma3_text(text: str) -> int:
    """Tokens of ``text`` as Gemma 3's tokenizer counted this kind of text: a digit each, the rest
    about :data:`GEMMA3_CHARS_PER_TOKEN` characters a token."""
    digits = sum(c.isdigit() for c in text)
    return digits + int((len(text) - digits) / GEMMA3_CHARS_PER_TOKEN)


def gemma3_count(body: dict[str, Any]) -> int:
    """Input tokens of a Chat or Responses body as llama.cpp's ``llama-server`` (``--jinja``)
    counted them for Gemma 3 270M: its ChatML template renders instructions and message text
    but neither the tool schemas nor the calls' arguments (so those are left out here too)."""
    texts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ('arguments', 'type', 'role', 'id', 'call_id', 'name', 'status'):
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    messages = body.get('messages') or body.get('input') or []
    for key, value in body.items():
        if key not in _NOT_INPUT and key != 'tools':
            walk(value)
    framing = GEMMA3_MESSAGE_TOKENS * ((len(messages) if isinstance(messages, list) else 1) + 1)
    return sum(map(gemma3_text, texts)) + framing


def window_refusal(fake: FakeProvider, wire: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The provider's 400 body when `body` breaks the window rule, else None."""
    assert fake.window is not None
    tokens = fake.count(body)
    output = next((body[f] for f in _OUTPUT_FIELDS if isinstance(body.get(f), int)), None)
    with fake._lock:
        fake.counted.append((tokens, output))
    window, limit = fake.window, fake.input_limit or fake.window
    if wire == ANTHROPIC:
        if tokens > window:
            return default_error_body(ANTHROPIC, 400, f'prompt is too long: {tokens} tokens > {window} maximum')
        if output is not None and tokens + output > window:
            return default_error_body(ANTHROPIC, 400, f'input length and `max_tokens` exceed context limit: {tokens} + '
                                      f'{output} > {window}, decrease input length or `max_tokens` and try again')
        return None
    if tokens > limit or tokens + (output or 0) > window:
        if wire == RESPONSES:
            message = 'Your input exceeds the context window of this model. Please adjust your input and try again.'
        else:
            message = (f"This model's maximum context length is {window} tokens. However, you requested "
                       f'{tokens + (output or 0)} tokens ({tokens} in the messages, {output or 0} in the completion). '
                       'Please reduce the length of the messages or completion.')
        return {'error': {'message': message, 'type': 'invalid_request_error',
                          'param': 'input' if wire == RESPONSES else 'messages', 'code': 'context_length_exceeded'}}
    return None


def llama_cpp_python_problem(body: dict[str, Any]) -> str | None:
    """llama-cpp-python's validation error for a Chat body whose assistant message has no
    string `content`, or None when it accepts the body."""
    for n, message in enumerate(body.get('messages') or []):
        if isinstance(message, dict) and message.get('role') == 'assistant' and not isinstance(message.get('content'), str):
            return (f"[{{'type': 'string_type', 'loc': ('body', 'messages', {n}, 'typed-dict', 'content'), "
                    f"'msg': 'Input should be a valid string', 'input': None}}]")
    return None


# ---------------------------------------------------------------- request readers
def wire_of(req: RecordedRequest) -> str:
    """The wire of a recorded model request; raises for anything else."""
    wire = req.wire
    if wire not in _RENDERERS or req.body is None:
        raise ValueError(f'not a model request: {req.method} {req.path}')
    return wire


def _text_of(content: Any) -> str:
    """Flatten a string or a list of text-like parts into one string."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return ''.join(p.get('text', '') if isinstance(p, dict) else str(p) for p in content)
    return '' if content is None else json.dumps(content)


def _messages(req: RecordedRequest) -> Iterator[dict[str, Any]]:
    assert req.body is not None
    key = 'input' if wire_of(req) == RESPONSES else 'messages'
    items = req.body.get(key) or []
    if isinstance(items, str):
        items = [{'role': 'user', 'content': items}]
    yield from (i for i in items if isinstance(i, dict))


def tool_results(req: RecordedRequest) -> list[tuple[str, str]]:
    """`(call_id, content)` of every tool result the request sends back to the model."""
    wire = wire_of(req)
    if wire == GEMINI:
        return fake_gemini.tool_results(req.body or {})
    if wire == MISTRAL:
        return fake_mistral.tool_results(req.body or {})
    out: list[tuple[str, str]] = []
    for msg in _messages(req):
        if wire == CHAT and msg.get('role') == 'tool':
            out.append((msg.get('tool_call_id', ''), _text_of(msg.get('content'))))
        elif wire == RESPONSES and msg.get('type') == 'function_call_output':
            out.append((msg.get('call_id', ''), _text_of(msg.get('output'))))
        elif wire == ANTHROPIC and isinstance(msg.get('content'), list):
            out += [(b.get('tool_use_id', ''), _text_of(b.get('content')))
                    for b in msg['content'] if isinstance(b, dict) and b.get('type') == 'tool_result']
    return out


def tool_names(req: RecordedRequest) -> list[str]:
    """Names of the tools offered; provider-native tools appear by their `name` or else their `type`."""
    wire = wire_of(req)
    if wire == GEMINI:
        return fake_gemini.tool_names(req.body or {})
    if wire == MISTRAL:
        return fake_mistral.tool_names(req.body or {})
    names: list[str] = []
    for tool in (req.body or {}).get('tools') or []:
        if wire == CHAT and 'function' in tool:
            names.append(tool['function']['name'])
        else:
            names.append(tool.get('name') or tool.get('type', ''))
    return names


def instructions(req: RecordedRequest) -> str:
    """The system/developer text of the request (all sources joined with blank lines)."""
    wire, body = wire_of(req), req.body or {}
    if wire == GEMINI:
        return fake_gemini.instructions(body)
    if wire == MISTRAL:
        return fake_mistral.instructions(body)
    parts: list[str] = []
    if wire == RESPONSES and body.get('instructions'):
        parts.append(body['instructions'])
    if wire == ANTHROPIC and isinstance(body.get('system'), list):
        parts += [_text_of([block]) for block in body['system']]
    elif wire == ANTHROPIC and body.get('system'):
        parts.append(_text_of(body['system']))
    parts += [_text_of(m.get('content')) for m in _messages(req) if m.get('role') in ('system', 'developer')]
    return '\n\n'.join(p for p in parts if p)


REMINDER_OPEN = '<system-reminder>\n'
"""How ketch's state reminders (``context.reminders``) open: text ketch adds, not the user's."""


_REMINDER = re.compile(r'<system-reminder>\n.*?\n</system-reminder>', re.S)


def user_texts(req: RecordedRequest) -> list[str]:
    """The text of each user message, in order (tool results and ketch's state reminders excluded)."""
    return [t for t in (_REMINDER.sub('', text) for text in _user_texts(req)) if t]


def reminder_texts(req: RecordedRequest) -> list[str]:
    """ketch's state reminders in the request, in order."""
    return [m.group(0) for text in _user_texts(req) for m in _REMINDER.finditer(text)]


def _user_texts(req: RecordedRequest) -> list[str]:
    if wire_of(req) == GEMINI:
        return fake_gemini.user_texts(req.body or {})
    if wire_of(req) == MISTRAL:
        return fake_mistral.user_texts(req.body or {})
    texts: list[str] = []
    for msg in _messages(req):
        if msg.get('role') != 'user':
            continue
        content = msg.get('content')
        if isinstance(content, list):
            content = [p for p in content if isinstance(p, dict) and p.get('type') in ('text', 'input_text')]
            if not content:
                continue
        texts.append(_text_of(content))
    return texts


# ---------------------------------------------------------------- pytest fixture
def fake_provider() -> Iterator[Callable[..., FakeProvider]]:
    """Factory fixture: `fake_provider(script, models=..., strict_responses=...)` returns a started
    `FakeProvider`; all are stopped at teardown."""
    started: list[FakeProvider] = []

    def make(script: Sequence[ScriptEntry] = (), **kwargs: Any) -> FakeProvider:
        fake = FakeProvider(script, **kwargs).start()
        started.append(fake)
        return fake

    yield make
    for fake in started:
        fake.stop()  # raises the first server-side error, if any


if pytest is not None:
    fake_provider = pytest.fixture(fake_provider)


def delegating(kind: str, description: str = "look it up") -> Callable[[RecordedRequest], Turn]:
    """A script for a parent that hands ``CHILD-TASK find x`` to a subagent of ``kind``: the child
    answers "child finding", the parent then "parent done"."""

    def script(request: RecordedRequest) -> Turn:
        if any("CHILD-TASK" in text for text in user_texts(request)):
            return Turn(text="child finding")
        if tool_results(request):
            return Turn(text="parent done")
        return Turn(tool_calls=[ToolCall("task", {"description": description, "prompt": "CHILD-TASK find x", "kind": kind})])

    return script
