"""Groq connections on pydantic-ai's Groq model, and compound's own search as ketch's hosted search.

Assertions are on what the fake received on Groq's SDK path (``fake_groq`` speaks Groq's dialect:
``x_groq`` usage, ``executed_tools``, a 400 for tools on compound) and on what ``ketch -p`` printed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import REMINDER_OPEN, NativeSearch, ToolCall, Turn, tool_results, user_texts
from kettle import one_line_error, run_ketch, write_project_config

SOURCES = [
    {"title": "Ketch docs", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."},
    {"title": "Release notes", "url": "https://example.org/notes", "snippet": "Version 1."},
]
SEARCHED = Turn(text="Ketch is a terminal agent.", native_search=NativeSearch("what is ketch", SOURCES))
COMPOUND = "groq:groq/compound"
GPT_OSS = "groq:openai/gpt-oss-120b"
ENV = {"GROQ_API_KEY": "gk"}


def _groq_url(fake: Any) -> str:
    return f"http://127.0.0.1:{fake.port}/openai/v1"  # the preset's shape: https://api.groq.com/openai/v1


def _config(fake: Any, extra: str = "") -> str:
    """A groq connection on the fake; the fake is not api.groq.com, so compound's search is declared
    in its metadata (as a proxy in front of Groq would be)."""
    return (f'[connections.groq]\npreset = "groq"\nbase_url = "{_groq_url(fake)}"\nmax_retries = 0\n'
            f'[models."{COMPOUND}"]\ncapabilities = {{ web_search = true }}\n{extra}')


def _ketch(tmp_path: Path, prompt: str, model: str, *flags: str, code: int = 0) -> tuple[list[dict], Any]:
    run = run_ketch(["-p", prompt, "-m", model, "--output-format", "stream-json", *flags], tmp_path, env=ENV)
    assert run.code == code, run.stderr + run.stdout
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()], run


def _conn(fake: Any, model: str) -> Any:
    from ketch.config.settings import Config, resolve_connection

    config = Config.model_validate({"connections": {"groq": {"preset": "groq", "base_url": _groq_url(fake),
                                                              "max_retries": 0}}})
    return resolve_connection(config, model, environ=ENV)


# ------------------------------------------------------------------------------ compound: hosted search


def test_compound_searches_with_no_function_tools_and_its_rows_become_source_rows(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED, Turn(text="Yes, still.")])
    write_project_config(tmp_path, _config(fake))

    first, run = _ketch(tmp_path, "what is ketch?", COMPOUND, "--web-search")
    _ketch(tmp_path, "are you sure?", COMPOUND, "--web-search", "--continue")

    requests = fake.model_requests
    assert [r.path for r in requests] == ["/openai/v1/chat/completions"] * 2  # the Groq SDK's own path
    assert all(r.headers["authorization"] == "Bearer gk" and r.body["model"] == "groq/compound" for r in requests)
    sent = [r.body for r in requests]
    # Compound takes no user-provided tools: none go out (the fake answers 400 if they do), and no
    # search settings either (ketch sets no domain filter); the search is the model itself.
    assert not {"tools", "tool_choice", "search_settings", "parallel_tool_calls"} & set(sent[0])

    notices = [e for e in first if e["type"] == "notice"]
    assert any("takes no function tools" in n["text"] for n in notices), first
    results = [e for e in first if e["type"] == "web_search_result"]
    assert [(r["query"], r["sources"]) for r in results] == [("what is ketch", SOURCES)]
    finished = next(e for e in first if e["type"] == "turn_finished")
    assert finished["text"] == SEARCHED.text

    # Turn two: Groq's API takes the answer text back, never executed_tools or a tool message.
    messages = [m for m in sent[1]["messages"]  # ketch's state reminder is its own user message, not a turn
                if m["role"] != "system" and not str(m.get("content")).startswith(REMINDER_OPEN)]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert set(messages[1]) == {"role", "content"}  # no tool_calls, no executed_tools
    assert messages[1]["content"].endswith(SEARCHED.text)  # after the SDK's <think> replay of the reasoning
    assert not tool_results(requests[1]) and user_texts(requests[1])[-1] == "are you sure?"


def test_the_stored_session_and_its_export_keep_the_rows(tmp_path, fake_provider):
    """Replay (``ketch export``) reads the provider's parts back from the store into the same source rows."""
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, _config(fake))
    events, _ = _ketch(tmp_path, "what is ketch?", COMPOUND, "--web-search")
    session_id = next(e for e in events if e.get("session_id"))["session_id"]
    export = run_ketch(["export", session_id, "--format", "json"], tmp_path, env=ENV)
    assert export.code == 0, export.stderr
    record = json.loads(export.stdout)
    rows = [e for e in record["events"] if e.get("type") == "web_search_result"]
    assert [(r["query"], r["sources"]) for r in rows] == [("what is ketch", SOURCES)], record["events"]
    # ...and the history keeps Groq's own result (search_results as it came) for the model's side.
    returns = [p for m in record["messages"] for p in m["parts"] if p.get("part_kind") == "builtin-tool-return"]
    assert [r["content"]["results"][0]["url"] for r in returns] == [SOURCES[0]["url"]]


