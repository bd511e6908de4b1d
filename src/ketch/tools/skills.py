"""The skill catalogue: reusable instructions the model loads by name when a task calls for them.

A skill is a folder holding ``SKILL.md``: front matter between ``---`` lines with at least
``name`` and ``description``, then the body. Skills are found in, by precedence (the first
of a name wins): ``<project>/.ketch/skills``, the user's skills folder
(``$KETCH_CONFIG_DIR/skills`` or the platform config dir), and ``<project>/.claude/skills``.

Only names and descriptions enter the prompt; the ``skill`` tool returns a body on demand.
A file that cannot be read or parsed is skipped and reported in ``SkillCatalog.warnings``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.config.settings import user_config_dir
from ketch.config.frontmatter import FrontMatterError, split_front_matter
from ketch.tools.base import ToolDeps, ToolSpec

SKILL_FILE = "SKILL.md"
_DESCRIPTION_CAP = 1024


class SkillFormatError(ValueError):
    """A SKILL.md whose front matter cannot be used."""


@dataclass(frozen=True)
class Skill:
    """One discovered skill."""

    name: str
    description: str
    path: Path
    """The SKILL.md file."""
    body: str = field(repr=False)

    @property
    def directory(self) -> Path:
        """The skill's folder (bundled scripts and references live beside SKILL.md)."""
        return self.path.parent


def user_skills_dir() -> Path:
    """``skills`` in the user config dir (``$KETCH_CONFIG_DIR`` or the platform's)."""
    return user_config_dir() / "skills"


def parse_skill(text: str) -> tuple[dict[str, str], str]:
    """Split SKILL.md text into its front matter and body (see ``frontmatter``)."""
    try:
        parsed = split_front_matter(text)
    except FrontMatterError as exc:
        raise SkillFormatError(str(exc)) from None
    if parsed is None:
        raise SkillFormatError("it does not start with a '---' front matter line")
    meta, body = parsed
    return meta, body.strip("\n")


def load_skill(path: Path) -> Skill:
    """Read and check one SKILL.md; raises ``SkillFormatError`` or ``OSError``."""
    meta, body = parse_skill(path.read_text(encoding="utf-8"))
    name = meta.get("name", "").strip()
    description = " ".join(meta.get("description", "").split())
    if not name:
        raise SkillFormatError("its front matter has no 'name'")
    if any(c.isspace() for c in name):
        raise SkillFormatError(f"its name {name!r} contains spaces")
    if not description:
        raise SkillFormatError("its front matter has no 'description'")
    if len(description) > _DESCRIPTION_CAP:
        description = description[:_DESCRIPTION_CAP].rstrip() + "…"
    return Skill(name=name, description=description, path=path, body=body)


@dataclass
class SkillCatalog:
    """The skills available to a session, and what went wrong finding them."""

    skills: dict[str, Skill] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def discover(cls, project_root: str | os.PathLike[str], user_dir: str | os.PathLike[str] | None = None) -> SkillCatalog:
        """Scan the project, user and ``.claude`` skill folders (in that precedence)."""
        root = Path(project_root)
        roots = [
            root / ".ketch" / "skills",
            Path(user_dir) if user_dir is not None else user_skills_dir(),
            root / ".claude" / "skills",
        ]
        catalog = cls()
        for skills_root in roots:
            if not skills_root.is_dir():
                continue
            for path in sorted(skills_root.glob(f"*/{SKILL_FILE}")):
                try:
                    skill = load_skill(path)
                except (SkillFormatError, OSError, UnicodeDecodeError) as exc:
                    catalog.warnings.append(f"skipped skill {path}: {exc}")
                    continue
                catalog.skills.setdefault(skill.name, skill)
        return catalog

    def render_for_prompt(self) -> str:
        """Names and descriptions for the instructions, or '' when there are no skills."""
        if not self.skills:
            return ""
        lines = ["Skills (call the skill tool with a name to load its instructions when a task matches):"]
        lines += [f"- {s.name}: {s.description}" for s in sorted(self.skills.values(), key=lambda s: s.name)]
        return "\n".join(lines)

    def load(self, name: str) -> str:
        """The body of the skill called ``name``; ``KeyError`` when there is none."""
        return self.skills[name].body


async def skill(ctx: RunContext[ToolDeps], name: str) -> str:
    """Load a skill's instructions by name (the names are listed in your instructions).

    Args:
        name: The skill's name exactly as listed.
    """
    catalog: SkillCatalog | None = ctx.deps.extras.get("skills")
    if catalog is None or name not in catalog.skills:
        known = ", ".join(sorted(catalog.skills)) if catalog else ""
        raise ToolFailed(f"no skill named {name!r}" + (f"; available: {known}" if known else ""))
    found = catalog.skills[name]
    return f"Skill '{found.name}' (files beside it are in {found.directory}):\n\n{found.body}"


TOOLS: list[ToolSpec] = [ToolSpec(name="skill", function=skill, kind="read", key_arg="name")]
