"""The slash commands about what extends a session: ``/memory``, ``/skills``, ``/mcp``,
``/commit`` and ``/registry`` (a mixin of ``SlashActions``, which holds the session)."""

from __future__ import annotations

from typing import Any

from ketch.protocol.exceptions import ConfigError

BOLD, DIM, RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"


class ExtensionCommands:
    """Needs ``self.session``, ``self.cwd`` and ``self.args`` (``SlashActions`` sets them)."""

    session: Any
    cwd: Any

    async def memory(self, arg: str) -> str:
        book = self.session.deps.extras.get("memory")
        if book is None:
            return "Memory is not available in this session."
        verb, _, rest = arg.partition(" ")
        if verb == "add":
            if not rest.strip():
                raise ConfigError("/memory add needs the note's text")
            note_id = book.add(rest.strip())
            return f"Remembered (note {note_id})."
        if verb in ("remove", "rm", "forget"):
            if not rest.strip().isdigit():
                raise ConfigError(f"/memory {verb} needs a note number")
            return "Forgotten." if book.remove(int(rest)) else f"No note {rest.strip()}."
        notes = book.all()
        if not notes:
            return "No notes yet. Add one with /memory add TEXT."
        lines = [f"Notes ({len(notes)}):"] + [f"  {n.id:>3} [{n.scope}] {n.text}" for n in notes]
        return "\n".join(lines + ["Remove one with /memory remove N."])

    async def skills(self, arg: str) -> str:
        catalog = self.session.deps.extras.get("skills")
        skills = list(catalog.skills.values()) if catalog is not None else []
        if not skills:
            return "No skills found (.ketch/skills/NAME/SKILL.md, or the user skills folder)."
        lines = [f"Skills ({len(skills)}):"] + [f"  {s.name} — {s.description}" for s in skills]
        for warning in getattr(catalog, "warnings", []):
            lines.append(f"  {DIM}{warning}{RESET}")
        return "\n".join(lines)

    async def mcp(self, arg: str) -> str:
        hub = getattr(self.session, "mcp_hub", None)
        statuses = hub.status() if hub is not None else []
        if not statuses:
            return "No MCP servers configured ([mcp.servers.NAME] in .ketch/config.toml)."
        lines = ["MCP servers:"]
        for status in statuses:
            tools = ", ".join(status.tools) if status.tools else "-"
            line = f"  {status.name:<16} {status.state:<7} {tools}"
            lines.append(line + (f"  ({status.error})" if status.error else ""))
        return "\n".join(lines)

    async def commit(self, arg: str) -> str:
        session = self.session
        try:
            from ketch.core.commit import NothingStaged, propose_for_repo
        except ImportError:
            return "/commit is not available in this build."
        try:
            message = await propose_for_repo(session.model, session.workspace.root)
        except NothingStaged as exc:
            return str(exc)
        return "\n".join(["Proposed commit message:", "", *message.rstrip().splitlines(), "",
                          "Ask to commit with it, or run git commit yourself."])

    async def registry(self, arg: str) -> str:
        from ketch.config.settings import find_project_root, user_config_dir
        from ketch.extensions.registry import Registry, RegistryError

        parts = arg.split()
        action = parts[0] if parts else "list"
        name = parts[1] if len(parts) > 1 else ""
        registry = Registry(self.session.config.registry_url, user_config_dir(), find_project_root(self.cwd))
        try:
            if action == "list":
                entries = await registry.fetch_index()
                return "\n".join(f"{e.kind:<7} {e.name:<24} {e.description}" for e in entries) or "The registry is empty."
            if not name:
                raise ConfigError(f"/registry {action} needs a NAME")
            if action == "remove":
                registry.remove(name)
                return f"Removed {name}."
            if action not in ("show", "install"):
                raise ConfigError(f"unknown /registry action '{action}'; use list, show, install or remove")
            entries_by_name = {e.name: e for e in await registry.fetch_index()}
            if name not in entries_by_name:
                raise ConfigError(f"the registry has no entry '{name}'; see /registry list")
            staged = registry.stage(entries_by_name[name])
            if action == "show" or "--yes" not in parts:
                tail = [] if action == "show" else ["", f"It becomes part of every future prompt. Install with: /registry install {name} --yes"]
                return "\n".join([staged.text.rstrip(), *tail])
            registry.install(staged, confirmed=True)
            return f"Installed {name} (from the next session on)."
        except RegistryError as exc:
            raise ConfigError(str(exc)) from None
