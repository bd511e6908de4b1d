"""The external registry of skills and plugins: fetch, validate, stage, install, remove.

The index is one JSON document fetched over HTTPS::

    {"version": 1, "entries": [
        {"kind": "skill", "name": "pytest-fixer", "description": "...", "body": "<SKILL.md text>"},
        {"kind": "plugin", "name": "no-secrets", "description": "...", "manifest": {...}}]}

Entries carry their content inline (no per-entry URLs): the whole index is fetched once,
capped at 1 MB, and validated before anything is shown, so what the user reviews is
exactly what gets written. Any invalid entry rejects the whole index with a message
naming it. Nothing from the registry can execute: skills are text, plugins are
manifests of refusal rules validated by ``plugins.validate_manifest``.

No side effects happen before ``install``: construction and ``fetch_index`` touch no
disk, and ``install`` refuses anything not produced by ``stage`` and confirmed.
Installs are recorded in ``registry.json`` next to them so ``remove`` only ever deletes
what the registry put there.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from ketch.protocol import strict_json
from ketch.extensions.plugins import Manifest, ManifestError, check_name, check_text, validate_manifest

MAX_INDEX_BYTES = 1024 * 1024
MAX_SKILL_BYTES = 64 * 1024
MAX_ENTRIES = 1000
INDEX_VERSION = 1
LEDGER = "registry.json"
_ENTRY_KEYS = {"skill": {"kind", "name", "description", "version", "body"}, "plugin": {"kind", "name", "description", "version", "manifest"}}
_INDEX_KEYS = {"version", "entries", "name", "description"}
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}

Kind = Literal["skill", "plugin"]
Scope = Literal["user", "project"]


class RegistryError(Exception):
    """Anything wrong with the registry: address, network, index content, install."""


@dataclass(frozen=True)
class Entry:
    """A validated index entry."""

    kind: Kind
    name: str
    description: str
    version: str = ""
    body: str = ""
    """The SKILL.md text (skills)."""
    manifest: Manifest | None = None
    """The validated manifest (plugins)."""


@dataclass(frozen=True, eq=False)
class Staged:
    """An entry prepared for review: ``text`` is everything that will be installed."""

    entry: Entry
    text: str
    replaces: bool
    """Whether an installed item of the same kind and name would be replaced."""
    scope: Scope = "user"
    """Where it will be installed: the user config dir or the project's ``.ketch``."""
    pinned: Any = None
    """For an item from a git repository: the ``pinned_git.PinnedFile`` it was read from."""
    previous: str = ""
    """For an update of a git item: the commit installed now (the new one is ``pinned.commit``)."""


@dataclass(frozen=True)
class Installed:
    """A registry item on disk."""

    kind: Kind
    name: str
    scope: Scope
    path: Path


def _fail(where: str, problem: str) -> RegistryError:
    return RegistryError(f"registry index {where}: {problem}")


