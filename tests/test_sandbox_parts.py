"""The sandbox's parts on their own: the seccomp program (evaluated, and loaded for real), the
policy's carve-outs, Landlock's allow-only grants, the Seatbelt profile text, detection, and
what a repository's config may change."""

from __future__ import annotations

import errno
import subprocess
import uuid
import sys
from pathlib import Path

import pytest

from ketch.sandbox import detect, landlock, macos, seccomp
from ketch.sandbox.detect import Detector
from ketch.sandbox.policy import build_policy
from ketch.config.sandbox_limits import limit_project_layer
from ketch.sandbox.runtime import Sandbox

EPERM = seccomp.RET_ERRNO | errno.EPERM


# ---------------------------------------------------------------- seccomp, evaluated
@pytest.mark.parametrize("arch_name", ["x86_64", "aarch64"])
def test_the_filter_refuses_what_it_lists_and_allows_the_rest(arch_name: str) -> None:
    arch = seccomp.ARCHES[arch_name]
    prog = seccomp.program(arch, network=False)
    for name in seccomp.ALWAYS_REFUSED:
        assert seccomp.run(prog, arch.numbers[name], arch.audit_arch) == EPERM, name
    sock = arch.numbers["socket"]
    assert seccomp.run(prog, sock, arch.audit_arch, arg0=1) == seccomp.RET_ALLOW  # AF_UNIX
    for family in (2, 10, 16, 17):  # AF_INET, AF_INET6, AF_NETLINK, AF_PACKET
        assert seccomp.run(prog, sock, arch.audit_arch, arg0=family) == EPERM
    assert seccomp.run(prog, 0, arch.audit_arch) == seccomp.RET_ALLOW
    assert seccomp.run(prog, 59, arch.audit_arch) == seccomp.RET_ALLOW


@pytest.mark.parametrize("arch_name", ["x86_64", "aarch64"])
def test_with_the_network_on_sockets_of_every_family_are_allowed(arch_name: str) -> None:
    arch = seccomp.ARCHES[arch_name]
    prog = seccomp.program(arch, network=True)
    assert seccomp.run(prog, arch.numbers["socket"], arch.audit_arch, arg0=2) == seccomp.RET_ALLOW
    assert seccomp.run(prog, arch.numbers["ptrace"], arch.audit_arch) == EPERM


def test_another_abi_is_killed_not_looked_up() -> None:
    x86 = seccomp.ARCHES["x86_64"]
    prog = seccomp.program(x86, network=False)
    assert seccomp.run(prog, 101, 0x40000003) == seccomp.RET_KILL_PROCESS  # i386 (int 0x80)
    assert seccomp.run(prog, 101 | seccomp.X32_SYSCALL_BIT, x86.audit_arch) == seccomp.RET_KILL_PROCESS
    arm = seccomp.ARCHES["aarch64"]
    assert seccomp.run(seccomp.program(arm, network=False), 117, 0x40000028) == seccomp.RET_KILL_PROCESS  # arm32


def test_the_encoding_is_eight_bytes_per_instruction() -> None:
    prog = seccomp.program(seccomp.ARCHES["x86_64"], network=False)
    data = seccomp.encode(prog)
    assert len(data) == 8 * len(prog)
    assert data[:8] == bytes([0x20, 0, 0, 0, 4, 0, 0, 0])  # ld [4]: the arch
    assert seccomp.filter_bytes(network=False, machine="x86_64") == data
    with pytest.raises(ValueError):
        seccomp.filter_bytes(network=False, machine="riscv64")


# ---------------------------------------------------------------- seccomp and the launchers, for real
PROBE = r"""
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sys_(nr, *a):
    r = libc.syscall(nr, *a)
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
def sock(family):
    try:
        socket.socket(family, socket.SOCK_DGRAM if family == 16 else socket.SOCK_STREAM).close()
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]
NR = {"x86_64": (425, 250, 101), "aarch64": (425, 219, 117)}[os.uname().machine]
buf = ctypes.create_string_buffer(120)
print("io_uring", sys_(NR[0], 8, buf))
print("keyctl", sys_(NR[1], 0, 0, 0, 0, 0))
print("ptrace", sys_(NR[2], 0x4206, 1, 0, 0))
print("inet", sock(socket.AF_INET))
print("inet6", sock(socket.AF_INET6))
print("netlink", sock(16))
print("unix", sock(socket.AF_UNIX))
"""


