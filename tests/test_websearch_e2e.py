"""Hosted web search wired through ketch, end to end against the fake provider.

Every assertion is on what crossed a boundary: the JSON the fake provider (or the local
Tavily stand-in) received, and the events ``ketch -p --output-format stream-json`` printed.
"""

from __future__ import annotations

from tavilystub import TavilyStub, tavily_stub  # noqa: F401  (fixture)

import json
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import delegating, NativeSearch, ToolCall, Turn, instructions, tool_results
from kettle import run_ketch, write_project_config

SOURCES = [
    {"title": "Ketch docs", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."},
    {"title": "Release notes", "url": "https://example.org/notes", "snippet": "Version 1."},
]
SEARCHED = Turn(text="Ketch is a terminal agent [1].", native_search=NativeSearch("what is ketch", SOURCES))

RESPONSES = "responses"
ANTHROPIC = "anthropic"
MODEL = {RESPONSES: "openai:gpt-5", ANTHROPIC: "anthropic:claude-sonnet-4-6"}
KEYS = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"}


def _config(fake: Any, *, search: str = "enabled = true", metadata: str = "web_search = true",
            openai_wire: str = "openai-responses", extra: str = "") -> str:
    """Connections to the fake on both wires; the model metadata declares hosted search."""
    return f"""
[connections.openai]
preset = "openai"
wire = "{openai_wire}"
base_url = "{fake.base_url}"

[connections.anthropic]
preset = "anthropic"
base_url = "{fake.base_url.removesuffix('/v1')}"

[models."openai:gpt-5"]
capabilities = {{ {metadata} }}

[models."anthropic:claude-sonnet-4-6"]
capabilities = {{ {metadata} }}

[web_search]
{search}
{extra}
"""


def _ketch(tmp_path: Path, wire: str, prompt: str, *flags: str, env: dict[str, str] | None = None) -> list[dict]:
    run = run_ketch(["-p", prompt, "-m", MODEL[wire], "--output-format", "stream-json", *flags],
                    tmp_path, env={**KEYS, **(env or {})})
    assert run.code == 0, run.stderr + run.stdout
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def _search_tools(body: dict) -> list[dict]:
    """Every tool in the request that searches the web, hosted or client-executed."""
    return [t for t in body.get("tools") or [] if "web_search" in json.dumps(t)]


def _native(body: dict) -> list[dict]:
    return [t for t in _search_tools(body) if t.get("type") not in ("function", "custom", None)]


# ----------------------------------------------------------------------------- native round trip


def test_responses_search_goes_native_and_replays_as_the_provider_item(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED, Turn(text="Yes, still.")])
    write_project_config(tmp_path, _config(fake))

    first = _ketch(tmp_path, RESPONSES, "what is ketch?", "--web-search")
    _ketch(tmp_path, RESPONSES, "are you sure?", "--web-search", "--continue")

    sent = [r.body for r in fake.model_requests]
    assert _native(sent[0]) == [{"type": "web_search", "search_context_size": "medium"}]
    assert len(_search_tools(sent[0])) == 1  # no client web_search next to the hosted one
    assert "web_search" in instructions(fake.model_requests[0])

    # The search call and result reach the front end normalized (Responses rows carry URLs only).
    results = [e for e in first if e["type"] == "web_search_result"]
    assert [(r["query"], [s["url"] for s in r["sources"]]) for r in results] == [
        ("what is ketch", [s["url"] for s in SOURCES])
    ]
    assert next(e for e in first if e["type"] == "turn_finished")["text"] == SEARCHED.text

    # Turn two (a new process reading the stored session) replays the provider's own item.
    items = sent[1]["input"]
    calls = [i for i in items if i.get("type") == "web_search_call"]
    assert [c["id"] for c in calls] == [results[0]["call_id"]]
    assert not [i for i in items if i.get("type") == "function_call_output"]
    assert _native(sent[1]) == _native(sent[0])


