"""Running the real ``ketch`` binary as a subprocess against the fake provider."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


def ketch_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    # no API key reaches ketch, and the suite's own pytest options (PYTEST_ADDOPTS, e.g. --shuffle)
    # do not reach a pytest that ketch runs in its workspace
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PYTEST_ADDOPTS"}
    env["PYDANTIC_AI_NO_BANNER"] = "1"
    env.update(extra or {})
    return env


def run_ketch(
    args: list[str],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float = 180,  # a liveness limit for a loaded machine; a hang meets the per-test timeout
    subprocess_: bool = False,
    forked_from: Any = None,
) -> Run:
    """Run ketch with ARGS in ``cwd`` and capture everything.

    By default in this process through ``ketch.frontends.cli.main`` (the same code path, without
    paying the SDK import per test); ``subprocess_=True`` runs the real binary; ``forked_from``
    (the ``preloaded_ketch`` fixture) runs a real ketch process of its own forked from the
    interpreter that already imported the SDKs (``ketch_processes.Preloaded``), for a matrix
    that would otherwise pay the imports once per case. A headless run's stdout must fit the
    shipped JSON Schema of its output format (``headless_schema``)."""
    if forked_from is not None:
        run = Run(*forked_from.run(list(args), cwd, ketch_env(env), timeout, input))
    elif not subprocess_:
        run = _run_in_process(args, cwd, env=env, input=input)
    else:
        run = _run_binary(args, cwd, env, input, timeout)
    from headless_schema import check_output

    check_output(list(args), run.stdout)
    return run


def _run_binary(args: list[str], cwd: Path, env: dict[str, str] | None, input: str | None, timeout: float) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "ketch", *args],
        cwd=cwd,
        env=ketch_env(env),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def adhoc(fake: Any, wire: str, model: str = "fake-model") -> list[str]:
    """Arguments pointing ketch at the fake provider without a config file."""
    return ["--base-url", fake.base_url if wire not in ("anthropic-messages", "gemini") else fake.base_url.removesuffix("/v1"), "--wire", wire, "--model", model]


OPENROUTER_KEY = "sk-or-v1-fake-key"


def wire_args(fake: Any, wire: str, root: Path, model: str = "fake-model") -> tuple[list[str], dict[str, str]]:
    """Arguments (and environment) pointing ketch at the fake on ``wire``; ``"openrouter"`` is an
    ``openrouter`` preset connection (the SDK's OpenRouter model over Chat Completions), written
    into ``root``'s trusted project config, with the model as an OpenRouter slug."""
    if wire != "openrouter":
        return adhoc(fake, wire, model), {}
    write_project_config(root, f'[connections.openrouter]\npreset = "openrouter"\nbase_url = "{fake.base_url}"\n')
    return ["-m", f"openrouter:fake/{model}"], {"OPENROUTER_API_KEY": OPENROUTER_KEY}


def write_project_config(root: Path, text: str, *, trust: bool = True, approve_mcp: bool | None = None) -> Path:
    """Write ``root/.ketch/config.toml``; with ``trust`` (the default) the folder is also trusted
    with exactly this config, as ``ketch trust add`` would record it, so what it widens applies,
    and (unless ``approve_mcp`` is False) each of its MCP servers approved as ``ketch mcp
    approve NAME`` would record it."""
    path = root / ".ketch" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if trust:
        trust_folder(root)
    if approve_mcp if approve_mcp is not None else trust:
        approve_project_mcp(root)
    return path


def approve_project_mcp(root: Path) -> None:
    """Approve every MCP server of ``root``'s project config for its current exact spec."""
    from ketch.extensions import mcp_approval
    from ketch.config.settings import load_config
    from ketch.protocol.exceptions import ConfigError

    try:
        config = load_config(root.resolve(), trust_flag=True)
    except ConfigError:  # a test of a broken file: there is nothing to approve
        return
    for approval in mcp_approval.project_servers(config):
        mcp_approval.remember(approval, True)


def trust_folder(root: Path) -> None:
    """Record ``root``'s project folder as trusted with its current config (``ketch trust add``)."""
    from ketch.config import trust
    from ketch.config.settings import find_project_root, project_split

    from ketch.protocol.exceptions import ConfigError

    try:
        split = project_split(root)
    except ConfigError:  # a test of a broken file: there is nothing to trust
        return
    digest = split.digest if split is not None else trust.widening_digest_of_nothing()
    trust.remember(find_project_root(root.resolve()), True, digest)


def _run_in_process(args: list[str], cwd: Path, *, env: dict[str, str] | None, input: str | None) -> Run:
    import contextlib
    import io

    from ketch.frontends.cli import main

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_stdin = sys.stdin
    out, err = io.StringIO(), io.StringIO()
    try:
        for key in [k for k in os.environ if k.endswith("_API_KEY")]:
            del os.environ[key]
        os.environ.update(env or {})
        os.chdir(cwd)
        sys.stdin = io.StringIO(input or "")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(saved_cwd)
        sys.stdin = saved_stdin
        os.environ.clear()
        os.environ.update(saved_env)
    return Run(code, out.getvalue(), err.getvalue())


def one_line_error(stderr: str) -> str:
    """The one ``ketch: …`` line a failure prints on stderr (no traceback, nothing else)."""
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("ketch: ")
    return lines[0]


def stream_json_events(root: Path, prompt: str, model: str, env: dict[str, str], *flags: str,
                       code: int = 0) -> list[dict[str, Any]]:
    """``ketch -p PROMPT -m MODEL --output-format stream-json``'s events, once its exit code is ``code``."""
    import json

    run = run_ketch(["-p", prompt, "-m", model, "--output-format", "stream-json", *flags], root, env=env)
    assert run.code == code, run.stderr + run.stdout
    return [json.loads(line) for line in run.stdout.splitlines() if line.strip()]


def search_connection_config(preset: str, base_url: str, model: str, *, metadata: str = "web_search = true",
                             search: str = "enabled = true", extra: str = "") -> str:
    """A project config: connection ``preset`` (named after it) at ``base_url``, ``model``'s declared
    capabilities, and the ``[web_search]`` table (for the hosted-search adapter tests)."""
    return f"""
[connections.{preset}]
preset = "{preset}"
base_url = "{base_url}"
max_retries = 0

[models."{model}"]
capabilities = {{ {metadata} }}

[web_search]
{search}
{extra}
"""
