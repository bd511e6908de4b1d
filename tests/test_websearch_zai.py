"""Z.AI's chat ``web_search`` tool as ketch's hosted search, end to end against the fake.

Assertions are on the Chat Completions JSON the fake received (``fake_zai`` speaks Z.AI's tool
and its top-level ``web_search`` rows) and on the events ``ketch -p --output-format stream-json``
printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_zai import search_tool
from fakeprovider import REMINDER_OPEN, delegating, NativeSearch, Turn, instructions, tool_results, user_texts
from kettle import run_ketch, search_connection_config, stream_json_events, write_project_config

SOURCES = [
    {"title": "Ketch docs", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."},
    {"title": "Release notes", "url": "https://example.org/notes", "snippet": "Version 1."},
]
SEARCHED = Turn(text="Ketch is a terminal agent [ref_1].", native_search=NativeSearch("what is ketch", SOURCES))
MODEL = "zai:glm-4.7"


def _config(fake: Any, *, metadata: str = "web_search = true", search: str = "enabled = true", extra: str = "") -> str:
    return search_connection_config("zai", fake.base_url, MODEL, metadata=metadata, search=search, extra=extra)


def _ketch(tmp_path: Path, prompt: str, *flags: str) -> list[dict]:
    return stream_json_events(tmp_path, prompt, MODEL, {"ZAI_API_KEY": "zk"}, *flags)


def _any_search(body: dict) -> bool:
    return "web_search" in json.dumps(body.get("tools") or []) or "web_search_options" in body


def test_the_chat_tool_goes_on_the_wire_and_its_rows_become_source_rows(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED, Turn(text="Yes, still.")])
    write_project_config(tmp_path, _config(fake))

    first = _ketch(tmp_path, "what is ketch?", "--web-search")
    _ketch(tmp_path, "are you sure?", "--web-search", "--continue")

    sent = [r.body for r in fake.model_requests]
    assert all(r.wire == "chat" and r.headers["authorization"] == "Bearer zk" for r in fake.model_requests)
    zai_tools = [t for t in sent[0]["tools"] if t["type"] == "web_search"]
    assert zai_tools == [{"type": "web_search",
                          "web_search": {"enable": True, "search_engine": "search_pro_jina", "search_result": True}}]
    assert all(t["type"] == "function" for t in sent[0]["tools"] if t not in zai_tools)
    assert "web_search" not in [t.get("function", {}).get("name") for t in sent[0]["tools"]]  # no client tool too
    assert "web_search_options" not in sent[0]  # never OpenAI's field on Z.AI
    assert "web_search" in instructions(fake.model_requests[0])

    results = [e for e in first if e["type"] == "web_search_result"]
    assert [r["sources"] for r in results] == [[dict(s) for s in SOURCES]]
    assert results[0]["query"] == ""  # Z.AI does not report the query it ran; nothing is invented
    assert next(e for e in first if e["type"] == "turn_finished")["text"] == SEARCHED.text

    # Turn two: Z.AI takes no search parts back; its own shape is the assistant's answer text,
    # never a tool call or a tool message for the hosted search. The tool goes out again.
    assert search_tool(sent[1]) == zai_tools[0]["web_search"]
    messages = [m for m in sent[1]["messages"]  # ketch's state reminder is its own user message, not a turn
                if m["role"] != "system" and not str(m.get("content")).startswith(REMINDER_OPEN)]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == SEARCHED.text and not messages[1].get("tool_calls")
    assert not tool_results(fake.model_requests[1])
    assert user_texts(fake.model_requests[1])[-1] == "are you sure?"


def test_a_non_streamed_answer_reports_the_same_rows(tmp_path, fake_provider):
    """A connection whose streams were refused gets whole completions: the rows sit at the top of it."""
    from ketch.config.settings import Config, resolve_connection
    from ketch.providers.models import build_model

    fake = fake_provider([SEARCHED])
    config = Config.model_validate({"connections": {"zai": {"preset": "zai", "base_url": fake.base_url,
                                                            "max_retries": 0}}})
    conn = resolve_connection(config, MODEL, environ={"ZAI_API_KEY": "zk"})
    model = build_model(conn)

    import asyncio

    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.native_tools import WebSearchTool

    from ketch.protocol.search_rows import normalize_native_result

    params = ModelRequestParameters(native_tools=[WebSearchTool()])
    response = asyncio.run(model.request([ModelRequest(parts=[UserPromptPart("q")])], None, params))
    call, result, text = response.parts
    assert (call.part_kind, result.part_kind, text.content) == ("builtin-tool-call", "builtin-tool-return", SEARCHED.text)
    assert normalize_native_result(result, call=call)["sources"] == SOURCES
    assert result.content[0]["link"] == SOURCES[0]["url"]  # Z.AI's rows kept as they came
    assert fake.model_requests[0].body["stream"] is False


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
def test_no_search_tool_is_sent(tmp_path, fake_provider, config_kwargs, flags):
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, _config(fake, **config_kwargs))
    events = _ketch(tmp_path, "hi", *flags)
    body = fake.model_requests[0].body
    assert not _any_search(body)
    assert "web_search" not in instructions(fake.model_requests[0])
    assert not [e for e in events if e["type"] == "web_search_result"]


def test_privacy_in_config_removes_the_tool(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, "privacy = true\n" + _config(fake))
    _ketch(tmp_path, "hi", "--web-search")
    assert not _any_search(fake.model_requests[0].body)


@pytest.mark.parametrize(("kind", "searches"), [("explore", False), ("web_research", True)])
def test_a_child_gets_the_tool_only_when_its_tool_list_has_search(tmp_path, fake_provider, kind, searches):
    script = delegating(kind)

    fake = fake_provider([script] * 3)
    write_project_config(tmp_path, _config(fake))
    events = _ketch(tmp_path, "research x", "--web-search", "--yolo")
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == "parent done"
    child = next(r.body for r in fake.model_requests if any("CHILD-TASK" in t for t in user_texts(r)))
    assert search_tool(fake.model_requests[0].body) is not None
    assert (search_tool(child) is not None) is searches


async def test_titles_and_commit_messages_on_the_session_model_send_no_search(tmp_path, fake_provider, monkeypatch):
    """The auxiliary helpers run on the session's own Z.AI model (the one that can search) and
    send no ``web_search`` tool, while the session's turn does."""
    from argparse import Namespace

    from ketch.core.commit import propose_commit_message
    from ketch.frontends.assemble import build_session
    from ketch.state.titles import generate_title

    fake = fake_provider([SEARCHED, Turn(text="A title"), Turn(text="Add a file")])
    write_project_config(tmp_path, _config(fake))
    monkeypatch.setenv("ZAI_API_KEY", "zk")
    session = await build_session(Namespace(model=MODEL, cwd=str(tmp_path), web_search=False), interactive=True)
    try:
        async for _ in session.run_turn("hello"):
            pass
        await generate_title(session.model, "hello")
        await propose_commit_message(session.model, "diff --git a/x b/x\n+hello\n")
    finally:
        await session.aclose()
    root, title, commit = (r.body for r in fake.model_requests)
    assert search_tool(root) is not None
    assert not _any_search(title) and not _any_search(commit)


