"""Streaming cost of the real UI on a pseudo-terminal.

By default a child runs the real ``ketch`` against the fake HTTP provider (tests/
fakeprovider.py), which streams a ~4,000-token Markdown answer with code fences as one
Chat Completions chunk per token; ``--demo`` runs ``python -m ketch.ui.demo`` instead (a
fake session, no SDK). The parent submits a prompt through the pty, reads the master side,
samples the child's CPU time, and at the end replays every byte into a pyte screen to
check the transcript. Prints: CPU share of one core, bytes per token, and (at 2,000 tok/s)
that the whole answer is in the scrollback and how fast a key is echoed. With the provider,
a shell call comes first (``--yolo``), so its result lines and the working line (elapsed
time, tokens, current tool) are drawn too. ``--background-mb N`` starts a background command
beside that shell call which prints N MB (1 KiB lines, 8 KiB every 25 ms) while the
answer streams; its figures (CPU, echo, the answer complete, ketch's peak memory) must stay within
the same targets.
Usage: .venv/bin/python bench/render.py [--rate 200] [--fast-rate 2000] [--demo] [--background-mb 1]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time

import psutil
import pyte

sys.path.insert(0, os.path.dirname(__file__))
from background_load import BACKGROUND_DONE, background_producer  # noqa: E402
from startup import STATUS, PtyChild, demo_command, isolate, real_command  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from ketch.ui.demo import END_OF_ANSWER, sample_answer, split_tokens  # noqa: E402

COLUMNS, ROWS = 120, 40
TOOL_COMMAND = "seq 1 40; echo 'a warning' >&2; exit 1"
def expected_words(answer: str) -> list[str]:
    """The words a reader sees (fence lines and Markdown markers carry none)."""
    kept = [line for line in answer.splitlines() if not line.startswith("```")]
    return re.findall(r"[A-Za-z0-9_]+", "\n".join(kept))


def screen_words(data: bytes) -> list[str]:
    """Words of scrollback + screen after replaying ``data``, from the prompt echo on."""
    screen = pyte.HistoryScreen(COLUMNS, ROWS, history=100000)
    stream = pyte.ByteStream(screen)
    stream.feed(data)
    rows = ["".join(line[x].data for x in range(COLUMNS)) for line in screen.history.top]
    rows += list(screen.display)
    start = max(i for i, row in enumerate(rows) if row.startswith("› go"))
    return re.findall(r"[A-Za-z0-9_]+", "\n".join(rows[start + 1:]))


def stream_once(rate: float, size: int, flush: float, probe_keys: bool, provider: bool = True,
                background_mb: float = 0.0) -> dict[str, float]:
    answer = sample_answer(size)
    tokens = len(split_tokens(answer))
    fake = None
    if provider:
        from fakeprovider import FakeProvider, Turn

        from fakeprovider import ToolCall

        # a command's result lines (exit code, tail, stderr marked) precede the answer
        calls = [ToolCall("shell", {"command": TOOL_COMMAND})]
        if background_mb:  # printing while the answer streams
            if os.path.exists(BACKGROUND_DONE):
                os.remove(BACKGROUND_DONE)
            calls.append(ToolCall("shell", {"command": background_producer(background_mb), "background": True}))
        call = Turn(tool_calls=calls)
        fake = FakeProvider([call, Turn(text=answer, text_pieces=split_tokens(answer), chunk_delay=1 / rate)]).start()
        child = PtyChild(real_command(fake.base_url) + ["--yolo"], COLUMNS, ROWS)
        ready = b"adhoc:fake-model"
    else:
        child = PtyChild(demo_command("--rate", str(rate), "--tokens", str(size), "--flush", str(flush)),
                         COLUMNS, ROWS)
        ready = STATUS
    try:
        child.read_until(ready, timeout=60)
        time.sleep(0.5)  # let the background Rich import finish: measure streaming only
        proc = psutil.Process(child.pid)
        cpu0 = sum(proc.cpu_times()[:2])
        start_offset = len(child.output)
        t0 = time.perf_counter()
        child.send(b"go\r")
        latencies: list[float] = []
        next_probe = t0 + 0.3
        end = END_OF_ANSWER.encode()
        deadline = t0 + tokens / rate * 3 + 20
        while True:
            now = time.perf_counter()
            if now > deadline:
                raise TimeoutError("the answer did not finish: " + repr(bytes(child.output[-1500:])))
            if probe_keys and now >= next_probe and end not in child.output[start_offset:]:
                mark = len(child.output)
                sent = time.perf_counter()
                child.send(b"Q")
                while b"Q" not in child.output[mark:]:
                    child.read(0.005)
                latencies.append(time.perf_counter() - sent)
                next_probe = time.perf_counter() + 0.2
            child.read(0.02)
            if end in child.output[start_offset:] and b"working" not in child.output[-4000:].split(end)[-1]:
                break
        wall = time.perf_counter() - t0
        cpu = sum(proc.cpu_times()[:2]) - cpu0
        peak_rss_mb = _peak_rss_mb(proc)
        data = bytes(child.output)
        streamed = len(child.output) - start_offset
    finally:
        child.close()
        if fake is not None:
            fake.stop()
    result = {"wall": wall, "cpu_share": cpu / wall, "bytes_per_token": streamed / tokens, "peak_rss_mb": peak_rss_mb}
    if background_mb:
        result["background_printed"] = float(os.path.exists(BACKGROUND_DONE))
    if latencies:
        result["echo_median_ms"] = statistics.median(latencies) * 1000
        result["echo_max_ms"] = max(latencies) * 1000
    words = expected_words(answer)
    seen = screen_words(data)
    begin = next((i for i in range(len(seen)) if seen[i:i + 8] == words[:8]), 0)
    result["transcript_complete"] = float(seen[begin:begin + len(words)] == words)
    if provider:  # the tool's result lines are there too, once
        text = " ".join(seen[:begin])
        result["transcript_complete"] *= float(text.count("exit code 1") == 1 and "stderr a warning" in text)
    return result


def _peak_rss_mb(proc: psutil.Process) -> float:
    """The process's peak resident memory so far (VmHWM), in MB."""
    try:
        with open(f"/proc/{proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--fast-rate", type=float, default=2000)
    parser.add_argument("--tokens", type=int, default=4000)
    parser.add_argument("--flush", type=float, default=0.06)
    parser.add_argument("--demo", action="store_true", help="a fake session instead of the fake HTTP provider")
    parser.add_argument("--background-mb", type=float, default=0.0,
                        help="a background command prints this many MB while the answer streams (needs the provider)")
    args = parser.parse_args()
    if args.background_mb and args.demo:
        parser.error("--background-mb needs the real ketch (not --demo)")
    provider = not args.demo
    if provider:
        isolate()
    tokens = len(split_tokens(sample_answer(args.tokens)))
    print("source:", "real ketch + the fake HTTP provider (openai-chat)" if provider else "ketch.ui.demo (fake session)")
    if args.background_mb:
        print(f"a background command prints {args.background_mb:g} MB while the answer streams")
    slow = stream_once(args.rate, args.tokens, args.flush, probe_keys=False, provider=provider, background_mb=args.background_mb)
    print(f"{tokens} tokens at {args.rate:.0f} tok/s, flush {args.flush * 1000:.0f} ms: "
          f"CPU {slow['cpu_share'] * 100:.1f}% of one core over {slow['wall']:.1f} s (target < 10%), "
          f"{slow['bytes_per_token']:.1f} bytes/token, transcript complete: {bool(slow['transcript_complete'])}, "
          f"peak memory {slow['peak_rss_mb']:.0f} MB" + _background_note(slow))
    if not provider:
        floor = stream_once(args.rate, args.tokens, 1000.0, probe_keys=False, provider=False)
        print(f"same stream with no frames until the end (the fake session and event loop alone): "
              f"CPU {floor['cpu_share'] * 100:.1f}% -> the UI's own share is about "
              f"{(slow['cpu_share'] - floor['cpu_share']) * 100:.1f}% of one core")
    fast = stream_once(args.fast_rate, args.tokens, args.flush, probe_keys=True, provider=provider, background_mb=args.background_mb)
    print(f"{tokens} tokens at {args.fast_rate:.0f} tok/s: CPU {fast['cpu_share'] * 100:.1f}%, "
          f"{fast['bytes_per_token']:.1f} bytes/token, transcript complete: {bool(fast['transcript_complete'])}, "
          f"key echo median {fast.get('echo_median_ms', float('nan')):.1f} ms, "
          f"max {fast.get('echo_max_ms', float('nan')):.1f} ms (target < 50 ms), "
          f"peak memory {fast['peak_rss_mb']:.0f} MB" + _background_note(fast))
    print(f"load average: {os.getloadavg()[0]:.2f} (2 cores; timings are noisy when others run)")


def _background_note(result: dict[str, float]) -> str:
    if "background_printed" not in result:
        return ""
    return f", background command printed all of it: {bool(result['background_printed'])}"


if __name__ == "__main__":
    main()
