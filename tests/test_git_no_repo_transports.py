"""The lazy fetch of a partial clone (``git show`` of a missing blob) runs no transport
program the repository's config names: upload-pack, ssh command, ext:: command, remote
helper, credential helper, askpass. Each trap is proven live with plain git first."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from gittraps import Traps, armed, ctx_for, git, repo_fixture, traps_fixture
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.git import git_blame, git_log, git_show

traps = pytest.fixture(traps_fixture, name="traps")
repo = pytest.fixture(repo_fixture, name="repo")


@pytest.fixture
def partial(repo: Path, tmp_path: Path) -> Path:
    """A blobless clone of ``repo``: showing an old file makes git fetch it from the remote."""
    git(repo, "config", "uploadpack.allowFilter", "true")
    git(repo, "config", "uploadpack.allowAnySHA1InWant", "true")
    clone = tmp_path / "partial"
    subprocess.run(["git", "clone", "-q", "--filter=blob:none", "--no-checkout", f"file://{repo}", str(clone)],
                   check=True, capture_output=True)
    return clone


async def lazy_fetch_tools(clone: Path) -> list[str]:
    ctx = ctx_for(clone)
    errors = []
    for call in (lambda: git_show(ctx, "HEAD~1:a.txt"), lambda: git_show(ctx, "HEAD~1"),
                 lambda: git_log(ctx), lambda: git_blame(ctx, "a.txt", ref="HEAD~1")):
        try:
            await call()
        except ToolFailed as exc:
            errors.append(exc.message)
    return errors


async def test_lazy_fetch_runs_no_upload_pack(partial: Path, traps: Traps) -> None:
    git(partial, "config", "remote.origin.uploadpack", f"{traps.program('upload-pack', passthrough=False)} >/dev/null; git-upload-pack")
    armed(traps, git(partial, "show", "HEAD~1:a.txt", check=False))
    errors = await lazy_fetch_tools(partial)
    assert traps.fired() == []
    assert any("not allowed" in e or "could not fetch" in e for e in errors), errors


async def test_lazy_fetch_runs_no_ssh_command(partial: Path, traps: Traps) -> None:
    git(partial, "config", "remote.origin.url", "ssh://git.example.invalid/repo.git")
    git(partial, "config", "core.sshCommand", traps.program("ssh-command", passthrough=False))
    armed(traps, git(partial, "show", "HEAD~1:a.txt", check=False))
    await lazy_fetch_tools(partial)
    assert traps.fired() == []


async def test_lazy_fetch_runs_no_ext_transport_or_remote_helper(partial: Path, traps: Traps) -> None:
    git(partial, "config", "remote.origin.url", f"ext::sh -c {traps.program('ext', passthrough=False)}% >&2")
    git(partial, "config", "protocol.ext.allow", "always")
    git(partial, "config", "protocol.allow", "always")
    armed(traps, git(partial, "show", "HEAD~1:a.txt", check=False))
    await lazy_fetch_tools(partial)
    assert traps.fired() == []
    helper = traps.bin / "git-remote-trap"
    helper.write_text(f"#!/bin/sh\necho helper >> {traps.markers / 'remote-helper'}\n")
    helper.chmod(0o755)
    git(partial, "config", "remote.origin.url", "trap::anything")
    os.environ["PATH"] = f"{traps.bin}{os.pathsep}{os.environ['PATH']}"
    try:
        armed(traps, git(partial, "show", "HEAD~1:a.txt", check=False))
        await lazy_fetch_tools(partial)
    finally:
        os.environ["PATH"] = os.environ["PATH"].split(os.pathsep, 1)[1]
    assert traps.fired() == []


class _AskForPassword(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="trap"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def asks_for_password() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AskForPassword)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/repo.git"
    finally:
        server.shutdown()
        server.server_close()


async def test_lazy_fetch_runs_no_credential_helper_or_askpass(partial: Path, traps: Traps, asks_for_password: str) -> None:
    git(partial, "config", "remote.origin.url", asks_for_password)
    git(partial, "config", "credential.helper", traps.program("credential-helper", passthrough=False))
    git(partial, "config", f"credential.{asks_for_password}.helper", traps.program("credential-url-helper", passthrough=False))
    git(partial, "config", "core.askPass", traps.program("askpass", passthrough=False))
    armed(traps, git(partial, "show", "HEAD~1:a.txt", env={"GIT_TERMINAL_PROMPT": "0"}, check=False))
    await lazy_fetch_tools(partial)
    assert traps.fired() == []
