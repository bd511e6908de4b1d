"""Keys stay out of tools: the environment a shell command, a hook and an MCP server saw (as they
printed it), and a key read from a file, looked for in the session store's rows, the stream-json
output and the next request body the fake provider received. The shell-and-hooks case runs
``python -m ketch`` itself; the others a ketch process forked from the preloaded interpreter
(``ketch_processes.Preloaded``): a process of its own whose environment is exactly the one given,
as its children see it, without paying the imports again."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch, write_project_config

from ketch.config.keyring import KeyRing
from ketch.state.redaction import MARKER, ChunkRedactor

WIRE = "openai-chat"
PROVIDER_KEY = "prov-key-held-by-ketch-0123456789"
"""The key of the connection in use, in a variable whose name does not look like a secret."""
SECRETS = {
    "GITHUB_TOKEN": "ghp_secret_token_value_42",
    "db_password": "hunter2-but-longer",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-access-value",
    "MY_CREDENTIALS": "credential-value-123",
    "OPENAI_API_KEY": "sk-openai-user-key-abcdef0123",
}
KEPT = ("KEEPME_TOKEN", "kept-token-value-7777")
PLAIN = ("PLAIN_SETTING", "visible-value")


def _env() -> dict[str, str]:
    return {"PROVCRED": PROVIDER_KEY, **SECRETS, KEPT[0]: KEPT[1], PLAIN[0]: PLAIN[1]}


def _user_config(home: Path, extra: str = "") -> None:
    (home / "config" / "config.toml").write_text(f'titles = false\n\n[tools]\nkeep_env = ["{KEPT[0]}"]\n{extra}')


def _dump(path: Path) -> dict[str, str]:
    pairs = (line.partition("=") for line in path.read_text().splitlines() if "=" in line)
    return {k: v for k, _, v in pairs}


def _assert_clean_child(seen: dict[str, str]) -> None:
    for name in (*SECRETS, "PROVCRED"):
        assert name not in seen, f"{name} reached the child"
    assert PROVIDER_KEY not in "\n".join(seen.values())
    assert seen.get(PLAIN[0]) == PLAIN[1]
    assert seen.get(KEPT[0]) == KEPT[1], "a variable the user keeps by name was removed"


def test_shell_and_hooks_run_without_held_keys_or_secret_looking_variables(tmp_path: Path, isolated_home: Path) -> None:
    hook_dump = tmp_path / "hook-env.txt"
    _user_config(isolated_home, f'\n[[hooks.before_tool]]\ncommand = "env > {hook_dump}"\n')
    # a repository cannot keep a variable for itself, trusted or not
    write_project_config(tmp_path, '[tools]\nkeep_env = ["GITHUB_TOKEN", "PROVCRED"]\n')
    with FakeProvider() as fake:
        fake.add(Turn(tool_calls=[ToolCall("shell", {"command": "env > shell-env.txt"})]), Turn(text="done"))
        run = run_ketch(["-p", "dump it", "--yolo", "--output-format", "stream-json", *adhoc(fake, WIRE),
                         "--api-key-env", "PROVCRED"], tmp_path, env=_env(), subprocess_=True)
        assert fake.model_requests[0].headers["authorization"] == f"Bearer {PROVIDER_KEY}"  # ketch itself has it
    assert run.code == 0, run.stderr
    _assert_clean_child(_dump(tmp_path / "shell-env.txt"))
    _assert_clean_child(_dump(hook_dump))
    notices = [json.loads(line)["text"] for line in run.stdout.splitlines() if '"notice"' in line]
    assert any("ignored tools.keep_env" in n for n in notices)


def test_an_mcp_server_starts_without_held_keys(tmp_path: Path, isolated_home: Path, preloaded_ketch: Any) -> None:
    server = Path(__file__).parent / "mcp_servers" / "alpha_stdio.py"
    _user_config(isolated_home, f'\n[mcp.servers.alpha]\ncommand = {json.dumps(sys.executable)}\n'
                                f'args = [{json.dumps(str(server))}]\nenv = {{ OWN_SETTING = "cfg-7" }}\ntimeout = 60\n')
    probes = ["GITHUB_TOKEN", "PROVCRED", "OPENAI_API_KEY", "OWN_SETTING", KEPT[0]]
    with FakeProvider() as fake:
        fake.add(Turn(tool_calls=[ToolCall("alpha__env_probe", {"name": n}, id=f"c{i}") for i, n in enumerate(probes)]),
                 Turn(text="done"))
        run = run_ketch(["-p", "probe", "--yolo", *adhoc(fake, WIRE), "--api-key-env", "PROVCRED"],
                        tmp_path, env=_env(), forked_from=preloaded_ketch)
        results = dict(tool_results(fake.model_requests[1]))
    assert run.code == 0, run.stderr
    seen = [results[f"c{i}"] for i in range(len(probes))]
    assert seen[:3] == ["<unset>"] * 3
    assert seen[3] == "cfg-7"  # (its own env values count as secrets too; this one is too short to be one)
    # kept by the user, so the server has it; its value is still a secret-looking one and never
    # comes back out through a tool result
    assert seen[4] == MARKER


def _store_text(home: Path) -> str:
    db = next((home / "data").glob("*.db"), None) or next((home / "data").rglob("*.sqlite*"))
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        rows = [repr(row) for t in tables for row in conn.execute(f'select * from "{t}"')]
    finally:
        conn.close()
    return "\n".join(rows)


CALLS = {
    "read_file": ToolCall("read_file", {"path": "leak.txt"}),
    "shell": ToolCall("shell", {"command": "cat leak.txt"}),
    # a failing tool: the timeout error carries the output
    "shell-error": ToolCall("shell", {"command": "cat leak.txt; sleep 30", "timeout": 1}),
}


@pytest.mark.parametrize("tool", list(CALLS))
def test_a_key_in_a_file_never_leaves_through_a_tool(tmp_path: Path, isolated_home: Path, tool: str, preloaded_ketch: Any) -> None:
    (tmp_path / "leak.txt").write_text(f"the key is {PROVIDER_KEY} and the token {SECRETS['GITHUB_TOKEN']}\n")
    call = CALLS[tool]
    with FakeProvider() as fake:
        fake.add(Turn(tool_calls=[call]), Turn(text="read it"))
        run = run_ketch(["-p", "read the file", "--yolo", "--output-format", "stream-json", *adhoc(fake, WIRE),
                         "--api-key-env", "PROVCRED"], tmp_path, env=_env(), forked_from=preloaded_ketch)
        next_body = json.dumps(fake.model_requests[1].body)
        (result,) = tool_results(fake.model_requests[1])
    assert run.code == 0, run.stderr
    assert MARKER in result[1], "the tool result lost the line instead of marking the key"
    stored = _store_text(isolated_home)
    assert "read it" in stored  # the rows are there
    for where, text in (("stream-json", run.stdout), ("request body", next_body), ("store", stored)):
        assert PROVIDER_KEY not in text, f"the provider key reached the {where}"
        assert SECRETS["GITHUB_TOKEN"] not in text, f"the token reached the {where}"


def test_loopback_stays_refused_whatever_the_environment(tmp_path: Path, preloaded_ketch: Any) -> None:
    with FakeProvider([Turn(text="unused")]) as target, FakeProvider() as fake:
        fake.add(Turn(tool_calls=[ToolCall("web_fetch", {"url": f"http://127.0.0.1:{target.port}/v1/models"})]), Turn(text="x"))
        run = run_ketch(["-p", "fetch", "--yolo", *adhoc(fake, WIRE)], tmp_path,
                        env={"KETCH_TEST_ALLOW_LOOPBACK": "1"}, forked_from=preloaded_ketch)
        (result,) = tool_results(fake.model_requests[1])
    assert run.code == 0, run.stderr
    assert target.requests == [], "web_fetch reached 127.0.0.1"
    assert "loopback" in result[1]


def test_a_key_split_across_live_chunks_is_still_replaced() -> None:
    key = "sk-live-chunk-key-0123456789"
    redactor = ChunkRedactor(KeyRing(frozenset(), (key,)))
    pieces = ["out: sk-li", "ve-chunk-key-01", "23456789 end\n", "tail s", "k"]
    shown = "".join(redactor.feed("c1", p) for p in pieces)
    assert key not in shown and MARKER in shown
    assert shown.startswith("out: ") and "end\ntail " in shown

