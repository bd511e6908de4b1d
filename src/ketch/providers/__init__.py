"""Talking to model providers: model building, the Chat->Responses fallback, stream
coalescing and refusal, thinking levels, the provider-specific models, how a turn ended
(``endings``) and what a run's error means to the user (``errors``).

May import: protocol, config, context, wire.
And the SDK.
"""
