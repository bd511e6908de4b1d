"""Hosted web search routing (ketch.websearch.capability): capability, route, wire shape and normalization.

The wire tests run a real pydantic-ai model against the fake provider on 127.0.0.1 and assert on
the recorded request; the parts handed to ``normalize_native_result`` are the ones pydantic-ai
built from the provider's stream.
"""

from __future__ import annotations

from tavilystub import tavily_stub  # noqa: F401  (fixture)

import pytest
from fakeprovider import NativeSearch, Turn
from pydantic_ai import Agent
from pydantic_ai.messages import NativeToolCallPart, NativeToolReturnPart
from pydantic_ai.native_tools import WebSearchTool

from ketch.websearch.capability import (
    CAPABILITY_RULES,
    Capability,
    SearchRoute,
    WebSearchSettings,
    capability_table,
    child_kinds_available,
    model_profile_overrides,
    resolve_capability,
    route_web_search,
)

OPENAI = "https://api.openai.com/v1"
ANTHROPIC = "https://api.anthropic.com"
DEEPSEEK = "https://api.deepseek.com"
DEEPSEEK_CC = "https://api.deepseek.com/anthropic"


# ----------------------------------------------------------------------------- capability

@pytest.mark.parametrize(
    ("preset", "wire", "base_url", "model", "metadata", "expected"),
    [
        # OpenAI: GPT-5 families on the official host over Responses only.
        ("openai", "responses", OPENAI, "gpt-5.2", None, ("openai-responses", False)),
        ("openai", "responses", OPENAI, "gpt-5-mini", None, ("openai-responses", False)),
        ("openai", "responses", OPENAI, "gpt-4.1", None, None),
        ("openai", "chat", OPENAI, "gpt-5.2", None, None),
        ("openai", "responses", "https://relay.example.com/v1", "gpt-5.2", None, None),
        # DeepSeek V4 flash/pro: the wire decides; an ambiguous connection uses Responses.
        ("deepseek", "chat", DEEPSEEK, "deepseek-v4-flash", None, ("openai-responses", False)),
        ("deepseek", "responses", DEEPSEEK, "deepseek-v4-pro", None, ("openai-responses", False)),
        ("deepseek", "anthropic", DEEPSEEK_CC, "deepseek-v4-flash", None, ("anthropic-messages", False)),
        ("deepseek", "chat", DEEPSEEK, "deepseek-chat", None, None),
        # xAI Grok over Responses.
        ("xai", "responses", "https://api.x.ai/v1", "grok-4.5", None, ("openai-responses", False)),
        ("xai", "chat", "https://api.x.ai/v1", "grok-4.5", None, None),
        # Anthropic Claude on the official host; a compatible wire elsewhere proves nothing.
        ("anthropic", "anthropic", ANTHROPIC, "claude-sonnet-4-6", None, ("anthropic-messages", False)),
        ("anthropic", "anthropic", ANTHROPIC, "claude-opus-4-7", None, ("anthropic-messages", False)),
        ("anthropic", "anthropic", ANTHROPIC, "claude-3-haiku-20240307", None, None),
        ("custom", "anthropic", "https://gateway.example.com", "claude-sonnet-4-6", None, None),
        # MiniMax on its Anthropic-compatible wire.
        ("minimax", "anthropic", "https://api.minimax.io/anthropic", "MiniMax-M2.7", None,
         ("anthropic-messages", False)),
        ("minimax", "chat", "https://api.minimax.io/v1", "MiniMax-M2.7", None, None),
        # Documented gaps stay unsupported.
        ("moonshot", "chat", "https://api.moonshot.ai/v1", "kimi-k2", None, None),
        ("together", "chat", "https://api.together.xyz/v1", "any-model", None, None),
        # Custom Responses relays only with explicit metadata; metadata wins either way.
        ("custom", "responses", "https://relay.example.com/v1", "relay-model",
         {"capabilities": {"web_search": True}}, ("openai-responses", False)),
        ("custom", "chat", "https://relay.example.com/v1", "relay-model",
         {"capabilities": {"web_search": True}}, None),
        ("openai", "responses", OPENAI, "gpt-5.2", {"capabilities": {"web_search": False}}, None),
        # Dynamic filtering (web_search_20260209) only by metadata opt-in, only on Anthropic.
        ("anthropic", "anthropic", ANTHROPIC, "claude-sonnet-4-6",
         {"capabilities": {"web_search": True, "web_search_dynamic_filtering": True}},
         ("anthropic-messages", True)),
        ("openai", "responses", OPENAI, "gpt-5.2",
         {"capabilities": {"web_search": True, "web_search_dynamic_filtering": True}},
         ("openai-responses", False)),
    ],
)
def test_capability_follows_the_narrow_provider_matrix(preset, wire, base_url, model, metadata, expected):
    cap = resolve_capability("conn", preset, wire, base_url, model, metadata)
    if expected is None:
        assert (cap.supported, cap.protocol, cap.dynamic_filtering) == (False, None, False)
        assert cap.reason
    else:
        assert (cap.supported, cap.protocol, cap.dynamic_filtering) == (True, *expected)


