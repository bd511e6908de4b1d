"""First run: no model configured and no key found. The UI offers a short setup.

The choices are the local servers that answer on 127.0.0.1 at their default ports (Ollama
11434, LM Studio 1234, llama.cpp 8080; nothing else is probed) and the key-based presets
(the key is stored as ``ketch auth login`` stores it). The choice is written to the user
config as ``model = "connection:model"`` (before any table, so it stays a top-level key).
``KETCH_SETUP_PORTS`` (``ollama=11500,lmstudio=1300``) moves a probe to another port.
"""

from __future__ import annotations

import os
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOCAL_PORTS = {"ollama": 11434, "lmstudio": 1234, "llamacpp": 8080}
KEYED_DEFAULTS = {
    "openai": "gpt-5", "anthropic": "claude-sonnet-4-5", "openrouter": "openai/gpt-5",
    "deepseek": "deepseek-chat", "groq": "llama-3.3-70b-versatile", "xai": "grok-4",
    "mistral": "mistral-large-latest",
}
PROBE_TIMEOUT_S = 0.5


@dataclass
class SetupChoice:
    """One row of the setup picker."""

    label: str
    connection: str
    models: list[str] = field(default_factory=list)
    needs_key: bool = False
    port: int = 0


def _ports() -> dict[str, int]:
    ports = dict(LOCAL_PORTS)
    for item in os.environ.get("KETCH_SETUP_PORTS", "").split(","):
        name, _, port = item.partition("=")
        if name.strip() in ports and port.strip().isdigit():
            ports[name.strip()] = int(port)
    return ports


def needs_setup(exc: BaseException) -> bool:
    """True when the session could not start only because no model is chosen and no
    provider key is around (the first run)."""
    from ketch.config.settings import PRESETS, stored_keys

    if "no model chosen" not in str(exc):
        return False
    if stored_keys():
        return False
    return not any(p.key_env and os.environ.get(p.key_env) for p in PRESETS.values())


def _probe(name: str, port: int) -> SetupChoice | None:
    from ketch.config.presets import ModelListError, fetch_models

    try:
        models = fetch_models(f"http://127.0.0.1:{port}/v1", "openai-chat", None, timeout=PROBE_TIMEOUT_S)
    except ModelListError:
        return None
    if not models:
        return None
    shown = ", ".join(models[:3]) + (" …" if len(models) > 3 else "")
    return SetupChoice(f"{name} on 127.0.0.1:{port} ({shown})", name, list(models), port=port)


def choices() -> list[SetupChoice]:
    """Local servers that answered, then the key-based providers."""
    ports = _ports()
    with ThreadPoolExecutor(max_workers=len(ports)) as pool:
        found = [c for c in pool.map(lambda kv: _probe(*kv), ports.items()) if c is not None]
    keyed = [SetupChoice(f"{name} (paste an API key; model {model})", name, [model], needs_key=True)
             for name, model in KEYED_DEFAULTS.items()]
    return found + keyed


def apply(choice: SetupChoice, model: str, key: str = "") -> Path:
    """Store the key (if any) and write ``model`` (and a moved local port) to the user config."""
    from ketch.config.settings import store_key, user_config_dir

    if choice.needs_key:
        if not key.strip():
            raise ValueError("no key was given")
        store_key(choice.connection, key.strip())
    path = user_config_dir() / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    current: dict[str, Any] = tomllib.loads(text) if text.strip() else {}
    if current.get("model"):
        raise ValueError(f"{path} already sets model = {current['model']!r}")
    ref = f"{choice.connection}:{model}"
    head = f'model = "{_escape(ref)}"\n'
    tail = ""
    if choice.port and choice.port != LOCAL_PORTS.get(choice.connection):
        if choice.connection not in (current.get("connections") or {}):
            tail = (f'\n[connections.{choice.connection}]\npreset = "{choice.connection}"\n'
                    f'base_url = "http://127.0.0.1:{choice.port}/v1"\n')
    path.write_text(head + text + tail, encoding="utf-8")
    return path


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
