"""``ketch export ID --format atif``: a stored session as an ATIF trajectory Harbor accepts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import run_ketch, write_project_config

ROOT = Path(__file__).resolve().parents[1]
HARBOR_PYTHON = ROOT / ".venv-harbor" / "bin" / "python"

VALIDATE = """
import json, sys
from harbor.utils.trajectory_validator import TrajectoryValidator
v = TrajectoryValidator()
ok = v.validate(sys.argv[1])
print(json.dumps({"valid": ok, "errors": v.get_errors()}))
"""


def harbor_verdict(path: Path) -> dict:
    """Harbor's own trajectory validator on ``path`` (in the Python 3.12 venv that holds harbor)."""
    assert HARBOR_PYTHON.exists(), "no .venv-harbor: run .ci/harbor-venv (.ci/run does)"
    out = subprocess.run([str(HARBOR_PYTHON), "-c", VALIDATE, str(path)], capture_output=True, text=True, timeout=240,
                         env={"PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HARBOR_TELEMETRY": "0"})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _session(tmp_path: Path) -> tuple[str, FakeProvider]:
    (tmp_path / "notes.txt").write_text("first line\n")
    script = [
        Turn(reasoning="Look first.", tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="call_r"),
                                                  ToolCall("write_file", {"path": "out.txt", "content": "x\n"}, id="call_w")],
             usage=(2000, 300)),
        Turn(text="Read it and wrote out.txt.", usage=(2500, 40)),
    ]
    fake = FakeProvider(script)
    with fake:
        write_project_config(tmp_path, f'[connections.work]\npreset = "openai"\nbase_url = "{fake.base_url}"\n'
                                       'api_key_env = "WORK_KEY"\nwire = "openai-responses"\n')
        run = run_ketch(["-p", "read notes.txt then write out.txt", "--yolo", "-m", "work:gpt-5", "--output-format", "json"],
                        tmp_path, env={"WORK_KEY": "k"})
    assert run.code == 0, run.stderr
    return json.loads(run.stdout)["session_id"], fake


def test_a_stored_session_exports_as_an_atif_trajectory_harbor_accepts(tmp_path: Path) -> None:
    session_id, _ = _session(tmp_path)
    run = run_ketch(["export", session_id, "--format", "atif"], tmp_path)
    assert run.code == 0, run.stderr
    trajectory = json.loads(run.stdout)
    assert trajectory["schema_version"].startswith("ATIF-v") and trajectory["session_id"] == session_id
    assert trajectory["agent"]["name"] == "ketch"
    user, first, last = trajectory["steps"]
    assert (user["source"], user["message"]) == ("user", "read notes.txt then write out.txt")
    assert first["source"] == "agent" and first["reasoning_content"] == "Look first."
    assert [(c["tool_call_id"], c["function_name"], c["arguments"]) for c in first["tool_calls"]] == [
        ("call_r", "read_file", {"path": "notes.txt"}), ("call_w", "write_file", {"path": "out.txt", "content": "x\n"})]
    results = {r["source_call_id"]: r["content"] for r in first["observation"]["results"]}
    assert "first line" in results["call_r"] and "out.txt" in results["call_w"]
    # gpt-5: $1.25 per million input tokens, $10 per million output tokens
    assert first["metrics"] == {"prompt_tokens": 2000, "completion_tokens": 300,
                                "cost_usd": pytest.approx((2000 * 1.25 + 300 * 10) / 1e6)}
    assert last["message"] == "Read it and wrote out.txt." and "tool_calls" not in last
    final = trajectory["final_metrics"]
    assert (final["total_prompt_tokens"], final["total_completion_tokens"], final["total_steps"]) == (4500, 340, 3)
    assert final["total_cost_usd"] == pytest.approx((4500 * 1.25 + 340 * 10) / 1e6)

    path = tmp_path / "trajectory.json"
    path.write_text(run.stdout)
    verdict = harbor_verdict(path)
    assert verdict == {"valid": True, "errors": []}


def test_harbors_validator_refuses_what_ketch_must_not_write(tmp_path: Path) -> None:
    """The validator the test above trusts does judge: an observation of a call its step did not make fails."""
    session_id, _ = _session(tmp_path)
    trajectory = json.loads(run_ketch(["export", session_id, "--format", "atif"], tmp_path).stdout)
    trajectory["steps"][1]["observation"]["results"][0]["source_call_id"] = "call_nobody_made"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(trajectory))
    verdict = harbor_verdict(path)
    assert verdict["valid"] is False and any("call_nobody_made" in e for e in verdict["errors"])


def test_an_unknown_session_is_a_usage_error(tmp_path: Path) -> None:
    run = run_ketch(["export", "nope", "--format", "atif"], tmp_path)
    assert run.code == 2 and "no session 'nope'" in run.stderr
