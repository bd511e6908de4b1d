"""``frontends.dataclass_code``: the code dataclasses compile, kept across runs.

Each case runs in a clean interpreter (installing the cache changes ``dataclasses`` for the rest of
the process). What is asserted crossed a boundary: the code objects of the classes' methods, the
cache file on disk, and the counts of texts compiled and found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeprovider import FakeProvider
from kettle import adhoc, ketch_env

CLASSES = """
import dataclasses, json, sys
from dataclasses import dataclass, field

def shapes():
    @dataclass(frozen=True, kw_only=True, order=True)
    class Frozen:
        a: int
        b: list = field(default_factory=list)
    @dataclass(slots=True, unsafe_hash=True)
    class Slotted:
        x: str = "x"
        y: "int" = 2
    @dataclass
    class Plain:
        n: int
        def __post_init__(self): self.n += 1
    return Frozen, Slotted, Plain

def codes(classes):
    out = {}
    for cls in classes:
        for name in ("__init__", "__repr__", "__eq__", "__lt__", "__hash__", "__setattr__", "__delattr__"):
            fn = cls.__dict__.get(name)
            code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
            if code is not None:
                out[cls.__name__ + "." + name] = code
    return out

mode, data = sys.argv[1], sys.argv[2]
if mode == "fresh":
    fresh = codes(shapes())
from ketch.frontends import dataclass_code
dataclass_code.install(data)
cached = codes(shapes())
Frozen, Slotted, Plain = shapes()
behaves = [repr(Frozen(a=1)), Frozen(a=1) < Frozen(a=2), Slotted() == Slotted(), hash(Slotted()) == hash(Slotted()),
           Plain(1).n]
same = sorted(fresh) == sorted(cached) and all(fresh[k] == cached[k] for k in fresh) if mode == "fresh" else None
print(json.dumps({"same": same, "methods": len(cached), "behaves": behaves, "stats": dataclass_code.stats()}))
"""


def _run(mode: str, data: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CLASSES, mode, str(data)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cache_file(data: Path) -> Path:
    (found,) = (data / "cache").glob("dataclass-code.*.marshal")
    return found


def test_cached_code_equals_a_fresh_compile_and_is_read_back(tmp_path: Path) -> None:
    first = _run("fresh", tmp_path)
    assert first["same"] is True, "the code through the cache differs from the builtin exec's"
    assert first["methods"] >= 12
    assert first["behaves"] == ["shapes.<locals>.Frozen(a=1, b=[])", True, True, True, 2]
    compiled, found = first["stats"]
    assert compiled > 0 and found > 0  # the second shapes() call found the first one's texts
    path = _cache_file(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600
    again = _run("warm", tmp_path)
    assert again["stats"][0] == 0, "a warm run compiled texts the file holds"
    assert again["stats"][1] == first["stats"][0] + first["stats"][1]
    assert again["behaves"] == first["behaves"]


@pytest.mark.parametrize("spoil", ["garbage", "other magic", "group-writable", "symlink", "not a dict"])
def test_a_cache_file_not_to_be_trusted_is_not_read_and_is_replaced(tmp_path: Path, spoil: str) -> None:
    _run("fresh", tmp_path)
    path = _cache_file(tmp_path)
    good = path.read_bytes()
    if spoil == "garbage":
        path.write_bytes(good[:16] + b"\x00garbage")
    elif spoil == "other magic":
        path.write_bytes(b"\x00\x00\r\n" + good[4:])
    elif spoil == "group-writable":
        path.chmod(0o620)
    elif spoil == "symlink":
        target = tmp_path / "elsewhere"
        target.write_bytes(good)
        target.chmod(0o600)
        path.unlink()
        path.symlink_to(target)
    else:
        import marshal

        path.write_bytes(good[:4] + marshal.dumps([1, 2]))
    run = _run("warm", tmp_path)
    assert run["stats"][0] > 0, f"a {spoil} cache file was read"
    assert run["behaves"] == ["shapes.<locals>.Frozen(a=1, b=[])", True, True, True, 2]
    assert not path.is_symlink() and path.stat().st_mode & 0o777 == 0o600
    assert _run("warm", tmp_path)["stats"][0] == 0, "the replaced file was not read back"


START = """
import asyncio, json, sys
from pathlib import Path
from ketch.config.dirs import user_data_dir
from ketch.frontends import dataclass_code
dataclass_code.install(str(user_data_dir()))
from ketch.frontends.cli import _main_parser
from ketch.wire.sdk_pins import quiet_imports
quiet_imports()
import ketch.ui.controller
from ketch.frontends.interactive import Interactive

runtime = Interactive(_main_parser().parse_args(sys.argv[1:]), Path.cwd())

async def main():
    session = await runtime.build_session()
    await runtime.close()

asyncio.run(main())
print(json.dumps(dataclass_code.stats()))
"""


def test_a_warm_interactive_start_compiles_no_dataclass_code(tmp_path: Path) -> None:
    """The pin on the interpreter's side: if ``dataclasses`` stops calling ``exec`` by name, nothing
    is found (or compiled) through the cache and this fails, instead of the start silently
    losing about 30 % of its CPU."""
    (tmp_path / "project" / ".git").mkdir(parents=True)
    env = ketch_env({"KETCH_CONFIG_DIR": str(tmp_path / "config"), "KETCH_DATA_DIR": str(tmp_path / "data")})
    counts = []
    with FakeProvider() as fake:
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", START, *adhoc(fake, "openai-chat")], capture_output=True,
                                 text=True, timeout=120, cwd=tmp_path / "project", env=env)
            assert out.returncode == 0, out.stderr[-3000:]
            counts.append(json.loads(out.stdout.strip().splitlines()[-1]))
    (cold_compiled, _), (warm_compiled, warm_found) = counts
    assert cold_compiled > 1000, f"a cold start compiled only {cold_compiled} dataclass texts through the cache"
    assert warm_compiled == 0, f"a warm start compiled {warm_compiled} texts"
    assert warm_found >= cold_compiled
    assert os.stat(_cache_file(tmp_path / "data")).st_size > 100_000