def test_anthropic_search_replays_server_tool_use_and_result_in_one_message(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED, Turn(text="Yes, still.")])
    write_project_config(tmp_path, _config(fake))

    first = _ketch(tmp_path, ANTHROPIC, "what is ketch?", "--web-search")
    _ketch(tmp_path, ANTHROPIC, "are you sure?", "--web-search", "--continue")

    sent = [r.body for r in fake.model_requests]
    # The compatibility baseline version, because the metadata does not opt into dynamic filtering.
    assert [t["type"] for t in _native(sent[0])] == ["web_search_20250305"]
    assert len(_search_tools(sent[0])) == 1

    results = [e for e in first if e["type"] == "web_search_result"]
    assert len(results) == 1 and results[0]["query"] == "what is ketch"
    assert results[0]["sources"] == [{"title": s["title"], "url": s["url"], "snippet": ""} for s in SOURCES]

    assistant = [m for m in sent[1]["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 1
    blocks = assistant[0]["content"]
    kinds = [b["type"] for b in blocks]
    assert kinds[:2] == ["server_tool_use", "web_search_tool_result"]
    assert blocks[0]["id"] == blocks[1]["tool_use_id"] == results[0]["call_id"]
    assert blocks[0]["input"] == {"query": "what is ketch"}
    # The opaque provider payload survives the store round trip for replay.
    assert [r["encrypted_content"] for r in blocks[1]["content"]] == [f"enc-{n}-{s['url']}" for n, s in enumerate(SOURCES)]
    assert not [b for b in blocks if b["type"] == "tool_use"]


def test_dynamic_filtering_metadata_selects_the_newer_anthropic_tool(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="ok")])
    write_project_config(tmp_path, _config(fake, metadata="web_search = true, web_search_dynamic_filtering = true"))
    _ketch(tmp_path, ANTHROPIC, "hi", "--web-search")
    assert [t["type"] for t in _native(fake.model_requests[0].body)] == ["web_search_20260209"]


def test_env_opt_in_enables_headless_search(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="ok")])
    write_project_config(tmp_path, _config(fake, search=""))
    _ketch(tmp_path, RESPONSES, "hi", env={"KETCH_WEB_SEARCH_ENABLED": "true"})
    assert len(_native(fake.model_requests[0].body)) == 1


# ----------------------------------------------------------------------------- no search sent


@pytest.mark.parametrize(
    ("wire", "config_kwargs", "flags"),
    [
        # Unsupported pairs: metadata turns it off; a Chat Completions wire cannot carry it.
        pytest.param(ANTHROPIC, {"metadata": "web_search = false"}, ["--web-search"], id="metadata-off"),
        pytest.param(RESPONSES, {"metadata": ""}, ["--web-search"], id="unknown-host-no-metadata"),
        pytest.param(RESPONSES, {"openai_wire": "openai-chat"}, ["--web-search"], id="chat-wire"),
        # Privacy mode wins over an explicit opt-in, by flag or config.
        pytest.param(RESPONSES, {}, ["--web-search", "--privacy"], id="privacy-flag"),
        pytest.param(ANTHROPIC, {"extra": "", "search": "enabled = true\n[tools]\ndisabled = ['web_search']"},
                     ["--web-search"], id="tool-disabled"),
        # An agent variant with an explicit tool list is a ceiling.
        pytest.param(RESPONSES, {"extra": '[agents.reader]\ntools = ["read_file"]'}, ["--web-search", "--agent", "reader"],
                     id="variant-tool-list"),
        # Headless without --web-search / KETCH_WEB_SEARCH_ENABLED, although config enables it.
        pytest.param(RESPONSES, {}, [], id="headless-no-opt-in"),
        pytest.param(ANTHROPIC, {}, [], id="headless-no-opt-in-anthropic"),
    ],
)
def test_no_search_tool_is_sent(tmp_path, fake_provider, wire, config_kwargs, flags):
    fake = fake_provider([Turn(text="ok")])
    write_project_config(tmp_path, _config(fake, **config_kwargs))
    events = _ketch(tmp_path, wire, "hi", *flags)
    request = fake.model_requests[0]
    assert _search_tools(request.body) == []
    assert "web_search" not in instructions(request)
    assert not [e for e in events if e["type"] == "web_search_result"]


def test_privacy_in_config_removes_search(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="ok")])
    write_project_config(tmp_path, "privacy = true\n" + _config(fake))
    _ketch(tmp_path, ANTHROPIC, "hi", "--web-search")
    assert _search_tools(fake.model_requests[0].body) == []


def test_compaction_summary_gets_no_search_and_drops_the_search_turn_whole(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED, Turn(text="second"), Turn(text="SUMMARY: asked about ketch"), Turn(text="after")])
    write_project_config(tmp_path, _config(fake))
    _ketch(tmp_path, ANTHROPIC, "what is ketch?", "--web-search")
    _ketch(tmp_path, ANTHROPIC, "more", "--web-search", "--continue")
    events = _ketch(tmp_path, ANTHROPIC, "next", "--web-search", "--continue", "--compact")

    assert [e["stage"] for e in events if e["type"] == "compacted"] == ["summary"]
    *turns, summary, after = (r.body for r in fake.model_requests)
    assert all(len(_native(body)) == 1 for body in turns)
    assert _search_tools(summary) == []  # the auxiliary summary call never searches
    assert len(_native(after)) == 1  # the session itself still does
    # The compacted history keeps no half of the provider's search pair.
    replayed = json.dumps(after["messages"])
    assert "server_tool_use" not in replayed and "web_search_tool_result" not in replayed