def test_preset_alone_decides_only_when_the_connection_has_no_base_url():
    assert resolve_capability("o", "openai", "responses", None, "gpt-5").protocol == "openai-responses"
    assert not resolve_capability("o", "openai", "responses", "http://127.0.0.1:9/v1", "gpt-5").supported


def test_explicit_protocol_setting_picks_among_a_dual_wire_providers_protocols_but_never_overrides_the_wire():
    ambiguous = resolve_capability("ds", "deepseek", "chat", DEEPSEEK, "deepseek-v4-flash", protocol="anthropic")
    assert ambiguous.protocol == "anthropic-messages"
    conflict = resolve_capability("ds", "deepseek", "responses", DEEPSEEK, "deepseek-v4-flash", protocol="anthropic")
    assert conflict == Capability(
        False,
        reason="web search protocol 'anthropic' does not match the connection's wire (openai-responses); "
        "hosted search never switches protocol on its own",
    )


def test_unknown_connection_reason_tells_how_to_declare_support():
    cap = resolve_capability("mine", "custom", "chat", "https://llm.internal/v1", "my-model")
    assert cap == Capability(
        False,
        reason="no hosted search is known for mine; set capabilities.web_search in the model metadata "
        "if the endpoint offers it",
    )


def test_capability_table_renders_every_rule_once():
    table = capability_table()
    assert len(table) == len(CAPABILITY_RULES)
    assert [row["provider"] for row in table] == [rule.provider for rule in CAPABILITY_RULES]
    assert table[0] == {
        "provider": "OpenAI API",
        "models": "GPT-5 families",
        "protocols": "openai-responses",
        "state": "hosted search",
        "hosts": "api.openai.com",
        "note": "official connection only",
    }
    moonshot = next(row for row in table if row["provider"] == "Moonshot")
    assert (moonshot["state"], moonshot["protocols"]) == ("no hosted search", "-")


# ----------------------------------------------------------------------------- routing

RESPONSES_CAP = Capability(True, "openai-responses", reason="ok")
UNSUPPORTED_CAP = Capability(False, reason="not offered")
ON = WebSearchSettings(enabled=True, source="model")


def _kind(route: SearchRoute) -> str:
    assert not (route.native_tool is not None and route.client_tool is not None), "never both"
    if route.native_tool is not None:
        assert isinstance(route.native_tool, WebSearchTool)
        return "native"
    if route.client_tool is not None:
        assert (route.client_tool.name, route.client_tool.kind, route.client_tool.key_arg) == (
            "web_search", "network", "query")
        return "tavily"
    return "none"


