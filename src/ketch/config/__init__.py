"""Configuration, below everything but the ground floor: the settings and their layers
(``settings``), limits, the free-form tables' shapes (``tables``), project config and folder trust,
the user's dirs, ``KETCH_*`` values, URL checks, the connection presets, the keyring, the
sandbox's settings, and the front matter of the files users write (skills, commands).

May import: protocol.
Tables only their owners can check ([hooks], [permissions], [guards]) are handed in from above
(``extensions.table_checks``), never imported.
"""
