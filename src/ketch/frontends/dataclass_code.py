"""The code ``@dataclass`` compiles for each class's methods, kept across runs (a start-up cache).

Why: ``dataclasses`` writes each class's ``__init__``, ``__repr__``, ``__eq__``, ... as source text
and runs it with ``exec`` (Python 3.11 and 3.12: one compile per method; 3.13: one per class).
Starting an interactive session creates about 690 dataclasses (pydantic-ai's messages, capabilities
and graph nodes, pydantic's, ketch's events): about 2,450 compiles, 31 % of the instructions a
start ran until the session was ready (callgrind: 4.03 G; 2.78 G with this cache), about 0.3 s of
CPU. Text to code is a pure function of the text and the interpreter, so code compiled once is kept
in a file and read back (about 15 ms).

How: :func:`install` puts :func:`_exec` in the ``dataclasses`` module's namespace, where it shadows
the builtin ``exec`` for that module only. Given a ``str`` source and a globals dict (as
``dataclasses`` always calls it) it compiles the text as the builtin would there (``dataclasses`` has
no ``__future__`` flags to inherit), or takes the code compiled earlier from the same text, and runs
it in the same namespaces; anything else goes to the builtin as it is.
``tests/test_dataclass_code.py`` checks that cached code equals a fresh compile and that a warm start
compiles nothing, so a Python whose ``dataclasses`` stops calling ``exec`` by name fails it instead
of silently losing the gain.

The file is ``<data dir>/cache/dataclass-code.<cache tag>.marshal``, written at exit when this run
compiled something new (atomically, mode 0600). It is read only if it is a regular file owned by
this user and writable by no one else, starts with this interpreter's magic number, and holds a
dict of str to code; otherwise the run compiles as usual and the file is rewritten. Whoever can
write that file can run code as the user, as with ``__pycache__`` and the config dir beside it.
"""

from __future__ import annotations

import marshal
import os
import sys
import types

MAX_BYTES = 64 * 1024 * 1024
"""A larger file is not read (about 3 MB today)."""
MAX_ENTRIES = 20_000
"""Past this, a save keeps only the texts this run used (about 2,200 at a start today)."""

_state: _Cache | None = None


class _Cache:
    """The texts this process compiled or found, and where they are kept."""

    def __init__(self, path: str, magic: bytes) -> None:
        self.path = path
        self.magic = magic
        self.code: dict[str, types.CodeType] = _read(path, magic)
        self.used: set[str] = set()
        self.compiled = 0
        """Texts compiled in this process (not found in the file)."""
        self.found = 0
        """Texts taken from the file (or compiled earlier in this process)."""

    def lookup(self, source: str) -> types.CodeType:
        code = self.code.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            self.code[source] = code
            self.compiled += 1
        else:
            self.found += 1
        self.used.add(source)
        return code

    def save(self) -> None:
        """Write the file if this run compiled something new (failures are ignored: it is a cache)."""
        if not self.compiled:
            return
        kept = self.code if len(self.code) <= MAX_ENTRIES else {s: self.code[s] for s in self.used}
        try:
            directory = os.path.dirname(self.path)
            os.makedirs(directory, mode=0o700, exist_ok=True)
            temporary = f"{self.path}.{os.getpid()}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(self.magic + marshal.dumps(dict(kept)))
                os.replace(temporary, self.path)
            except BaseException:
                os.unlink(temporary)
                raise
        except (OSError, ValueError):
            pass


def _read(path: str, magic: bytes) -> dict[str, types.CodeType]:
    """The cached code at ``path``, or an empty dict when the file is absent or not to be trusted."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid()
                or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or info.st_size > MAX_BYTES):
            return {}
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(MAX_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(fd)
    if not data.startswith(magic):
        return {}
    try:
        loaded = marshal.loads(memoryview(data)[len(magic):])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(loaded, dict) or not all(
            type(k) is str and type(v) is types.CodeType for k, v in loaded.items()):
        return {}
    return loaded


def _exec(source: object, globals: dict | None = None, locals: object = None, /) -> None:  # noqa: A002 - exec's own names
    """``exec`` as ``dataclasses`` calls it, with a source text's code taken from the cache."""
    state = _state
    if state is not None and type(source) is str and type(globals) is dict:
        source = state.lookup(source)
    exec(source, globals, locals)  # noqa: S102 - the builtin, on code dataclasses generated


def install(data_dir: str) -> None:
    """Use (and at exit, update) the cache under ``data_dir`` for every dataclass created from
    now on in this process. Idempotent; call before the heavy imports."""
    global _state
    if _state is not None:
        return
    import atexit
    import dataclasses
    from importlib.util import MAGIC_NUMBER

    tag = sys.implementation.cache_tag or "none"
    _state = _Cache(os.path.join(data_dir, "cache", f"dataclass-code.{tag}.marshal"), MAGIC_NUMBER)
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # shadows the builtin in that module only
    atexit.register(_state.save)


def stats() -> tuple[int, int]:
    """(texts compiled, texts found in the cache) in this process so far; (0, 0) if not installed."""
    return (_state.compiled, _state.found) if _state is not None else (0, 0)


__all__ = ["install", "stats"]
