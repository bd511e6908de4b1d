"""Mistral's ``web_search`` connector as ketch's hosted search, on the Conversations API, end to end.

Assertions are on the JSON the fake received at ``/v1/conversations`` (``fake_mistral`` speaks the
Conversations stream and refuses entries the published schema would refuse) and on the events
``ketch -p --output-format stream-json`` printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_mistral import searches
from fakeprovider import REMINDER_OPEN, delegating, NativeSearch, RecordedRequest, ToolCall, Turn, instructions, tool_results, user_texts
from kettle import run_ketch, search_connection_config, stream_json_events, write_project_config

SOURCES = [
    {"title": "Ketch docs", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."},
    {"title": "Release notes", "url": "https://example.org/notes", "snippet": ""},
]
SEARCHED = Turn(text="Ketch is a terminal agent.", native_search=NativeSearch("what is ketch", SOURCES))
MODEL = "mistral:mistral-medium-latest"


def _config(fake: Any, *, metadata: str = "web_search = true", search: str = "enabled = true", extra: str = "") -> str:
    return search_connection_config("mistral", fake.base_url, MODEL, metadata=metadata, search=search, extra=extra)


def _ketch(tmp_path: Path, prompt: str, *flags: str, code: int = 0) -> list[dict]:
    return stream_json_events(tmp_path, prompt, MODEL, {"MISTRAL_API_KEY": "mk"}, *flags, code=code)


def _any_search(request: RecordedRequest) -> bool:
    """Any search tool of any wire: the connector, a client ``web_search`` function, OpenAI's option."""
    body = request.body or {}
    return request.wire == "mistral" and searches(body) or "web_search" in json.dumps(body.get("tools") or []) \
        or "web_search_options" in body


def test_the_connector_goes_on_the_wire_and_references_become_source_rows(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED, Turn(text="Yes, still.")])
    write_project_config(tmp_path, _config(fake))

    first = _ketch(tmp_path, "what is ketch?", "--web-search")
    _ketch(tmp_path, "are you sure?", "--web-search", "--continue")

    assert [r.wire for r in fake.model_requests] == ["mistral", "mistral"]
    assert all(r.headers["authorization"] == "Bearer mk" for r in fake.model_requests)
    body = fake.model_requests[0].body
    assert body["store"] is False and body["stream"] is True and body["model"] == "mistral-medium-latest"
    connectors = [t for t in body["tools"] if t["type"] != "function"]
    assert connectors == [{"type": "web_search"}]
    functions = [t["function"]["name"] for t in body["tools"] if t["type"] == "function"]
    assert "read_file" in functions and "web_search" not in functions  # never the client tool as well
    assert "web_search" in instructions(fake.model_requests[0])
    # the prompt, then ketch's state reminder as its own message.input after it (appended to the newest request)
    assert body["inputs"][-2] == {"object": "entry", "type": "message.input", "role": "user", "content": "what is ketch?"}
    assert body["inputs"][-1]["type"] == "message.input" and body["inputs"][-1]["content"].startswith(REMINDER_OPEN)

    results = [e for e in first if e["type"] == "web_search_result"]
    assert [r["sources"] for r in results] == [[
        {"title": "Ketch docs", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."},
        {"title": "Release notes", "url": "https://example.org/notes", "snippet": ""},
    ]]
    assert results[0]["query"] == "what is ketch"
    finished = next(e for e in first if e["type"] == "turn_finished")
    assert finished["text"] == SEARCHED.text

    # Turn two, stateless: the whole history goes back as Mistral's own entries: the tool.execution
    # of the search, then the answer as a message.output whose content holds the text and the same
    # tool_reference chunks Mistral sent. The connector goes out again.
    second = fake.model_requests[1].body
    assert second["store"] is False and searches(second)
    entries = [e for e in second["inputs"]  # ketch's state reminder (its own message.input) is not a turn
               if not str(e.get("content")).startswith(REMINDER_OPEN)]
    assert [e["type"] for e in entries] == ["message.input", "tool.execution", "message.output", "message.input"]
    execution, answer = entries[1], entries[2]
    assert execution["name"] == "web_search" and json.loads(execution["arguments"]) == {"query": "what is ketch"}
    assert "id" not in execution  # store: false keeps nothing server-side to point at
    assert answer["role"] == "assistant"
    assert answer["content"][0] == {"type": "text", "text": SEARCHED.text}
    references = answer["content"][1:]
    assert [(r["type"], r["tool"], r["url"]) for r in references] == [
        ("tool_reference", "web_search", s["url"]) for s in SOURCES]
    assert references[0]["source"] == "brave"  # kept as it came, not rebuilt from the normalized rows
    assert user_texts(fake.model_requests[1])[-1] == "are you sure?"
    assert fake.rejections["mistral_invalid_inputs"] == 0


def test_a_tool_using_turn_end_to_end(tmp_path, fake_provider):
    """A function call streamed as ``function.call.delta`` runs, and its result goes back as a
    ``function.result`` entry after Mistral's own ``function.call`` entry."""
    (tmp_path / "notes.txt").write_text("MARKER-42\n")
    fake = fake_provider([
        Turn(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="abcDEF123")], usage=(20, 7)),
        Turn(text="The file says MARKER-42.", usage=(40, 9)),
    ])
    write_project_config(tmp_path, _config(fake))
    events = _ketch(tmp_path, "read notes.txt", "--web-search", "--yolo")

    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == "The file says MARKER-42."
    second = fake.model_requests[1]
    call, result = [e for e in second.body["inputs"] if e["type"] in ("function.call", "function.result")]
    assert (call["tool_call_id"], call["name"], json.loads(call["arguments"])) == (
        "abcDEF123", "read_file", {"path": "notes.txt"})
    assert result["tool_call_id"] == "abcDEF123" and "MARKER-42" in result["result"]
    assert tool_results(second)[0][0] == "abcDEF123"
    assert fake.rejections["mistral_invalid_inputs"] == 0
    usage = [e for e in events if e["type"] == "usage"]
    assert [(u["input_tokens"], u["output_tokens"]) for u in usage] == [(20, 7), (40, 9)]
    assert all(isinstance(u["cost_usd"], float) and u["cost_usd"] > 0 for u in usage)  # genai-prices prices it


