"""Benchmark: how much of ketch's input the providers' prompt caches serve, and what it costs.

Run: ``.venv/bin/python bench/prompt_cache.py [--scenario session|long200k|long32k|all]
[--wire openai-chat,openai-responses,anthropic-messages,gemini] [--openai-model gpt-5.6] [--breakdown] [--json]``.

The OpenAI wires run twice, labelled: on ketch's default OpenAI model (``gpt-5``, the first-run
default: OpenAI's pre-5.6 caching, 128-token increments, free writes) and on ``--openai-model``
(default ``gpt-5.6``: explicit breakpoints, exact prefixes, writes billed at 1.25x); ``none``
runs the default model only.

The real ``ketch -p --yolo`` (a child process) runs scripted sessions against the fake provider
with prompt-cache accounting on (``tests/fake_cache.py``: each provider's documented rules, the
fake's own tokenizer: 4 characters a token of a canonical serialization, each JSON escape counted
as the one character it stands for). The project is a git repository, so the state a request
describes moves as in real work. Titles and checkpoints
are off (an extra small request; no effect on requests).

Scenarios:

- ``session``: 52 steps in two headless turns (the second ``--continue``s the first): file
  reads, edits, shell commands printing 2-5 kB, a ``todo_write`` every fifth step.
  Target (issue 30): >= 97 % of input served from the cache over requests 2..N, on every wire.
- ``long200k``: one turn of 300 shell steps of 2-5 kB at a 200k window. Target >= 90 %.
- ``long32k``: one turn of 300 ``read_file`` steps of 20 kB at a 32k window (no target: every
  compaction rewrites the history, and at 32k one comes every few steps).

Per wire it prints: requests, the cached share of input over requests 2..N and its ceiling (the
share left when each request's growth over the previous one, its new step, is all that is not
read: what the script allows a client that only appends), tokens written
(Anthropic, OpenAI from GPT-5.6), the input cost with the cache against the same input without it (genai-prices'
prices for the model: cache reads, writes (Anthropic's 5-minute rate)), ketch's own reported session cost, and the
requests that broke the prefix (did not start with a whole earlier request) with where.
``--breakdown`` adds where the input not read from the cache comes from (``cache_breakdown.py``:
tool outputs, the model's own messages, the user's prompt, ketch's reminders by section, the
wire's framing, what the cache's granularity and minimums lose, prefix breaks).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from cache_breakdown import breakdown, lines  # noqa: E402
from fake_cache import Counts, PromptCache  # noqa: E402
from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn  # noqa: E402

WIRES: dict[str, tuple[str, str, str, str]] = {
    # wire: (connection preset, model, genai-prices provider, base-url suffix)
    "openai-chat": ("openai", "gpt-5", "openai", "/v1"),  # gpt-5: frontends.first_run's OpenAI default
    "openai-responses": ("openai", "gpt-5", "openai", "/v1"),
    "anthropic-messages": ("anthropic", "claude-sonnet-4-5", "anthropic", ""),
    "gemini": ("gemini", "gemini-2.5-flash", "google", ""),
}
MODEL_WIRES = ("chat", "responses", "anthropic", "gemini")
"""The fake's names of the model endpoints (the requests the cache accounts for)."""
KEYS = {"OPENAI_API_KEY": "sk-bench-1234567890", "ANTHROPIC_API_KEY": "sk-ant-bench-1234567890",
        "GEMINI_API_KEY": "bench-gemini-key"}


@dataclass(frozen=True)
class Scenario:
    name: str
    turns: tuple[int, ...]
    """Steps per headless turn."""
    kind: str
    """'mixed' (reads, edits, shell, todos), 'shell' (2-5 kB outputs), 'read20k' (20 kB reads)."""
    window: int | None
    target: float | None


SCENARIOS = {
    "session": Scenario("session", (26, 26), "mixed", None, 0.97),
    "long200k": Scenario("long200k", (300,), "shell", 200_000, 0.90),
    "long32k": Scenario("long32k", (300,), "read20k", 32_768, None),
}


