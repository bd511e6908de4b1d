"""A scripted language server over stdio for the diagnostics tests (our own LSP framing).

Modes (first argument):
  silent   reads everything and never answers (a hung server)
  stubborn as silent, and stays running after its input closes (only a signal ends it)
  crash    answers the handshake, then exits with code 3 when a file is opened
  pull     offers pull diagnostics (``textDocument/diagnostic``) and never pushes: each line
           holding ``BAD`` is an error
  mute     answers the handshake, then nothing (a server hung after starting)
  push     pushes the same diagnostics, without a version, after each open or change (spelling
           ``%40`` in the uri as ``@``), after a push for a file nobody opened
With FAKE_LSP_TOUCH set, the server first tries to write that file (a sandboxed one cannot).
Every message received is appended, one JSON line each, to the file named by FAKE_LSP_LOG
when that variable is set (so a test can see what the client sent).
"""

from __future__ import annotations

import json
import os
import sys
import time


def read_message(stream):
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.lower() == "content-length":
            length = int(value.strip())
    return json.loads(stream.read(length))


def send(message):
    body = json.dumps(message).encode("utf-8")
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def problems(text):
    return [
        {"range": {"start": {"line": n, "character": line.index("BAD")}, "end": {"line": n, "character": line.index("BAD") + 3}},
         "severity": 1, "source": "fake", "message": "BAD is not allowed here"}
        for n, line in enumerate(text.splitlines()) if "BAD" in line
    ]


def main() -> None:
    mode = sys.argv[1]
    touch = os.environ.get("FAKE_LSP_TOUCH")
    if touch:
        try:
            with open(touch, "w", encoding="utf-8") as handle:
                handle.write("written by the language server\n")
        except OSError:
            pass
    log = os.environ.get("FAKE_LSP_LOG")
    texts = {}
    while True:
        message = read_message(sys.stdin.buffer)
        if message is None:
            if mode == "stubborn":
                time.sleep(3600)
            return
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"method": message.get("method"), "env_keys": sorted(os.environ)}) + "\n")
        if mode in ("silent", "stubborn"):
            continue
        method = message.get("method")
        params = message.get("params") or {}
        if method == "initialize":
            capabilities = {"textDocumentSync": {"openClose": True, "change": 1}}
            if mode in ("pull", "mute"):
                capabilities["diagnosticProvider"] = {"interFileDependencies": False, "workspaceDiagnostics": False}
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": capabilities}})
        elif method == "shutdown":
            send({"jsonrpc": "2.0", "id": message["id"], "result": None})
        elif method == "exit":
            return
        elif method in ("textDocument/didOpen", "textDocument/didChange"):
            if mode == "crash":
                sys.stderr.write("fake server: giving up\n")
                sys.exit(3)
            document = params["textDocument"]
            text = document["text"] if method.endswith("didOpen") else params["contentChanges"][-1]["text"]
            texts[document["uri"]] = text
            if mode == "push":
                time.sleep(0.05)
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
                      "params": {"uri": "file:///elsewhere/other.txt", "diagnostics": problems("BAD")}})
                send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",  # its own spelling of the uri
                      "params": {"uri": document["uri"].replace("%40", "@"), "diagnostics": problems(text)}})
        elif mode == "mute":
            continue
        elif method == "textDocument/diagnostic":
            uri = params["textDocument"]["uri"]
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"kind": "full", "items": problems(texts.get(uri, ""))}})
        elif "id" in message:
            send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "not here"}})


if __name__ == "__main__":
    main()
