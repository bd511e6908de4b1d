"""The ground floor: what crosses the seam between the core and the front ends, and what every
layer shares without depending on any of them. The events (``events``, their JSON schema in
``event_schema``), what a front end may call on a session (``frontend``), the exceptions, strict
JSON, and hosted search's source rows (``search_rows``).

May import: nothing.
The standard library, pydantic and the SDK's message types only; every other package may import this one.
"""