@pytest.mark.parametrize(
    ("settings", "cap", "kwargs", "expected"),
    [
        (ON, RESPONSES_CAP, {"surface": "tui"}, "native"),
        (WebSearchSettings(enabled=False), RESPONSES_CAP, {"surface": "tui"}, "none"),
        # privacy removes both kinds
        (WebSearchSettings(privacy=True), RESPONSES_CAP, {"surface": "tui"}, "none"),
        (WebSearchSettings(source="tavily", privacy=True), RESPONSES_CAP, {"surface": "tui"}, "none"),
        # unsupported pair with source=model: nothing, and no Tavily fallback
        (ON, UNSUPPORTED_CAP, {"surface": "tui"}, "none"),
        # source=tavily: only the client tool, even where hosted search exists
        (WebSearchSettings(source="tavily"), RESPONSES_CAP, {"surface": "tui"}, "tavily"),
        (WebSearchSettings(source="tavily"), UNSUPPORTED_CAP, {"surface": "tui"}, "tavily"),
        # auxiliary calls never search
        (ON, RESPONSES_CAP, {"surface": "auxiliary"}, "none"),
        (WebSearchSettings(source="tavily"), RESPONSES_CAP, {"surface": "auxiliary", "headless_opt_in": True}, "none"),
        # headless only with opt-in
        (ON, RESPONSES_CAP, {"surface": "headless"}, "none"),
        (ON, RESPONSES_CAP, {"surface": "headless", "headless_opt_in": True}, "native"),
        (WebSearchSettings(source="tavily"), RESPONSES_CAP, {"surface": "headless"}, "none"),
        # a child's explicit tool list is a ceiling
        (ON, RESPONSES_CAP, {"surface": "child", "child_tool_ceiling": {"read_file", "grep"}}, "none"),
        (ON, RESPONSES_CAP, {"surface": "child", "child_tool_ceiling": {"read_file", "web_search"}}, "native"),
        (ON, RESPONSES_CAP, {"surface": "child", "child_tool_ceiling": set()}, "none"),
        (ON, RESPONSES_CAP, {"surface": "child"}, "native"),
        (ON, RESPONSES_CAP, {"surface": "child", "parent_surface": "headless"}, "none"),
        (ON, RESPONSES_CAP, {"surface": "child", "parent_surface": "headless", "headless_opt_in": True}, "native"),
        (ON, UNSUPPORTED_CAP, {"surface": "child", "child_tool_ceiling": {"web_search"}}, "none"),
    ],
)
def test_route_matrix(settings, cap, kwargs, expected):
    route = route_web_search(settings, cap, **kwargs)
    assert _kind(route) == expected
    assert route.reason
    assert child_kinds_available(route) == (expected != "none")


def test_unsupported_pair_reason_carries_the_capability_reason():
    route = route_web_search(ON, UNSUPPORTED_CAP, surface="tui")
    assert route == SearchRoute(reason="no hosted search: not offered")
    assert route.capabilities() == []


def test_max_uses_goes_only_where_the_protocol_enforces_it():
    settings = WebSearchSettings(max_uses=3)
    anthropic = route_web_search(settings, Capability(True, "anthropic-messages"), surface="tui")
    responses = route_web_search(settings, RESPONSES_CAP, surface="tui")
    assert anthropic.native_tool == WebSearchTool(max_uses=3)
    assert responses.native_tool == WebSearchTool()


def test_profile_overrides_pin_the_anthropic_tool_version():
    assert model_profile_overrides(Capability(True, "anthropic-messages")) == {
        "anthropic_supports_dynamic_filtering": False
    }
    assert model_profile_overrides(Capability(True, "anthropic-messages", dynamic_filtering=True)) == {
        "anthropic_supports_dynamic_filtering": True
    }
    assert model_profile_overrides(RESPONSES_CAP) == {}


# ----------------------------------------------------------------------------- wire and normalization

