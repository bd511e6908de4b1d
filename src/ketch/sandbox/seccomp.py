"""A seccomp BPF filter built in pure Python: what bubblewrap and Landlock cannot refuse.

The program is a list of classic-BPF ``sock_filter`` instructions (``struct.pack("=HBBI")``
each) over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at 4, ``args[i]`` at
16 + 8 i, little-endian on both supported machines). It refuses, with ``EPERM``:

- ``ptrace``, ``process_vm_readv``/``process_vm_writev`` (reading or steering another process);
- the kernel keyring: ``add_key``, ``request_key``, ``keyctl``;
- ``io_uring_setup``/``io_uring_enter``/``io_uring_register`` (its operations are not seen
  by seccomp, so it would bypass the rest of the filter);
- when the network is off, ``socket`` with any family but ``AF_UNIX``.

A program built for one architecture first checks ``seccomp_data.arch`` and kills a process
that enters the kernel through another ABI (on x86_64 also the x32 ABI, which shares the
architecture value but sets bit 30 of the syscall number): otherwise an i386 ``int 0x80``
would reach syscalls by numbers the filter never compares.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

# classic BPF opcodes
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

AF_UNIX = 1
X32_SYSCALL_BIT = 0x40000000

_OFF_NR, _OFF_ARCH, _OFF_ARG0_LOW = 0, 4, 16


@dataclass(frozen=True)
class Arch:
    name: str
    audit_arch: int
    numbers: dict[str, int]
    x32_bit: bool = False


ARCHES: dict[str, Arch] = {
    "x86_64": Arch(
        "x86_64",
        0xC000003E,
        {
            "socket": 41, "ptrace": 101, "add_key": 248, "request_key": 249, "keyctl": 250,
            "process_vm_readv": 310, "process_vm_writev": 311,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        },
        x32_bit=True,
    ),
    "aarch64": Arch(
        "aarch64",
        0xC00000B7,
        {
            "socket": 198, "ptrace": 117, "add_key": 217, "request_key": 218, "keyctl": 219,
            "process_vm_readv": 270, "process_vm_writev": 271,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        },
    ),
}  # fmt: skip

ALWAYS_REFUSED: tuple[str, ...] = (
    "ptrace", "process_vm_readv", "process_vm_writev",
    "add_key", "request_key", "keyctl",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
)  # fmt: skip


def machine_arch(machine: str | None = None) -> Arch | None:
    """The supported architecture of this machine (``platform.machine()``), or None."""
    name = (machine or platform.machine()).lower()
    name = {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)
    return ARCHES.get(name)


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def program(arch: Arch, *, network: bool) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions."""
    deny = RET_ERRNO | errno.EPERM
    prog = [
        _ins(_LD_W_ABS, _OFF_ARCH),
        _ins(_JEQ_K, arch.audit_arch, jt=1, jf=0),
        _ins(_RET_K, RET_KILL_PROCESS),
        _ins(_LD_W_ABS, _OFF_NR),
    ]
    if arch.x32_bit:
        prog += [_ins(_JSET_K, X32_SYSCALL_BIT, jt=0, jf=1), _ins(_RET_K, RET_KILL_PROCESS)]
    for name in ALWAYS_REFUSED:
        # equal: fall through to the refusal; not equal: skip it
        prog += [_ins(_JEQ_K, arch.numbers[name], jt=0, jf=1), _ins(_RET_K, deny)]
    if not network:
        prog += [
            _ins(_JEQ_K, arch.numbers["socket"], jt=0, jf=3),
            _ins(_LD_W_ABS, _OFF_ARG0_LOW),  # the address family (an int: the low half of args[0])
            _ins(_JEQ_K, AF_UNIX, jt=1, jf=0),
            _ins(_RET_K, deny),
        ]
    prog.append(_ins(_RET_K, RET_ALLOW))
    return prog


def encode(prog: list[tuple[int, int, int, int]]) -> bytes:
    """The program as the kernel's ``struct sock_filter`` array."""
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in prog)


def filter_bytes(*, network: bool, machine: str | None = None) -> bytes:
    """The encoded filter for this machine; ValueError on an architecture it has no table for."""
    arch = machine_arch(machine)
    if arch is None:
        raise ValueError(f"no seccomp syscall table for {machine or platform.machine()}")
    return encode(program(arch, network=network))


def run(prog: list[tuple[int, int, int, int]], nr: int, arch: int, arg0: int = 0) -> int:
    """Evaluate the program for one syscall the way the kernel would (for tests and review)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0 & 0xFFFFFFFFFFFFFFFF, 0, 0, 0, 0, 0)
    acc, pc = 0, 0
    while pc < len(prog):
        code, jt, jf, k = prog[pc]
        if code == _LD_W_ABS:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == _JEQ_K:
            pc += jt if acc == k else jf
        elif code == _JSET_K:
            pc += jt if acc & k else jf
        elif code == _RET_K:
            return k
        else:
            raise ValueError(f"opcode {code:#x} at {pc} is not one this builder emits")
        pc += 1
    raise ValueError("the program fell off its end without a return")
