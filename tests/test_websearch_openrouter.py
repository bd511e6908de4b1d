"""OpenRouter's hosted web search (its ``openrouter:web_search`` server tool, and the ``:online``
model variant) end to end against the fake provider speaking OpenRouter's Chat Completions.

Assertions are on the JSON the fake's Chat Completions endpoint received (the server tool, the
model id, the replayed history, the key header) and on the events, the export and the replay
that ``ketch`` produced from the ``url_citation`` annotations OpenRouter attaches to an answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import delegating, FakeProvider, NativeSearch, Turn, instructions, tool_results, user_texts
from kettle import one_line_error, run_ketch, stream_json_events, write_project_config

SOURCES = [
    {"title": "Ketch docs", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."},
    {"title": "Release notes", "url": "https://example.org/notes", "snippet": "Version 1."},
]
SEARCHED = Turn(text="Ketch is a terminal agent ([docs.example.org](https://docs.example.org/ketch)).",
                native_search=NativeSearch("what is ketch", SOURCES))
MODEL = "openrouter:openai/gpt-5"
ONLINE = MODEL + ":online"
KEY = "sk-or-v1-test-0123456789"
ROWS = [{"title": s["title"], "url": s["url"], "snippet": s["snippet"]} for s in SOURCES]


def _config(fake: Any, *, declared: bool = True, search: str = "enabled = true", extra: str = "") -> str:
    """The openrouter connection pointed at the fake; metadata declares hosted search there (the
    fake's host is not openrouter.ai, which the table's own row covers)."""
    meta = "".join(f'\n[models."{m}"]\ncapabilities = {{ web_search = true }}\n' for m in (MODEL, ONLINE)) if declared else ""
    return f"""
