"""The agent core: the event seam, the loop, the gate, instructions, agents, subagents,
configuration and errors.

May import: context, providers, state, extensions, websearch, tools. Never frontends or ui.
"""