def test_a_whole_completion_reports_the_same_rows(tmp_path, fake_provider):
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.native_tools import WebSearchTool

    from ketch.providers.models import build_model
    from ketch.protocol.search_rows import normalize_native_result

    fake = fake_provider([SEARCHED])
    model = build_model(_conn(fake, COMPOUND))
    from pydantic_ai.tools import ToolDefinition

    # A function tool in the request (a caller that did not drop them) still never reaches compound.
    read = ToolDefinition(name="read_file", parameters_json_schema={"type": "object", "properties": {}})
    params = ModelRequestParameters(native_tools=[WebSearchTool()], function_tools=[read])
    response = asyncio.run(model.request([ModelRequest(parts=[UserPromptPart("q")])], None, params))
    assert not {"tools", "tool_choice"} & set(fake.model_requests[0].body)
    call, result, *rest = response.parts
    assert (call.part_kind, result.part_kind) == ("builtin-tool-call", "builtin-tool-return")
    assert rest[-1].content == SEARCHED.text
    assert normalize_native_result(result, call=call) == {"call_id": call.tool_call_id, "query": "what is ketch",
                                                          "sources": SOURCES}
    assert result.content["results"][0]["score"] == 0.9  # Groq's search_results kept as they came
    assert fake.model_requests[0].body["stream"] is False


def test_unreadable_executed_tool_arguments_do_not_break_the_answer():
    from ketch.wire.chat_groq_stream import readable_arguments

    assert json.loads(readable_arguments("{not json")) == {"unreadable_arguments": "{not json"}
    assert readable_arguments('{"query": "x"}') == '{"query": "x"}'


# ------------------------------------------------------------------------------ compound: never unasked


@pytest.mark.parametrize(
    ("flags", "extra", "why"),
    [
        pytest.param(["--web-search", "--privacy"], "", "privacy mode", id="privacy-flag"),
        pytest.param(["--web-search"], "[web_search]\nsource = \"tavily\"\n", "Tavily", id="tavily-source"),
        pytest.param([], "", "turned off", id="search-off"),
        pytest.param([], "[web_search]\nenabled = true\n", "KETCH_WEB_SEARCH_ENABLED", id="headless-without-opt-in"),
        pytest.param(["--web-search"], "[tools]\ndisabled = ['web_search']\n", "turned off", id="tool-disabled"),
    ],
)
def test_a_session_that_may_not_search_refuses_compound_before_any_request(tmp_path, fake_provider, flags, extra, why):
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, _config(fake, extra))
    run = run_ketch(["-p", "hi", "-m", COMPOUND, *flags], tmp_path, env=ENV)
    assert run.code == 2, run.stderr + run.stdout
    line = run.stderr.strip().splitlines()[-1]
    assert "groq/compound searches the web on its own" in line and why in line and "gpt-oss" in line, line
    assert "Traceback" not in run.stderr
    assert not fake.model_requests


