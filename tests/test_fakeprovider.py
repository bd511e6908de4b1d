"""The fake provider speaks each wire well enough for pydantic-ai's real models to parse it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fakeprovider import (
    FakeProvider,
    Hold,
    NativeSearch,
    RecordedRequest,
    ToolCall,
    Turn,
    fake_provider,  # noqa: F401 - fixture
    instructions,
    tool_names,
    tool_results,
    user_texts,
)
from pydantic_ai import Agent, ModelRequest
from pydantic_ai.capabilities import WebSearch
from pydantic_ai.direct import model_request
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelServerError,
)
from pydantic_ai.messages import (
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
)
from pydantic_ai.models import Model

os.environ.setdefault('PYDANTIC_AI_NO_BANNER', '1')

WIRES = ['chat', 'responses', 'anthropic']
PATHS = {'chat': '/v1/chat/completions', 'responses': '/v1/responses', 'anthropic': '/v1/v1/messages'}
Factory = Callable[..., FakeProvider]


def make_model(wire: str, base_url: str) -> Model:
    """A real pydantic-ai model of `wire` pointed at `base_url`."""
    if wire == 'anthropic':
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        return AnthropicModel('claude-haiku-4-5', provider=AnthropicProvider(base_url=base_url, api_key='x'))
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model_class = OpenAIChatModel if wire == 'chat' else OpenAIResponsesModel
    return model_class('gpt-5.2', provider=OpenAIProvider(base_url=base_url, api_key='x'))


def make_agent(wire: str, fake: FakeProvider, on_add: Callable[[], None] | None = None, **kwargs: Any) -> Agent:
    """An agent with one `add` tool and no SDK retries."""
    agent = Agent(make_model(wire, fake.base_url), instructions='Be brief.',
                  model_settings={'max_retries': 0}, **kwargs)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: first addend.
            b: second addend.
        """
        if on_add is not None:
            on_add()
        return a + b

    return agent


TOOL_SCRIPT = [
    Turn(reasoning='I should add them.', tool_calls=[ToolCall('add', {'a': 1, 'b': 2})], usage=(12, 4)),
    Turn(text='The sum is 3.', usage=(20, 6)),
]


def assert_tool_round_trip(fake: FakeProvider, wire: str, call_id: str, *, stream: bool) -> None:
    first, second = fake.model_requests
    assert [r.path for r in fake.model_requests] == [PATHS[wire]] * 2
    assert [first.stream, second.stream] == [stream, stream]
    assert tool_results(first) == []
    assert tool_results(second) == [(call_id, '3')]
    assert tool_names(first) == tool_names(second) == ['add']
    assert first.headers.get('authorization') == 'Bearer x' or first.headers.get('x-api-key') == 'x'
    assert fake.requests_to(wire) == fake.model_requests
    assert instructions(second) == 'Be brief.'
    assert user_texts(second) == ['What is 1+2?']
    assert fake.rejections == {}
    assert not fake.exhausted


@pytest.mark.parametrize('wire', WIRES)
async def test_run_plays_reasoning_tool_call_and_final_text(wire: str, fake_provider: Factory) -> None:
    fake = fake_provider(TOOL_SCRIPT)
    result = await make_agent(wire, fake).run('What is 1+2?')

    assert result.output == 'The sum is 3.'
    call_response = result.all_messages()[1]
    assert isinstance(call_response, ModelResponse)
    thinking, call = call_response.parts
    assert isinstance(thinking, ThinkingPart) and thinking.content == 'I should add them.'
    assert isinstance(call, ToolCallPart) and call.tool_name == 'add' and call.args_as_dict() == {'a': 1, 'b': 2}
    assert (result.usage.input_tokens, result.usage.output_tokens) == (32, 10)
    assert_tool_round_trip(fake, wire, call.tool_call_id, stream=wire == 'anthropic')


