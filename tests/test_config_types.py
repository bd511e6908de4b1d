"""A config value of the wrong type is an error naming the file and the key, never coerced; a
repository's config can never widen what the user's own config set.

Every key the schema accepts is enumerated from the models themselves (``Config`` and the
tables of ``config.tables``), so a key added later is covered without editing this file;
each gets values of every other TOML type, written into the user's file and into a
repository's ``.ketch/config.toml`` (trusted or not), and ``load_config`` must refuse it.
The ``KETCH_*`` variables that hold a yes/no or a number refuse anything else the same way.
"""

from __future__ import annotations

import datetime
import functools
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kettle import write_project_config
from pydantic import BaseModel
from toml_text import assignment, document

from ketch.config.settings import Config, ConnectionConfig, load_config, resolve_connection
from ketch.config.tables import McpConfig, TelemetryConfig
from ketch.protocol.exceptions import ConfigError
from ketch.config.sandbox_limits import MODE_RANK

# ---------------------------------------------------------------- the schema's leaves

Kind = str  # "bool" "int" "float" "str" "literal" "list" "table" "any"


def _kinds(annotation: Any) -> frozenset[Kind]:
    """The TOML value kinds a field accepts (``float`` also takes integers, as TOML readers do)."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return frozenset().union(*(_kinds(a) for a in get_args(annotation) if a is not type(None)))
    if origin is Literal:
        return frozenset({"literal"})
    if origin in (list, tuple):
        return frozenset({"list"})
    if origin is dict or annotation is dict or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return frozenset({"table"})
    return frozenset({{bool: "bool", int: "int", float: "float", str: "str"}.get(annotation, "any")})


def _inner_models(annotation: Any) -> Iterator[tuple[str | None, type[BaseModel]]]:
    """The models under a field: itself (key None), or a table's values (key ``x``)."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            yield from _inner_models(arg)
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield None, annotation
    elif origin is dict and isinstance(get_args(annotation)[1], type) and issubclass(get_args(annotation)[1], BaseModel):
        yield "x", get_args(annotation)[1]


FREE_TABLES: dict[str, type[BaseModel]] = {"mcp": McpConfig, "telemetry": TelemetryConfig}
"""``Config`` fields kept as plain tables whose shape ``config_tables`` checks."""


