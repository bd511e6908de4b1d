"""The fake provider's prompt-cache accounting (tests/fake_cache.py) holds each provider's rules.

These guard the bench (bench/prompt_cache.py) and the cost tests: a fake that cached too much or
too little would make them report numbers no provider would bill.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from fake_cache import CHARS_PER_TOKEN, ManualClock, PromptCache, canonical
from fakeprovider import FakeProvider, Turn

WORDS = 'lorem ipsum dolor sit amet consectetur '


def text_of_tokens(n: int) -> str:
    """A text of about n fake tokens."""
    return (WORDS * (n * CHARS_PER_TOKEN // len(WORDS) + 1))[: n * CHARS_PER_TOKEN]


def anthropic_body(system: str, turns: int, *, marker: str = 'auto', model: str = 'claude-sonnet-4-5',
                   ttl: str | None = None, result_tokens: int = 300) -> dict[str, Any]:
    """A tool loop of `turns` steps; `marker`: 'auto' (top-level), 'last' (on the last block), 'none'."""
    control: dict[str, Any] = {'type': 'ephemeral', **({'ttl': ttl} if ttl else {})}
    messages: list[dict[str, Any]] = [{'role': 'user', 'content': [{'type': 'text', 'text': 'Fix the bug.'}]}]
    for n in range(turns):
        messages.append({'role': 'assistant', 'content': [{'type': 'tool_use', 'id': f't{n}', 'name': 'shell', 'input': {'n': n}}]})
        messages.append({'role': 'user', 'content': [{'type': 'tool_result', 'tool_use_id': f't{n}',
                                                       'content': f'output {n} ' + text_of_tokens(result_tokens)}]})
    body: dict[str, Any] = {'model': model, 'max_tokens': 1000, 'system': system, 'messages': messages,
                            'tools': [{'name': 'shell', 'description': 'run', 'input_schema': {'type': 'object'}}]}
    if marker == 'auto':
        body['cache_control'] = control
    elif marker == 'last':
        messages[-1]['content'][-1]['cache_control'] = control
    return body


def run(cache: PromptCache, wire: str, body: dict[str, Any], path: str = ''):
    return cache.commit(cache.plan(wire, path, body))


# ---------------------------------------------------------------- Anthropic
def test_anthropic_automatic_caching_reads_the_previous_request_and_writes_the_rest() -> None:
    cache = PromptCache(clock=ManualClock())
    system = text_of_tokens(1500)
    first = run(cache, 'anthropic', anthropic_body(system, 1))
    assert first.read == 0 and first.written == first.total and first.uncached == 0
    second = run(cache, 'anthropic', anthropic_body(system, 2))
    assert second.read == first.total
    assert second.written == second.total - first.total
    assert second.extends is True


def test_anthropic_without_any_marker_caches_nothing() -> None:
    cache = PromptCache(clock=ManualClock())
    system = text_of_tokens(3000)
    for turns in (1, 2, 3):
        counts = run(cache, 'anthropic', anthropic_body(system, turns, marker='none'))
        assert (counts.read, counts.written) == (0, 0)
        assert counts.uncached == counts.total > 3000


def test_anthropic_a_changed_system_prompt_reads_nothing() -> None:
    cache = PromptCache(clock=ManualClock())
    run(cache, 'anthropic', anthropic_body(text_of_tokens(2000) + ' git: 1 modified', 2))
    changed = run(cache, 'anthropic', anthropic_body(text_of_tokens(2000) + ' git: 2 modified', 3))
    assert changed.read == 0 and changed.written == changed.total
    assert changed.extends is False and changed.diverged_at == 'system'


def test_anthropic_tools_come_first_in_the_cache_order() -> None:
    """A changed tool list breaks the system prompt's cache too (tools -> system -> messages)."""
    cache = PromptCache(clock=ManualClock())
    body = anthropic_body(text_of_tokens(2000), 2)
    run(cache, 'anthropic', body)
    body['tools'] = body['tools'] + [{'name': 'extra', 'description': 'x', 'input_schema': {'type': 'object'}}]
    changed = run(cache, 'anthropic', body)
    assert changed.read == 0 and changed.diverged_at == 'tools[1]'