@pytest.mark.parametrize('wire', WIRES)
async def test_streamed_events_carry_deltas_and_the_tool_result(wire: str, fake_provider: Factory) -> None:
    fake = fake_provider(TOOL_SCRIPT)
    text: list[str] = []
    thinking: list[str] = []
    async with make_agent(wire, fake).run_stream_events('What is 1+2?') as events:
        async for event in events:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart | ThinkingPart):
                (text if isinstance(event.part, TextPart) else thinking).append(event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                text.append(event.delta.content_delta)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, ThinkingPartDelta):
                thinking.append(event.delta.content_delta or '')
    assert ''.join(thinking) == 'I should add them.'
    assert ''.join(text) == 'The sum is 3.'
    assert len(text) > 1  # it really streamed in pieces
    call_id = tool_results(fake.model_requests[1])[0][0]
    assert_tool_round_trip(fake, wire, call_id, stream=True)


async def request_once(wire: str, fake: FakeProvider) -> list[tuple[str, Any]]:
    """One non-streamed request; returns (part kind, content or call id) pairs.

    pydantic-ai's Anthropic model always streams, so that wire goes through the Anthropic SDK itself.
    """
    if wire == 'anthropic':
        from anthropic import AsyncAnthropic

        async with AsyncAnthropic(base_url=fake.base_url, api_key='x', max_retries=0) as client:
            message = await client.messages.create(model='claude-haiku-4-5', max_tokens=100,
                                                   messages=[{'role': 'user', 'content': 'hi'}])
        assert (message.usage.input_tokens, message.usage.output_tokens) == (10, 5)
        return [(b.type, getattr(b, 'thinking', None) or getattr(b, 'text', None) or getattr(b, 'id', None))
                for b in message.content]
    response = await model_request(make_model(wire, fake.base_url), [ModelRequest.user_text_prompt('hi')],
                                   model_settings={'max_retries': 0})
    assert (response.usage.input_tokens, response.usage.output_tokens) == (10, 5)
    names = {'ThinkingPart': 'thinking', 'TextPart': 'text', 'ToolCallPart': 'tool_use'}
    return [(names[type(p).__name__], getattr(p, 'content', None) or getattr(p, 'tool_call_id', None))
            for p in response.parts]


@pytest.mark.parametrize('wire', WIRES)
async def test_non_streamed_response_parses(wire: str, fake_provider: Factory) -> None:
    call = ToolCall('add', {'a': 2, 'b': 2}, id='c1')
    fake = fake_provider([Turn(reasoning='Hmm.', text='Hello!', tool_calls=[call])])
    parts = await request_once(wire, fake)
    assert parts == [('thinking', 'Hmm.'), ('text', 'Hello!'), ('tool_use', 'c1')]
    assert fake.model_requests[0].stream is False


@pytest.mark.parametrize('wire', WIRES)
@pytest.mark.parametrize(('status', 'error'), [(401, ModelAuthenticationError), (429, ModelRateLimitError),
                                               (500, ModelServerError)])
async def test_http_errors_map_to_pydantic_ai_exceptions(wire: str, status: int, error: type[Exception],
                                                         fake_provider: Factory) -> None:
    fake = fake_provider([Turn(status=status)])
    with pytest.raises(error) as raised:
        await make_agent(wire, fake).run('hi')
    assert isinstance(raised.value, ModelHTTPError) and raised.value.status_code == status
    assert 'fake provider error' in json.dumps(raised.value.body)
    assert len(fake.model_requests) == 1


async def test_custom_error_body_is_sent_verbatim(fake_provider: Factory) -> None:
    body = {'error': {'message': 'context too long', 'type': 'invalid_request_error', 'param': None,
                      'code': 'context_length_exceeded'}}
    fake = fake_provider([Turn(status=400, error_body=body)])
    with pytest.raises(ModelHTTPError) as raised:
        await make_agent('chat', fake).run('hi')
    assert raised.value.body == body['error']


async def _stream_all(agent: Agent) -> None:
    async with agent.run_stream_events('hi') as events:
        async for _ in events:
            pass