SOURCES = [
    {"title": "Ketch docs", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."},
    {"title": "Release notes", "url": "https://example.org/notes", "snippet": "Version 1."},
]


def _search_parts(messages) -> tuple[NativeToolCallPart, NativeToolReturnPart]:
    parts = [p for m in messages for p in m.parts]
    calls = [p for p in parts if isinstance(p, NativeToolCallPart)]
    returns = [p for p in parts if isinstance(p, NativeToolReturnPart)]
    assert len(calls) == len(returns) == 1
    return calls[0], returns[0]


def _route_for(preset, wire, base_url, model, metadata=None) -> tuple[SearchRoute, Capability]:
    cap = resolve_capability("test", preset, wire, base_url, model, metadata)
    return route_web_search(WebSearchSettings(), cap, surface="tui"), cap


async def test_responses_route_sends_web_search_and_normalizes_url_only_sources(fake_provider):
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from ketch.websearch.capability import normalize_native_result

    fake = fake_provider([
        Turn(text="Ketch is a terminal agent.", native_search=NativeSearch("what is ketch", SOURCES)),
        Turn(text="Still true."),
    ])
    route, _ = _route_for("openai", "responses", None, "gpt-5.2")
    model = OpenAIResponsesModel("gpt-5.2", provider=OpenAIProvider(base_url=fake.base_url, api_key="k"))
    agent = Agent(model, capabilities=route.capabilities())
    first = await agent.run("what is ketch?")
    await agent.run("sure?", message_history=first.all_messages())

    sent = [r.body for r in fake.model_requests]
    assert sent[0]["tools"] == [{"type": "web_search", "search_context_size": "medium"}]
    call, result = _search_parts(first.all_messages())
    normalized = normalize_native_result(result, call=call)
    # Responses rows carry URLs only: titles and snippets stay empty rather than invented.
    assert normalized == {
        "call_id": call.tool_call_id,
        "query": "what is ketch",
        "sources": [{"title": "", "url": s["url"], "snippet": ""} for s in SOURCES],
    }
    assert normalize_native_result(call) == {"call_id": call.tool_call_id, "query": "what is ketch", "sources": []}
    # Replay is native: the search item goes back by its id, never as a function_call_output.
    replayed = [item for item in sent[1]["input"] if item.get("type") == "web_search_call"]
    assert [item["id"] for item in replayed] == [call.tool_call_id]
    assert not [item for item in sent[1]["input"] if item.get("type") == "function_call_output"]


@pytest.mark.parametrize(
    ("metadata", "tool_type"),
    [(None, "web_search_20250305"),
     ({"capabilities": {"web_search": True, "web_search_dynamic_filtering": True}}, "web_search_20260209")],
)
async def test_anthropic_route_sends_the_pinned_tool_version_and_keeps_provider_rows(
    fake_provider, metadata, tool_type
):
    from ketch.websearch.capability import normalize_native_result
    from ketch.wire.messages import AnthropicMessagesModel

    fake = fake_provider([
        Turn(text="Ketch is a terminal agent.", native_search=NativeSearch("what is ketch", SOURCES)),
        Turn(text="Still true."),
    ])
    route, cap = _route_for("anthropic", "anthropic", None, "claude-sonnet-4-6", metadata)
    model = AnthropicMessagesModel(
        "claude-sonnet-4-6",
        base_url=f"http://127.0.0.1:{fake.port}", api_key="k",
        profile=model_profile_overrides(cap),
    )
    agent = Agent(model, capabilities=route.capabilities())
    first = await agent.run("what is ketch?")
    await agent.run("sure?", message_history=first.all_messages())

    sent = [r.body for r in fake.model_requests]
    assert [t["type"] for t in sent[0]["tools"]] == [tool_type]
    call, result = _search_parts(first.all_messages())
    assert normalize_native_result(result, call=call) == {
        "call_id": call.tool_call_id,
        "query": "what is ketch",
        "sources": [{"title": s["title"], "url": s["url"], "snippet": ""} for s in SOURCES],
    }
    # Replay keeps the provider's own pair, in one assistant message, with the opaque payload.
    assistant = [m for m in sent[1]["messages"] if m["role"] == "assistant"][0]
    kinds = [block["type"] for block in assistant["content"]]
    assert kinds[:2] == ["server_tool_use", "web_search_tool_result"]
    assert assistant["content"][1]["content"][0]["encrypted_content"].startswith("enc-0-")


def test_normalize_keeps_only_rows_the_provider_supplied():
    from ketch.websearch.capability import native_search_error, normalize_native_result

    call = NativeToolCallPart(tool_name="web_search", args={"type": "search", "query": "q"}, tool_call_id="ws_1")
    empty = NativeToolReturnPart(tool_name="web_search", content={"status": "completed"}, tool_call_id="ws_1")
    assert normalize_native_result(empty, call=call) == {"call_id": "ws_1", "query": "q", "sources": []}
    failed = NativeToolReturnPart(
        tool_name="web_search",
        content={"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
        tool_call_id="srvtoolu_1",
    )
    assert normalize_native_result(failed)["sources"] == []
    assert native_search_error(failed) == "max_uses_exceeded"
    assert native_search_error(empty) == ""
    duplicated = NativeToolReturnPart(
        tool_name="web_search",
        content=[{"type": "web_search_result", "url": "https://a.example", "title": "A"},
                 {"type": "web_search_result", "url": "https://a.example", "title": "A again"},
                 {"type": "web_search_result", "title": "no url"}],
        tool_call_id="srvtoolu_2",
    )
    assert normalize_native_result(duplicated)["sources"] == [{"title": "A", "url": "https://a.example", "snippet": ""}]


# ----------------------------------------------------------------------------- Tavily client tool

TAVILY_KEY = "tvly-secret-key-0123456789"




def _tool_ctx(base_url: str, api_key: str | None = TAVILY_KEY):
    from types import SimpleNamespace

    from ketch.tools.base import ToolDeps
    from ketch.tools.web_search import TavilySettings

    events: list = []
    deps = ToolDeps(workspace=None, emit=events.append,
                    extras={"tavily": TavilySettings(api_key=api_key, base_url=base_url, timeout_s=5)})
    return SimpleNamespace(deps=deps, tool_call_id="call_7"), events


async def test_tavily_posts_the_query_and_returns_numbered_results(tavily_stub):
    from ketch.protocol.events import WebSearchResult
    from ketch.tools.web_search import web_search

    tavily_stub.body = {"query": "ketch", "results": [
        {"title": "Ketch", "url": "https://ketch.example", "content": "A terminal\n agent.", "score": 0.9},
        {"title": "", "url": "https://other.example", "content": ""},
    ]}
    ctx, events = _tool_ctx(tavily_stub.base_url + "/")
    text = await web_search(ctx, "ketch agent", max_results=3)
    assert tavily_stub.requests == [{
        "path": "/search",
        "authorization": f"Bearer {TAVILY_KEY}",
        "json": {"api_key": TAVILY_KEY, "query": "ketch agent", "max_results": 3},
    }]
    assert text == (
        "Web results for 'ketch agent':\n"
        "1. Ketch\n   https://ketch.example\n   A terminal agent.\n"
        "2. https://other.example\n   https://other.example"
    )
    assert events == [WebSearchResult(call_id="call_7", query="ketch agent", sources=[
        {"title": "Ketch", "url": "https://ketch.example", "snippet": "A terminal\n agent."},
        {"title": "", "url": "https://other.example", "snippet": ""},
    ])]


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (401, {"detail": {"error": f"Unauthorized: invalid key {TAVILY_KEY}"}},
         "Tavily rejected the API key (HTTP 401); check TAVILY_API_KEY"),
        (500, {"detail": f"upstream failed for key {TAVILY_KEY}"},
         "Tavily search failed with HTTP 500: upstream failed for key ***"),
        (429, {}, "Tavily rate limit reached (HTTP 429); try again later"),
    ],
)
async def test_tavily_errors_are_one_line_and_never_contain_the_key(tavily_stub, status, body, message):
    from pydantic_ai.exceptions import ToolFailed

    from ketch.tools.web_search import web_search

    tavily_stub.status, tavily_stub.body = status, body
    ctx, events = _tool_ctx(tavily_stub.base_url)
    with pytest.raises(ToolFailed) as failure:
        await web_search(ctx, "anything")
    assert str(failure.value) == message
    assert TAVILY_KEY not in str(failure.value)
    assert events == []


