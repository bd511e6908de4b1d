"""ketch: a terminal AI coding agent."""

__version__ = "0.1.0"