class Model:
    """The scripted model: steps of the scenario, turn by turn; a request without tools (a
    summary) is answered with a summary."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.turn = 0
        self.step_in_turn = 0
        self.step = 0
        self.summaries = 0

    def __call__(self, req: RecordedRequest) -> Turn:
        if not _has_tools(req):
            self.summaries += 1
            return Turn(text=f"Summary {self.summaries}: the user asked for the work; {self.step} steps done so far.",
                        usage=(10, 60))
        if self.step_in_turn >= self.scenario.turns[self.turn]:
            self.turn += 1
            self.step_in_turn = 0
            return Turn(text=f"Part {self.turn} is done.", usage=(10, 20))
        n = self.step
        self.step += 1
        self.step_in_turn += 1
        return Turn(reasoning=f"Step {n}: next I look at the next piece.", tool_calls=[self.action(n)], usage=(10, 40))

    def action(self, n: int) -> ToolCall:
        kind = self.scenario.kind
        if kind == "shell":
            return ToolCall("shell", {"command": f"cat logs/out{n:03}.txt"})
        if kind == "read20k":
            return ToolCall("read_file", {"path": f"big/f{n:03}.txt"})
        k = n // 5
        match n % 5:
            case 0:
                return ToolCall("read_file", {"path": f"src/mod{k:02}.py"})
            case 1:
                return ToolCall("shell", {"command": f"cat logs/out{n:03}.txt"})
            case 2:
                return ToolCall("edit_file", {"path": f"src/mod{k:02}.py", "old_string": f"VALUE_{k} = {k}\n",
                                              "new_string": f"VALUE_{k} = {k + 1000}\n"})
            case 3:
                return ToolCall("shell", {"command": f"cat logs/out{n:03}.txt"})
            case _:
                todos = [{"content": f"fix module {j}", "status": "completed" if j <= k else "pending"}
                         for j in range(k + 3)]
                return ToolCall("todo_write", {"todos": todos})


def _has_tools(req: RecordedRequest) -> bool:
    return bool((req.body or {}).get("tools"))


def make_project(root: Path, scenario: Scenario) -> None:
    rng = random.Random(30)
    (root / "src").mkdir(parents=True)
    (root / "logs").mkdir()
    steps = sum(scenario.turns)
    for k in range(steps // 5 + 1):
        body = "".join(f"def f{k}_{i}(x):\n    return x * {i} + {k}\n\n" for i in range(20))
        (root / "src" / f"mod{k:02}.py").write_text(f'"""Module {k}."""\n\nVALUE_{k} = {k}\n\n{body}')
    for n in range(steps):
        size = rng.randint(2000, 5000)
        line = f"[{n:03}] build step output: compiling unit {n} ... ok; warnings=0 "
        (root / "logs" / f"out{n:03}.txt").write_text((line * (size // len(line) + 1))[:size])
    if scenario.kind == "read20k":
        (root / "big").mkdir()
        for n in range(steps):
            (root / "big" / f"f{n:03}.txt").write_text(
                "".join(f"log {n:03} line {i:03}: {'event ' * 10}{n * 1000 + i}\n" for i in range(250)))
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)


def write_config(home: Path, wire: str, fake: FakeProvider, scenario: Scenario, model: str) -> None:
    preset, _, _, suffix = WIRES[wire]
    base = fake.base_url.removesuffix("/v1") + suffix
    lines = ["titles = false", "checkpoints = false", f'model = "{preset}:{model}"',
             f"max_steps = {max(scenario.turns) + 10}", f"[connections.{preset}]", f'preset = "{preset}"',
             f'base_url = "{base}"', "max_retries = 0"]
    if wire.startswith("openai"):
        lines.append(f'wire = "{wire}"')
    if scenario.window is not None:
        lines.append(f"context_window = {scenario.window}")
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "config.toml").write_text("\n".join(lines) + "\n")


@dataclass
class Result:
    wire: str
    scenario: Scenario
    model: str
    counts: list[Counts]
    events: list[dict[str, Any]]
    seconds: float
    error: str = ""
    bodies: list[dict[str, Any]] | None = None
    """The model requests' bodies, in order (for ``--breakdown``)."""


def run_wire(wire: str, scenario: Scenario, model_name: str | None = None) -> Result:
    model_name = model_name or WIRES[wire][1]
    model = Model(scenario)
    cache = PromptCache()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ketch-cache-bench-") as tmp:
        home, root = Path(tmp) / "home", Path(tmp) / "project"
        root.mkdir(parents=True)
        make_project(root, scenario)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(KEYS, HOME=str(home), KETCH_CONFIG_DIR=str(home / "config"), KETCH_DATA_DIR=str(home / "data"),
                   PYDANTIC_AI_NO_BANNER="1")
        events: list[dict[str, Any]] = []
        error = ""
        script = [model] * (sum(scenario.turns) * 2 + 50)
        with FakeProvider(script, cache=cache, window=scenario.window) as fake:
            write_config(home, wire, fake, scenario, model_name)
            for t in range(len(scenario.turns)):
                prompt = "Go through the modules and logs and fix what is wrong." if t == 0 else "Carry on with the rest."
                args = [sys.executable, "-m", "ketch", "-p", prompt, "--yolo", "--output-format", "stream-json"]
                if t:
                    args.append("--continue")
                proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=3600)
                events += [json.loads(line) for line in proc.stdout.splitlines() if line.strip().startswith("{")]
                if proc.returncode != 0:
                    error = f"turn {t + 1} exited {proc.returncode}: {proc.stderr.strip()[-400:]}"
                    break
            if fake.rejections:
                error += f" rejections: {dict(fake.rejections)}"
            bodies = [r.body or {} for r in fake.requests if r.wire in MODEL_WIRES]
    return Result(wire, scenario, model_name, list(cache.log), events, time.perf_counter() - started, error.strip(),
                  bodies)


def input_price(provider: str, model: str, total: int, read: int, written: int) -> float:
    from genai_prices import Usage, calc_price

    usage = Usage(input_tokens=total, cache_read_tokens=read, cache_write_tokens=written, output_tokens=0)
    return float(calc_price(usage, model, provider_id=provider).input_price)


