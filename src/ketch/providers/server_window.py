"""What context window a local server says it runs the model with.

A local server runs a model with the window it was started with, which is often far below
what the model family could take (llama.cpp ``-c 32768`` for a model ketch would assume
128k of). Each local preset's server tells it:

- llama.cpp: ``GET /props`` → ``default_generation_settings.n_ctx`` (older builds: ``n_ctx``);
- Ollama: ``POST /api/show`` with the model → ``num_ctx`` in ``parameters`` (the window the
  Modelfile sets), else ``model_info["<arch>.context_length"]`` (what the model supports);
- LM Studio: ``GET /api/v0/models`` → the model's ``loaded_context_length`` when it is
  loaded, else its ``max_context_length``;
- any other OpenAI-compatible server (``openai-compatible``, ``--base-url``): each of the above
  in turn, then ``GET /v1/models`` metadata (vLLM ``max_model_len``, ``context_length``,
  llama.cpp's ``meta.n_ctx_train``), the first that names a window winning.

:func:`read_window` returns the number, or None with the reason it could not be read; a
server still loading its model (HTTP 503 "Loading model", as llama.cpp answers every endpoint
then) is reported as ``loading`` so the caller can wait. Nothing here raises, and nothing
imports the model SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

WINDOW_PRESETS = ("llamacpp", "ollama", "lmstudio")
"""Presets whose server reports its window."""

PROBING_PRESETS = ("openai-compatible",)
"""Presets of servers of unknown kind: every known way of asking is tried."""

PROBE_TIMEOUT = 3.0
"""Seconds each probe of an unknown server may take (a server that does not know the path
answers 404 at once; one that hangs must not hold the first request for long)."""


@dataclass(frozen=True)
class WindowReading:
    window: int | None
    url: str
    error: str = ""
    loading: bool = False
    """The server answered 503 "Loading model": ask again once it has loaded."""


def server_root(base_url: str) -> str:
    """The server's root: the base URL without its trailing ``/v1`` (and without a query)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = re.sub(r"/v1$", "", parts.path.rstrip("/"))
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def is_local_url(base_url: str) -> bool:
    """Whether ``base_url`` names a server on this machine or a private network (loopback,
    RFC 1918 and link-local addresses, ``localhost``, ``*.local``): a local model server."""
    import ipaddress

    host = (urlsplit(base_url).hostname or "").lower().rstrip(".")
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


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


_MODEL_WINDOW_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length", "n_ctx")


def models_window(listing: Any, model: str) -> int | None:
    """The window ``GET /v1/models`` states for ``model`` (or for the only model listed): vLLM's
    ``max_model_len``, ``context_length`` (OpenRouter-like servers), or llama.cpp's
    ``meta.n_ctx`` / ``meta.n_ctx_train``."""
    entries = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    chosen = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in chosen:
        for key in _MODEL_WINDOW_KEYS:
            if n := _positive(entry.get(key)):
                return n
        meta = entry.get("meta")
        if isinstance(meta, dict):
            for key in ("n_ctx", "n_ctx_train"):
                if n := _positive(meta.get(key)):
                    return n
    return None


def is_loading(status: int, text: str) -> bool:
    """Whether an answer says the server is still loading its model (llama.cpp: HTTP 503
    ``{"error": {"message": "Loading model", "type": "unavailable_error"}}``)."""
    return status == 503 and "loading" in text.lower()


_PROBES: dict[str, tuple[str, str]] = {
    "llamacpp": ("GET", "/props"),
    "ollama": ("POST", "/api/show"),
    "lmstudio": ("GET", "/api/v0/models"),
    "models": ("GET", "/v1/models"),
}
_PROBE_ORDER = ("llamacpp", "ollama", "lmstudio", "models")


def _window_of(kind: str, data: Any, model: str) -> int | None:
    if kind == "llamacpp":
        return llamacpp_window(data)
    if kind == "ollama":
        return ollama_window(data)
    if kind == "lmstudio":
        return lmstudio_window(data, model)
    return models_window(data, model)


async def _probe(client: Any, kind: str, root: str, model: str) -> WindowReading:
    import httpx

    method, path = _PROBES[kind]
    url = f"{root}{path}"
    try:
        response = await client.request(method, url, json={"model": model} if method == "POST" else None)
    except httpx.HTTPError as exc:
        return WindowReading(None, url, f"could not reach it: {type(exc).__name__}")
    if response.status_code != 200:
        return WindowReading(None, url, f"it answered HTTP {response.status_code}",
                             loading=is_loading(response.status_code, response.text[:2_000]))
    try:
        data = response.json()
    except ValueError:
        return WindowReading(None, url, "it did not answer JSON")
    window = _window_of(kind, data, model)
    if window is None:
        return WindowReading(None, url, "its answer names no context length" + (f" for model '{model}'" if kind == "lmstudio" else ""))
    return WindowReading(window, url)


async def read_window(preset: str, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 5.0) -> WindowReading:
    """Ask the server behind ``base_url`` for the window it runs ``model`` with: the preset's
    own way, or for a server of unknown kind every way in turn (the first window wins; a
    server that says it is loading is reported at once)."""
    import httpx

    root = server_root(base_url)
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    if preset in _PROBES:
        kinds: tuple[str, ...] = (preset,)
    elif preset in PROBING_PRESETS:
        kinds, timeout = _PROBE_ORDER, min(timeout, PROBE_TIMEOUT)
    else:
        return WindowReading(None, "", f"the {preset} preset reports no window")
    first: WindowReading | None = None
    from ketch.wire.tls import verifying_context

    async with httpx.AsyncClient(timeout=timeout, headers=headers, verify=verifying_context()) as client:
        for kind in kinds:
            reading = await _probe(client, kind, root, model)
            if reading.window is not None or reading.loading:
                return reading
            if reading.error.startswith("could not reach"):
                return reading  # nothing else will answer either
            first = first or reading
    assert first is not None
    if len(kinds) > 1:
        tried = ", ".join(_PROBES[k][1] for k in kinds)
        return WindowReading(None, root, f"none of {tried} names a context length")
    return first


__all__ = ["PROBING_PRESETS", "WINDOW_PRESETS", "WindowReading", "is_loading", "is_local_url", "models_window", "llamacpp_window", "lmstudio_window", "ollama_window", "read_window", "server_root"]
