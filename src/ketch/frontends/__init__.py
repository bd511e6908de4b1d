"""Front ends over the event seam: argument parsing, wiring a Session, the headless
printer, the interactive wiring, subcommands, slash actions.

May import anything; the UI (ketch.ui) only lazily from the interactive front end.
"""
