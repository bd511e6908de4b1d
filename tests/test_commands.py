from __future__ import annotations

from pathlib import Path

import pytest

from ketch.extensions.commands import (
    Command,
    CommandRegistry,
    builtin_commands,
    default_registry,
    expand_user_command,
    parse_command_file,
    CommandFileError,
)

BUILTIN_NAMES = [
    "help", "model", "think", "agent", "clear", "compact", "resume", "sessions", "fork", "repair", "tools",
    "cost", "context", "todos", "memory", "skills", "mcp", "sandbox", "approval", "registry", "commit", "export", "bashes", "quit",
]  # fmt: skip


@pytest.fixture
def registry() -> CommandRegistry:
    return CommandRegistry(builtin_commands())


def test_every_builtin_is_registered_with_help(registry):
    assert [c.name for c in registry.commands] == BUILTIN_NAMES
    assert all(c.help and c.handler is None for c in registry.commands)


def test_parse_only_slash_input_and_resolves_aliases(registry):
    cmd, args = registry.parse("/model  anthropic:claude-sonnet ")
    assert (cmd.name, args) == ("model", "anthropic:claude-sonnet")
    assert registry.parse("/exit")[0].name == "quit"
    assert registry.parse("/q")[0].name == "quit"
    assert registry.parse("/compact\nkeep the API notes")[1] == "keep the API notes"
    assert registry.parse("model gpt") is None
    assert registry.parse(" /model") is None
    assert registry.parse("/nosuch thing") is None
    assert registry.parse("/") is None


def test_menu_puts_prefix_matches_first_then_aliases_then_fuzzy(registry):
    assert [c.name for c in registry.match("/co")] == ["cost", "commit", "compact", "context"]
    assert [c.name for c in registry.match("mo")] == ["model", "memory", "sandbox"]  # fuzzy after prefix (sandbox by its alias permissions)
    assert [c.name for c in registry.match("se")] == ["sessions", "cost", "bashes", "resume"]
    assert registry.match("ex")[0].name == "export"
    assert [c.name for c in registry.match("ex")][:2] == ["export", "quit"]  # alias /exit
    assert [c.name for c in registry.match("rgs")] == ["registry"]
    assert registry.match("zzz") == []
    assert registry.match("") == registry.commands


def test_suggest_closest_names_for_a_typo(registry):
    assert registry.suggest("modle") == ["model"]
    assert registry.suggest("/comit")[0] == "commit"
    assert registry.suggest("exti")[0] == "quit"
    assert registry.suggest("xyzzy") == []


def test_duplicate_names_are_refused(registry):
    with pytest.raises(ValueError, match="/q is already a command"):
        registry.register(Command("quick", aliases=("q",)))


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def test_user_commands_load_expand_and_bad_files_are_skipped(tmp_path):
    project, config = tmp_path / "proj", tmp_path / "cfg"
    write(project / ".ketch/commands/review.md", "---\ndescription: Review the diff\nargument-hint: [focus]\n---\nReview focusing on $ARGUMENTS.\n")
    write(config / "commands/review.md", "user version loses to the project\n")
    write(config / "commands/standup.md", "Summarize what changed since yesterday.\n")
    write(config / "commands/broken.md", "---\ndescription: never closed\nbody\n")
    write(config / "commands/badline.md", "---\nthis is not a pair\n---\nbody\n")
    write(config / "commands/Bad Name.md", "hello\n")
    write(config / "commands/latin.md", b"\xff\xfe not utf-8")
    write(config / "commands/help.md", "shadowing a built-in\n")
    warnings: list[str] = []
    registry = default_registry(project, config, warnings.append)

    review = registry.get("review")
    assert (review.help, review.args_hint, review.source) == ("Review the diff", "[focus]", str(project / ".ketch/commands/review.md"))
    cmd, args = registry.parse("/review error handling")
    assert expand_user_command(cmd, args) == "Review focusing on error handling.\n"
    standup = registry.get("standup")
    assert standup.help == "Summarize what changed since yesterday."
    assert expand_user_command(standup, "") == "Summarize what changed since yesterday.\n"
    assert expand_user_command(standup, "only backend") == "Summarize what changed since yesterday.\n\nonly backend"
    assert registry.get("help").template is None

    skipped = sorted(w.split(":")[0] for w in warnings)
    assert skipped == sorted(
        f"skipped command file {config / 'commands' / n}" for n in ["Bad Name.md", "badline.md", "broken.md", "help.md", "latin.md"]
    )
    assert any("never ends" in w for w in warnings) and any("built-in" in w for w in warnings)


def test_front_matter_parsing():
    assert parse_command_file("plain\n").body == "plain\n"
    parsed = parse_command_file("---\ndescription: \"Quoted\"\n---\n\nBody\n")
    assert (parsed.description, parsed.body) == ("Quoted", "Body\n")
    with pytest.raises(CommandFileError, match="never ends"):
        parse_command_file("---\ndescription: x\n")