@pytest.mark.parametrize(
    ("config_kwargs", "flags"),
    [
        pytest.param({}, ["--web-search", "--privacy"], id="privacy-flag"),
        pytest.param({"metadata": "web_search = false"}, ["--web-search"], id="metadata-off"),
        pytest.param({"metadata": ""}, ["--web-search"], id="unofficial-host-without-metadata"),
        pytest.param({}, [], id="headless-no-opt-in"),
        pytest.param({"search": "enabled = true\n[tools]\ndisabled = ['web_search']"}, ["--web-search"],
                     id="tool-disabled"),
    ],
)
def test_no_connector_is_sent(tmp_path, fake_provider, config_kwargs, flags):
    """Without a search route the session stays on Chat Completions, with no search of any kind."""
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, _config(fake, **config_kwargs))
    events = _ketch(tmp_path, "hi", *flags)
    request = fake.model_requests[0]
    assert request.wire == "chat"  # no search: pydantic-ai's Chat Completions model, as before
    assert not _any_search(request)
    assert "web_search" not in instructions(request)
    assert not [e for e in events if e["type"] == "web_search_result"]


def test_privacy_in_config_removes_the_connector(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, "privacy = true\n" + _config(fake))
    _ketch(tmp_path, "hi", "--web-search")
    assert not _any_search(fake.model_requests[0])


@pytest.mark.parametrize(("kind", "searching"), [("explore", False), ("web_research", True)])
def test_a_child_gets_the_connector_only_when_its_tool_list_has_search(tmp_path, fake_provider, kind, searching):
    script = delegating(kind)

    fake = fake_provider([script] * 3)
    write_project_config(tmp_path, _config(fake))
    events = _ketch(tmp_path, "research x", "--web-search", "--yolo")
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == "parent done"
    child = next(r for r in fake.model_requests if any("CHILD-TASK" in t for t in user_texts(r)))
    assert searches(fake.model_requests[0].body)
    assert child.wire == "mistral" and searches(child.body) is searching
    assert child.body["store"] is False


