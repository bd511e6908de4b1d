"""A ketch forked from the preloaded interpreter (``ketch_processes.Preloaded``) ends as
``python -m ketch`` ends: what it wrote, its exit code, its stdin read as given, and what the
interpreter does at its end (the atexit functions: the sandbox's private files are removed).
Many end-to-end tests stand in a fork for the binary; these hold the fork to the binary."""

from __future__ import annotations

from pathlib import Path

from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from ketch_processes import Preloaded
from kettle import adhoc, run_ketch


def test_a_bad_command_line_ends_the_same_in_a_fork_and_in_the_binary(tmp_path: Path, preloaded_ketch: Preloaded) -> None:
    argv = ["sessions", "--limit", "lots"]
    real = run_ketch(argv, tmp_path, subprocess_=True)
    forked = run_ketch(argv, tmp_path, forked_from=preloaded_ketch)
    assert real.code == 2 and "--limit" in real.stderr, real
    assert (forked.code, forked.stdout, forked.stderr) == (real.code, real.stdout, real.stderr)


def test_a_forked_ketch_reads_the_prompt_given_on_stdin(tmp_path: Path, preloaded_ketch: Preloaded) -> None:
    with FakeProvider([Turn(text="hello back")]) as fake:
        run = run_ketch([*adhoc(fake, "openai-chat"), "-p"], tmp_path, input="piped question\n", forked_from=preloaded_ketch)
        [request] = fake.model_requests
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "hello back"
    assert "piped question" in str(request.body)


def test_a_forked_ketch_runs_the_atexit_functions_the_sandbox_removes_its_files_with(
    tmp_path: Path, preloaded_ketch: Preloaded
) -> None:
    """The sandbox keeps its seccomp filters in a private directory under TMPDIR and removes it
    at the interpreter's end (``sandbox.detect``); a fork that skipped the end would leave it."""
    tmp, ws = tmp_path / "tmp", tmp_path / "ws"
    tmp.mkdir(), ws.mkdir()
    script = [Turn(tool_calls=[ToolCall("shell", {"command": "echo sandboxed"})]), Turn(text="done")]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--approval", "auto", *adhoc(fake, "openai-chat")], ws, env={"TMPDIR": str(tmp)},
                        forked_from=preloaded_ketch)
        assert "sandboxed" in tool_results(fake.model_requests[1])[0][1]  # the command ran, under the sandbox
    assert run.code == 0, run.stderr
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith("ketch-sandbox-")) == []


CLIENT = """
import os, sys
from ketch_processes import fork_over_socket
read, write = os.pipe()
pid, wait = fork_over_socket(sys.argv[1], ["sessions", "--limit", "lots"], os.open(os.devnull, os.O_RDONLY), 1, write)
os.close(write)
with os.fdopen(read) as err:
    said = err.read()
print("PPID", open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1], "CODE", wait(), "ERR", said.strip())
"""


def test_a_process_the_test_started_gets_a_fork_on_its_own_descriptors(tmp_path: Path, preloaded_ketch: Preloaded) -> None:
    """What the ACP tap does (tests/acp_wire.py): ask the preloaded interpreter over its socket
    for a ketch on this process's descriptors; the child is the server's, not the asker's."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", CLIENT, preloaded_ketch.socket_path], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(Path(__file__).parent), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert words[:4] == ["PPID", str(preloaded_ketch._proc.pid), "CODE", "2"], done.stdout
    assert "--limit" in done.stdout


def test_a_forked_python_c_starts_with_no_provider_sdk_and_sees_what_it_imports(tmp_path: Path, preloaded_ketch: Preloaded) -> None:
    """The premise of the SDK-import checks that run in a fork (tests/test_wire_chat.py): the
    preloaded interpreter holds all of ketch and none of the SDKs, and a child's own import of one
    shows in its ``sys.modules``."""
    code = ("import sys\nsdk = lambda: sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic', 'groq', 'mistralai')"
            " or m.startswith(('google.genai', 'pydantic_ai.models.openai', 'pydantic_ai.providers.')))\n"
            "before = sdk()\nimport pydantic_ai.models.openai\nprint(before, 'pydantic_ai.models.openai' in sdk(), 'ketch.wire.chat' in sys.modules)\n")
    returncode, stdout, stderr = preloaded_ketch.run([], tmp_path, {"PATH": "/usr/bin:/bin"}, 60, code=code)
    assert returncode == 0, stderr
    assert stdout.split() == ["[]", "True", "True"], stdout