def test_privacy_in_config_refuses_compound(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, "privacy = true\n" + _config(fake))
    run = run_ketch(["-p", "hi", "-m", COMPOUND, "--web-search"], tmp_path, env=ENV)
    assert run.code == 2 and "privacy mode" in run.stderr
    assert not fake.model_requests


def test_a_request_without_the_hosted_search_never_reaches_compound(fake_provider):
    """Children without ``web_search`` and auxiliary calls (titles, summaries, commit messages) run
    without the hosted tool: the model refuses them before anything is sent."""
    from pydantic_ai.exceptions import UserError

    from ketch.core.commit import propose_commit_message
    from ketch.providers.models import build_model
    from ketch.state.titles import generate_title

    fake = fake_provider([Turn(text="never")] * 3)
    model = build_model(_conn(fake, COMPOUND))
    for call in (lambda: generate_title(model, "hello"), lambda: propose_commit_message(model, "diff --git a/x b/x\n")):
        with pytest.raises(UserError, match="searches the web on its own"):
            asyncio.run(call())
    assert not fake.model_requests


def test_a_child_on_compound_without_the_tool_sends_nothing_to_it(tmp_path, fake_provider):
    """A parent on gpt-oss delegates to a config agent on compound whose tool list lacks web_search:
    the child's request is refused, no compound request goes out, and the parent hears why."""
    def script(request: Any) -> Turn:
        if tool_results(request):
            return Turn(text="parent done")
        return Turn(tool_calls=[ToolCall("task", {"description": "look", "prompt": "CHILD-TASK x", "kind": "scout"})])

    fake = fake_provider([script] * 3)
    write_project_config(tmp_path, _config(fake, '[agents.scout]\nprompt = "look"\ntools = ["read_file"]\n'
                                                 f'model = "{COMPOUND}"\ndescription = "a scout"\n'))
    events, _ = _ketch(tmp_path, "research x", GPT_OSS, "--web-search", "--yolo")
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == "parent done"
    assert [r.body["model"] for r in fake.model_requests] == ["openai/gpt-oss-120b"] * 2
    result = tool_results(fake.model_requests[1])[0][1]
    assert "searches the web on its own" in result


# ------------------------------------------------------------------------------ other Groq models: the foundation


def test_gpt_oss_runs_a_tool_turn_on_the_groq_sdk_without_any_search(tmp_path, fake_provider):
    (tmp_path / "notes.txt").write_text("hello from disk\n")
    fake = fake_provider([
        Turn(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})], reasoning="look at the file"),
        Turn(text="It says hello."),
    ])
    write_project_config(tmp_path, _config(fake))
    events, _ = _ketch(tmp_path, "what is in notes.txt?", GPT_OSS, "--web-search", "--think", "high")
    first, second = (r.body for r in fake.model_requests)
    names = [t["function"]["name"] for t in first["tools"]]
    assert "read_file" in names and all(t["type"] == "function" for t in first["tools"])
    assert "web_search" not in names and "search_settings" not in first  # no hosted search on gpt-oss
    assert first["reasoning_effort"] == "high"
    assert any("hello from disk" in text for _, text in tool_results(fake.model_requests[1]))
    assert second["messages"][-1]["role"] == "tool"
    finished = events[-1]
    assert finished["type"] == "turn_finished" and finished["text"] == "It says hello."


def test_gpt_oss_usage_comes_from_x_groq(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="ok", usage=(1234, 56))])
    write_project_config(tmp_path, _config(fake))
    run = run_ketch(["-p", "hi", "-m", GPT_OSS, "--output-format", "json"], tmp_path, env=ENV)
    assert run.code == 0, run.stderr
    out = json.loads(run.stdout)
    assert json.dumps(out["usage"]).count("1234") == 1 and "56" in json.dumps(out["usage"]), out["usage"]
    assert out["cost_usd"] > 0  # genai-prices knows gpt-oss on Groq


