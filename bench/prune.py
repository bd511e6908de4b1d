"""Benchmark: pruning a long history, and assembling per-step instructions.

Run: ``.venv/bin/python bench/prune.py``. Builds a 5,000-message history of about two
million characters (reasoning-model steps with ids, signatures, tool calls and results,
some hosted web searches), times the pruning ladder at a 128k-token window (target
< 50 ms) and at two other budgets, and times ``build_instructions`` on a realistic state
(target median < 5 ms). Every prune run gets a freshly built history, so each time is a
cold prune of a history it has never seen; all times are CPU time (``time.process_time``).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ketch.context.budget import context_window, estimate_messages, token_limit  # noqa: E402
from ketch.core.prompt import (  # noqa: E402
    CachedGitSummary,
    InstructionFileCache,
    PromptState,
    build_instructions,
    git_summary,
)  # noqa: E402
from ketch.context.prune import prune  # noqa: E402

MESSAGES = 5_000


def build_history() -> list[ModelMessage]:
    """~5,000 messages, ~2M characters: 50 turns of 49 tool steps each, plus prompts."""
    msgs: list[ModelMessage] = []
    n = 0
    turn = 0
    while len(msgs) < MESSAGES - 2:
        msgs.append(ModelRequest(parts=[UserPromptPart(f"Turn {turn}: please fix the failing test in module {turn}.")]))
        for step in range(49):
            if len(msgs) >= MESSAGES - 1:
                break
            n += 1
            cid = f"call_{n}"
            parts: list = [
                ThinkingPart("Let me look at the next file. " * 4, id=f"rs_{n}", signature="gAAAA" * 40, provider_name="openai"),
                TextPart(f"Reading module {n}.", id=f"msg_{n}", provider_name="openai"),
            ]
            if step == 0:
                parts += [
                    NativeToolCallPart("web_search", {"query": f"error {n}"}, tool_call_id=f"ws_{n}", provider_name="openai"),
                    NativeToolReturnPart("web_search", {"status": "completed", "sources": [{"url": f"https://e.example/{n}"}]}, tool_call_id=f"ws_{n}", provider_name="openai"),
                ]
            parts.append(ToolCallPart("read_file", {"path": f"src/pkg/mod_{n}.py"}, tool_call_id=cid, id=f"fc_{n}", provider_name="openai"))
            msgs.append(ModelResponse(parts=parts, provider_name="openai"))
            body = "".join(f"    line {i} of module {n} = compute(value_{i})\n" for i in range(9))
            msgs.append(ModelRequest(parts=[ToolReturnPart("read_file", body, tool_call_id=cid)]))
        msgs.append(ModelResponse(parts=[TextPart(f"Fixed module {turn}.", id=f"msg_end_{turn}", provider_name="openai")], provider_name="openai"))
        turn += 1
    return msgs[:MESSAGES]


def history_chars(msgs: list[ModelMessage]) -> int:
    from ketch.context.budget import message_chars

    return sum(message_chars(m) for m in msgs)


async def instant_summary(text: str) -> str:
    return f"Summary of {len(text):,} characters of earlier work."


def calibration_ms() -> float:
    """CPU time of a fixed pure-Python loop: about 20-25 ms on an idle modern core.

    Printed beside the results because the benchmark machine is shared: when this reads
    higher, every other number is inflated by the same factor.
    """
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        [None for _ in range(1_000_000)]
        best = min(best, time.process_time() - t0)
    return best * 1000


TARGET_MS = 50.0
"""Target for the cold prune of the 5,000-message history at a 128k window (median CPU)."""
INSTRUCTIONS_TARGET_MS = 5.0
RUNS = 9


async def time_prune(limit: int, history=build_history, runs: int = RUNS) -> tuple[list[float], dict[str, list[float]], object]:
    """CPU time of ``prune`` awaited inside a running loop, as the session calls it.

    Every run prunes a history built afresh for it (outside the timed region), so nothing
    one run computed or touched is reused by the next: each number is a cold prune.
    """
    times: list[float] = []
    stages: dict[str, list[float]] = {}
    result = None
    for _ in range(runs):
        msgs = history()
        if inspect.isawaitable(msgs):
            msgs = await msgs
        result = None  # the previous run's output is freed outside the timed region
        gc.collect()  # start each run clean, as a session step would between requests
        timings: dict[str, float] = {}
        t0 = time.process_time()
        result = await prune(msgs, limit=limit, summarize=instant_summary, timings=timings)
        times.append(time.process_time() - t0)
        for name, seconds in timings.items():
            stages.setdefault(name, []).append(seconds)
    return times, stages, result


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.1f} ms, min {min(values) * 1000:.1f} ms"


def bench_prune() -> None:
    msgs = build_history()
    limit = token_limit(context_window("gpt-4o"))
    total = estimate_messages(msgs)
    print(f"history: {len(msgs):,} messages, {history_chars(msgs):,} chars, ~{total:,} tokens (built afresh for every run)")
    cases = (
        ("128k window, ladder to summary", limit),
        ("budget 1/3, tool-result stage", total // 3),
        ("budget 9/10, reasoning stage", total * 9 // 10),
    )
    for index, (label, lim) in enumerate(cases):
        times, stages, result = asyncio.run(time_prune(lim))
        verdict = ""
        if index == 0:
            median_ms = round(statistics.median(times) * 1000, 1)  # judged as printed
            verdict = f"  [target < {TARGET_MS:.0f} ms (median): {'ok' if median_ms < TARGET_MS else 'OVER TARGET'}]"
        print(
            f"prune cold ({label}): {_ms(times)} CPU; {result.stage}: "
            f"{result.tokens_before:,} → {result.tokens_after:,} tokens, {len(result.messages):,} messages{verdict}"
        )
        if index == 0:
            print("    per stage (median CPU): " + ", ".join(
                f"{name} {statistics.median(values) * 1000:.1f} ms" for name, values in stages.items()
            ) + " (plan: count every message; price: placeholders; summary: transcript + summarize; rebuild: new history)")
    # The steady state: the session keeps the pruned history, so the next step prunes a
    # history that is already thinned (a slightly lower limit forces a real pass).
    async def pruned_history() -> list[ModelMessage]:
        return (await prune(build_history(), limit=cases[1][1], summarize=instant_summary)).messages

    times, _, result = asyncio.run(time_prune(cases[1][1] - 2_000, history=pruned_history))
    print(f"prune (next step, already pruned history): {_ms(times)} CPU; {result.stage}")


def make_project(root: Path) -> Path:
    (root / "AGENTS.md").write_text("# Project rules\n" + "- Use type hints everywhere.\n" * 60)
    cwd = root / "src" / "pkg"
    cwd.mkdir(parents=True)
    (root / "src" / "CLAUDE.md").write_text("Source tree notes.\n" * 30)
    (cwd / "KETCH.md").write_text("Package-specific guidance.\n" * 20)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return cwd


def bench_instructions() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cwd = make_project(root)
        git = CachedGitSummary(root)
        tools = [(f"tool_{i}", f"Does thing number {i}.\nMore detail that is not shown.") for i in range(24)]
        todo = {"items": ["[x] read the failing test", "[ ] fix the parser", "[ ] run the suite"]}
        times = []
        files = InstructionFileCache()  # one per session, so unchanged files are not re-read
        for step in range(200):
            todo["items"].append(f"[ ] step {step}")
            git.new_step()
            git()  # the session's one git run per step, outside the timed assembly
            state = PromptState(
                cwd=cwd,
                root=root,
                tools=tools,
                task_list=lambda: "\n".join(todo["items"][-20:]),
                memory="- The user prefers pytest.\n" * 20,
                skills="- release: how to cut a release\n" * 15,
                agent_prompt="You are in build mode.",
                git=git,
                files=files,
            )
            t0 = time.perf_counter()
            text = build_instructions(state)
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(10):
            git_summary(root)
        git_ms = (time.perf_counter() - t0) / 10 * 1000
    median_ms = round(statistics.median(times) * 1000, 2)  # judged as printed
    print(
        f"instructions: median {median_ms:.2f} ms per step "
        f"(p95 {sorted(times)[int(len(times) * 0.95)] * 1000:.2f} ms, {len(text):,} chars, git cached per step); "
        f"one uncached git_summary: {git_ms:.1f} ms  "
        f"[target < {INSTRUCTIONS_TARGET_MS:.0f} ms (median): {'ok' if median_ms < INSTRUCTIONS_TARGET_MS else 'OVER TARGET'}]"
    )


if __name__ == "__main__":
    print(f"calibration: {calibration_ms():.1f} ms for a 1M-step list comprehension (idle ≈ 20-25 ms)")
    bench_prune()
    bench_instructions()
    print(f"calibration after: {calibration_ms():.1f} ms")