def report(result: Result) -> dict[str, Any]:
    _, _, provider, _ = WIRES[result.wire]
    model = result.model
    rest = result.counts[1:]
    total = sum(c.total for c in rest)
    read = sum(c.read for c in rest)
    written = sum(c.written for c in result.counts)
    share = read / total if total else 0.0
    # What no client could get from the cache: each request's growth over the one before it (the
    # new step), with every earlier token read. The share the script allows an append-only client.
    growth = sum(max(0, c.total - p.total) for p, c in zip(result.counts, rest))
    ceiling = 1 - growth / total if total else 0.0
    cost = sum(input_price(provider, model, c.total, c.read, c.written) for c in result.counts)
    uncached = sum(input_price(provider, model, c.total, 0, 0) for c in result.counts)
    breaks = [(n + 1, c.diverged_at, c.has_tools) for n, c in enumerate(result.counts) if c.extends is False]
    where = Counter(_where(label) + ("" if tools else " (side request)") for _, label, tools in breaks)
    usage = [e for e in result.events if e.get("type") == "usage"]
    costs = [e.get("cost_usd") for e in usage]
    ketch_cost = None if None in costs or not costs else round(sum(costs), 4)  # per process: sum the responses
    return {
        "wire": result.wire, "model": model, "scenario": result.scenario.name, "requests": len(result.counts),
        "side_requests": sum(not c.has_tools for c in result.counts),
        "cached_share": round(share, 4), "append_only_ceiling": round(ceiling, 4), "target": result.scenario.target,
        "input_tokens_2_to_n": total, "cache_read_2_to_n": read, "cache_written": written,
        "input_cost_usd": round(cost, 4), "input_cost_uncached_usd": round(uncached, 4),
        "input_cost_vs_no_cache": round(cost / uncached, 4) if uncached else None,
        "ketch_session_cost_usd": ketch_cost,
        "ketch_cache_read_tokens": sum(e.get("cache_read_tokens", 0) for e in usage),
        "ketch_cache_write_tokens": sum(e.get("cache_write_tokens", 0) for e in usage),
        "largest_request": max((c.total for c in result.counts), default=0),
        "compactions": sum(e.get("type") == "compacted" for e in result.events),
        "prefix_breaks": len(breaks), "breaks_where": dict(where.most_common()),
        "first_breaks": [f"#{n} at {label}" for n, label, _ in breaks[:8]],
        "seconds": round(result.seconds, 1), "error": result.error,
    }


def _where(label: str) -> str:
    """A break's place, without the index: 'system', 'tools', 'messages (user)', ..."""
    head = label.split("[", 1)[0]
    kind = label.split("(", 1)[1].split(")", 1)[0] if "(" in label else ""
    return f"{head} ({kind})" if kind else head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--scenario", default="session", choices=[*SCENARIOS, "all"])
    parser.add_argument("--wire", default=",".join(WIRES))
    parser.add_argument("--json", action="store_true", help="one JSON object per wire and scenario")
    parser.add_argument("--openai-model", default="gpt-5.6",
                        help="a second OpenAI model to run the OpenAI wires on, besides ketch's default (none: only the default)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also print where the input not read from the cache comes from (cache_breakdown.py)")
    args = parser.parse_args()
    scenarios = list(SCENARIOS.values()) if args.scenario == "all" else [SCENARIOS[args.scenario]]
    failed = False
    for scenario in scenarios:
        rows = [(wire, model) for wire in args.wire.split(",") for model in dict.fromkeys(
            [WIRES[wire][1], *([args.openai_model] if wire.startswith("openai") and args.openai_model != "none" else [])])]
        for wire, model in rows:
            result = run_wire(wire, scenario, model)
            row = report(result)
            if args.breakdown:
                parts = breakdown(MODEL_WIRES[list(WIRES).index(wire)], result.bodies or [], result.counts)
                row["breakdown"] = {"not_read": parts.uncached, "reminders": parts.reminders,
                                    "reminder_sections": dict(parts.reminder_sections), **dict(parts.parts)}
            if args.json:
                print(json.dumps(row), flush=True)
                continue
            target = f" (target {scenario.target:.0%})" if scenario.target else ""
            print(f"{scenario.name:9} {wire:17} {model:17} requests {row['requests']:4} (side {row['side_requests']}), "
                  f"cached share 2..N {row['cached_share']:.1%}{target} (append-only ceiling {row['append_only_ceiling']:.1%}); input cost vs no cache "
                  f"{row['input_cost_vs_no_cache']:.1%} (${row['input_cost_usd']:.2f} / ${row['input_cost_uncached_usd']:.2f}); "
                  f"written {row['cache_written']:,}; ketch's cost {row['ketch_session_cost_usd']}; "
                  f"largest request {row['largest_request']:,}; compactions {row['compactions']}; "
                  f"breaks {row['prefix_breaks']} {row['breaks_where']}; {row['seconds']} s", flush=True)
            if args.breakdown:
                for line in lines(f"{'':45} {wire} {model}", parts):
                    print(line)
            if row["first_breaks"]:
                print(f"{'':45} first breaks: {', '.join(row['first_breaks'])}")
            if row["error"]:
                print(f"{'':45} ERROR: {row['error']}")
                failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