@pytest.mark.parametrize('wire', WIRES)
@pytest.mark.parametrize('fault', ['truncate', 'malformed'])
@pytest.mark.parametrize('streamed', [True, False])
async def test_broken_answers_raise(wire: str, fault: str, streamed: bool, fake_provider: Factory) -> None:
    fake = fake_provider([Turn(text='a fairly long answer that gets cut', **{fault: True})])
    if streamed:
        with pytest.raises(ModelAPIError):
            await _stream_all(make_agent(wire, fake))
    else:
        from anthropic import APIError

        with pytest.raises((ModelAPIError, APIError, ValueError)):  # the bare SDK raises JSONDecodeError
            await request_once(wire, fake)
    assert [r.stream for r in fake.model_requests] == [streamed]


SOURCES = [{'title': 'Ketch docs', 'url': 'https://example.com/ketch', 'snippet': 'Ketch is a coding agent.'}]


@pytest.mark.parametrize('wire', ['responses', 'anthropic'])
async def test_native_search_becomes_native_parts_and_replays(wire: str, fake_provider: Factory) -> None:
    turn = Turn(text='Ketch is an agent.', native_search=NativeSearch('what is ketch', SOURCES))
    fake = fake_provider([turn, Turn(text='ok')])
    agent = Agent(make_model(wire, fake.base_url), capabilities=[WebSearch()], model_settings={'max_retries': 0})
    first = await agent.run('search ketch')
    await agent.run('thanks', message_history=first.all_messages())

    call, ret, text = first.all_messages()[1].parts
    assert isinstance(call, NativeToolCallPart) and call.tool_name == 'web_search'
    assert call.args_as_dict()['query'] == 'what is ketch'
    assert isinstance(ret, NativeToolReturnPart) and ret.tool_call_id == call.tool_call_id
    assert 'https://example.com/ketch' in json.dumps(ret.content)
    assert isinstance(text, TextPart) and text.content == 'Ketch is an agent.'
    assert [s.url for c in text.citations or [] for s in c.sources] == ['https://example.com/ketch']
    assert tool_names(fake.model_requests[0]) == ['web_search']
    replay = json.dumps(fake.model_requests[1].body)
    assert call.tool_call_id in replay and fake.rejections == {}


