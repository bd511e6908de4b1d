"""The agent core, the roof under the front ends: the loop (``session`` and its mixins,
``session_approval`` among them: asking the user when the gate says ask), instructions, agents,
subagents (the ``task`` tool: a session inside the session, so it stays above ``tools``).

May import: protocol, config, wire, context, state, tools, gate, extensions, providers, sandbox, websearch.
"""
