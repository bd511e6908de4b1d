"""Local models with small windows: windows measured, counts calibrated, each server's dialect.

Against fakes that play a real local server's part: llama.cpp's ``/props`` (or Ollama's
``/api/show``) behind a plain ``--base-url``, a server answering 503 "Loading model" for its
first asks, llama-cpp-python's Chat rules (string ``content``, only ``max_tokens`` bounds the
output), and a tokenizer that counts more than ketch's chars/4 with the window enforced on
prompt plus output cap.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch
from servertools import strict_lines

from ketch.providers import stream_refusal

LOADING = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}


@pytest.fixture(autouse=True)
def fresh_switches() -> None:
    stream_refusal._SWITCHES.clear()


def _notices(events: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for e in events if e["type"] == "notice"]


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
@pytest.mark.parametrize("server", ["llamacpp", "ollama"])
def test_a_base_url_server_tells_its_window_and_the_cap_follows(server: str, wire: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")]) as fake:
        if server == "llamacpp":
            fake.serve_json("/props", {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1})
        else:
            fake.serve_json("/api/show", {"parameters": "num_ctx 8192", "model_info": {"qwen2.context_length": 40960}})
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path)
    assert run.code == 0, run.stderr
    events = strict_lines(run.stdout)
    assert any("context window of 8,192 tokens" in n for n in _notices(events))
    (request,) = fake.model_requests
    cap = request.body.get("max_tokens") or request.body.get("max_output_tokens")
    assert cap == 8192 // 4  # a quarter of the server's window, not the 32,000 of an assumed 128k
    assert "max_completion_tokens" not in request.body


def test_vllm_models_metadata_gives_the_window(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")], models=["m"]) as fake:
        fake.serve_json("/v1/models", {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 6000}]})
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", *adhoc(fake, "openai-chat", "m")], tmp_path)
    assert run.code == 0, run.stderr
    assert any("context window of 6,000 tokens" in n for n in _notices(strict_lines(run.stdout)))
    assert fake.model_requests[0].body["max_tokens"] == 1500


def test_a_loading_server_is_waited_out_with_a_notice(tmp_path: Path) -> None:
    """llama.cpp answers every endpoint 503 "Loading model" until the model is in memory."""
    asks = 5
    with FakeProvider([Turn(text="loaded and answering")]) as fake:
        fake.serve_json("/props", {"default_generation_settings": {"n_ctx": 8192}})
        fake.fail_path("/props", 503, LOADING, times=asks)  # then the route answers
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr
    events = strict_lines(run.stdout)
    notices = _notices(events)
    assert any("is loading its model" in n and "Loading model" in n for n in notices), notices
    assert any("has loaded" in n for n in notices), notices
    props = [r for r in fake.requests if r.path == "/props"]
    assert len(props) >= asks + 1
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "loaded and answering"


def test_a_loading_server_is_waited_out_when_its_window_is_configured_too(tmp_path: Path) -> None:
    """With context_window in the config nothing needs reading, but llama.cpp answers every
    request 503 "Loading model" until the model is in memory (the model request too, which the
    wire's few retries would not outlast): a local server is still asked until it has loaded,
    with the notices, and its configured window stands."""
    from kettle import write_project_config

    asks = 5
    write_project_config(tmp_path, "[compaction]\ncontext_window = 6000\n")
    with FakeProvider([Turn(text="loaded and answering")]) as fake:
        fake.serve_json("/props", {"default_generation_settings": {"n_ctx": 8192}})
        fake.fail_path("/props", 503, LOADING, times=asks)
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr
    events = strict_lines(run.stdout)
    notices = _notices(events)
    assert any("is loading its model" in n for n in notices) and any("has loaded" in n for n in notices), notices
    paths = [r.path for r in fake.requests]
    last_props = max(n for n, p in enumerate(paths) if p == "/props")
    first_model = min(n for n, p in enumerate(paths) if "completions" in p)
    assert paths.count("/props") == asks + 1 and last_props < first_model, paths
    assert not any("context window of 8,192" in n for n in notices), notices  # the configured window stands
    assert all(cap <= 6000 for cap in fake.output_caps if cap), fake.output_caps


def test_a_loading_server_is_asked_again_within_a_second_all_the_while(tmp_path: Path) -> None:
    """Between asks of a server loading its model ketch waits briefly at first, then at most a
    second, every time: once it has loaded, the user is not kept waiting for long."""
    from ketch.config.settings import load_config, resolve_connection
    from ketch.context.compaction import Compactor
    from ketch.providers.wiring import ServerWindowReader
    import asyncio

    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # what ketch waits, without waiting it here
        waits.append(seconds)

    asks = 7
    with FakeProvider() as fake:
        fake.serve_json("/props", {"default_generation_settings": {"n_ctx": 8192}})
        fake.fail_path("/props", 503, LOADING, times=asks)
        conn = resolve_connection(load_config(tmp_path), "fake-model", base_url=fake.base_url, wire="openai-chat")
        compactor = Compactor(connection=conn)
        reader = ServerWindowReader(conn=conn, compactor=compactor, notify=lambda level, text: None, sleep=sleep)
        asyncio.run(reader.before_run(None))
    assert compactor.window == 8192
    assert len([r for r in fake.requests if r.path == "/props"]) == asks + 1
    assert len(waits) == asks and all(0 < w <= 1.0 for w in waits) and waits == sorted(waits), waits
    assert waits[0] <= 0.1 and waits[-3:] == [1.0, 1.0, 1.0], waits


def test_a_failed_read_is_tried_again_at_the_next_turn(tmp_path: Path) -> None:
    from ketch.config.settings import load_config, resolve_connection
    from ketch.context.compaction import Compactor
    from ketch.providers.wiring import ServerWindowReader
    import asyncio

    with FakeProvider() as fake:
        conn = resolve_connection(load_config(tmp_path), "fake-model", base_url=fake.base_url, wire="openai-chat")
        compactor = Compactor(connection=conn)
        said: list[tuple[str, str]] = []
        reader = ServerWindowReader(conn=conn, compactor=compactor, notify=lambda level, text: said.append((level, text)))
        asyncio.run(reader.before_run(None))
        # a server of unknown kind often cannot say (info); on this machine, it asks for no more
        # output than a local server's smallest usual window would get
        assert compactor.window == 128_000 and said[0][0] == "info"
        assert compactor.limits.max_output == 1024 and "context_window" in said[0][1]
        fake.serve_json("/props", {"default_generation_settings": {"n_ctx": 4096}})
        asyncio.run(reader.before_run(None))
        assert compactor.window == 4096 and compactor.limits.max_output == 1024
        asyncio.run(reader.before_run(None))
    assert len([r for r in fake.requests if r.path == "/props"]) == 2  # read once it answered, not again
    assert [level for level, _ in said] == ["info", "info"]


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
def test_a_local_preset_that_cannot_say_its_window_gets_the_smallest_usual_one(wire: str, tmp_path: Path) -> None:
    """The stricter reading: a llamacpp server whose /props fails is sized as a 4k server, with a
    warning that says the window is unknown and how to set it, not as an assumed 128k."""
    from kettle import write_project_config

    with FakeProvider([Turn(text="hi")], window=4096, chars_per_token=4 / FACTOR, models=["qwen3"]) as fake:
        fake.fail_path("/props", 404, {"error": "not found"}, times=5)
        write_project_config(tmp_path, f'[connections.local]\npreset = "llamacpp"\nbase_url = "{fake.base_url}"\n'
                             f'wire = "{wire}"\n')
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", "-m", "local:qwen3"], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr
    events = strict_lines(run.stdout)
    warnings = [e["text"] for e in events if e["type"] == "notice" and e["level"] == "warning"]
    assert any("could not read the context window" in w and "assuming 4,096 tokens" in w
               and 'context_window = N' in w and '[models."local:qwen3"]' in w for w in warnings), warnings
    (request,) = fake.model_requests
    tokens, cap = fake.counted[0]
    assert cap == 1024 and tokens + cap <= 4096 and not fake.rejections, fake.counted


def _llama_cpp_python_turn(tmp_path: Path, window: int, reader: Reader) -> tuple[FakeProvider, list[dict[str, Any]]]:
    """A ``reader.steps``-step turn on Chat against a fake playing llama-cpp-python's server (its
    window named nowhere, its message rules) at ``window``, which must end done."""
    steps = reader.steps
    with FakeProvider([reader] * (steps + 40), window=window, chars_per_token=4 / FACTOR, count_usage=True,
                      strict_responses=False, llama_cpp_python=True) as fake:
        fake.serve_json("/v1/models", {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        run = run_ketch(["-p", "Read every log file in order.", "--output-format", "stream-json", "--max-steps", "80",
                         *adhoc(fake, "openai-chat")], tmp_path, env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr[-2000:] + run.stdout[-2000:]
    events = strict_lines(run.stdout)
    assert events[-1]["reason"] == "done" and events[-1]["text"] == f"Read all {steps} files.", events[-1]
    return fake, events


@pytest.mark.parametrize("configured", [False, True])
def test_llama_cpp_python_that_says_no_window_stays_inside_it(configured: bool, tmp_path: Path) -> None:
    """llama-cpp-python's server names its window nowhere (no /props, nothing in /v1/models):
    unconfigured, a --base-url on this machine asks for no more than 1,024 output tokens (not
    the 32,000 of an assumed 128k) and says how to set the window; with context_window in the
    config, a 30-step turn at 4k stays inside the window on every request."""
    from kettle import write_project_config

    steps, window = (30, 4096) if configured else (3, 8192)  # unconfigured: ketch's full profile is sent
    _write_files(tmp_path, steps)
    reader = Reader(steps)
    if configured:
        write_project_config(tmp_path, "[compaction]\ncontext_window = 4096\n")
    fake, events = _llama_cpp_python_turn(tmp_path, window, reader)
    caps = [cap for _, cap in fake.counted]
    assert caps and all(cap is not None and cap <= 1024 for cap in caps), caps
    over = [(n, tokens, cap) for n, (tokens, cap) in enumerate(fake.counted) if tokens + (cap or 0) > window]
    assert not over and not fake.rejections, (over, fake.counted)
    notices = _notices(events)
    if configured:
        assert not any("could not read the context window" in n for n in notices), notices
        assert reader.summaries and all(reader.summaries), reader.summaries
    else:
        assert any("could not read the context window" in n and "at most 1,024 output tokens" in n
                   and "context_window = N" in n for n in notices), notices


def test_a_window_learned_from_a_refusal_switches_to_the_compact_profile_within_the_turn(tmp_path: Path) -> None:
    """Seen on the real llama-cpp-python server at 4k with no window configured: ketch sends its
    full profile (the window is named nowhere), the server refuses a request as too long and names
    its 4,096 tokens; from then on the turn must fit, so the compact profile is taken in the same
    turn (with a notice), and no request after the refusal goes over the window."""
    steps, window = 12, 4096
    _write_files(tmp_path, steps)
    reader = Reader(steps)
    fake, events = _llama_cpp_python_turn(tmp_path, window, reader)
    assert fake.rejections, "the fake should have refused the full profile at 4k (else this test shows nothing)"
    assert any("using the compact profile" in n for n in _notices(events)), _notices(events)
    first_refused = min(n for n, (tokens, cap) in enumerate(fake.counted) if tokens + (cap or 0) > window)
    over = [(n, tokens, cap) for n, (tokens, cap) in enumerate(fake.counted)
            if n > first_refused and tokens + (cap or 0) > window]
    assert not over, (first_refused, over, fake.counted)
    tools_after = [sorted(t["function"]["name"] for t in r.body.get("tools") or []) for r in fake.model_requests]
    assert tools_after[-1] and set(tools_after[-1]) <= {"read_file", "edit_file", "write_file", "list_dir", "grep", "shell"}


def test_llama_cpp_python_runs_a_tool_turn_through_the_whole_answer_fallback(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    script = [Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]), Turn(text="It says alpha.")]
    with FakeProvider(script, refuse_stream_with_tools="broken", llama_cpp_python=True) as fake:
        fake.serve_json("/v1/models", {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        run = run_ketch(["-p", "read a.txt", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr + run.stdout
    events = strict_lines(run.stdout)
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "It says alpha."
    assert [r.stream for r in fake.model_requests] == [True, False, False]
    last = fake.model_requests[-1].body
    [assistant] = [m for m in last["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == "" and assistant["tool_calls"]
    assert "alpha" in tool_results(fake.model_requests[-1])[0][1]
    assert all(isinstance(cap, int) and cap > 0 for cap in fake.output_caps), fake.output_caps
    assert all("max_completion_tokens" not in r.body for r in fake.model_requests)


def test_a_stream_that_only_pings_then_ends_gets_the_whole_answer_fallback(tmp_path: Path) -> None:
    """Seen on llama-cpp-python's server (chatml-function-calling): a keep-alive comment, then a
    clean end with no event, when the model goes for a tool; not a broken answer to retry."""
    (tmp_path / "a.txt").write_text("alpha\n")
    script = [Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]), Turn(text="It says alpha.")]
    with FakeProvider(script, refuse_stream_with_tools="pinged", llama_cpp_python=True) as fake:
        run = run_ketch(["-p", "read a.txt", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr + run.stdout
    events = strict_lines(run.stdout)
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "It says alpha."
    assert [r.stream for r in fake.model_requests] == [True, False, False]
    assert any("cannot stream answers that may call tools" in n for n in _notices(events))
    assert "alpha" in tool_results(fake.model_requests[-1])[0][1]


def test_the_fake_refuses_null_content_as_llama_cpp_python_does() -> None:
    from fakeprovider import llama_cpp_python_problem

    body = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": []}]}
    assert "'messages', 1," in (llama_cpp_python_problem(body) or "")
    body["messages"][1]["content"] = ""
    assert llama_cpp_python_problem(body) is None


# ---------------------------------------------------------------- long turns in small windows
FACTOR = 1.4
"""The fake's tokenizer counts 1.4 × ketch's chars/4, as a small local model's did."""