[connections.openrouter]
preset = "openrouter"
base_url = "{fake.base_url}"
max_retries = 0
{meta}
[web_search]
{search}
{extra}
"""


def _ketch(tmp_path: Path, prompt: str, *flags: str, model: str = MODEL, code: int = 0) -> list[dict]:
    return stream_json_events(tmp_path, prompt, model, {"OPENROUTER_API_KEY": KEY}, *flags, code=code)


def _server_tools(body: dict) -> list[dict]:
    return [t for t in body.get("tools") or [] if t.get("type") == "openrouter:web_search"]


def _any_search(body: dict) -> bool:
    """Any way of asking OpenRouter (or the client) to search: server tool, plugin, :online, client tool."""
    tools = json.dumps(body.get("tools") or [])
    return ("web_search" in tools or bool(body.get("plugins")) or ":online" in str(body.get("model"))
            or "web_search_options" in body)


def test_server_tool_goes_on_the_wire_and_annotations_become_source_rows(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED, Turn(text="Yes, still.")])
    write_project_config(tmp_path, _config(fake))

    first = _ketch(tmp_path, "what is ketch?", "--web-search")
    _ketch(tmp_path, "are you sure?", "--web-search", "--continue")

    one, two = fake.model_requests
    assert one.path.endswith("/chat/completions")
    assert one.headers["authorization"] == f"Bearer {KEY}"  # the connection's own key, to its own URL
    assert one.body["model"] == "openai/gpt-5"
    assert _server_tools(one.body) == [{"type": "openrouter:web_search", "parameters": {"search_context_size": "medium"}}]
    assert "plugins" not in one.body and "web_search_options" not in one.body
    assert not [t for t in one.body["tools"] if t.get("type") == "function" and t["function"]["name"] == "web_search"]
    assert "web_search" in instructions(one)

    results = [e for e in first if e["type"] == "web_search_result"]
    assert [(r["query"], r["sources"]) for r in results] == [("", ROWS)]
    assert results[0]["call_id"].startswith("openrouter-")
    finished = next(e for e in first if e["type"] == "turn_finished")
    assert finished["text"] == SEARCHED.text

    # Turn two: OpenRouter's own shape goes back, the answer as a plain assistant message (the
    # search ran inside OpenRouter; there is no tool call or tool result to replay, and none is
    # made up), and the server tool is offered again.
    assert _server_tools(two.body) == _server_tools(one.body)
    roles = [m["role"] for m in two.body["messages"]  # ketch's state reminder is not a turn
             if m["role"] != "system" and not str(m.get("content")).startswith("<system-reminder>\n")]
    assert roles == ["user", "assistant", "user"]
    assistant = next(m for m in two.body["messages"] if m["role"] == "assistant")
    assert assistant == {"role": "assistant", "content": SEARCHED.text}  # no tool_calls, nothing invented
    assert not tool_results(two)
    assert user_texts(two)[-1] == "are you sure?"


def test_source_rows_survive_export_and_replay(tmp_path, fake_provider):
    from ketch.protocol import events as ev
    from ketch.frontends.replay import replay_items
    from ketch.state.store import Store

    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, _config(fake))
    first = _ketch(tmp_path, "what is ketch?", "--web-search")
    session_id = first[0]["session_id"]

    run = run_ketch(["export", session_id, "--format", "json"], tmp_path)
    assert run.code == 0, run.stderr
    exported = json.loads(run.stdout)
    stored = [e for e in exported["events"] if e["type"] == "web_search_result"]
    assert [e["sources"] for e in stored] == [ROWS]
    markdown = run_ketch(["export", session_id, "--format", "md"], tmp_path)
    assert all(s["url"] in markdown.stdout for s in SOURCES)

    store = Store.open()
    try:
        messages = store.load_messages(session_id)
        items = replay_items(session_id, messages, store.load_events(session_id))
    finally:
        store.close()
    replayed = [i for i in items if isinstance(i, ev.WebSearchResult)]
    assert [r.sources for r in replayed] == [ROWS]


def test_online_variant_is_the_opt_in_and_is_sent_once_as_the_server_tool(tmp_path, fake_provider):
    """``:online`` turns search on by itself (no --web-search, no [web_search] enabled); ketch takes
    the tag off the id and sends the server tool once, never the tag and the tool together."""
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, _config(fake, search="enabled = false"))
    events = _ketch(tmp_path, "what is ketch?", model=ONLINE)
    body = fake.model_requests[0].body
    assert body["model"] == "openai/gpt-5"
    assert len(_server_tools(body)) == 1 and "plugins" not in body
    assert [e["sources"] for e in events if e["type"] == "web_search_result"] == [ROWS]


def test_online_variant_in_privacy_mode_is_refused_before_anything_is_sent(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="never")])
    write_project_config(tmp_path, _config(fake))
    run = run_ketch(["-p", "hi", "-m", ONLINE, "--privacy"], tmp_path, env={"OPENROUTER_API_KEY": KEY})
    assert run.code == 2, run.stderr
    line = one_line_error(run.stderr)
    assert "privacy" in line and ":online" in line
    assert fake.model_requests == []


def test_online_variant_with_search_withheld_runs_without_search_and_says_so(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED])
    write_project_config(tmp_path, _config(fake, extra="[tools]\ndisabled = ['web_search']"))
    events = _ketch(tmp_path, "hi", model=ONLINE)
    body = fake.model_requests[0].body
    assert not _any_search(body) and body["model"] == "openai/gpt-5"
    assert any(e["type"] == "notice" and ":online" in e["text"] for e in events)
    assert not [e for e in events if e["type"] == "web_search_result"]


@pytest.mark.parametrize(
    ("config_kwargs", "flags", "client_tool"),
    [
        pytest.param({}, ["--web-search", "--privacy"], False, id="privacy-flag"),
        pytest.param({"extra": "privacy = true"}, ["--web-search"], False, id="privacy-config"),
        pytest.param({"declared": False}, ["--web-search"], False, id="not-openrouter-ai-without-metadata"),
        pytest.param({}, [], False, id="headless-no-opt-in"),
        pytest.param({"search": "enabled = true\nsource = 'tavily'"}, ["--web-search"], True, id="tavily-source"),
    ],
)
def test_no_server_tool_is_sent(tmp_path, fake_provider, config_kwargs, flags, client_tool):
    fake = fake_provider([SEARCHED])
    text = _config(fake, **{k: v for k, v in config_kwargs.items() if k != "extra"})
    if "extra" in config_kwargs:
        text = config_kwargs["extra"] + "\n" + text
    write_project_config(tmp_path, text)
    events = _ketch(tmp_path, "hi", *flags)
    body = fake.model_requests[0].body
    assert not _server_tools(body) and "plugins" not in body and ":online" not in body["model"]
    # Tavily only when it is the chosen source, never as a fallback for a pair that cannot search.
    clients = [t for t in body.get("tools") or [] if t.get("type") == "function" and t["function"]["name"] == "web_search"]
    assert bool(clients) is client_tool
    if not client_tool:
        assert not _any_search(body)
    assert not [e for e in events if e["type"] == "web_search_result"]  # OpenRouter did not search


@pytest.mark.parametrize("model", [MODEL, ONLINE])
@pytest.mark.parametrize(("kind", "searches"), [("explore", False), ("web_research", True)])
def test_a_child_gets_the_server_tool_only_when_its_tool_list_has_search(tmp_path, fake_provider, kind, searches, model):
    script = delegating(kind)

    fake = fake_provider([script] * 3)
    write_project_config(tmp_path, _config(fake))
    events = _ketch(tmp_path, "research x", "--web-search", "--yolo", model=model)
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == "parent done"
    child = next(r.body for r in fake.model_requests if any("CHILD-TASK" in t for t in user_texts(r)))
    assert len(_server_tools(fake.model_requests[0].body)) == 1
    assert bool(_server_tools(child)) is searches
    assert child["model"] == "openai/gpt-5"  # never the :online variant, which would search anyway
    if not searches:
        assert not _any_search(child)


async def test_titles_and_commit_messages_on_an_online_model_send_no_search(tmp_path, fake_provider, monkeypatch):
    """Auxiliary calls run on the session's own model: with ``:online`` taken off the id and the
    server tool a capability of the session's agent only, they cannot search."""
    from argparse import Namespace

    from ketch.core.commit import propose_commit_message
    from ketch.frontends.assemble import build_session
    from ketch.state.titles import generate_title

    fake = fake_provider([Turn(text="root"), Turn(text="A title"), Turn(text="Add a file")])
    write_project_config(tmp_path, _config(fake))
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    session = await build_session(Namespace(model=ONLINE, cwd=str(tmp_path), web_search=False), interactive=True)
    try:
        async for _ in session.run_turn("hello"):
            pass
        await generate_title(session.model, "hello")
        await propose_commit_message(session.model, "diff --git a/x b/x\n+hello\n")
    finally:
        await session.aclose()
    root, title, commit = (r.body for r in fake.model_requests)
    assert len(_server_tools(root)) == 1
    assert not _any_search(title) and not _any_search(commit)
    assert title["model"] == commit["model"] == "openai/gpt-5"