def _probe(mechanism: str, network: bool, ws: Path) -> dict[str, str]:
    found = detect.Detector().detect(mechanism)  # type: ignore[arg-type]
    assert found.name == mechanism, found.reason
    sandbox = Sandbox(build_policy("workspace-write", ws, network=network), found)
    launch = sandbox.wrap([sys.executable, "-c", PROBE], cwd=ws)
    out = subprocess.run(launch.argv, capture_output=True, text=True, cwd=ws, timeout=30)
    assert out.returncode == 0, out.stderr
    return dict(line.split(" ", 1) for line in out.stdout.splitlines())


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_the_loaded_filter_refuses_io_uring_keyrings_ptrace_and_non_unix_sockets(mechanism: str, tmp_path: Path) -> None:
    seen = _probe(mechanism, False, tmp_path)
    assert seen == {
        "io_uring": "EPERM", "keyctl": "EPERM", "ptrace": "EPERM",
        "inet": "EPERM", "inet6": "EPERM", "netlink": "EPERM", "unix": "ok",
    }  # fmt: skip


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_with_the_network_on_sockets_open_and_the_rest_stays_refused(mechanism: str, tmp_path: Path) -> None:
    seen = _probe(mechanism, True, tmp_path)
    assert (seen["inet"], seen["inet6"], seen["unix"]) == ("ok", "ok", "ok")
    assert (seen["io_uring"], seen["keyctl"], seen["ptrace"]) == ("EPERM", "EPERM", "EPERM")


def test_outside_the_sandbox_the_same_probe_gets_through(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=30)
    seen = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert seen["inet"] == "ok" and seen["keyctl"] != "EPERM" and seen["io_uring"] != "EPERM"


# ---------------------------------------------------------------- the policy
def _tree(root: Path) -> Path:
    for d in (".git/hooks", ".github/workflows", "src/pkg", "docs"):
        (root / d).mkdir(parents=True)
    (root / ".envrc").write_text("export X=1\n")
    (root / "src" / "pkg" / ".gitattributes").write_text("* filter=x\n")
    (root / "README.md").write_text("r\n")
    return root


def test_the_policy_carves_out_every_run_later_place_that_exists(tmp_path: Path) -> None:
    ws = _tree(tmp_path / "ws")
    policy = build_policy("workspace-write", ws)
    assert set(policy.read_only) == {ws / ".git", ws / ".github" / "workflows", ws / ".envrc", ws / "src" / "pkg" / ".gitattributes"}
    assert policy.write_verdict(ws / "src" / "main.py") == "writable"
    assert policy.write_verdict(ws / ".git" / "config") == "run_later"
    assert policy.write_verdict(ws / ".ketch" / "config.toml") == "run_later"  # not there yet: still run-later
    assert policy.write_verdict(tmp_path / "elsewhere.txt") == "outside"
    assert build_policy("read-only", ws).write_verdict(ws / "README.md") == "read_only"
    assert build_policy("full-access", ws).write_verdict(tmp_path / "x") == "writable"


