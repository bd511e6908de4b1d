"""Cache reads and writes reach ketch's usage events, `--output-format json` and its cost, on every wire.

Against the fake provider with prompt-cache accounting (tests/fake_cache.py), each `usage` event
must carry the input, cache-read and cache-write tokens the wire reported, and its `cost_usd` must
be what the provider bills by its published rules: base input price for the uncached rest, cache
reads at 0.1x (Anthropic, OpenAI's GPT-5 family, Gemini 2.5), Anthropic's cache writes at 1.25x
(5 minutes) or 2x (1 hour), OpenAI's at 1.25x from GPT-5.6 on, no write charge on OpenAI's
earlier models or Gemini's implicit cache. On GPT-5.6 (both OpenAI wires) the requests carry
breakpoints and still extend each other byte for byte, and the fake reads exactly the previous request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_cache import ManualClock, PromptCache
from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn
from kettle import run_ketch, write_project_config

KEYS = {"OPENAI_API_KEY": "sk-test-1234567890", "ANTHROPIC_API_KEY": "sk-ant-test-1234567890",
        "GEMINI_API_KEY": "gemini-test-key"}

# USD per million tokens as the providers publish them, and the cache multipliers of their rules.
RULES: dict[str, dict[str, Any]] = {
    "openai-chat": {"preset": "openai", "model": "gpt-5", "input": 1.25, "output": 10.0, "read": 0.1, "write": 0.0},
    "openai-responses": {"preset": "openai", "model": "gpt-5", "input": 1.25, "output": 10.0, "read": 0.1, "write": 0.0},
    "anthropic-messages": {"preset": "anthropic", "model": "claude-sonnet-4-5", "input": 3.0, "output": 15.0,
                           "read": 0.1, "write": 1.25, "write_1h": 2.0},
    "gemini": {"preset": "gemini", "model": "gemini-2.5-flash", "input": 0.30, "output": 2.50, "read": 0.1, "write": 0.0},
    # GPT-5.6: $4 / $20 per million (genai-prices' gpt-5.6-sol, under its 272k-token tier), writes 1.25x
    "openai-chat gpt-5.6": {"preset": "openai", "model": "gpt-5.6", "wire": "openai-chat", "input": 4.0,
                            "output": 20.0, "read": 0.1, "write": 1.25},
    "openai-responses gpt-5.6": {"preset": "openai", "model": "gpt-5.6", "wire": "openai-responses", "input": 4.0,
                                 "output": 20.0, "read": 0.1, "write": 1.25},
}
STEPS = 6


def billed(rule: dict[str, Any], total: int, read: int, written: int, output: int, written_1h: int = 0) -> float:
    """One response's USD by the provider's rules."""
    uncached = total - read - written
    write_units = (written - written_1h) * rule["write"] + written_1h * rule.get("write_1h", 0.0)
    return (uncached * rule["input"] + read * rule["input"] * rule["read"] + write_units * rule["input"]
            + output * rule["output"]) / 1e6


def configure(root: Path, case: str, fake: FakeProvider) -> None:
    rule = RULES[case]
    wire = rule.get("wire", case)
    base = fake.base_url if wire.startswith("openai") else fake.base_url.removesuffix("/v1")
    text = (f'model = "{rule["preset"]}:{rule["model"]}"\n[connections.{rule["preset"]}]\npreset = "{rule["preset"]}"\n'
            f'base_url = "{base}"\nmax_retries = 0\n')
    if wire.startswith("openai"):
        text += f'wire = "{wire}"\n'
    write_project_config(root, text)


def script() -> Any:
    steps = iter(range(STEPS))

    def play(req: RecordedRequest) -> Turn:
        n = next(steps, None)
        if n is None:
            return Turn(text="Done.", usage=(0, 12))
        return Turn(tool_calls=[ToolCall("read_file", {"path": f"f{n}.txt"})], usage=(0, 30))

    return play


@pytest.mark.parametrize("wire", list(RULES))
def test_usage_events_carry_the_wire_cache_tokens_and_cost_by_the_billing_rules(wire: str, tmp_path: Path) -> None:
    """``wire``: a wire, or a wire and a model (the RULES case)."""
    for n in range(STEPS):
        (tmp_path / f"f{n}.txt").write_text(f"file {n}: " + "some content of the file, line after line.\n" * 70)
    cache = PromptCache(clock=ManualClock())
    with FakeProvider([script()] * (STEPS + 2), cache=cache) as fake:
        configure(tmp_path, wire, fake)
        run = run_ketch(["-p", "read the files", "--output-format", "stream-json"], tmp_path, env=KEYS)
        assert run.code == 0, run.stderr[-2000:]
        events = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
        again = run_ketch(["-p", "and once more", "--continue", "--output-format", "json"], tmp_path, env=KEYS)
        assert again.code == 0, again.stderr[-2000:]
    usages = [e for e in events if e["type"] == "usage"]
    counts = cache.log
    assert len(usages) == STEPS + 1 and len(counts) == STEPS + 2
    rule = RULES[wire]
    for event, c in zip(usages, counts):
        assert event["input_tokens"] == c.total
        assert event["cache_read_tokens"] == c.read
        assert event["cache_write_tokens"] == c.written
        assert event["cost_usd"] == pytest.approx(billed(rule, c.total, c.read, c.written, event["output_tokens"],
                                                         c.written_1h), rel=1e-9, abs=1e-12)
    # The fake did cache on this wire where its rules say it must (ketch's prompt is over every minimum
    # on OpenAI and Gemini; Anthropic caches only with a marker, which the request may or may not carry).
    if not wire.startswith("anthropic-messages"):
        assert sum(c.read for c in counts[1:]) > 0
    else:
        marked = any('cache_control' in json.dumps(r.body) for r in fake.model_requests)
        assert (sum(c.read + c.written for c in counts) > 0) == marked
    payload = json.loads(again.stdout)
    last = counts[-1]
    assert payload["usage"] == {"input_tokens": last.total, "output_tokens": 12, "cache_read_tokens": last.read,
                                "cache_write_tokens": last.written}
    assert payload["cost_usd"] == pytest.approx(billed(rule, last.total, last.read, last.written, 12, last.written_1h))
    if rule["model"] == "gpt-5.6":  # writes billed, and they happened
        assert all(c.breakpoints for c in counts) and sum(c.written for c in counts) > 0


@pytest.mark.parametrize("case", ["openai-chat gpt-5.6", "openai-responses gpt-5.6"])
def test_gpt56_requests_carry_breakpoints_and_extend_each_other_byte_for_byte(case: str, tmp_path: Path) -> None:
    """Each request's newest user or tool-result block carries a ``prompt_cache_breakpoint``, every
    marker once sent stays where it was (the history before the newest message is the previous
    request's, byte for byte), and the fake (GPT-5.6 rules) reads exactly the previous request and
    writes exactly the step's growth, over a resume too."""
    from test_prefix_stable import assert_append_only

    wire = RULES[case]["wire"]
    for n in range(STEPS):
        (tmp_path / f"f{n}.txt").write_text(f"file {n}: " + "some content of the file, line after line.\n" * 70)
    cache = PromptCache(clock=ManualClock())
    with FakeProvider([script()] * (STEPS + 2), cache=cache) as fake:
        configure(tmp_path, case, fake)
        for args in (["-p", "read the files"], ["-p", "and once more", "--continue"]):
            run = run_ketch([*args, "--output-format", "json"], tmp_path, env=KEYS)
            assert run.code == 0, run.stderr[-2000:]
        bodies = [r.body for r in fake.model_requests]
    assert len(bodies) == STEPS + 2
    assert_append_only(wire, bodies)
    key = "messages" if wire == "openai-chat" else "input"
    marks = []
    for body in bodies:
        assert body["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
        items = body[key]
        newest = max(i for i, item in enumerate(items) if item.get("role") in ("user", "tool")
                     or item.get("type") == "function_call_output")
        block = items[newest].get("content" if "role" in items[newest] else "output")
        assert block[-1]["prompt_cache_breakpoint"] == {"mode": "explicit"}
        marks.append(json.dumps(body).count('"prompt_cache_breakpoint"'))
    assert marks == sorted(marks) and marks[-1] > marks[0]
    counts = cache.log
    assert counts[0].read == 0 and counts[0].written == counts[0].total
    for before, now in zip(counts, counts[1:]):
        assert now.extends is True
        assert now.read == before.total and now.written == now.total - before.total > 0


@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_anthropic_cache_writes_and_reads_are_priced_by_their_rule(ttl: str) -> None:
    """ketch's pricing of a response that wrote (5 minutes or 1 hour) and read Anthropic's cache,
    through ketch's own Anthropic Messages model with its cache markers on."""
    import asyncio

    from pydantic_ai import Agent
    from ketch.wire.pricing import response_cost
    from ketch.wire.messages import AnthropicMessagesModel

    cache = PromptCache(clock=ManualClock())
    with FakeProvider([Turn(text="one", usage=(0, 7)), Turn(text="two", usage=(0, 9))], cache=cache) as fake:
        model = AnthropicMessagesModel("claude-sonnet-4-5", api_key="sk-ant-test",
                                       base_url=fake.base_url.removesuffix("/v1"))
        agent = Agent(model, instructions="You review code. " + "Follow the house rules carefully. " * 200,
                      model_settings={"anthropic_cache": ttl, "anthropic_cache_instructions": ttl})

        async def two() -> list[Any]:
            first = await agent.run("first question")
            second = await agent.run("second question", message_history=first.all_messages())
            return [first.all_messages()[-1], second.all_messages()[-1]]

        responses = asyncio.run(two())
    rule = RULES["anthropic-messages"]
    first, second = cache.log
    assert first.written > 0 and second.read > 0 and second.read >= first.written
    assert (first.written_1h > 0) == (ttl == "1h")
    for response, c, output in zip(responses, cache.log, (7, 9)):
        assert response.usage.input_tokens == c.total
        assert response.usage.cache_read_tokens == c.read
        assert response.usage.cache_write_tokens == c.written
        assert response_cost(response) == pytest.approx(billed(rule, c.total, c.read, c.written, output, c.written_1h))
