"""Connection presets: which wire, base URL and key variable each provider uses.

Pure data plus a ``/models`` fetch; nothing here imports the model SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Wire = Literal["openai-chat", "openai-responses", "anthropic-messages", "gemini"]
WIRES: tuple[str, ...] = ("openai-chat", "openai-responses", "anthropic-messages", "gemini")


@dataclass(frozen=True)
class Preset:
    name: str
    wire: Wire
    base_url: str
    key_env: str
    """Environment variable holding the key; empty for local servers that need none."""
    official_openai: bool = False
    """Only the official OpenAI preset may switch from Chat Completions to Responses."""
    alt_key_env: str = ""
    """A second variable the key may be in when ``key_env`` is unset (Gemini: ``GOOGLE_API_KEY``)."""


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("openai", "openai-chat", "https://api.openai.com/v1", "OPENAI_API_KEY", official_openai=True),
        Preset("anthropic", "anthropic-messages", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
        Preset("gemini", "gemini", "https://generativelanguage.googleapis.com", "GEMINI_API_KEY",
               alt_key_env="GOOGLE_API_KEY"),
        Preset("openrouter", "openai-chat", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
        Preset("deepseek", "openai-chat", "https://api.deepseek.com", "DEEPSEEK_API_KEY"),
        Preset("groq", "openai-chat", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        Preset("xai", "openai-chat", "https://api.x.ai/v1", "XAI_API_KEY"),
        Preset("mistral", "openai-chat", "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
        Preset("zai", "openai-chat", "https://api.z.ai/api/paas/v4", "ZAI_API_KEY"),
        Preset("ollama", "openai-chat", "http://localhost:11434/v1", ""),
        Preset("lmstudio", "openai-chat", "http://localhost:1234/v1", ""),
        Preset("llamacpp", "openai-chat", "http://localhost:8080/v1", ""),
        Preset("openai-compatible", "openai-chat", "", ""),
    )
}


class ModelListError(Exception):
    """Listing a provider's models failed; the message is one line for the user."""


def fetch_models(base_url: str, wire: str, api_key: str | None, *, timeout: float = 15.0) -> list[str]:
    """GET ``{base_url}/models`` and return the model ids, sorted."""
    import httpx

    if wire == "gemini":
        return _fetch_gemini_models(base_url, api_key, timeout)
    headers: dict[str, str] = {}
    if api_key:
        if wire == "anthropic-messages":
            headers["x-api-key"] = api_key
        else:
            headers["authorization"] = f"Bearer {api_key}"
    if wire == "anthropic-messages":
        headers["anthropic-version"] = "2023-06-01"
        url = base_url.rstrip("/")
        url = url + ("/models" if url.endswith("/v1") else "/v1/models")
    else:
        url = base_url.rstrip("/") + "/models"
    try:
        response = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ModelListError(f"could not reach {url}: {type(exc).__name__}") from exc
    if response.status_code != 200:
        raise ModelListError(f"{url} answered HTTP {response.status_code}")
    try:
        data = response.json().get("data", [])
        return sorted(str(item["id"]) for item in data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelListError(f"{url} did not return a model list") from exc


def _fetch_gemini_models(base_url: str, api_key: str | None, timeout: float) -> list[str]:
    """Gemini's ``GET {base}/v1beta/models`` (key in ``x-goog-api-key``): the ids that generate content."""
    import httpx

    url = base_url.rstrip("/").removesuffix("/v1beta") + "/v1beta/models"
    headers = {"x-goog-api-key": api_key} if api_key else {}
    try:
        response = httpx.get(url, headers=headers, params={"pageSize": 1000}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ModelListError(f"could not reach {url}: {type(exc).__name__}") from exc
    if response.status_code != 200:
        raise ModelListError(f"{url} answered HTTP {response.status_code}")
    try:
        models = response.json().get("models", [])
        return sorted(
            str(m["name"]).removeprefix("models/") for m in models
            if "generateContent" in (m.get("supportedGenerationMethods") or ["generateContent"])
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelListError(f"{url} did not return a model list") from exc