def test_a_git_directory_made_during_the_session_is_read_only_for_the_next_command(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = build_policy("workspace-write", ws)
    assert policy.read_only == ()
    (ws / ".git").mkdir()
    assert policy.refreshed().read_only == (ws / ".git",)


def test_a_symlinked_run_later_path_is_carved_out_where_it_leads(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "real-git").mkdir(parents=True)
    (ws / ".git").symlink_to(ws / "real-git")
    assert build_policy("workspace-write", ws).read_only == (ws / "real-git",)


def test_writable_extras_caches_and_their_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".cache" / "pip").mkdir(parents=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = build_policy("workspace-write", ws, writable=[str(tmp_path / "nope")], caches=["pip", "npm"])
    assert policy.writable == (ws, tmp_path / ".cache" / "pip")
    assert any("does not exist" in n for n in policy.notes)
    with pytest.raises(ValueError, match="unknown tool cache"):
        build_policy("workspace-write", ws, caches=["bogus"])
    with pytest.raises(ValueError, match="cannot make / writable"):
        build_policy("workspace-write", ws, writable=["/"])
    with pytest.raises(ValueError, match="the workspace is / itself"):
        build_policy("workspace-write", Path("/"), scan_nested=False)


# ---------------------------------------------------------------- Landlock grants
def test_landlock_grants_open_the_siblings_of_each_carve_out_and_never_the_carve_out(tmp_path: Path) -> None:
    ws = _tree(tmp_path / "ws")
    (ws / "link").symlink_to("/etc")
    grants = dict(landlock.grants(build_policy("workspace-write", ws), tmp_path / "tmp"))
    assert grants[str(tmp_path / "tmp")] is True
    assert grants[str(ws / "docs")] is True and grants[str(ws / "README.md")] is False
    assert str(ws / "src" / "pkg") not in grants and str(ws / "src") not in grants  # opened up entry by entry
    for path in grants:
        assert ".git" not in Path(path).parts and not path.endswith((".envrc", ".gitattributes", "workflows"))
    assert str(ws / "link") not in grants and str(ws) not in grants
    assert str(ws / ".github") not in grants  # it holds workflows/; its other entries would be granted one by one


def test_read_only_mode_grants_only_the_private_tmp(tmp_path: Path) -> None:
    ws = _tree(tmp_path / "ws")
    assert landlock.grants(build_policy("read-only", ws), tmp_path / "t") == [(str(tmp_path / "t"), True)]


# ---------------------------------------------------------------- Seatbelt profile
def test_the_seatbelt_profile_names_paths_only_as_parameters(tmp_path: Path) -> None:
    ws = _tree(tmp_path / 'w"s) (allow default')
    policy = build_policy("workspace-write", ws)
    text, params = macos.profile(policy, "/private/tmp/k")
    assert text.startswith("(version 1)\n(deny default)\n")
    assert str(ws) not in text and "allow default" not in text.replace("(deny default)", "")
    assert '(allow file-write* (subpath (param "KETCH_TMP")) (subpath (param "KETCH_WRITABLE_0")))' in text
    assert text.count('(param "KETCH_READ_ONLY_') == len(policy.read_only)
    assert text.index("(allow file-write*") < text.index("(deny file-write*")  # the later rule wins
    assert "(allow network-outbound (remote unix-socket))" in text and "(allow network-inbound)" not in text
    assert ("KETCH_WRITABLE_0", str(ws)) in params
    argv = macos.argv(policy, ["make", "test"], tmpdir="/private/tmp/k")
    assert argv[:3] == ["/usr/bin/sandbox-exec", "-p", text] and argv[-2:] == ["make", "test"]
    assert f"KETCH_WRITABLE_0={ws}" in argv


def test_the_seatbelt_profile_with_network_and_read_only() -> None:
    policy = build_policy("read-only", Path("/"), scan_nested=False).with_network(True)
    text, params = macos.profile(policy, "/t")
    assert '(allow file-write* (subpath (param "KETCH_TMP")))' in text and "KETCH_WRITABLE" not in text
    assert "(allow network-outbound)" in text and params == [("KETCH_TMP", "/t")]


# ---------------------------------------------------------------- detection
def test_detection_falls_back_to_landlock_then_to_none(tmp_path: Path) -> None:
    no_bwrap = Detector(bwrap_candidates=lambda: [], landlock_abi=lambda: 3)
    found = no_bwrap.detect()
    assert found.name == "landlock" and "no bwrap binary" in found.reason and "without network rules" in found.reason
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bubblewrap 9.9'\nexit 0\n")
    broken.chmod(0o755)
    nothing = Detector(bwrap_candidates=lambda: [broken], landlock_abi=lambda: 0).detect()
    assert nothing.name == "none" and "was not confined" in nothing.reason and "no Landlock" in nothing.reason
    assert Detector(bwrap_candidates=lambda: [], landlock_abi=lambda: 0).detect().name == "none"
    assert Detector(landlock_abi=lambda: 0).detect("none").name == "none"
    assert Detector(platform="darwin", seatbelt_path=str(tmp_path / "missing")).detect().name == "none"
    assert Detector(platform="darwin", seatbelt_path="/bin/sh").detect().name == "seatbelt"
    assert Detector(platform="win32").detect().name == "none"


def test_a_forced_mechanism_that_does_not_work_is_none_with_the_reason() -> None:
    found = Detector(landlock_abi=lambda: 0).detect("landlock")
    assert found.name == "none" and "no Landlock" in found.reason
    found = Detector(bwrap_candidates=lambda: []).detect("bubblewrap")
    assert found.name == "none" and "no bwrap binary" in found.reason


def test_the_newest_bwrap_wins(tmp_path: Path) -> None:
    from ketch.sandbox import bwrap

    old, new = tmp_path / "old", tmp_path / "new"
    for path, version in ((old, "0.4.0"), (new, "0.12.1")):
        path.write_text(f"#!/bin/sh\necho 'bubblewrap {version}'\n")
        path.chmod(0o755)
    assert bwrap.newest([old, new]) == (new, (0, 12, 1))
    assert bwrap.newest([tmp_path / "absent"]) is None


# ---------------------------------------------------------------- what a repository may change
def test_a_project_layer_may_narrow_and_never_widen() -> None:
    notes: list[str] = []
    layer = limit_project_layer(
        {"sandbox": {"mode": "read-only", "network": False}, "approval": "ask", "model": "x:y"}, {}, "repo", notes
    )
    assert layer == {"sandbox": {"mode": "read-only", "network": False}, "approval": "ask", "model": "x:y"} and notes == []
    layer = limit_project_layer(
        {"sandbox": {"mode": "full-access", "network": True, "writable": ["/"], "caches": ["pip"], "mechanism": "none"}, "approval": "never"},
        {"sandbox": {"mode": "workspace-write"}},
        "repo/.ketch/config.toml",
        notes,
    )
    [note] = notes
    assert layer == {"sandbox": {}}
    for key in ("sandbox.mode", "sandbox.network", "sandbox.writable", "sandbox.caches", "sandbox.mechanism", "approval"):
        assert key in note
    notes.clear()
    layer = limit_project_layer({"sandbox": {"mode": "full-access", "network": True}}, {"sandbox": {"mode": "off", "network": True}}, "r", notes)
    assert layer == {"sandbox": {"mode": "full-access", "network": True}} and notes == []


def test_many_landlock_grants_still_launch(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    for i in range(1500):
        (ws / f"file-with-a-rather-long-name-{i:05d}.txt").write_text("x")
    sandbox = Sandbox(build_policy("workspace-write", ws), Detector().detect("landlock"))
    argv = sandbox.wrap(["sh", "-c", "echo ok > file-with-a-rather-long-name-00007.txt; touch .git/x"], cwd=ws).argv
    assert argv.count("--file") == 1500
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ws, timeout=30)
    assert (ws / "file-with-a-rather-long-name-00007.txt").read_text() == "ok\n"
    assert "Permission denied" in out.stderr and not (ws / ".git" / "x").exists()


def test_the_landlock_launcher_refuses_malformed_arguments() -> None:
    from ketch.sandbox import landlock_exec

    with pytest.raises(ValueError):
        landlock_exec.parse(["--dir", "/x", "--", "true"])
    with pytest.raises(ValueError):
        landlock_exec.parse(["--bogus", "1", "--", "true"])
    options, grants, command = landlock_exec.parse(
        ["--seccomp", "f", "--tmpdir", "t", "--network", "0", "--dir", "/a", "--file", "/b", "--", "ls", "--dir"]
    )
    assert options == {"seccomp": "f", "tmpdir": "t", "network": "0"} and grants == [("/a", True), ("/b", False)]
    assert command == ["ls", "--dir"]


def test_what_counts_as_a_refusal_depends_on_the_mechanism_and_the_network(tmp_path: Path) -> None:
    from ketch.sandbox.detect import Mechanism

    policy = build_policy("workspace-write", tmp_path)
    bw = Sandbox(policy, Mechanism("bubblewrap", "test"))
    assert "a write outside" in bw.refusal("touch: cannot touch '/x': Read-only file system")
    assert bw.refusal("git@host: Permission denied (publickey).") == ""  # not how bubblewrap refuses
    assert "name lookup" in bw.refusal("curl: (6) Could not resolve host: example.com")
    assert Sandbox(policy.with_network(True), Mechanism("bubblewrap", "test")).refusal("Could not resolve host") == ""
    assert "a write outside" in Sandbox(policy, Mechanism("landlock", "test")).refusal("bash: /x: Permission denied")
    assert bw.refusal("all 3 tests passed") == ""


@pytest.mark.parametrize("overlay", [True, False])
def test_writes_to_tmp_stay_private_and_the_workspace_under_tmp_stays_visible(tmp_path: Path, overlay: bool) -> None:
    import dataclasses

    ws = tmp_path / "ws"  # under /tmp, as pytest's directories are
    ws.mkdir()
    (tmp_path / "host-file").write_text("host\n")
    mechanism = dataclasses.replace(detect.Detector().detect("bubblewrap"), tmp_overlay=overlay)
    sandbox = Sandbox(build_policy("workspace-write", ws), mechanism)
    probe = f"ketch-probe-{uuid.uuid4().hex[:12]}"  # a name no earlier run on this machine left behind
    script = f"echo mine > {tmp_path}/host-file 2>/dev/null; mkdir -p /tmp/{probe} && echo t > /tmp/{probe}/new && cat /tmp/{probe}/new; echo w > in-ws; cat {tmp_path}/host-file"
    out = subprocess.run(sandbox.wrap(["sh", "-c", script], cwd=ws).argv, capture_output=True, text=True, cwd=ws, timeout=30)
    assert out.stdout.splitlines()[0] == "t"
    assert (ws / "in-ws").read_text() == "w\n"
    assert (tmp_path / "host-file").read_text() == "host\n" and not Path(f"/tmp/{probe}/new").exists()


def test_a_workspace_that_holds_the_home_directory_keeps_its_dotfiles_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".bashrc").write_text("")
    monkeypatch.setenv("HOME", str(home))
    policy = build_policy("workspace-write", home, scan_nested=False)
    assert policy.write_verdict(home / ".ssh" / "authorized_keys") == "run_later"
    assert policy.write_verdict(home / ".bashrc") == "run_later" and policy.write_verdict(home / "notes.txt") == "writable"
    project = home / "project"  # the usual case: a project inside the home directory
    project.mkdir()
    assert build_policy("workspace-write", project, scan_nested=False).read_only == ()
    out = subprocess.run(
        Sandbox(policy, detect.Detector().detect("bubblewrap")).wrap(["sh", "-c", "echo k >> .ssh/authorized_keys"], cwd=home).argv,
        capture_output=True, text=True, cwd=home, timeout=30,
    )  # fmt: skip
    assert "Read-only file system" in out.stderr and not (home / ".ssh" / "authorized_keys").exists()


