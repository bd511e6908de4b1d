"""``/model`` re-decides hosted search for the new model: a model that cannot search gets no
search tool (and its turns run), the prompt stops offering it, and a model that can search gets
it back, on the wire it needs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from fakeprovider import FakeProvider, Turn
from kettle import write_project_config

from ketch.protocol import events as ev


def _config(base_url: str) -> str:
    return f'''
[connections.openai]
preset = "openai"
base_url = "{base_url}"
wire = "openai-responses"
max_retries = 0

[connections.local]
preset = "openai-compatible"
base_url = "{base_url}"
max_retries = 0

[models."openai:gpt-5"]
capabilities = {{ web_search = true }}

[web_search]
enabled = true
'''


def _offers_search(body: dict) -> bool:
    instructions = json.dumps(body.get("instructions") or body.get("messages", [])[:1])
    return "run by the model provider" in instructions


async def test_search_follows_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ketch.frontends.assemble import build_session
    from ketch.frontends.slash_actions import SlashActions

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890")
    with FakeProvider([Turn(text="one"), Turn(text="two"), Turn(text="three")]) as fake:
        write_project_config(tmp_path, _config(fake.base_url))
        args = SimpleNamespace(model="openai:gpt-5", cwd=str(tmp_path), add_dir=[], yolo=True)
        session = await build_session(args, interactive=True)
        try:
            actions = SlashActions(lambda: session, args, tmp_path)
            first = [e async for e in session.run_turn("hi")]
            lost = await actions.run("model", "local:qwen3")
            second = [e async for e in session.run_turn("hi again")]
            gained = await actions.run("model", "openai:gpt-5")
            third = [e async for e in session.run_turn("and once more")]
        finally:
            await session.aclose()
    for events in (first, second, third):
        assert isinstance(events[-1], ev.TurnFinished) and events[-1].reason == "done", events[-3:]
    assert "web search: off with this model" in lost
    assert "web search: on" in gained
    requests = fake.model_requests
    assert [r.path.rsplit("/", 1)[-1] for r in requests] == ["responses", "completions", "responses"]
    kinds = [[t.get("type") for t in r.body.get("tools", [])] for r in requests]
    assert "web_search" in kinds[0] and "web_search" in kinds[2]
    assert "web_search" not in kinds[1] and all(k == "function" for k in kinds[1])
    assert _offers_search(requests[0].body) and not _offers_search(requests[1].body) and _offers_search(requests[2].body)


def _child_ran_without_hosted_search(events: list, child_requests: list) -> None:
    """The parent's turn ended done, its subagent finished ok, and every request of the child
    carried function tools only."""
    assert events[-1].reason == "done", events[-3:]
    finished = [e for e in events if isinstance(e, ev.SubagentFinished)]
    assert finished and finished[0].ok, finished
    assert child_requests and all(t.get("type") == "function" for r in child_requests for t in r.body.get("tools", []))


async def test_a_subagent_after_the_switch_gets_the_new_models_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A web_research subagent started after ``/model`` to a model that cannot search runs on that
    model without the hosted tool (before, it sent the first model's tool and failed)."""
    from fakeprovider import ToolCall

    from ketch.frontends.assemble import build_session
    from ketch.frontends.slash_actions import SlashActions

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890")
    task = ToolCall("task", {"kind": "web_research", "description": "look it up", "prompt": "find the docs"})
    with FakeProvider([Turn(text="one"), Turn(tool_calls=[task]), Turn(text="child report"), Turn(text="done")]) as fake:
        write_project_config(tmp_path, _config(fake.base_url))
        args = SimpleNamespace(model="openai:gpt-5", cwd=str(tmp_path), add_dir=[], yolo=True)
        session = await build_session(args, interactive=True)
        try:
            actions = SlashActions(lambda: session, args, tmp_path)
            [e async for e in session.run_turn("hi")]
            await actions.run("model", "local:qwen3")
            second = [e async for e in session.run_turn("research it")]
        finally:
            await session.aclose()
    _child_ran_without_hosted_search(second, [r for r in fake.model_requests[1:] if "find the docs" in json.dumps(r.body.get("messages", []))])
    assert all(r.path.endswith("/chat/completions") for r in fake.model_requests[1:])


async def test_a_subagent_on_its_own_model_is_judged_on_that_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent searches on Responses; a configured kind runs on a local model that cannot: the
    child gets no hosted tool (before, it was sent the parent's and its request failed)."""
    from fakeprovider import ToolCall

    from ketch.frontends.assemble import build_session

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890")
    task = ToolCall("task", {"kind": "finder", "description": "look it up", "prompt": "find the docs"})
    with FakeProvider([Turn(tool_calls=[task]), Turn(text="child report"), Turn(text="done")]) as fake:
        write_project_config(tmp_path, _config(fake.base_url) + (
            '\n[agents.finder]\nmodel = "local:qwen3"\ntools = ["read_file", "web_search"]\n'))
        args = SimpleNamespace(model="openai:gpt-5", cwd=str(tmp_path), add_dir=[], yolo=True)
        session = await build_session(args, interactive=True)
        try:
            events = [e async for e in session.run_turn("research it")]
        finally:
            await session.aclose()
    _child_ran_without_hosted_search(events, [r for r in fake.model_requests if r.body.get("model") == "qwen3"])
    parent = [r for r in fake.model_requests if r.body.get("model") == "gpt-5"]
    assert parent and "web_search" in [t.get("type") for t in parent[0].body.get("tools", [])]


def test_a_headless_session_keeps_its_fixed_search_capability() -> None:
    """Only an interactive session (which can switch models) reads the hosted tool per request."""
    from ketch.websearch.capability import Capability, SearchRoute, WebSearchSettings
    from ketch.websearch.wiring import LiveSearch, SessionSearch

    settings = WebSearchSettings(enabled=True, source="model", privacy=False, protocol="auto", anthropic_dynamic_filtering=False)

    def search(surface: str) -> SessionSearch:
        return SessionSearch(settings, Capability(False, reason="x"), SearchRoute(reason="none"), surface, False, "openai-chat")

    assert LiveSearch(search("headless")).capabilities() == []
    [tool] = LiveSearch(search("tui")).capabilities()
    assert tool.tool(None) is None