async def test_tavily_unreachable_and_missing_key(tavily_stub, monkeypatch):
    from pydantic_ai.exceptions import ToolFailed

    from ketch.tools.web_search import web_search

    base = tavily_stub.base_url
    tavily_stub.close()
    ctx, _ = _tool_ctx(base)
    with pytest.raises(ToolFailed) as unreachable:
        await web_search(ctx, "anything")
    assert str(unreachable.value) == "could not reach Tavily at 127.0.0.1 (ConnectError)"

    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    ctx, _ = _tool_ctx(base, api_key=None)
    with pytest.raises(ToolFailed) as missing:
        await web_search(ctx, "anything")
    assert "TAVILY_API_KEY" in str(missing.value)


async def test_tavily_key_falls_back_to_the_environment(tavily_stub, monkeypatch):
    from ketch.tools.web_search import web_search

    monkeypatch.setenv("TAVILY_API_KEY", "tvly-from-env-123")
    ctx, _ = _tool_ctx(tavily_stub.base_url, api_key=None)
    assert await web_search(ctx, "q") == "No web results for 'q'."
    assert tavily_stub.requests[0]["json"]["api_key"] == "tvly-from-env-123"


def test_replay_size_counts_the_opaque_payload_not_the_display_rows():
    from ketch.websearch.capability import is_native_search, normalize_native_result, replay_size

    rows = [{"type": "web_search_result", "url": f"https://e.example/{n}", "title": "t",
             "encrypted_content": "x" * 2000} for n in range(3)]
    result = NativeToolReturnPart(tool_name="web_search", content=rows, tool_call_id="srvtoolu_9")
    assert is_native_search(result)
    assert replay_size(result) > 6000
    assert len(str(normalize_native_result(result))) < 400
    assert not is_native_search(NativeToolReturnPart(tool_name="code_execution", content={}, tool_call_id="x"))


