"""The fake provider's Gemini endpoints, read by pydantic-ai's real Google model."""

from __future__ import annotations

import os
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_names, tool_results, user_texts
from pydantic_ai import Agent
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelServerError,
)
from pydantic_ai.messages import ModelRequest
from pydantic_ai.direct import model_request

os.environ.setdefault('PYDANTIC_AI_NO_BANNER', '1')


def _model(fake: FakeProvider, name: str = 'gemini-2.5-flash') -> Any:
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    provider = GoogleProvider(api_key='x', base_url=fake.base_url.removesuffix('/v1'))
    return GoogleModel(name, provider=provider)


async def test_generate_content_whole_parses_thinking_text_and_call(fake_provider) -> None:
    fake = fake_provider([Turn(reasoning='Hmm.', text='Hello!', tool_calls=[ToolCall('add', {'a': 2, 'b': 2}, id='c1')])])
    response = await model_request(_model(fake), [ModelRequest.user_text_prompt('hi')])
    kinds = [(type(p).__name__, getattr(p, 'content', None) or getattr(p, 'tool_call_id', None)) for p in response.parts]
    assert kinds == [('ThinkingPart', 'Hmm.'), ('TextPart', 'Hello!'), ('ToolCallPart', 'c1')]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (10, 8)  # 5 + 3 thoughts
    [request] = fake.model_requests
    assert request.path == '/v1beta/models/gemini-2.5-flash:generateContent' and request.stream is False
    assert user_texts(request) == ['hi']


async def test_streamed_tool_round_trip(fake_provider) -> None:
    fake = fake_provider([Turn(tool_calls=[ToolCall('add', {'a': 1, 'b': 2})]), Turn(text='The sum is 3.')])
    agent = Agent(_model(fake), instructions='Be brief.')

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with agent.run_stream_events('What is 1+2?') as events:
        parts = [e async for e in events]
    assert parts
    first, second = fake.model_requests
    assert first.stream and second.stream
    assert tool_names(first) == ['add']
    [(call_id, content)] = tool_results(second)
    assert call_id.startswith('call_') and content == '{"return_value": 3}'  # the id the fake gave the call
    assert first.headers['x-goog-api-key'] == 'x'


@pytest.mark.parametrize(('status', 'error'), [(401, ModelAuthenticationError), (429, ModelRateLimitError),
                                               (500, ModelServerError)])
async def test_http_errors_map_to_pydantic_ai_exceptions(status: int, error: type[Exception], fake_provider) -> None:
    fake = fake_provider([Turn(status=status)])
    with pytest.raises(error) as raised:
        await Agent(_model(fake)).run('hi')
    assert isinstance(raised.value, ModelHTTPError) and raised.value.status_code == status


@pytest.mark.parametrize('fault', ['truncate', 'malformed'])
async def test_broken_streams_raise(fault: str, fake_provider) -> None:
    fake = fake_provider([Turn(text='a fairly long answer that gets cut', **{fault: True})])
    with pytest.raises((ModelAPIError, ValueError)):
        async with Agent(_model(fake)).run_stream_events('hi') as events:
            async for _ in events:
                pass