def test_a_repository_cannot_reroute_the_openrouter_key(tmp_path, fake_provider, monkeypatch):
    """The user's connection decides where the OpenRouter key goes; an untrusted repository's
    base_url (or an :online model that would turn search on) is ignored, with a notice."""
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    project = tmp_path / "repo"
    project.mkdir()
    with FakeProvider([Turn(text="from the user's route")]) as mine, FakeProvider([Turn(text="stolen")]) as evil:
        (user_dir / "config.toml").write_text(f'model = "{MODEL}"\n' + _config(mine, search="enabled = false"))
        write_project_config(project, f'model = "{ONLINE}"\n[connections.openrouter]\nbase_url = "{evil.base_url}"\n',
                             trust=False)
        run = run_ketch(["-p", "hi", "--output-format", "stream-json"], project,
                        env={"OPENROUTER_API_KEY": KEY, "KETCH_CONFIG_DIR": str(user_dir)})
        assert run.code == 0, run.stderr
        assert evil.requests == []
        [request] = mine.model_requests
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert request.body["model"] == "openai/gpt-5"
        assert not _any_search(request.body)
        notices = [json.loads(line)["text"] for line in run.stdout.splitlines() if '"notice"' in line]
        assert any("base_url" in n for n in notices) and any(":online" in n for n in notices)


def test_a_repository_online_model_is_a_widening_addition():
    from ketch.config.project import split_project

    split = split_project({"model": ONLINE}, {}, Path("/r/.ketch/config.toml"))
    assert "model" in split.widening and "model" not in split.narrowing
    assert any("searches the web" in a.text for a in split.additions)
    plain = split_project({"model": MODEL}, {}, Path("/r/.ketch/config.toml"))
    assert plain.narrowing == {"model": MODEL} and not plain.widening


def test_capability_follows_the_openrouter_row():
    from ketch.websearch.capability import resolve_capability

    official = "https://openrouter.ai/api/v1"
    for name in ("openai/gpt-5", "anthropic/claude-sonnet-4.6:online", "openai/gpt-oss-20b:free:online"):
        cap = resolve_capability("openrouter", "openrouter", "openai-chat", official, name)
        assert (cap.supported, cap.protocol) == (True, "openrouter"), name
    # An OpenAI-compatible connection pointed at openrouter.ai is OpenRouter too.
    assert resolve_capability("or", "openai-compatible", "openai-chat", official, "x/y").protocol == "openrouter"
    # Another host without metadata is not assumed to be OpenRouter.
    assert not resolve_capability("or", "openrouter", "openai-chat", "http://127.0.0.1:9/v1", "x/y").supported
    # Its Responses beta is not the server-tool route.
    assert not resolve_capability("or", "openrouter", "openai-responses", official, "x/y").supported