def test_compound_cost_is_unknown_never_a_guess(tmp_path, fake_provider):
    """genai-prices has no price for compound (its tokens are billed per underlying model, its
    searches per request): ``cost_usd`` is null, not the tokens of some model nor zero."""
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, _config(fake))
    run = run_ketch(["-p", "hi", "-m", COMPOUND, "--web-search", "--output-format", "json"], tmp_path, env=ENV)
    assert run.code == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["cost_usd"] is None and out["result"] == SEARCHED.text


def test_unreadable_tool_arguments_never_run(tmp_path, fake_provider):
    fake = fake_provider([Turn(tool_calls=[ToolCall("read_file", {}, raw_args='{"path": 1e999}')]),
                          Turn(text="sorry")])
    write_project_config(tmp_path, _config(fake))
    _ketch(tmp_path, "read", GPT_OSS, "--yolo")
    replayed = fake.model_requests[1].body["messages"]
    call = next(m for m in replayed if m.get("tool_calls"))["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"unreadable_arguments": '{"path": 1e999}'}


def test_a_stream_cut_before_its_end_is_an_error(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="half an answer that goes on", end_early=True)])
    write_project_config(tmp_path, _config(fake))
    events, run = _ketch(tmp_path, "hi", GPT_OSS, code=1)
    assert any(e["type"] == "error" for e in events), events
    assert not any(e["type"] == "turn_finished" and e.get("reason") == "done" for e in events)


@pytest.mark.parametrize(
    ("status", "needle"),
    [(401, "rejected the API key"), (429, "rate limiting"), (500, "HTTP 500")],
)
def test_provider_http_errors_are_one_line_without_the_key(tmp_path, fake_provider, status, needle):
    secret = "gsk_secret_abcdef0123456789"
    fake = fake_provider([Turn(status=status, error_body={"error": {"message": f"bad key {secret}"}})])
    write_project_config(tmp_path, _config(fake))
    run = run_ketch(["-p", "hi", "-m", GPT_OSS], tmp_path, env={"GROQ_API_KEY": secret})
    assert run.code == 1
    assert needle in one_line_error(run.stderr)
    assert secret not in run.stderr + run.stdout
    assert fake.model_requests[0].headers["authorization"] == f"Bearer {secret}"


@pytest.mark.parametrize("kind", ["truncate", "malformed"])
def test_a_broken_stream_is_a_provider_error(tmp_path, fake_provider, kind):
    fake = fake_provider([Turn(text="partial answer that never ends", **{kind: True})])
    write_project_config(tmp_path, _config(fake))
    run = run_ketch(["-p", "hi", "-m", GPT_OSS], tmp_path, env=ENV)
    assert run.code == 1, (run.stdout, run.stderr)
    one_line_error(run.stderr)


@pytest.mark.parametrize("yolo", [True, False])
def test_a_write_lands_only_when_allowed_and_stream_json_has_the_documented_types(tmp_path, fake_provider, yolo):
    from ketch.protocol import events as ev

    fake = fake_provider([Turn(tool_calls=[ToolCall("write_file", {"path": "hello.txt", "content": "hi\n"})]),
                          Turn(text="Wrote the file.")])
    write_project_config(tmp_path, _config(fake))
    lines, _ = _ketch(tmp_path, "create hello.txt", GPT_OSS, *(["--yolo"] if yolo else []))
    assert (tmp_path / "hello.txt").exists() is yolo
    [(_, content)] = tool_results(fake.model_requests[1])
    assert ("hello.txt" in content) if yolo else ("needs the user's approval" in content)
    types = [line["type"] for line in lines]
    assert types[0] == "turn_started" and types[-1] == "turn_finished" and set(types) <= set(ev.EVENT_TYPES)
    assert {"tool_call_started", "tool_call_finished", "text_delta", "usage"} <= set(types)


# ------------------------------------------------------------------------------ table, capability, imports


