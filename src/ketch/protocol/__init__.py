"""The ground floor: events, front-end operations, exceptions, strict JSON, search rows.

May import: nothing of ketch.
"""
