"""Path rules judge the written and the resolved path: generated trees with symlinks
(inside, outside, into ``.git``, loops, dangling) and generated rules, through the real
gate; and real headless runs writing through a committed symlink."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kettle import adhoc, run_ketch

from ketch.gate.approval import ApprovalGate
from ketch.extensions.plugins import compile_guard, config_rules
from ketch.gate.rules import Rule, RuleSet, glob_to_regex, normalize_path
from ketch.sandbox.run_later import is_run_later

WIRE = "openai-chat"
DIRS = ["src", "src/sub", "docs", ".git", ".git/hooks"]
FILES = ["src/a.txt", "src/sub/b.py", "docs/c.md", ".git/config"]
# where a link may point: inside, into .git, outside the workspace, itself/another link, nowhere
TARGETS = ["src", "src/sub", "docs/c.md", ".git", ".git/config", ".git/hooks", "../outside", "../outside/secret.txt", "@loop", "@other", "missing"]
LINK_PLACES = ["src", "src/sub", "docs", ""]
GLOBS = ["src/**", "src/*", "docs/**", "**", "**/*.txt", "**/config", ".git/**", "src/sub/**", "../outside/**", "/**"]
PARTS = ["src", "sub", "docs", ".git", "hooks", "a.txt", "b.py", "c.md", "config", "new.txt", "..", "l0", "l1", "l2"]


def _build(base: Path, links: list[tuple[str, str]]) -> Path:
    ws = base / "ws"
    for d in DIRS:
        (ws / d).mkdir(parents=True, exist_ok=True)
    for f in FILES:
        (ws / f).write_text("x\n")
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text("s\n")
    for k, (place, target) in enumerate(links):
        link = ws / place / f"l{k}" if place else ws / f"l{k}"
        if link.exists() or link.is_symlink():
            continue
        if target == "@loop":
            link.symlink_to(link.name)
        elif target == "@other":
            link.symlink_to(f"l{(k + 1) % max(len(links), 1)}")
        else:
            # a relative link, as a repository would commit it
            link.symlink_to(os.path.relpath(ws / target, link.parent))
    return ws


def _oracle_resolved(ws: Path, written: str) -> str | None:
    """Where the kernel would put a write, component by component with ``realpath``;
    None when it cannot say (a loop, or '..' after a missing part or a file)."""
    absolute = written if written.startswith("/") else f"{ws}/{written}"
    current = "/"
    for part in absolute.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not os.path.isdir(current):
                return None
            current = os.path.dirname(current)
            continue
        following = os.path.join(current, part)
        if os.path.islink(following):
            try:
                current = os.path.realpath(following, strict=True)
            except FileNotFoundError:
                current = os.path.realpath(following)
            except OSError:
                return None
        else:
            current = following
    probe = "/"
    for part in current.split("/"):
        if part:
            probe = os.path.join(probe, part)
            if os.path.islink(probe):
                return None  # a loop left unresolved
    return current


def _inside_forms(ws: Path, value: str) -> str | None:
    if value.startswith("/"):
        return os.path.relpath(value, ws) if value == str(ws) or value.startswith(f"{ws}/") else None
    norm = normalize_path(value)
    return None if norm == ".." or norm.startswith("../") else norm


def _matches(glob: str, ws: Path, value: str | None, absolute: str | None) -> bool:
    rx = glob_to_regex(normalize_path(glob))
    forms = [f for f in (value, absolute) if f]
    return any(rx.fullmatch(f) for f in forms)


_links = st.lists(st.tuples(st.sampled_from(LINK_PLACES), st.sampled_from(TARGETS)), min_size=0, max_size=3)
_rules = st.lists(st.tuples(st.sampled_from(GLOBS), st.sampled_from(["allow", "allow", "deny"])), min_size=1, max_size=3)
_tails = st.lists(st.sampled_from(PARTS), min_size=0, max_size=3).map("/".join)


def _through_links(links: list[tuple[str, str]]) -> st.SearchStrategy[str]:
    """Paths that go through one of the generated links, then anywhere."""
    starts = [f"{place}/l{k}" if place else f"l{k}" for k, (place, _) in enumerate(links)]
    return st.tuples(st.sampled_from(starts), _tails).map(lambda p: f"{p[0]}/{p[1]}" if p[1] else p[0])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_links, _rules, st.data(), st.booleans())
async def test_generated_trees_allow_only_what_is_allowed_written_and_resolved(links, rules, data, absolute) -> None:
    anywhere = st.lists(st.sampled_from(PARTS), min_size=1, max_size=4).map("/".join)
    path = data.draw(st.one_of(anywhere, _through_links(links)) if links else anywhere, label="path")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(os.path.realpath(tmp))
        ws = _build(base, links)
        written = f"{ws}/{path}" if absolute else path
        ruleset = RuleSet([Rule("write_file", g, a) for g, a in rules], root=ws)  # type: ignore[arg-type]
        gate = ApprovalGate(kinds={"write_file": "write"}, key_args={"write_file": "path"}, rules=ruleset)
        decision = await gate.evaluate("write_file", {"path": written, "content": "x"})

        resolved = _oracle_resolved(ws, written)
        written_rel = _inside_forms(ws, written)
        written_abs = written if absolute else os.path.normpath(f"{ws}/{path}")
        resolved_rel = _inside_forms(ws, resolved) if resolved else None
        denies = [g for g, a in rules if a == "deny"]
        allows = [g for g, a in rules if a == "allow"]
        denied = any(
            _matches(g, ws, written_rel, written_abs) or _matches(g, ws, written, None) or (resolved and _matches(g, ws, resolved_rel, resolved))
            for g in denies
        )

        if denied:
            assert decision.action == "deny", (written, resolved, rules, decision)
            return
        if decision.action == "allow":
            assert resolved is not None, (written, rules)

            def allowed(glob: str, rel: str | None, abs_: str) -> bool:
                # a relative glob sees only the path inside the workspace; an absolute one the absolute path
                return _matches(glob, ws, None, abs_) if glob.startswith("/") else _matches(glob, ws, rel, None)

            assert any(allowed(g, written_rel, written_abs) and allowed(g, resolved_rel, resolved) for g in allows), (written, resolved, rules)
            assert not is_run_later(written_rel or "") and not is_run_later(resolved_rel or ""), (written, resolved)
        else:
            assert decision.action == "ask"


def _user_config(text: str) -> None:
    (Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml").write_text("titles = false\n" + text, encoding="utf-8")


def _repo_with_links(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (tmp_path / "outside").mkdir()
    (ws / "src" / "gitdir").symlink_to("../.git")
    (ws / "src" / "out").symlink_to("../../outside")
    return ws


def test_headless_an_allowed_tree_does_not_reach_through_its_symlinks(tmp_path: Path) -> None:
    ws = _repo_with_links(tmp_path)
    _user_config('[permissions]\nwrite_file = { "src/**" = "allow" }\n')
    config_before = (ws / ".git" / "config").read_text()
    calls = [
        ToolCall("write_file", {"path": "src/gitdir/config", "content": "[core]\n\tfsmonitor = touch pwned\n"}),
        ToolCall("write_file", {"path": "src/gitdir/hooks/pre-commit", "content": "#!/bin/sh\ntouch pwned\n"}),
        ToolCall("write_file", {"path": "src/out/planted.txt", "content": "x\n"}),
        ToolCall("write_file", {"path": "src/../.gitattributes", "content": "* filter=x\n"}),
        ToolCall("write_file", {"path": "src/ok.txt", "content": "fine\n"}),
    ]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "write", "--output-format", "stream-json", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert (ws / ".git" / "config").read_text() == config_before
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert not (tmp_path / "outside" / "planted.txt").exists()
    assert not (ws / ".gitattributes").exists()
    assert (ws / "src" / "ok.txt").read_text() == "fine\n"
    resolved = [e for e in map(json.loads, filter(str.strip, run.stdout.splitlines())) if e["type"] == "approval_resolved"]
    assert sorted((r["decision"], r["by"]) for r in resolved) == [("allow", "rule")] + [("deny", "default")] * 4
    results = [c for _, c in tool_results(fake.model_requests[1])]
    assert "run code later" in results[0] and "run code later" in results[3]


def test_headless_a_run_later_path_asks_even_under_allow_everything(tmp_path: Path) -> None:
    ws = _repo_with_links(tmp_path)
    _user_config('[permissions]\nwrite_file = "allow"\n')
    calls = [
        ToolCall("write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
        ToolCall("write_file", {"path": ".ketch/config.toml", "content": "[permissions]\nshell = 'allow'\n"}),
        ToolCall("write_file", {"path": ".github/workflows/ci.yml", "content": "on: push\n"}),
        ToolCall("write_file", {"path": ".envrc", "content": "touch pwned\n"}),
        ToolCall("write_file", {"path": "src/gitdir/config", "content": "x\n"}),
        ToolCall("write_file", {"path": "notes.txt", "content": "ok\n"}),
    ]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "write", "--output-format", "stream-json", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    for rel in (".git/hooks/pre-commit", ".ketch/config.toml", ".github/workflows/ci.yml", ".envrc"):
        assert not (ws / rel).exists(), rel
    assert (ws / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    assert (ws / "notes.txt").read_text() == "ok\n"
    with FakeProvider([Turn(tool_calls=calls[:1]), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "write", "--yolo", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert (ws / ".git" / "hooks" / "pre-commit").exists(), "--yolo is the one thing that skips the prompt"


def test_headless_a_guard_glob_on_git_is_not_passed_through_a_symlink(tmp_path: Path) -> None:
    ws = _repo_with_links(tmp_path)
    _user_config('guards = [{kind = "arg", tool = "write_file", arg = "path", glob = ".git/**", reason = "git is mine"}]\n')
    calls = [ToolCall("write_file", {"path": "src/gitdir/hooks/post-checkout", "content": "#!/bin/sh\n"})]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="done")]) as fake:
        run = run_ketch(["-p", "write", "--yolo", *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    assert not (ws / ".git" / "hooks" / "post-checkout").exists()
    assert "git is mine" in tool_results(fake.model_requests[1])[0][1]


def test_guard_globs_match_the_written_and_the_resolved_path(tmp_path: Path) -> None:
    ws = _repo_with_links(tmp_path)
    guard = compile_guard([], config_rules([{"kind": "arg", "tool": "*", "arg": "path", "glob": ".git/**", "reason": "r"}]), root=ws)
    assert guard.check("write_file", {"path": "src/gitdir/config"}) is not None
    assert guard.check("write_file", {"path": ".git/config"}) is not None
    assert guard.check("write_file", {"path": "src/x/../../.git/config"}) is not None
    assert guard.check("write_file", {"path": "src/ok.txt"}) is None


async def test_allow_for_this_session_does_not_cover_a_run_later_path(tmp_path: Path) -> None:
    ws = _repo_with_links(tmp_path)
    gate = ApprovalGate(kinds={"write_file": "write", "edit_file": "write"}, key_args={"write_file": "path", "edit_file": "path"}, rules=RuleSet(root=ws))
    gate.allow_for_session("write_file", {"path": "notes.txt"})
    assert (await gate.evaluate("write_file", {"path": "notes.txt"})).action == "allow"
    for path in (".git/config", "src/gitdir/config", f"{ws}/.ketch/config.toml", "sub/.gitattributes", ".VSCODE/tasks.json"):
        decision = await gate.evaluate("write_file", {"path": path})
        assert (decision.action, decision.rule) == ("ask", "run-later path"), path
    assert (await gate.evaluate("edit_file", {"path": "src/gitdir/hooks/pre-push"})).action == "ask"
    yolo = ApprovalGate(kinds={"write_file": "write"}, key_args={"write_file": "path"}, rules=RuleSet(root=ws), yolo=True)
    assert (await yolo.evaluate("write_file", {"path": ".git/config"})).action == "allow"


def test_guard_regexes_on_paths_see_the_resolved_path_too(tmp_path: Path) -> None:
    ws = _repo_with_links(tmp_path)
    guard = compile_guard([], config_rules([{"kind": "arg", "tool": "*", "arg": "path", "regex": r"(^|/)\.git(/|$)", "reason": "r"}]), root=ws)
    assert guard.check("write_file", {"path": "src/gitdir/hooks/x"}) is not None
    assert guard.check("write_file", {"path": "src/ok.txt"}) is None


async def test_a_read_deny_holds_through_a_symlink_and_the_jail_resolution(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key.pem").write_text("k\n")
    (ws / "docs").mkdir()
    (ws / "docs" / "s").symlink_to("../secrets")
    gate = ApprovalGate(
        kinds={"read_file": "read"}, key_args={"read_file": "path"}, rules=RuleSet([Rule("read_file", "secrets/**", "deny")], root=ws)
    )
    for path in ("secrets/key.pem", "docs/s/key.pem", f"{ws}/docs/s/key.pem", "docs/../secrets/key.pem"):
        assert (await gate.evaluate("read_file", {"path": path})).action == "deny", path
    assert (await gate.evaluate("read_file", {"path": "docs/readme.md"})).action == "allow"
