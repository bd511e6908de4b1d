"""The inline terminal UI: scrollback is the transcript, a small live region is redrawn;
@-completion included.

Entry points live in ``ketch.ui.app`` (``run_app``, ``main``, ``quiet_tty``,
``early_prompt``) and are imported from there, so importing this package costs nothing.

May import: protocol, extensions.
(the seam, and extensions.commands), prompt_toolkit and rich. Never providers, context or the
model SDK: the UI takes keys before they load.
"""
