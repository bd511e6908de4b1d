"""Harbor's model choice as a ketch connection: a user config with one connection, ``harbor``.

Harbor names a model ``provider/model`` and resolves the key (and, when asked, a base URL and an
API format) itself. ketch gets the same thing as a connection on its own preset for that
provider, so prices, wires and provider quirks stay ketch's, with the key read from the
variable Harbor fills. A provider ketch has no preset for needs a base URL (it is then an
OpenAI-compatible server); anything else is refused before a task starts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

PRESETS = {
    "anthropic": "anthropic", "openai": "openai", "openai-responses": "openai", "gemini": "gemini",
    "openrouter": "openrouter", "deepseek": "deepseek", "groq": "groq", "xai": "xai", "mistral": "mistral",
    "zai": "zai", "ollama": "ollama",
}
"""Harbor's provider names (after its aliases: ``google`` is ``gemini``) and ketch's preset for each."""

WIRES = {
    "openai_chat_completions": "openai-chat", "openai_responses": "openai-responses",
    "anthropic_messages": "anthropic-messages", "google_generate_content": "gemini",
}
"""Harbor's API formats and ketch's wire for each."""

CONNECTION = "harbor"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class KetchConnection:
    """What ``ketch -p`` needs: the user config text and the model to pass to ``-m``."""

    config_toml: str
    model: str


def _toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's); control characters are refused."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError(f"a connection value holds a control character: {value!r}")
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def ketch_connection(provider: str | None, model_id: str | None, *, key_env: str | None = None,
                     base_url: str | None = None, api_format: str | None = None) -> KetchConnection:
    """The connection for Harbor's ``provider/model_id`` (key in ``key_env``, optional endpoint and format)."""
    if not model_id or not isinstance(model_id, str):
        raise ValueError("Harbor gave no model: run with -m provider/model (e.g. -m anthropic/claude-sonnet-4-5)")
    wire = None
    if api_format is not None:
        wire = WIRES.get(str(api_format))
        if wire is None:
            raise ValueError(f"ketch has no wire for Harbor's API format {api_format!r}; use one of {sorted(WIRES)}")
    preset = PRESETS.get(provider or "")
    if preset is None:
        if not base_url:
            raise ValueError(f"ketch has no preset for provider {provider!r}; give Harbor a --base-url of an "
                             f"OpenAI-compatible endpoint, or use one of {sorted(PRESETS)}")
        preset = "openai-compatible"
        wire = wire or "openai-chat"
    if provider == "openai-responses" and wire is None:
        wire = "openai-responses"
    if key_env is not None and not _ENV_NAME.fullmatch(key_env):
        raise ValueError(f"not an environment variable name: {key_env!r}")
    lines = [f"model = {_toml_string(CONNECTION + ':' + model_id)}", "", f"[connections.{CONNECTION}]",
             f"preset = {_toml_string(preset)}"]
    if base_url:
        if not re.match(r"(?i)https?://", base_url):
            raise ValueError(f"the base URL must be http or https: {base_url!r}")
        lines.append(f"base_url = {_toml_string(base_url)}")
    if key_env:
        lines.append(f"api_key_env = {_toml_string(key_env)}")
    if wire:
        lines.append(f"wire = {_toml_string(wire)}")
    return KetchConnection("\n".join(lines) + "\n", f"{CONNECTION}:{model_id}")
