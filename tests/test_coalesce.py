"""Merging token-per-event SSE streams (src/ketch/providers/coalesce.py).

The pure part (which events merge, what the merged bytes are) is checked on SSE bytes of
all three wires; the stream part runs the real provider SDKs over the fake HTTP provider
with the hook installed, and checks what the SDK received, how many events it had to
build, how long a token waited, and that closing mid-stream leaves no reader behind.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakeprovider import FakeProvider, Hold, ToolCall, Turn
from kettle import adhoc, run_ketch

from ketch.providers.coalesce import _split_events, coalesce_events, response_hook, window_seconds


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    body = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {body}\n\n".encode()


def chat(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    return sse({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra})


def parse(data: bytes) -> list[tuple[str | None, Any]]:
    """(event name, JSON data or raw text) of each event in ``data``."""
    buffer = bytearray(data)
    out = []
    for raw in _split_events(buffer):
        name, payload = None, None
        for line in raw.decode().split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                payload = line[6:]
        try:
            out.append((name, json.loads(payload or "")))
        except ValueError:
            out.append((name, payload))
    assert not buffer, "every event ends with a blank line"
    return out


# ------------------------------------------------------------------ which events merge


def test_chat_text_deltas_merge_and_everything_else_passes_byte_for_byte() -> None:
    role = chat({"role": "assistant", "content": ""})
    finish = chat({}, "stop")
    usage = sse({"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 3}})
    done = b"data: [DONE]\n\n"
    events = [role, chat({"content": "Hel"}), chat({"content": "lo "}), chat({"content": "you"}), finish, usage, done]
    data, streaming = coalesce_events(events)
    assert not streaming
    assert data.startswith(role) and data.endswith(finish + usage + done)
    merged = parse(data)
    assert len(merged) == 5
    assert merged[1][1]["choices"][0]["delta"] == {"content": "Hello you"}
    assert merged[1][1]["id"] == "c1" and merged[1][1]["choices"][0]["finish_reason"] is None


def test_reasoning_and_text_do_not_merge_with_each_other() -> None:
    events = [chat({"reasoning_content": "think "}), chat({"reasoning_content": "hard"}),
              chat({"content": "An"}), chat({"content": "swer"})]
    merged = parse(coalesce_events(events)[0])
    assert [m[1]["choices"][0]["delta"] for m in merged] == [{"reasoning_content": "think hard"}, {"content": "Answer"}]


def test_tool_call_arguments_merge_only_after_the_call_started() -> None:
    head = chat({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                 "function": {"name": "read_file", "arguments": ""}}]})
    args = [chat({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in ['{"pa', 'th": ', '"a.py"}']]
    second = chat({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]})
    data, streaming = coalesce_events([head, *args, second])
    merged = parse(data)
    assert data.startswith(head)
    assert merged[1][1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.py"}'
    assert merged[2][1]["choices"][0]["delta"]["tool_calls"][0]["index"] == 1, "another call's arguments stay apart"
    assert streaming


def test_responses_deltas_merge_per_item_and_keep_the_last_sequence_number() -> None:
    def delta(text: str, seq: int, item: str = "msg_1") -> bytes:
        return sse({"type": "response.output_text.delta", "item_id": item, "output_index": 0, "content_index": 0,
                    "delta": text, "logprobs": [], "sequence_number": seq, "obfuscation": "x" * seq},
                   event="response.output_text.delta")
    done = sse({"type": "response.output_text.done", "item_id": "msg_1", "text": "abc", "sequence_number": 9},
               event="response.output_text.done")
    merged = parse(coalesce_events([delta("a", 3), delta("b", 4), delta("c", 5, item="msg_2"), done])[0])
    assert [(m[0], m[1].get("delta"), m[1]["sequence_number"]) for m in merged] == [
        ("response.output_text.delta", "ab", 4),
        ("response.output_text.delta", "c", 5),
        ("response.output_text.done", None, 9),
    ]


def test_anthropic_text_thinking_and_json_deltas_merge_per_block() -> None:
    def block(index: int, delta: dict[str, Any]) -> bytes:
        return sse({"type": "content_block_delta", "index": index, "delta": delta}, event="content_block_delta")
    events = [block(0, {"type": "thinking_delta", "thinking": "hm"}), block(0, {"type": "thinking_delta", "thinking": "m"}),
              block(0, {"type": "signature_delta", "signature": "sig"}),
              block(1, {"type": "text_delta", "text": "Hi "}), block(1, {"type": "text_delta", "text": "there"}),
              block(2, {"type": "input_json_delta", "partial_json": '{"a"'}),
              block(2, {"type": "input_json_delta", "partial_json": ": 1}"})]
    merged = [m[1]["delta"] for m in parse(coalesce_events(events)[0])]
    assert merged == [{"type": "thinking_delta", "thinking": "hmm"}, {"type": "signature_delta", "signature": "sig"},
                      {"type": "text_delta", "text": "Hi there"}, {"type": "input_json_delta", "partial_json": '{"a": 1}'}]


@pytest.mark.parametrize("odd", [
    b": keep-alive comment\n\n",
    b"id: 7\ndata: {\"choices\": [{\"delta\": {\"content\": \"x\"}}]}\n\n",
    b"data: {\"choices\": [{\"delta\": {\"content\": \"a\"}}]}\ndata: {}\n\n",
    b"data: not json\n\n",
    chat({"content": "x"}, None, usage={"prompt_tokens": 1}),
    sse({"choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": {"content": []}, "finish_reason": None}]}),
    b"\xff\xfe garbage\n\n",
])
def test_an_event_it_does_not_know_ends_the_merge_and_passes_untouched(odd: bytes) -> None:
    before, after = chat({"content": "a"}), chat({"content": "b"})
    data, _ = coalesce_events([before, chat({"content": "c"}), odd, after])
    assert odd in data
    assert data.endswith(odd + after)


_piece = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
_event = st.one_of(
    st.builds(lambda t: ("content", t), _piece),
    st.builds(lambda t: ("reasoning_content", t), _piece),
    st.just(("role", "")),
    st.just(("finish", "")),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_event, max_size=30), st.integers(min_value=1, max_value=7))
def test_merging_never_changes_the_text_or_the_order_of_other_events(script: list[tuple[str, str]], cut: int) -> None:
    events = []
    for kind, text in script:
        if kind == "role":
            events.append(chat({"role": "assistant", "content": ""}))
        elif kind == "finish":
            events.append(chat({}, "stop"))
        else:
            events.append(chat({kind: text}))
    # fed in arbitrary bursts, as reads would deliver them
    out = b"".join(coalesce_events(events[i:i + cut])[0] for i in range(0, len(events), cut))

    def flatten(chunks: list[tuple[str | None, Any]]) -> list[tuple[str, str]]:
        flat: list[tuple[str, str]] = []
        for _, data in chunks:
            choice = data["choices"][0]
            delta = choice["delta"]
            kind = "finish" if choice["finish_reason"] else "role" if "role" in delta else next(iter(delta))
            text = "" if kind in ("finish", "role") else delta[kind]
            if flat and kind == flat[-1][0] and kind not in ("finish", "role"):
                flat[-1] = (kind, flat[-1][1] + text)
            else:
                flat.append((kind, text))
        return flat

    assert flatten(parse(out)) == flatten(parse(b"".join(events)))
    assert len(parse(out)) <= len(events)


def test_the_window_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KETCH_COALESCE_MS", "0")
    assert window_seconds() == 0
    monkeypatch.setenv("KETCH_COALESCE_MS", "40")
    assert window_seconds() == pytest.approx(0.04)
    monkeypatch.setenv("KETCH_COALESCE_MS", "soon")
    assert window_seconds() == pytest.approx(0.1)


# ------------------------------------------------------------------ the SDKs over HTTP


def _openai_client(base_url: str, window: float) -> Any:
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    return AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0,
                       http_client=DefaultAsyncHttpxClient(event_hooks={"response": [response_hook(window)]}))


async def _chat_chunks(base_url: str, window: float) -> list[tuple[float, str]]:
    """(seconds since the request, content) of every content chunk the SDK built."""
    client = _openai_client(base_url, window)
    start = time.perf_counter()
    stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
    got = []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            got.append((time.perf_counter() - start, chunk.choices[0].delta.content))
    await client.close()
    return got


def test_a_fast_stream_reaches_the_sdk_whole_in_far_fewer_events() -> None:
    pieces = [f"w{i} " for i in range(200)]
    with FakeProvider([Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.002)]) as fake:
        got = asyncio.run(_chat_chunks(fake.base_url, 0.1))
    assert "".join(text for _, text in got) == "".join(pieces)
    assert len(got) < len(pieces) / 4, f"{len(got)} chunks for {len(pieces)} tokens"


def test_a_slow_stream_is_not_held_back_more_than_about_one_window() -> None:
    """While the provider sends nothing more (the fake holds after the second piece), what it
    already sent reaches the SDK: the window ends without more data. Shown by the hold, not by
    a clock: were the pieces kept for more, the SDK would see nothing until the release."""
    hold = Hold("after two")
    pieces = ["one ", "two ", "three ", "four "]

    async def read(base_url: str) -> tuple[list[str], bool]:
        client = _openai_client(base_url, 0.1)
        stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                      stream=True)
        got: list[str] = []
        seen_while_held = False
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                got.append(chunk.choices[0].delta.content)
                if "two" in "".join(got) and not hold.released.is_set():
                    assert await asyncio.to_thread(hold.wait_reached, 30)
                    seen_while_held = True
                    hold.release()
        await client.close()
        return got, seen_while_held

    with FakeProvider([Turn(text="".join(pieces), text_pieces=pieces, hold_after_piece=(2, hold))]) as fake:
        got, seen_while_held = asyncio.run(asyncio.wait_for(read(fake.base_url), 60))
    assert seen_while_held, "the first two pieces reached the SDK only after the provider sent more"
    assert "".join(got) == "".join(pieces)


def test_without_a_window_every_event_passes_as_sent() -> None:
    pieces = [f"w{i} " for i in range(40)]
    with FakeProvider([Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.002)]) as fake:
        got = asyncio.run(_chat_chunks(fake.base_url, 0.0))
    assert [text for _, text in got] == pieces


def test_closing_mid_stream_stops_the_reader() -> None:
    pieces = [f"w{i} " for i in range(100)]

    async def read_some(base_url: str) -> set[asyncio.Task[Any]]:
        client = _openai_client(base_url, 0.1)
        stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break
        await stream.close()
        await client.close()
        await asyncio.sleep(0.05)
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    with FakeProvider([Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.02)]) as fake:
        assert asyncio.run(read_some(fake.base_url)) == set()


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses", "anthropic-messages", "gemini"])
def test_ketch_streams_every_wire_whole_through_the_merge(wire: str, tmp_path: Any) -> None:
    pieces = [f"tok{i} " for i in range(120)]
    text = "".join(pieces)
    turns = [
        Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})], reasoning="look at the file first",
             text_pieces=[], chunk_delay=0.001),
        Turn(text=text, text_pieces=pieces, chunk_delay=0.002),
    ]
    (tmp_path / "a.txt").write_text("hello\n")
    with FakeProvider(turns) as fake:
        run = run_ketch(["-p", "read a.txt", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path)
        second = fake.requests[-1].body
    assert run.code == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    deltas = [e["text"] for e in events if e["type"] == "text_delta"]
    assert "".join(deltas).endswith(text)
    assert len(deltas) < len(pieces) / 3, f"{len(deltas)} text events for {len(pieces)} tokens"
    assert [e["name"] for e in events if e["type"] == "tool_call_started"] == ["read_file"]
    assert "hello" in json.dumps(second), "the tool result went back on the next request"