def leaves(model: type[BaseModel] = Config, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every key path of the schema with its annotation (a table's entries named ``x``)."""
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        yield path, field.annotation
        inner = list(_inner_models(field.annotation))
        if not prefix and name in FREE_TABLES:
            inner = [(None, FREE_TABLES[name])]
        for key, sub in inner:
            yield from leaves(sub, path if key is None else (*path, key))


HOOK_LEAVES = [
    (("hooks", "before_tool"), list[dict] | dict),  # one table is read as a list of one
    (("hooks", "before_tool", 0, "command"), str),
    (("hooks", "before_tool", 0, "matcher"), str),
    (("hooks", "before_tool", 0, "timeout"), float),
    (("hooks", "before_tool", 0, "on_failure"), Literal["block", "allow"]),
]
"""Hook entries are lists of tables: paths with a list index."""

SAMPLES: dict[Kind, list[Any]] = {
    "str": ["true", "false", "yes", "no", "1", "0", "100", "on"],
    "int": [0, 1, 2, -1, 100000],
    "float": [0.5, 1.5, -2.0],
    "bool": [True, False],
    "list": [[], ["true"], [1], [True]],
    "table": [{}, {"enabled": True}, {"x": "1"}],
    "date": [datetime.date(2024, 1, 1), datetime.datetime(2024, 1, 1, 12, 0, 0)],
}


def _wrong(kinds: frozenset[Kind]) -> list[Any]:
    """Representative values of every kind the field does not accept."""
    out: list[Any] = []
    for kind, values in SAMPLES.items():
        if kind in kinds or (kind == "int" and "float" in kinds) or (kind == "str" and "str" in kinds):
            continue
        out += values
    if "literal" in kinds:
        out += SAMPLES["str"]  # none of them is any field's allowed word
    return out


ALL_LEAVES = [(p, a) for p, a in leaves() if "any" not in _kinds(a)] + HOOK_LEAVES
CASES = [(path, bad) for path, annotation in ALL_LEAVES for bad in _wrong(_kinds(annotation))]


def _nest(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """``path`` = value as nested tables (an int part is a one-element list of tables)."""
    for part in reversed(path[1:]):
        value = [value] if isinstance(part, int) else {part: value}
    if isinstance(path[-1], int):
        raise AssertionError(path)
    return {path[0]: _with_required(path, value)}


def _with_required(path: tuple[Any, ...], table: Any) -> Any:
    """A hook entry needs its command, so the error is about the key under test."""
    if path[0] == "hooks" and len(path) == 4 and path[3] != "command":
        table["before_tool"][0].setdefault("command", "true")
    return table


def _text(path: tuple[Any, ...], value: Any) -> str:
    return document(_nest(path, value))


def _user_file(home: Path) -> Path:
    return home / "config" / "config.toml"


USER_BASE = "titles = false\ncheckpoints = false\n"


def _user_text(path: tuple[Any, ...], text: str) -> str:
    """The isolated home's own settings, less the key under test, then ``text``."""
    return "".join(line + "\n" for line in USER_BASE.splitlines() if line.split(" ")[0] != path[0]) + text


def _assert_refused(path: tuple[Any, ...], where: Path, cwd: Path, *, trust_flag: bool = False) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cwd, environ={}, trust_flag=trust_flag)
    message = str(caught.value)
    assert str(where) in message, message
    assert str(path[-1]) in message or ".".join(map(str, path[:2])) in message, message


def test_the_schema_walk_finds_the_keys_it_must() -> None:
    found = {".".join(map(str, p)) for p, _ in ALL_LEAVES}
    for key in ("privacy", "max_steps", "sandbox.network", "sandbox.mode", "approval", "web_search.enabled",
                "connections.x.base_url", "connections.x.context_window", "models.x.capabilities",
                "compaction.threshold", "mcp.servers.x.network", "mcp.servers.x.args", "telemetry.capture_content",
                "tools.keep_env", "agents.x.tools", "hooks.before_tool.0.timeout", "checkpoint_cap_mb"):
        assert key in found, key
    assert len(CASES) > 500


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repository folder for the worker's many cases below: each writes its config
    file there and removes it (a fresh folder per case was a make and a remove on disk
    for each of ~1,750 cases; nothing else is kept in it)."""
    return tmp_path_factory.mktemp("repository")


@pytest.mark.parametrize("path,bad", CASES, ids=[f"{'.'.join(map(str, p))}={b!r}" for p, b in CASES])
def test_a_wrong_type_in_any_file_is_an_error_naming_file_and_key(repository: Path, isolated_home: Path, path, bad) -> None:
    text = _text(path, bad)
    project = write_project_config(repository, text, trust=False)
    try:
        _assert_refused(path, project, repository)
        _assert_refused(path, project, repository, trust_flag=True)
    finally:
        project.unlink()
    user = _user_file(isolated_home)
    user.write_text(_user_text(path, text))
    _assert_refused(path, user, repository)


# ---------------------------------------------------------------- generated wrong values

@functools.cache  # one strategy per set of kinds: building and validating one per example cost more than drawing from it
def _generated(kinds: frozenset[Kind]) -> st.SearchStrategy[Any]:
    options: list[st.SearchStrategy[Any]] = []
    if "bool" not in kinds:
        options.append(st.booleans())
    if not kinds & {"int", "float"}:
        options.append(st.integers(-(2**63), 2**63 - 1))
    if "float" not in kinds:
        options.append(st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()))
    if not kinds & {"str"}:
        options.append(st.text(max_size=20))
    if "list" not in kinds:
        options.append(st.lists(st.one_of(st.integers(), st.text(max_size=5), st.booleans()), max_size=3))
    if "table" not in kinds:
        options.append(st.dictionaries(st.text(min_size=1, max_size=5), st.one_of(st.integers(), st.booleans()), max_size=3))
    options.append(st.dates())
    return st.one_of(options)


LEAF_INDEX = st.sampled_from(range(len(ALL_LEAVES)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_wrong_values_are_refused_never_applied(tmp_path: Path, isolated_home: Path, data) -> None:
    path, annotation = ALL_LEAVES[data.draw(LEAF_INDEX)]
    bad = data.draw(_generated(_kinds(annotation)))
    if "literal" in _kinds(annotation) and isinstance(bad, str) and bad in get_args(annotation):
        return
    user = _user_file(isolated_home)
    user.write_text(_user_text(path, _text(path, bad)))
    try:
        _assert_refused(path, user, tmp_path)
    finally:
        user.write_text(USER_BASE)


def test_well_typed_values_of_the_same_keys_still_load(tmp_path: Path) -> None:
    """The refusal is about the type: right-typed values of the touchy keys load as written."""
    write_project_config(tmp_path, document({
        "privacy": True, "max_steps": 5, "sandbox": {"network": False, "mode": "read-only"},
        "compaction": {"threshold": 1}, "web_search": {"enabled": False},
        "hooks": {"before_tool": [{"command": "true", "timeout": 3}]},
        "mcp": {"servers": {"x": {"command": "true", "network": False, "timeout": 2}}},
    }))
    config = load_config(tmp_path, environ={})
    assert (config.privacy, config.max_steps, config.sandbox.mode, config.compaction.threshold) == (True, 5, "read-only", 1.0)
    assert config.mcp["servers"]["x"]["network"] is False


# ---------------------------------------------------------------- the environment

BOOL_VARS = ("KETCH_PRIVACY", "KETCH_WEB_SEARCH_ENABLED")


@pytest.mark.parametrize("var", BOOL_VARS)
@pytest.mark.parametrize("text", ["2", "ture", "y", "enable", "truee", "1.0", "-1", "nope", "true false", "\x00"])
def test_a_yes_no_variable_refuses_anything_but_its_words(tmp_path: Path, var: str, text: str) -> None:
    with pytest.raises(ConfigError, match=var):
        load_config(tmp_path, environ={var: text})


@pytest.mark.parametrize("var", BOOL_VARS)
@pytest.mark.parametrize("text,expected", [("1", True), ("TRUE", True), (" on ", True), ("0", False), ("Off", False), ("no", False)])
def test_a_yes_no_variable_reads_its_words(tmp_path: Path, var: str, text: str, expected: bool) -> None:
    config = load_config(tmp_path, environ={var: text})
    assert (config.privacy if var == "KETCH_PRIVACY" else config.web_search.enabled) is expected


@pytest.mark.parametrize("text", ["abc", "1.5", "-3", "0", "1e3", "٣", "10 steps", "0x10"])
def test_max_steps_from_the_environment_is_a_whole_number(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="KETCH_MAX_STEPS"):
        load_config(tmp_path, environ={"KETCH_MAX_STEPS": text})


@pytest.mark.parametrize("text", ["-1", "2.5", "two", "٣", "1e2"])
def test_max_retries_from_the_environment_is_a_whole_number(tmp_path: Path, text: str) -> None:
    config = load_config(tmp_path, environ={})
    with pytest.raises(ConfigError, match="KETCH_MAX_RETRIES"):
        resolve_connection(config, "ollama:llama3", environ={"KETCH_MAX_RETRIES": text})


@given(text=st.text(max_size=8))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_text_in_a_yes_no_variable_is_a_known_word_or_an_error(tmp_path: Path, text: str) -> None:
    words = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
    try:
        config = load_config(tmp_path, environ={"KETCH_PRIVACY": text})
    except ConfigError as exc:
        assert "KETCH_PRIVACY" in str(exc)
        assert text.strip().lower() not in words
        return
    assert config.privacy is (words[text.strip().lower()] if text else False)


# ---------------------------------------------------------------- a repository never widens

MODES = ("read-only", "workspace-write", "full-access", "off")

user_configs = st.fixed_dictionaries({}, optional={
    "sandbox": st.fixed_dictionaries({}, optional={"mode": st.sampled_from(MODES), "network": st.booleans()}),
    "approval": st.sampled_from(("ask", "auto", "never")),
    "max_steps": st.integers(1, 500),
    "privacy": st.booleans(),
    "web_search": st.fixed_dictionaries({}, optional={"enabled": st.booleans()}),
    "connections": st.fixed_dictionaries({"x": st.fixed_dictionaries(
        {"preset": st.just("ollama")}, optional={"context_window": st.integers(1000, 10**6), "max_output_tokens": st.integers(1, 10**5)}
    )}),
})

project_configs = st.fixed_dictionaries({}, optional={
    "sandbox": st.fixed_dictionaries({}, optional={
        "mode": st.sampled_from(MODES), "network": st.booleans(), "writable": st.just(["/"]),
        "caches": st.just(["pip"]), "mechanism": st.just("none"),
    }),
    "approval": st.sampled_from(("ask", "auto", "never")),
    "max_steps": st.integers(1, 10**6),
    "privacy": st.booleans(),
    "web_search": st.fixed_dictionaries({}, optional={
        "enabled": st.booleans(), "source": st.just("tavily"), "tavily_base_url": st.just("http://127.0.0.1:9/"),
    }),
    "permissions": st.fixed_dictionaries({}, optional={
        "allow": st.just(["shell"]), "shell": st.sampled_from(("allow", "ask", "deny")),
        "write_file": st.fixed_dictionaries({"**": st.sampled_from(("allow", "deny"))}),
    }),
    "hooks": st.just({"before_tool": [{"command": "touch /tmp/never"}]}),
    "mcp": st.just({"servers": {"evil": {"command": "true"}}}),
    "agents": st.just({"build": {"tools": ["shell"], "prompt": "x"}}),
    "added_dirs": st.just(["/"]),
    "registry_url": st.just("http://127.0.0.1:9/index.json"),
    "connections": st.fixed_dictionaries({"x": st.fixed_dictionaries({}, optional={
        "base_url": st.just("http://127.0.0.1:9/v1"), "api_key_env": st.just("HOME"), "wire": st.just("openai-chat"),
        "context_window": st.integers(1, 10**8), "max_output_tokens": st.integers(1, 10**7),
    })}),
    "compaction": st.fixed_dictionaries({}, optional={"context_window": st.integers(1, 10**8)}),
    "tools": st.fixed_dictionaries({}, optional={"keep_env": st.just(["OPENAI_API_KEY"]), "enabled": st.just(["shell"])}),
})


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user=user_configs, project=project_configs)
def test_an_untrusted_repository_never_widens_the_users_settings(tmp_path: Path, isolated_home: Path, user, project) -> None:
    _user_file(isolated_home).write_text(USER_BASE + document(user))
    mine = load_config(isolated_home, environ={})  # no project file there: the user's settings alone
    write_project_config(tmp_path, document(project), trust=False)
    try:
        got = load_config(tmp_path, environ={})
    finally:
        (tmp_path / ".ketch" / "config.toml").unlink()
    assert MODE_RANK[got.sandbox.mode] <= MODE_RANK[mine.sandbox.mode]
    assert got.sandbox.network <= mine.sandbox.network
    assert (got.sandbox.writable, got.sandbox.caches, got.sandbox.mechanism) == (mine.sandbox.writable, mine.sandbox.caches, mine.sandbox.mechanism)
    assert got.approval in (mine.approval, "ask")
    assert got.max_steps <= mine.max_steps
    assert got.privacy >= mine.privacy
    assert got.web_search.enabled <= mine.web_search.enabled
    assert (got.web_search.source, got.web_search.tavily_base_url) == (mine.web_search.source, mine.web_search.tavily_base_url)
    assert not (got.permissions.get("allow") or [])
    assert all(v != "allow" and not (isinstance(v, dict) and "allow" in v.values()) for v in got.permissions.values())
    assert (got.hooks, got.mcp, got.added_dirs, got.registry_url) == (mine.hooks, mine.mcp, mine.added_dirs, mine.registry_url)
    assert got.agents == mine.agents
    assert got.tools.keep_env == mine.tools.keep_env
    route = ("preset", "base_url", "wire", "api_key_env", "context_window", "max_output_tokens")
    for name in {*got.connections, *mine.connections}:
        theirs, ours = got.connections.get(name, ConnectionConfig()), mine.connections.get(name, ConnectionConfig())
        assert {f: getattr(theirs, f) for f in route} == {f: getattr(ours, f) for f in route}
    if "x" in mine.connections:
        conn, ref = resolve_connection(got, "x:m", environ={}), resolve_connection(mine, "x:m", environ={})
        assert (conn.base_url, conn.key_env, conn.wire) == (ref.base_url, ref.key_env, ref.wire)
        assert (conn.context_window, conn.max_output_tokens) == (ref.context_window, ref.max_output_tokens)


def test_an_extension_table_is_refused_when_its_owner_has_not_handed_in_its_check(monkeypatch):
    """``config`` sits below ``extensions``: without the checks handed in, [hooks] fails closed."""
    from ketch.config import tables

    monkeypatch.setattr(tables, "_extension_checks", {})
    with pytest.raises(ValueError, match=r"\[hooks\] cannot be checked"):
        tables.check_hooks({"before_tool": [{"command": "true"}]})
    from ketch.extensions import table_checks

    table_checks.install()
    assert tables.check_hooks({"before_tool": [{"command": "true"}]}) == {"before_tool": [{"command": "true"}]}
    with pytest.raises(ValueError):
        tables.check_hooks({"before_tool": [{"command": "true", "timeout": "5"}]})