def test_anthropic_the_minimum_cacheable_length_is_per_model_family() -> None:
    for model, minimum in (('claude-sonnet-4-5', 1024), ('claude-3-5-haiku-latest', 2048), ('claude-haiku-4-5', 4096),
                           ('claude-opus-4-5', 4096)):
        cache = PromptCache(clock=ManualClock())
        below = anthropic_body(text_of_tokens(minimum - 400), 0, model=model)
        assert run(cache, 'anthropic', below).total < minimum
        assert run(cache, 'anthropic', below).read == 0, model  # nothing was written the first time
        above = anthropic_body(text_of_tokens(minimum + 10), 0, model=model)
        assert run(cache, 'anthropic', above).written > 0, model
        assert run(cache, 'anthropic', above).read > 0, model


def test_anthropic_lookback_is_20_blocks() -> None:
    """A breakpoint finds an entry at most 20 blocks back; one further is not found."""
    cache = PromptCache(clock=ManualClock())
    system = text_of_tokens(1200)
    run(cache, 'anthropic', anthropic_body(system, 1, marker='last', result_tokens=10))
    # 9 more steps = 18 more blocks: within the lookback
    near = run(cache, 'anthropic', anthropic_body(system, 10, marker='last', result_tokens=10))
    assert near.read > 0
    cache2 = PromptCache(clock=ManualClock())
    run(cache2, 'anthropic', anthropic_body(system, 1, marker='last', result_tokens=10))
    # 11 more steps = 22 more blocks: beyond it
    far = run(cache2, 'anthropic', anthropic_body(system, 12, marker='last', result_tokens=10))
    assert far.read == 0 and far.written == far.total


def test_anthropic_more_than_four_breakpoints_is_a_400() -> None:
    cache = PromptCache(clock=ManualClock())
    body = anthropic_body(text_of_tokens(1200), 4, marker='auto')
    for message in body['messages'][1:5]:
        message['content'][-1]['cache_control'] = {'type': 'ephemeral'}
    plan = cache.plan('anthropic', '', body)
    assert plan.counts.error is not None
    assert 'maximum of 4 blocks' in plan.counts.error['error']['message']


def test_anthropic_ttl_expires_after_five_minutes_or_an_hour() -> None:
    clock = ManualClock()
    cache = PromptCache(clock=clock)
    system = text_of_tokens(2000)
    run(cache, 'anthropic', anthropic_body(system, 1))
    clock.advance(299)
    assert run(cache, 'anthropic', anthropic_body(system, 1)).read > 0  # a hit refreshes the entry
    clock.advance(299)
    assert run(cache, 'anthropic', anthropic_body(system, 1)).read > 0
    clock.advance(301)
    assert run(cache, 'anthropic', anthropic_body(system, 1)).read == 0
    hour = PromptCache(clock=clock)
    written = run(hour, 'anthropic', anthropic_body(system, 1, ttl='1h'))
    assert written.written_1h == written.written > 0
    clock.advance(3599)
    assert run(hour, 'anthropic', anthropic_body(system, 1, ttl='1h')).read > 0
    clock.advance(3601)
    assert run(hour, 'anthropic', anthropic_body(system, 1, ttl='1h')).read == 0