async def test_titles_and_commit_messages_on_the_session_model_send_no_connector(tmp_path, fake_provider, monkeypatch):
    """The auxiliary helpers run on the session's own Conversations model and send no connector."""
    from argparse import Namespace

    from ketch.core.commit import propose_commit_message
    from ketch.frontends.assemble import build_session
    from ketch.state.titles import generate_title

    fake = fake_provider([SEARCHED, Turn(text="A title"), Turn(text="Add a file")])
    write_project_config(tmp_path, _config(fake))
    monkeypatch.setenv("MISTRAL_API_KEY", "mk")
    session = await build_session(Namespace(model=MODEL, cwd=str(tmp_path), web_search=False), interactive=True)
    try:
        async for _ in session.run_turn("hello"):
            pass
        await generate_title(session.model, "hello")
        await propose_commit_message(session.model, "diff --git a/x b/x\n+hello\n")
    finally:
        await session.aclose()
    root, title, commit = fake.model_requests
    assert [r.wire for r in (root, title, commit)] == ["mistral"] * 3
    assert searches(root.body)
    assert not _any_search(title) and not _any_search(commit)


@pytest.mark.parametrize(
    ("status", "expect"),
    [
        (400, "rejected the request (HTTP 400): bad inputs"),
        (401, "rejected the API key (HTTP 401)"),
        (429, "rate limiting requests (HTTP 429)"),
    ],
)
def test_bad_input_errors_are_one_line(tmp_path, fake_provider, status, expect):
    from fake_mistral import error_body

    fake = fake_provider([Turn(status=status, error_body=error_body(status, "bad inputs"))])
    write_project_config(tmp_path, _config(fake))
    run = run_ketch(["-p", "hi", "-m", MODEL, "--web-search"], tmp_path, env={"MISTRAL_API_KEY": "mk"})
    assert run.code == 1
    line = run.stderr.strip().splitlines()
    assert len(line) == 1 and expect in line[0], run.stderr
    assert "Traceback" not in run.stderr and "mk" not in run.stderr.replace("mistral", "")
    assert fake.model_requests[0].wire == "mistral"


def test_a_stream_cut_before_its_done_event_is_an_error(tmp_path, fake_provider):
    partial = "the first half of an answer that never got its second half"
    fake = fake_provider([Turn(text=partial, native_search=SEARCHED.native_search, end_early=True),
                          Turn(text="second answer")])
    write_project_config(tmp_path, _config(fake))
    events = _ketch(tmp_path, "first question", "--web-search", code=1)
    error = next(e for e in events if e["type"] == "error")
    assert "broke before the answer was complete" in error["message"] and "end-of-answer" in error["message"]
    assert next(e for e in events if e["type"] == "turn_finished")["reason"] == "error"
    _ketch(tmp_path, "second question", "--web-search", "--continue")
    sent = json.dumps(fake.model_requests[-1].body)
    assert "first question" in sent and partial[-20:] not in sent  # the half answer was not stored


def test_an_error_event_in_the_stream_is_one_line(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, _config(fake))

    import fake_mistral

    real = fake_mistral.render

    def failing(turn: Any, body: Any, new_id: Any, pieces: Any) -> Any:
        events, whole = real(turn, body, new_id, pieces)
        error = ("conversation.response.error", {"type": "conversation.response.error", "message": "upstream", "code": 3000})
        return [*events[:2], error], whole

    fake_mistral.render = failing
    try:
        events = _ketch(tmp_path, "hi", "--web-search", code=1)
    finally:
        fake_mistral.render = real
    error = next(e for e in events if e["type"] == "error")
    assert "in the middle of its answer" in error["message"] and "upstream" in error["message"]


@pytest.mark.parametrize(
    ("base_url", "model", "protocol"),
    [
        ("https://api.mistral.ai/v1", "mistral-medium-latest", "mistral-conversations"),
        (None, "mistral-large-latest", "mistral-conversations"),  # the preset's own base URL
        ("https://proxy.example/v1", "mistral-medium-latest", None),  # not Mistral's host, no metadata
    ],
)
def test_capability_follows_the_official_host(base_url, model, protocol):
    from ketch.config.settings import Config, resolve_connection
    from ketch.websearch.wiring import connection_capability, session_search

    cfg: dict = {"preset": "mistral"} | ({"base_url": base_url} if base_url else {})
    config = Config.model_validate({"connections": {"mistral": cfg}, "web_search": {"enabled": True}})
    conn = resolve_connection(config, f"mistral:{model}", environ={"MISTRAL_API_KEY": "mk"})
    capability = connection_capability(conn)
    assert capability.protocol == protocol, capability.reason
    search = session_search(config, conn, interactive=True)
    assert search.wire == ("mistral-conversations" if protocol else "openai-chat")


