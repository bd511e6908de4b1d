"""What context window a local server says it runs the model with.

A local server runs a model with the window it was started with, which is often far below
what the model family could take (llama.cpp ``-c 32768`` for a model ketch would assume
128k of). Each local preset's server tells it:

- llama.cpp: ``GET /props`` → ``default_generation_settings.n_ctx`` (older builds: ``n_ctx``);
- Ollama: ``POST /api/show`` with the model → ``num_ctx`` in ``parameters`` (the window the
  Modelfile sets), else ``model_info["<arch>.context_length"]`` (what the model supports);
- LM Studio: ``GET /api/v0/models`` → the model's ``loaded_context_length`` when it is
  loaded, else its ``max_context_length``.

:func:`read_window` returns the number, or None with the reason it could not be read.
Nothing here raises, and nothing imports the model SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

WINDOW_PRESETS = ("llamacpp", "ollama", "lmstudio")
"""Presets whose server reports its window."""


@dataclass(frozen=True)
class WindowReading:
    window: int | None
    url: str
    error: str = ""


def server_root(base_url: str) -> str:
    """The server's root: the base URL without its trailing ``/v1`` (and without a query)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = re.sub(r"/v1$", "", parts.path.rstrip("/"))
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _positive(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and value >= 1 and value == int(value):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip()) or None
    return None


def llamacpp_window(props: Any) -> int | None:
    """``n_ctx`` from llama.cpp's ``/props`` answer."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    if isinstance(settings, dict) and (n := _positive(settings.get("n_ctx"))):
        return n
    return _positive(props.get("n_ctx"))


_NUM_CTX = re.compile(r"(?m)^\s*num_ctx\s+(\d+)\s*$")


def ollama_window(show: Any) -> int | None:
    """``num_ctx`` from the parameters, else the architecture's ``context_length``, of ``/api/show``."""
    if not isinstance(show, dict):
        return None
    parameters = show.get("parameters")
    if isinstance(parameters, str) and (found := _NUM_CTX.search(parameters)):
        return _positive(found[1])
    info = show.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if isinstance(key, str) and key.endswith(".context_length") and (n := _positive(value)):
                return n
    return None


def lmstudio_window(listing: Any, model: str) -> int | None:
    """The loaded (else the maximum) context length of ``model`` in LM Studio's model list."""
    entries = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == model:
            return _positive(entry.get("loaded_context_length")) or _positive(entry.get("max_context_length"))
    return None


async def read_window(preset: str, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 5.0) -> WindowReading:
    """Ask the server behind ``base_url`` for the window it runs ``model`` with."""
    import httpx

    root = server_root(base_url)
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    if preset == "llamacpp":
        method, url, body = "GET", f"{root}/props", None
    elif preset == "ollama":
        method, url, body = "POST", f"{root}/api/show", {"model": model}
    elif preset == "lmstudio":
        method, url, body = "GET", f"{root}/api/v0/models", None
    else:
        return WindowReading(None, "", f"the {preset} preset reports no window")
    try:
        async with httpx.AsyncClient(timeout=timeout, headers=headers) as client:
            response = await client.request(method, url, json=body)
    except httpx.HTTPError as exc:
        return WindowReading(None, url, f"could not reach it: {type(exc).__name__}")
    if response.status_code != 200:
        return WindowReading(None, url, f"it answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        return WindowReading(None, url, "it did not answer JSON")
    if preset == "llamacpp":
        window = llamacpp_window(data)
    elif preset == "ollama":
        window = ollama_window(data)
    else:
        window = lmstudio_window(data, model)
    if window is None:
        return WindowReading(None, url, "its answer names no context length" + (f" for model '{model}'" if preset == "lmstudio" else ""))
    return WindowReading(window, url)


__all__ = ["WINDOW_PRESETS", "WindowReading", "llamacpp_window", "lmstudio_window", "ollama_window", "read_window", "server_root"]
