"""The Landlock launcher, run as its own small program: ``python -I -S landlock_exec.py OPTIONS -- ARGV``.

It imports nothing but the standard library (so it starts without ``site``). It becomes a
child subreaper, forks, and in the child: starts a new session (no controlling terminal),
sets ``no_new_privs``, asks to be killed when the launcher dies, restricts itself with a Landlock ruleset
(writes only beneath the granted paths; TCP connect and bind refused when the network is
off, on ABI 4+; signals and abstract Unix sockets scoped to the sandbox on ABI 6+), loads
the seccomp filter, and executes the command. The launcher waits for the command, then
kills every process the command left behind (orphans are re-parented to it, a subreaper),
and exits with the command's status.

OPTIONS: ``--seccomp FILE --tmpdir DIR --network 0|1`` and any number of ``--dir PATH`` and
``--file PATH`` (the grants). Paths that vanished since they were listed are skipped.
"""

from __future__ import annotations

import ctypes
import os
import signal
import struct
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and aarch64
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 36, 38, 22
SECCOMP_MODE_FILTER = 2

FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_REMOVE_DIR, FS_REMOVE_FILE, FS_MAKE_CHAR, FS_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK, FS_MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
FS_REFER, FS_TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

FILE_RIGHTS_V1 = FS_WRITE_FILE
"""Rights that apply to a regular file itself (the rest apply to directory contents)."""
WRITE_RIGHTS_V1 = (
    FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG
    | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM
)  # fmt: skip
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom")
"""Character devices commands write to; they stay writable."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI (0 when Landlock is missing or disabled)."""
    result = _libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return int(result) if result > 0 else 0


def handled_rights(abi: int) -> tuple[int, int]:
    """(every write right, the ones that apply to a file) the kernel of ``abi`` knows."""
    rights, file_rights = WRITE_RIGHTS_V1, FILE_RIGHTS_V1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
        file_rights |= FS_TRUNCATE
    return rights, file_rights


def restrict(grants: list[tuple[str, bool]], *, network: bool) -> int:
    """Restrict this thread (and what it executes) to writes beneath ``grants``. Returns the ABI."""
    abi = abi_version()
    if abi < 1:
        raise OSError(0, "Landlock is not available in this kernel")
    rights, file_rights = handled_rights(abi)
    net = 0 if network or abi < 4 else NET_BIND_TCP | NET_CONNECT_TCP
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", rights, net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", rights, net)
    else:
        attr = struct.pack("=Q", rights)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _check(_libc.syscall(SYS_CREATE_RULESET, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for path, is_dir in [*grants, *((d, False) for d in DEVICES)]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC | (0 if is_dir else os.O_NOFOLLOW))
            except OSError:
                continue  # gone since the spec was made (or a device this system lacks)
            try:
                allowed = rights if is_dir else file_rights
                rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, fd), 12)
                _check(_libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), rule, ctypes.c_uint32(0)), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(_libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_seccomp(program: bytes) -> None:
    """Install a seccomp BPF program on this thread (``no_new_privs`` must be set)."""
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "prctl(PR_SET_SECCOMP)")


def _reap_leftovers(me: int) -> None:
    """Kill and reap every process re-parented to this subreaper until none is left."""
    for _ in range(1000):
        orphans = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 1 and int(fields[1]) == me:
                orphans.append(int(entry))
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reaped = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            reaped = True
        if not orphans and not reaped:
            return


def parse(argv: list[str]) -> tuple[dict[str, str], list[tuple[str, bool]], list[str]]:
    """(options, grants, command) from the launcher's arguments; ValueError when malformed."""
    options: dict[str, str] = {}
    grants: list[tuple[str, bool]] = []
    i = 0
    while i < len(argv) and argv[i] != "--":
        key = argv[i]
        if i + 1 >= len(argv) or key not in ("--seccomp", "--tmpdir", "--network", "--dir", "--file"):
            raise ValueError(f"unexpected argument {key!r}")
        value = argv[i + 1]
        if key in ("--dir", "--file"):
            grants.append((value, key == "--dir"))
        else:
            options[key[2:]] = value
        i += 2
    command = argv[i + 1 :]
    if not command or {"seccomp", "tmpdir", "network"} - set(options):
        raise ValueError("needs --seccomp, --tmpdir, --network and a command after --")
    return options, grants, command


def main(argv: list[str]) -> int:
    try:
        options, grants, command = parse(argv)
    except ValueError as exc:
        print(f"landlock_exec: {exc}", file=sys.stderr)
        return 125
    with open(options["seccomp"], "rb") as fh:
        program = fh.read()
    me = os.getpid()
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    child = os.fork()
    if child == 0:
        try:
            _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
            if os.getppid() != me:
                os._exit(125)
            try:
                os.setsid()  # no controlling terminal: no TIOCSTI into the user's
            except OSError:
                pass
            os.environ["TMPDIR"] = options["tmpdir"]
            restrict(grants, network=options["network"] == "1")
            load_seccomp(program)
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"landlock_exec: {exc.strerror or exc}: {command[0]}", file=sys.stderr)
            os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: os.kill(child, signum))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    _reap_leftovers(me)
    if os.WIFSIGNALED(status):  # die the same way, so the caller sees the signal
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(me, sig)
        return 128 + sig
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