def test_other_services_never_get_the_connector():
    from ketch.websearch.capability import resolve_capability

    # Metadata on a generic Chat Completions connection proves nothing about Mistral's connector.
    declared = resolve_capability("c", "openai-compatible", "openai-chat", "http://127.0.0.1:9/v1", "mistral-medium",
                                  {"capabilities": {"web_search": True}})
    assert not declared.supported


def test_models_capabilities_shows_the_mistral_row(tmp_path):
    run = run_ketch(["models", "--capabilities"], tmp_path)
    assert run.code == 0, run.stderr
    row = next(line for line in run.stdout.splitlines() if line.startswith("Mistral"))
    assert "mistral-conversations" in row and "hosted search" in row and "pending" not in row


def test_version_and_help_import_neither_the_conversations_model_nor_mistralai():
    import subprocess
    import sys

    code = ("import sys; from ketch.frontends.cli import main\n"
            "for a in (['--version'], ['--help']):\n"
            "    try: main(a)\n"
            "    except SystemExit: pass\n"
            "bad = [m for m in sys.modules if m.startswith(('mistralai', 'ketch.providers.mistral_conversations'))]\n"
            "print('BAD', bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "BAD []" in out, out


def test_a_later_turn_without_search_replays_the_searched_turn_on_chat_completions(tmp_path, fake_provider):
    """Privacy mode on the next turn: the session is back on Chat Completions, which gets the answer
    text and no search part of any kind (never a tool message for Mistral's search)."""
    fake = fake_provider([SEARCHED, Turn(text="private answer")])
    write_project_config(tmp_path, _config(fake))
    _ketch(tmp_path, "what is ketch?", "--web-search")
    _ketch(tmp_path, "and now privately", "--web-search", "--privacy", "--continue")
    second = fake.model_requests[1]
    assert second.wire == "chat" and not _any_search(second)
    messages = [m for m in second.body["messages"]  # ketch's state reminder is its own user message, not a turn
                if m["role"] != "system" and not str(m.get("content")).startswith(REMINDER_OPEN)]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == SEARCHED.text and not messages[1].get("tool_calls")


async def test_hostile_stream_events_give_no_invented_rows():
    """References without a URL, from another connector, or not objects; executions of other tools;
    unknown events: none becomes a source row, and nothing crashes."""
    from pydantic_ai.messages import PartStartEvent
    from pydantic_ai.models import ModelRequestParameters

    from ketch.providers.mistral_conversations import ConversationsStream
    from ketch.protocol.search_rows import normalize_native_result

    frames = [
        {"type": "tool.execution.started", "id": "ex1", "name": "web_search", "arguments": '{"query": "q"}'},
        {"type": "tool.execution.started", "id": "ex2", "name": "code_interpreter", "arguments": "print(1)"},
        {"type": "message.output.delta", "id": "m", "content": "answer"},
        {"type": "message.output.delta", "id": "m", "content": {"type": "tool_reference", "tool": "web_search",
                                                                "title": "no url"}},
        {"type": "message.output.delta", "id": "m", "content": {"type": "tool_reference", "tool": "document_library",
                                                                "title": "lib", "url": "https://lib.example"}},
        {"type": "message.output.delta", "id": "m", "content": {"type": "tool_reference", "tool": "web_search",
                                                                "title": 7, "url": "https://ok.example",
                                                                "description": ["not text"]}},
        {"type": "message.output.delta", "id": "m", "content": ["not", "a", "chunk"]},
        {"type": "agent.handoff.started", "id": "h"},
        {"type": "conversation.response.done", "usage": {"prompt_tokens": "many", "completion_tokens": 3,
                                                          "connector_tokens": 9, "connectors": {"web_search": 1}}},
    ]

    class Body:
        async def aiter_lines(self):
            for frame in frames:
                yield f"event: {frame['type']}"
                yield "data: " + json.dumps(frame)
                yield ""

    stream = ConversationsStream(model_request_parameters=ModelRequestParameters(), _response=Body(), _model_name="m")
    starts = [e.part for e in [e async for e in stream] if isinstance(e, PartStartEvent)]
    calls = [p for p in starts if p.part_kind == "builtin-tool-call"]
    results = [p for p in starts if p.part_kind == "builtin-tool-return"]
    assert [c.tool_call_id for c in calls] == ["ex1"]  # only the search connector is a search
    assert normalize_native_result(results[0], call=calls[0]) == {
        "call_id": "ex1", "query": "q", "sources": [{"title": "7", "url": "https://ok.example", "snippet": ""}]}
    response = stream.get()
    assert response.usage.input_tokens == 0 and response.usage.output_tokens == 3
    assert response.usage.details == {"connector_tokens": 9, "connector_calls.web_search": 1}


@pytest.mark.parametrize(("think", "reasoning", "sent"), [("high", "true", "high"), ("max", "true", "high"),
                                                          ("off", "true", None), ("high", "false", None)])
def test_think_levels_reach_the_conversations_request(tmp_path, fake_provider, think, reasoning, sent):
    fake = fake_provider([Turn(text="ok")])
    write_project_config(tmp_path, _config(fake, metadata=f"web_search = true }}\nreasoning = {reasoning}\n#"))
    _ketch(tmp_path, "hi", "--web-search", "--think", think)
    body = fake.model_requests[0].body
    assert (body.get("completion_args") or {}).get("reasoning_effort") == sent


def test_a_rate_limited_request_is_retried_within_max_retries(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED])
    fake.fail_path("/v1/conversations", 429, times=1)
    write_project_config(tmp_path, _config(fake).replace("max_retries = 0", "max_retries = 1"))
    events = _ketch(tmp_path, "hi", "--web-search")
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == SEARCHED.text
    assert [r.wire for r in fake.requests] == ["mistral", "mistral"]
    assert fake.requests[0].body == fake.requests[1].body  # the same request, not another protocol


