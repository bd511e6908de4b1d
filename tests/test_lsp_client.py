"""The LSP client and the pool against a scripted server (tests/fake_lsp_server.py) and
against hostile bytes: framing, pull and push diagnostics, a death restarted once and then
dropped (one notice each), the key-free environment, and the config's strict ``[lsp]`` table."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from ketch.config.settings import Config, load_config
from ketch.protocol.events import LanguageServerNotice
from ketch.protocol.exceptions import ConfigError
from ketch.lsp import jsonrpc
from ketch.lsp.client import LaunchPlan
from ketch.lsp.pool import LanguageServers
from ketch.lsp.report import added, after_edit_text, parse_diagnostics
from ketch.lsp.servers import LspSettings, ServerSpec, server_for, settings_from
from ketch.tools.child_env import ChildEnv
from ketch.tools.diagnostics import launcher

FAKE_SERVER = Path(__file__).parent / "fake_lsp_server.py"


def _pool(tmp_path: Path, mode: str, *, wait: float = 30.0) -> LanguageServers:
    spec = ServerSpec("fake", (sys.executable, str(FAKE_SERVER), mode), (".txt",))
    settings = LspSettings(wait_s=wait, start_timeout_s=30.0, servers=(spec,))
    plan = LaunchPlan([sys.executable, str(FAKE_SERVER), mode], dict(os.environ), False)
    return LanguageServers(settings, tmp_path, lambda argv, cwd: plan)


# ------------------------------------------------------------------ framing


async def _frames(data: bytes) -> dict:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return await jsonrpc.read_frame(reader)


async def test_a_frame_round_trips_and_hostile_frames_close_the_channel() -> None:
    message = {"jsonrpc": "2.0", "method": "x", "params": {"text": "é"}}
    assert await _frames(jsonrpc.encode(message)) == message
    for bad in (
        b"Content-Length: 5\r\n\r\n[1,2]",  # not an object
        b"Content-Length: 3\r\n\r\nNaN",  # not JSON
        b"Content-Length: x1\r\n\r\n{}",
        b"Content-Type: a\r\n\r\n{}",  # no length
        b"Content-Length: %d\r\n\r\n{}" % (jsonrpc.MAX_BODY_BYTES + 1),
        b"Content-Length: 10\r\n\r\n{}",  # ends inside the body
        b"X: " + b"a" * (jsonrpc.MAX_HEADER_BYTES + 10) + b"\r\n\r\n{}",
    ):
        with pytest.raises(jsonrpc.ChannelClosed):
            await _frames(bad)


# ------------------------------------------------------------------ diagnostics as text


def _raw(line: int, message: str, severity: object = 1) -> dict:
    return {"range": {"start": {"line": line, "character": 0}}, "message": message, "severity": severity, "source": "s"}


def test_only_new_errors_and_warnings_are_reported_and_wrong_shapes_are_left_out() -> None:
    before = parse_diagnostics([_raw(0, "old"), _raw(1, "hint", 4)])
    after = parse_diagnostics([_raw(5, "old"), _raw(6, "new\x1b[31m one"), _raw(7, "warn", 2), _raw(8, "info", 3),
                               _raw(9, "bool", True), {"message": "no range"}, _raw(-1, "negative"), "text"])
    new, gone = added(before, after)
    assert [(d.line, d.message, d.severity) for d in new] == [(7, "new [31m one", 1), (8, "warn", 2)]
    assert gone == 0
    text = after_edit_text("py", "a.py", before, after)
    assert text.splitlines() == ["The py language server reports 2 new problems in a.py:", "a.py:7:1: error: new [31m one [s]", "a.py:8:1: warning: warn [s]"]
    assert after_edit_text("py", "a.py", after, before) == "(2 problems the py language server reported before this edit no longer appear.)"


def test_a_flood_of_diagnostics_is_bounded() -> None:
    flood = parse_diagnostics([_raw(n, "x" * 5000) for n in range(5000)])
    text = after_edit_text("py", "a.py", (), flood)
    assert len(text) < 5000 and text.endswith("more)")
    assert "python" not in text and text.startswith("The py language server reports 1000 new problems")


# ------------------------------------------------------------------ a server's life


async def test_pull_diagnostics_report_the_edit_and_the_fix(tmp_path: Path) -> None:
    pool, events = _pool(tmp_path, "pull"), []
    target = tmp_path / "a.txt"
    try:
        broke = await pool.after_edit(target, "a.txt", "fine\n", "fine\nBAD here\n", events.append)
        fixed = await pool.after_edit(target, "a.txt", "fine\nBAD here\n", "fine\n", events.append)
        now = await pool.current(target, "a.txt", "fine\n", events.append)
    finally:
        await pool.aclose()
    assert broke == "The fake language server reports 1 new problem in a.txt:\na.txt:2:1: error: BAD is not allowed here [fake]"
    assert fixed == "(1 problem the fake language server reported before this edit no longer appears.)"
    assert now == "The fake language server reports no errors or warnings in a.txt."
    assert events == []


async def test_unversioned_pushes_are_matched_to_the_change_they_follow(tmp_path: Path) -> None:
    pool, events = _pool(tmp_path, "push"), []
    target = tmp_path / "a@b.txt"
    try:
        first = await pool.after_edit(target, "a.txt", None, "BAD\n", events.append)
        second = await pool.after_edit(target, "a.txt", "BAD\n", "BAD\nBAD again\n", events.append)
    finally:
        await pool.aclose()
    assert first.startswith("The fake language server reports 1 new problem") and "a.txt:1:1" in first
    assert second.startswith("The fake language server reports 1 new problem") and "a.txt:2:1" in second


async def test_a_server_that_dies_is_restarted_once_then_dropped_with_one_notice_each(tmp_path: Path) -> None:
    pool, events = _pool(tmp_path, "crash"), []
    target = tmp_path / "a.txt"
    try:
        results = [await pool.after_edit(target, "a.txt", "a\n", f"b{n}\n", events.append) for n in range(3)]
    finally:
        await pool.aclose()
    assert "died during this edit; it will be started again" in results[0]
    assert "is off for this session" in results[1] and "died again" in results[1] and "exited with code 3" in results[1]
    assert results[2] == ""  # said once; the edits after it add nothing
    assert "is off for this session" in await pool.current(target, "a.txt", "b2\n", events.append)
    assert [type(e) for e in events] == [LanguageServerNotice, LanguageServerNotice]
    assert [e.state for e in events] == ["restarted", "dropped"]
    assert "fake server: giving up" in events[1].text  # the end of its stderr says why


async def test_a_server_gets_the_key_free_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "log.jsonl"
    for name, value in (("FAKE_LSP_LOG", str(log)), ("OPENAI_API_KEY", "sk-held"), ("MY_TOKEN", "t"), ("HOLDS", "sk-secret-value")):
        monkeypatch.setenv(name, value)
    spec = ServerSpec("fake", (sys.executable, str(FAKE_SERVER), "pull"), (".txt",))
    policy = ChildEnv.of(key_names=["OPENAI_API_KEY"], key_values=["sk-secret-value"])
    pool = LanguageServers(LspSettings(wait_s=30.0, servers=(spec,)), tmp_path, launcher(None, policy))
    try:
        await pool.after_edit(tmp_path / "a.txt", "a.txt", None, "x\n", lambda e: None)
    finally:
        await pool.aclose()
    seen = json.loads(log.read_text().splitlines()[0])["env_keys"]
    assert "FAKE_LSP_LOG" in seen
    assert not {"OPENAI_API_KEY", "MY_TOKEN", "HOLDS"} & set(seen)


# ------------------------------------------------------------------ which server, from config


def test_defaults_come_from_path_and_config_replaces_or_turns_them_off(tmp_path: Path) -> None:
    for name in ("pylsp", "gopls"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    found = settings_from({}, path_env=str(tmp_path))
    assert [(s.name, s.command) for s in found.servers] == [("python", ("pylsp",)), ("go", ("gopls",))]
    assert server_for(found, ".rs") is None and server_for(found, ".pyi").name == "python"
    table = {"wait": 2, "servers": {"go": {"enabled": False}, "python": {"command": ["my-py", "--stdio"]},
                                    "zig": {"command": ["zls"], "extensions": [".zig"]}}}
    chosen = settings_from(table, path_env=str(tmp_path))
    assert [(s.name, s.command) for s in chosen.servers] == [("python", ("my-py", "--stdio")), ("zig", ("zls",))]
    assert chosen.wait_s == 2.0


@pytest.mark.parametrize("text, key", [
    ('[lsp]\nwait = "3"\n', "lsp.wait"),
    ("[lsp]\nwait = 0\n", "lsp.wait"),
    ("[lsp]\nenabled = 1\n", "lsp.enabled"),
    ('[lsp.servers.python]\ncommand = "pylsp"\n', "lsp.servers.python.command"),
    ("[lsp.servers.python]\ncommand = []\n", "lsp.servers.python.command"),
    ('[lsp.servers.zig]\nextensions = ["zig"]\n', "lsp.servers.zig.extensions"),
    ('[lsp.servers.python]\nwhatever = 1\n', "lsp.servers.python.whatever"),
])
def test_a_wrong_lsp_value_is_an_error_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    config_file = Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml"
    config_file.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert key in str(caught.value) and str(config_file) in str(caught.value)


def test_a_good_lsp_table_loads_as_written() -> None:
    table = {"wait": 1.5, "servers": {"python": {"command": ["pylsp"], "settings": {"pylsp": {"x": 1}}}}}
    assert Config.model_validate({"lsp": table}).lsp == table


async def test_edits_running_side_by_side_share_one_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("FAKE_LSP_LOG", str(log))
    pool, events = _pool(tmp_path, "pull"), []
    try:
        results = await asyncio.gather(*(
            pool.after_edit(tmp_path / f"f{n}.txt", f"f{n}.txt", None, f"BAD {n}\n", events.append) for n in range(4)))
    finally:
        await pool.aclose()
    assert [r.splitlines()[1] for r in results] == [f"f{n}.txt:1:1: error: BAD is not allowed here [fake]" for n in range(4)]
    methods = [json.loads(line)["method"] for line in log.read_text().splitlines()]
    assert methods.count("initialize") == 1 and methods.count("textDocument/didOpen") == 4
    assert events == []


async def test_a_server_that_stops_answering_is_dropped_after_a_few_silent_edits(tmp_path: Path) -> None:
    pool, events = _pool(tmp_path, "mute", wait=0.5), []
    target = tmp_path / "a.txt"
    try:
        results = [await pool.after_edit(target, "a.txt", None if n == 0 else f"{n - 1}\n", f"{n}\n", events.append) for n in range(5)]
    finally:
        await pool.aclose()
    assert all("did not report within 0.5 s" in r for r in results[:2])
    assert "is off for this session" in results[2] and "seems hung" in results[2]
    assert results[3:] == ["", ""]
    assert [(e.state, e.server) for e in events] == [("dropped", "fake")]


@pytest.mark.parametrize("mechanism", ["auto", "landlock"])
async def test_a_sandboxed_server_reads_the_workspace_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         mechanism: str) -> None:
    from ketch.sandbox.detect import detect
    from ketch.sandbox.policy import build_policy
    from ketch.sandbox.runtime import Sandbox

    touched = tmp_path / "touched.txt"
    monkeypatch.setenv("FAKE_LSP_TOUCH", str(touched))
    sandbox = Sandbox(build_policy("workspace-write", tmp_path), detect(mechanism))  # type: ignore[arg-type]
    assert sandbox.confines
    spec = ServerSpec("fake", (sys.executable, str(FAKE_SERVER), "pull"), (".txt",))
    pool = LanguageServers(LspSettings(wait_s=60.0, servers=(spec,)), tmp_path, launcher(sandbox, None))
    try:
        text = await pool.after_edit(tmp_path / "a.txt", "a.txt", None, "BAD\n", lambda e: None)
    finally:
        await pool.aclose()
    assert "a.txt:1:1: error: BAD is not allowed here [fake]" in text
    assert not touched.exists()


def test_servers_are_not_started_where_the_sandbox_cannot_confine_them(tmp_path: Path) -> None:
    from ketch.lsp.pool import LaunchRefused
    from ketch.sandbox.detect import Mechanism
    from ketch.sandbox.policy import build_policy
    from ketch.sandbox.runtime import Sandbox

    broken = Sandbox(build_policy("workspace-write", tmp_path), Mechanism("none", "nothing works here"))
    with pytest.raises(LaunchRefused):
        launcher(broken, None)(["pylsp"], tmp_path)
    unconfined = Sandbox(build_policy("full-access", tmp_path), Mechanism("none", "nothing works here"))
    assert launcher(unconfined, None)(["pylsp"], tmp_path).argv == ["pylsp"]


async def test_a_file_changed_behind_the_servers_back_is_compared_with_its_text_before_the_edit(tmp_path: Path) -> None:
    pool, events = _pool(tmp_path, "push"), []
    target = tmp_path / "a.txt"
    try:
        first = await pool.after_edit(target, "a.txt", None, "BAD\n", events.append)
        # a shell command added a second BAD line; the next edit only appends a clean line
        second = await pool.after_edit(target, "a.txt", "BAD\nBAD\n", "BAD\nBAD\nok\n", events.append)
    finally:
        await pool.aclose()
    assert first.startswith("The fake language server reports 1 new problem")
    assert second == ""
