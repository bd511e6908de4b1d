"""Talking to model providers: connection presets, model building, the Chat->Responses
fallback, stream coalescing and end-of-stream checks, the SDK warm-up, pricing.

May import: core.config/errors/exceptions and the SDK. Never frontends or ui.
"""