def test_a_search_then_a_tool_call_replays_in_mistrals_order(tmp_path, fake_provider):
    """The references go back inside the answer that cited them, before the function call, so no
    entry sits between a ``function.call`` and its ``function.result``."""
    (tmp_path / "notes.txt").write_text("MARKER-7\n")
    fake = fake_provider([
        Turn(text="Found it; reading the file.", native_search=SEARCHED.native_search,
             tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="xyzXYZ789")]),
        Turn(text="done"),
    ])
    write_project_config(tmp_path, _config(fake))
    events = _ketch(tmp_path, "look it up then read notes.txt", "--web-search", "--yolo")
    assert [len(e["sources"]) for e in events if e["type"] == "web_search_result"] == [2]
    inputs = [e for e in fake.model_requests[1].body["inputs"]  # ketch's state reminder (a message.input after
              if not str(e.get("content")).startswith(REMINDER_OPEN)]  # the prompt) is not part of the order
    assert [e["type"] for e in inputs] == ["message.input", "tool.execution", "message.output", "function.call",
                                           "function.result"]
    assert [c["type"] for c in inputs[2]["content"]] == ["text", "tool_reference", "tool_reference"]
    assert inputs[3]["tool_call_id"] == inputs[4]["tool_call_id"] == "xyzXYZ789"


async def test_search_arguments_streamed_in_deltas_join_into_the_query():
    from pydantic_ai.models import ModelRequestParameters

    from ketch.providers.mistral_conversations import ConversationsStream
    from ketch.protocol.search_rows import normalize_native_result

    frames = [{"type": "tool.execution.started", "id": "e", "name": "web_search_premium", "arguments": '{"query": '},
              {"type": "tool.execution.delta", "id": "e", "name": "web_search_premium", "arguments": '"abc"}'},
              {"type": "tool.execution.done", "id": "e", "name": "web_search_premium"},
              {"type": "message.output.delta", "id": "m", "content": "hi"},
              {"type": "conversation.response.done", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}]

    class Body:
        async def aiter_lines(self):
            for frame in frames:
                yield "data: " + json.dumps(frame)
                yield ""

    stream = ConversationsStream(model_request_parameters=ModelRequestParameters(), _response=Body(), _model_name="m")
    async for _ in stream:
        pass
    call, text, result = stream.get().parts
    assert normalize_native_result(result, call=call)["query"] == "abc" and text.content == "hi"
    assert call.provider_details == {"name": "web_search_premium"}  # replayed under the connector's own name
