from __future__ import annotations

import json
from pathlib import Path

import pytest

from ketch.extensions.plugins import (
    ManifestError,
    compile_guard,
    config_rules,
    load_installed,
    load_manifest,
    validate_manifest,
)
from ketch.gate.guards import Refusal

MANIFEST = {
    "name": "safety-net",
    "version": "1.0",
    "description": "Keeps secrets and history safe.",
    "rules": [
        {"kind": "tool", "tool": "web_search", "reason": "no web search here"},
        {"kind": "arg", "tool": "write_file", "arg": "path", "glob": "**/.env*", "reason": "never write .env files"},
        {"kind": "arg", "tool": "*", "arg": "url", "regex": r"^https?://(?:[^/]*\.)?internal\.example\b", "reason": "internal hosts"},
        {"kind": "command_prefix", "prefix": "rm -rf", "reason": "no recursive force delete"},
        {"kind": "command_prefix", "prefix": "git push --force", "reason": "no force push"},
    ],
}


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def guard(tmp_path):
    manifest = load_manifest(write(tmp_path / "plugins" / "safety-net.json", MANIFEST))
    return compile_guard([manifest], root=tmp_path)


def test_tool_rule_refuses_every_call_and_names_its_source(guard):
    assert guard.check("web_search", {"query": "x"}) == Refusal("no web search here", "safety-net rule 1 (tool)")
    assert guard.check("read_file", {"path": ".env"}) is None


@pytest.mark.parametrize("path", [".env", "sub/dir/.env.local", "./a/../.env", "../elsewhere/.env"])
def test_arg_glob_refuses_matching_paths(guard, path):
    refusal = guard.check("write_file", {"path": path})
    assert refusal is not None and refusal.reason == "never write .env files"


def test_arg_glob_uses_workspace_relative_form_of_absolute_paths(guard, tmp_path):
    assert guard.check("write_file", {"path": str(tmp_path / "deep" / ".env")}) is not None
    assert guard.check("write_file", {"path": str(tmp_path / "src" / "env.py")}) is None


def test_arg_regex_applies_to_any_tool_with_that_arg(guard):
    assert guard.check("web_fetch", {"url": "https://api.internal.example/x"}).reason == "internal hosts"
    assert guard.check("mcp__fetch__get", {"url": "http://internal.example"}) is not None
    assert guard.check("web_fetch", {"url": "https://example.com/internal.example"}) is None


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "   rm   -rf build",
        "ls && rm -rf /",
        "echo ok; rm -rfv x",
        "echo $(rm -rf /)",
        "FOO=bar rm -rf /",
        "sudo -E rm -rf /",
        "env A=1 /bin/rm -rf /",
        "bash -lc 'cd / && rm -rf *'",
        "true | xargs rm -rf",
        "git status && git push --force origin main",
    ],
)
def test_command_prefix_is_caught_in_any_segment(guard, command):
    assert guard.check("shell", {"command": command}) is not None, command


@pytest.mark.parametrize("command", ["rm file.txt", "echo 'rm -rf' is dangerous", "git push origin main", "ls -rf"])
def test_command_prefix_leaves_other_commands_alone(guard, command):
    assert guard.check("shell", {"command": command}) is None


def test_config_rules_join_the_guard_with_their_own_source():
    extra = config_rules([{"kind": "command_prefix", "prefix": "curl", "reason": "no curl"}])
    guard = compile_guard([], extra)
    assert guard.check("shell", {"command": "ls; curl x"}) == Refusal("no curl", "config rule 1 (command_prefix)")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"rules": [{"kind": "exec", "command": "x", "reason": "r"}]}, "unknown kind 'exec'"),
        ({"rules": [{"kind": "arg", "tool": "*", "arg": "url", "regex": "(", "reason": "r"}]}, "does not compile"),
        ({"rules": [{"kind": "arg", "tool": "*", "arg": "url", "reason": "r"}]}, "exactly one of"),
        ({"rules": [{"kind": "tool", "tool": "shell"}]}, "missing: reason"),
        ({"rules": [{"kind": "tool", "tool": "shell", "reason": "r", "run": "x"}]}, "unknown field"),
        ({"rules": []}, "non-empty list"),
        ({"name": "../evil"}, "not allowed"),
        ({"name": ".hidden"}, "not allowed"),
        ({"name": "Upper"}, "not allowed"),
        ({"hooks": {}}, "unknown field"),
        ({"description": "hi\x1b[2Jthere"}, "control characters"),
        ({"rules": [{"kind": "tool", "tool": "shell", "reason": "r"}] * 501}, "more than 500"),
    ],
)
def test_validation_is_strict_and_names_the_problem(change, message):
    with pytest.raises(ManifestError, match=message.replace("(", r"\(").replace(".", r"\.")):
        validate_manifest({**MANIFEST, **change}, "test.json")


def test_render_shows_every_rule_readably():
    text = validate_manifest(MANIFEST).render()
    assert text.splitlines()[0] == "plugin safety-net 1.0"
    assert "refuse write_file when path matches glob **/.env* — never write .env files" in text
    assert "refuse shell commands starting with 'rm -rf' — no recursive force delete" in text


def test_manifest_round_trips_through_to_dict():
    manifest = validate_manifest(MANIFEST)
    assert validate_manifest(manifest.to_dict()) == manifest
    assert manifest.to_dict() == MANIFEST


def test_installed_manifests_load_from_both_dirs_and_bad_files_are_skipped(tmp_path):
    config, project = tmp_path / "cfg", tmp_path / "proj"
    write(config / "plugins" / "safety-net.json", MANIFEST)
    write(project / ".ketch" / "plugins" / "broken.json", "{not json")
    write(project / ".ketch" / "plugins" / "weird.json", {**MANIFEST, "name": "weird", "rules": [{"kind": "eval", "reason": "x"}]})
    write(project / ".ketch" / "plugins" / "local.json", {"name": "local", "rules": [{"kind": "tool", "tool": "shell", "reason": "no shell"}]})
    warnings: list[str] = []
    manifests = load_installed(config, project, warnings.append)
    assert [m.name for m in manifests] == ["safety-net", "local"]
    assert len(warnings) == 2
    assert "broken.json" in warnings[0] and "weird.json" in warnings[1] and "'eval'" in warnings[1]
    guard = compile_guard(manifests)
    assert guard.check("shell", {"command": "ls"}) == Refusal("no shell", "local rule 1 (tool)")


def test_oversized_manifest_file_is_rejected(tmp_path):
    big = write(tmp_path / "big.json", {**MANIFEST, "description": "x" * 100} | {"pad": "y" * 300_000})
    with pytest.raises(ManifestError, match="larger than"):
        load_manifest(big)
