"""Long single turns against a fake provider that enforces each wire's window rule.

The fake counts input more strictly than ketch (characters / 3.5 against ketch's / 4) and
refuses, as the real providers do, input plus the requested output over the window. Against
it a 300-step turn of 20 kB tool outputs at a 32k window (Responses, with the item rules on
too) and a 60-step turn at Anthropic's default window finish, and every request carries the
output of the previous call whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn, tool_results, user_texts
from kettle import run_ketch, write_project_config

from ketch.context.prune import SUMMARY_HEADER

KEY = {"OPENAI_API_KEY": "sk-test-1234567890", "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"}
PROMPT = "Read every log file in order and tell me what went wrong."
LINES = 250  # about 20 kB per file once read_file numbers the lines


def _write_files(root: Path, count: int) -> None:
    for n in range(count):
        body = "".join(f"log {n:03} line {i:03}: {'event ' * 10}{n * 1000 + i}\n" for i in range(LINES))
        (root / f"f{n:03}.txt").write_text(body)


def _read_output(root: Path, n: int) -> str:
    """What read_file returns for file n: every line, numbered."""
    lines = (root / f"f{n:03}.txt").read_text().splitlines()
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, start=1))


class Reader:
    """The scripted model: one read per step, ``steps`` of them, then an answer; a request
    without tools is the summary call."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.step = 0
        self.summaries = 0

    def __call__(self, req: RecordedRequest) -> Turn:
        if not (req.body or {}).get("tools"):
            self.summaries += 1
            return Turn(text=f"Summary {self.summaries}: the user asked to read the logs; {self.step} files read so far.")
        n = self.step
        self.step += 1
        if n >= self.steps:
            return Turn(text=f"Read all {n} files.")
        return Turn(reasoning=f"Next I read file {n}.", tool_calls=[ToolCall("read_file", {"path": f"f{n:03}.txt"})])


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _check_every_step(root: Path, fake: FakeProvider, steps: int) -> None:
    turn_requests = [r for r in fake.model_requests if (r.body or {}).get("tools")]
    assert len(turn_requests) == steps + 1
    for k, req in enumerate(turn_requests):
        texts = user_texts(req)
        assert any(PROMPT in t for t in texts), f"request {k} lost the user's prompt"
        if k == 0:
            continue
        results = tool_results(req)
        assert results, f"request {k} carries no tool result"
        assert results[-1][1] == _read_output(root, k - 1), f"request {k} lost the output of the call it answers"


def test_300_steps_of_20_kb_at_a_32k_window_on_responses(tmp_path: Path) -> None:
    steps = 300
    _write_files(tmp_path, steps)
    reader = Reader(steps)
    with FakeProvider([reader] * (steps + 80), window=32_768) as fake:
        write_project_config(
            tmp_path,
            'model = "openai:gpt-5"\n'
            f"max_steps = {steps + 5}\n"
            "[connections.openai]\n"
            'preset = "openai"\n'
            'wire = "openai-responses"\n'
            f'base_url = "{fake.base_url}"\n'
            "max_retries = 0\n"
            "context_window = 32768\n",
        )
        run = run_ketch(["-p", PROMPT, "--output-format", "stream-json"], tmp_path, env=KEY)
    assert run.code == 0, run.stderr[-2000:]
    events = _events(run.stdout)
    assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "done", events[-1]
    assert events[-1]["text"] == f"Read all {steps} files."
    assert not fake.rejections, fake.rejections  # neither the window nor the item rules
    _check_every_step(tmp_path, fake, steps)
    assert reader.summaries >= 1, "a 300-step turn at 32k must have summarized its own steps"
    # Every request asked for an output the window had room for.
    for tokens, output in fake.counted:
        assert output is not None and tokens + output <= 32_768
    # After an in-turn summary the turn's prompt leads it verbatim, then the summary.
    last = [r for r in fake.model_requests if (r.body or {}).get("tools")][-1]
    texts = user_texts(last)
    assert texts[0] == PROMPT and texts[1].startswith(SUMMARY_HEADER.strip()), texts[:2]
    files = texts[1].split("Files touched: ", 1)[1].splitlines()[0].split(", ")
    assert len(files) >= 10 and files == sorted(files), files  # carried from summary to summary, in order


def test_60_steps_of_20_kb_at_anthropics_default_window(tmp_path: Path) -> None:
    steps = 60
    _write_files(tmp_path, steps)
    reader = Reader(steps)
    with FakeProvider([reader] * (steps + 20), window=200_000) as fake:
        write_project_config(
            tmp_path,
            'model = "anthropic:claude-sonnet-4-5"\n'
            f"max_steps = {steps + 5}\n"
            "[connections.anthropic]\n"
            'preset = "anthropic"\n'
            f'base_url = "{fake.base_url.removesuffix("/v1")}"\n'
            "max_retries = 0\n",
        )
        run = run_ketch(["-p", PROMPT, "--output-format", "stream-json"], tmp_path, env=KEY)
    assert run.code == 0, run.stderr[-2000:]
    events = _events(run.stdout)
    assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "done", events[-1]
    assert not fake.rejections, fake.rejections
    _check_every_step(tmp_path, fake, steps)
    sent = [r.body["max_tokens"] for r in fake.model_requests if (r.body or {}).get("tools")]
    assert set(sent) == {32_000}, set(sent)
    assert max(tokens + output for tokens, output in fake.counted) <= 200_000
    # The history had to be pruned: 60 × 20 kB is far over the window.
    assert any(e["type"] == "compacted" for e in events)


def test_the_window_rule_of_the_fake_refuses_like_anthropic(tmp_path: Path) -> None:
    """Control: without ketch's arithmetic (a tiny window) the fake does refuse, in Anthropic's shape."""
    with FakeProvider([Turn(text="never")], window=500) as fake:
        write_project_config(
            tmp_path,
            'model = "anthropic:claude-sonnet-4-5"\n'
            "[connections.anthropic]\n"
            'preset = "anthropic"\n'
            f'base_url = "{fake.base_url.removesuffix("/v1")}"\n'
            "max_retries = 0\n",
        )
        run = run_ketch(["-p", "hello", "--output-format", "json"], tmp_path, env=KEY)
    assert run.code != 0
    assert fake.rejections["context_length_exceeded"] == 2  # the request and its one harder retry
    assert "context window" in run.stdout + run.stderr
