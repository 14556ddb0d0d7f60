"""A seccomp filter beside Landlock: the holes Landlock has no right for, closed with EPERM.

Landlock cannot refuse `connect()` on a pathname unix socket (tmux, ssh-agent, D-Bus,
docker.sock all run commands unconfined), UDP, or a child leaving the process group the
daemon kills at return. This filter refuses `socket(AF_UNIX, ...)` always and every socket
family with `network = false`, `io_uring_setup` (its requests bypass `socket(2)` filtering),
and `setsid`/`setpgid` (so every process a command starts stays in the group the daemon
kills). Refused calls fail with EPERM, so commands report an error rather than die.

Under bwrap with `network = true` the command shares the host's network namespace, and with
it every abstract unix socket on the host: bwrap gets the filter without the session part
(its PID namespace already ends every process at return).

The classic BPF program is written here (a dozen instructions) rather than through
libseccomp: it is built once in the parent, and the child only calls `prctl` between fork
and exec, where loading a library and allocating through it is unsafe in a threaded daemon.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import socket
import struct
from functools import cache
from typing import Final

__all__ = ["Filter", "build_filter", "seccomp_error"]

# <linux/audit.h>: the arch tag the kernel puts in seccomp_data.arch.
_AUDIT_ARCH: Final = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# x86_64 syscalls with this bit set are the x32 ABI: another numbering, refused whole.
_X32_SYSCALL_BIT: Final = 0x40000000
# Per native architecture: socket, setsid, setpgid, seccomp (io_uring_* are 425-427 on both).
_NUMBERS: Final = {
    "x86_64": {"socket": 41, "setsid": 112, "setpgid": 109, "seccomp": 317},
    "aarch64": {"socket": 198, "setsid": 157, "setpgid": 154, "seccomp": 277},
}
_IO_URING_SETUP: Final = 425

# <linux/filter.h> and <linux/seccomp.h>
_LD_W_ABS: Final = 0x20
_JEQ_K: Final = 0x15
_JGE_K: Final = 0x35
_RET_K: Final = 0x06
_SECCOMP_RET_ALLOW: Final = 0x7FFF0000
_SECCOMP_RET_ERRNO: Final = 0x00050000
_SECCOMP_GET_ACTION_AVAIL: Final = 2
_SECCOMP_MODE_FILTER: Final = 2
_PR_SET_NO_NEW_PRIVS: Final = 38
_PR_SET_SECCOMP: Final = 22
# seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (args[0]'s low word on little endian)
_OFFSET_NR: Final = 0
_OFFSET_ARCH: Final = 4
_OFFSET_ARG0: Final = 16


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc: Final = ctypes.CDLL(None, use_errno=True)
_prctl: Final = _libc.prctl
_prctl.restype = ctypes.c_int
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
_syscall: Final = _libc.syscall
_syscall.restype = ctypes.c_long


def _machine() -> str:
    return platform.machine()


@cache
def seccomp_error() -> str | None:
    """Return why a seccomp filter cannot be applied here, None when it can (probed once)."""
    machine = _machine()
    if machine not in _NUMBERS:
        return f"no seccomp filter is written for the {machine} architecture"
    action = ctypes.c_uint32(_SECCOMP_RET_ERRNO)
    done = _syscall(ctypes.c_long(_NUMBERS[machine]["seccomp"]), ctypes.c_uint(_SECCOMP_GET_ACTION_AVAIL),
                    ctypes.c_uint(0), ctypes.byref(action))
    if done != 0:
        return f"the kernel has no seccomp filters ({os.strerror(ctypes.get_errno())})"
    return None


class Filter:
    """A compiled filter: `apply` it in the child between fork and exec."""

    __slots__ = ("_buffer", "_program", "code")

    def __init__(self, code: bytes) -> None:
        self.code = code  # the sock_filter array, as bwrap's --seccomp reads it
        self._buffer = ctypes.create_string_buffer(code, len(code))
        self._program = _SockFprog(len=len(code) // 8, filter=ctypes.addressof(self._buffer))

    def apply(self) -> None:
        """Install the filter on the calling process (inherited by all it starts); raises OSError."""
        if _prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(self._program), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


@cache
def build_filter(*, network: bool, sessions: bool = True) -> Filter:
    """Return the filter for this architecture: no unix sockets, no sockets at all without `network`.

    `sessions` also refuses `setsid` and `setpgid` (where no PID namespace ends them). Raises `OSError` naming the architecture when there is no filter for it (see `seccomp_error`).
    """
    machine = _machine()
    if machine not in _NUMBERS:
        raise OSError(errno.ENOSYS, f"no seccomp filter is written for the {machine} architecture")
    numbers = _NUMBERS[machine]
    refuse = _op(_RET_K, _SECCOMP_RET_ERRNO | errno.EPERM)
    allow = _op(_RET_K, _SECCOMP_RET_ALLOW)
    # A foreign architecture (i386 through int 0x80 on x86_64, arm32 compat) has other
    # numbers, socketcall among them: every call of it is refused.
    head = [_op(_LD_W_ABS, _OFFSET_ARCH), _op(_JEQ_K, _AUDIT_ARCH[machine], jt=1), refuse,
            _op(_LD_W_ABS, _OFFSET_NR)]
    if machine == "x86_64":
        head += [_op(_JGE_K, _X32_SYSCALL_BIT, jf=1), refuse]
    body: list[bytes] = []
    for name in ("setsid", "setpgid") if sessions else ():
        body += [_op(_JEQ_K, numbers[name], jf=1), refuse]
    # Without a ring, io_uring_enter and io_uring_register have nothing to act on.
    body += [_op(_JEQ_K, _IO_URING_SETUP, jf=1), refuse]
    if network:  # the socket call is last: past the family test, allow
        body += [_op(_JEQ_K, numbers["socket"], jf=3), _op(_LD_W_ABS, _OFFSET_ARG0),
                 _op(_JEQ_K, socket.AF_UNIX, jf=1), refuse]
    else:
        body += [_op(_JEQ_K, numbers["socket"], jf=1), refuse]
    return Filter(b"".join([*head, *body, allow]))