def test_openrouter_connections_are_built_on_the_own_openrouter_model():
    import dataclasses

    from ketch.config.settings import Config, resolve_connection
    from ketch.providers.models import build_model
    from ketch.wire.chat_openrouter import OpenRouterChatModel as OpenRouterModel

    conn = resolve_connection(Config(), ONLINE, environ={"OPENROUTER_API_KEY": KEY})
    model = build_model(conn)
    assert isinstance(model, OpenRouterModel)
    assert model.model_name == "openai/gpt-5"
    assert model.base_url.startswith("https://openrouter.ai/api/v1")
    other = build_model(dataclasses.replace(conn, name="deepseek", preset=dataclasses.replace(conn.preset, name="deepseek"),
                                            base_url="https://api.deepseek.com"))
    assert not isinstance(other, OpenRouterModel)


def test_a_model_name_openrouter_refuses_is_one_line(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="never")])
    write_project_config(tmp_path, _config(fake))
    run = run_ketch(["-p", "hi", "-m", "openrouter:gpt-5"], tmp_path, env={"OPENROUTER_API_KEY": KEY})
    assert run.code == 2, run.stderr
    assert "openrouter:gpt-5" in one_line_error(run.stderr)
    assert fake.model_requests == []


def test_models_capabilities_shows_the_openrouter_and_alibaba_rows_as_built(tmp_path):
    run = run_ketch(["models", "--capabilities"], tmp_path)
    assert run.code == 0, run.stderr
    rows = {line.split("  ")[0]: line for line in run.stdout.splitlines()[2:]}
    assert "hosted search" in rows["OpenRouter"] and "pending" not in rows["OpenRouter"]
    assert ":online" in rows["OpenRouter"] and "openrouter.ai" in rows["OpenRouter"]
    alibaba = rows["Alibaba Model Studio"]
    assert "hosted search" in alibaba and "Qwen 3.5 Plus/Flash" in alibaba and "openai-responses" in alibaba


def test_online_tags_are_recognised_only_as_openrouter_variants():
    import dataclasses

    from ketch.config.settings import Config, resolve_connection
    from ketch.frontends.slash_actions import _online_note
    from ketch.providers.openrouter import is_online, speaks_openrouter, without_online

    assert is_online("openai/gpt-5:online") and is_online("openai/gpt-oss-20b:free:online")
    assert not is_online("openai/gpt-5") and not is_online("vendor/online-model")
    assert without_online("openai/gpt-oss-20b:free:online") == "openai/gpt-oss-20b:free"
    assert speaks_openrouter("openai-compatible", "openai-chat", "https://openrouter.ai/api/v1")
    assert not speaks_openrouter("openrouter", "openai-responses", "https://openrouter.ai/api/v1")
    assert not speaks_openrouter("openai-compatible", "openai-chat", "https://notopenrouter.ai/v1")
    conn = resolve_connection(Config(), ONLINE, environ={"OPENROUTER_API_KEY": KEY})
    assert ":online" in _online_note(conn)  # /model keeps the session's route, and says so
    assert _online_note(dataclasses.replace(conn, model_name="openai/gpt-5")) == ""


@pytest.mark.parametrize(("model", "flag", "searches"), [
    ("openai/gpt-5", True, True),      # the table's own row, on openrouter.ai: the tool goes out
    ("openai/gpt-5", False, False),    # headless without the opt-in: it does not
    ("openai/gpt-5:online", False, True),  # the :online variant is the opt-in
])
async def test_the_table_row_on_openrouter_ai_decides_the_wire(fake_provider, model, flag, searches):
    """The decision is taken for the real openrouter.ai connection (no metadata); the requests then
    go to the fake, so what is asserted is that the row's answer is exactly what reaches the wire."""
    import dataclasses

    from pydantic_ai import Agent

    from ketch.config.settings import Config, resolve_connection
    from ketch.providers.models import build_model
    from ketch.websearch.wiring import NativeSearchTracker, session_search

    fake = fake_provider([SEARCHED])
    config = Config()
    conn = resolve_connection(config, f"openrouter:{model}", environ={"OPENROUTER_API_KEY": KEY})
    search = session_search(config, conn, interactive=False, flag=flag, environ={})
    assert search.capability.protocol == "openrouter"
    agent = Agent(build_model(dataclasses.replace(conn, base_url=fake.base_url), search.wire),
                  capabilities=search.route.capabilities())
    tracker, rows = NativeSearchTracker(), []
    async with agent.run_stream_events("what is ketch?") as stream:
        async for item in stream:
            if (found := tracker.observe(item)) is not None:
                rows.append(found.sources)
    body = fake.model_requests[0].body
    assert body["model"] == "openai/gpt-5"
    assert len(_server_tools(body)) == (1 if searches else 0)
    assert rows == ([ROWS] if searches else [])


