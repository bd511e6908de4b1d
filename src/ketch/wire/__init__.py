"""The model wire ketch owns: one HTTP client (timeouts, retries, errors) and SSE framing that
the per-protocol models share, instead of the provider SDKs' transports; what the streams and
items need (end-of-stream checks, the history scans and look-alike memo), and pricing.

May import: protocol.
Otherwise httpx and pydantic-ai, so every layer above (context, providers, core) may use it.
"""