# ---------------------------------------------------------------- OpenAI
def chat_body(system: str, user: str, key: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {'model': 'gpt-5', 'messages': [{'role': 'system', 'content': system},
                                                           {'role': 'user', 'content': user}]}
    if key is not None:
        body['prompt_cache_key'] = key
    return body


def prompt_chars(body: dict[str, Any]) -> int:
    return sum(len(canonical(m)) for m in body['messages'])


def test_openai_a_prompt_under_1024_tokens_is_never_cached() -> None:
    cache = PromptCache(clock=ManualClock())
    body = chat_body('s', 'x')
    pad = 1023 * CHARS_PER_TOKEN - prompt_chars(body)
    body = chat_body('s', 'x' * (pad + 1))
    assert prompt_chars(body) == 1023 * CHARS_PER_TOKEN
    assert run(cache, 'chat', body).total == 1023
    assert run(cache, 'chat', body).read == 0
    longer = chat_body('s', 'x' * (pad + 1 + CHARS_PER_TOKEN))
    assert run(cache, 'chat', longer).total == 1024
    assert run(cache, 'chat', longer).read == 1024


def test_openai_hits_come_in_128_token_increments() -> None:
    cache = PromptCache(clock=ManualClock())
    system = text_of_tokens(3000)
    run(cache, 'chat', chat_body(system, 'first question'))
    counts = run(cache, 'chat', chat_body(system, 'second question, longer'))
    assert counts.read % 128 == 0 and counts.read >= 1024
    assert counts.total - counts.read < 128 + len(canonical({'role': 'user', 'content': 'second question, longer'}))


def test_tokens_are_counted_on_the_text_not_on_its_json_escapes() -> None:
    """A provider tokenizes the text the model reads: a newline, quote or tab in a tool output is
    one character, not the two of its JSON escape in the request body."""
    plain, escaped = 'ab' * 3000, '\n"' * 2500 + '\t\\' * 500
    assert len(plain) == len(escaped) and len(canonical(escaped)) > len(canonical(plain)) + 5000
    for wire, body in (('chat', chat_body), ('gemini', lambda s, u: gemini_body(s, 1) | {'contents': [
            {'role': 'user', 'parts': [{'text': u}]}]}), ('anthropic', lambda s, u: {
            'model': 'claude-sonnet-4-5', 'system': s, 'messages': [{'role': 'user', 'content': u}]})):
        counts = [run(PromptCache(clock=ManualClock()), wire, body('s', text), '/v1beta/models/gemini-2.5-flash:x')
                  for text in (plain, escaped)]
        assert counts[0].total == counts[1].total > 1500, wire


def test_openai_increments_count_escaped_text_as_text() -> None:
    """The 128-token increments fall on the text's characters: a prefix full of escapes is read
    back to the last whole increment of it, as a plain one is."""
    for filler in ('x' * 12000, '\n' * 6000 + '"' * 6000):
        cache = PromptCache(clock=ManualClock())
        first = run(cache, 'chat', chat_body(filler, 'first question'))
        counts = run(cache, 'chat', chat_body(filler, 'second question, longer'))
        assert first.total > 3000 and counts.read % 128 == 0
        assert first.total - 128 < counts.read <= first.total


def test_openai_routes_by_prompt_cache_key() -> None:
    cache = PromptCache(clock=ManualClock())
    system = text_of_tokens(3000)
    run(cache, 'responses', {'model': 'gpt-5', 'instructions': system, 'input': 'a', 'prompt_cache_key': 'one'})
    other = run(cache, 'responses', {'model': 'gpt-5', 'instructions': system, 'input': 'a', 'prompt_cache_key': 'two'})
    assert other.read == 0
    same = run(cache, 'responses', {'model': 'gpt-5', 'instructions': system, 'input': 'a', 'prompt_cache_key': 'one'})
    assert same.read > 0


def test_openai_ttl_via_the_injected_clock() -> None:
    clock = ManualClock()
    cache = PromptCache(clock=clock)
    body = chat_body(text_of_tokens(3000), 'q')
    run(cache, 'chat', body)
    clock.advance(301)
    assert run(cache, 'chat', body).read == 0
    day = {**body, 'prompt_cache_retention': '24h'}
    run(cache, 'chat', day)
    clock.advance(3 * 3600)
    assert run(cache, 'chat', day).read > 0


# ---------------------------------------------------------------- OpenAI GPT-5.6 and later
BREAK = {'mode': 'explicit'}


def loop_body(model: str, steps: int, *, marks: str = 'every', wire: str = 'chat', options: dict[str, Any] | None = None,
              result_tokens: int = 333) -> dict[str, Any]:
    """A tool loop of `steps` steps on an OpenAI wire; `marks`: 'every' (a breakpoint on each tool
    result, kept once placed), 'none'."""
    system = text_of_tokens(1500)

    def block(text: str, mark: bool) -> list[dict[str, Any]]:
        kind = 'text' if wire == 'chat' else 'input_text'
        return [{'type': kind, 'text': text, **({'prompt_cache_breakpoint': BREAK} if mark else {})}]

    mark = marks == 'every'
    if wire == 'chat':
        messages: list[dict[str, Any]] = [{'role': 'system', 'content': system},
                                          {'role': 'user', 'content': block('Fix the bug.', mark)}]
        for n in range(steps):
            messages.append({'role': 'assistant', 'content': None, 'tool_calls': [
                {'id': f'c{n}', 'type': 'function', 'function': {'name': 'shell', 'arguments': '{}'}}]})
            messages.append({'role': 'tool', 'tool_call_id': f'c{n}',
                             'content': block(f'output {n} ' + text_of_tokens(result_tokens), mark)})
        body: dict[str, Any] = {'model': model, 'messages': messages}
    else:
        items: list[dict[str, Any]] = [{'role': 'user', 'content': block('Fix the bug.', mark)}]
        for n in range(steps):
            items.append({'type': 'function_call', 'call_id': f'c{n}', 'name': 'shell', 'arguments': '{}'})
            items.append({'type': 'function_call_output', 'call_id': f'c{n}',
                          'output': block(f'output {n} ' + text_of_tokens(result_tokens), mark)})
        body = {'model': model, 'instructions': system, 'input': items}
    if options is not None:
        body['prompt_cache_options'] = options
    return body


def test_openai_model_families_by_name() -> None:
    from fake_cache import openai_breakpoint_family

    assert [openai_breakpoint_family(m) for m in ('gpt-5', 'gpt-5.5', 'gpt-5.4-mini', 'gpt-4o', 'o3')] == [False] * 5
    assert [openai_breakpoint_family(m) for m in ('gpt-5.6', 'gpt-5.6-mini', 'gpt-5.10', 'gpt-6', 'openai/gpt-5.6')] == [True] * 5


@pytest.mark.parametrize('wire', ['chat', 'responses'])
def test_openai_56_reads_the_whole_previous_request_and_pays_for_the_writes(wire: str) -> None:
    """No 128-token increments on GPT-5.6: the read ends exactly at the previous request's end (its
    breakpoint), and the step's growth is written (reported), where gpt-5 rounds down and writes nothing."""
    cache = PromptCache(clock=ManualClock())
    first = run(cache, wire, loop_body('gpt-5.6', 1, wire=wire))
    assert first.read == 0 and first.written == first.total > 1024 and first.breakpoints
    second = run(cache, wire, loop_body('gpt-5.6', 2, wire=wire))
    assert second.read == first.total and second.written == second.total - first.total
    assert second.extends is True
    old = PromptCache(clock=ManualClock())
    run(old, wire, loop_body('gpt-5', 1, wire=wire, marks='none'))
    older = run(old, wire, loop_body('gpt-5', 2, wire=wire, marks='none'))
    assert older.read % 128 == 0 and older.read < first.total - 20 and older.written == 0


def test_openai_56_matches_only_at_breakpoints() -> None:
    """A prefix no breakpoint ended is not read: with `mode: explicit` and no marker nothing is
    cached; the implicit breakpoint ends the newest non-assistant message."""
    cache = PromptCache(clock=ManualClock())
    body = loop_body('gpt-5.6', 3, marks='none', options={'mode': 'explicit'})
    assert run(cache, 'chat', body).written == 0
    assert run(cache, 'chat', body).read == 0
    implicit = PromptCache(clock=ManualClock())
    shorter = loop_body('gpt-5.6', 3, marks='none')
    run(implicit, 'chat', shorter)
    # the same history cut inside its last step (an assistant call with no result): nothing to read
    cut = loop_body('gpt-5.6', 3, marks='none')
    cut['messages'] = cut['messages'][:-2]
    assert run(implicit, 'chat', cut).read == 0
    assert run(implicit, 'chat', loop_body('gpt-5.6', 4, marks='none')).read == run(implicit, 'chat', shorter).total


def test_openai_56_writes_at_most_four_breakpoints_and_matches_the_latest_80() -> None:
    """Explicit mode writes the latest four markers only; a marker is part of the prefix (moving it
    is a change); entries beyond the route's latest 80 are no longer matched."""
    cache = PromptCache(clock=ManualClock())
    body = loop_body('gpt-5.6', 8, options={'mode': 'explicit'})
    counts = run(cache, 'chat', body)
    segs = [n for n, m in enumerate(body['messages']) if m['role'] in ('user', 'tool')]
    assert len(segs) == 9 and counts.written > 0
    # the fifth-newest marker (message segs[-5]) was not written: a request ending there reads less
    probe = loop_body('gpt-5.6', 4, options={'mode': 'explicit'})
    assert probe['messages'] == body['messages'][:segs[-5] + 1]
    assert run(cache, 'chat', probe).read < PromptCache().plan('chat', '', probe).counts.total
    moved = loop_body('gpt-5.6', 8, marks='none', options={'mode': 'explicit'})
    moved['messages'][-1]['content'][-1]['prompt_cache_breakpoint'] = BREAK
    assert run(cache, 'chat', moved).read < counts.total  # the unmarked earlier results are other bytes
    many = PromptCache(clock=ManualClock())
    first = loop_body('gpt-5.6', 0, result_tokens=0)
    run(many, 'chat', first)
    for n in range(85):
        other = {**first, 'messages': [*first['messages'], {'role': 'user', 'content': f'question {n}'}]}
        run(many, 'chat', other)
    def then(n: int) -> dict[str, Any]:
        asked = {'role': 'user', 'content': f'question {n}'}
        return {**first, 'messages': [*first['messages'], asked, {'role': 'user', 'content': 'and more'}]}

    common = PromptCache().plan('chat', '', first).counts.total
    assert run(many, 'chat', then(0)).read == common  # question 0's breakpoint is 85 breakpoints old
    assert run(many, 'chat', then(84)).read > common


def test_openai_56_ttl_is_30_minutes_or_12_hours_and_markers_are_refused_before_56() -> None:
    clock = ManualClock()
    cache = PromptCache(clock=clock)
    body = loop_body('gpt-5.6', 2)
    run(cache, 'chat', body)
    clock.advance(1799)
    assert run(cache, 'chat', body).read > 0
    clock.advance(1801)
    assert run(cache, 'chat', body).read == 0
    long = loop_body('gpt-5.6', 2, options={'mode': 'implicit', 'ttl': '12h'})
    run(cache, 'chat', long)
    clock.advance(11 * 3600)
    assert run(cache, 'chat', long).read > 0
    assert cache.plan('chat', '', loop_body('gpt-5', 2)).counts.error is not None
    assert cache.plan('chat', '', loop_body('gpt-5', 2, marks='none', options={'mode': 'implicit'})).counts.error
    assistant = loop_body('gpt-5.6', 1)
    assistant['messages'][2]['content'] = [{'type': 'text', 'text': 'x', 'prompt_cache_breakpoint': BREAK}]
    assert cache.plan('chat', '', assistant).counts.error is not None


@pytest.mark.parametrize('wire', ['chat', 'responses'])
def test_openai_56_usage_reports_writes_on_the_wire(wire: str) -> None:
    with FakeProvider([Turn(text='a'), Turn(text='b')], cache=PromptCache(clock=ManualClock())) as fake:
        url = f'{fake.base_url}/{"chat/completions" if wire == "chat" else "responses"}'
        first, second = post(url, loop_body('gpt-5.6', 1, wire=wire), {}), post(url, loop_body('gpt-5.6', 2, wire=wire), {})
        log = fake.cache.log
    field = 'prompt_tokens_details' if wire == 'chat' else 'input_tokens_details'
    assert first['usage'][field]['cache_write_tokens'] == log[0].written > 0
    assert second['usage'][field] ['cached_tokens'] == log[1].read == log[0].total
    assert second['usage'][field]['cache_write_tokens'] == log[1].written > 0


# ---------------------------------------------------------------- Gemini
def gemini_body(system: str, contents: int) -> dict[str, Any]:
    return {'systemInstruction': {'parts': [{'text': system}]},
            'contents': [{'role': 'user' if n % 2 == 0 else 'model', 'parts': [{'text': f'turn {n}'}]}
                         for n in range(contents)]}


def test_gemini_implicit_caching_needs_the_models_minimum() -> None:
    path25, path3 = '/v1beta/models/gemini-2.5-flash:generateContent', '/v1beta/models/gemini-3-pro:generateContent'
    cache = PromptCache(clock=ManualClock())
    small = gemini_body(text_of_tokens(3000), 1)
    run(cache, 'gemini', small, path25)
    assert run(cache, 'gemini', gemini_body(text_of_tokens(3000), 3), path25).read > 2048
    run(cache, 'gemini', small, path3)
    assert run(cache, 'gemini', gemini_body(text_of_tokens(3000), 3), path3).read == 0  # under 4096 on 3.x


# ---------------------------------------------------------------- on the wire
def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {'content-type': 'application/json', **headers})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.parametrize('wire', ['chat', 'responses', 'anthropic', 'gemini'])
def test_the_usage_fields_on_the_wire(wire: str) -> None:
    system = text_of_tokens(3000)
    with FakeProvider([Turn(text='a'), Turn(text='b')], cache=PromptCache(clock=ManualClock())) as fake:
        base = fake.base_url
        if wire == 'chat':
            url, body, headers = f'{base}/chat/completions', chat_body(system, 'q'), {}
        elif wire == 'responses':
            url, body, headers = f'{base}/responses', {'model': 'gpt-5', 'instructions': system, 'input': 'q'}, {}
        elif wire == 'anthropic':
            url, body, headers = f'{base}/messages', anthropic_body(system, 1), {'anthropic-version': '2023-06-01'}
        else:
            url = base.removesuffix('/v1') + '/v1beta/models/gemini-2.5-flash:generateContent'
            body, headers = gemini_body(system, 1), {'x-goog-api-key': 'k'}
        first, second = post(url, body, headers), post(url, body, headers)
        log = fake.cache.log
    assert len(log) == 2 and log[1].read > 0
    if wire == 'chat':
        assert second['usage']['prompt_tokens'] == log[1].total
        assert second['usage']['prompt_tokens_details']['cached_tokens'] == log[1].read
        assert first['usage']['prompt_tokens_details']['cached_tokens'] == 0
    elif wire == 'responses':
        assert second['usage']['input_tokens'] == log[1].total
        assert second['usage']['input_tokens_details']['cached_tokens'] == log[1].read
    elif wire == 'anthropic':
        assert first['usage']['cache_creation_input_tokens'] == log[0].written == log[0].total
        assert first['usage']['input_tokens'] == 0
        assert second['usage']['cache_read_input_tokens'] == log[1].read == log[1].total
        assert second['usage']['cache_creation_input_tokens'] == 0
    else:
        assert second['usageMetadata']['promptTokenCount'] == log[1].total
        assert second['usageMetadata']['cachedContentTokenCount'] == log[1].read
        assert 'cachedContentTokenCount' not in first['usageMetadata']


