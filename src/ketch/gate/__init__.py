"""The approval gate: the one decision every tool call passes, in its order (``approval``), and
what it judges with: guards (``guards``), permission rules (``rules``, ``shell_rules``), the
shell parser under them (``shell_parse``, ``shell_heredocs``, ``shell_disagreements``), what a
command really runs and writes (``invocations``, ``program_options``), the rule an "allow
commands like this" answer proposes (``rule_proposal``) and the rules the user keeps from the
prompt (``user_rules``).

Handed in, not imported: the guard's rules and the hooks (``extensions`` loads them from
plugins and config) and the running sandbox; the session asks the user (``core.session_approval``).

May import: protocol, config, sandbox, tools.
"""