@pytest.mark.parametrize(
    ("base_url", "model", "protocol"),
    [
        (None, "groq/compound", "groq-compound"),
        ("https://api.groq.com/openai/v1", "groq/compound-mini", "groq-compound"),
        ("https://api.groq.com/openai/v1", "openai/gpt-oss-120b", None),
        ("https://api.groq.com/openai/v1", "llama-3.3-70b-versatile", None),
        ("https://proxy.example/v1", "groq/compound", None),  # not Groq's host: no rule, no search
    ],
)
def test_capability_follows_the_model(base_url, model, protocol):
    from ketch.config.settings import Config, resolve_connection
    from ketch.websearch.wiring import connection_capability

    cfg: dict = {"preset": "groq"} | ({"base_url": base_url} if base_url else {})
    conn = resolve_connection(Config.model_validate({"connections": {"groq": cfg}}), f"groq:{model}", environ=ENV)
    assert connection_capability(conn).protocol == protocol


def test_metadata_cannot_give_a_non_compound_groq_model_compound_search():
    from ketch.websearch.capability import resolve_capability

    declared = resolve_capability("groq", "groq", "openai-chat", "https://api.groq.com/openai/v1",
                                  "openai/gpt-oss-120b", {"capabilities": {"web_search": True}})
    assert not declared.supported


def test_models_capabilities_shows_the_groq_rows(tmp_path):
    run = run_ketch(["models", "--capabilities"], tmp_path)
    assert run.code == 0, run.stderr
    rows = {line.split("  ")[0].strip(): line for line in run.stdout.splitlines()}
    assert "groq-compound" in rows["Groq compound"] and "hosted search" in rows["Groq compound"]
    assert "no hosted search" in rows["Groq"] and "browser_search" in rows["Groq"]


def test_version_and_help_do_not_import_the_groq_sdk():
    code = ("import sys; from ketch.frontends.cli import main\n"
            "for argv in (['--version'], ['--help']):\n"
            "    try: main(argv)\n"
            "    except SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'groq' or 'models.groq' in m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr


def test_a_fast_groq_stream_reaches_the_sdk_merged(fake_provider):
    """The text-merging hook sits under the Groq SDK's httpx client too: 200 tokens 2 ms apart come
    through as far fewer text events, the text unchanged."""
    from pydantic_ai.messages import ModelRequest, PartDeltaEvent, PartStartEvent, TextPart, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters

    from ketch.providers.models import build_model

    pieces = [f"w{i} " for i in range(200)]
    fake = fake_provider([Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.002)])
    model = build_model(_conn(fake, GPT_OSS))

    async def events() -> list[Any]:
        async with model.request_stream([ModelRequest(parts=[UserPromptPart("q")])], None,
                                        ModelRequestParameters()) as stream:
            return [e async for e in stream]

    got = asyncio.run(events())
    texts = [e for e in got if isinstance(e, PartDeltaEvent) or (isinstance(e, PartStartEvent) and isinstance(e.part, TextPart))]
    assert len(texts) < len(pieces) / 4, f"{len(texts)} events for {len(pieces)} tokens"


# ------------------------------------------------------------------------------ the interactive app


async def test_the_app_runs_compound_with_its_notice_and_refuses_switching_to_it(tmp_path, fake_provider, monkeypatch):
    from test_interactive import running

    monkeypatch.setenv("GROQ_API_KEY", "gk")
    fake = fake_provider([SEARCHED, Turn(text="from gpt-oss")])
    write_project_config(tmp_path, _config(fake, "[web_search]\nenabled = true\n"))
    async with running(tmp_path, "-m", COMPOUND) as (h, _):
        await h.type("what is ketch?\r")
        await h.wait_text(SEARCHED.text)
        await h.idle()
        shown = " ".join(line.strip() for line in h.sink.all_lines())
        assert "takes no function tools" in shown, shown
    async with running(tmp_path, "-m", GPT_OSS) as (h, _):
        await h.idle()
        await h.type(f"/model {COMPOUND}\r")
        await h.wait_text("/model failed: groq:groq/compound is a Groq compound system")
        await h.idle()
        await h.type("hello\r")
        await h.wait_text("from gpt-oss")
    assert [r.body["model"] for r in fake.model_requests] == ["groq/compound", "openai/gpt-oss-120b"]
    assert "tools" not in fake.model_requests[0].body and fake.model_requests[1].body["tools"]
