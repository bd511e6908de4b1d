"""Every JSON-RPC message of an ACP conversation checked against the protocol's JSON schema,
the one the official TypeScript SDK ships (``tests/acp_node``, installed by ``.ci/run``), for
the protocol version the ``initialize`` exchange settled on.

Requests and notifications are checked against the definition named for their method and
side; responses against the method of the request they answer (matched by id and direction).
A method the stable schema lacks is an error unless the test names it in ``unstable``: those
are checked against the version's unstable schema (``session/fork``) and nothing else is."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SDK = Path(__file__).parent / "acp_node" / "node_modules" / "@agentclientprotocol" / "sdk"


def sdk_installed() -> bool:
    return (SDK / "schema" / "v1" / "schema.json").is_file()


@cache
def _schema(version: int, unstable: bool = False) -> dict[str, Any]:
    return json.loads((SDK / "schema" / f"v{version}" / ("schema.unstable.json" if unstable else "schema.json")).read_text())


def schema_methods(version: int, unstable: bool = False) -> set[str]:
    """The methods a schema defines."""
    return {b["x-method"] for b in _schema(version, unstable)["$defs"].values() if isinstance(b, dict) and "x-method" in b}


def _definition(schema: dict[str, Any], method: str, suffix: tuple[str, ...]) -> str | None:
    for name, body in schema["$defs"].items():
        if isinstance(body, dict) and body.get("x-method") == method and name.endswith(suffix):
            return name
    return None


def _check(schema: dict[str, Any], name: str, value: Any) -> list[str]:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": schema["$defs"]})
    return [f"{name}: {e.message} at {list(e.absolute_path)}" for e in validator.iter_errors(value)]


def read_log(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(direction, message) of every line of a tap log: ``>`` client to agent, ``<`` back."""
    out = []
    for raw in path.read_text().splitlines():
        if raw.strip():
            out.append((raw[0], json.loads(raw[2:])))
    return out


def validate(messages: list[tuple[str, dict[str, Any]]], unstable: frozenset[str] = frozenset()) -> tuple[int, list[str]]:
    """(messages checked, problems) for a conversation; the version is the one negotiated."""
    version = next((m["result"]["protocolVersion"] for d, m in messages if d == "<" and isinstance(m.get("result"), dict)
                    and "protocolVersion" in m["result"]), None)
    if version is None:
        return 0, ["no initialize response: no protocol version was negotiated"]
    stable = _schema(int(version))
    for method in unstable:
        assert method not in schema_methods(int(version)), f"{method} is in the stable schema: check it there"
    pending: dict[tuple[str, Any], str] = {}
    problems: list[str] = []
    for direction, message in messages:
        if message.get("jsonrpc") != "2.0":
            problems.append(f"not JSON-RPC 2.0: {message}")
            continue
        if "method" in message:
            method = message["method"]
            if "id" in message:
                pending[(direction, message["id"])] = method
            schema = _schema(int(version), True) if method in unstable else stable
            name = _definition(schema, method, ("Request", "Notification"))
            if name is None:
                problems.append(f"{direction} {method}: no such method in protocol version {version}")
                continue
            problems += _check(schema, name, message.get("params"))
        else:
            answering = "<" if direction == ">" else ">"
            method = pending.pop((answering, message.get("id")), None)
            if method is None:
                problems.append(f"a response to no request: {message}")
            elif "error" in message:
                problems += _check(stable, "Error", message["error"])
            else:
                schema = _schema(int(version), True) if method in unstable else stable
                name = _definition(schema, method, ("Response",))
                problems += _check(schema, name, message.get("result")) if name else [f"{method}: no response schema"]
                if method == "initialize" and unstable:  # where the unstable methods are announced
                    problems += _check(_schema(int(version), True), "InitializeResponse", message.get("result"))
    return len(messages), problems
