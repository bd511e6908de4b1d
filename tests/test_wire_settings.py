"""What reaches the wire: thinking fields per level, and the sticky Responses fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import run_ketch, write_project_config


def _config(root: Path, fake: FakeProvider, *, name: str, preset: str) -> None:
    base = fake.base_url if preset != "anthropic" else fake.base_url.removesuffix("/v1")
    write_project_config(root, f'[connections.{name}]\npreset = "{preset}"\nbase_url = "{base}"\nmax_retries = 0\n')


OPENAI_EFFORT = {"low": "low", "medium": "medium", "high": "high"}


@pytest.mark.parametrize("level", ["off", "low", "medium", "high", "max"])
def test_openai_chat_reasoning_effort_per_level(level: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="ok")]) as fake:
        _config(tmp_path, fake, name="openai", preset="openai")
        run = run_ketch(["-p", "hi", "-m", "openai:gpt-5", "--think", level], tmp_path, env={"OPENAI_API_KEY": "sk-test-1234567890"})
    assert run.code == 0, run.stderr
    body = fake.model_requests[0].body
    assert fake.model_requests[0].path.endswith("/chat/completions")
    if level == "off":
        assert "reasoning_effort" not in body and "reasoning" not in body
    else:
        assert body["reasoning_effort"] == OPENAI_EFFORT.get(level, body["reasoning_effort"])
        if level == "max":
            assert body["reasoning_effort"] in ("high", "xhigh")


@pytest.mark.parametrize("level", ["off", "low", "high"])
def test_openai_responses_reasoning_effort_per_level(level: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="ok")]) as fake:
        _config(tmp_path, fake, name="openai", preset="openai")
        run = run_ketch(
            ["-p", "hi", "-m", "openai:gpt-5", "--wire", "openai-responses", "--think", level],
            tmp_path,
            env={"OPENAI_API_KEY": "sk-test-1234567890"},
        )
    assert run.code == 0, run.stderr
    body = fake.model_requests[0].body
    assert fake.model_requests[0].path.endswith("/responses")
    if level == "off":
        assert "effort" not in (body.get("reasoning") or {})
    else:
        assert body["reasoning"]["effort"] == level


@pytest.mark.parametrize("level", ["off", "low", "medium", "high", "max"])
def test_anthropic_thinking_budget_per_level(level: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="ok")]) as fake:
        _config(tmp_path, fake, name="anthropic", preset="anthropic")
        run = run_ketch(
            ["-p", "hi", "-m", "anthropic:claude-haiku-4-5", "--think", level],
            tmp_path,
            env={"ANTHROPIC_API_KEY": "sk-ant-test-1234567890"},
        )
    assert run.code == 0, run.stderr
    body = fake.model_requests[0].body
    if level == "off":
        assert "thinking" not in body
    else:
        assert body["thinking"]["type"] in ("enabled", "adaptive")
        if body["thinking"]["type"] == "enabled":
            assert body["thinking"]["budget_tokens"] >= 1024
    return None


def test_anthropic_budget_grows_with_level(tmp_path: Path) -> None:
    budgets = []
    for level in ("low", "medium", "high"):
        with FakeProvider([Turn(text="ok")]) as fake:
            _config(tmp_path, fake, name="anthropic", preset="anthropic")
            run = run_ketch(["-p", "hi", "-m", "anthropic:claude-haiku-4-5", "--think", level], tmp_path, env={"ANTHROPIC_API_KEY": "sk-ant-x"})
        assert run.code == 0, run.stderr
        budgets.append(fake.model_requests[0].body["thinking"].get("budget_tokens", 0))
    assert budgets == sorted(budgets) and budgets[0] < budgets[-1]


def test_openai_preset_switches_to_responses_and_stays(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    script = [Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]), Turn(text="read it")]
    with FakeProvider(script) as fake:
        fake.fail_path("/v1/chat/completions", status=400)
        _config(tmp_path, fake, name="openai", preset="openai")
        run = run_ketch(["-p", "read a.txt", "-m", "openai:gpt-5"], tmp_path, env={"OPENAI_API_KEY": "sk-test-1234567890"})
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "read it"
    paths = [r.path for r in fake.model_requests]
    assert paths[0].endswith("/chat/completions")
    assert all(p.endswith("/responses") for p in paths[1:]) and len(paths) == 3, paths


def test_third_party_connection_reports_the_400_instead(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="never")]) as fake:
        fake.fail_path("/v1/chat/completions", status=400)
        _config(tmp_path, fake, name="proxy", preset="openai-compatible")
        run = run_ketch(["-p", "hi", "-m", "proxy:gpt-5"], tmp_path)
    assert run.code == 1
    assert "HTTP 400" in run.stderr and "Traceback" not in run.stderr
    assert [r.path for r in fake.model_requests] == ["/v1/chat/completions"]


def test_retryable_failure_does_not_switch(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="never")]) as fake:
        fake.fail_path("/v1/chat/completions", status=503)
        _config(tmp_path, fake, name="openai", preset="openai")
        run = run_ketch(["-p", "hi", "-m", "openai:gpt-5"], tmp_path, env={"OPENAI_API_KEY": "sk-test-1234567890"})
    assert run.code == 1
    assert not fake.requests_to("responses")


async def test_a_model_switched_to_gets_the_responses_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session that starts on another connection, then ``/model openai:…``: when Chat Completions
    rejects the new model's request shape, it moves to Responses as a session started there does;
    and a later ``/model`` back to a third-party connection does not."""
    from types import SimpleNamespace

    from ketch.frontends.assemble import build_session
    from ketch.frontends.slash_actions import SlashActions

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890")
    with FakeProvider([Turn(text="from the proxy"), Turn(text="from responses"), Turn(text="never")]) as fake:
        write_project_config(tmp_path, (
            f'[connections.openai]\npreset = "openai"\nbase_url = "{fake.base_url}"\nmax_retries = 0\n'
            f'[connections.proxy]\npreset = "openai-compatible"\nbase_url = "{fake.base_url}"\nmax_retries = 0\n'
        ))
        args = SimpleNamespace(model="proxy:gpt-5", cwd=str(tmp_path), add_dir=[], yolo=True)
        session = await build_session(args, interactive=True)
        try:
            actions = SlashActions(lambda: session, args, tmp_path)
            first = [e async for e in session.run_turn("hi")]
            fake.fail_path("/v1/chat/completions", status=400)
            await actions.run("model", "openai:gpt-5-pro")
            second = [e async for e in session.run_turn("hi again")]
            await actions.run("model", "proxy:gpt-5")
            third = [e async for e in session.run_turn("and the proxy?")]
        finally:
            await session.aclose()
    assert first[-1].reason == "done" and second[-1].reason == "done", second[-3:]
    from ketch.protocol import events as ev

    assert "".join(e.text for e in second if isinstance(e, ev.TextDelta)) == "from responses"
    assert third[-1].reason != "done", "a third-party connection reports the 400, it does not switch"
    paths = [(r.path.rsplit("/", 1)[-1], r.body.get("model")) for r in fake.model_requests]
    assert paths == [("completions", "gpt-5"), ("completions", "gpt-5-pro"), ("responses", "gpt-5-pro"),
                     ("completions", "gpt-5")], paths


def test_the_idle_responses_switch_leaves_other_models_streams_lazy() -> None:
    """A capability that answers model-request errors makes the agent open streams eagerly; the
    switch is on every session, so it answers only for the Chat model it serves (per-step cost)."""
    from types import SimpleNamespace

    from ketch.providers.fallback import ResponsesFallback

    idle = ResponsesFallback()
    assert not idle._handles_model_request_error(None, SimpleNamespace(model=object()))
    chat = object()
    serving = ResponsesFallback(chat_model=chat)
    assert serving._handles_model_request_error(None, SimpleNamespace(model=chat))
    assert not serving._handles_model_request_error(None, SimpleNamespace(model=object()))