def _write_files(root: Path, count: int, lines: int = 40) -> None:
    for n in range(count):
        body = "".join(f"log {n:03} line {i:03}: event {n * 1000 + i} happened here\n" for i in range(lines))
        (root / f"f{n:03}.txt").write_text(body)


class Reader:
    """One read per step, ``steps`` of them, then an answer; a request without tools is the
    summary call, which answers with what it was given (so its content can be checked)."""

    def __init__(self, steps: int) -> None:
        self.steps, self.step, self.summaries = steps, 0, []

    def __call__(self, req: Any) -> Turn:
        if not (req.body or {}).get("tools"):
            seen = sorted(set(__import__("re").findall(r"f\d{3}\.txt", json.dumps(req.body))))
            self.summaries.append(seen)
            return Turn(text=f"Summary: the user asked to read the logs; files read so far: {', '.join(seen)}.")
        n = self.step
        self.step += 1
        if n >= self.steps:
            return Turn(text=f"Read all {n} files.")
        return Turn(tool_calls=[ToolCall("read_file", {"path": f"f{n:03}.txt"})])


def _long_turn(tmp_path: Path, wire: str, window: int, steps: int = 30) -> tuple[FakeProvider, Reader, list[dict[str, Any]]]:
    _write_files(tmp_path, steps)
    reader = Reader(steps)
    with FakeProvider([reader] * (steps + 40), window=window, chars_per_token=4 / FACTOR, count_usage=True,
                      strict_responses=False) as fake:
        fake.serve_json("/props", {"default_generation_settings": {"n_ctx": window}})
        run = run_ketch(["-p", "Read every log file in order.", "--output-format", "stream-json", "--max-steps", "80",
                         *adhoc(fake, wire)], tmp_path, env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr[-2000:] + run.stdout[-2000:]
    return fake, reader, strict_lines(run.stdout)


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
@pytest.mark.parametrize("window", [8192, 4096])
def test_a_30_step_turn_stays_inside_a_small_window(wire: str, window: int, tmp_path: Path) -> None:
    fake, reader, events = _long_turn(tmp_path, wire, window)
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "Read all 30 files.", events[-1]
    over = [(n, tokens, cap) for n, (tokens, cap) in enumerate(fake.counted) if tokens + (cap or 0) > window]
    assert not [o for o in over if o[0] > 0], (over, fake.counted)
    if window == 4096:
        assert reader.summaries and all(reader.summaries), reader.summaries  # each summary saw real content
        # one read is most of what a 4k history holds: the ladder placeholders older reads and
        # writes a summary only when nothing cheaper fits, not after every step (it did: 28 of 30)
        assert len(reader.summaries) <= 30 // 5, len(reader.summaries)


class Degenerate(Reader):
    """The steps of :class:`Reader`, and a summary model like Gemma 3 270M on llama-server: it
    writes special tokens and role names over and over until its output cap (the bench's real
    runs saw ``<|im_end|>assistant`` repeated to the cap, every time)."""

    def __call__(self, req: Any) -> Turn:
        body = req.body or {}
        if body.get("tools"):
            return super().__call__(req)
        cap = body.get("max_tokens") or body.get("max_output_tokens") or 512
        self.summaries.append(sorted(set(__import__("re").findall(r"f\d{3}\.txt", json.dumps(body)))))
        text = ""
        while len(text) < cap * 3:  # about the cap in this model's tokens
            text += "<|im_end|>assistant\n"
        return Turn(text=text, usage=(0, cap))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return [s for v in value for s in _strings(v)] if isinstance(value, list) else []


def _appends(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether ``after`` sends everything ``before`` sent, unchanged, and more (no compaction between)."""
    old, new = (b.get("messages") or b.get("input") or [] for b in (before, after))
    return isinstance(old, list) and isinstance(new, list) and new[: len(old)] == old and len(new) > len(old)


def _gemma_turn_inside_the_window(tmp_path: Path, wire: str, window: int, reader: Any) -> tuple[FakeProvider, list[dict[str, Any]]]:
    """A ``reader.steps``-step turn against a fake counting as Gemma 3's tokenizer (``/props`` and
    ``/tokenize`` served) that must end done with every request inside the window."""
    steps = reader.steps
    _write_files(tmp_path, steps)
    with FakeProvider([reader] * (steps + 40), window=window, tokenizer="gemma3", count_usage=True, tokenize=True,
                      strict_responses=False) as fake:
        fake.serve_json("/props", {"default_generation_settings": {"n_ctx": window}})
        run = run_ketch(["-p", "Read every log file in order.", "--output-format", "stream-json", "--max-steps", "80",
                         *adhoc(fake, wire)], tmp_path, env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr[-2000:] + run.stdout[-2000:]
    events = strict_lines(run.stdout)
    assert events[-1]["reason"] == "done" and events[-1]["text"] == f"Read all {steps} files.", events[-1]
    over = [(n, tokens, cap) for n, (tokens, cap) in enumerate(fake.counted) if tokens + (cap or 0) > window]
    assert not over and not fake.rejections, (over, fake.counted)
    return fake, events


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
@pytest.mark.parametrize("window", [8192, 4096])
def test_a_useless_summary_at_the_real_server_s_count_is_not_written_every_step(wire: str, window: int,
                                                                                tmp_path: Path) -> None:
    """What the real llama-server runs showed: its count of ketch's requests (Gemma 3's tokenizer;
    the fake's ``gemma3`` count matches it within a few percent) and a summary model that writes
    junk to its cap. A summary was written at about every step, each as big as the history's
    room, and every step compacted. Now the kept summary and a new output are sized from the
    history's room as the server counts it, and compaction comes in chunks: a summary at most
    every fifth step, never a compaction at two requests in a row, every request inside the
    window, and what a summary stands for still names the files read. The server also counts on
    request (``/tokenize``), which counts the tool schemas its template never sends: at 8k that
    count, kept in the ratio, left the history no room and a summary was written every step."""
    steps = 30
    reader = Degenerate(steps)
    fake, events = _gemma_turn_inside_the_window(tmp_path, wire, window, reader)
    assert len(reader.summaries) <= steps // 5, (len(reader.summaries), fake.counted)
    steps_sent = [r.body for r in fake.model_requests if (r.body or {}).get("tools")]
    compacted = [not _appends(a, b) for a, b in zip(steps_sent, steps_sent[1:])]
    assert not any(x and y for x, y in zip(compacted, compacted[1:])), "".join(".C"[x] for x in compacted)  # never two in a row
    if window == 4096:
        assert reader.summaries and all(reader.summaries), reader.summaries
        [summary] = [text for text in map(json.dumps, _strings(steps_sent[-1])) if "Summary of the earlier" in text]
        # the junk (chat-template markup alone) is left out; ketch's own record of the steps names the files read
        assert "im_end" not in summary and "came back empty" in " ".join(_notices(events)), summary
        assert "Files touched" in summary and len(__import__("re").findall(r"f0\d\d\.txt", summary)) >= 10, summary
        # every file summarized so far, from the first: the record comes before the junk (the real
        # server's 4k run kept f007-f020 only, the junk having taken two thirds of the room)
        assert "f000.txt" in summary, summary


class Silent(Reader):
    """The steps of :class:`Reader`, and a summary model that answers nothing at all (llama-cpp-python's
    Gemma 3 270M did, for one of its four summaries at 4k)."""

    def __call__(self, req: Any) -> Turn:
        if (req.body or {}).get("tools"):
            return super().__call__(req)
        self.summaries.append(sorted(set(__import__("re").findall(r"f\d{3}\.txt", json.dumps(req.body)))))
        return Turn(text="")


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
def test_an_empty_summary_is_said_and_ketch_s_record_stands_in_for_it(wire: str, tmp_path: Path) -> None:
    """A summary that comes back empty was asked again (pydantic-ai's output retry), then failed
    as "Exceeded maximum output retries (1)", and the rest of the turn pruned every request anew
    without one. Now it is asked once, a warning says it came back empty, and ketch's own record
    of the summarized steps is the summary: never empty, it names the files read."""
    steps, window = 30, 4096
    reader = Silent(steps)
    fake, events = _gemma_turn_inside_the_window(tmp_path, wire, window, reader)
    notices = _notices(events)
    assert not any("could not be written" in n for n in notices), notices
    empty = [n for n in notices if "summary of earlier work came back empty" in n]
    assert reader.summaries and len(empty) == len(reader.summaries), (notices, reader.summaries)
    summary_requests = [r for r in fake.model_requests if not (r.body or {}).get("tools")]
    # asked once: no summary request carries an earlier empty answer and a retry prompt after it
    assert all('"assistant"' not in json.dumps(r.body) for r in summary_requests), summary_requests[-1].body
    breaks = [e["cause"] for e in events if e["type"] == "prefix_break"]
    assert not any("this request only" in b for b in breaks), breaks
    steps_sent = [r.body for r in fake.model_requests if (r.body or {}).get("tools")]
    [summary] = [text for text in _strings(steps_sent[-1]) if "Summary of the earlier" in text]
    assert "Files touched" in summary and len(__import__("re").findall(r"f0\d\d\.txt", summary)) >= 10, summary


def test_a_new_output_too_big_for_a_small_window_keeps_its_head_and_tail_and_names_the_cut() -> None:
    from pydantic_ai.messages import ModelRequest, ToolReturnPart, UserPromptPart

    from ketch.context.output_fit import cut_middle, fit_new_results

    text = "\n".join(f"{i:>6}\tline {i:03} of the file" for i in range(1, 101)) + "\n"
    cut = cut_middle(text, 1_000, "read_file", 4096)
    assert cut is not None and len(cut) < 1_300
    assert cut.startswith("     1\tline 001") and cut.endswith("   100\tline 100 of the file\n")
    [note] = [line for line in cut.splitlines() if line.startswith("[…")]
    kept = [int(line.split("\t")[0]) for line in cut.splitlines() if "\t" in line]
    first_cut = next(n for n in range(1, 101) if n not in kept)
    missing = 100 - len(kept)
    assert f"{missing} lines" in note and "4,096-token context window" in note
    assert f"read_file offset={first_cut} limit={missing}" in note, note
    assert cut_middle(text, len(text), "read_file", 4096) is None  # what fits stays whole
    assert "read_file offset" not in (cut_middle(text.replace("\t", " "), 1_000, "shell", 4096) or "")
    older = ModelRequest(parts=[ToolReturnPart("read_file", text, tool_call_id="a")])
    newest = ModelRequest(parts=[ToolReturnPart("read_file", text, tool_call_id="b"), UserPromptPart("go on")])
    fitted = fit_new_results([older, newest], 1_000, 4096)
    assert fitted is not None and fitted[0] is older  # what a request already carried stays as it was
    assert fitted[1].parts[0].content == cut and fitted[1].parts[1] is newest.parts[1]
    assert fit_new_results([older, newest], 100_000, 4096) is None


def test_anthropic_thinking_fits_a_4k_window(tmp_path: Path) -> None:
    from kettle import write_project_config

    with FakeProvider([Turn(text="hi")], window=4096) as fake:
        write_project_config(tmp_path, "[compaction]\ncontext_window = 4096\n")
        run = run_ketch(["-p", "hi", "--think", "low", *adhoc(fake, "anthropic-messages", "claude-sonnet-4-5")], tmp_path,
                        env={"ANTHROPIC_API_KEY": "sk-ant-test-1234567890", "KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr
    body = fake.model_requests[0].body
    thinking = body.get("thinking") or {}
    assert body["max_tokens"] < 4096, body["max_tokens"]  # not 2,048 + 4,096
    assert thinking.get("type") == "disabled" or 1024 <= thinking.get("budget_tokens", 0) < body["max_tokens"], thinking
    assert not fake.rejections, fake.rejections  # input + max_tokens inside the window


def test_fit_output_keeps_the_full_budget_where_it_fits_and_lowers_it_where_not() -> None:
    from ketch.context.windows import fit_output, limits_for

    big = limits_for("claude-sonnet-4-5")
    assert fit_output(big, 10_000, "anthropic-messages", {"thinking": "low"})["max_tokens"] >= 2048 + 4096
    small = limits_for("claude-sonnet-4-5", context_window=4096)
    settings = fit_output(small, 1_500, "anthropic-messages", {"thinking": "low"})
    room = 4096 - small.margin - 1_500
    assert settings["max_tokens"] <= room and settings["anthropic_thinking"]["budget_tokens"] == room // 2
    assert fit_output(small, 2_800, "anthropic-messages", {"thinking": "low"})["anthropic_thinking"] == {"type": "disabled"}
    assert "anthropic_thinking" not in fit_output(small, 1_500, "openai-chat", {"thinking": "low"})


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
def test_an_answer_that_used_the_whole_cap_is_cut_though_the_server_says_completed(wire: str, tmp_path: Path) -> None:
    def at_the_cap(request: Any) -> Turn:
        body = request.body or {}
        cap = body.get("max_tokens") or body.get("max_output_tokens")
        return Turn(text="The answer goes on and", usage=(50, cap))  # reported as completed / stop

    with FakeProvider([at_the_cap]) as fake:
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path)
    assert run.code == 5, run.stderr
    events = strict_lines(run.stdout)
    assert events[-1]["reason"] == "max_tokens", events[-1]
    assert any("cut at the model's output limit" in n for n in _notices(events))


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses", "anthropic-messages"])
def test_an_empty_answer_is_reported_plainly(wire: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="")] * 3) as fake:
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path,
                        env={"ANTHROPIC_API_KEY": "sk-ant-test-1234567890"})
    [error] = [e for e in strict_lines(run.stdout) if e["type"] == "error"]
    assert "answered with nothing" in error["message"] and "retries" not in error["message"], error
    assert run.code == 1


def test_llama_cpp_python_s_validation_error_reads_as_one_line_and_names_the_message(tmp_path: Path) -> None:
    """Before string content was sent, every tool turn after the whole-answer fallback died so."""
    from fakeprovider import llama_cpp_python_problem

    problem = llama_cpp_python_problem({"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"},
                                                     {"role": "assistant", "content": None}]})
    error_body = {"error": {"message": problem, "type": "internal_server_error"}}
    script = [Turn(text="first answer"), Turn(status=500, error_body=error_body)]
    with FakeProvider(script) as fake:
        assert run_ketch(["-p", "hi", *adhoc(fake, "openai-chat")], tmp_path, env={"KETCH_MAX_RETRIES": "0"}).code == 0
        run = run_ketch(["-p", "again", "--continue", "--output-format", "stream-json", *adhoc(fake, "openai-chat")],
                        tmp_path, env={"KETCH_MAX_RETRIES": "0"})
    [error] = [e for e in strict_lines(run.stdout) if e["type"] == "error"]
    message = error["message"]
    assert "messages[2].content: Input should be a valid string" in message, message
    assert "{'" not in message and "it names messages[2] of the request" in message, message
    assert "\n" not in message


def test_a_window_too_small_even_for_the_compact_profile_says_what_does_not_fit(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="never")] * 4, window=1500, chars_per_token=4 / FACTOR) as fake:
        fake.serve_json("/props", {"default_generation_settings": {"n_ctx": 1500}})
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    events = strict_lines(run.stdout)
    [error] = [e for e in events if e["type"] == "error"]
    assert "instructions and tool schemas alone take about" in error["message"], error
    assert "larger context" in error["message"] and "Run /compact" not in error["message"]
    # the ladder had nothing to take (the prompt alone is there): no compaction is reported
    assert not [e for e in events if e["type"] == "compacted"], events
    assert any("compact profile" in n for n in _notices(events))


@pytest.mark.parametrize("tokenize", [False, True])
def test_llama_cpp_s_own_count_sizes_the_first_request(tokenize: bool, tmp_path: Path) -> None:
    """Before any answer has reported a count, /tokenize is what corrects chars/4: a first
    request of ~4,800 estimated tokens (the full profile and a long prompt; ~6,700 as the
    server counts) gets a cap that fits."""
    prompt = "Please look at this: " + ("the quick brown fox jumps over the lazy dog; " * 135)
    with FakeProvider([Turn(text="ok")] * 3, window=8192, chars_per_token=4 / FACTOR, tokenize=tokenize) as fake:
        fake.serve_json("/props", {"default_generation_settings": {"n_ctx": 8192}})
        run = run_ketch(["-p", prompt, "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    paths = [r.path for r in fake.requests]
    assert paths.index("/tokenize") < paths.index("/v1/chat/completions")
    tokens, cap = fake.counted[0]
    if tokenize:
        assert tokens + cap <= 8192 and not fake.rejections, fake.counted
        assert strict_lines(run.stdout)[-1]["reason"] == "done"
    else:  # the server cannot count: the estimate alone asks for more than the window
        assert tokens + cap > 8192, fake.counted


def test_calibration_takes_the_largest_recent_ratio_and_never_goes_below_one() -> None:
    from ketch.context.calibration import KEEP, Calibration

    c = Calibration()
    assert c.ratio == 1.0 and c.scale(1000) == 1000
    c.observe(1000, 800)  # a server that counts less keeps the estimate
    assert c.ratio == 1.0
    c.observe(1000, 1400)
    c.observe(1000, 1200)
    assert c.ratio == 1.4 and c.scale(1000) == 1400 and c.unscale(1400) == 1000
    c.observe(10, 100)  # too small a request to say anything
    c.observe(1000, None)
    c.observe(1000, True)  # not a count
    assert c.ratio == 1.4
    for _ in range(KEEP):
        c.observe(1000, 1100)
    assert c.ratio == 1.1  # the old, larger ratio has gone out of the window
    c.reset()
    assert c.ratio == 1.0 and not c.observed


@pytest.mark.parametrize("choice", ["Use the compact profile", "Keep the full profile"])
def test_the_interactive_session_offers_the_compact_profile(choice: str, tmp_path: Path) -> None:
    import asyncio
    from types import SimpleNamespace

    from ketch.frontends.assemble import build_session

    async def turn(fake: FakeProvider) -> list[Any]:
        from kettle import write_project_config

        write_project_config(tmp_path, f'[connections.local]\npreset = "llamacpp"\nbase_url = "{fake.base_url}"\n')
        args = SimpleNamespace(model="local:qwen3", cwd=str(tmp_path), add_dir=[], yolo=False)
        session = await build_session(args, interactive=True)
        events = []
        try:
            async for event in session.run_turn("hello"):
                events.append(event)
                if event.type == "ask_requested":
                    assert event.choices == ["Use the compact profile", "Keep the full profile"]
                    session.answer(event.request_id, choice)
            return events
        finally:
            await session.aclose()

    with FakeProvider([Turn(text="hi")], models=["qwen3"]) as fake:
        fake.serve_json("/props", {"default_generation_settings": {"n_ctx": 4096}})
        events = asyncio.run(turn(fake))
    assert [e for e in events if e.type == "ask_requested"]
    offered = [t["function"]["name"] for t in fake.model_requests[0].body["tools"]]
    if choice.startswith("Use"):
        assert sorted(offered) == sorted(["read_file", "edit_file", "write_file", "list_dir", "grep", "shell"])
        from fakeprovider import instructions

        text = instructions(fake.model_requests[0])
        assert "- read_file" in text and "git_status" not in text and "todo_write" not in text  # prompt and wire agree
        descriptions = [t["function"].get("description", "") for t in fake.model_requests[0].body["tools"]]
        assert all(d.count(". ") == 0 and len(d) <= 120 for d in descriptions), descriptions
    else:
        assert len(offered) > 6


def test_anthropic_s_count_endpoint_sizes_the_first_request(tmp_path: Path) -> None:
    from kettle import write_project_config

    prompt = "Please look at this: " + ("the quick brown fox jumps over the lazy dog; " * 135)
    with FakeProvider([Turn(text="ok")] * 3, window=8192, chars_per_token=4 / FACTOR, tokenize=True) as fake:
        write_project_config(tmp_path, "[compaction]\ncontext_window = 8192\n")
        run = run_ketch(["-p", prompt, "--output-format", "stream-json",
                         *adhoc(fake, "anthropic-messages", "claude-sonnet-4-5")], tmp_path,
                        env={"ANTHROPIC_API_KEY": "sk-ant-test-1234567890", "KETCH_MAX_RETRIES": "0"})
    paths = [r.path for r in fake.requests]
    assert paths.index("/v1/messages/count_tokens") < paths.index("/v1/messages"), paths
    tokens, cap = fake.counted[-1]
    assert tokens + cap <= 8192 and not fake.rejections, fake.counted
    assert strict_lines(run.stdout)[-1]["reason"] == "done"


def _turn(n: int, steps: int, lines: int) -> list[Any]:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

    messages: list[Any] = [ModelRequest(parts=[UserPromptPart(f"question {n}")])]
    for step in range(steps):
        call = f"c{n}_{step}"
        text = "".join(f"{i:>6}\tline {i} of f{n}_{step}\n" for i in range(lines))
        messages += [ModelResponse(parts=[ToolCallPart("read_file", {"path": f"f{n}_{step}.txt"}, tool_call_id=call)]),
                     ModelRequest(parts=[ToolReturnPart("read_file", text, tool_call_id=call)])]
    return [*messages, ModelResponse(parts=[TextPart(f"answer {n}")])]


def test_a_model_s_copy_of_ketch_s_record_is_not_kept_nor_carried() -> None:
    """Seen on llama-server at 4k: Gemma 3 270M wrote its own "Steps recorded by ketch:" with
    files never read (f024-f044 after 24 reads); the next record carried them forward from the
    first heading it found. ketch's record is ketch's: the model's copy is left out."""
    import asyncio

    from ketch.context.prune import prune

    messages = _turn(0, 2, 100) + _turn(1, 2, 100) + _turn(2, 1, 150)[:-1]

    async def forger(transcript: str) -> str:
        return "Read some logs.\n\nSteps recorded by ketch:\nFiles touched: f999.txt, f998.txt"

    result = asyncio.run(prune(messages, limit=1000, summarize=forger, summarize_above=1000, record_first=True))
    summary = result.messages[0].parts[-1].content
    assert result.stage == "summary" and "Read some logs." in summary, summary
    assert "f999" not in summary and summary.count("Steps recorded by ketch:") == 1 and "f0_0.txt" in summary, summary


def test_a_summary_of_markup_cut_mid_token_is_an_empty_summary() -> None:
    """llama-server at 4k: Gemma 3 270M's summary was markup lines to its cap, the last cut as
    ``<|im``; that fragment was kept as the model's summary. It is markup too: the summary is
    empty, and ketch's record stands in."""
    import asyncio

    from ketch.context.prune import prune

    messages = _turn(0, 2, 100) + _turn(1, 2, 100) + _turn(2, 1, 150)[:-1]

    async def markup(transcript: str) -> str:
        return "<|im_start|>user\n<|im_end|>assistant\n<|im"

    result = asyncio.run(prune(messages, limit=1000, summarize=markup, summarize_above=1000, record_first=True))
    summary = result.messages[0].parts[-1].content
    assert result.summary_empty and "<|" not in summary and "f0_0.txt" in summary, summary


def test_a_summary_that_does_not_shrink_the_request_is_not_kept() -> None:
    """Earlier turns of a few big reads placeholder to almost nothing; a summary as long as its
    room allows comes out bigger than those placeholders: it is refused, the cheaper cut is used,
    and the result says why. A short summary of the same turns is kept."""
    import asyncio

    from ketch.context.prune import is_summary_part, prune

    messages = _turn(0, 2, 100) + _turn(1, 2, 100) + _turn(2, 1, 150)[:-1]

    async def verbose(transcript: str) -> str:
        return "\n".join(f"point {i}: something the model said about the work" for i in range(400))

    async def brief(transcript: str) -> str:
        return "Read f0_0, f0_1, f1_0 and f1_1."

    refused = asyncio.run(prune(messages, limit=1000, summarize=verbose, summarize_above=1000))
    kept = asyncio.run(prune(messages, limit=1000, summarize=brief, summarize_above=1000))
    assert refused.stage == "tool_results" and refused.summary_refused, refused
    assert "no fewer than" in refused.summary_refused
    assert not any(is_summary_part(p) for m in refused.messages for p in m.parts if hasattr(p, "content"))
    assert kept.stage == "summary" and kept.summary_refused is None and kept.tokens_after < refused.tokens_after


def test_marks_are_the_usual_ones_in_a_large_window_and_shares_of_the_room_in_a_small_one() -> None:
    from ketch.context.marks import OUTPUT_SHARE, PRUNE_TARGET, SMALL_LOW, SMALL_OUTPUT, SMALL_SUMMARY, marks
    from ketch.context.prune_plan import SUMMARY_RESERVE_TOKENS

    def same(tokens: int) -> int:
        return tokens

    big = marks(18_350, 3_651, same)  # a 32k window with the full profile
    assert not big.small and big.high == big.summarize_above == 18_350 and big.low == int(18_350 * PRUNE_TARGET)
    assert big.output == int((18_350 - 3_651) * OUTPUT_SHARE) and big.summary == SUMMARY_RESERVE_TOKENS
    small = marks(2_294, 1_000, same)  # 4k with the compact profile: 60 % of the limit leaves 376 of 1,294
    room = 2_294 - 1_000
    assert small.small and small.low == 1_000 + int(room * SMALL_LOW)
    assert small.output == int(room * SMALL_OUTPUT) and small.summary == int(room * SMALL_SUMMARY)
    # a summary only when placeholders leave no room for one more step's output
    assert small.low < small.summarize_above <= small.high - small.output
    counted_more = marks(2_294, 1_000, lambda tokens: int(tokens / 1.3))  # the server counts 1.3 x the estimate
    assert counted_more.output < small.output and counted_more.summary < small.summary
    assert not marks(2_294, 2_200, same).small  # no step fits beside the profile: the usual marks
