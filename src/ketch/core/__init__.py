"""The agent core, the roof under the front ends: the loop (``session`` and its mixins), the
gate (``approval``), instructions, agents, subagents.

May import: protocol, config, wire, context, state, tools, extensions, providers, sandbox, websearch.
"""