@pytest.mark.parametrize("where", ["default-under-home", "configured-inside-the-project"])
def test_ketchs_own_config_and_data_dirs_stay_read_only_where_a_writable_root_holds_them(
        where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The data dir holds the folder-trust records, the MCP approvals, the store and the dataclass
    code every start executes; the config dir, hooks and MCP servers: a sandboxed command must not
    write either, wherever they live, even in a workspace that holds them (ketch started in ~, or
    KETCH_DATA_DIR pointed into the project)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    workspace = home if where == "default-under-home" else home / "project"
    config, data = workspace / "ketch-config", workspace / "ketch-data"
    monkeypatch.setenv("KETCH_CONFIG_DIR", str(config))
    monkeypatch.setenv("KETCH_DATA_DIR", str(data))
    (data / "cache").mkdir(parents=True)
    config.mkdir()
    policy = build_policy("workspace-write", workspace, scan_nested=False)
    cache = data / "cache" / "dataclass-code.cpython-311.marshal"
    assert policy.write_verdict(cache) == "run_later" and policy.write_verdict(config / "config.toml") == "run_later"
    assert policy.write_verdict(workspace / "notes.txt") == "writable"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    started = build_policy("workspace-write", elsewhere, scan_nested=False)
    assert started.read_only == ()
    assert data in started.refreshed([workspace]).read_only  # /add-dir of the folder that holds it
    script = f"echo x > {cache}; echo y > {data}/trusted-folders.json; echo z > {config}/config.toml; echo w > notes.txt"
    out = subprocess.run(Sandbox(policy, detect.Detector().detect("bubblewrap")).wrap(["sh", "-c", script], cwd=workspace).argv,
                         capture_output=True, text=True, cwd=workspace, timeout=30)
    assert out.stderr.count("Read-only file system") == 3, out.stderr
    assert not cache.exists() and not (data / "trusted-folders.json").exists() and not (config / "config.toml").exists()
    assert (workspace / "notes.txt").read_text() == "w\n"