async def test_titles_commit_messages_and_children_get_no_search(tmp_path, fake_provider, monkeypatch):
    """The auxiliary helpers run on the session's own model (built for hosted search) and send
    no search tool, while the session itself does; a child's explicit tool list is a ceiling."""
    from argparse import Namespace

    from ketch.frontends.assemble import build_session
    from ketch.core.commit import propose_commit_message
    from ketch.websearch.wiring import child_search_route, web_research_available
    from ketch.state.titles import generate_title

    fake = fake_provider([Turn(text="root"), Turn(text="A title"), Turn(text="Add a file")])
    write_project_config(tmp_path, _config(fake))
    for key, value in KEYS.items():
        monkeypatch.setenv(key, value)
    args = Namespace(model=MODEL[ANTHROPIC], cwd=str(tmp_path), web_search=False)
    session = await build_session(args, interactive=True)  # the TUI follows config: search on
    try:
        async for _ in session.run_turn("hello"):
            pass
        await generate_title(session.model, "hello")
        await propose_commit_message(session.model, "diff --git a/x b/x\n+hello\n")
    finally:
        await session.aclose()
    root, title, commit = (r.body for r in fake.model_requests)
    assert len(_native(root)) == 1
    assert _search_tools(title) == [] and _search_tools(commit) == []

    parent = session.web_search
    assert child_search_route(parent, ["read_file", "grep"]).has_search is False
    assert child_search_route(parent, ["read_file", "web_search"]).native_tool is not None
    assert child_search_route(parent, None).native_tool is not None
    assert web_research_available(parent)
    # A child on another connection is judged on its own pair and wire.
    import dataclasses

    other = dataclasses.replace(session.connection, wire="openai-chat")
    assert child_search_route(parent, None, connection=other).has_search is False
    assert child_search_route(parent, None, connection=session.connection).native_tool is not None


# ----------------------------------------------------------------------------- Tavily


@pytest.fixture
def tavily(tavily_stub: TavilyStub) -> TavilyStub:
    tavily_stub.body = {"results": [{"title": "Ketch", "url": "https://ketch.example", "content": "A terminal agent."}]}
    return tavily_stub


def test_tavily_source_sends_the_client_tool_and_no_native_one(tmp_path, fake_provider, tavily):
    fake = fake_provider([Turn(tool_calls=[ToolCall("web_search", {"query": "ketch agent"})]), Turn(text="Found it.")])
    search = f'enabled = true\nsource = "tavily"\ntavily_base_url = "{tavily.base_url}"'
    write_project_config(tmp_path, _config(fake, search=search))

    events = _ketch(tmp_path, RESPONSES, "search it", "--web-search", "--yolo", env={"TAVILY_API_KEY": "tvly-k"})

    first, second = fake.model_requests
    assert _native(first.body) == []
    assert [t["name"] for t in _search_tools(first.body)] == ["web_search"]
    assert [r["json"]["query"] for r in tavily.requests] == ["ketch agent"]
    assert "https://ketch.example" in tool_results(second)[0][1]
    results = [e for e in events if e["type"] == "web_search_result"]
    assert [s["url"] for s in results[0]["sources"]] == ["https://ketch.example"]


def test_model_source_on_an_unsupported_pair_never_falls_back_to_tavily(tmp_path, fake_provider, tavily):
    fake = fake_provider([Turn(text="No search here.")])
    search = f'enabled = true\nsource = "model"\ntavily_base_url = "{tavily.base_url}"'
    write_project_config(tmp_path, _config(fake, search=search, metadata=""))

    _ketch(tmp_path, RESPONSES, "search it", "--web-search", "--yolo", env={"TAVILY_API_KEY": "tvly-k"})

    assert _search_tools(fake.model_requests[0].body) == []
    assert tavily.requests == []


# ----------------------------------------------------------------------------- capability table


def test_models_capabilities_prints_the_one_table(tmp_path):
    from ketch.websearch.capability import CAPABILITY_RULES

    run = run_ketch(["models", "--capabilities"], tmp_path)
    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split()[:2] == ["PROVIDER", "MODELS"]
    body = lines[2:]  # header and rule
    assert len(body) == len(CAPABILITY_RULES)
    for line, rule in zip(body, CAPABILITY_RULES, strict=True):
        assert line.startswith(rule.provider)
        assert ("no hosted search" in line) != rule.supported