@pytest.mark.parametrize(
    ("base_url", "model", "protocol"),
    [
        ("https://api.z.ai/api/paas/v4", "glm-4.7", "zai-chat"),
        ("https://api.z.ai/api/paas/v4/", "glm-5.1", "zai-chat"),
        ("https://open.bigmodel.cn/api/paas/v4", "glm-4.5-air", "zai-chat"),
        (None, "glm-4.6", "zai-chat"),  # the preset's own base URL
        # The GLM Coding Plan endpoint: its search is a separate MCP server, not the chat tool.
        ("https://api.z.ai/api/coding/paas/v4", "glm-4.7", None),
        ("https://open.bigmodel.cn/api/coding/paas/v4", "glm-4.7", None),
        # Models outside the chat tool's list: vision models, older GLM-4.
        ("https://api.z.ai/api/paas/v4", "glm-4.6v", None),
        ("https://api.z.ai/api/paas/v4", "glm-4-plus", None),
    ],
)
def test_capability_follows_the_exact_endpoint_and_model(base_url, model, protocol):
    from ketch.config.settings import Config, resolve_connection
    from ketch.websearch.wiring import connection_capability

    cfg: dict = {"preset": "zai"} | ({"base_url": base_url} if base_url else {})
    conn = resolve_connection(Config.model_validate({"connections": {"zai": cfg}}), f"zai:{model}",
                              environ={"ZAI_API_KEY": "zk"})
    capability = connection_capability(conn)
    assert capability.protocol == protocol, capability.reason
    assert capability.supported is (protocol is not None)


def test_other_wires_and_services_on_z_ai_hosts_get_no_chat_tool():
    from ketch.websearch.capability import resolve_capability

    # Z.AI's Anthropic-compatible endpoint is another product; the chat tool is not its search.
    assert not resolve_capability("z", "zai", "anthropic-messages", "https://api.z.ai/api/anthropic", "glm-4.7").supported
    # Metadata on a generic Chat Completions connection proves nothing about Z.AI's tool.
    declared = resolve_capability("c", "openai-compatible", "openai-chat", "http://127.0.0.1:9/v1", "glm-4.7",
                                  {"capabilities": {"web_search": True}})
    assert not declared.supported


def test_models_capabilities_shows_the_z_ai_rows(tmp_path):
    run = run_ketch(["models", "--capabilities"], tmp_path)
    assert run.code == 0, run.stderr
    rows = {line.split("  ")[0].strip(): line for line in run.stdout.splitlines()}
    assert "zai-chat" in rows["Z.AI / GLM"] and "hosted search" in rows["Z.AI / GLM"]
    assert "no hosted search" in rows["Z.AI GLM Coding Plan"]


# ----------------------------------------------------------------------------- Mistral (Groq: test_websearch_groq)


@pytest.mark.parametrize(("think", "sent"), [("high", "enabled"), ("off", "disabled")])
def test_think_levels_reach_glm_as_its_thinking_field(tmp_path, fake_provider, think, sent):
    """GLM-4.5+ thinks unless told not to: ``off`` sends ``thinking.type: disabled``, not silence."""
    fake = fake_provider([Turn(text="ok")])
    write_project_config(tmp_path, _config(fake))
    run = run_ketch(["-p", "hi", "-m", MODEL, "--think", think], tmp_path, env={"ZAI_API_KEY": "zk"})
    assert run.code == 0, run.stderr
    body = fake.model_requests[0].body
    assert body["thinking"]["type"] == sent
    assert "reasoning_effort" not in body  # GLM-4.7 takes no effort level


def test_hostile_web_search_fields_give_no_invented_rows():
    from ketch.providers.zai import search_parts
    from ketch.protocol.search_rows import normalize_native_result

    assert search_parts("not a list", "c") is None
    assert search_parts([1, "x", None], "c") is None
    call, result = search_parts([{"title": "t", "link": 7}, {"link": ""}, "junk",
                                 {"title": "ok", "link": "https://ok.example", "content": ["not text"]},
                                 {"title": "dup", "link": "https://ok.example"}], "c")
    assert normalize_native_result(result, call=call)["sources"] == [
        {"title": "ok", "url": "https://ok.example", "snippet": ""}]
