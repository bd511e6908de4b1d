"""Gemini grounding with Google Search as ketch's hosted search, end to end against the fake.

Assertions are on the JSON the fake's Gemini endpoint received and on the events
``ketch -p --output-format stream-json`` printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import delegating, NativeSearch, Turn, instructions, tool_results, user_texts
from kettle import run_ketch, search_connection_config, stream_json_events, write_project_config

SOURCES = [
    {"title": "Ketch docs", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."},
    {"title": "Release notes", "url": "https://example.org/notes", "snippet": "Version 1."},
]
SEARCHED = Turn(text="Ketch is a terminal agent [1].", native_search=NativeSearch("what is ketch", SOURCES))
MODEL = "gemini:gemini-3-flash-preview"


def _config(fake: Any, *, metadata: str = "web_search = true", search: str = "enabled = true", extra: str = "") -> str:
    return search_connection_config("gemini", fake.base_url.removesuffix('/v1'), MODEL, metadata=metadata, search=search, extra=extra)


def _ketch(tmp_path: Path, prompt: str, *flags: str) -> list[dict]:
    return stream_json_events(tmp_path, prompt, MODEL, {"GEMINI_API_KEY": "k"}, *flags)


def _google_search(body: dict) -> list[dict]:
    """The hosted search tools of a Gemini request (either JSON spelling of the field)."""
    return [t for t in body.get("tools") or [] if "googleSearch" in t or "google_search" in t]


def _camel(value: Any) -> Any:
    """Keys in camelCase: google-genai sends some nested fields in their snake_case spelling."""
    if isinstance(value, dict):
        return {"".join(w.capitalize() if i else w for i, w in enumerate(k.split("_"))): _camel(v)
                for k, v in value.items()}
    return value


def _any_search(body: dict) -> bool:
    return "web_search" in json.dumps(body.get("tools") or []) or bool(_google_search(body))


def test_grounding_goes_on_the_wire_and_its_metadata_becomes_source_rows(tmp_path, fake_provider):
    fake = fake_provider([SEARCHED, Turn(text="Yes, still.")])
    write_project_config(tmp_path, _config(fake))

    first = _ketch(tmp_path, "what is ketch?", "--web-search")
    _ketch(tmp_path, "are you sure?", "--web-search", "--continue")

    sent = [r.body for r in fake.model_requests]
    assert len(_google_search(sent[0])) == 1
    assert "web_search" not in json.dumps(sent[0]["tools"])  # no client web_search next to the hosted one
    assert "web_search" in instructions(fake.model_requests[0])

    results = [e for e in first if e["type"] == "web_search_result"]
    assert [(r["query"], r["sources"]) for r in results] == [
        ("what is ketch", [{"title": s["title"], "url": s["url"], "snippet": ""} for s in SOURCES])
    ]
    assert next(e for e in first if e["type"] == "turn_finished")["text"] == SEARCHED.text

    # Turn two replays Gemini's own shape: the search's toolCall/toolResponse parts under the
    # provider's id (the sources ketch added from the grounding metadata taken out again), then the
    # grounded text; never a functionCall/functionResponse for the hosted search.
    assert len(_google_search(sent[1])) == 1
    contents = sent[1]["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    call, response, text = (_camel(p) for p in contents[1]["parts"])
    assert call == {"toolCall": {"id": results[0]["call_id"], "toolType": "GOOGLE_SEARCH_WEB",
                                 "args": {"queries": ["what is ketch"]}}}
    assert response == {"toolResponse": {"id": results[0]["call_id"], "toolType": "GOOGLE_SEARCH_WEB", "response": {}}}
    assert text == {"text": SEARCHED.text}
    assert not tool_results(fake.model_requests[1])
    assert user_texts(fake.model_requests[1])[-1] == "are you sure?"


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
    fake = fake_provider([Turn(text="ok")])
    write_project_config(tmp_path, _config(fake, **config_kwargs))
    events = _ketch(tmp_path, "hi", *flags)
    body = fake.model_requests[0].body
    assert not _any_search(body)
    assert "web_search" not in instructions(fake.model_requests[0])
    assert not [e for e in events if e["type"] == "web_search_result"]


def test_privacy_in_config_removes_grounding(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="ok")])
    write_project_config(tmp_path, "privacy = true\n" + _config(fake))
    _ketch(tmp_path, "hi", "--web-search")
    assert not _any_search(fake.model_requests[0].body)


@pytest.mark.parametrize(("kind", "searches"), [("explore", False), ("web_research", True)])
def test_a_child_gets_grounding_only_when_its_tool_list_has_search(tmp_path, fake_provider, kind, searches):

    script = delegating(kind)

    fake = fake_provider([script] * 3)
    write_project_config(tmp_path, _config(fake))
    events = _ketch(tmp_path, "research x", "--web-search", "--yolo")
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == "parent done"
    child = next(r.body for r in fake.model_requests if any("CHILD-TASK" in t for t in user_texts(r)))
    assert len(_google_search(fake.model_requests[0].body)) == 1
    assert bool(_google_search(child)) is searches


def test_capability_follows_the_gemini_row():
    from ketch.websearch.capability import resolve_capability

    official = "https://generativelanguage.googleapis.com"
    assert resolve_capability("g", "gemini", "gemini", official, "gemini-3-pro-preview").protocol == "gemini"
    assert resolve_capability("g", "gemini", "gemini", None, "gemini-3-flash-preview").protocol == "gemini"
    # Gemini 2.x cannot combine Google Search with function tools, which every ketch turn sends.
    assert not resolve_capability("g", "gemini", "gemini", official, "gemini-2.5-flash").supported
    # Even declared by metadata: the request would be refused before it is sent.
    declared = resolve_capability("g", "gemini", "gemini", "http://127.0.0.1:1", "gemini-2.5-flash",
                                  {"capabilities": {"web_search": True}})
    assert not declared.supported and "Gemini 3+" in declared.reason
    assert not resolve_capability("g", "gemini", "gemini", official, "gemma-3-27b-it").supported
    # Gemini behind an OpenAI-compatible endpoint is not the native wire: no grounding.
    assert not resolve_capability("g", "gemini", "openai-chat", official, "gemini-2.5-flash").supported


def test_a_grounded_answer_costs_the_search_fee_on_top_of_its_tokens(tmp_path, fake_provider):
    """Gemini 3 bills each unique grounding query; the SDK counts them, genai-prices prices them."""
    fake = fake_provider([Turn(text="plain", usage=(1000, 100)),
                          Turn(text="grounded", usage=(1000, 100), native_search=NativeSearch("q", SOURCES))])
    write_project_config(tmp_path, _config(fake))
    plain = next(e for e in _ketch(tmp_path, "one", "--web-search") if e["type"] == "usage")
    grounded = next(e for e in _ketch(tmp_path, "two", "--web-search") if e["type"] == "usage")
    assert (plain["input_tokens"], plain["output_tokens"]) == (grounded["input_tokens"], grounded["output_tokens"])
    assert grounded["cost_usd"] - plain["cost_usd"] == pytest.approx(0.014, abs=0.0005)


def test_gemini_2_declared_by_metadata_runs_without_search_instead_of_failing(tmp_path, fake_provider):
    fake = fake_provider([Turn(text="ok")])
    write_project_config(tmp_path, _config(fake).replace(MODEL.split(":")[1], "gemini-2.5-flash"))
    run = run_ketch(["-p", "hi", "-m", "gemini:gemini-2.5-flash", "--web-search"], tmp_path, env={"GEMINI_API_KEY": "k"})
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "ok"
    assert not _any_search(fake.model_requests[0].body)