# ---------------------------------------------------------------- Responses item rules
def post(fake: FakeProvider, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    with httpx.Client(base_url=fake.base_url, timeout=5) as client:
        return client.post(path, json=body) if body is not None else client.get(path)


def _emit(fake: FakeProvider) -> dict[str, Any]:
    """Make the fake emit one non-streamed response with reasoning, text and a call; return it."""
    fake.add(Turn(reasoning='think', text='calling', tool_calls=[ToolCall('add', {'a': 1}, id='call_x')]))
    response = post(fake, '/responses', {'model': 'm', 'input': 'hi'})
    assert response.status_code == 200
    return response.json()


def test_orphan_function_call_output_is_rejected(fake_provider: Factory) -> None:
    fake = fake_provider()
    answer = post(fake, '/responses', {'model': 'm', 'input': [
        {'role': 'user', 'content': 'hi'}, {'type': 'function_call_output', 'call_id': 'call_zz', 'output': '3'}]})
    assert (answer.status_code, answer.json()) == (400, {'error': {
        'message': 'No tool call found for function call output with call_id call_zz.',
        'type': 'invalid_request_error', 'param': 'input', 'code': None}})
    assert fake.rejections == {'orphan_function_call_output': 1}
    assert fake.script == [] and not fake.exhausted  # a rejection does not consume the script


def test_unknown_or_forgotten_item_is_not_found(fake_provider: Factory) -> None:
    fake = fake_provider()
    rs_id = _emit(fake)['output'][0]['id']
    assert post(fake, '/responses', {'model': 'm', 'input': [{'type': 'item_reference', 'id': rs_id}]}
                ).status_code == 200
    fake.forget_items()
    answer = post(fake, '/responses', {'model': 'm', 'input': [{'type': 'item_reference', 'id': rs_id}]})
    assert answer.status_code == 404
    assert answer.json()['error']['message'] == f"Item with id '{rs_id}' not found."
    assert post(fake, '/responses', {'model': 'm', 'input': [{'type': 'item_reference', 'id': 'msg_never'}]}
                ).status_code == 404
    assert fake.rejections == {'item_not_found': 2}


def test_item_sent_with_id_but_without_its_reasoning_is_rejected(fake_provider: Factory) -> None:
    fake = fake_provider()
    reasoning, message, call = _emit(fake)['output']
    without = [message, call, {'type': 'function_call_output', 'call_id': 'call_x', 'output': '1'}]
    answer = post(fake, '/responses', {'model': 'm', 'input': without})
    assert answer.status_code == 400
    assert "required 'reasoning' item: '" + reasoning['id'] in answer.json()['error']['message']
    inline = [{k: v for k, v in item.items() if k != 'id'} for item in without]
    assert post(fake, '/responses', {'model': 'm', 'input': inline}).status_code == 200
    assert post(fake, '/responses', {'model': 'm', 'input': [reasoning, *without]}).status_code == 200
    assert fake.rejections == {'missing_reasoning': 1}


def test_previous_response_id_supplies_the_calls(fake_provider: Factory) -> None:
    fake = fake_provider()
    previous = _emit(fake)['id']
    output = [{'type': 'function_call_output', 'call_id': 'call_x', 'output': '1'}]
    answer = post(fake, '/responses', {'model': 'm', 'previous_response_id': previous, 'input': output})
    assert answer.status_code == 200
    answer = post(fake, '/responses', {'model': 'm', 'previous_response_id': 'resp_gone', 'input': 'hi'})
    assert answer.status_code == 404
    assert answer.json()['error']['message'] == "Previous response with id 'resp_gone' not found."
    assert fake.rejections == {'previous_response_not_found': 1}


def test_strict_mode_can_be_turned_off(fake_provider: Factory) -> None:
    fake = fake_provider(strict_responses=False)
    answer = post(fake, '/responses', {'model': 'm', 'input': [{'type': 'item_reference', 'id': 'rs_nope'}]})
    assert answer.status_code == 200 and fake.rejections == {}


async def test_dropping_a_reasoning_part_from_history_is_rejected_like_the_provider(fake_provider: Factory) -> None:
    fake = fake_provider([Turn(reasoning='deep thought', text='first answer'), Turn(text='second')])
    agent = make_agent('responses', fake)
    first = await agent.run('one')
    history = first.all_messages()
    pruned = [m if not isinstance(m, ModelResponse) else
              ModelResponse(parts=[p for p in m.parts if not isinstance(p, ThinkingPart)],
                            provider_name=m.provider_name, model_name=m.model_name) for m in history]
    with pytest.raises(ModelHTTPError) as raised:
        await agent.run('two', message_history=pruned)
    assert raised.value.status_code == 400
    assert fake.rejections == {'missing_reasoning': 1}
    await agent.run('two', message_history=history)  # the intact history is accepted
    assert fake.rejections == {'missing_reasoning': 1}


async def test_items_forgotten_mid_run_answer_404(fake_provider: Factory) -> None:
    fake = fake_provider(TOOL_SCRIPT)
    with pytest.raises(ModelHTTPError) as raised:
        await make_agent('responses', fake, on_add=fake.forget_items).run('What is 1+2?')
    assert raised.value.status_code == 404
    assert fake.rejections == {'item_not_found': 1}


# ---------------------------------------------------------------- server controls
def test_paths_with_missing_or_doubled_v1_are_served_and_recorded(fake_provider: Factory) -> None:
    fake = fake_provider([Turn(text='a'), Turn(text='b'), Turn(text='c')])
    root = fake.base_url.removesuffix('/v1')
    with httpx.Client(timeout=5) as client:
        for path in ['/chat/completions', '/v1/chat/completions', '/v1/v1/chat/completions']:
            answer = client.post(root + path, json={'model': 'm', 'messages': []})
            assert answer.json()['object'] == 'chat.completion'
        assert client.post(root + '/v2/chat', json={}).status_code == 404
    assert [r.path for r in fake.requests] == [
        '/chat/completions', '/v1/chat/completions', '/v1/v1/chat/completions', '/v2/chat']


async def test_anthropic_model_without_v1_in_base_url(fake_provider: Factory) -> None:
    fake = fake_provider([Turn(text='hi there')])
    agent = Agent(make_model('anthropic', fake.base_url.removesuffix('/v1')))
    assert (await agent.run('hello')).output == 'hi there'
    assert [r.path for r in fake.requests] == ['/v1/messages']


def test_models_list_in_openai_and_anthropic_shapes(fake_provider: Factory) -> None:
    fake = fake_provider(models=['alpha', 'beta'])
    assert post(fake, '/models').json() == {'object': 'list', 'data': [
        {'id': 'alpha', 'object': 'model', 'created': 1700000000, 'owned_by': 'fake'},
        {'id': 'beta', 'object': 'model', 'created': 1700000000, 'owned_by': 'fake'}]}
    with httpx.Client(timeout=5) as client:
        answer = client.get(fake.base_url + '/models', headers={'anthropic-version': '2023-06-01'}).json()
    assert [m['id'] for m in answer['data']] == ['alpha', 'beta']
    assert (answer['has_more'], answer['first_id'], answer['last_id']) == (False, 'alpha', 'beta')
    assert fake.requests[1].headers['anthropic-version'] == '2023-06-01'


async def test_fail_path_does_not_consume_the_script(fake_provider: Factory) -> None:
    fake = fake_provider([Turn(text='recovered')])
    fake.fail_path('/v1/chat/completions', status=404, times=1)
    agent = make_agent('chat', fake)
    with pytest.raises(ModelHTTPError) as raised:
        await agent.run('hi')
    assert raised.value.status_code == 404
    assert (await agent.run('hi')).output == 'recovered'
    fake.fail_path('/chat/completions', status=400, body={'error': {'message': 'nope'}})
    for _ in range(2):
        assert post(fake, '/chat/completions', {'model': 'm'}).json() == {'error': {'message': 'nope'}}
    assert not fake.exhausted


async def test_sdk_retries_consume_the_script_quickly(fake_provider: Factory) -> None:
    fake = fake_provider([Turn(status=429), Turn(status=503), Turn(text='third time lucky')])
    model = make_model('chat', fake.base_url)
    assert (await Agent(model).run('hi')).output == 'third time lucky'  # SDK default: 2 retries
    assert [r.headers['x-stainless-retry-count'] for r in fake.requests] == ['0', '1', '2']
    # quickly: every refusal tells the SDK to come back in 10 ms (instead of its own backoff)
    refusing = fake_provider([Turn(status=429), Turn(status=503)])
    for _ in range(2):
        assert post(refusing, '/chat/completions', {'model': 'm'}).headers['retry-after-ms'] == '10'


def test_an_error_inside_a_script_callable_fails_the_test() -> None:
    def broken(request: RecordedRequest) -> Turn:
        raise AssertionError('request lacked the tool result')

    fake = FakeProvider([broken]).start()
    answer = post(fake, '/chat/completions', {'model': 'm', 'messages': []})
    assert answer.status_code == 500 and 'request lacked the tool result' in answer.text
    with pytest.raises(AssertionError, match='request lacked the tool result'):
        fake.stop()


async def test_exhausted_script_answers_placeholder(fake_provider: Factory) -> None:
    fake = fake_provider([])
    assert (await make_agent('anthropic', fake).run('hi')).output == '(script exhausted)'
    assert fake.exhausted


@pytest.mark.parametrize('wire', WIRES)
async def test_callable_script_sees_the_request(wire: str, fake_provider: Factory) -> None:
    def until_three(request: RecordedRequest) -> Turn:
        done = len(tool_results(request))
        return Turn(text=f'done after {done}') if done == 3 else Turn(tool_calls=[ToolCall('add', {'a': done, 'b': 1})])

    fake = fake_provider([until_three] * 4)
    assert (await make_agent(wire, fake).run('loop')).output == 'done after 3'
    assert [c for _, c in tool_results(fake.model_requests[-1])] == ['1', '2', '3']
    assert fake.rejections == {}


async def test_requests_are_served_concurrently(fake_provider: Factory) -> None:
    both_in_flight = threading.Barrier(2, timeout=5)  # breaks unless two requests are served at once

    def meet(request: RecordedRequest) -> Turn:
        both_in_flight.wait()
        return Turn(text=user_texts(request)[0])

    fake = fake_provider([meet, meet])
    agent = make_agent('chat', fake)
    outputs = await asyncio.gather(agent.run('1'), agent.run('2'))
    assert sorted(r.output for r in outputs) == ['1', '2']


async def test_delay_holds_the_answer(fake_provider: Factory) -> None:
    fake = fake_provider([Turn(text='late', delay=0.3)])
    started = time.monotonic()
    assert (await make_agent('responses', fake).run('hi')).output == 'late'
    assert time.monotonic() - started >= 0.3


def test_chunk_delay_spaces_the_stream(fake_provider: Factory) -> None:
    fake = fake_provider([Turn(text='one two three', chunk_delay=0.05)])
    arrivals: list[float] = []
    with httpx.Client(timeout=5) as client, client.stream(
            'POST', fake.base_url + '/messages', json={'model': 'm', 'stream': True, 'messages': []}) as answer:
        for line in answer.iter_lines():
            if line.startswith('data:'):
                arrivals.append(time.monotonic())
    assert len(arrivals) >= 8
    assert arrivals[-1] - arrivals[0] >= 0.04 * (len(arrivals) - 1)


_TEXT_OF = {
    'chat': lambda d: ((d.get('choices') or [{}])[0].get('delta') or {}).get('content') or '',
    'responses': lambda d: d.get('delta', '') if d.get('type') == 'response.output_text.delta' else '',
    'anthropic': lambda d: (d.get('delta') or {}).get('text', '') if d.get('type') == 'content_block_delta' else '',
}


@pytest.mark.parametrize('wire', WIRES)
def test_a_hold_stops_the_answer_until_released(wire: str, fake_provider: Factory) -> None:
    """Before the answer (nothing sent), or after the n-th piece of its text (exactly those
    pieces sent); `reached` says the fake is there, and `release` lets the rest go."""
    before, after = Hold('before'), Hold('after')
    fake = fake_provider([Turn(text='ab', hold=before), Turn(text='one two three', text_pieces=['one ', 'two ', 'three'],
                                                              hold_after_piece=(2, after))])
    for hold, wanted in ((before, ''), (after, 'one two ')):
        got: list[str] = []
        done = threading.Event()

        def read(got: list[str] = got, done: threading.Event = done) -> None:
            body = {'model': 'm', 'stream': True, 'messages': [], 'input': []}
            with httpx.Client(timeout=10) as client, client.stream('POST', fake.base_url + PATHS[wire][3:], json=body) as answer:
                for line in answer.iter_lines():
                    if line.startswith('data:') and line != 'data: [DONE]':
                        got.append(_TEXT_OF[wire](json.loads(line[5:])))
            done.set()

        reader = threading.Thread(target=read)
        reader.start()
        assert hold.wait_reached(10)
        time.sleep(0.2)  # what the fake would still send, if it did not hold
        assert ''.join(got) == wanted and not done.is_set(), (wire, got)
        hold.release()
        reader.join(10)
        assert done.is_set() and ''.join(got) == ('ab' if hold is before else 'one two three')


def test_a_subprocess_can_use_the_server(fake_provider: Factory) -> None:
    fake = fake_provider([Turn(text='from a child')])
    code = ('import json,sys,urllib.request as u; r=u.Request(sys.argv[1]+"/chat/completions",'
            'data=json.dumps({"model":"m","messages":[{"role":"user","content":"hi"}]}).encode(),'
            'headers={"content-type":"application/json"}); '
            'print(json.load(u.urlopen(r))["choices"][0]["message"]["content"])')
    child = subprocess.run([sys.executable, '-c', code, fake.base_url], capture_output=True, text=True, timeout=20)
    assert child.stdout.strip() == 'from a child'
    assert user_texts(fake.requests[0]) == ['hi'] and fake.requests[0].headers['content-type'] == 'application/json'


def test_context_manager_releases_the_port() -> None:
    with FakeProvider([Turn(text='x')]) as fake:
        url = fake.base_url
        assert post(fake, '/models').status_code == 200
    with pytest.raises(httpx.ConnectError), httpx.Client(timeout=2) as client:
        client.get(url + '/models')
