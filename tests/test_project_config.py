"""Which keys of a repository's config narrow and which widen, as ``load_config`` applies them
(untrusted: only the narrowing part; trusted: both) — every widening key of ``config/settings.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from kettle import write_project_config

from ketch.config.settings import Config, load_config, project_split
from ketch.config.trust import standing_of

WIDENING = {
    "permissions": '[permissions]\nread_file = "allow"\n',
    "hooks": '[[hooks.after_tool]]\ncommand = "true"\n',
    "mcp": '[mcp.servers.x]\ncommand = "true"\n',
    "agents": '[agents.plan]\ntools = ["shell"]\n',
    "added_dirs": 'added_dirs = ["/etc"]\n',
    "max_steps": "max_steps = 1000\n",
    "registry_url": 'registry_url = "https://evil.example/index.json"\n',
    "web_search": "[web_search]\nenabled = true\n",
    "connections": '[connections.ollama]\nbase_url = "http://127.0.0.1:1/v1"\n',
}


@pytest.mark.parametrize("key", list(WIDENING))
def test_each_widening_key_waits_for_trust(tmp_path: Path, key: str) -> None:
    write_project_config(tmp_path, WIDENING[key], trust=False)
    split = project_split(tmp_path)
    assert key in split.widening and split.additions
    untrusted = load_config(tmp_path)
    trusted = load_config(tmp_path, trust_flag=True)
    default = Config()
    assert getattr(untrusted, key) == getattr(default, key)
    assert getattr(trusted, key) != getattr(default, key)
    assert not untrusted.project_trust.applied and trusted.project_trust.applied


def test_narrowing_applies_and_cannot_undo_the_users(tmp_path: Path, isolated_home: Path) -> None:
    (isolated_home / "config" / "config.toml").write_text(
        'titles = false\nmax_steps = 20\nprivacy = true\n[tools]\ndisabled = ["web_fetch"]\nenabled = ["read_file", "shell", "web_fetch"]\n'
        '[permissions]\nshell = "deny"\n[[guards]]\nkind = "command_prefix"\nprefix = "rm"\nreason = "no"\n'
    )
    write_project_config(
        tmp_path,
        'max_steps = 5\nprivacy = false\nguards = []\n[tools]\ndisabled = []\nenabled = ["read_file", "glob"]\nkeep_env = ["X_TOKEN"]\n'
        '[permissions]\nshell = "ask"\nwrite_file = { "**" = "deny" }\n',
        trust=False,
    )
    config = load_config(tmp_path)
    assert config.max_steps == 5
    assert config.privacy is True and "privacy" in project_split(tmp_path).widening  # turning it off widens
    assert config.tools.disabled == ["web_fetch"] and config.tools.enabled == ["read_file"]
    assert config.tools.keep_env == []
    assert config.guards == [{"kind": "command_prefix", "prefix": "rm", "reason": "no"}]
    assert config.permissions["shell"] == "deny" and "shell" in config.permissions["ask"]
    assert "write_file(**)" in config.permissions["deny"]


def test_the_digest_follows_only_the_widening_part(tmp_path: Path) -> None:
    write_project_config(tmp_path, 'think = "high"\n[permissions]\nshell = { "ls*" = "allow" }\n', trust=False)
    first = project_split(tmp_path).digest
    write_project_config(tmp_path, 'think = "low"\n[permissions]\nshell = { "ls*" = "allow", "rm*" = "deny" }\n', trust=False)
    assert project_split(tmp_path).digest == first  # narrowing changes need no new answer
    write_project_config(tmp_path, 'think = "low"\n[permissions]\nshell = { "ls*" = "allow", "cat*" = "allow" }\n', trust=False)
    assert project_split(tmp_path).digest != first
    assert standing_of(tmp_path, project_split(tmp_path)).standing == "unknown"


@pytest.mark.parametrize("rule", ['shell = 5', 'shell = "allwo"', 'shell = { "ls*" = "yes" }', 'allow = [1]'])
def test_a_malformed_rule_is_an_error_naming_the_file(tmp_path: Path, rule: str) -> None:
    from kettle import one_line_error, run_ketch

    write_project_config(tmp_path, f"[permissions]\n{rule}\n", trust=False)
    run = run_ketch(["-p", "hi", "--base-url", "http://127.0.0.1:9/v1", "--wire", "openai-chat", "--model", "m"], tmp_path)
    assert run.code == 2
    line = one_line_error(run.stderr)
    assert ".ketch/config.toml" in line and "permission rule" in line


def test_a_trusted_repo_agent_merges_with_the_users_of_the_same_name(tmp_path: Path, isolated_home: Path) -> None:
    (isolated_home / "config" / "config.toml").write_text('titles = false\n[agents.review]\ntools = ["read_file"]\nprompt = "mine"\n')
    write_project_config(tmp_path, '[agents.review]\ntools = ["read_file", "grep"]\n', trust=False)
    assert load_config(tmp_path).agents["review"].tools == ["read_file"]
    trusted = load_config(tmp_path, trust_flag=True).agents["review"]
    assert trusted.tools == ["read_file", "grep"] and trusted.prompt == "mine"
