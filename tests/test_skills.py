"""Skill discovery from real folders, front matter parsing and the skill tool."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.skills import TOOLS, SkillCatalog, SkillFormatError, parse_skill, skill, user_skills_dir
from ketch.tools.base import ToolDeps


def write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@dataclass
class FakeWorkspace:
    root: Path = field(default_factory=Path.cwd)


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call_1"


def test_parse_front_matter_subset() -> None:
    meta, body = parse_skill(
        '---\nname: "pdf-tools"\ndescription: \'Fill PDF forms; it''s easy\'\n# comment\nallowed-tools:\n'
        "  - Bash\nlicense: MIT\n---\n\n# PDF\nStep one.\n"
    )
    assert meta == {"name": "pdf-tools", "description": "Fill PDF forms; its easy", "allowed-tools": "", "license": "MIT"}
    assert body == "# PDF\nStep one."
    with pytest.raises(SkillFormatError, match="closing"):
        parse_skill("---\nname: x\n")
    with pytest.raises(SkillFormatError, match="line 3"):
        parse_skill("---\nname: x\njust words\n---\nbody")


def test_discover_precedence_prompt_and_load(tmp_path: Path) -> None:
    project, user = tmp_path / "proj", tmp_path / "user-skills"
    write_skill(project / ".ketch" / "skills", "review", "---\nname: review\ndescription: Project review\n---\nproject body")
    write_skill(user, "review", "---\nname: review\ndescription: User review\n---\nuser body")
    write_skill(user, "commit", "---\nname: commit\ndescription: Write commit\n  messages well\n---\ncommit body")
    write_skill(project / ".claude" / "skills", "deploy", "---\nname: deploy\ndescription: Ship it\n---\ndeploy body")
    (project / ".claude" / "skills" / "notes.md").write_text("not a skill folder")
    catalog = SkillCatalog.discover(project, user_dir=user)
    assert catalog.warnings == []
    assert sorted(catalog.skills) == ["commit", "deploy", "review"]
    assert catalog.load("review") == "project body"  # .ketch wins over the user dir
    assert catalog.skills["deploy"].directory == project / ".claude" / "skills" / "deploy"
    assert catalog.render_for_prompt().splitlines()[1:] == [
        "- commit: Write commit",
        "- deploy: Ship it",
        "- review: Project review",
    ]
    assert "body" not in catalog.render_for_prompt()
    assert SkillCatalog.discover(tmp_path / "empty", user_dir=tmp_path / "none").render_for_prompt() == ""


def test_malformed_files_are_skipped_with_a_warning_naming_them(tmp_path: Path) -> None:
    skills = tmp_path / ".ketch" / "skills"
    good = write_skill(skills, "good", "---\nname: good\ndescription: fine\n---\nok")
    no_front = write_skill(skills, "bare", "# Just markdown\n")
    no_desc = write_skill(skills, "nodesc", "---\nname: nodesc\n---\nbody")
    binary = skills / "binary" / "SKILL.md"
    binary.parent.mkdir()
    binary.write_bytes(b"---\nname: \xff\xfe\n---\n")
    catalog = SkillCatalog.discover(tmp_path, user_dir=tmp_path / "nouser")
    assert list(catalog.skills) == ["good"] and catalog.skills["good"].path == good
    assert len(catalog.warnings) == 3
    for path, reason in [(no_front, "does not start"), (no_desc, "no 'description'"), (binary, "")]:
        assert any(str(path) in w and reason in w for w in catalog.warnings), catalog.warnings


def test_user_dir_follows_ketch_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KETCH_CONFIG_DIR", str(tmp_path / "cfg"))
    assert user_skills_dir() == tmp_path / "cfg" / "skills"
    write_skill(tmp_path / "cfg" / "skills", "mine", "---\nname: mine\ndescription: from config\n---\nmine body")
    assert SkillCatalog.discover(tmp_path / "proj").load("mine") == "mine body"


async def test_skill_tool_returns_body_or_fails_clearly(tmp_path: Path) -> None:
    assert [(t.name, t.kind, t.key_arg) for t in TOOLS] == [("skill", "read", "name")]
    write_skill(tmp_path / ".ketch" / "skills", "lint", "---\nname: lint\ndescription: Lint\n---\nRun ruff.")
    catalog = SkillCatalog.discover(tmp_path, user_dir=tmp_path / "nouser")
    ctx = Ctx(ToolDeps(workspace=FakeWorkspace(), extras={"skills": catalog}))
    reply = await skill(ctx, "lint")
    assert reply.endswith("\n\nRun ruff.") and str(tmp_path / ".ketch" / "skills" / "lint") in reply
    with pytest.raises(ToolFailed, match="no skill named 'nope'; available: lint"):
        await skill(ctx, "nope")
    with pytest.raises(ToolFailed, match="no skill named"):
        await skill(Ctx(ToolDeps(workspace=FakeWorkspace())), "lint")
