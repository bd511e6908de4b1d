"""The model wire ketch owns: one HTTP client (timeouts, retries, errors) and SSE framing that
the per-protocol models share, instead of the provider SDKs' transports.

May import: httpx and pydantic-ai's exceptions. Nothing else of ketch, so every layer above
(providers, core) may use it.
"""
