"""Long turns in small windows against real local servers (llama.cpp's ``llama-server`` and
llama-cpp-python's server), through the real ``ketch -p``.

The same 30-step turn as tests/test_local_windows.py (one ``read_file`` per step over 30 log files,
then an answer), at an 8k and a 4k window, on the Chat wire and, where the server offers
``/v1/responses``, on the Responses wire. A model this small does not drive 30 tool steps by itself,
so by default the steps are driven: ketch talks to a relay (tests/fakeprovider.py) that hands every
model request, unchanged but not streamed, to the real server, which counts the prompt with its own
tokenizer, enforces its own window and generates under the output cap ketch sent; the relay then
answers ketch with the next scripted ``read_file`` call (a request with tools) or with the model's
own text (the summary request, which has no tools), carrying the server's real token counts. The
window figures are therefore the real server's; only the choice of tool call is scripted.
``--drive model`` instead lets the model answer for itself through a recording pass-through proxy.

Also checks that a server that refuses to stream with tools (llama-cpp-python's) gets ketch's
non-streaming fallback and a tool turn runs to its end.

Printed per run: requests whose prompt plus output cap went over the window (and any the server
refused), answers cut at the cap or the context end, and whether the summary at 4k holds real
content (the summary request carried the files read, and the model's summary reached the next
request).

Usage (the README's local-model section has the recipe that builds both servers):

    .venv/bin/python bench/local_windows_real.py --gguf /tmp/llama/gemma-3-270m-q4_k_m.gguf \\
        --llama-server /tmp/llama/bin/llama-server --llama-cpp-python /tmp/llama/venv/bin/python
    .venv/bin/python bench/local_windows_real.py --url http://127.0.0.1:8080 --window 8192   # a running server
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn, counted_input  # noqa: E402

CAP_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
SUMMARY_MARK = "[older conversation omitted]"
FILE_NAME = re.compile(r"f\d{3}\.txt")
ZERO_WIDTH = re.compile("[\u200b-\u200d\u2060\ufeff]")
"""What pydantic-ai puts into special tokens a model wrote (``<|im_end|>``) before they are sent again."""


# ---------------------------------------------------------------- the real servers
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 900) -> tuple[int, Any]:
    """(status, parsed JSON or text) of a GET (no body) or POST to a local server."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


@dataclass
class Server:
    """A real server this bench started (or was pointed at) and the window it runs with."""

    kind: str
    root: str
    window: int
    model: str
    process: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tells_window(self) -> bool:
        """Whether the server names its window where ketch looks (llama.cpp's /props)."""
        status, props = http_json(f"{self.root}/props", timeout=10)
        return status == 200 and isinstance(props, dict) and "default_generation_settings" in props

    def offers_responses(self) -> bool:
        status, _ = http_json(f"{self.root}/v1/responses", {"model": self.model, "input": "hi", "max_output_tokens": 4})
        return status == 200