def parse_index(raw: bytes) -> list[Entry]:
    """Validate an index document; raise ``RegistryError`` naming the first problem."""
    if len(raw) > MAX_INDEX_BYTES:
        raise _fail("is too large", f"more than {MAX_INDEX_BYTES // 1024} KB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _fail("is not valid JSON", str(exc)) from exc
    if not isinstance(data, dict):
        raise _fail("is malformed", "expected a JSON object with 'version' and 'entries'")
    if data.get("version") != INDEX_VERSION:
        raise _fail("has an unsupported version", f"{data.get('version')!r} (this ketch reads version {INDEX_VERSION})")
    unknown = set(data) - _INDEX_KEYS
    if unknown:
        raise _fail("is malformed", f"unknown field(s) {', '.join(sorted(unknown))}")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise _fail("is malformed", "'entries' must be a list")
    if len(entries) > MAX_ENTRIES:
        raise _fail("is too large", f"more than {MAX_ENTRIES} entries")
    parsed = [_parse_entry(i, e) for i, e in enumerate(entries, 1)]
    seen: set[tuple[str, str]] = set()
    for entry in parsed:
        if (entry.kind, entry.name) in seen:
            raise _fail(f"entry {entry.kind} {entry.name!r}", "appears twice")
        seen.add((entry.kind, entry.name))
    return parsed


def _parse_entry(index: int, data: Any) -> Entry:
    if not isinstance(data, dict):
        raise _fail(f"entry {index}", "must be an object")
    kind = data.get("kind")
    label = f"entry {index} ({data.get('name')!r})" if isinstance(data.get("name"), str) else f"entry {index}"
    if kind not in _ENTRY_KEYS:
        raise _fail(label, f"unknown kind {kind!r}: expected 'skill' or 'plugin'")
    unknown = set(data) - _ENTRY_KEYS[kind]
    if unknown:
        raise _fail(label, f"unknown field(s) {', '.join(sorted(unknown))}")
    try:
        name = check_name(data.get("name"), "name")
        description = check_text(data.get("description", ""), "description", required=False)
        version = check_text(data.get("version", ""), "version", 64, required=False)
        if kind == "skill":
            body = data.get("body")
            if not isinstance(body, str) or not body.strip():
                raise ManifestError("a skill needs a non-empty 'body' (the SKILL.md text)")
            if len(body.encode("utf-8")) > MAX_SKILL_BYTES:
                raise ManifestError(f"skill body is larger than {MAX_SKILL_BYTES // 1024} KB")
            check_text(body, "skill body", MAX_SKILL_BYTES)
            return Entry("skill", name, description, version, body=body)
        manifest = validate_manifest(data.get("manifest"), "manifest")
        if manifest.name != name:
            raise ManifestError(f"manifest name {manifest.name!r} differs from the entry name {name!r}")
        return Entry("plugin", name, description, version, manifest=manifest)
    except ManifestError as exc:
        raise _fail(label, str(exc)) from exc


def _check_url(url: str, allow_insecure_localhost: bool) -> None:
    from ketch.config.hostcheck import url_problem

    problem = url_problem(url)
    if problem is not None:
        raise RegistryError(f"registry URL refused: {problem}")
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if allow_insecure_localhost and parts.scheme == "http" and parts.hostname in _LOCAL_HOSTS:
        return
    raise RegistryError(f"registry URL {url!r} must be an https:// address; set registry.url in your config")


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_text(entry: Entry) -> str:
    """What installing ``entry`` writes: the skill's text or the manifest as JSON."""
    if entry.kind == "skill":
        return entry.body
    if entry.manifest is None:
        raise RegistryError(f"registry entry {entry.name!r} has nothing to install")
    return strict_json.dumps(entry.manifest.to_dict(), indent=2) + "\n"


def content_digest(entry: Entry) -> str:
    """The sha256 of what installing ``entry`` writes (shown, recorded, and checkable with --sha256)."""
    import hashlib

    return hashlib.sha256(file_text(entry).encode("utf-8")).hexdigest()


class Registry:
    """One registry index and the places its items install to."""

    def __init__(
        self,
        index_url: str,
        config_dir: Path,
        project_dir: Path | None = None,
        *,
        allow_insecure_localhost: bool = False,
        timeout_s: float = 20.0,
    ) -> None:
        self.index_url = index_url
        self.config_dir = Path(config_dir)
        self.project_dir = Path(project_dir) if project_dir is not None else None
        self._allow_insecure_localhost = allow_insecure_localhost
        self._timeout_s = timeout_s
        self._staged: dict[int, Staged] = {}

    async def fetch_index(self) -> list[Entry]:
        """Download and validate the index (no redirects, at most 1 MB)."""
        _check_url(self.index_url, self._allow_insecure_localhost)
        chunks: list[bytes] = []
        size = 0
        try:
            plain_http = self.index_url.startswith("http://")  # only ever to localhost, see _check_url
            async with httpx.AsyncClient(
                timeout=self._timeout_s, follow_redirects=False, trust_env=not plain_http, verify=not plain_http
            ) as client:
                async with client.stream("GET", self.index_url, headers={"Accept": "application/json"}) as response:
                    if response.is_redirect:
                        where = response.headers.get("location", "?")
                        raise RegistryError(f"registry index at {self.index_url} redirects to {where}; set registry.url to the final address")
                    if response.status_code != 200:
                        raise RegistryError(f"registry index at {self.index_url} answered HTTP {response.status_code}")
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > MAX_INDEX_BYTES:
                            raise _fail("is too large", f"more than {MAX_INDEX_BYTES // 1024} KB")
                        chunks.append(chunk)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise RegistryError(f"could not fetch the registry index from {self.index_url}: {exc}") from exc
        return parse_index(b"".join(chunks))

    def _base(self, scope: Scope) -> Path:
        if scope == "project":
            if self.project_dir is None:
                raise RegistryError("no project directory: install to the user scope instead")
            return self.project_dir / ".ketch"
        return self.config_dir

    @staticmethod
    def _target(base: Path, kind: Kind, name: str) -> Path:
        check_name(name, "name")
        return base / "skills" / name / "SKILL.md" if kind == "skill" else base / "plugins" / f"{name}.json"

    def stage(self, entry: Entry, scope: Scope = "user") -> Staged:
        """Prepare an entry for review: the full skill text or every plugin rule, readably."""
        if entry.kind == "skill":
            text = entry.body
        elif entry.manifest is not None:
            text = entry.manifest.render()
        else:
            raise RegistryError(f"registry entry {entry.name!r} has nothing to install")
        target = self._target(self._base(scope), entry.kind, entry.name)
        staged = Staged(entry, text, replaces=target.exists(), scope=scope)
        self._staged[id(staged)] = staged
        return staged

    def stage_git(
        self, kind: Kind, name: str, url: str, commit: str, path: str, *, scope: Scope = "user",
        allow_local: bool = False, sha256: str | None = None,
    ) -> Staged:
        """Fetch ``path`` at the pinned ``commit`` of the repository at ``url`` (checked by
        ``pinned_git.fetch_pinned``) and prepare it for review like an index entry; an item
        of that name installed from another commit is marked as an update naming both."""
        from ketch.extensions.pinned_git import PinError, fetch_pinned

        check_name(name, "name")
        try:
            pinned = fetch_pinned(url, commit, path, allow_local=allow_local, sha256=sha256)
            text = pinned.data.decode("utf-8")
        except PinError as exc:
            raise RegistryError(str(exc)) from None
        except UnicodeDecodeError:
            raise RegistryError(f"{path} at {commit} is not UTF-8 text") from None
        try:
            if kind == "skill":
                check_text(text, "skill body", MAX_SKILL_BYTES)
                entry = Entry("skill", name, "", commit[:12], body=text)
            else:
                manifest = validate_manifest(json.loads(text), "manifest")
                if manifest.name != name:
                    raise ManifestError(f"manifest name {manifest.name!r} differs from {name!r}")
                entry = Entry("plugin", name, "", commit[:12], manifest=manifest)
        except (ManifestError, ValueError) as exc:
            raise RegistryError(f"{path} at {commit}: {exc}") from None
        staged = self.stage(entry, scope)
        del self._staged[id(staged)]
        record = self._read_ledger(self._base(scope)).get(f"{kind}:{name}") or {}
        previous = str(record.get("commit") or ("(not from git)" if staged.replaces else ""))
        staged = Staged(entry, staged.text, staged.replaces, scope, pinned=pinned, previous=previous if previous != commit else "")
        self._staged[id(staged)] = staged
        return staged

    def installed_record(self, kind: Kind, name: str, scope: Scope = "user") -> dict[str, str]:
        """The ledger's record of an installed item (empty when the registry did not install it)."""
        return self._read_ledger(self._base(scope)).get(f"{kind}:{name}") or {}

    def install(self, staged: Staged, confirmed: bool) -> Path:
        """Write a staged entry once the user confirmed it; returns the file written."""
        if confirmed is not True:
            raise RegistryError(f"not installing {staged.entry.name!r}: the user did not confirm it")
        if self._staged.get(id(staged)) is not staged:
            raise RegistryError(f"not installing {staged.entry.name!r}: stage it and show it to the user first")
        entry, base = staged.entry, self._base(staged.scope)
        target = self._target(base, entry.kind, entry.name)
        _write_atomic(target, file_text(entry))
        ledger = self._read_ledger(base)
        record = {"kind": entry.kind, "name": entry.name, "version": entry.version, "source": self.index_url,
                  "sha256": content_digest(entry)}
        if staged.pinned is not None:
            record.update(source=staged.pinned.url, commit=staged.pinned.commit, path=staged.pinned.path, sha256=staged.pinned.sha256)
        ledger[f"{entry.kind}:{entry.name}"] = record
        _write_atomic(base / LEDGER, strict_json.dumps(ledger, indent=2, sort_keys=True) + "\n")
        del self._staged[id(staged)]
        return target

    def installed(self) -> list[Installed]:
        """Items the registry installed that are still on disk, user scope first."""
        items: list[Installed] = []
        scopes: list[Scope] = ["user"] + (["project"] if self.project_dir is not None else [])
        for scope in scopes:
            base = self._base(scope)
            for record in self._read_ledger(base).values():
                try:
                    path = self._target(base, record["kind"], record["name"])
                except (ManifestError, KeyError):
                    continue
                if path.exists():
                    items.append(Installed(record["kind"], record["name"], scope, path))
        return items

    def remove(self, name: str, kind: Kind | None = None) -> list[Installed]:
        """Delete registry-installed items called ``name`` (of ``kind`` if given)."""
        matches = [i for i in self.installed() if i.name == name and kind in (None, i.kind)]
        if not matches:
            raise RegistryError(f"{name!r} was not installed from the registry; see `ketch registry list`")
        for item in matches:
            if item.kind == "skill":
                shutil.rmtree(item.path.parent)
            else:
                item.path.unlink()
            base = self._base(item.scope)
            ledger = self._read_ledger(base)
            ledger.pop(f"{item.kind}:{item.name}", None)
            _write_atomic(base / LEDGER, strict_json.dumps(ledger, indent=2, sort_keys=True) + "\n")
        return matches

    @staticmethod
    def _read_ledger(base: Path) -> dict[str, dict[str, str]]:
        try:
            data = json.loads((base / LEDGER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, Mapping):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, dict)}