def test_without_a_cache_the_scripted_usage_is_unchanged() -> None:
    with FakeProvider([Turn(text='a', usage=(10, 5))]) as fake:
        answer = post(f'{fake.base_url}/chat/completions', chat_body(text_of_tokens(3000), 'q'), {})
    assert answer['usage'] == {'prompt_tokens': 10, 'completion_tokens': 5, 'total_tokens': 15}


def test_a_rewritten_history_is_a_break_even_when_it_starts_with_an_older_request() -> None:
    """Dropping older steps (a compaction) breaks the prefix although the request still starts
    with the first request of the session; a side request (no tools) is compared with its own kind."""
    cache = PromptCache(clock=ManualClock())
    system = text_of_tokens(1500)
    assert run(cache, 'anthropic', anthropic_body(system, 0)).extends is None
    assert run(cache, 'anthropic', anthropic_body(system, 3)).extends is True
    pruned = anthropic_body(system, 5)
    del pruned['messages'][1:5]  # the first two steps dropped
    counts = run(cache, 'anthropic', pruned)
    assert counts.extends is False and counts.diverged_at == 'messages[1] (assistant) block 0'
    side = {**anthropic_body(system, 1), 'tools': []}
    assert run(cache, 'anthropic', side).extends is None  # the first side request
    assert run(cache, 'anthropic', anthropic_body(system, 6)).extends is False  # vs the pruned one, not the side request
