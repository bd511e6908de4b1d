"""Alibaba Model Studio's Responses ``web_search``: a row of the capability table, no adapter of its own.

Model Studio's OpenAI-compatible Responses endpoint takes the OpenAI tool shape
(``tools: [{"type": "web_search"}]``) for the Qwen 3.5 models, so a connection on its
Responses base URL runs through the existing Responses adapter. The decision is taken on the
real Model Studio host; the requests then go to the fake's Responses endpoint, and the
assertions are on the JSON it received and on the normalized rows.
"""

from __future__ import annotations

import dataclasses

import pytest
from fakeprovider import NativeSearch, Turn
from pydantic_ai import Agent

from ketch.config.settings import Config, ConnectionConfig, ModelMeta, resolve_connection
from ketch.websearch.capability import resolve_capability
from ketch.websearch.wiring import NativeSearchTracker, child_search_route, session_search

INTL = "https://dashscope-intl.aliyuncs.com/api/v2/apps/protocols/compatible-mode/v1"
SOURCES = [
    {"title": "Qwen", "url": "https://qwen.example.org/", "snippet": "Models."},
    {"title": "Model Studio", "url": "https://modelstudio.example.org/docs", "snippet": "Docs."},
]


def _config(wire: str = "openai-responses", **top) -> Config:
    conn = ConnectionConfig(preset="openai-compatible", base_url=INTL, wire=wire, api_key_env="DASHSCOPE_API_KEY")
    return Config(connections={"qwen": conn}, web_search={"enabled": True}, **top)


@pytest.mark.parametrize("model", ["qwen3.5-plus", "qwen3.5-flash", "qwen3.5-plus-2026-02-15"])
def test_the_row_covers_the_qwen_models_the_spec_names_over_responses(model):
    for host in (INTL, INTL.replace("dashscope-intl", "dashscope")):
        cap = resolve_capability("qwen", "openai-compatible", "openai-responses", host, model)
        assert (cap.supported, cap.protocol) == (True, "openai-responses")


def test_the_row_says_why_not_elsewhere():
    chat = resolve_capability("qwen", "openai-compatible", "openai-chat", INTL, "qwen3.5-plus")
    assert not chat.supported and "openai-responses" in chat.reason  # its Chat API uses enable_search instead
    other = resolve_capability("qwen", "openai-compatible", "openai-responses", INTL, "qwen3-coder-plus")
    assert not other.supported and "Qwen 3.5" in other.reason


async def test_web_search_goes_on_the_responses_wire_and_the_answer_is_replayed_as_a_message(fake_provider):
    from ketch.providers.models import build_model

    fake = fake_provider([Turn(text="Qwen answers.", native_search=NativeSearch("qwen news", SOURCES)),
                          Turn(text="Still true.")])
    config = _config()
    conn = resolve_connection(config, "qwen:qwen3.5-plus", environ={"DASHSCOPE_API_KEY": "sk-ds"})
    search = session_search(config, conn, interactive=False, flag=True, environ={})
    assert (search.route.protocol, search.wire) == ("openai-responses", "openai-responses")

    model = build_model(dataclasses.replace(conn, base_url=fake.base_url), search.wire)
    agent = Agent(model, capabilities=search.route.capabilities())
    tracker, rows = NativeSearchTracker(), []
    async with agent.run_stream_events("qwen news?") as stream:
        async for item in stream:
            if (found := tracker.observe(item)) is not None:
                rows.append(found)
            last = item
    await agent.run("sure?", message_history=last.result.all_messages())

    first, second = (r.body for r in fake.model_requests)
    assert fake.model_requests[0].headers["authorization"] == "Bearer sk-ds"
    assert first["model"] == "qwen3.5-plus"
    assert [t for t in first["tools"] if t["type"] != "function"] == [{"type": "web_search", "search_context_size": "medium"}]
    # Responses rows carry URLs only: no title or snippet is made up.
    assert [(r.query, r.sources) for r in rows] == [("qwen news", [{"title": "", "url": s["url"], "snippet": ""} for s in SOURCES])]
    # Turn two: the Responses input Model Studio documents (messages in Chat format): the answer goes
    # back as the assistant's message. The search item is not referenced by id (the SDK sends item
    # ids only to endpoints whose profile says they resolve them, which a compatible endpoint's does
    # not), and nothing is sent as a client tool's output.
    assert second["input"] == [{"role": "user", "content": "qwen news?"},
                               {"role": "assistant", "content": "Qwen answers."},
                               {"role": "user", "content": "sure?"}]
    assert [t for t in second["tools"] if t["type"] != "function"] == [{"type": "web_search", "search_context_size": "medium"}]
    assert "previous_response_id" not in second


async def test_privacy_and_a_child_without_the_tool_send_no_search(fake_provider):
    from ketch.providers.models import build_model

    environ = {"DASHSCOPE_API_KEY": "sk-ds"}
    fake = fake_provider([Turn(text="ok")] * 3)

    async def sent_tools(conn, route) -> list[dict]:
        model = build_model(dataclasses.replace(conn, base_url=fake.base_url), "openai-responses")
        await Agent(model, capabilities=route.capabilities()).run("hi")
        return fake.model_requests[-1].body.get("tools") or []

    private = _config(privacy=True)
    conn = resolve_connection(private, "qwen:qwen3.5-plus", environ=environ)
    assert await sent_tools(conn, session_search(private, conn, interactive=False, flag=True, environ={}).route) == []

    config = _config()
    conn = resolve_connection(config, "qwen:qwen3.5-plus", environ=environ)
    parent = session_search(config, conn, interactive=False, flag=True, environ={})
    assert await sent_tools(conn, child_search_route(parent, ["read_file", "grep"])) == []
    assert await sent_tools(conn, child_search_route(parent, ["read_file", "web_search"])) == [
        {"type": "web_search", "search_context_size": "medium"}]


def test_metadata_can_still_turn_it_off():
    config = _config(models={"qwen:qwen3.5-plus": ModelMeta(capabilities={"web_search": False})})
    conn = resolve_connection(config, "qwen:qwen3.5-plus", environ={"DASHSCOPE_API_KEY": "sk-ds"})
    assert session_search(config, conn, interactive=False, flag=True, environ={}).route.has_search is False
