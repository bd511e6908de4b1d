"""Which tools a request offers: the wire and the instructions always agree, per variant,
per configuration and per front end (headless or interactive)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn, instructions, tool_names
from kettle import adhoc, run_ketch, write_project_config

from ketch.frontends.assemble import build_session

WIRES = ["openai-chat", "openai-responses", "anthropic-messages", "gemini"]
TOOLS_HEADING = "# Tools available on this step"


def _session_args(fake: FakeProvider, cwd: Path) -> argparse.Namespace:
    return argparse.Namespace(cwd=str(cwd), base_url=fake.base_url, wire="openai-chat", model="fake-model")


def _kinds(cwd: Path) -> dict[str, str]:
    """Every tool a session is wired with, by kind (built-ins plus task, MCP …)."""

    async def build() -> dict[str, str]:
        with FakeProvider() as fake:
            session = await build_session(_session_args(fake, cwd), interactive=True)
            await session.aclose()
        return dict(session.kinds)

    return asyncio.run(build())


def listed_tools(req: RecordedRequest) -> list[str]:
    """The tool names the instructions list under their tools heading."""
    text = instructions(req)
    assert text.count(TOOLS_HEADING) == 1, "the instructions have no (single) tools section"
    section = text.split(TOOLS_HEADING, 1)[1].split("\n# ", 1)[0]
    return [line[2:].split(":", 1)[0].strip() for line in section.splitlines() if line.startswith("- ")]


def _two_steps() -> list[Turn]:
    return [Turn(tool_calls=[ToolCall("list_dir", {"path": "."})]), Turn(text="done")]


def _requests(tmp_path: Path, wire: str, *flags: str) -> list[RecordedRequest]:
    with FakeProvider(_two_steps()) as fake:
        run = run_ketch(["-p", "look around", *flags, *adhoc(fake, wire)], tmp_path)
    assert run.code == 0, run.stderr
    assert len(fake.model_requests) == 2
    return fake.model_requests


def _assert_wire_matches_prompt(requests: list[RecordedRequest]) -> list[str]:
    names = tool_names(requests[0])
    for req in requests:
        assert sorted(tool_names(req)) == sorted(listed_tools(req))
        assert tool_names(req) == names, "the tool list changed between steps of one turn"
    return names


@pytest.mark.parametrize("wire", WIRES)
def test_build_offers_every_headless_tool_and_lists_exactly_those(wire: str, tmp_path: Path) -> None:
    names = _assert_wire_matches_prompt(_requests(tmp_path, wire))
    expected = {name for name, kind in _kinds(tmp_path).items() if kind != "interactive"}
    assert set(names) == expected
    assert {"write_file", "edit_file", "shell", "web_fetch", "read_file", "grep"} <= set(names)


@pytest.mark.parametrize("wire", WIRES)
def test_plan_offers_only_reading_tools_and_lists_exactly_those(wire: str, tmp_path: Path) -> None:
    requests = _requests(tmp_path, wire, "--agent", "plan")
    names = _assert_wire_matches_prompt(requests)
    assert {"read_file", "grep", "list_dir", "glob", "git_diff"} <= set(names)
    kinds = _kinds(tmp_path)
    assert {kinds[name] for name in names} <= {"read", "meta"}
    assert {name for name, kind in kinds.items() if kind in ("read", "meta")} == set(names)
    assert not {"write_file", "edit_file", "shell", "web_fetch"} & set(names)
    assert "plan mode" in instructions(requests[0])


@pytest.mark.parametrize("agent", ["build", "plan"])
def test_disabled_tool_is_gone_from_wire_and_prompt(agent: str, tmp_path: Path) -> None:
    write_project_config(tmp_path, '[tools]\ndisabled = ["shell", "grep"]\n')
    names = _assert_wire_matches_prompt(_requests(tmp_path, "openai-chat", "--agent", agent))
    assert "shell" not in names and "grep" not in names
    assert "read_file" in names


def test_ask_is_offered_interactively_and_never_headless(tmp_path: Path) -> None:
    headless = _requests(tmp_path, "openai-chat")
    assert "ask" not in tool_names(headless[0]) and "ask" not in listed_tools(headless[0])
    assert "Use ask only" not in instructions(headless[0])

    async def interactive_turn(fake: FakeProvider) -> None:
        session = await build_session(_session_args(fake, tmp_path), interactive=True)
        try:
            async for _event in session.run_turn("look around"):
                pass
        finally:
            await session.aclose()

    with FakeProvider(_two_steps()) as fake:
        asyncio.run(interactive_turn(fake))
    interactive = _assert_wire_matches_prompt(fake.model_requests)
    assert set(interactive) == set(tool_names(headless[0])) | {"ask"}
    assert "Use ask only" in instructions(fake.model_requests[0])
