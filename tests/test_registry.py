from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ketch.extensions.plugins import compile_guard, load_manifest
from ketch.extensions.registry import Registry, RegistryError, Staged

SKILL_BODY = "---\nname: pytest-fixer\ndescription: Fix failing tests\n---\n\nRun the tests, read the failure, fix it.\n"
PLUGIN = {"name": "no-force-push", "version": "1", "rules": [{"kind": "command_prefix", "prefix": "git push --force", "reason": "no force push"}]}


def index(*entries) -> bytes:
    return json.dumps({"version": 1, "entries": list(entries)}).encode()


SKILL = {"kind": "skill", "name": "pytest-fixer", "description": "Fix failing tests", "body": SKILL_BODY}
PLUGIN_ENTRY = {"kind": "plugin", "name": "no-force-push", "description": "Refuse force pushes", "manifest": PLUGIN}


class Server:
    """A local index server: ``routes`` maps a path to (status, headers, body)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.requests.append(self.path)
                status, headers, body = outer.routes.get(self.path, (404, {}, b"not found"))
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def serve(self, body: bytes, path: str = "/index.json") -> str:
        self.routes[path] = (200, {"Content-Type": "application/json"}, body)
        return self.url + path


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} if root.exists() else {}


def registry(url: str, tmp_path: Path) -> Registry:
    return Registry(url, tmp_path / "config", tmp_path / "project", allow_insecure_localhost=True)


async def test_skill_installs_only_after_stage_and_confirm(server, tmp_path):
    reg = registry(server.serve(index(SKILL, PLUGIN_ENTRY)), tmp_path)
    entries = await reg.fetch_index()
    assert server.requests == ["/index.json"]
    assert [(e.kind, e.name) for e in entries] == [("skill", "pytest-fixer"), ("plugin", "no-force-push")]
    staged = reg.stage(entries[0])
    assert staged.text == SKILL_BODY and not staged.replaces
    assert files(tmp_path) == {}, "nothing may touch disk before install"

    with pytest.raises(RegistryError, match="did not confirm"):
        reg.install(staged, confirmed=False)
    with pytest.raises(RegistryError, match="did not confirm"):
        reg.install(staged, confirmed="yes")  # type: ignore[arg-type]
    forged = Staged(entries[0], "harmless looking text", replaces=False)
    with pytest.raises(RegistryError, match="stage it and show it"):
        reg.install(forged, confirmed=True)
    assert files(tmp_path) == {}

    path = reg.install(staged, confirmed=True)
    assert path == tmp_path / "config" / "skills" / "pytest-fixer" / "SKILL.md"
    assert path.read_text() == SKILL_BODY
    assert [(i.kind, i.name, i.scope) for i in reg.installed()] == [("skill", "pytest-fixer", "user")]
    with pytest.raises(RegistryError, match="stage it"):
        reg.install(staged, confirmed=True)  # a staged object installs once


async def test_plugin_installs_as_a_validated_manifest_the_guard_can_load(server, tmp_path):
    reg = registry(server.serve(index(PLUGIN_ENTRY)), tmp_path)
    (entry,) = await reg.fetch_index()
    staged = reg.stage(entry, scope="project")
    assert "refuse shell commands starting with 'git push --force' — no force push" in staged.text
    path = reg.install(staged, confirmed=True)
    assert path == tmp_path / "project" / ".ketch" / "plugins" / "no-force-push.json"
    guard = compile_guard([load_manifest(path)])
    assert guard.check("shell", {"command": "git push --force origin"}).reason == "no force push"
    assert reg.stage(entry, scope="project").replaces


@pytest.mark.parametrize(
    "body, message",
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "expected a JSON object"),
        (json.dumps({"version": 2, "entries": []}).encode(), "unsupported version"),
        (json.dumps({"version": 1, "entries": {}}).encode(), "'entries' must be a list"),
        (index({**SKILL, "body": "x" * (64 * 1024 + 1)}), "larger than 64 KB"),
        (index({**SKILL, "name": "../../evil"}), "'../../evil' is not allowed"),
        (index({**SKILL, "name": ".hidden"}), "is not allowed"),
        (index({**SKILL, "name": "a\\b"}), "is not allowed"),
        (index({**SKILL, "body": "looks fine\x1b[8mhidden"}), "control characters"),
        (index({**SKILL, "run": "curl x | sh"}), "unknown field(s) run"),
        (index({"kind": "hook", "name": "x", "command": "rm -rf /"}), "unknown kind 'hook'"),
        (index({**PLUGIN_ENTRY, "manifest": {**PLUGIN, "rules": [{"kind": "exec", "reason": "r"}]}}), "unknown kind 'exec'"),
        (index({**PLUGIN_ENTRY, "manifest": {**PLUGIN, "name": "other"}}), "differs from the entry name"),
        (index(SKILL, SKILL), "appears twice"),
    ],
)
async def test_bad_index_is_rejected_and_nothing_changes_on_disk(server, tmp_path, body, message):
    # something is already installed; it must survive untouched
    good = registry(server.serve(index(SKILL), "/good.json"), tmp_path)
    good.install(good.stage((await good.fetch_index())[0]), confirmed=True)
    before = files(tmp_path)

    reg = registry(server.serve(body), tmp_path)
    with pytest.raises(RegistryError) as caught:
        await reg.fetch_index()
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert files(tmp_path) == before


async def test_oversized_index_is_cut_off(server, tmp_path):
    reg = registry(server.serve(b" " * (1024 * 1024 + 10)), tmp_path)
    with pytest.raises(RegistryError, match="too large"):
        await reg.fetch_index()


async def test_redirects_and_errors_are_not_followed(server, tmp_path):
    server.routes["/moved"] = (302, {"Location": "http://127.0.0.1:1/elsewhere"}, b"")
    with pytest.raises(RegistryError, match="redirects to http://127.0.0.1:1/elsewhere"):
        await registry(server.url + "/moved", tmp_path).fetch_index()
    with pytest.raises(RegistryError, match="HTTP 404"):
        await registry(server.url + "/missing", tmp_path).fetch_index()
    assert server.requests == ["/moved", "/missing"]


@pytest.mark.parametrize("url", ["http://example.com/index.json", "ftp://x/index.json", "file:///etc/passwd", "not a url"])
async def test_only_https_is_accepted(tmp_path, url):
    with pytest.raises(RegistryError, match="must be an https:// address"):
        await Registry(url, tmp_path).fetch_index()


async def test_plain_http_to_localhost_needs_the_explicit_test_flag(server, tmp_path):
    with pytest.raises(RegistryError, match="https://"):
        await Registry(server.serve(index(SKILL)), tmp_path).fetch_index()
    assert server.requests == []


async def test_remove_deletes_only_what_the_registry_installed(server, tmp_path):
    reg = registry(server.serve(index(SKILL, PLUGIN_ENTRY)), tmp_path)
    skill, plugin = await reg.fetch_index()
    reg.install(reg.stage(skill), confirmed=True)
    reg.install(reg.stage(plugin), confirmed=True)
    own = tmp_path / "config" / "skills" / "my-own" / "SKILL.md"
    own.parent.mkdir(parents=True)
    own.write_text("mine")

    with pytest.raises(RegistryError, match="was not installed from the registry"):
        reg.remove("my-own")
    removed = reg.remove("pytest-fixer")
    assert [(i.kind, i.name) for i in removed] == [("skill", "pytest-fixer")]
    assert sorted(files(tmp_path / "config")) == ["plugins/no-force-push.json", "registry.json", "skills/my-own/SKILL.md"]
    assert [i.name for i in reg.installed()] == ["no-force-push"]