@pytest.mark.parametrize(
    ("environ", "flag", "expected"),
    [({}, False, False), ({}, True, True), ({"KETCH_WEB_SEARCH_ENABLED": "true"}, False, True),
     ({"KETCH_WEB_SEARCH_ENABLED": "0"}, False, False), ({"KETCH_WEB_SEARCH_ENABLED": "TRUE"}, False, True)],
)
def test_headless_opt_in(environ, flag, expected):
    from ketch.websearch.capability import headless_opt_in

    assert headless_opt_in(environ, flag=flag) is expected


# ----------------------------------------------------------------------------- dynamic filtering opt-in


@pytest.mark.parametrize(
    ("preset", "base_url", "model", "metadata", "dynamic"),
    [
        # The official API, a model the table marks: the config opt-in grants web_search_20260209.
        ("anthropic", ANTHROPIC, "claude-sonnet-4-6", None, True),
        ("anthropic", ANTHROPIC, "claude-opus-4-7-20260101", None, True),
        # The official API, an older model the table does not mark: the baseline stays.
        ("anthropic", ANTHROPIC, "claude-sonnet-4-5", None, False),
        ("anthropic", ANTHROPIC, "claude-3-7-sonnet", None, False),
        # Anthropic-compatible services keep 20250305 whatever the config says.
        ("minimax", "https://api.minimax.io/anthropic", "MiniMax-M2.7", None, False),
        ("deepseek", DEEPSEEK_CC, "deepseek-v4-flash", None, False),
        ("custom", "https://relay.example.com", "claude-sonnet-4-6", {"capabilities": {"web_search": True}}, False),
        # A declared gateway that keeps the anthropic preset counts as the official API.
        ("anthropic", "https://gw.example.com", "claude-sonnet-4-6", {"capabilities": {"web_search": True}}, True),
    ],
)
def test_config_opt_in_grants_dynamic_filtering_only_where_the_table_marks_it(preset, base_url, model, metadata, dynamic):
    cap = resolve_capability("conn", preset, "anthropic", base_url, model, metadata, dynamic_filtering=True)
    assert (cap.supported, cap.protocol, cap.dynamic_filtering) == (True, "anthropic-messages", dynamic)
    # Without the opt-in nothing gets the newer tool.
    off = resolve_capability("conn", preset, "anthropic", base_url, model, metadata)
    assert off.dynamic_filtering is False


def test_capability_table_marks_the_dynamic_filtering_row():
    rows = {row["provider"]: row for row in capability_table()}
    assert rows["Anthropic"]["state"] == "hosted search (+ dynamic filtering opt-in)"
    assert rows["MiniMax"]["state"] == "hosted search"
    assert rows["Google Gemini"]["state"] == "hosted search"
    # OpenRouter connections are built on the SDK's OpenRouter model, so its server-tool route is taken.
    assert rows["OpenRouter"]["state"] == "hosted search"
    assert resolve_capability("o", "openrouter", "openai-chat", None, "openai/gpt-5").protocol == "openrouter"