def start_server(kind: str, program: str, gguf: str, window: int, log: Path, extra: list[str] | None = None,
                 threads: int = 2) -> Server:
    port = free_port()
    if kind == "llama-server":
        argv = [program, "-m", gguf, "-c", str(window), "--host", "127.0.0.1", "--port", str(port), "--jinja",
                "-np", "1", "-t", str(threads)]
    else:
        argv = [program, "-m", "llama_cpp.server", "--model", gguf, "--n_ctx", str(window), "--host", "127.0.0.1",
                "--port", str(port), "--n_threads", str(threads), *(extra or [])]
    process = subprocess.Popen(argv, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    root = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{kind} exited with {process.returncode}; see {log}")
        try:
            status, models = http_json(f"{root}/v1/models", timeout=5)
        except OSError:
            status = 0
        if status == 200:
            model = models["data"][0]["id"] if isinstance(models, dict) and models.get("data") else "local"
            return Server(kind, root, window, model, process)
        time.sleep(0.5)
    process.terminate()
    raise SystemExit(f"{kind} did not answer within 300 s; see {log}")


def attach_server(url: str, window: int | None) -> Server:
    root = url.rstrip("/").removesuffix("/v1")
    status, props = http_json(f"{root}/props", timeout=10)
    n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx") if status == 200 and isinstance(props, dict) else None
    if not isinstance(n_ctx, int) and window is None:
        raise SystemExit("the server does not say its window (/props): give --window")
    _, models = http_json(f"{root}/v1/models", timeout=10)
    model = models["data"][0]["id"] if isinstance(models, dict) and models.get("data") else "local"
    return Server("llama-server" if isinstance(n_ctx, int) else "server", root, n_ctx if isinstance(n_ctx, int) else window or 0, model)


# ---------------------------------------------------------------- what crossed the wire
@dataclass
class Exchange:
    """One model request as the real server saw and answered it."""

    tools: bool
    cap: int | None
    stream: bool | None = None
    status: int = 0
    prompt: int | None = None
    output: int | None = None
    cut: bool = False
    text: str = ""
    error: str = ""
    fake_tokens: int = 0
    """The request as the test fake counts it at 4 characters a token (``counted_input``): the
    server's prompt count over this is the factor the fake needs to count as this server does."""


def cap_of(body: dict[str, Any]) -> int | None:
    return next((body[f] for f in CAP_FIELDS if isinstance(body.get(f), int)), None)


def read_answer(exchange: Exchange, answer: Any) -> list[tuple[str, str]]:
    """Fill the exchange from a non-streamed Chat or Responses answer; the tool calls the model made."""
    calls: list[tuple[str, str]] = []
    usage = answer.get("usage") or {}
    exchange.prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    exchange.output = usage.get("completion_tokens", usage.get("output_tokens"))
    if "choices" in answer:
        choice = (answer.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        exchange.text = message.get("content") or ""
        exchange.cut = choice.get("finish_reason") == "length"
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
    else:
        for item in answer.get("output") or []:
            if item.get("type") == "message":
                exchange.text += "".join(p.get("text", "") for p in item.get("content") or [])
            elif item.get("type") == "function_call":
                calls.append((item.get("name", ""), item.get("arguments", "")))
        exchange.cut = answer.get("status") == "incomplete"
    if exchange.cap is not None and exchange.output is not None and exchange.output >= exchange.cap:
        exchange.cut = True  # a server that says "completed" for an answer that filled the cap
    return calls


def read_stream(exchange: Exchange, raw: bytes) -> None:
    """Fill the exchange from a streamed answer's events (the last usage and ending seen)."""
    for line in raw.decode(errors="replace").splitlines():
        if not line.startswith("data:") or line.strip() == "data: [DONE]":
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            continue
        inner = event.get("response") if isinstance(event.get("response"), dict) else event
        usage = inner.get("usage") or {}
        if usage:
            exchange.prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
            exchange.output = usage.get("completion_tokens", usage.get("output_tokens"))
        for choice in event.get("choices") or []:
            exchange.cut = exchange.cut or choice.get("finish_reason") == "length"
        if inner.get("status") == "incomplete":
            exchange.cut = True
    if exchange.cap is not None and exchange.output is not None and exchange.output >= exchange.cap:
        exchange.cut = True


# ---------------------------------------------------------------- driven steps through a relay
class Driver:
    """The relay's script: each model request goes to the real server unchanged but not streamed;
    ketch gets the next scripted read (a request with tools) or the model's own text (the summary
    request), with the server's token counts."""

    def __init__(self, server: Server, steps: int, full_generation: bool = False) -> None:
        self.server, self.steps, self.step = server, steps, 0
        self.full_generation = full_generation
        self.exchanges: list[Exchange] = []
        self.summaries: list[tuple[list[str], str]] = []
        self.model_calls = 0

    def __call__(self, request: RecordedRequest) -> Turn:
        body = dict(request.body or {})
        tools = bool(body.get("tools"))
        exchange = Exchange(tools=tools, cap=cap_of(body), fake_tokens=counted_input(body, 4.0))
        self.exchanges.append(exchange)
        body["stream"] = False
        body.pop("stream_options", None)
        if tools and not self.full_generation:
            # the step's answer is replaced by the scripted call: the server counts the whole
            # prompt and generates one token (the window is judged on ketch's cap, not this one)
            for name in CAP_FIELDS:
                if name in body:
                    body[name] = 1
        status, answer = http_json(self.server.root + request.path, body)
        exchange.status = status
        if status != 200 or not isinstance(answer, dict):
            exchange.error = json.dumps(answer)[:300] if not isinstance(answer, str) else answer[:300]
            return Turn(status=status, error_body=answer if isinstance(answer, dict) else None)
        calls = read_answer(exchange, answer)
        if tools and not self.full_generation:
            exchange.cut = False  # cut at the probe's one token, not at ketch's cap
        self.model_calls += bool(calls)
        usage = (exchange.prompt or 0, exchange.output or 0)
        if not tools:
            seen = sorted(set(FILE_NAME.findall(json.dumps(request.body))))
            self.summaries.append((seen, exchange.text))
            return Turn(text=exchange.text, usage=usage, finish="length" if exchange.cut else "")
        n = self.step
        self.step += 1
        if n >= self.steps:
            return Turn(text=f"Read all {n} files.", usage=usage)
        return Turn(tool_calls=[ToolCall("read_file", {"path": f"f{n:03}.txt"})], usage=usage)


def relay(server: Server, script: Driver) -> FakeProvider:
    fake = FakeProvider([script] * (script.steps * 3 + 10), models=[server.model], strict_responses=False)

    def forward(path: str, method_post: bool) -> Any:
        def answer(body: Any) -> Any:
            _, value = http_json(server.root + path, body if method_post else None, timeout=60)
            return value
        return answer

    status, _ = http_json(f"{server.root}/props", timeout=10)
    if status == 200:
        fake.serve_json("/props", forward("/props", False))
        fake.serve_json("/tokenize", forward("/tokenize", True))
    fake.serve_json("/v1/models", forward("/v1/models", False))
    return fake.start()


# ---------------------------------------------------------------- a recording pass-through proxy
class Proxy(ThreadingHTTPServer):
    """Passes every request to the real server as it is, streaming the answer back, and keeps
    what crossed (for the model-driven runs and the fallback check)."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream = upstream.removeprefix("http://")
        self.exchanges: list[Exchange] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        self._pass()

    def do_POST(self) -> None:
        self._pass()

    def _pass(self) -> None:
        proxy: Proxy = self.server  # type: ignore[assignment]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        model_call = self.command == "POST" and self.path.rstrip("/").endswith(("/chat/completions", "/responses"))
        exchange = Exchange(tools=bool(body.get("tools")), cap=cap_of(body), stream=bool(body.get("stream")))
        if model_call:
            proxy.exchanges.append(exchange)
        upstream = http.client.HTTPConnection(proxy.upstream, timeout=1800)
        headers = {"Content-Type": "application/json"} if raw else {}
        try:
            upstream.request(self.command, self.path, body=raw or None, headers=headers)
            response = upstream.getresponse()
        except OSError as error:
            exchange.status, exchange.error = 502, str(error)
            self.close_connection = True
            return
        exchange.status = response.status
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        seen = bytearray()
        try:
            while chunk := response.read1(65536):
                seen += chunk
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
        except (OSError, http.client.HTTPException) as error:
            exchange.error = f"upstream broke off: {error!r}"
            self.close_connection = True
            return
        finally:
            upstream.close()
        self.wfile.write(b"0\r\n\r\n")
        if not model_call:
            return
        if response.status != 200:
            exchange.error = bytes(seen[:300]).decode(errors="replace")
        elif exchange.stream:
            read_stream(exchange, bytes(seen))
        else:
            try:
                read_answer(exchange, json.loads(seen))
            except ValueError:
                exchange.error = "answer is not JSON"


# ---------------------------------------------------------------- running ketch
def ketch_argv() -> list[str]:
    found = shutil.which("ketch", path=os.path.dirname(sys.executable))
    return [found] if found else [sys.executable, "-m", "ketch"]


def project(steps: int) -> Path:
    home = Path(tempfile.mkdtemp(prefix="ketch-real-"))
    (home / "project" / ".git").mkdir(parents=True)
    for n in range(steps):
        text = "".join(f"log {n:03} line {i:03}: event {n * 1000 + i} happened here\n" for i in range(40))
        (home / "project" / f"f{n:03}.txt").write_text(text)
    (home / "project" / "a.txt").write_text("alpha\n")
    return home


def run_ketch(home: Path, base_url: str, wire: str, model: str, prompt: str, max_steps: int = 80,
              window: int | None = None) -> list[dict[str, Any]]:
    if window is not None:  # as ketch's notice tells the user of a server that does not say its window
        (home / "config").mkdir(parents=True, exist_ok=True)
        (home / "config" / "config.toml").write_text(f"[compaction]\ncontext_window = {window}\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(HOME=str(home), KETCH_CONFIG_DIR=str(home / "config"), KETCH_DATA_DIR=str(home / "data"),
               PYDANTIC_AI_NO_BANNER="1")
    argv = [*ketch_argv(), "-p", prompt, "--output-format", "stream-json", "--max-steps", str(max_steps),
            "--base-url", base_url, "--wire", wire, "--model", model]
    proc = subprocess.run(argv, cwd=home / "project", env=env, capture_output=True, text=True, timeout=3600)
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    events.append({"type": "exit", "code": proc.returncode, "stderr": proc.stderr[-600:]})
    return events


# ---------------------------------------------------------------- reports
def over_window(exchanges: list[Exchange], window: int) -> list[tuple[int, int, int]]:
    return [(n, e.prompt or 0, e.cap or 0) for n, e in enumerate(exchanges)
            if e.prompt is not None and e.prompt + (e.cap or 0) > window]


def report(title: str, window: int, exchanges: list[Exchange], events: list[dict[str, Any]]) -> dict[str, Any]:
    over = over_window(exchanges, window)
    refused = [(n, e.status, e.error[:160]) for n, e in enumerate(exchanges) if e.status != 200]
    cut = [(n, e.output, e.cap) for n, e in enumerate(exchanges) if e.cut]
    finished = next((e for e in reversed(events) if e.get("type") in ("result", "turn_finished", "done")), events[-2] if len(events) > 1 else {})
    notices = [e.get("text", "") for e in events if e.get("type") == "notice"]
    line = {
        "run": title, "window": window, "requests": len(exchanges),
        "over_window_after_first": len([o for o in over if o[0] > 0]), "over_window": over[:8],
        "refused": refused[:5], "cut_answers": len(cut), "cut": cut[:8],
        "peak_prompt_plus_cap": max(((e.prompt or 0) + (e.cap or 0) for e in exchanges), default=0),
        "ketch_exit": events[-1]["code"], "ending": {k: finished.get(k) for k in ("reason", "text") if k in finished},
        "compacted_events": sum(1 for e in events if e.get("type") == "compacted"),
        "compactions": sum(1 for e in events if e.get("type") == "prefix_break" and str(e.get("cause")).startswith("compaction")),
        "summaries_not_kept": sum(1 for e in events if e.get("type") == "prefix_break" and "not kept" in str(e.get("cause"))),
        "errors": [e.get("message", e.get("text", ""))[:200] for e in events if e.get("type") == "error"][:3],
        "compaction_notices": [n[:200] for n in notices if "compact" in n.lower() or "summar" in n.lower()][:4],
    }
    if events[-1]["code"] != 0:
        line["stderr"] = events[-1]["stderr"]
    return line


def strings(value: Any) -> list[str]:
    """Every string in a request body (the text a summary reaches the next request as, unescaped)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def driven_run(server: Server, wire: str, steps: int, full_generation: bool, configured: bool = False,
               dump: str | None = None) -> dict[str, Any]:
    home = project(steps)
    driver = Driver(server, steps, full_generation)
    fake = relay(server, driver)
    try:
        events = run_ketch(home, fake.base_url, wire, server.model, "Read every log file in order.",
                           window=server.window if configured else None)
    finally:
        fake.stop(check=False)
    title = f"{server.kind} {wire} driven" + (" (context_window set in config)" if configured else "")
    line = report(title, server.window, driver.exchanges, events)
    line["model_made_tool_calls"] = driver.model_calls
    line["steps_done"] = min(driver.step, steps)
    later = [ZERO_WIDTH.sub("", "\n".join(strings(r.body))) for r in fake.model_requests]
    # its first line (ketch keeps a line a summary repeats once, so a longer opening may not be kept as written)
    reached = [bool(text.strip()) and any(ZERO_WIDTH.sub("", text.strip().splitlines()[0][:60]) in r for r in later)
               for _, text in driver.summaries]
    factors = sorted(e.prompt / e.fake_tokens for e in driver.exchanges if e.prompt and e.fake_tokens and e.tools)
    if factors:  # the token factor the test fake needs (its chars_per_token is 4 / factor)
        line["fake_token_factor"] = {"min": round(factors[0], 3), "median": round(factors[len(factors) // 2], 3),
                                     "max": round(factors[-1], 3)}
    line["summaries"] = {
        "count": len(driver.summaries),
        "files_in_summary_requests": sorted({len(seen) for seen, _ in driver.summaries}),
        "empty": sum(not text.strip() for _, text in driver.summaries),
        "placeholder_only": sum(text.strip() == SUMMARY_MARK for _, text in driver.summaries),
        "reached_next_request": sum(reached),
        "chars": sorted(len(text) for _, text in driver.summaries)[-3:],
        "last": driver.summaries[-1][1].strip()[:200] if driver.summaries else "",
        "requests_with_placeholder": sum(SUMMARY_MARK in r for r in later),
    }
    if dump:  # every summary the model wrote, and the last request as ketch sent it (the summary it kept)
        with open(dump, "a") as out:
            out.write(json.dumps({"run": title, "window": server.window, "summaries": [text for _, text in driver.summaries],
                                  "last_request": fake.model_requests[-1].body if fake.model_requests else None}) + "\n")
    return line


def model_run(server: Server, wire: str, steps: int) -> dict[str, Any]:
    home = project(steps)
    proxy = Proxy(server.root)
    try:
        prompt = ("Use the read_file tool to read f000.txt, then f001.txt, and so on up to "
                  f"f{steps - 1:03}.txt, one read_file call per file, then say how many you read.")
        events = run_ketch(home, proxy.url, wire, server.model, prompt)
    finally:
        proxy.shutdown()
    line = report(f"{server.kind} {wire} model-driven", server.window, proxy.exchanges, events)
    line["tool_steps"] = sum(1 for e in events if e.get("type") == "tool_call_finished")
    return line


def fallback_check(server: Server, configured: bool = False) -> dict[str, Any]:
    """One tool turn against the real server directly: a server that refuses to stream with tools
    must get the non-streaming fallback, and the turn must end."""
    home = project(0)
    proxy = Proxy(server.root)
    try:
        events = run_ketch(home, proxy.url, "openai-chat", server.model,
                           "Call the read_file tool on a.txt, then tell me what it says.", max_steps=6,
                           window=server.window if configured else None)
    finally:
        proxy.shutdown()
    return {"run": f"{server.kind} fallback" + (" (context_window set)" if configured else ""), "requests": [(e.stream, e.tools, e.status, e.error[:120]) for e in proxy.exchanges],
            "ketch_exit": events[-1]["code"], "ending": next(({k: e.get(k) for k in ("reason", "text")} for e in reversed(events)
                                                               if "reason" in e), None),
            "notices": [e.get("text", "")[:160] for e in events if e.get("type") == "notice"][:5],
            "errors": [e.get("message", "")[:300] for e in events if e.get("type") == "error"][:3],
            "tools_run": sum(1 for e in events if e.get("type") == "tool_call_finished"),
            "stderr": events[-1]["stderr"][-300:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", help="the model file the servers load")
    parser.add_argument("--llama-server", help="the llama-server program")
    parser.add_argument("--llama-cpp-python", help="a python with llama_cpp[server] installed")
    parser.add_argument("--url", help="a running server instead (its window from /props or --window)")
    parser.add_argument("--window", type=int, action="append", help="windows to run (default 8192 and 4096)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--drive", choices=("steps", "model", "both"), default="steps")
    parser.add_argument("--full-generation", action="store_true",
                        help="driven steps generate under ketch's cap too (slow); by default one token")
    parser.add_argument("--wire", action="append", choices=("openai-chat", "openai-responses"),
                        help="wires to run (default: Chat, and Responses where the server offers it)")
    parser.add_argument("--lcp-chat-format", help="llama-cpp-python's --chat_format (chatml-function-calling "
                        "makes it call tools; without it the GGUF's format is guessed)")
    parser.add_argument("--no-fallback", action="store_true", help="skip llama-cpp-python's fallback check")
    parser.add_argument("--threads", type=int, default=2, help="the servers' threads (1 on a loaded machine: "
                        "two threads that wait on each other generated 0.3 tokens a second under load 20)")
    parser.add_argument("--only-configured", action="store_true", help="for a server that does not say its "
                        "window (llama-cpp-python), only the run with context_window in the config")
    parser.add_argument("--log", default=os.path.join(tempfile.gettempdir(), "local_windows_real.log"))
    parser.add_argument("--dump", help="a JSON-lines file for each driven run's summaries in full and its last request")
    args = parser.parse_args()
    windows = args.window or [8192, 4096]
    log = Path(args.log)

    def runs(server: Server) -> None:
        offered = ["openai-chat"] + (["openai-responses"] if server.offers_responses() else [])
        wires = [w for w in offered if not args.wire or w in args.wire]
        for wire in wires:
            if args.drive in ("steps", "both"):
                told = server.tells_window()
                if told or not args.only_configured:
                    print(json.dumps(driven_run(server, wire, args.steps, args.full_generation, dump=args.dump)),
                          flush=True)
                if not told:
                    print(json.dumps(driven_run(server, wire, args.steps, args.full_generation, configured=True,
                                                 dump=args.dump)),
                          flush=True)
            if args.drive in ("model", "both"):
                print(json.dumps(model_run(server, wire, args.steps)), flush=True)

    if args.url:
        runs(attach_server(args.url, windows[0] if args.window else None))
        return
    if not args.gguf or not (args.llama_server or args.llama_cpp_python):
        parser.error("give --url, or --gguf with --llama-server and/or --llama-cpp-python")
    kinds = [("llama-server", args.llama_server), ("llama-cpp-python", args.llama_cpp_python)]
    for kind, program in kinds:
        if not program:
            continue
        for window in windows:
            extra = ["--chat_format", args.lcp_chat_format] if kind == "llama-cpp-python" and args.lcp_chat_format else []
            server = start_server(kind, program, args.gguf, window, log, extra, args.threads)
            try:
                print(json.dumps({"server": kind, "window": window, "model": server.model,
                                  "responses_wire": server.offers_responses()}), flush=True)
                runs(server)
                if kind == "llama-cpp-python" and window == windows[0] and not args.no_fallback:
                    print(json.dumps(fallback_check(server)), flush=True)
                    print(json.dumps(fallback_check(server, configured=True)), flush=True)
            finally:
                server.stop()


if __name__ == "__main__":
    main()