@pytest.mark.parametrize(
    ("protocol", "wire", "searches"),
    [("auto", "openai-responses", True), ("responses", "openai-responses", True), ("anthropic", "openai-chat", False)],
)
def test_dual_wire_preset_moves_the_whole_session_never_the_search_alone(protocol, wire, searches):
    """DeepSeek's preset speaks Chat Completions; hosted search runs on Responses, so the session
    model is built on Responses. Its Anthropic search lives on another endpoint: no search then."""
    from ketch.config.settings import Config, resolve_connection
    from ketch.websearch.wiring import session_search

    config = Config.model_validate({"web_search": {"enabled": True, "protocol": protocol}})
    conn = resolve_connection(config, "deepseek:deepseek-v4-flash", environ={"DEEPSEEK_API_KEY": "k"})
    assert conn.wire == "openai-chat"
    search = session_search(config, conn, interactive=True, environ={})
    assert (search.wire, search.route.has_search) == (wire, searches)


@pytest.mark.parametrize(("kind", "searches"), [("explore", False), ("web_research", True)])
def test_a_child_gets_search_on_the_wire_only_when_its_tool_list_has_it(tmp_path, fake_provider, kind, searches):
    from fakeprovider import user_texts

    script = delegating(kind)

    fake = fake_provider([script] * 3)
    write_project_config(tmp_path, _config(fake))
    events = _ketch(tmp_path, ANTHROPIC, "research x", "--web-search", "--yolo")
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == "parent done"
    parent_first = fake.model_requests[0].body
    child = next(r.body for r in fake.model_requests if any("CHILD-TASK" in t for t in user_texts(r)))
    assert len(_native(parent_first)) == 1  # the root session searches
    assert bool(_native(child)) is searches


# ----------------------------------------------------------------------------- dynamic filtering opt-in


def _anthropic_tool_type(tmp_path: Path, fake: Any, model: str, preset: str, dynamic: bool, *flags: str) -> list[str]:
    """The hosted search tool types the fake received for one run of ``model`` on ``preset``."""
    write_project_config(tmp_path, f"""
[connections.c]
preset = "{preset}"
wire = "anthropic-messages"
base_url = "{fake.base_url.removesuffix('/v1')}"

[models."c:{model}"]
capabilities = {{ web_search = true }}

[web_search]
enabled = true
anthropic_dynamic_filtering = {str(dynamic).lower()}
""")
    before = len(fake.model_requests)
    run = run_ketch(["-p", "hi", "-m", f"c:{model}", "--output-format", "stream-json", "--web-search", *flags],
                    tmp_path, env=KEYS)
    assert run.code == 0, run.stderr + run.stdout
    return [t["type"] for t in _native(fake.model_requests[before].body)]


@pytest.mark.parametrize(
    ("model", "preset", "dynamic"),
    [
        ("claude-sonnet-4-6", "anthropic", True),
        ("claude-sonnet-4-6", "anthropic", False),
        ("claude-sonnet-4-5", "anthropic", True),  # not marked in the table
        ("claude-sonnet-4-6", "openai-compatible", True),  # an Anthropic-compatible service
    ],
)
def test_dynamic_filtering_config_opt_in_is_on_the_wire_exactly_when_the_capability_says_so(
    tmp_path, fake_provider, model, preset, dynamic
):
    from ketch.config.settings import Config, resolve_connection
    from ketch.websearch.wiring import connection_capability

    fake = fake_provider([Turn(text="ok")])
    sent = _anthropic_tool_type(tmp_path, fake, model, preset, dynamic)
    config = Config.model_validate({
        "connections": {"c": {"preset": preset, "wire": "anthropic-messages", "base_url": fake.base_url}},
        "models": {f"c:{model}": {"capabilities": {"web_search": True}}},
    })
    conn = resolve_connection(config, f"c:{model}", environ={"ANTHROPIC_API_KEY": "k"})
    cap = connection_capability(conn, dynamic_filtering=dynamic)
    assert sent == ["web_search_20260209" if cap.dynamic_filtering else "web_search_20250305"]
    assert cap.dynamic_filtering is (dynamic and model == "claude-sonnet-4-6" and preset == "anthropic")


def test_dynamic_filtering_opt_in_obeys_privacy(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="ok")])
    assert _anthropic_tool_type(tmp_path, fake, "claude-sonnet-4-6", "anthropic", True, "--privacy") == []
    assert _search_tools(fake.model_requests[0].body) == []


@pytest.mark.parametrize(("kind", "expected"), [("explore", []), ("web_research", ["web_search_20260209"])])
def test_dynamic_filtering_reaches_a_child_only_when_its_tool_list_has_search(tmp_path, fake_provider, kind, expected):
    from fakeprovider import user_texts

    script = delegating(kind, "look")

    fake = fake_provider([script] * 3)
    parent = _anthropic_tool_type(tmp_path, fake, "claude-sonnet-4-6", "anthropic", True, "--yolo")
    assert parent == ["web_search_20260209"]
    child = next(r.body for r in fake.model_requests if any("CHILD-TASK" in t for t in user_texts(r)))
    assert [t["type"] for t in _native(child)] == expected