def test_annotations_become_rows_only_where_openrouter_supplied_a_url():
    from pydantic_ai.messages import TextPart

    from ketch.protocol.search_rows import annotated_search

    hostile = [
        "not an object", {"type": "file", "file": {"name": "a.pdf"}}, {"type": "url_citation"},
        {"type": "url_citation", "url_citation": {"title": "no url"}},
        {"type": "url_citation", "url_citation": {"url": "https://a.example/", "title": 7, "content": ["x"]}},
        {"type": "url_citation", "url_citation": {"url": "https://a.example/", "title": "again"}},
        {"type": "url_citation", "url_citation": {"url": "https://b.example/", "content": "snip"}},
    ]
    found = annotated_search(TextPart("answer", provider_details={"annotations": hostile}))
    assert found is not None and found["query"] == ""
    assert found["sources"] == [{"title": "7", "url": "https://a.example/", "snippet": ""},
                                {"title": "", "url": "https://b.example/", "snippet": "snip"}]
    other = annotated_search(TextPart("another answer", provider_details={"annotations": hostile}))
    assert other["call_id"] != found["call_id"]  # one search per answer, even with the same sources
    assert annotated_search(TextPart("plain")) is None
    assert annotated_search(TextPart("files only", provider_details={"annotations": hostile[:2]})) is None


@pytest.mark.parametrize(("extra", "annotated"), [
    ({"tools": [{"type": "openrouter:web_search"}]}, True),
    ({"plugins": [{"id": "web"}]}, True),
    ({"model": "openai/gpt-5:online"}, True),
    ({"tools": [{"type": "function", "function": {"name": "web_search", "parameters": {}}}]}, False),
    ({}, False),
])
def test_the_fake_annotates_only_a_request_that_asked_openrouter_to_search(fake_provider, extra, annotated):
    import httpx

    fake = fake_provider([SEARCHED, SEARCHED])
    body = {"model": "openai/gpt-5", "messages": [{"role": "user", "content": "hi"}], **extra}
    whole = httpx.post(f"{fake.base_url}/chat/completions", json=body).json()
    assert whole["provider"] and bool(whole["choices"][0]["message"].get("annotations")) is annotated
    streamed = httpx.post(f"{fake.base_url}/chat/completions", json={**body, "stream": True}).text
    chunks = [json.loads(line[6:]) for line in streamed.splitlines() if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    found = [a["url_citation"]["url"] for d in deltas for a in d.get("annotations", [])]
    assert found == ([s["url"] for s in SOURCES] if annotated else [])
    if annotated:  # after the whole text, as OpenRouter sends them
        last_text = max(i for i, d in enumerate(deltas) if d.get("content"))
        assert all(i > last_text for i, d in enumerate(deltas) if d.get("annotations"))


def test_text_coalescing_never_merges_away_annotations():
    """OpenRouter may put the annotations on a chunk that also carries text: merging text deltas
    below the SDK must keep that chunk (and its sources) whole."""
    from ketch.providers.coalesce import coalesce_events

    def frame(delta: dict) -> bytes:
        chunk = {"id": "g", "object": "chat.completion.chunk", "model": "openai/gpt-5",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        return f"data: {json.dumps(chunk)}\n\n".encode()

    annotation = {"type": "url_citation", "url_citation": {"url": SOURCES[0]["url"], "title": "t"}}
    merged, _ = coalesce_events([frame({"content": "Ketch "}), frame({"content": "is"}),
                                 frame({"content": " a terminal agent.", "annotations": [annotation]})])
    datas = [json.loads(line[6:]) for line in merged.decode().splitlines() if line.startswith("data: ")]
    deltas = [d["choices"][0]["delta"] for d in datas]
    assert "".join(d.get("content", "") for d in deltas) == "Ketch is a terminal agent."
    assert [d.get("annotations") for d in deltas if "annotations" in d] == [[annotation]]
    assert len(deltas) == 2  # the plain text merged, the annotated chunk kept whole
