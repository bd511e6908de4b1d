"""Configuration: settings, limits, presets, project config and trust, dirs, keys, sandbox settings.

May import: protocol.
"""
